"""Translating text, in one place: `translate` and the `Translator` that loads a run for it.

    translator = Translator.from_run("runs/latest")
    for result in translator.translate(["राजेश ने कल शाम को ट्रेन टिकट बुक की"]):
        print(result.text, result.score)

`translate` is the one decoding path of the package: validation and test scores during
training, the `translate` and `evaluate` commands, the heatmaps and the Python API all call it
(`align` translates nothing: it reads the attention of given pairs by teacher forcing,
`translator.alignment`). It encodes the texts, splits any longer than the model can read, searches
them (greedy or beam, batched by length) and turns the hypotheses back into text. Each
`Translation` carries the tokens, the score, the subword pieces of both sides and, when asked
for, the cross-attention of the output that was chosen (every layer and head), ready for
`translator.alignment` and `translator.plotting`. Asked for (``search.alternatives``), it also
carries what the model weighed: each piece's log-probability and its step's most probable
pieces, per piece and per word (`Translation.steps`, `Translation.words`). A ``prefix`` (text
in the target language) is written first, scored by the model, and the search continues it.

How to search is one object, the run's `SearchConfig` (search: in its config): beam size,
n-best, length penalty, repetition bans and length limit travel together from the config (or
a command's flags) through `Translator` and `translate` to `translator.search`.

A model of both directions (data.direction=both; its tokenizer knows the tags of
`direction.TAGS`)
is told which language to write by a tag before the source pieces, put there by `translate`
alone: the language asked for (``target_language``, ``--to``), else a tag the text starts
with, else the one the script suggests (mostly Devanagari: English; otherwise Hindi). The tag
is no word of the source, so it is left out of ``source_pieces`` and of the attention.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from translator.checkpoint import load_checkpoint
from translator.config import Config, ModelConfig, SearchConfig, load_config
from translator.data import normalize
from translator.decoders import (
    AttentionLayout,
    CT2Decoder,
    CT2Error,
    Decoder,
    TorchDecoder,
    require_ctranslate2,
)
from translator.device import resolve_device
from translator.direction import LANGUAGE_NAMES, TAGS, Direction, split_tag
from translator.errors import TranslatorError
from translator.exports import is_export, read_export_record
from translator.model import Transformer
from translator.run_dir import RunDir
from translator.search import Hypothesis
from translator.tokenizer import Tokenizer, capitalized, piece_words

DEVANAGARI = re.compile(r"[\u0900-\u097F]")
# the most cells (layers x heads x target rows x source columns) the attention of one input
# split into parts may take: 2^26 floats, 256 MB; a longer input is translated without it
MAX_ATTENTION_CELLS = 2**26
SENTENCE_END = re.compile(r"(?<=[।॥.!?])\s+")
EOS_PIECE = "</s>"  # how the EOS step is named among the pieces of `Translation.steps`


class TranslateError(TranslatorError):
    """A run folder, checkpoint or request the Translator cannot use; the message says why."""


@dataclass
class Translation:
    source: str  # the input as given
    text: str  # the translation ("" for an empty input)
    tokens: list[int]  # target ids, without BOS and EOS
    # greedy: the sum of token log-probabilities; beam: that sum / the GNMT length penalty;
    # an input split into parts: the sum of the parts' scores
    score: float
    # pieces of the source ids fed to the model, without the EOS (and without the tag of a
    # model of both directions)
    source_pieces: list[str]
    target_pieces: list[str]  # pieces of ``tokens``
    # [layers, heads, len(target_pieces) + 1, len(source_pieces) + 1]: the last row is the
    # EOS step, the last column the source EOS; None when not asked for (or empty input).
    # A tag's column is left out, so there a row sums to 1 minus the weight the tag drew.
    attention: Tensor | None = field(default=None, repr=False, compare=False)
    # the n-best list, best first (nbest[0] has this translation's content, with an empty
    # nbest of its own); empty when only one translation was asked for
    nbest: list[Translation] = field(default_factory=list, repr=False, compare=False)
    warnings: list[str] = field(default_factory=list)  # what went wrong with the input
    # the language a model of both directions was told to write ("en" or "hi"); None for a
    # model of one direction
    target_language: str | None = None
    # what ``attention`` holds (`AttentionLayout`: which layers, every head or their mean, the
    # engine); None without attention
    layout: AttentionLayout | None = field(default=None, repr=False, compare=False)
    # asked for (search.alternatives > 0): each target piece's log-probability, the EOS's
    # last, and each of those steps' most probable pieces (piece, probability), best first
    token_log_probs: list[float] | None = field(default=None, repr=False, compare=False)
    alternatives: list[list[tuple[str, float]]] | None = field(default=None, repr=False,
                                                               compare=False)
    prefix_pieces: int = 0  # how many of target_pieces a forced prefix wrote

    def to_dict(self) -> dict[str, Any]:
        """The JSON-friendly part (no attention): source, text, score, tokens, warnings,
        the target language of a model of both directions and, when there is one, the n-best
        list, the forced prefix's length and what the model weighed (`steps`, `words`)."""
        record: dict[str, Any] = {"source": self.source, "text": self.text, "score": self.score,
                                  "tokens": self.tokens, "warnings": self.warnings}
        if self.target_language is not None:
            record["target_language"] = self.target_language
        if self.nbest:
            record["nbest"] = [{"text": t.text, "score": t.score, "tokens": t.tokens}
                               for t in self.nbest]
        if self.prefix_pieces:
            record["prefix_pieces"] = self.prefix_pieces
        if self.token_log_probs is not None:
            record["steps"], record["words"] = self.steps(), self.words()
        return record

    def steps(self) -> list[dict[str, Any]]:
        """Per target piece, then the EOS ("</s>"): its log-probability and its step's
        alternatives as [piece, probability] pairs; empty when not asked for."""
        if self.token_log_probs is None or self.alternatives is None:
            return []
        pieces = [*self.target_pieces, EOS_PIECE]
        return [{"piece": piece, "log_prob": round(log_prob, 6),
                 "alternatives": [[p, round(prob, 6)] for p, prob in alternatives]}
                for piece, log_prob, alternatives in zip(pieces, self.token_log_probs,
                                                         self.alternatives)]

    def words(self) -> list[dict[str, Any]]:
        """Per whitespace word of the output (`piece_words`, as the heatmaps' rows): the word,
        its log-probability (its pieces' sum) and the alternatives of its first piece's step,
        the step that chose the word; empty when not asked for."""
        steps = self.steps()
        if not steps:
            return []
        words, word_of_piece = piece_words(self.target_pieces)
        records = [{"word": word, "log_prob": 0.0, "alternatives": []} for word in words]
        for step, word in zip(steps, word_of_piece):
            if not records[word]["alternatives"]:
                records[word]["alternatives"] = step["alternatives"]
            records[word]["log_prob"] = round(records[word]["log_prob"] + step["log_prob"], 6)
        return records

    def line(self, as_json: bool = False) -> str:
        """The translation as `translate` prints it: the text (the n-best list's texts
        separated by tabs), or `to_dict` as one JSON line."""
        if as_json:
            return json.dumps(self.to_dict(), ensure_ascii=False)
        if self.nbest:
            return "\t".join(t.text for t in self.nbest)
        return self.text


