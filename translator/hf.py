"""Hugging Face transformers: export a trained run to a model folder that
``AutoModelForSeq2SeqLM.from_pretrained`` and ``AutoTokenizer.from_pretrained`` load.

    python -m translator export-hf runs/latest runs/latest-hf

``pip install -e ".[hf]"`` (an optional extra) brings transformers. Two of its architectures
are ours layer for layer, with biases, ReLU, LayerNorm ε 1e-5, embeddings × √d_model, positions
from 0 and the output layer tied to the target embedding, plus a bias (``final_logits_bias``):

- a post-norm run becomes **Marian** (``MarianMTModel``), whose layers norm after each residual
  sum and whose decoder may have an embedding of its own (two vocabularies);
- a pre-norm run becomes **Pegasus** (``PegasusForConditionalGeneration``), which norms before
  each sub-layer and ends each stack with a norm. Pegasus has one embedding table for the
  encoder, the decoder and the output layer, so a run with two embeddings
  (model.share_embeddings false, the default run's 8k/1k vocabularies) is exported with both
  stacked in it: the target's pieces first, under our ids, then the source's, under our id
  + the target vocabulary's size (the tokenizer's vocab.json says so). The source rows' output
  bias is −∞, so their probability is exactly 0 and the logits over the target rows are ours;
  the output layer computes (source + target) logits instead of target ones.

Their sinusoidal tables hold every frequency's sine in the first half of the model axis and its
cosine in the second; ours interleaves them. The residual stream is the same under one
permutation of that axis (LayerNorm over features does not care about their order), so every
weight that reads the stream has its input columns reordered, every one that writes it its
output rows (and bias), every LayerNorm its weight and bias, and both embeddings their columns
(`sin_cos_order`): the model is ours exactly, in their order. The files carry our own table,
which transformers loads; the one it computes itself (Marian leaves the table out when it
saves a model and recomputes it, in float64, when it loads one) fits the weights too, within
1.5e-5 of ours up to position 256 and 6.2e-5 up to 1,024.

The tokenizer is a ``MarianTokenizer`` (source.spm, target.spm: the run's SentencePiece
models; vocab.json and, for two vocabularies, target_vocab.json) that gives our source ids and
appends ``</s>`` as our encoder input does; a model of both directions takes our tags
("<2en> ...") as special tokens. What differs from ``python -m translator translate``:

- it does not normalise the text (our tokenizer applies NFC, drops invisible characters and
  squeezes whitespace: `translator.data.normalize` does it first, for text that may need it),
  and it neither guesses a model of both directions' target language (give the tag) nor splits
  a source longer than the model's positions;
- a run with tokenizer.truecase (the default) writes a sentence's first letter small where
  the word is small mid-sentence ("yesterday evening Rajesh ..."), and our decoding gives it
  its capital back: capitalise the first letter of ``batch_decode``'s text, and for
  fine-tuning in transformers encode targets with `Tokenizer.encode_targets`;
- ``generation_config.json`` holds the run's beam size and n-gram ban, PAD and BOS suppressed,
  ``<s>`` as the decoder's start and an EOS forced at the model's last position; the
  doubled-word ban (search.no_doubled_words) has no transformers counterpart, and the length
  limit is one ``max_new_tokens`` for every sentence, not ours of 1.5 × the source + 10;
- its beam search divides by length^α, not by GNMT's ((5 + length) / 6)^α: no α makes them
  equal, so ``length_penalty`` is transformers' 1.0 and beam outputs may differ from ours
  (as CTranslate2's do, docs/serve.md), and a short source's own α (search.short_source)
  has no counterpart either; greedy outputs are ours.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from translator.config import ModelConfig, SearchConfig
from translator.direction import Direction
from translator.errors import TranslatorError
from translator.exports import check_export_folder, write_export_record, written_whole
from translator.model import Transformer
from translator.model_card import write_export_card
from translator.tokenizer import BOS_ID, EOS_ID, PAD_ID, UNK_ID, Tokenizer
from translator.translate import Translator

INSTALL_HINT = 'pip install -e ".[hf]" (or pip install "transformers>=4.40")'
# a stacked vocabulary's names for the target's special ids in the source's vocab.json, so that
# the tokenizer knows them as special (decode(..., skip_special_tokens=True) drops them)
TARGET_SPECIALS = {"<target-pad>": PAD_ID, "<target-unk>": UNK_ID, "<target-s>": BOS_ID,
                   "<target-/s>": EOS_ID}


class HFError(TranslatorError):
    """transformers is missing, or a run cannot be exported to it; the message says why."""


def require_transformers() -> Any:
    """The transformers module, or an `HFError` saying how to install it."""
    try:
        import transformers
    except ImportError:
        raise HFError(f"export-hf needs the transformers package: {INSTALL_HINT}") from None
    return transformers


# ---------------------------------------------------------------- the model


def layout(config: ModelConfig) -> str:
    """"marian" (post-norm) or "pegasus" (pre-norm): the architecture that is ours."""
    return "pegasus" if config.norm == "pre" else "marian"


def stacked(config: ModelConfig) -> bool:
    """Whether the export holds both embeddings in Pegasus's one table (target rows first)."""
    return layout(config) == "pegasus" and not config.share_embeddings


