"""Decoding: greedy search, batched over sentences, step by step with the key/value cache.

Every result carries the cross-attention of the hypothesis it returns (all layers and
heads), so heatmaps can show exactly what the model looked at while writing it.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from translator.model import Transformer


@dataclass
class Hypothesis:
    tokens: list[int]  # target ids, without BOS and EOS
    score: float  # sum of token log-probabilities (beam search: length-normalised)
    # [layers, heads, len(tokens) + 1, source_len]: one row per generated token and the EOS
    cross_attention: Tensor | None = None


def max_output_length(source_lengths: Tensor, ratio: float, extra: int) -> int:
    """The longest output worth decoding: ratio × the longest source plus a margin."""
    return int(source_lengths.max().item() * ratio) + extra


@torch.no_grad()
def greedy_search(
    model: Transformer,
    source: Tensor,
    bos_id: int,
    eos_id: int,
    max_length_ratio: float = 1.5,
    max_length_extra: int = 10,
    use_cache: bool = True,
    need_attention: bool = True,
) -> list[Hypothesis]:
    """Pick the most probable next token at every step, for every sentence of ``source``
    [batch, S] at once, until every sentence has produced EOS or hit the length limit."""
    batch = source.size(0)
    memory, source_mask = model.encode(source)
    cache = model.new_cache() if use_cache else None
    limit = max_output_length((source != model.config.pad_id).sum(1), max_length_ratio,
                              max_length_extra)
    generated = torch.full((batch, 1), bos_id, dtype=torch.long, device=source.device)
    scores = torch.zeros(batch, device=source.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=source.device)
    attention_steps: list[Tensor] = []  # each [batch, layers, heads, 1, S]
    for _ in range(limit):
        step_input = generated[:, -1:] if use_cache else generated
        out = model.decode(step_input, memory, source_mask, cache, need_weights=need_attention)
        log_probs = out.logits[:, -1].float().log_softmax(-1)
        next_token = log_probs.argmax(-1)
        next_token = torch.where(finished, torch.full_like(next_token, model.config.pad_id),
                                 next_token)
        scores += torch.where(finished, 0.0, log_probs.gather(1, next_token[:, None]).squeeze(1))
        if need_attention:
            attention_steps.append(torch.stack([w[:, :, -1:] for w in out.cross_attention], 1))
        generated = torch.cat([generated, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    return [_hypothesis(generated[i, 1:], scores[i].item(), attention_steps, i, eos_id)
            for i in range(batch)]


def _hypothesis(
    tokens: Tensor, score: float, attention_steps: list[Tensor], row: int, eos_id: int
) -> Hypothesis:
    ids = tokens.tolist()
    length = ids.index(eos_id) if eos_id in ids else len(ids)
    attention = None
    if attention_steps:
        steps = min(length + 1, len(attention_steps))  # the EOS row too, when there is one
        attention = torch.cat([a[row] for a in attention_steps[:steps]], dim=2).float().cpu()
    return Hypothesis(ids[:length], score, attention)