# ---------------------------------------------------------------- loading a run


def _model_config(state: dict[str, Any], path: Path) -> ModelConfig:
    settings = state["config"].get("model") if isinstance(state["config"], dict) else None
    try:
        return ModelConfig(**settings)
    except (TypeError, ValueError):
        raise TranslateError(f"checkpoint {path} holds a model config this version of "
                             "translator cannot read; use the version that trained it") from None


def _check_tokenizer(state: dict[str, Any], tokenizer: Tokenizer, config: ModelConfig,
                     path: Path, run_dir: RunDir) -> None:
    fingerprint = state.get("tokenizer")
    sizes = (config.source_vocab_size, config.target_vocab_size)
    if (fingerprint is not None and fingerprint != tokenizer.fingerprint()) or sizes != (
            tokenizer.source_vocab_size, tokenizer.target_vocab_size):
        raise TranslateError(f"checkpoint {path} was trained with another tokenizer than the one "
                             f"in {run_dir.tokenizer_dir}; use the run folder it came from")


# ---------------------------------------------------------------- input checks


def devanagari_share(text: str) -> float | None:
    """The share of the letters of ``text`` that are Devanagari; None without letters."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    return sum(bool(DEVANAGARI.match(c)) for c in letters) / len(letters)


def language_from_script(text: str) -> str:
    """The language a model of both directions writes when not told: English for text that
    is mostly Devanagari, Hindi for anything else."""
    share = devanagari_share(text)
    return "en" if share is not None and share >= 0.5 else "hi"


def script_warning(text: str, direction: str, target_language: str | None = None
                   ) -> str | None:
    """A warning when most letters are in the other language's script (a best-effort
    translation follows anyway); Latin words inside Hindi text (UPI, OTP) are normal. For a
    model of both directions ("both") the ``target_language`` asked for decides which script
    the input should be in; None (the language follows the script) never warns."""
    devanagari = devanagari_share(text)
    if devanagari is None:
        return None
    if Direction(direction).both:
        if target_language is None:
            return None
        source = "Hindi" if target_language == "en" else "English"
        asked = (f"{LANGUAGE_NAMES[target_language]} was asked for, which this model "
                 f"translates from {source}; it was translated anyway, expect a poor result")
        if target_language == "en" and devanagari < 0.5:
            return f"the input is not in Devanagari, but {asked}"
        if target_language == "hi" and devanagari >= 0.5:
            return f"the input is in Devanagari, but {asked}"
        return None
    if direction == "hi-en" and devanagari < 0.5:
        return ("the input is not in Devanagari, but this model translates Hindi to English; "
                "it was translated anyway, expect a poor result")
    if direction == "en-hi" and devanagari >= 0.5:
        return ("the input is in Devanagari, but this model translates English to Hindi; it "
                "was translated anyway, expect a poor result")
    return None


def split_source(text: str, tokenizer: Tokenizer, limit: int) -> list[list[int]]:
    """Source ids in parts of at most ``limit`` pieces: whole sentences where they fit,
    a sentence too long on its own cut before a word start."""
    parts: list[list[int]] = [[]]
    for sentence in SENTENCE_END.split(normalize(text)):
        for window in _windows(tokenizer.encode_source(sentence), tokenizer, limit):
            if parts[-1] and len(parts[-1]) + len(window) > limit:
                parts.append([])
            parts[-1].extend(window)
    return [part for part in parts if part]


def _windows(ids: list[int], tokenizer: Tokenizer, limit: int) -> list[list[int]]:
    windows = []
    while len(ids) > limit:
        pieces = tokenizer.source_pieces(ids[1 : limit + 1])
        word_starts = [i + 1 for i, piece in enumerate(pieces) if piece.startswith("▁")]
        cut = word_starts[-1] if word_starts else limit
        windows.append(ids[:cut])
        ids = ids[cut:]
    return windows + [ids]


def merge_parts(source: str, parts: list[Translation], warnings: list[str]) -> Translation:
    """One Translation from the translations of a long input's parts: texts joined, scores
    summed, attention laid out block by block (each part's rows over its own source columns,
    its source-EOS weight in the one EOS column; only the last part keeps its EOS row)."""
    attention = None
    rows = sum(len(p.target_pieces) for p in parts) + 1
    columns = sum(len(p.source_pieces) for p in parts) + 1
    first = parts[0].attention
    if first is not None and first.shape[0] * first.shape[1] * rows * columns > (
            MAX_ATTENTION_CELLS):
        warnings = [*warnings, f"the input is too long to keep its attention ({rows} x "
                    f"{columns} pieces); it was translated without it"]
    elif all(part.attention is not None for part in parts):
        attention = first.new_zeros(*first.shape[:2], rows, columns)
        row = column = 0
        for part in parts:
            t, s = len(part.target_pieces), len(part.source_pieces)
            kept_rows = t + 1 if part is parts[-1] else t  # with or without the EOS row
            part_rows = slice(row, row + kept_rows)
            attention[:, :, part_rows, column : column + s] = part.attention[:, :, :kept_rows, :s]
            attention[:, :, part_rows, -1] = part.attention[:, :, :kept_rows, -1]
            row, column = row + t, column + s
    merged = Translation(
        source=source,
        text=" ".join(part.text for part in parts if part.text),
        tokens=[token for part in parts for token in part.tokens],
        score=sum(part.score for part in parts),
        source_pieces=[piece for part in parts for piece in part.source_pieces],
        target_pieces=[piece for part in parts for piece in part.target_pieces],
        attention=attention,
        warnings=warnings,
        target_language=parts[0].target_language,
        layout=parts[0].layout if attention is not None else None,
        prefix_pieces=parts[0].prefix_pieces,
    )
    if all(part.token_log_probs is not None for part in parts):  # each part's EOS but the last
        for name in ("token_log_probs", "alternatives"):
            steps = [step for part in parts for step in getattr(part, name)[: len(part.tokens)]]
            setattr(merged, name, steps + getattr(parts[-1], name)[-1:])
    if parts[0].nbest:  # only the best translations of the parts can be joined
        merged.nbest = [dataclasses.replace(merged, nbest=[])]
    return merged


# ---------------------------------------------------------------- the one decoding path


def check_target_language(target_language: str | None, tokenizer: Tokenizer,
                          direction: str | None) -> None:
    """Refuse a ``target_language`` that is no language of this tool, or that a model of one
    ``direction`` (None: not checked) does not write."""
    direction = Direction(direction) if direction is not None else None
    if direction is not None and direction.both and not tokenizer.tags:
        raise TranslateError("the run was trained with data.direction=both but its tokenizer "
                             "has no language tags; use the run folder it came from")
    if target_language is None:
        return
    if target_language not in TAGS:
        raise TranslateError(f"unknown target language {target_language!r}; use en (English) "
                             "or hi (Hindi)")
    if tokenizer.tags or direction is None or direction.endswith(target_language):
        return
    source = LANGUAGE_NAMES[direction.source_language]
    target = LANGUAGE_NAMES[direction.target_language]
    raise TranslateError(f"this model translates {source} to {target} only, so it cannot "
                         f"translate into {LANGUAGE_NAMES[target_language]}; use a model trained "
                         f"with data.direction=both or {direction.reversed()}")


def target_and_body(text: str, tokenizer: Tokenizer, target_language: str | None
                    ) -> tuple[str | None, str, bool]:
    """(the language the model is to write, the text without a tag, whether the language was
    asked for) for a model of both directions: ``target_language``, else the tag the text
    starts with, else the script's. (None, text, False) for a model of one direction."""
    if not tokenizer.tags:
        return None, text, False
    tag_language, body = split_tag(normalize(text))
    language = target_language or tag_language
    if language is not None:
        return language, body, True
    return language_from_script(body), body, False