def sin_cos_order(d_model: int) -> Tensor:
    """The feature order of theirs in terms of ours: our sin(ω_i) columns (even), then our
    cos(ω_i) columns (odd), so that ``our_table[:, order]`` is their table."""
    return torch.cat([torch.arange(0, d_model, 2), torch.arange(1, d_model, 2)])


def hf_config(model: ModelConfig) -> Any:
    """The ``MarianConfig`` or ``PegasusConfig`` of a model of ours."""
    transformers = require_transformers()
    shape = dict(
        d_model=model.d_model, encoder_layers=model.layers,
        decoder_layers=model.num_decoder_layers, encoder_attention_heads=model.heads,
        decoder_attention_heads=model.heads, encoder_ffn_dim=model.d_ff,
        decoder_ffn_dim=model.d_ff, activation_function="relu", dropout=model.dropout,
        attention_dropout=model.attention_dropout_rate,
        activation_dropout=model.activation_dropout_rate,
        max_position_embeddings=model.max_positions, scale_embedding=True,
        pad_token_id=PAD_ID, eos_token_id=EOS_ID, forced_eos_token_id=EOS_ID,
        decoder_start_token_id=BOS_ID, tie_word_embeddings=True)
    if layout(model) == "marian":
        return transformers.MarianConfig(
            vocab_size=model.source_vocab_size, decoder_vocab_size=model.target_vocab_size,
            share_encoder_decoder_embeddings=model.share_embeddings, **shape)
    vocab_size = model.target_vocab_size + (model.source_vocab_size if stacked(model) else 0)
    return transformers.PegasusConfig(vocab_size=vocab_size, **shape)


def _attention(into: dict, prefix: str, attention: torch.nn.Module, order: Tensor) -> None:
    for ours, theirs in (("w_q", "q_proj"), ("w_k", "k_proj"), ("w_v", "v_proj")):
        linear = getattr(attention, ours)  # reads the stream: its input columns move
        into[f"{prefix}.{theirs}.weight"] = linear.weight[:, order]
        into[f"{prefix}.{theirs}.bias"] = linear.bias
    # writes the stream: its output rows move (the heads' split of q, k, v stays ours)
    into[f"{prefix}.out_proj.weight"] = attention.w_o.weight[order]
    into[f"{prefix}.out_proj.bias"] = attention.w_o.bias[order]


def _norm(into: dict, prefix: str, norm: torch.nn.LayerNorm, order: Tensor) -> None:
    into[f"{prefix}.weight"], into[f"{prefix}.bias"] = norm.weight[order], norm.bias[order]


def _feed_forward(into: dict, prefix: str, feed_forward: torch.nn.Module, order: Tensor
                  ) -> None:
    first, _, _, second = feed_forward.net  # Linear, ReLU, Dropout, Linear
    into[f"{prefix}.fc1.weight"], into[f"{prefix}.fc1.bias"] = first.weight[:, order], first.bias
    into[f"{prefix}.fc2.weight"] = second.weight[order]
    into[f"{prefix}.fc2.bias"] = second.bias[order]


