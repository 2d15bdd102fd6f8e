"""CTranslate2: export a trained run's model to it, and translate with the export.

    python -m translator export-ct2 runs/latest runs/latest-ct2 --quantization int8
    python -m translator translate "मुझे ट्रेन पकड़नी है।" --backend ct2 --run runs/latest-ct2

CTranslate2 (``pip install -e ".[ct2]"``, an optional extra) runs Transformers in C++ with
int8 weights, faster than PyTorch on a CPU. `export` is this project's own converter: it
fills a `ctranslate2.specs.TransformerSpec` from the `Transformer` weight by weight (pre- or
post-norm, ReLU, the run's sinusoidal table passed explicitly since CTranslate2's own lays sin
and cos out in halves where ours interleaves them, embeddings scaled by √d_model and shared
with the output projection, whose bias is ours, LayerNorm ε 1e-5 as PyTorch's, <s> as the
decoder's start, the source's EOS piece passed with it) and picks as the alignment layer the
run's supervised one (train.alignment_layer, or `DEFAULT_LAYER` for a run without guided
alignment), averaged over all its heads. The export folder holds CTranslate2's files, the
run's SentencePiece model (``tokenizer/``), its config (``config.yaml``) and ``export.json``
(where it came from, how it was quantised).

`CT2Translator` translates with an export as `translator.translate.Translator` does with a
run (the same text handling: tags of a model of both directions, long inputs split into
parts, script warnings) and returns the same `Translation` objects. What differs:

- the attention is CTranslate2's ``return_attention``: one matrix, the alignment layer's mean
  of heads ([1, 1, T+1, S+1]), so heatmaps and word links draw from it but the explorer's
  per-layer and per-head views need the PyTorch backend;
- CTranslate2 has ``no_repeat_ngram_size`` but no doubled-word ban: search.no_doubled_words
  is not applied (`unsupported_settings` says so);
- its length penalty is length^α, not GNMT's ((5 + length) / 6)^α: its beam ranks plain
  sums and returns every finished hypothesis, which are ranked here by our formula; still, it
  prunes and stops by its own rules, so beam outputs can differ from ours (three in four the
  same on the dev split of a short run); greedy outputs of a float32 export are ours;
- it renormalises the log-probabilities after its bans (PAD, BOS, repeated n-grams), so its
  scores can be a little higher than ours for the same output, and an output that reaches a
  sentence's length limit is cut there (ours ends it with a forced EOS, whose log-probability
  its score then lacks).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from translator.alignment import resolve_layer
from translator.config import Config, SearchConfig, load_config, save_config
from translator.direction import Direction
from translator.errors import TranslatorError
from translator.model import Transformer
from translator.search import gnmt_length_penalty
from translator.tokenizer import Tokenizer
from translator.translate import (
    Translation,
    Translator,
    assemble,
    changed_search,
    check_target_language,
    script_warning,
    split_source,
    target_and_body,
)

QUANTIZATIONS = ("int8", "int8_float32", "float32")
EXPORT_FILE = "export.json"  # what an export folder holds beside CTranslate2's files
# CTranslate2's beam α: any α ≠ 0 makes it stop as ours does; this one barely changes its
# scores (÷ length^α, undone before ours are computed)
CT2_LENGTH_PENALTY = 1e-6
INSTALL_HINT = 'pip install -e ".[ct2]" (or pip install "ctranslate2>=4,<5")'
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's


class CT2Error(TranslatorError):
    """CTranslate2 is missing, or an export cannot be written or read; the message says why."""


def require_ctranslate2() -> Any:
    """The ctranslate2 module, or a `CT2Error` saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise CT2Error(f"CTranslate2 is not installed; {INSTALL_HINT}") from None
    return ctranslate2


# ---------------------------------------------------------------- the export


def alignment_layer(config: Config) -> int:
    """The decoder layer (non-negative index) whose mean of heads CTranslate2 returns as
    attention: the one guided alignment trained (train.alignment_layer), else the default
    view's layer."""
    layer = config.train.alignment_layer if config.train.alignment_weight > 0 else None
    return resolve_layer(layer, config.model.num_decoder_layers)  # None: DEFAULT_LAYER