def max_source_pieces(decoder: Decoder | Transformer, tokenizer: Tokenizer) -> int:
    """The longest source ``decoder`` (or a model) reads in one part, in pieces: its EOS takes
    one position, and so does the tag of a model of both directions."""
    positions = (decoder.config.max_positions if isinstance(decoder, Transformer)
                 else decoder.max_positions)
    return positions - 1 - bool(tokenizer.tags)


def translate(model: Transformer, tokenizer: Tokenizer, texts: list[str],
              search: SearchConfig | None = None, direction: str | None = None,
              batch_size: int = 32, need_attention: bool = True,
              target_language: str | None = None, full_context_attention: bool = False,
              prefix: str | list[str] | None = None) -> list[Translation]:
    """`decode_texts` with ``model`` searched by `translator.search` (`TorchDecoder`);
    ``full_context_attention`` returns, instead of the attention of the search, that of a pass
    over the finished translation without the causal mask (`Transformer.forced_attention`):
    the view a run trained with ``train.alignment_full_context`` aligns in."""
    return decode_texts(TorchDecoder(model, tokenizer, full_context_attention), tokenizer,
                        texts, search, direction, batch_size, need_attention, target_language,
                        prefix)


def decode_texts(decoder: Decoder, tokenizer: Tokenizer, texts: list[str],
                 search: SearchConfig | None = None, direction: str | None = None,
                 batch_size: int = 32, need_attention: bool = True,
                 target_language: str | None = None, prefix: str | list[str] | None = None
                 ) -> list[Translation]:
    """Translate ``texts`` with ``decoder`` (one Translation each, in order), searching as
    ``search`` says (None: `SearchConfig`'s defaults): beam size 1 is greedy search, n-best > 1
    fills each result's ``nbest``, its bans and length penalty as in `translator.search`.
    Sentences are decoded in batches of ``batch_size`` of similar length. An empty text gives
    an empty Translation; text longer than the model can read is split into parts translated
    one by one, and text in the wrong script for ``direction`` ("hi-en", "en-hi" or "both";
    None: not checked) is translated anyway; both get a warning. A model of both directions
    writes ``target_language`` (else the language a leading tag or the script suggests).
    ``prefix`` (target-language text: one for every text, or one per text) starts each
    translation: its pieces are written first, scored by the model, and the search continues
    (an input split into parts: its first part); "" changes nothing."""
    if isinstance(texts, str):
        raise TypeError("translate() takes a list of strings, not one string")
    search = search or SearchConfig()
    check_target_language(target_language, tokenizer, direction)
    limit = max_source_pieces(decoder, tokenizer)
    requests: list[tuple[int, list[int]]] = []  # (text index, source ids of one part)
    forced = prefix_ids(prefix, len(texts), tokenizer, decoder.max_positions)
    prefixes: list[list[int]] = []  # the forced target ids of each part: its text's first
    warnings: list[list[str]] = [[] for _ in texts]
    languages: list[str | None] = []
    for i, text in enumerate(texts):
        language, body, asked = target_and_body(text, tokenizer, target_language)
        parts, warnings[i] = _source_parts(body, tokenizer, limit, direction,
                                           language if asked else None)
        tag = tokenizer.tag_ids(language)
        requests += [(i, tag + part) for part in parts]
        prefixes += [forced[i] if n == 0 else [] for n in range(len(parts))]
        languages.append(language)
    hypotheses = decoder.decode([ids for _, ids in requests], search, batch_size,
                                need_attention, prefixes if any(prefixes) else None)
    layout = decoder.layout if need_attention else None
    parts_of: list[list[Translation]] = [[] for _ in texts]
    for (i, ids), nbest, part_prefix in zip(requests, hypotheses, prefixes):
        parts_of[i].append(_translation(texts[i], ids, nbest, search.n_best, warnings[i],
                                        tokenizer, languages[i], layout, len(part_prefix)))
    return assemble(texts, parts_of, warnings, languages, search.n_best)


