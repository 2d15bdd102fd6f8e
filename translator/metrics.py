"""Corpus scores, computed in one place: sacrebleu's BLEU, chrF and chrF++ with their signatures.

Training (dev and test scores), `evaluate` and the benches all call `corpus_scores`, so a score
printed anywhere in the project is the same computation with the same sacrebleu settings
(its defaults: 13a tokenisation, exponential smoothing; chrF++ is chrF with word bigrams).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import sacrebleu

METRICS = ("bleu", "chrf", "chrf++")


def _metric(name: str) -> sacrebleu.metrics.base.Metric:
    if name == "bleu":
        return sacrebleu.metrics.BLEU()
    if name == "chrf":
        return sacrebleu.metrics.CHRF()
    if name == "chrf++":
        return sacrebleu.metrics.CHRF(word_order=2)
    raise ValueError(f"unknown metric {name!r}; use one of {', '.join(METRICS)}")


def corpus_scores(hypotheses: Sequence[str], references: Sequence[str],
                  metrics: Sequence[str] = METRICS) -> dict[str, float | str]:
    """Corpus-level scores of ``hypotheses`` against one reference each: for every name in
    ``metrics``, ``scores[name]`` (0–100) and ``scores[name + "_signature"]``."""
    scores: dict[str, float | str] = {}
    for name in metrics:
        metric = _metric(name)
        scores[name] = metric.corpus_score(list(hypotheses), [list(references)]).score
        scores[f"{name}_signature"] = str(metric.get_signature())
    return scores


# ---------------------------------------------------------------- held-out checks of facts

_EDGE_PUNCTUATION = ".,;:!?'\"()[]“”‘’"


def _content_words(text: str) -> list[str]:
    """Words of 4+ letters, lower-cased, without edge punctuation or a possessive 's; a
    hyphenated compound counts as its parts ("Delhi-to-Mumbai … from Delhi" says Delhi twice)."""
    words = [w.strip(_EDGE_PUNCTUATION).lower().removesuffix("'s")
             for w in re.split(r"[\s\-–—]+", text)]
    return [w for w in words if len(w) >= 4]


def repeated_words(text: str, reference: str = "") -> list[str]:
    """Content words ``text`` says twice that ``reference`` (if given) does not."""
    words, allowed = _content_words(text), _content_words(reference)
    return sorted({w for w in words if words.count(w) > 1 and allowed.count(w) < 2})


def _first_position(text: str, spellings: Sequence[str]) -> int | None:
    found = [m.start() for s in spellings
             for m in [re.search(rf"(?<!\w){re.escape(s.lower())}", text)] if m]
    return min(found) if found else None


@dataclass(frozen=True)
class FactCheck:
    """What a translation of a held-out sentence kept: the facts it lacks (each named by its
    first spelling), the content words it repeats, and whether its route is in order (None:
    no route to check)."""

    missing: list[str]
    repeated: list[str]
    route_in_order: bool | None

    @property
    def whole(self) -> bool:
        """Every fact, no repeat, the route in order."""
        return not self.missing and not self.repeated and self.route_in_order is not False


def check_facts(text: str, facts: Sequence[Sequence[str]], reference: str = "",
                route: tuple[str, str] | None = None) -> FactCheck:
    """``facts``: each fact's accepted spellings, matched case-blind at a word start (so
    "book" matches "booked"); ``route``: (origin, destination) spellings, the origin's
    first mention before the destination's."""
    lowered = text.lower()
    missing = [fact[0] for fact in facts if _first_position(lowered, fact) is None]
    in_order = None
    if route is not None:
        origin, destination = (_first_position(lowered, [place]) for place in route)
        in_order = origin is not None and destination is not None and origin < destination
    return FactCheck(missing, repeated_words(text, reference), in_order)


def answer_key(text: str) -> str:
    """A short answer as it is compared: lower case, single spaces, no edge punctuation."""
    return " ".join(text.lower().split()).strip(_EDGE_PUNCTUATION + " ")


def first_try_right(text: str, accepted: Sequence[str]) -> bool:
    """Whether a short translation is one of the accepted answers (case and edge
    punctuation aside): no word doubled, none invented."""
    return answer_key(text) in {answer_key(a) for a in accepted}
