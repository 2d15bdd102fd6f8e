"""Scaled dot-product attention and multi-head attention, written as the seeds write them.

    Attention(Q, K, V) = softmax( Q·Kᵀ / √d_k ) · V

Four steps, in this order: score (Q·Kᵀ), scale (÷√d_k), mask (−∞ before the softmax),
softmax along each row, then the weighted sum of the values.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from translator.dropout import dropout


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """Return ``(output, weights)`` for queries ``q`` [..., n, d_k], keys ``k`` [..., m, d_k]
    and values ``v`` [..., m, d_v], batched over any leading dimensions.

    ``mask`` is boolean and broadcastable to [..., n, m]: True where a query may look,
    False where it may not (padding, or the future under a causal mask). ``dropout_p``
    (training only) drops weights before the weighted sum; the returned weights are whole.
    """
    d_k = q.size(-1)
    scores = q @ k.transpose(-2, -1)  # step 1: raw scores Q·Kᵀ, one row per query
    scores = scores / math.sqrt(d_k)  # step 2: scale so Var(q·k) is 1, not d_k
    if mask is not None:
        scores = scores.masked_fill(~mask, float("-inf"))  # e^(−∞) = 0 after the softmax
    weights = torch.softmax(scores, dim=-1)  # step 3: each row becomes a distribution
    output = dropout(weights, dropout_p) @ v  # step 4: weighted sum of the values
    return output, weights


def causal_mask(length: int, device: torch.device | None = None, past: int = 0) -> Tensor:
    """[length, past + length] boolean mask: query i may look at keys j ≤ past + i only, itself
    and what came before it, never the future. ``past`` counts the positions decoded before
    these ``length`` (kept in a key/value cache); with none the mask is square."""
    return torch.ones(length, past + length, dtype=torch.bool, device=device).tril(diagonal=past)


def attention_core(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None, dropout_p: float,
                   need_weights: bool) -> tuple[Tensor, Tensor | None]:
    """The four steps, by the path that is fastest for the case: the explicit steps above when
    the weights are wanted (plots, guided alignment) or on a CPU with dropout (PyTorch's fused
    kernel cannot drop weights there, so it would run these same steps with slower sampling);
    otherwise the fused kernel, which never materialises the n × m weights (weights None)."""
    if need_weights or (q.device.type == "cpu" and dropout_p):
        return scaled_dot_product_attention(q, k, v, mask, dropout_p)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p), None


@dataclass
class KeyValueCache:
    """Keys and values already projected for one attention layer, [batch, heads, m, d_k].

    Decoder self-attention appends one step at a time; cross-attention fills it once per
    source and reuses it for every target step.
    """

    keys: Tensor | None = None
    values: Tensor | None = None

    def append(self, keys: Tensor, values: Tensor) -> tuple[Tensor, Tensor]:
        if self.keys is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat([self.keys, keys], dim=2)
            self.values = torch.cat([self.values, values], dim=2)
        return self.keys, self.values

    def select(self, indices: Tensor) -> None:
        """Keep batch rows ``indices`` (in that order): beam search reorders hypotheses."""
        if self.keys is not None:
            self.keys = self.keys.index_select(0, indices)
            self.values = self.values.index_select(0, indices)


class MultiHeadAttention(nn.Module):
    """h heads of d_k = d_model / h dimensions, each with its own slice of W_Q, W_K, W_V,
    concatenated and mixed by W_O:

        head_i = Attention(X·W_Q^i, Y·W_K^i, Y·W_V^i);  MultiHead = Concat(head_1..h) · W_O
    """

    def __init__(self, d_model: int, heads: int = 8, dropout: float = 0.0) -> None:
        super().__init__()
        if d_model % heads != 0:
            raise ValueError(f"d_model ({d_model}) must be divisible by heads ({heads})")
        self.heads = heads
        self.d_k = d_model // heads
        self.dropout = dropout
        # One d_model × d_model matrix per role holds all h heads' d_model × d_k projections,
        # so h heads cost exactly as many parameters as one head of d_model.
        self.w_q = nn.Linear(d_model, d_model)
        self.w_k = nn.Linear(d_model, d_model)
        self.w_v = nn.Linear(d_model, d_model)
        self.w_o = nn.Linear(d_model, d_model)

    def split_heads(self, x: Tensor) -> Tensor:
        """[batch, n, d_model] → [batch, heads, n, d_k]."""
        batch, length, _ = x.shape
        return x.view(batch, length, self.heads, self.d_k).transpose(1, 2)

    def project_keys_values(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        return self.split_heads(self.w_k(memory)), self.split_heads(self.w_v(memory))

    def forward(
        self,
        query_input: Tensor,
        key_value_input: Tensor | None = None,
        mask: Tensor | None = None,
        cache: KeyValueCache | None = None,
        static_keys_values: bool = False,
        need_weights: bool = False,
    ) -> tuple[Tensor, Tensor | None]:
        """Attend from ``query_input`` [batch, n, d_model] to ``key_value_input`` [batch, m,
        d_model] (itself when None: self-attention). ``mask`` is boolean, broadcastable to
        [batch, heads, n, m]. With a ``cache``, new keys/values are appended to it (self-
        attention), or, when ``static_keys_values`` is set, computed once and then reused
        (cross-attention). Returns the output and, if ``need_weights``, the per-head
        weights [batch, heads, n, m].
        """
        q = self.split_heads(self.w_q(query_input))
        if cache is not None and static_keys_values and cache.keys is not None:
            k, v = cache.keys, cache.values
        else:
            source = query_input if key_value_input is None else key_value_input
            k, v = self.project_keys_values(source)
            if cache is not None:
                k, v = cache.append(k, v)
        dropout_p = self.dropout if self.training else 0.0
        if q.device.type == "cpu" and q.dtype == torch.bfloat16:
            # bf16 training on a CPU: the projections run in bf16, the attention core in fp32.
            # oneDNN compiles a bf16 matmul kernel for each new shape, and attention's shapes
            # (batch × heads, n, m) change with every batch: in bf16 a run's steps got slower
            # as its kernel cache churned, while fp32 matmuls compile nothing (issue 32,
            # docs/performance.md).
            with torch.autocast("cpu", enabled=False):
                context, weights = attention_core(q.float(), k.float(), v.float(), mask,
                                                  dropout_p, need_weights)
            context = context.to(torch.bfloat16)
        else:
            context, weights = attention_core(q, k, v, mask, dropout_p, need_weights)
        batch, _, length, _ = context.shape
        context = context.transpose(1, 2).reshape(batch, length, self.heads * self.d_k)
        return self.w_o(context), weights if need_weights else None