def prefix_ids(prefix: str | list[str] | None, count: int, tokenizer: Tokenizer,
               max_positions: int) -> list[list[int]]:
    """The target ids each of ``count`` texts must start with: ``prefix`` for all, or one per
    text; a prefix that leaves no room in the model's positions is one sentence."""
    if prefix is None:
        return [[] for _ in range(count)]
    if isinstance(prefix, str):
        prefix = [prefix] * count
    if len(prefix) != count:
        raise TranslateError(f"{len(prefix)} prefixes for {count} texts; give one prefix, or "
                             "one per text")
    forced = [tokenizer.encode_target(text) for text in prefix]
    longest = max((len(ids) for ids in forced), default=0)
    if longest >= max_positions:
        raise TranslateError(f"the prefix has {longest} pieces, more than the model can write "
                             f"before its end ({max_positions - 1})")
    return forced


def assemble(texts: list[str], parts_of: list[list[Translation]], warnings: list[list[str]],
             languages: list[str | None], n_best: int) -> list[Translation]:
    """One Translation per text from the translations of its parts: an empty one for an
    empty input (the n-best list's only one), the part itself, or the parts merged."""
    results = []
    for text, parts, text_warnings, language in zip(texts, parts_of, warnings, languages):
        if not parts:
            empty = Translation(text, "", [], 0.0, [], [], warnings=text_warnings,
                                target_language=language)
            empty.nbest = [dataclasses.replace(empty)] if n_best > 1 else []
            results.append(empty)
        elif len(parts) == 1:
            results.append(parts[0])
        else:
            results.append(merge_parts(text, parts, text_warnings))
    return results