def _array(tensor: Tensor) -> np.ndarray:
    return tensor.detach().float().cpu().numpy()


def _linear(spec: Any, *layers: torch.nn.Linear) -> None:
    """``spec``'s weight and bias from ``layers`` stacked along the output dimension (CTranslate2
    fuses Q, K and V of self-attention, and K and V of cross-attention)."""
    spec.weight = np.concatenate([_array(layer.weight) for layer in layers])
    spec.bias = np.concatenate([_array(layer.bias) for layer in layers])


def _layer_norm(spec: Any, norm: torch.nn.LayerNorm) -> None:
    spec.gamma, spec.beta = _array(norm.weight), _array(norm.bias)


def _feed_forward(spec: Any, feed_forward: torch.nn.Module, norm: torch.nn.LayerNorm) -> None:
    first, _, _, second = feed_forward.net  # Linear, ReLU, Dropout, Linear
    _linear(spec.linear_0, first)
    _linear(spec.linear_1, second)
    _layer_norm(spec.layer_norm, norm)


def transformer_spec(model: Transformer, tokenizer: Tokenizer, layer: int) -> Any:
    """A `ctranslate2.specs.TransformerSpec` holding ``model``'s weights and ``tokenizer``'s
    vocabularies, returning decoder ``layer``'s mean of heads as its attention."""
    require_ctranslate2()
    from ctranslate2.specs import common_spec
    from ctranslate2.specs.transformer_spec import TransformerSpec

    config = model.config
    spec = TransformerSpec.from_config(
        (config.layers, config.num_decoder_layers), config.heads,
        pre_norm=config.norm == "pre", activation=common_spec.Activation.RELU,
        alignment_layer=layer, alignment_heads=config.heads)
    positions = _array(model.source_embeddings.positions)  # the run's own table
    encoder, decoder = spec.encoder, spec.decoder
    source_weight = _array(model.source_embeddings.tokens.weight)
    # one array for every shared use, so CTranslate2 stores it once
    target_weight = (source_weight if model.target_embeddings is model.source_embeddings
                     else _array(model.target_embeddings.tokens.weight))
    encoder.embeddings[0].weight = source_weight
    encoder.position_encodings.encodings = positions
    decoder.embeddings.weight = target_weight
    decoder.position_encodings.encodings = positions
    decoder.projection.weight = target_weight
    decoder.projection.bias = _array(model.output_bias)
    if config.norm == "pre":  # each stack's final norm (post-norm has none)
        _layer_norm(encoder.layer_norm, model.encoder_norm)
        _layer_norm(decoder.layer_norm, model.decoder_norm)
    for layer_spec, ours in zip(encoder.layer, model.encoder_layers):
        attention = ours.self_attention
        _linear(layer_spec.self_attention.linear[0], attention.w_q, attention.w_k, attention.w_v)
        _linear(layer_spec.self_attention.linear[1], attention.w_o)
        _layer_norm(layer_spec.self_attention.layer_norm, ours.attention_residual.norm)
        _feed_forward(layer_spec.ffn, ours.feed_forward, ours.feed_forward_residual.norm)
    for layer_spec, ours in zip(decoder.layer, model.decoder_layers):
        attention, cross = ours.self_attention, ours.cross_attention
        _linear(layer_spec.self_attention.linear[0], attention.w_q, attention.w_k, attention.w_v)
        _linear(layer_spec.self_attention.linear[1], attention.w_o)
        _layer_norm(layer_spec.self_attention.layer_norm, ours.self_attention_residual.norm)
        _linear(layer_spec.attention.linear[0], cross.w_q)
        _linear(layer_spec.attention.linear[1], cross.w_k, cross.w_v)
        _linear(layer_spec.attention.linear[2], cross.w_o)
        _layer_norm(layer_spec.attention.layer_norm, ours.cross_attention_residual.norm)
        _feed_forward(layer_spec.ffn, ours.feed_forward, ours.feed_forward_residual.norm)
    source_vocabulary = tokenizer.source_pieces(list(range(tokenizer.source_vocab_size)))
    target_vocabulary = tokenizer.target_vocabulary
    spec.register_source_vocabulary(source_vocabulary)
    spec.register_target_vocabulary(target_vocabulary)
    specials = tokenizer.target_pieces([tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id])
    spec.config.unk_token, spec.config.bos_token, spec.config.eos_token = specials
    spec.config.decoder_start_token = specials[1]
    # sources come with their EOS piece: CTranslate2's add_source_eos would leave the EOS
    # column out of the attention it returns
    spec.config.add_source_eos = False
    spec.config.layer_norm_epsilon = LAYER_NORM_EPSILON
    return spec


