"""Which way a run translates: Hindi → English, English → Hindi, or both with one model.

    direction = Direction.parse(config.data.direction)   # "hi-en" | "en-hi" | "both"
    direction.source_language, direction.target_language  # "hi", "en" (None for both)
    for name, language in direction.scored():             # what validation and test score
        ...

A model of both directions (Johnson et al. 2017) is told which language to write by a tag
before the source: "<2en> मैं घर जा रहा हूँ" → English, "<2hi> ..." → Hindi (`TAGS`). Such a run
is scored both ways: hi→en under the plain metric names (so that it compares directly with a
hi-en run) and en→hi in a section of its own, keyed by the direction's name ("en-hi").
"""

from __future__ import annotations

from translator.errors import TranslatorError

NAMES = ("hi-en", "en-hi", "both")
TAGS = {"en": "<2en>", "hi": "<2hi>"}  # target language → the tag a source starts with
LANGUAGE_NAMES = {"hi": "Hindi", "en": "English"}


class Direction(str):
    """One of `NAMES`, knowing its languages, tags and how its scores are named. A string
    subclass, so that it is written to and read from configs as the plain name (and
    ``Direction("hi-en") == "hi-en"``)."""

    def __new__(cls, name: str) -> Direction:
        if name not in NAMES:
            raise TranslatorError(f"direction must be one of {', '.join(NAMES)}, not {name!r}")
        return super().__new__(cls, name)

    @classmethod
    def parse(cls, direction: str) -> Direction:
        return direction if isinstance(direction, Direction) else cls(direction)

    @property
    def name(self) -> str:
        return str.__str__(self)

    @property
    def both(self) -> bool:
        return self.name == "both"

    @property
    def source_language(self) -> str | None:
        """"hi" or "en"; None for both (the tag decides)."""
        return None if self.both else self.name[:2]

    @property
    def target_language(self) -> str | None:
        return None if self.both else self.name[3:]

    @property
    def tags(self) -> dict[str, str]:
        """Target language → tag, for a model of both directions; empty otherwise."""
        return dict(TAGS) if self.both else {}

    @property
    def arrow(self) -> str:
        """"hi → en"; "hi ⇄ en" for both."""
        return "hi ⇄ en" if self.both else self.name.replace("-", " → ")

    def reversed(self) -> Direction:
        """en-hi for hi-en and the other way; both stays both."""
        return self if self.both else Direction(f"{self.name[3:]}-{self.name[:2]}")

    def scored(self) -> list[tuple[str | None, str | None]]:
        """(section name, target language to ask for) of each way a run is scored: one,
        unnamed (None), for one direction; hi→en (None: the plain names) then en→hi
        ("en-hi") for both."""
        return [(None, "en"), ("en-hi", "hi")] if self.both else [(None, None)]

    def showcase(self) -> Direction:
        """The direction the showcase sentences are drawn in: the run's; hi-en for both (so
        that its heatmaps compare with a hi-en run's)."""
        return Direction("hi-en") if self.both else self

    def hindi_first(self, target_language: str | None = None) -> bool:
        """Whether a pair's source is Hindi (for both: when English is asked for)."""
        if self.both:
            return target_language == "en"
        return self.name == "hi-en"

    def of_translation(self, target_language: str | None) -> Direction:
        """The direction one translation went: the run's, or for both the one the target
        language asked for says."""
        if not self.both or target_language is None:
            return self
        return Direction("hi-en" if target_language == "en" else "en-hi")


def scores_of(record: dict, section: str | None) -> dict:
    """The scores of one way of a metrics record: the plain keys (``section`` None), the
    direction's section (``"en-hi"``), or, in records written before sections existed, the
    keys ending in ``_en_hi``."""
    if section is None:
        return record
    if isinstance(record.get(section), dict):
        return record[section]
    suffix = "_" + section.replace("-", "_")
    return {key[: -len(suffix)]: value for key, value in record.items() if key.endswith(suffix)}


def split_tag(text: str) -> tuple[str | None, str]:
    """(target language, text without it) of a text starting with a tag and a space, or
    (None, text) for any other text."""
    for language, tag in TAGS.items():
        if text.startswith(tag + " "):
            return language, text[len(tag) + 1:]
    return None, text


def tagged(text: str, target_language: str) -> str:
    """``text`` with the tag that asks for ``target_language`` ("en" or "hi") in front."""
    return f"{TAGS[target_language]} {text}"


def check_language(language: str | None) -> None:
    """Refuse an unknown --to before anything is loaded (argparse's choices would print a
    usage block as well as the error)."""
    if language is not None and language not in TAGS:
        raise TranslatorError(f"--to {language} is not a language this tool translates into; "
                              "use --to en (English) or --to hi (Hindi)")
