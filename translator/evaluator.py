"""Scoring a model: dev loss, and BLEU and chrF of its translations, in each way its run is
scored (`Direction.scored`: one way, or hi→en and en→hi for a model of both directions).

    evaluator = Evaluator(model, tokenizer, config, device, precision)
    record = evaluator.validate(dev_split, step)        # greedy, the first eval_sentences
    scores = evaluator.score_test(test_pairs, run_dir)  # the run's search, test_scores.json

Validation during training, the final test score and the `evaluate` command all score here,
through `translate` (the one decoding path) and `corpus_scores` (the one metrics function).
A record keeps the first way's scores under the plain names (dev_chrf, chrf, ...) and each
further way's in a section named after it ("en-hi": {...}).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from translator.batching import TokenBatchSampler
from translator.build import EncodedSplit
from translator.config import Config, SearchConfig
from translator.data import Pair
from translator.device import autocast
from translator.direction import Direction, scores_of, split_tag
from translator.encoded import held_out_pairs
from translator.errors import TranslatorError
from translator.lines import read_lines
from translator.metrics import corpus_scores
from translator.model import Transformer
from translator.recipe import token_loss
from translator.reporting import log
from translator.run_dir import RunDir
from translator.tokenizer import Tokenizer
from translator.translate import Translator, translate

DECODE_BATCH_SIZE = 64  # sentences per search batch for the dev and test scores


def direction_pairs(pairs: Sequence[Pair], target_language: str | None) -> list[Pair]:
    """The pairs whose source asks for ``target_language``, their sources without the tag
    (the language is asked for by name); all pairs as they are for None."""
    if target_language is None:
        return list(pairs)
    return [pair._replace(source=body) for pair in pairs
            for language, body in [split_tag(pair.source)] if language == target_language]


def direction_rows(pairs: Sequence[Pair], target_language: str | None) -> list[int]:
    """Indices of the pairs whose source is tagged for ``target_language`` (None: all)."""
    if target_language is None:
        return list(range(len(pairs)))
    return [i for i, pair in enumerate(pairs) if split_tag(pair.source)[0] == target_language]


def in_section(record: dict[str, Any], section: str | None, scores: dict[str, Any]) -> None:
    """Put ``scores`` into ``record``: under the plain names, or in ``section``."""
    if section is None:
        record.update(scores)
    else:
        record[section] = scores


def other_ways(record: dict[str, Any], direction: Direction, prefix: str = "dev_") -> str:
    """"  en→hi BLEU 3.1  chrF 20.4" for each further way a record holds (a model of both
    directions), else ""."""
    text = ""
    for section, _ in direction.scored()[1:]:
        scores = scores_of(record, section)
        if f"{prefix}chrf" in scores:
            text += (f"  {Direction(section).arrow.replace(' ', '')} BLEU "
                     f"{scores[f'{prefix}bleu']:.1f}  chrF {scores[f'{prefix}chrf']:.1f}")
    return text


class Evaluator:
    """A model with its tokenizer and run config, scored on sentence pairs."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, config: Config,
                 device: torch.device, precision: str = "fp32",
                 batch_size: int = DECODE_BATCH_SIZE) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.config = config
        self.direction = Direction(config.data.direction)
        self.device = device
        self.precision = precision
        self.batch_size = batch_size  # sentences per search batch

    def translate(self, texts: list[str], target_language: str | None = None,
                  search: SearchConfig | None = None) -> list[str]:
        """The model's translations of ``texts`` as ``search`` (None: the run's) says, in the
        run's precision, one best translation each."""
        search = dataclasses.replace(search or self.config.search, n_best=1)
        with autocast(self.device, self.precision):
            results = translate(self.model, self.tokenizer, texts, search,
                                batch_size=self.batch_size, need_attention=False,
                                target_language=target_language)
        return [result.text for result in results]

    def score(self, pairs: Sequence[Pair], target_language: str | None = None,
              search: SearchConfig | None = None) -> tuple[list[str], dict[str, Any]]:
        """(translations, BLEU and chrF with their signatures) of the pairs' sources against
        their targets."""
        return self.score_texts([p.source for p in pairs], [p.target for p in pairs],
                                target_language, search, metrics=("bleu", "chrf"))

    def score_texts(self, sources: list[str], references: list[str],
                    target_language: str | None = None, search: SearchConfig | None = None,
                    metrics: tuple[str, ...] = ("bleu", "chrf", "chrf++")
                    ) -> tuple[list[str], dict[str, Any]]:
        """(translations, ``metrics`` with their signatures) of ``sources`` against
        ``references`` (`translator.metrics.corpus_scores`)."""
        hypotheses = self.translate(sources, target_language, search)
        return hypotheses, corpus_scores(hypotheses, references, metrics=metrics)

    @torch.no_grad()
    def loss(self, split: EncodedSplit, rows: Sequence[int] | None = None,
             batch_tokens: int = 4096) -> float:
        """Cross-entropy per target token on ``split``, or on its pairs at ``rows`` (no label
        smoothing)."""
        self.model.eval()
        lengths = split.lengths()
        rows = np.arange(len(lengths)) if rows is None else np.asarray(rows, dtype=np.int64)
        sampler = TokenBatchSampler(lengths[rows], batch_tokens, seed=0, shuffle=False)
        total, tokens = 0.0, 0
        for indices in sampler:
            batch = split.batch(rows[indices].tolist(), self.tokenizer, self.device)
            with autocast(self.device, self.precision):
                logits = self.model(batch.source, batch.target_input)
            total += token_loss(logits, batch.target_output, self.tokenizer.pad_id, 0.0).item()
            tokens += batch.num_target_tokens
        return total / max(1, tokens)

    def validate(self, dev: EncodedSplit, step: int) -> dict[str, Any]:
        """Dev loss, perplexity, BLEU and chrF (greedy, on the first eval_sentences of each
        way); a few sample translations go to the log. A model of both directions is
        validated both ways, which costs twice a hi-en run's validation; its hi→en numbers
        are those a hi-en run computes on the same sentences."""
        cfg = self.config.train
        greedy = dataclasses.replace(self.config.search, beam_size=1, n_best=1)
        record: dict[str, Any] = {"kind": "validation", "step": step}
        for section, language in self.direction.scored():
            rows = direction_rows(dev.pairs, language)
            count = len(rows) if cfg.eval_sentences <= 0 else cfg.eval_sentences
            pairs = direction_pairs([dev.pairs[i] for i in rows[:count]], language)
            hypotheses, scores = self.score(pairs, language, greedy)
            loss = self.loss(dev, rows, cfg.batch_tokens)
            in_section(record, section, {
                "dev_loss": round(loss, 4),
                "dev_perplexity": round(math.exp(min(loss, 50.0)), 2),
                "dev_bleu": round(scores["bleu"], 2),
                "dev_chrf": round(scores["chrf"], 2),
                "dev_sentences": len(pairs),
            })
            for pair, hypothesis in list(zip(pairs, hypotheses))[: cfg.eval_samples]:
                log.info("  source:    %s\n  reference: %s\n  output:    %s", pair.source,
                         pair.target, hypothesis)
        return record

    def score_test(self, test_pairs: Sequence[Pair], run_dir: RunDir) -> dict[str, Any]:
        """Score the test split with the run's search; write test_scores.json and
        test_hypotheses.txt (a model of both directions: hi→en there and under the plain
        keys, en→hi in test_hypotheses_en_hi.txt and the "en-hi" section)."""
        search = self.config.search
        scores: dict[str, Any] = {"split": "test"}
        for section, language in self.direction.scored():
            pairs = direction_pairs(test_pairs, language)
            hypotheses, found = self.score(pairs, language)
            way = {"sentences": len(pairs)} | ({} if section else {"beam_size": search.beam_size})
            in_section(scores, section, way | {
                "bleu": round(found["bleu"], 2), "chrf": round(found["chrf"], 2),
                "bleu_signature": found["bleu_signature"],
                "chrf_signature": found["chrf_signature"]})
            path = (run_dir.test_hypotheses_en_hi_file if section
                    else run_dir.test_hypotheses_file)
            path.write_text("\n".join(hypotheses) + "\n", encoding="utf-8")
        run_dir.test_scores_file.write_text(json.dumps(scores, indent=2) + "\n")
        return scores