def export(run: str | Path | None, out: str | Path, quantization: str = "int8",
           checkpoint: str = "best") -> Path:
    """Convert ``run``'s ``checkpoint`` (None: the newest run) into a CTranslate2 model in
    the folder ``out``, with its tokenizer and config beside it; ``quantization`` is one of
    `QUANTIZATIONS`. An earlier export in ``out`` is replaced; any other folder is refused."""
    ctranslate2 = require_ctranslate2()
    if quantization not in QUANTIZATIONS:
        raise CT2Error(f"--quantization {quantization} is not one of {', '.join(QUANTIZATIONS)}")
    out = Path(out)
    check_export_folder(out, CT2Error)
    translator = Translator.from_run(run, checkpoint, device="cpu")
    layer = alignment_layer(translator.config)
    spec = transformer_spec(translator.model, translator.tokenizer, layer)
    spec.validate()
    spec.optimize(quantization=quantization)
    with written_whole(out) as temporary:
        spec.save(str(temporary))
        shutil.copytree(translator.run_dir.tokenizer_dir, temporary / "tokenizer")
        save_config(translator.config, temporary / "config.yaml")
        write_export_record(temporary, {
            "run": str(translator.run_dir), "checkpoint": checkpoint,
            "quantization": quantization, "alignment_layer": layer,
            "alignment_heads": "mean of all", "ctranslate2": ctranslate2.__version__})
    return out


# ---------------------------------------------------------------- export folders


def check_export_folder(out: Path, error: type[TranslatorError]) -> None:
    """Refuse (with ``error``) an ``out`` that holds something other than an earlier export of
    this project (an export folder has `EXPORT_FILE`): a run folder, say, is never replaced."""
    if out.exists() and not (out / EXPORT_FILE).is_file() and (
            not out.is_dir() or any(out.iterdir())):
        raise error(f"{out} exists and is not an earlier export; name a new folder")