def _layers(into: dict, model: Transformer, order: Tensor) -> None:
    for i, layer in enumerate(model.encoder_layers):
        prefix = f"model.encoder.layers.{i}"
        _attention(into, f"{prefix}.self_attn", layer.self_attention, order)
        _norm(into, f"{prefix}.self_attn_layer_norm", layer.attention_residual.norm, order)
        _feed_forward(into, prefix, layer.feed_forward, order)
        _norm(into, f"{prefix}.final_layer_norm", layer.feed_forward_residual.norm, order)
    for i, layer in enumerate(model.decoder_layers):
        prefix = f"model.decoder.layers.{i}"
        _attention(into, f"{prefix}.self_attn", layer.self_attention, order)
        _norm(into, f"{prefix}.self_attn_layer_norm", layer.self_attention_residual.norm, order)
        _attention(into, f"{prefix}.encoder_attn", layer.cross_attention, order)
        _norm(into, f"{prefix}.encoder_attn_layer_norm", layer.cross_attention_residual.norm,
              order)
        _feed_forward(into, prefix, layer.feed_forward, order)
        _norm(into, f"{prefix}.final_layer_norm", layer.feed_forward_residual.norm, order)


def _embeddings(into: dict, model: Transformer, order: Tensor) -> None:
    """Token embeddings, the tied output layer and its bias, and the position tables, under
    every name transformers gives them (tied names included, so that loading is strict)."""
    config = model.config
    source = model.source_embeddings.tokens.weight[:, order]
    target = model.target_embeddings.tokens.weight[:, order]
    bias = model.output_bias
    if stacked(config):  # one table: target rows (our ids), then source rows (+ target size)
        shared = torch.cat([target, source])
        bias = torch.cat([bias, torch.full((config.source_vocab_size,), float("-inf"))])
        source = target = shared
    into["model.encoder.embed_tokens.weight"] = source
    into["model.decoder.embed_tokens.weight"] = target
    into["lm_head.weight"] = target
    if layout(config) == "pegasus" or config.share_embeddings:
        into["model.shared.weight"] = source
    into["final_logits_bias"] = bias[None]
    positions = model.source_embeddings.positions[:, order]  # ours, in their order
    into["model.encoder.embed_positions.weight"] = positions
    into["model.decoder.embed_positions.weight"] = positions
    if layout(config) == "pegasus":
        into["model.encoder.layer_norm.weight"] = model.encoder_norm.weight[order]
        into["model.encoder.layer_norm.bias"] = model.encoder_norm.bias[order]
        into["model.decoder.layer_norm.weight"] = model.decoder_norm.weight[order]
        into["model.decoder.layer_norm.bias"] = model.decoder_norm.bias[order]


@torch.no_grad()
def hf_state_dict(model: Transformer) -> dict[str, Tensor]:
    """Our weights under transformers' names, the model axis in their sin|cos order."""
    order = sin_cos_order(model.config.d_model)
    into: dict[str, Tensor] = {}
    _embeddings(into, model, order)
    _layers(into, model, order)
    return {name: tensor.detach().float().contiguous() for name, tensor in into.items()}


def hf_model(model: Transformer) -> Any:
    """A transformers model (Marian or Pegasus) computing what ``model`` computes."""
    transformers = require_transformers()
    config = hf_config(model.config)
    kind = (transformers.MarianMTModel if layout(model.config) == "marian"
            else transformers.PegasusForConditionalGeneration)
    theirs = kind(config)
    state = hf_state_dict(model)
    expected = set(theirs.state_dict())
    if set(state) != expected:  # a transformers release that names its weights otherwise
        names = ", ".join(sorted(expected ^ set(state))[:3])
        raise HFError(f"transformers {transformers.__version__} names this model's weights "
                      f"otherwise than export-hf knows ({names}); install the release it was "
                      "tested with: pip install transformers==5.24.0")
    theirs.load_state_dict(state, strict=True)
    return theirs.eval()


def generation_config(model: ModelConfig, search: SearchConfig) -> Any:
    """The run's decoding settings, as far as ``generate`` has them (the module's notes)."""
    transformers = require_transformers()
    settings = dict(
        decoder_start_token_id=BOS_ID, eos_token_id=EOS_ID, pad_token_id=PAD_ID,
        forced_eos_token_id=EOS_ID,  # ours ends with EOS at the length limit too
        # at most max_positions outputs, EOS included, as ours (max_new_tokens, not max_length,
        # so that a caller's max_new_tokens replaces it without a warning)
        max_new_tokens=model.max_positions,
        suppress_tokens=[PAD_ID, BOS_ID],  # ours never writes them
        num_beams=search.beam_size, no_repeat_ngram_size=search.no_repeat_ngram)
    if search.beam_size > 1:
        settings["length_penalty"] = 1.0  # theirs is length^α: see the module's notes
    return transformers.GenerationConfig(**settings)


