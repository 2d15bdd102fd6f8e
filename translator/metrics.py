"""Corpus scores, computed in one place: sacrebleu's BLEU, chrF and chrF++ with their signatures.

Training (dev and test scores), `evaluate` and the benches all call `corpus_scores`, so a score
printed anywhere in the project is the same computation with the same sacrebleu settings
(its defaults: 13a tokenisation, exponential smoothing; chrF++ is chrF with word bigrams).
"""

from __future__ import annotations

from collections.abc import Sequence

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
