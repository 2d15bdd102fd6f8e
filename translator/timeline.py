"""Attention over training: how the showcase sentences' cross-attention learns to align.

At every validation the showcase sentences (`translator.corpus.SHOWCASE`, in the run's showcase
direction) and any pairs the config adds (``train.timeline``) are force-decoded on their
reference translations (`translator.alignment.teacher_forced_attentions`), and the word-level
cross-attention of every decoder layer and head is appended, in float16, to one file of the
run folder (`RunDir.timeline_file`, timeline.pt). Each matrix keeps the end-of-sentence
row and column (`every_head_to_words`), so a reader gets exactly the views the
explorer shows (EOS dropped, rows renormalised) and the share that went to EOS.

    timeline = Timeline(model, tokenizer, config, device, run_dir)
    figures = timeline.record(step)   # appends to timeline.pt; {"showcase_aer", "dev_aer"}
    sentences = read_timeline(run_dir.timeline_file)

Each validation also scores two alignments (AER, `alignment_error_rate`, of the hard links of
the run's supervised layer, its heads averaged): the showcase references against their
hand-written gold links (corpus/showcase.align, Hindi word first) and the first
`DEV_AER_PAIRS` pairs of the embedded corpus's dev split against its shipped links
(corpus/dev.align). A resumed run keeps the entries up to its checkpoint's step and goes on.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
from torch import Tensor

from translator import corpus
from translator.alignment import (
    WordAlignment,
    align_pairs,
    alignment_error_rate,
    every_head_to_words,
    fits,
    hard_links,
    supervised_layer,
    teacher_forced_attentions,
    word_alignment,
)
from translator.config import Config
from translator.direction import Direction
from translator.errors import TranslatorError
from translator.links import Link, read_pharaoh, swap, word_counts
from translator.model import Transformer
from translator.run_dir import RunDir
from translator.tokenizer import Tokenizer

GOLD_FILE = corpus.CORPUS_DIR / "showcase.align"  # the showcase pairs' links, Hindi first
DEV_AER_PAIRS = 200  # dev pairs whose forced alignment is scored at each validation
FORMAT = 1  # the file's layout; a file of another layout is refused by name


class TimelineError(TranslatorError):
    """A timeline file that cannot be read, or pairs that cannot be followed."""


@dataclass
class TimelineSentence:
    """One sentence pair followed through training: its words and, per validation step, the
    word-level cross-attention [layers, heads, target words + 1, source words + 1] in float16
    (last row: the step that predicts EOS; last column: the source EOS; each row sums to 1)."""

    source: str
    reference: str
    source_words: list[str]
    target_words: list[str]
    steps: list[int] = field(default_factory=list)
    weights: list[Tensor] = field(default_factory=list)

    def words(self, index: int, layer: int, heads: list[int] | None = None) -> WordAlignment:
        """Validation ``index``'s word matrix of ``layer`` (a non-negative index), ``heads``
        averaged (None: all), EOS dropped and rows renormalised, as the explorer shows it."""
        chosen = self.weights[index][layer].float()
        matrix = chosen.mean(0) if heads is None else chosen[heads].mean(0)
        rows = matrix[: len(self.target_words), : len(self.source_words)]
        rows = rows / rows.sum(1, keepdim=True).clamp_min(1e-9)
        return WordAlignment(self.source_words, self.target_words, rows)

    def eos_share(self, index: int, layer: int, heads: list[int] | None = None) -> Tensor:
        """Each target word's share of attention that went to the source EOS."""
        chosen = self.weights[index][layer].float()
        matrix = chosen.mean(0) if heads is None else chosen[heads].mean(0)
        return matrix[: len(self.target_words), -1]


# ---------------------------------------------------------------- the file


def read_timeline(path: str | os.PathLike) -> list[TimelineSentence]:
    """The sentences of a timeline file (none when there is no file)."""
    if not os.path.exists(path):
        return []
    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as error:  # a cut file, or not a timeline at all
        raise TimelineError(f"cannot read the attention timeline {path} ({error}); delete it "
                            "to start the timeline afresh") from None
    if not isinstance(saved, dict) or saved.get("format") != FORMAT:
        raise TimelineError(f"{path} is not an attention timeline of format {FORMAT}; delete "
                            "it to start the timeline afresh")
    return [TimelineSentence(s["source"], s["reference"], s["source_words"],
                             s["target_words"], list(s["steps"]), list(s["weights"].unbind(0)))
            for s in saved["sentences"]]


def write_timeline(path: str | os.PathLike, sentences: Sequence[TimelineSentence]) -> None:
    """Write ``sentences`` to ``path`` atomically (the old file or the whole new one); each
    sentence's matrices go as one float16 tensor [validations, layers, heads, T+1, S+1]."""
    saved = {"format": FORMAT, "sentences": [
        {"source": s.source, "reference": s.reference, "source_words": s.source_words,
         "target_words": s.target_words, "steps": s.steps,
         "weights": torch.stack(s.weights).half()} for s in sentences if s.steps]}
    temporary = f"{os.fspath(path)}.{os.getpid()}.tmp"
    torch.save(saved, temporary)
    os.replace(temporary, path)


def until(sentences: Sequence[TimelineSentence], step: int) -> list[TimelineSentence]:
    """The entries up to ``step`` (a resumed run's checkpoint): those of later validations,
    written before the run stopped but after its last checkpoint, are dropped."""
    for sentence in sentences:
        kept = [k for k, s in enumerate(sentence.steps) if s <= step]
        sentence.steps = [sentence.steps[k] for k in kept]
        sentence.weights = [sentence.weights[k] for k in kept]
    return list(sentences)


# ---------------------------------------------------------------- which pairs