def _source_parts(text: str, tokenizer: Tokenizer, limit: int, direction: str | None,
                  target_language: str | None) -> tuple[list[list[int]], list[str]]:
    """The source ids of ``text`` in parts of at most ``limit`` pieces (none for an empty
    text), and the warnings about it (``target_language``: the one asked for, if any)."""
    ids = tokenizer.encode_source(text)
    if not ids:
        return [], []
    warnings = []
    warning = script_warning(text, direction, target_language) if direction else None
    if warning:
        warnings.append(warning)
    if len(ids) <= limit:
        return [ids], warnings
    parts = split_source(text, tokenizer, limit)
    warnings.append(f"the input has {len(ids)} pieces, more than the model's limit of {limit}; "
                    f"it was split into {len(parts)} parts, translated one by one")
    return parts, warnings


def _translation(source: str, ids: list[int], nbest: list[Hypothesis], n_best: int,
                 warnings: list[str], tokenizer: Tokenizer, target_language: str | None,
                 layout: AttentionLayout | None, prefix_pieces: int = 0) -> Translation:
    # a tag (the first id, when there is a target language) is no source word: its piece and
    # its attention column are left out of what is returned for reading and drawing
    skip = int(target_language is not None)
    translations = []
    for hypothesis in nbest:
        attention = hypothesis.cross_attention
        translations.append(Translation(
            source=source,
            text=tokenizer.decode_target(hypothesis.tokens),
            tokens=hypothesis.tokens,
            score=hypothesis.score,
            source_pieces=tokenizer.source_pieces(ids[skip:]),
            target_pieces=tokenizer.shown_target_pieces(hypothesis.tokens),
            attention=attention[:, :, :, skip : len(ids) + 1] if attention is not None
            else None,
            warnings=warnings,
            target_language=target_language,
            layout=layout if attention is not None else None,
            prefix_pieces=prefix_pieces,
            **_weighed(hypothesis, tokenizer),
        ))
    best = dataclasses.replace(translations[0])
    best.nbest = translations if n_best > 1 else []
    return best


