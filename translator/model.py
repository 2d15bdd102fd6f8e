"""The encoder–decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017),
in the paper's order: embeddings and positional encoding, encoder layers, decoder layers,
the output projection. Read top to bottom.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from translator.attention import KeyValueCache, MultiHeadAttention, causal_mask
from translator.config import ModelConfig
from translator.dropout import dropout

# ---------------------------------------------------------------- embeddings and positions


class Dropout(nn.Module):
    """nn.Dropout with the faster CPU sampling of `translator.dropout` (same computation)."""

    def __init__(self, p: float) -> None:
        super().__init__()
        self.p = p

    def forward(self, x: Tensor) -> Tensor:
        return dropout(x, self.p) if self.training else x


def sinusoidal_positions(length: int, d_model: int) -> Tensor:
    """PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    two_i = torch.arange(0, d_model, 2, dtype=torch.float32)
    angle = position / torch.pow(10000.0, two_i / d_model)
    table = torch.zeros(length, d_model)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table


class Embeddings(nn.Module):
    """Token embedding × √d_model plus the fixed sinusoidal position signal."""

    def __init__(self, vocab_size: int, config: ModelConfig) -> None:
        super().__init__()
        self.tokens = nn.Embedding(vocab_size, config.d_model, padding_idx=config.pad_id)
        # N(0, d^-½) keeps embedding × √d at unit scale, which the tied output layer likes.
        nn.init.normal_(self.tokens.weight, mean=0.0, std=config.d_model**-0.5)
        nn.init.zeros_(self.tokens.weight[config.pad_id])
        self.scale = math.sqrt(config.d_model)
        positions = sinusoidal_positions(config.max_positions, config.d_model)
        self.register_buffer("positions", positions, persistent=False)
        self.dropout = Dropout(config.dropout)

    def forward(self, token_ids: Tensor, offset: int = 0) -> Tensor:
        length = token_ids.size(1)
        if offset + length > self.positions.size(0):
            raise ValueError(
                f"sequence of {offset + length} tokens is longer than model.max_positions "
                f"({self.positions.size(0)})"
            )
        x = self.tokens(token_ids) * self.scale + self.positions[offset : offset + length]
        return self.dropout(x)


# ---------------------------------------------------------------- the layers