@contextmanager
def written_whole(out: Path) -> Iterator[Path]:
    """A new folder beside ``out`` to write an export into: renamed to ``out`` (replacing an
    earlier export) when the block ends, removed if it fails, so that ``out`` is never a half
    of one."""
    temporary = out.with_name(f".{out.name}.{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        yield temporary
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    temporary.rename(out)


def write_export_record(folder: Path, record: dict) -> None:
    """`EXPORT_FILE`: where an export came from and how it was made."""
    (folder / EXPORT_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- translating with it


class CT2Translator:
    """An export, its tokenizer and config, ready to translate lists of sentences as the
    config's search: section says; the same methods as `translator.translate.Translator`."""

    def __init__(self, path: str | Path, device: str = "auto", threads: int = 0) -> None:
        ctranslate2 = require_ctranslate2()
        path = Path(path)
        if not (path / EXPORT_FILE).is_file():
            hint = (f"; make one with python -m translator export-ct2 {path} OUT and pass "
                    "--run OUT" if (path / "config.yaml").is_file() else "")
            raise CT2Error(f"{path} is not a CTranslate2 export (no {EXPORT_FILE} in it){hint}")
        self.run_dir = path
        self.export = json.loads((path / EXPORT_FILE).read_text(encoding="utf-8"))
        self.config = load_config(path / "config.yaml")
        self.tokenizer = Tokenizer.load(path / "tokenizer")
        self.direction = Direction(self.config.data.direction)
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        self.device = device
        try:
            self.model = ctranslate2.Translator(str(path), device=device,
                                                intra_threads=threads)
        except (RuntimeError, ValueError) as error:
            raise CT2Error(f"CTranslate2 cannot load {path}: {error}") from None
        self.alignment_layer = int(self.export["alignment_layer"])
        self._target_ids = {piece: i for i, piece in enumerate(self.tokenizer.target_vocabulary)}

    @classmethod
    def from_export(cls, path: str | Path | None, device: str = "auto", threads: int = 0
                    ) -> CT2Translator:
        if path is None:
            raise CT2Error("--backend ct2 needs --run EXPORT, a folder written by "
                           "python -m translator export-ct2")
        return cls(path, device, threads)

    @property
    def search(self) -> SearchConfig:
        return self.config.search

    @property
    def view_title(self) -> str:
        """The one view CTranslate2 returns, named as `describe_view` names ours."""
        layers, heads = self.config.model.num_decoder_layers, self.config.model.heads
        return (f"layer {self.alignment_layer} (of 0–{layers - 1}), mean of heads "
                f"0–{heads - 1} (CTranslate2)")

    def unsupported_settings(self) -> list[str]:
        """The run's search settings CTranslate2 cannot apply, one sentence each."""
        if self.search.no_doubled_words:
            return ["CTranslate2 has no doubled-word ban, so search.no_doubled_words is not "
                    "applied"]
        return []

    def set_search(self, **changes: Any) -> None:
        """Change how this translator searches: any `SearchConfig` key."""
        self.config = dataclasses.replace(
            self.config, search=changed_search(self.config.search, changes))

    def check_target_language(self, target_language: str | None) -> None:
        check_target_language(target_language, self.tokenizer, self.direction)

    def translate(self, texts: list[str], need_attention: bool = True,
                  target_language: str | None = None, batch_size: int = 32,
                  **search: Any) -> list[Translation]:
        """`Translator.translate`'s contract, decoded by CTranslate2; ``search`` changes the
        settings for this call only."""
        if isinstance(texts, str):
            raise TypeError("translate() takes a list of strings, not one string")
        settings = changed_search(self.search, search) if search else self.search
        tokenizer = self.tokenizer
        self.check_target_language(target_language)
        # as translate.max_source_pieces: the EOS and a tag take a position each
        limit = self.config.model.max_positions - 1 - bool(tokenizer.tags)
        requests: list[tuple[int, list[int]]] = []
        warnings: list[list[str]] = []
        languages: list[str | None] = []
        for i, text in enumerate(texts):
            language, body, asked = target_and_body(text, tokenizer, target_language)
            parts, text_warnings = self._source_parts(body, limit, language if asked else None)
            requests += [(i, tokenizer.tag_ids(language) + part) for part in parts]
            warnings.append(text_warnings)
            languages.append(language)
        found = self._search_in_batches([ids for _, ids in requests], settings, batch_size,
                                        need_attention)
        parts_of: list[list[Translation]] = [[] for _ in texts]
        for (i, ids), nbest in zip(requests, found):
            parts_of[i].append(self._translation(texts[i], ids, nbest, settings.n_best,
                                                 warnings[i], languages[i]))
        return assemble(texts, parts_of, warnings, languages, settings.n_best)

    def _source_parts(self, text: str, limit: int, target_language: str | None
                      ) -> tuple[list[list[int]], list[str]]:
        """As `translator.translate` splits and warns: parts of at most ``limit`` pieces."""
        ids = self.tokenizer.encode_source(text)
        if not ids:
            return [], []
        warnings = []
        warning = script_warning(text, self.direction, target_language)
        if warning:
            warnings.append(warning)
        if len(ids) <= limit:
            return [ids], warnings
        parts = split_source(text, self.tokenizer, limit)
        warnings.append(f"the input has {len(ids)} pieces, more than the model's limit of "
                        f"{limit}; it was split into {len(parts)} parts, translated one by one")
        return parts, warnings

    def output_limit(self, source_ids: list[int], search: SearchConfig) -> int:
        """The most target tokens (EOS not counted) of a source, as `search.output_limits`
        computes for ours: ratio × (pieces + EOS) + extra, within max_positions, less the
        step that must write EOS."""
        limit = int((len(source_ids) + 1) * search.max_length_ratio) + search.max_length_extra
        return max(1, min(limit, self.config.model.max_positions)) - 1

    def _search_in_batches(self, sources: list[list[int]], search: SearchConfig,
                           batch_size: int, need_attention: bool
                           ) -> list[list[tuple[list[int], float, Tensor | None]]]:
        """(tokens, score, attention [T(+1), S+1] or None) of the n-best of each source, in
        order; sources of similar length are decoded together."""
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        results: list[list] = [[] for _ in sources]
        specials = self.tokenizer.target_pieces([self.tokenizer.pad_id, self.tokenizer.bos_id])
        eos = self.tokenizer.source_pieces([self.tokenizer.eos_id])[0]
        for start in range(0, len(order), batch_size):
            chunk = order[start : start + batch_size]
            limits = [self.output_limit(sources[i], search) for i in chunk]
            # CTranslate2 divides by length^α, not by GNMT's ((5 + length) / 6)^α: it
            # returns all of its finished hypotheses, ranked here as ours are. Its α must not
            # be 0: with α = 0 it stops as soon as its best beam ends (early exit), where ours,
            # like CTranslate2 with α ≠ 0, stops when beam_size hypotheses have ended
            outputs = self.model.translate_batch(
                [self.tokenizer.source_pieces(sources[i]) + [eos] for i in chunk],
                beam_size=search.beam_size, num_hypotheses=search.beam_size,
                length_penalty=CT2_LENGTH_PENALTY, no_repeat_ngram_size=search.no_repeat_ngram,
                # one step past the longest limit: the step where ours writes its forced EOS,
                # whose attention row the cut hypothesis keeps
                max_decoding_length=max(limits) + 1, min_decoding_length=0, max_input_length=0,
                suppress_sequences=[[piece] for piece in specials],  # ours never writes them
                return_scores=True, return_attention=need_attention, return_end_token=True)
            for i, most, output in zip(chunk, limits, outputs):
                found = [self._hypothesis(output, k, most, need_attention, search)
                         for k in range(len(output.hypotheses))]
                found.sort(key=lambda hypothesis: hypothesis[1], reverse=True)
                results[i] = found[: search.n_best]
        return results

    def _hypothesis(self, output: Any, k: int, most: int, need_attention: bool,
                    search: SearchConfig) -> tuple[list[int], float, Tensor | None]:
        """(target ids, score, attention) of hypothesis ``k`` of ``output``, cut at ``most``
        tokens; the score is ours: the sum of log-probabilities (EOS included), divided for
        a beam by the GNMT length penalty."""
        pieces = output.hypotheses[k]
        ended = bool(pieces) and pieces[-1] == self.tokenizer.target_pieces(
            [self.tokenizer.eos_id])[0]
        tokens = [self._target_ids[piece] for piece in (pieces[:-1] if ended else pieces)]
        rows = len(tokens) + ended
        if len(tokens) > most:  # past this sentence's limit: cut there, as ours ends there
            tokens, rows = tokens[:most], most + 1
        attention = None
        if need_attention:
            attention = torch.tensor(output.attention[k][:rows], dtype=torch.float32)
            attention = attention[None, None]  # [1 layer, 1 (mean of heads), T(+1), S+1]
        score = float(output.scores[k])
        if search.beam_size > 1:  # undo CTranslate2's length^α (its length counts the EOS)
            score *= len(pieces) ** CT2_LENGTH_PENALTY
            score /= gnmt_length_penalty(len(tokens) + 1, search.length_penalty)
        return tokens, score, attention

    def _translation(self, source: str, ids: list[int], nbest: list, n_best: int,
                     warnings: list[str], target_language: str | None) -> Translation:
        """As `translator.translate` builds one: the tag's piece and column left out."""
        skip = int(target_language is not None)
        translations = []
        for tokens, score, attention in nbest:
            translations.append(Translation(
                source=source, text=self.tokenizer.decode_target(tokens), tokens=tokens,
                score=score, source_pieces=self.tokenizer.source_pieces(ids[skip:]),
                target_pieces=self.tokenizer.target_pieces(tokens),
                attention=attention[:, :, :, skip : len(ids) + 1] if attention is not None
                else None,
                warnings=warnings, target_language=target_language))
        best = dataclasses.replace(translations[0])
        best.nbest = translations if n_best > 1 else []
        return best