# ---------------------------------------------------------------- the tokenizer


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def hf_tokenizer(tokenizer: Tokenizer, model: ModelConfig, direction: Direction,
                 folder: Path) -> Any:
    """A ``MarianTokenizer`` of the run's SentencePiece models, written into ``folder``, whose
    ids are the export's: ours, the source's + the target size in a stacked vocabulary."""
    transformers = require_transformers()
    offset = model.target_vocab_size if stacked(model) else 0
    source = {piece: offset + i for i, piece in enumerate(
        tokenizer.source_pieces(list(range(tokenizer.source_vocab_size))))}
    separate = offset > 0 or not tokenizer.joint
    # "<2en> text": the tag's own id, as ours (SentencePiece alone would write "▁" before it).
    # Beside two vocabularies of Marian, the tags' ids are also the target's first two byte
    # pieces (U+0000 and U+0001), which decode(skip_special_tokens=True) then drops.
    specials = list(direction.tags.values())
    if offset:
        source |= TARGET_SPECIALS
        specials += list(TARGET_SPECIALS)
    (folder / "source.spm").write_bytes(tokenizer.source_model.serialized_model_proto())
    (folder / "target.spm").write_bytes(tokenizer.target_model.serialized_model_proto())
    _write_json(folder / "vocab.json", source)
    files = {}
    if separate:
        _write_json(folder / "target_vocab.json",
                    {piece: i for i, piece in enumerate(tokenizer.target_vocabulary)})
        files["target_vocab_file"] = str(folder / "target_vocab.json")
    with warnings.catch_warnings():  # "Recommended: pip install sacremoses", which it only
        warnings.filterwarnings("ignore", message=".*sacremoses")  # uses in normalize()
        theirs = transformers.MarianTokenizer(
            source_spm=str(folder / "source.spm"), target_spm=str(folder / "target.spm"),
            vocab=str(folder / "vocab.json"), separate_vocabs=separate,
            source_lang=direction.source_language, target_lang=direction.target_language,
            model_max_length=model.max_positions, additional_special_tokens=specials, **files)
    theirs.save_pretrained(str(folder))
    return theirs


# ---------------------------------------------------------------- the export


def _save_model(theirs: Any, folder: Path) -> None:
    """``save_pretrained``, with the position tables and without a progress bar."""
    # Marian leaves its position tables out of its files and recomputes them (in float64) when
    # it loads; they are written here, as Pegasus writes them, so that ours are loaded instead
    theirs._keys_to_ignore_on_save = None
    progress = require_transformers().utils.logging
    shown = progress.is_progress_bar_enabled()
    progress.disable_progress_bar()  # "Writing model shards" for a file of one shard
    try:
        theirs.save_pretrained(str(folder))
    finally:
        if shown:
            progress.enable_progress_bar()


def export(run: str | Path | None, out: str | Path, checkpoint: str = "best") -> Path:
    """Write ``run``'s ``checkpoint`` (None: the newest run) as a transformers model folder
    ``out``: config.json, model.safetensors, generation_config.json, the tokenizer's files and
    export.json. An earlier export in ``out`` is replaced; any other folder is refused."""
    transformers = require_transformers()
    out = Path(out)
    check_export_folder(out, HFError)
    translator = Translator.from_run(run, checkpoint, device="cpu")
    config = translator.config
    direction = Direction.parse(config.data.direction)
    theirs = hf_model(translator.model)
    theirs.generation_config = generation_config(config.model, config.search)
    with written_whole(out) as temporary:
        _save_model(theirs, temporary)
        hf_tokenizer(translator.tokenizer, config.model, direction, temporary)
        write_export_record(temporary, {
            "run": str(translator.run_dir), "checkpoint": checkpoint, "format": "transformers",
            "architecture": type(theirs).__name__,
            "stacked_vocabulary": stacked(config.model),
            "transformers": transformers.__version__})
        write_export_card(temporary, hub=True)  # MODEL_CARD.md and README.md
    return out
