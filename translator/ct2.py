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

`translator.translate.Translator.from_export` translates with an export: the same text
handling as for a run, decoded by `translator.decoders.CT2Decoder` (its ``translate_batch``
call, and what differs from ours).
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from translator.alignment import supervised_layer
from translator.config import Config, save_config
from translator.decoders import CT2Error, require_ctranslate2
from translator.exports import check_export_folder, write_export_record, written_whole
from translator.model import Transformer
from translator.model_card import write_export_card
from translator.tokenizer import Tokenizer
from translator.translate import Translator

QUANTIZATIONS = ("int8", "int8_float32", "float32")
LAYER_NORM_EPSILON = 1e-5  # torch.nn.LayerNorm's


# ---------------------------------------------------------------- the export


def alignment_layer(config: Config) -> int:
    """The decoder layer (non-negative index) whose mean of heads CTranslate2 returns as
    attention: the one guided alignment trained (train.alignment_layer), else the default
    view's layer."""
    return supervised_layer(config)


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
    specs = require_ctranslate2().specs  # ctranslate2 is imported in translator.decoders only
    common_spec, TransformerSpec = specs.common_spec, specs.TransformerSpec

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
        write_export_card(temporary)  # MODEL_CARD.md
    return out