# ---------------------------------------------------------------- evaluate a run


def evaluation_set(translator: Translator, src: Path | None = None, ref: Path | None = None,
                   target_language: str | None = None) -> tuple[str, list[str], list[str]]:
    """(a name for the set, source lines, reference lines): ``src`` and ``ref``, or the run's
    test split (one direction's half for a model of both directions: hi→en unless
    ``target_language`` is "hi")."""
    if (src is None) != (ref is None):
        raise TranslatorError("give both --src and --ref, or neither to use the run's test split")
    if src is None:
        test = held_out_pairs(translator.config, "test")  # from the cache: train is not read
        if translator.direction.both:
            test = direction_pairs(test, target_language or "en")
        sources, references, name = [p.source for p in test], [p.target for p in test], "test"
    else:
        sources, references, name = read_lines(src), read_lines(ref), src.stem
        if len(sources) != len(references):
            raise TranslatorError(f"{src} has {len(sources)} lines but {ref} has "
                                  f"{len(references)}; they must be line-aligned")
    if not sources:
        raise TranslatorError("there are no sentences to evaluate (the source is empty)")
    return name, sources, references


def evaluate_run(translator: Translator, src: Path | None = None, ref: Path | None = None,
                 target_language: str | None = None, out: Path | None = None,
                 batch_size: int = DECODE_BATCH_SIZE) -> dict[str, Any]:
    """Translate `evaluation_set` with ``translator``'s search, write the hypotheses to ``out``
    (None: the run folder's file for the set and beam) and return what was measured: the
    number of sentences, the search settings, the hypotheses file, BLEU, chrF and chrF++
    with their signatures."""
    name, sources, references = evaluation_set(translator, src, ref, target_language)
    language = target_language or (
        "en" if translator.direction.both and src is None else None)
    evaluator = Evaluator(translator.model, translator.tokenizer, translator.config,
                          translator.device, batch_size=batch_size)
    hypotheses, scores = evaluator.score_texts(sources, references, language)
    search = translator.search
    out = out or translator.run_dir.hypotheses_file(name, search.beam_size)
    try:
        out.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    except OSError as error:
        raise TranslatorError(f"cannot write the hypotheses to {out}: {error.strerror}") from None
    return {"sentences": len(sources), "beam_size": search.beam_size,
            "no_repeat_ngram": search.no_repeat_ngram,
            "no_doubled_words": search.no_doubled_words,
            "length_penalty": search.length_penalty, "hypotheses": str(out), **scores}


def evaluation_report(result: dict[str, Any], as_json: bool = False) -> str:
    """`evaluate_run`'s result as `evaluate` prints it: one JSON line, or a line of what was
    scored and one line per metric with its signature."""
    if as_json:
        return json.dumps(result, ensure_ascii=False)
    lines = [f"{result['sentences']} sentences, beam {result['beam_size']}; hypotheses in "
             f"{result['hypotheses']}"]
    for metric, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("chrf++", "chrF++")):
        lines.append(f"{label:<7}{result[metric]:6.2f}  {result[metric + '_signature']}")
    return "\n".join(lines)
