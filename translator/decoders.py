"""Decoders: what turns source ids into hypotheses, and nothing else.

    decoder.decode(sources, search, batch_size, need_attention, prefixes)
        -> list[list[Hypothesis]]

The text around a search (tags of a model of both directions, long inputs split into parts,
script warnings, the tag's attention column left out, parts joined) is done once, by
`translator.translate.Translator`, for every decoder. A decoder gets the source ids of each part
(without EOS, a tag first for a model of both directions) and returns each one's n-best
hypotheses (`translator.search.Hypothesis`: target ids, score, cross-attention
[layers, heads, T+1, S+1], and what the model weighed at each step when
``search.alternatives`` asks), best first; ``prefixes`` (target ids, one per source) start the
outputs. Two decoders, as OpenNMT-py swaps only its
``translate_batch`` call for CTranslate2:

- `TorchDecoder`: the run's `Transformer`, searched by `translator.search` (greedy or beam), and
  for a run trained with ``train.alignment_full_context`` the attention of a pass over the
  finished translation without the causal mask;
- `CT2Decoder`: a CTranslate2 export (`translator.ct2`), its ``translate_batch`` call and the
  conversion of its scores and attention to ours. This is the one module that imports
  ``ctranslate2`` (`require_ctranslate2`). What differs from ours:

  - its attention is ``return_attention``: one matrix, the alignment layer's mean of heads
    ([1, 1, T+1, S+1]), which its `AttentionLayout` names; the explorer's per-layer and
    per-head views need the PyTorch decoder;
  - it has ``no_repeat_ngram_size`` but no doubled-word ban: search.no_doubled_words is not
    applied (`CT2Decoder.unsupported` says so);
  - its length penalty is length^α, not GNMT's ((5 + length) / 6)^α: its beam ranks plain
    sums and returns every finished hypothesis, which are ranked here by our formula; still,
    it prunes and stops by its own rules, so beam outputs can differ from ours; greedy outputs
    of a float32 export are ours;
  - it renormalises the log-probabilities after its bans (PAD, BOS, repeated n-grams), so its
    scores can be a little higher than ours for the same output, and an output that reaches a
    sentence's length limit is cut there (ours ends it with a forced EOS, whose
    log-probability its score then lacks).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch

from translator.batching import source_tensor
from translator.config import ModelConfig, SearchConfig
from translator.errors import TranslatorError
from translator.model import Transformer
from translator.search import Hypothesis, RepetitionBans, gnmt_length_penalty, search_in_batches
from translator.tokenizer import Tokenizer

# CTranslate2's beam α: any α ≠ 0 makes it stop as ours does; this one barely changes its
# scores (÷ length^α, undone before ours are computed)
CT2_LENGTH_PENALTY = 1e-6
INSTALL_HINT = 'pip install -e ".[ct2]" (or pip install "ctranslate2>=4,<5")'


class CT2Error(TranslatorError):
    """CTranslate2 is missing, or an export cannot be written or read; the message says why."""


def require_ctranslate2() -> Any:
    """The ctranslate2 module, or a `CT2Error` saying how to install it."""
    try:
        import ctranslate2
    except ImportError:
        raise CT2Error(f"CTranslate2 is not installed; {INSTALL_HINT}") from None
    return ctranslate2


@dataclass(frozen=True)
class AttentionLayout:
    """What the cross-attention of a decoder's hypotheses holds: which of the model's decoder
    layers its first axis holds, whether its second axis is every head or one mean of them,
    whether it was read without the causal mask, and the engine that computed it when that is
    not ours (named in the titles of its views)."""

    layers: tuple[int, ...]  # the model's decoder layers, in the order of the first axis
    num_layers: int  # decoder layers of the model
    num_heads: int  # heads of each of its layers
    heads_averaged: bool = False  # one mean of all heads instead of each head
    full_context: bool = False  # a pass over the finished translation, no causal mask
    engine: str | None = None  # "CTranslate2"; None: ours

    @classmethod
    def every(cls, num_layers: int, num_heads: int, full_context: bool = False
              ) -> AttentionLayout:
        """Every layer and head, as our model returns them."""
        return cls(tuple(range(num_layers)), num_layers, num_heads, full_context=full_context)


class Decoder(Protocol):
    """What `translator.translate.Translator` needs of a backend."""

    name: str  # "torch" or "ct2"
    device: Any

    @property
    def max_positions(self) -> int: ...

    @property
    def layout(self) -> AttentionLayout: ...

    def decode(self, sources: list[list[int]], search: SearchConfig, batch_size: int = 32,
               need_attention: bool = True, prefixes: list[list[int]] | None = None
               ) -> list[list[Hypothesis]]: ...

    def unsupported(self, search: SearchConfig) -> list[str]: ...


@contextmanager
def evaluating(model: torch.nn.Module) -> Iterator[None]:
    """Eval mode (no dropout) for the duration, then the mode the model had."""
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


# ---------------------------------------------------------------- PyTorch


class TorchDecoder:
    """The run's `Transformer` searched by `translator.search` on the model's device;
    ``full_context``: each hypothesis's attention read again without the causal mask."""

    name = "torch"

    def __init__(self, model: Transformer, tokenizer: Tokenizer,
                 full_context: bool = False) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.full_context = full_context

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def max_positions(self) -> int:
        return self.model.config.max_positions

    @property
    def layout(self) -> AttentionLayout:
        config = self.model.config
        return AttentionLayout.every(config.num_decoder_layers, config.heads, self.full_context)

    def unsupported(self, search: SearchConfig) -> list[str]:
        return []

    def decode(self, sources: list[list[int]], search: SearchConfig, batch_size: int = 32,
               need_attention: bool = True, prefixes: list[list[int]] | None = None
               ) -> list[list[Hypothesis]]:
        tokenizer = self.tokenizer
        bans = RepetitionBans.of(search, tokenizer.target_vocabulary)
        with evaluating(self.model):
            hypotheses = search_in_batches(self.model, sources, tokenizer.pad_id,
                                           tokenizer.bos_id, tokenizer.eos_id, search,
                                           batch_size, need_attention, bans, prefixes)
            if need_attention and self.full_context:
                for ids, nbest in zip(sources, hypotheses):
                    self._full_context_attention(ids, nbest)
        return hypotheses

    @torch.no_grad()
    def _full_context_attention(self, source_ids: list[int], hypotheses: list[Hypothesis]
                                ) -> None:
        """Replace each hypothesis's attention with every decoder layer's cross-attention over
        its finished translation, each row seeing the whole of it ([layers, heads, tokens + 1,
        len(source_ids) + 1]); the source is encoded once for all of them."""
        model, tokenizer, device = self.model, self.tokenizer, self.device
        source = source_tensor([source_ids], tokenizer.pad_id, tokenizer.eos_id).to(device)
        memory, source_mask = model.encode(source)
        for hypothesis in hypotheses:
            target_input = torch.tensor([[tokenizer.bos_id, *hypothesis.tokens]], device=device)
            attention = model.forced_attention(target_input, memory, source_mask,
                                               full_context=True)
            hypothesis.cross_attention = attention[0].float().cpu()