def _weighed(hypothesis: Hypothesis, tokenizer: Tokenizer) -> dict[str, Any]:
    """The `Translation` fields of what ``hypothesis`` weighed, its ids turned into pieces."""
    if hypothesis.alternatives is None:
        return {}
    # the step whose written piece is shown with a capital shows its alternatives so too
    capital = tokenizer.capital_piece(tokenizer.target_pieces(hypothesis.tokens))
    alternatives = []
    for k, step in enumerate(hypothesis.alternatives):
        pieces = tokenizer.target_pieces([i for i, _ in step])
        if k == capital:
            pieces = [capitalized(piece) for piece in pieces]
        alternatives.append(list(zip(pieces, [p for _, p in step])))
    return {"token_log_probs": hypothesis.token_log_probs, "alternatives": alternatives}


def changed_search(search: SearchConfig, changes: dict[str, Any]) -> SearchConfig:
    """``search`` with ``changes`` (any `SearchConfig` key: ``beam_size=1``,
    ``length_penalty=2.2``, ...); an unknown key or a value that does not fit is one sentence."""
    unknown = set(changes) - {f.name for f in dataclasses.fields(SearchConfig)}
    if unknown:
        raise TranslateError(f"unknown search setting {sorted(unknown)[0]!r}; the settings "
                             f"are those of SearchConfig")
    try:
        return dataclasses.replace(search, **changes)
    except ValueError as error:
        raise TranslateError(f"search: {error}") from None


# ---------------------------------------------------------------- the Translator


BACKENDS = ("torch", "ct2")  # what `Translator.load` loads: a run folder, a CTranslate2 export