class FeedForward(nn.Module):
    """FFN(x) = max(0, x·W1 + b1)·W2 + b2, applied to each position alone."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Linear(config.d_model, config.d_ff),
            nn.ReLU(),
            Dropout(config.activation_dropout_rate),
            nn.Linear(config.d_ff, config.d_model),
        )

    def forward(self, x: Tensor) -> Tensor:
        return self.net(x)


class Residual(nn.Module):
    """A residual connection around one sub-layer, with its layer norm before (pre-norm) or
    after the sum (post-norm, the paper's LayerNorm(x + Sublayer(x)))."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(config.d_model)
        self.dropout = Dropout(config.dropout)
        self.pre_norm = config.norm == "pre"

    def forward(self, x: Tensor, sublayer) -> tuple[Tensor, Tensor | None]:
        """``sublayer`` maps a tensor to (output, attention weights or None)."""
        if self.pre_norm:
            out, weights = sublayer(self.norm(x))
            return x + self.dropout(out), weights
        out, weights = sublayer(x)
        return self.norm(x + self.dropout(out)), weights


def _no_weights(out: Tensor) -> tuple[Tensor, None]:
    return out, None


class EncoderLayer(nn.Module):
    """Self-attention over the source, then the feed-forward network."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        self.self_attention = MultiHeadAttention(config.d_model, config.heads,
                                                 config.attention_dropout_rate)
        self.feed_forward = FeedForward(config)
        self.attention_residual = Residual(config)
        self.feed_forward_residual = Residual(config)

    def forward(self, x: Tensor, source_mask: Tensor) -> Tensor:
        x, _ = self.attention_residual(x, lambda h: self.self_attention(h, mask=source_mask))
        x, _ = self.feed_forward_residual(x, lambda h: _no_weights(self.feed_forward(h)))
        return x


@dataclass
class DecoderLayerCache:
    self_attention: KeyValueCache = field(default_factory=KeyValueCache)
    cross_attention: KeyValueCache = field(default_factory=KeyValueCache)


class DecoderLayer(nn.Module):
    """Masked (causal) self-attention over the target so far, cross-attention from the
    target to the encoder output, then the feed-forward network."""

    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        rate = config.attention_dropout_rate
        self.self_attention = MultiHeadAttention(config.d_model, config.heads, rate)
        self.cross_attention = MultiHeadAttention(config.d_model, config.heads, rate)
        self.feed_forward = FeedForward(config)
        self.self_attention_residual = Residual(config)
        self.cross_attention_residual = Residual(config)
        self.feed_forward_residual = Residual(config)

    def forward(
        self,
        x: Tensor,
        memory: Tensor,
        target_mask: Tensor | None,
        source_mask: Tensor,
        cache: DecoderLayerCache | None = None,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        self_cache = cache.self_attention if cache else None
        cross_cache = cache.cross_attention if cache else None
        x, _ = self.self_attention_residual(
            x, lambda h: self.self_attention(h, mask=target_mask, cache=self_cache)
        )
        x, cross_weights = self.cross_attention_residual(
            x,
            lambda h: self.cross_attention(
                h, memory, mask=source_mask, cache=cross_cache,
                static_keys_values=True, need_weights=need_weights,
            ),
        )
        x, _ = self.feed_forward_residual(x, lambda h: _no_weights(self.feed_forward(h)))
        return x, cross_weights


# ---------------------------------------------------------------- the whole model


@dataclass
class DecoderCache:
    """Everything incremental decoding keeps between steps: per-layer keys/values and how
    many target positions have been decoded."""

    layers: list[DecoderLayerCache]
    length: int = 0

    def select(self, indices: Tensor) -> None:
        """Reorder/duplicate batch rows (beam search keeps the surviving hypotheses)."""
        for layer in self.layers:
            layer.self_attention.select(indices)
            layer.cross_attention.select(indices)


@dataclass
class DecoderOutput:
    logits: Tensor  # [batch, target_len, target_vocab]
    cross_attention: list[Tensor] | None  # one [batch, heads, target_len, source_len] per layer


class Transformer(nn.Module):
    def __init__(self, config: ModelConfig) -> None:
        super().__init__()
        if config.source_vocab_size <= 0 or config.target_vocab_size <= 0:
            raise ValueError("model.source_vocab_size and target_vocab_size must be set")
        if config.share_embeddings and config.source_vocab_size != config.target_vocab_size:
            raise ValueError("share_embeddings needs one joint vocabulary for both languages")
        self.config = config
        self.source_embeddings = Embeddings(config.source_vocab_size, config)
        self.target_embeddings = (
            self.source_embeddings
            if config.share_embeddings
            else Embeddings(config.target_vocab_size, config)
        )
        self.encoder_layers = nn.ModuleList(EncoderLayer(config) for _ in range(config.layers))
        self.decoder_layers = nn.ModuleList(
            DecoderLayer(config) for _ in range(config.num_decoder_layers)
        )
        # Pre-norm leaves the residual stream un-normalised, so each stack ends with a norm.
        pre_norm = config.norm == "pre"
        self.encoder_norm = nn.LayerNorm(config.d_model) if pre_norm else nn.Identity()
        self.decoder_norm = nn.LayerNorm(config.d_model) if pre_norm else nn.Identity()
        # The output projection reuses the target embedding matrix (weight tying).
        self.output_bias = nn.Parameter(torch.zeros(config.target_vocab_size))

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    # masks: True where attention may look
    def source_mask(self, source: Tensor) -> Tensor:
        """[batch, 1, 1, source_len]: every query may look at every non-pad source token."""
        return (source != self.config.pad_id)[:, None, None, :]

    def target_mask(self, target_input: Tensor, full_context: bool = False) -> Tensor:
        """[batch, 1, T, T]: causal (no looking ahead) and no looking at padding; with
        ``full_context``, only no padding (every position sees the whole target)."""
        not_pad = (target_input != self.config.pad_id)[:, None, None, :]
        if full_context:
            return not_pad
        return causal_mask(target_input.size(1), target_input.device)[None, None] & not_pad

    def encode(self, source: Tensor) -> tuple[Tensor, Tensor]:
        """Source ids [batch, S] → (memory [batch, S, d_model], source_mask)."""
        source_mask = self.source_mask(source)
        x = self.source_embeddings(source)
        for layer in self.encoder_layers:
            x = layer(x, source_mask)
        return self.encoder_norm(x), source_mask

    def new_cache(self) -> DecoderCache:
        return DecoderCache([DecoderLayerCache() for _ in self.decoder_layers])

    def decode(
        self,
        target_input: Tensor,
        memory: Tensor,
        source_mask: Tensor,
        cache: DecoderCache | None = None,
        need_weights: bool = False,
        attention_layer: int | None = None,
        full_context: bool = False,
    ) -> DecoderOutput:
        """Target ids [batch, T] → logits. With a ``cache``, ``target_input`` holds only the
        new positions: earlier keys/values come from the cache, which this call extends.
        ``need_weights`` returns every layer's cross-attention; ``attention_layer`` only that
        layer's (the others keep the fused kernel), as a list of one. ``full_context`` (no
        cache) lifts the causal mask: attention for aligning a known target, not for
        predicting it (`alignment_attention`)."""
        offset = cache.length if cache is not None else 0
        if cache is None:
            target_mask = self.target_mask(target_input, full_context)
        elif target_input.size(1) == 1:
            target_mask = None  # one new position may look at everything decoded so far
        else:  # several new positions at once: causal with respect to the cached prefix
            target_mask = causal_mask(target_input.size(1), memory.device, past=offset)
        x = self.target_embeddings(target_input, offset=offset)
        cross_attention = [] if need_weights or attention_layer is not None else None
        if attention_layer is not None:
            attention_layer %= len(self.decoder_layers)  # -1 is the last layer
        for i, layer in enumerate(self.decoder_layers):
            layer_cache = cache.layers[i] if cache is not None else None
            wanted = need_weights or i == attention_layer
            x, weights = layer(x, memory, target_mask, source_mask, layer_cache, wanted)
            if wanted:
                cross_attention.append(weights)
        if cache is not None:
            cache.length += target_input.size(1)
        x = self.decoder_norm(x)
        # x·Eᵀ + b with the bias added inside the matmul (one pass over the logits, not two)
        logits = F.linear(x, self.target_embeddings.tokens.weight, self.output_bias)
        return DecoderOutput(logits, cross_attention)

    def forced_attention(self, target_input: Tensor, memory: Tensor, source_mask: Tensor,
                         full_context: bool = False) -> Tensor:
        """Every decoder layer's cross-attention [batch, layers, heads, T, S] while it reads a
        given target (teacher forcing: forced alignment, the full-context view of a finished
        translation); ``full_context`` lifts the causal mask. The one such pass of the
        package: `translator.alignment` and `translator.translate` both call it."""
        out = self.decode(target_input, memory, source_mask, need_weights=True,
                          full_context=full_context)
        return torch.stack(out.cross_attention, 1)

    def alignment_attention(self, target_input: Tensor, memory: Tensor, source_mask: Tensor,
                            layer: int) -> Tensor:
        """Cross-attention [batch, heads, T, S] of decoder ``layer`` when every target
        position sees the whole target, as when aligning a known sentence pair: Garg et al.'s
        (2019) full-context alignment pass (fairseq's --full-context-alignment). Row t still
        belongs to the piece predicted at position t (``target_output[t]``), which this pass
        also sees, one position on; layers above ``layer`` are not run."""
        target_mask = self.target_mask(target_input, full_context=True)
        x = self.target_embeddings(target_input)
        last = layer % len(self.decoder_layers)
        for i, decoder_layer in enumerate(self.decoder_layers[: last + 1]):
            x, weights = decoder_layer(x, memory, target_mask, source_mask,
                                       need_weights=i == last)
        return weights

    def forward(self, source: Tensor, target_input: Tensor, attention_layer: int | None = None,
                full_context_alignment: bool = False) -> Tensor | tuple[Tensor, Tensor]:
        """Teacher forcing: logits [batch, T, target_vocab] for every target position; with
        ``attention_layer``, also that decoder layer's cross-attention [batch, heads, T, S]
        (guided alignment trains it), from a second, unmasked pass through the layers up to
        it when ``full_context_alignment``."""
        memory, source_mask = self.encode(source)
        if full_context_alignment and attention_layer is not None:
            logits = self.decode(target_input, memory, source_mask).logits
            return logits, self.alignment_attention(target_input, memory, source_mask,
                                                    attention_layer)
        out = self.decode(target_input, memory, source_mask, attention_layer=attention_layer)
        if attention_layer is None:
            return out.logits
        return out.logits, out.cross_attention[0]