def timeline_pairs(config: Config) -> list[tuple[str, str]]:
    """(source, reference) of each followed pair: the showcase sentences in the run's showcase
    direction, then the config's ``train.timeline`` pairs (a list of [source, reference])."""
    hindi_first = Direction(config.data.direction).showcase() == "hi-en"
    pairs = [(hindi, english) if hindi_first else (english, hindi)
             for hindi, english in corpus.SHOWCASE]
    extra = config.train.timeline if isinstance(config.train.timeline, list) else []
    return pairs + [(source, reference) for source, reference in extra]


def showcase_gold(config: Config) -> list[list[Link]]:
    """The showcase pairs' gold links (corpus/showcase.align), source word first."""
    hindi = [h for h, _ in corpus.SHOWCASE]
    english = [e for _, e in corpus.SHOWCASE]
    links = read_pharaoh(GOLD_FILE, word_counts(hindi), word_counts(english))
    hindi_first = Direction(config.data.direction).showcase() == "hi-en"
    return links if hindi_first else [swap(line) for line in links]


def dev_pairs_and_gold(config: Config) -> tuple[list[tuple[str, str]], list[list[Link]]]:
    """The first `DEV_AER_PAIRS` pairs of the embedded dev split and their shipped links, in
    the run's showcase direction (source word first); none for a run on other data."""
    if config.data.source != "embedded":
        return [], []
    rows = corpus.read_split("dev")[:DEV_AER_PAIRS]
    links = corpus.read_split_links("dev")[:DEV_AER_PAIRS]
    if Direction(config.data.direction).showcase() == "hi-en":
        return [(h, e) for h, e, _ in rows], links
    return [(e, h) for h, e, _ in rows], [swap(line) for line in links]


# ---------------------------------------------------------------- recording


class Timeline:
    """Follows a run's pairs through training: `record` at each validation."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, config: Config,
                 device: torch.device, run_dir: RunDir, resumed_step: int | None = None
                 ) -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, device
        self.path = run_dir.timeline_file
        self.pairs = timeline_pairs(config)
        self.gold = showcase_gold(config)
        self.dev_pairs, self.dev_gold = dev_pairs_and_gold(config)
        self.layer = supervised_layer(config)
        self.full_context = config.train.alignment_full_context
        direction = Direction(config.data.direction)
        self.language = "en" if direction.both else None  # hi→en, as the showcase is drawn
        self.sentences = (until(read_timeline(self.path), resumed_step)
                          if resumed_step is not None else [])
        self._keep_what_fits()

    def _keep_what_fits(self) -> None:
        """Leave out the pairs a small model cannot read whole (more pieces than its
        positions), with their gold links: a smoke model of 32 positions, say."""
        def fit(pairs):
            return [fits(self.model, self.tokenizer, s, r, self.language) for s, r in pairs]
        kept = fit(self.pairs)
        self.gold = [g for g, k in zip(self.gold, kept) if k]
        self.pairs = [p for p, k in zip(self.pairs, kept) if k]
        self.showcase_count = sum(kept[: len(corpus.SHOWCASE)])
        kept = fit(self.dev_pairs)
        self.dev_gold = [g for g, k in zip(self.dev_gold, kept) if k]
        self.dev_pairs = [p for p, k in zip(self.dev_pairs, kept) if k]

    def forced(self) -> list[tuple[WordAlignment, list[Link]]]:
        """Each followed pair's word-level attention (weights [layers, heads, T+1, S+1], EOS
        kept) and its hard links (`align_pairs`'s reading: the supervised layer)."""
        attentions = teacher_forced_attentions(
            self.model, self.tokenizer, self.pairs, self.device, target_language=self.language,
            full_context=self.full_context)
        results = []
        for attention, source_pieces, target_pieces in attentions:
            words = every_head_to_words(attention, source_pieces, target_pieces)
            view = word_alignment(attention, source_pieces, target_pieces, self.layer)
            results.append((words, hard_links(view.weights)))
        return results

    def sentence(self, source: str, reference: str, words: WordAlignment) -> TimelineSentence:
        """The followed sentence of this pair, new if the file has not had it yet."""
        for sentence in self.sentences:
            if (sentence.source, sentence.reference) == (source, reference):
                return sentence
        sentence = TimelineSentence(source, reference, words.source_words, words.target_words)
        self.sentences.append(sentence)
        return sentence

    def record(self, step: int) -> dict[str, float]:
        """Force-decode the pairs with the model as it is at ``step``, append their attention
        to the file, and return the validation's alignment figures: ``showcase_aer``,
        ``dev_aer`` (embedded data only) and ``timeline_seconds`` (what this cost)."""
        start = time.perf_counter()
        showcase_links = []
        for (source, reference), (words, links) in zip(self.pairs, self.forced()):
            sentence = self.sentence(source, reference, words)
            if sentence.steps and sentence.steps[-1] == step:  # validated twice at one step
                sentence.steps.pop(), sentence.weights.pop()
            sentence.steps.append(step)
            sentence.weights.append(words.weights.half())
            showcase_links.append(links)
        write_timeline(self.path, self.sentences)
        figures = {}
        if self.gold:
            figures["showcase_aer"] = round(alignment_error_rate(
                showcase_links[: self.showcase_count], self.gold), 4)
        if self.dev_pairs:
            dev_links = align_pairs(self.model, self.tokenizer, self.dev_pairs, self.layer,
                                    device=self.device, target_language=self.language,
                                    full_context=self.full_context)
            figures["dev_aer"] = round(alignment_error_rate(dev_links, self.dev_gold), 4)
        figures["timeline_seconds"] = round(time.perf_counter() - start, 3)
        return figures