class Translator:
    """A model, its tokenizer and its config, ready to translate lists of sentences as the
    run's search: section says (`set_search` changes it). The text handling is this class's
    (`decode_texts`); what decodes is its `decoder`: the run's PyTorch model (`from_run`, or
    a `Transformer` given), or a CTranslate2 export (`from_export`). ``model`` is the PyTorch
    model, None for an export."""

    def __init__(self, model: Transformer | None, tokenizer: Tokenizer, config: Config,
                 device: str | torch.device = "cpu", decoder: Decoder | None = None) -> None:
        self.model = model.eval() if model is not None else None
        self.tokenizer = tokenizer
        self.config = config
        self.direction = Direction(config.data.direction)
        self.run_dir: RunDir | Path | None = None  # set by from_run and from_export
        self._decoder = decoder
        self.backend = decoder.name if decoder is not None else TorchDecoder.name
        self.device = torch.device("cpu") if decoder is None else decoder.device
        if model is not None:
            self.to(device)

    @classmethod
    def from_run(cls, run_dir: str | Path | RunDir | None = None, checkpoint: str = "best",
                 device: str = "auto") -> Translator:
        """Load a run folder written by training (None: the newest run under runs/) with its
        ``checkpoint`` ("best", which falls back to "last"; "last"; "step-N"; a .pt file)."""
        run = RunDir.find(run_dir)
        config = run.read_config()
        tokenizer = Tokenizer.load(run.tokenizer_dir)
        path = run.find_checkpoint(checkpoint)
        state = load_checkpoint(path)
        config.model = _model_config(state, path)  # the weights' own shape decides
        _check_tokenizer(state, tokenizer, config.model, path, run)
        model = Transformer(config.model)
        try:
            model.load_state_dict(state["model"])
        except RuntimeError:
            raise TranslateError(f"checkpoint {path} does not fit the model its config "
                                 "describes; it is damaged or from another version") from None
        translator = cls(model, tokenizer, config, resolve_device(device))
        translator.run_dir = run
        return translator

    @classmethod
    def from_export(cls, path: str | Path | None, device: str = "auto", threads: int = 0
                    ) -> Translator:
        """Load a CTranslate2 export (`translator.ct2.export`) to decode with CTranslate2 on
        ``threads`` CPU threads (0: its own choice)."""
        if path is None:
            raise CT2Error("--backend ct2 needs --run EXPORT, a folder written by "
                           "python -m translator export-ct2")
        require_ctranslate2()
        path = Path(path)
        if not is_export(path):
            hint = (f"; make one with python -m translator export-ct2 {path} OUT and pass "
                    "--run OUT" if (path / "config.yaml").is_file() else "")
            raise CT2Error(f"{path} is not a CTranslate2 export (no export.json in it){hint}")
        if threads < 0:
            raise CT2Error(f"--threads must be 0 (CTranslate2's choice) or more, not {threads}")
        record = read_export_record(path)
        config = load_config(path / "config.yaml")
        tokenizer = Tokenizer.load(path / "tokenizer")
        decoder = CT2Decoder(path, tokenizer, config.model, int(record["alignment_layer"]),
                             device, threads)
        translator = cls(None, tokenizer, config, decoder=decoder)
        translator.run_dir = path
        return translator

    @classmethod
    def load(cls, run: str | Path | None = None, backend: str = "torch",
             checkpoint: str = "best", device: str = "auto", threads: int = 0,
             target_language: str | None = None, **search: Any) -> Translator:
        """`from_run` (backend "torch") or `from_export` (backend "ct2"), checked against
        ``target_language``, searching with ``search``'s changes (a new beam size lowers the
        n-best to fit it)."""
        if backend == "ct2":
            translator = cls.from_export(run, device, threads)
        else:
            translator = cls.from_run(run, checkpoint, device)
        translator.check_target_language(target_language)  # "hi" for a hi-en model, say
        if "beam_size" in search and "n_best" not in search:  # n-best at most the new beam
            search["n_best"] = min(translator.search.n_best, search["beam_size"])
        translator.set_search(**search)
        return translator

    @property
    def decoder(self) -> Decoder:
        """What decodes: the export's, or the run's model searched by `translator.search`
        (with the full-context attention of ``train.alignment_full_context``)."""
        if self._decoder is not None:
            return self._decoder
        return TorchDecoder(self.model, self.tokenizer, self.config.train.alignment_full_context)

    def to(self, device: str | torch.device) -> Translator:
        self.device = resolve_device(device) if isinstance(device, str) else device
        if self.model is not None:  # an export's engine stays on the device it was loaded on
            self.model.to(self.device)
        return self

    @property
    def search(self) -> SearchConfig:
        return self.config.search

    def searched(self, **changes: Any) -> SearchConfig:
        """This translator's search settings with ``changes`` (`changed_search`)."""
        return changed_search(self.config.search, changes)

    def set_search(self, **changes: Any) -> None:
        """Change how this translator searches from now on (`searched`)."""
        self.config = dataclasses.replace(self.config, search=self.searched(**changes))

    def unsupported_settings(self) -> list[str]:
        """The search settings this translator's decoder cannot apply, one sentence each."""
        return self.decoder.unsupported(self.search)

    def check_target_language(self, target_language: str | None) -> None:
        """Refuse a target language this model does not write (`check_target_language`)."""
        check_target_language(target_language, self.tokenizer, self.direction)

    def translate(self, texts: list[str], need_attention: bool = True,
                  target_language: str | None = None, batch_size: int = 32,
                  prefix: str | list[str] | None = None, **search: Any) -> list[Translation]:
        """`decode_texts` with this translator's decoder, tokenizer, direction and search
        settings, any of which a keyword changes for this call only (``beam_size=1``,
        ``n_best=3``, ...); ``target_language`` ("en" or "hi") tells a model of both
        directions which language to write (None: the one a tag at the start of a text, or
        else its script, suggests); ``prefix`` starts each translation (`decode_texts`);
        ``alternatives=5`` records what the model weighed (`Translation.words`)."""
        settings = self.searched(**search) if search else self.config.search
        return decode_texts(self.decoder, self.tokenizer, texts, settings, self.direction,
                            batch_size, need_attention, target_language, prefix)