# ---------------------------------------------------------------- CTranslate2


def refuse_steps(search: SearchConfig, prefixes: list[list[int]] | None) -> None:
    """CTranslate2's target_prefix and return_alternatives do not score and list steps as
    ours do (its scores renormalise after bans; its alternatives are of one position only), so
    a forced prefix or per-token alternatives are one sentence naming the backend."""
    if prefixes is not None and any(prefixes):
        raise CT2Error("a forced prefix (--prefix) needs the PyTorch backend; the CTranslate2 "
                       "backend does not score it as the model does")
    if search.alternatives:
        raise CT2Error("per-token alternatives (--alternatives) need the PyTorch backend; the "
                       "CTranslate2 backend does not return them")


class CT2Decoder:
    """A CTranslate2 export (`translator.ct2.export`) of a model of ``config``'s shape, whose
    attention is decoder layer ``alignment_layer``'s mean of heads."""

    name = "ct2"

    def __init__(self, path: str | Path, tokenizer: Tokenizer, config: ModelConfig,
                 alignment_layer: int, device: str = "auto", threads: int = 0) -> None:
        ctranslate2 = require_ctranslate2()
        if device == "auto":
            device = "cuda" if ctranslate2.get_cuda_device_count() > 0 else "cpu"
        self.device = device
        try:
            self.model = ctranslate2.Translator(str(path), device=device,
                                                intra_threads=threads)
        except (RuntimeError, ValueError) as error:
            raise CT2Error(f"CTranslate2 cannot load {path}: {error}") from None
        self.tokenizer = tokenizer
        self.config = config
        self.alignment_layer = alignment_layer
        self._target_ids = {piece: i for i, piece in enumerate(tokenizer.target_vocabulary)}

    @property
    def max_positions(self) -> int:
        return self.config.max_positions

    @property
    def layout(self) -> AttentionLayout:
        return AttentionLayout((self.alignment_layer,), self.config.num_decoder_layers,
                               self.config.heads, heads_averaged=True, engine="CTranslate2")

    def unsupported(self, search: SearchConfig) -> list[str]:
        """The search settings CTranslate2 cannot apply, one sentence each."""
        if search.no_doubled_words:
            return ["CTranslate2 has no doubled-word ban, so search.no_doubled_words is not "
                    "applied"]
        return []

    def output_limit(self, source_ids: list[int], search: SearchConfig) -> int:
        """The most target tokens (EOS not counted) of a source, as `search.output_limits`
        computes for ours: ratio × (pieces + EOS) + extra, within max_positions, less the
        step that must write EOS."""
        limit = int((len(source_ids) + 1) * search.max_length_ratio) + search.max_length_extra
        return max(1, min(limit, self.config.max_positions)) - 1

    def decode(self, sources: list[list[int]], search: SearchConfig, batch_size: int = 32,
               need_attention: bool = True, prefixes: list[list[int]] | None = None
               ) -> list[list[Hypothesis]]:
        """The n-best of each source, in order; sources of similar length are decoded
        together. A forced prefix or recorded alternatives are refused (`refuse_steps`)."""
        refuse_steps(search, prefixes)
        order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
        results: list[list[Hypothesis]] = [[] for _ in sources]
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
                alpha = search.alpha(len(sources[i]))  # a short source's own α
                found = [self._hypothesis(output, k, most, need_attention, search.beam_size,
                                          alpha) for k in range(len(output.hypotheses))]
                found.sort(key=lambda hypothesis: hypothesis.score, reverse=True)
                results[i] = found[: search.n_best]
        return results

    def _hypothesis(self, output: Any, k: int, most: int, need_attention: bool,
                    beam_size: int, alpha: float) -> Hypothesis:
        """Hypothesis ``k`` of ``output``, cut at ``most`` tokens; the score is ours: the sum
        of log-probabilities (EOS included), divided for a beam by the GNMT length penalty."""
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
        if beam_size > 1:  # undo CTranslate2's length^α (its length counts the EOS)
            score *= len(pieces) ** CT2_LENGTH_PENALTY
            score /= gnmt_length_penalty(len(tokens) + 1, alpha)
        return Hypothesis(tokens, score, attention)
