"""Decoding: greedy and beam search, batched over sentences, step by step with the key/value
cache.

Asked for (``need_attention``), every result carries the cross-attention of the hypothesis
it returns (all layers and heads), so heatmaps can show exactly what the model looked at
while writing it; for beam search that is the attention of the chosen hypothesis, traced back
through the beam. The searches record it by default; `search_in_batches`, which serves
translation in bulk, only when asked.

Both searches give each sentence its own length limit (``ratio`` × its source length +
``extra``, at most the model's ``max_positions``) and make the model end with EOS when it
reaches it, so a sentence decodes the same alone or in a batch and every hypothesis has an
EOS row of attention.

Asked for (``alternatives`` k > 0), every result also carries what the model weighed at each
of its steps: the log-probability of each token it wrote (EOS last) and the k most probable
tokens of that step with their probabilities, after the bans, the model's own probabilities
as the score uses them (`TokenRecords`). Given a ``prefix`` (target ids per sentence), a search
writes those ids first, each scored by the model's own log-probability of it (`ForcedPrefix`),
and continues from there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from translator.batching import source_tensor
from translator.config import SearchConfig
from translator.model import Transformer


@dataclass
class Hypothesis:
    tokens: list[int]  # target ids, without BOS and EOS
    # greedy: the sum of token log-probabilities (EOS included);
    # beam: that sum divided by the GNMT length penalty, the score beams are ranked by
    score: float
    # [layers, heads, len(tokens) + 1, source_len]: one row per generated token and the EOS;
    # columns: source pieces + the source EOS (padding columns of a batch are 0)
    cross_attention: Tensor | None = None
    log_prob: float | None = None  # the sum of token log-probabilities, EOS included
    # asked for (alternatives k > 0): each token's log-probability, EOS last (len(tokens) + 1)
    token_log_probs: list[float] | None = None
    # and for each of those steps, its k most probable tokens as (id, probability), best
    # first, after the bans (a forced prefix's step lists what the model would have chosen)
    alternatives: list[list[tuple[int, float]]] | None = None


def output_limits(
    source: Tensor, model: Transformer, ratio: float, extra: int
) -> Tensor:
    """The longest output (EOS included) worth decoding for each sentence: ``ratio`` × its
    source length plus a margin, within the positions the model knows."""
    lengths = (source != model.config.pad_id).sum(1)
    limits = (lengths.float() * ratio).long() + extra
    return limits.clamp(min=1, max=model.config.max_positions)


def gnmt_length_penalty(length: int, alpha: float) -> float:
    """GNMT's lp(Y) = ((5 + |Y|) / 6)^α (Wu et al., 2016); |Y| counts the EOS too."""
    return ((5.0 + length) / 6.0) ** alpha


def _next_log_probs(logits: Tensor, at_limit: Tensor, model: Transformer, bos_id: int,
                    eos_id: int) -> Tensor:
    """Log-probabilities of the next token from the newest position's ``logits`` [rows, V].
    PAD and BOS are never a next token; rows ``at_limit`` (a [rows] mask) may only end. The
    allowed tokens keep the model's log-probabilities, so scores stay honest."""
    log_probs = logits.float().log_softmax(-1)
    log_probs[:, [model.config.pad_id, bos_id]] = float("-inf")
    if at_limit.any():
        others = torch.ones(log_probs.size(-1), dtype=torch.bool, device=log_probs.device)
        others[eos_id] = False
        log_probs = log_probs.masked_fill(at_limit[:, None] & others, float("-inf"))
    return log_probs


def ban_repeated_ngrams(log_probs: Tensor, generated: Tensor, n: int) -> Tensor:
    """``log_probs`` [rows, V] with -inf for every token that would repeat an n-gram the row's
    ``generated`` ids [rows, t] (BOS first) already hold: fairseq's and Hugging Face's
    ``no_repeat_ngram_size``, against the loops ("sister's sister's sister") of a model that
    has seen little data. n = 0 bans nothing."""
    tokens = generated[:, 1:]
    if n <= 0 or tokens.size(1) < n:
        return log_probs
    grams = tokens.unfold(1, n, 1)  # [rows, t - n + 1, n]: every n-gram so far
    prefix = tokens[:, tokens.size(1) - n + 1:]  # the newest n - 1 ids ([rows, 0] for n = 1)
    seen = (grams[:, :, :-1] == prefix[:, None, :]).all(-1)  # n-grams that start like it
    # counted, not written: several n-grams may end in one token, seen or not
    counts = torch.zeros(log_probs.shape, dtype=torch.long, device=log_probs.device)
    counts.scatter_add_(1, grams[:, :, -1], seen.long())
    banned = counts > 0
    return log_probs.masked_fill(banned, float("-inf"))


class DoubledWords:
    """Which pieces would write the previous word again, case aside, however the pieces cut
    it: no "failed failed", "UPI UPI UPI", "Water water" ("▁W at er ▁water") or "Red red",
    the commonest loop of a model trained on little data (60 of 460 test translations of the
    2026-12-01 default run; 0 of the references). A piece is banned when it would complete a
    word equal to the one before it: a word-beginning piece equal to the newest word, or a
    piece that continues the newest word into the word before it."""

    def __init__(self, target_pieces: Sequence[str]) -> None:
        self.begins_word = [piece.startswith("▁") for piece in target_pieces]
        self.text = [piece.removeprefix("▁").lower() for piece in target_pieces]
        self.beginning: dict[str, list[int]] = {}  # a word's text → pieces that are that word
        self.continuing: dict[str, list[int]] = {}  # a text → pieces that continue a word so
        for piece, (begins, text) in enumerate(zip(self.begins_word, self.text)):
            if text:
                (self.beginning if begins else self.continuing).setdefault(text, []).append(piece)

    WINDOW = 16  # pieces read back from the newest: two words rarely take more

    def last_words(self, ids: Sequence[int], whole: bool = True) -> tuple[str, str]:
        """(the word before the newest, the newest word so far) of one row's pieces (``whole``:
        all of them, so pieces before the first word-beginning one are a word too)."""
        words, current = [], ""
        for piece in reversed(ids):
            current = self.text[piece] + current
            if self.begins_word[piece]:
                words.append(current)
                current = ""
                if len(words) == 2:
                    break
        # a row that begins inside a word (after a forced prefix, say); a cut word is none
        words += [current if whole else "", ""]
        return words[1], words[0]

    def banned(self, generated: Tensor) -> list[list[int]]:
        """For each row of ``generated`` [rows, t] (BOS first), the pieces it may not write."""
        banned, whole = [], generated.size(1) - 1 <= self.WINDOW
        for ids in generated[:, -min(self.WINDOW, generated.size(1) - 1):].tolist():
            before, newest = self.last_words(ids, whole)
            pieces = list(self.beginning.get(newest, ())) if newest else []
            if newest and len(before) > len(newest) and before.startswith(newest):
                pieces += self.continuing.get(before[len(newest):], ())
            banned.append(pieces)
        return banned


def ban_doubled_words(log_probs: Tensor, generated: Tensor, words: DoubledWords | None
                      ) -> Tensor:
    """``log_probs`` [rows, V] with -inf for the pieces that would double the row's newest
    word (`DoubledWords`). None bans nothing."""
    if words is None or generated.size(1) < 2:
        return log_probs
    cells = [(row, piece) for row, pieces in enumerate(words.banned(generated))
             for piece in pieces]
    if not cells:
        return log_probs
    rows, pieces = torch.tensor(cells, device=log_probs.device).unbind(1)
    log_probs = log_probs.clone()
    log_probs[rows, pieces] = float("-inf")
    return log_probs


@dataclass
class RepetitionBans:
    """What a search refuses to write again: n-grams of pieces (``no_repeat_ngram`` n > 0)
    and, given the target pieces (`DoubledWords`), a word right after itself."""

    no_repeat_ngram: int = 0
    doubled_words: DoubledWords | None = None

    @classmethod
    def of(cls, search: SearchConfig, target_pieces: Sequence[str]) -> RepetitionBans | None:
        """The bans ``search`` asks for, for a target vocabulary of ``target_pieces`` (id →
        piece); None when it asks for none."""
        if not search.no_repeat_ngram and not search.no_doubled_words:
            return None
        words = DoubledWords(target_pieces) if search.no_doubled_words else None
        return cls(search.no_repeat_ngram, words)

    def apply(self, log_probs: Tensor, generated: Tensor) -> Tensor:
        log_probs = ban_repeated_ngrams(log_probs, generated, self.no_repeat_ngram)
        return ban_doubled_words(log_probs, generated, self.doubled_words)


class TokenRecords:
    """For every row of a search, what it weighed along its path: each written token's
    log-probability and its step's ``k`` most probable tokens (ids, probabilities). Rows of a
    beam are reordered every step; ``advance`` follows them, as the key/value cache does."""

    def __init__(self, rows: int, k: int, device: torch.device) -> None:
        self.k = k
        self.log_probs = torch.zeros(rows, 0, device=device)  # [rows, steps]
        self.ids = torch.zeros(rows, 0, k, dtype=torch.long, device=device)  # [rows, steps, k]
        self.probs = torch.zeros(rows, 0, k, device=device)
        self.step_ids = self.step_probs = torch.zeros(0)  # this step's best k, [rows, k]

    def weigh(self, log_probs: Tensor) -> None:
        """Keep this step's best k of ``log_probs`` [rows, V] (after bans, before forcing)."""
        values, self.step_ids = log_probs.topk(min(self.k, log_probs.size(-1)), dim=-1)
        self.step_probs = values.exp()

    def extended(self, rows: Tensor, token_log_probs: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """The paths of ``rows`` with this step's token (its log-probability) and best k."""
        return (torch.cat([self.log_probs[rows], token_log_probs[:, None]], dim=1),
                torch.cat([self.ids[rows], self.step_ids[rows, None]], dim=1),
                torch.cat([self.probs[rows], self.step_probs[rows, None]], dim=1))

    def advance(self, rows: Tensor, token_log_probs: Tensor) -> None:
        """Row i of the next step continues row ``rows[i]`` with a token of that log-prob."""
        self.log_probs, self.ids, self.probs = self.extended(rows, token_log_probs)

    @staticmethod
    def fields(paths: tuple[Tensor, Tensor, Tensor], row: int, steps: int) -> dict:
        """The `Hypothesis` fields of row ``row`` of ``paths`` (`extended`), first ``steps``."""
        log_probs, ids, probs = (tensor[row, :steps].tolist() for tensor in paths)
        return {"token_log_probs": log_probs,
                "alternatives": [list(zip(i, p)) for i, p in zip(ids, probs)]}


class ForcedPrefix:
    """Target ids each sentence's output starts with (OpenNMT-py's and CTranslate2's target
    prefix): at step t < len(prefix) a row may write only prefix[t], at the model's own
    log-probability of it (no ban applies to a forced token); after it, the search is free."""

    def __init__(self, prefixes: Sequence[Sequence[int]], device: torch.device) -> None:
        self.lengths = torch.tensor([len(p) for p in prefixes], device=device)
        width = int(self.lengths.max()) if len(prefixes) else 0
        self.ids = torch.tensor([list(p) + [0] * (width - len(p)) for p in prefixes],
                                dtype=torch.long, device=device).view(len(prefixes), width)

    def force(self, log_probs: Tensor, logits: Tensor, step: int, sentences: Tensor) -> Tensor:
        """``log_probs`` [rows, V] with the rows of ``sentences`` (each row's sentence) that are
        still in their prefix left only their forced token, scored from ``logits``."""
        if step >= self.ids.size(1):
            return log_probs
        forced = step < self.lengths[sentences]
        if not forced.any():
            return log_probs
        token = self.ids[sentences, step][:, None]
        model_log_prob = logits.float().log_softmax(-1).gather(1, token)
        only = torch.full_like(log_probs, float("-inf")).scatter_(1, token, model_log_prob)
        return torch.where(forced[:, None], only, log_probs)

    def limits(self, limits: Tensor, max_positions: int) -> Tensor:
        """``limits`` raised to leave each sentence room for its prefix and the EOS."""
        needed = self.lengths + 1
        if int(needed.max()) > max_positions:
            raise ValueError(f"a prefix of {int(needed.max()) - 1} pieces leaves no room in "
                             f"the model's {max_positions} positions")
        return torch.maximum(limits, needed)


def _forced(prefix: Sequence[Sequence[int]] | None, batch: int, device: torch.device
            ) -> ForcedPrefix | None:
    if prefix is None or not any(prefix):
        return None
    if len(prefix) != batch:
        raise ValueError(f"{len(prefix)} prefixes for {batch} sentences")
    return ForcedPrefix(prefix, device)


def _last_step_attention(cross_attention: list[Tensor]) -> Tensor:
    """[rows, layers, heads, S]: the newest target position's weights of every layer."""
    return torch.stack([weights[:, :, -1] for weights in cross_attention], dim=1)


# ---------------------------------------------------------------- greedy search


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
    bans: RepetitionBans | None = None,
    alternatives: int = 0,
    prefix: Sequence[Sequence[int]] | None = None,
) -> list[Hypothesis]:
    """Pick the most probable next token at every step, for every sentence of ``source``
    [batch, S] at once, until every sentence has produced EOS; ``alternatives`` > 0 records
    each step's best ``alternatives`` tokens (`TokenRecords`), a ``prefix`` (target ids per
    sentence) is written first (`ForcedPrefix`)."""
    batch = source.size(0)
    pad_id = model.config.pad_id
    memory, source_mask = model.encode(source)
    cache = model.new_cache() if use_cache else None
    limits = output_limits(source, model, max_length_ratio, max_length_extra)
    forced = _forced(prefix, batch, source.device)
    if forced is not None:
        limits = forced.limits(limits, model.config.max_positions)
    every_row = torch.arange(batch, device=source.device)
    records = TokenRecords(batch, alternatives, source.device) if alternatives > 0 else None
    generated = torch.full((batch, 1), bos_id, dtype=torch.long, device=source.device)
    scores = torch.zeros(batch, device=source.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=source.device)
    attention_steps: list[Tensor] = []  # each [batch, layers, heads, S]
    for step in range(int(limits.max())):
        step_input = generated[:, -1:] if use_cache else generated
        out = model.decode(step_input, memory, source_mask, cache, need_weights=need_attention)
        log_probs = _next_log_probs(out.logits[:, -1], step == limits - 1, model, bos_id, eos_id)
        if bans is not None:
            log_probs = bans.apply(log_probs, generated)
        if records is not None:
            records.weigh(log_probs)
        if forced is not None:
            log_probs = forced.force(log_probs, out.logits[:, -1], step, every_row)
        next_token = log_probs.argmax(-1)
        next_token = torch.where(finished, torch.full_like(next_token, pad_id), next_token)
        token_log_probs = log_probs.gather(1, next_token[:, None]).squeeze(1)
        scores += torch.where(finished, 0.0, token_log_probs)
        if records is not None:
            records.advance(every_row, token_log_probs)
        if need_attention:
            attention_steps.append(_last_step_attention(out.cross_attention))
        generated = torch.cat([generated, next_token[:, None]], dim=1)
        finished |= next_token == eos_id
        if finished.all():
            break
    attention = torch.stack(attention_steps, dim=3).float().cpu() if need_attention else None
    hypotheses = []
    for row, ids in enumerate(generated[:, 1:].tolist()):
        length = ids.index(eos_id)  # there is one: the limit forces it
        rows = attention[row, :, :, : length + 1] if attention is not None else None
        score = scores[row].item()
        steps = {} if records is None else TokenRecords.fields(
            (records.log_probs, records.ids, records.probs), row, length + 1)
        hypotheses.append(Hypothesis(ids[:length], score, rows, log_prob=score, **steps))
    return hypotheses


# ---------------------------------------------------------------- beam search


class _AttentionHistory:
    """The cross-attention of every step for every beam row, plus back-pointers from each
    step's rows to the rows they grew from, so a finished hypothesis's attention is
    gathered once, at the end, instead of copying every beam's history at every step."""

    def __init__(self) -> None:
        self.steps: list[Tensor] = []  # step t: [rows of step t, layers, heads, S]
        # parents[t][r]: the row of step t that row r of step t + 1 extends
        self.parents: list[Tensor] = []

    def trace(self, rows: Tensor) -> Tensor:
        """[len(rows), layers, heads, steps so far, S] for ``rows`` of the newest step."""
        newest_first = []
        for t in range(len(self.steps) - 1, -1, -1):
            newest_first.append(self.steps[t][rows])
            if t > 0:
                rows = self.parents[t - 1][rows]
        return torch.stack(newest_first[::-1], dim=3)


@torch.no_grad()
def beam_search(
    model: Transformer,
    source: Tensor,
    bos_id: int,
    eos_id: int,
    beam_size: int = 5,
    n_best: int = 1,
    length_penalty: float = 1.0,
    max_length_ratio: float = 1.5,
    max_length_extra: int = 10,
    use_cache: bool = True,
    need_attention: bool = True,
    bans: RepetitionBans | None = None,
    alternatives: int = 0,
    prefix: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Keep the ``beam_size`` most probable partial translations of every sentence of
    ``source`` [batch, S], all sentences in one batch of batch × beam_size rows.

    At every step each beam proposes its best continuations; of the 2 × beam_size best
    (by summed log-probability), those among the first beam_size that end with EOS are
    finished, and the beam_size best that don't end continue. A sentence is done when
    beam_size of its hypotheses have finished (or it reached its length limit); done
    sentences leave the batch, and decoding stops when every sentence is done.

    Returns, per sentence, up to ``n_best`` hypotheses sorted best first by
    ``score = log_prob / ((5 + length) / 6) ** length_penalty`` (GNMT's α; the length counts
    the EOS; α = 0 ranks by the plain sum of log-probabilities). ``bans`` keep repetitions
    out of every hypothesis (`RepetitionBans`). ``alternatives`` > 0 records, along each
    returned path, each step's best tokens (`TokenRecords`); a ``prefix`` (target ids per
    sentence) is written first by the one live beam (`ForcedPrefix`).
    """
    if not 1 <= n_best <= beam_size:
        raise ValueError(f"n_best ({n_best}) must be between 1 and beam_size ({beam_size})")
    k, device = beam_size, source.device
    memory, source_mask = model.encode(source)
    # rows i*k .. i*k+k-1 hold the beams of sentence i
    memory = memory.repeat_interleave(k, dim=0)
    source_mask = source_mask.repeat_interleave(k, dim=0)
    limits = output_limits(source, model, max_length_ratio, max_length_extra)
    forced = _forced(prefix, source.size(0), device)
    if forced is not None:
        limits = forced.limits(limits, model.config.max_positions)
    records = (TokenRecords(source.size(0) * k, alternatives, device) if alternatives > 0
               else None)
    sentence = torch.arange(source.size(0), device=device)  # which sentence each group is
    cache = model.new_cache() if use_cache else None
    generated = torch.full((source.size(0) * k, 1), bos_id, dtype=torch.long, device=device)
    beam_log_probs = torch.zeros(source.size(0), k, device=device)
    beam_log_probs[:, 1:] = float("-inf")  # one live beam at first, not k copies of it
    finished: list[list[Hypothesis]] = [[] for _ in range(source.size(0))]
    history = _AttentionHistory() if need_attention else None
    for step in range(int(limits.max())):
        active = sentence.numel()
        step_input = generated[:, -1:] if use_cache else generated
        out = model.decode(step_input, memory, source_mask, cache, need_weights=need_attention)
        if history is not None:
            history.steps.append(_last_step_attention(out.cross_attention))
        at_limit = step == limits[sentence] - 1
        log_probs = _next_log_probs(out.logits[:, -1], at_limit.repeat_interleave(k), model,
                                    bos_id, eos_id)
        if bans is not None:
            log_probs = bans.apply(log_probs, generated)
        if records is not None:
            records.weigh(log_probs)
        if forced is not None:
            log_probs = forced.force(log_probs, out.logits[:, -1], step,
                                     sentence.repeat_interleave(k))
        vocab = log_probs.size(-1)
        candidates = (beam_log_probs.view(-1, 1) + log_probs).view(active, k * vocab)
        candidate_scores, index = candidates.topk(2 * k, dim=1)
        candidate_tokens = index % vocab
        candidate_rows = index // vocab + torch.arange(active, device=device)[:, None] * k
        token_log_probs = (log_probs[candidate_rows, candidate_tokens] if records is not None
                           else None)

        ends = (candidate_tokens == eos_id) & (candidate_scores > float("-inf"))
        ends[:, k:] = False  # an EOS outside the best k would not have been kept
        _finish(ends, candidate_scores, candidate_rows, sentence, generated, history,
                finished, k, length_penalty, records, token_log_probs)
        done = at_limit | torch.tensor([len(finished[s]) >= k for s in sentence.tolist()],
                                       device=device)
        if done.all():
            break

        continuing = candidate_scores.masked_fill(candidate_tokens == eos_id, float("-inf"))
        beam_log_probs, keep = continuing.topk(k, dim=1)
        rows = candidate_rows.gather(1, keep)[~done].view(-1)
        tokens = candidate_tokens.gather(1, keep)[~done].view(-1)
        beam_log_probs, sentence = beam_log_probs[~done], sentence[~done]
        generated = torch.cat([generated[rows], tokens[:, None]], dim=1)
        if records is not None:
            records.advance(rows, token_log_probs.gather(1, keep)[~done].view(-1))
        if done.any():  # memory is the same for a sentence's beams: only drop done ones
            kept_rows = (~done).repeat_interleave(k)
            memory, source_mask = memory[kept_rows], source_mask[kept_rows]
        if cache is not None:
            cache.select(rows)
        if history is not None:
            history.parents.append(rows)
    return [sorted(hypotheses, key=lambda h: h.score, reverse=True)[:n_best]
            for hypotheses in finished]


def _finish(
    ends: Tensor,
    scores: Tensor,
    rows: Tensor,
    sentence: Tensor,
    generated: Tensor,
    history: _AttentionHistory | None,
    finished: list[list[Hypothesis]],
    beam_size: int,
    alpha: float,
    records: TokenRecords | None = None,
    token_log_probs: Tensor | None = None,
) -> None:
    """Turn the candidates marked in ``ends`` [active, 2k] into finished hypotheses, best
    first, until their sentence has ``beam_size`` of them; with ``records``, each carries its
    path's (``token_log_probs`` [active, 2k]: each candidate's own)."""
    chosen = [(group, column) for group, column in ends.nonzero().tolist()
              if len(finished[int(sentence[group])]) < beam_size]
    if not chosen:
        return
    groups, columns = zip(*chosen)
    chosen_rows = rows[list(groups), list(columns)]
    attention = history.trace(chosen_rows).float().cpu() if history is not None else None
    chosen_scores = scores[list(groups), list(columns)].tolist()
    token_lists = generated[chosen_rows, 1:].tolist()
    paths = None
    if records is not None:
        paths = records.extended(chosen_rows, token_log_probs[list(groups), list(columns)])
    for i, (group, log_prob, tokens) in enumerate(zip(groups, chosen_scores, token_lists)):
        hypotheses = finished[int(sentence[group])]
        if len(hypotheses) < beam_size:
            score = log_prob / gnmt_length_penalty(len(tokens) + 1, alpha)
            weights = attention[i] if attention is not None else None
            steps = {} if paths is None else TokenRecords.fields(paths, i, len(tokens) + 1)
            hypotheses.append(Hypothesis(tokens, score, weights, log_prob=log_prob, **steps))


# ---------------------------------------------------------------- many sentences


@torch.no_grad()
def search_in_batches(
    model: Transformer,
    sources: list[list[int]],
    pad_id: int,
    bos_id: int,
    eos_id: int,
    search: SearchConfig,
    batch_size: int = 64,
    need_attention: bool = False,
    bans: RepetitionBans | None = None,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Search sentences of source ids (without EOS) in batches of similar length as ``search``
    says: greedy for beam size 1, else beam search; ``bans`` (`RepetitionBans.of`) holds what
    no hypothesis may repeat, ``search.alternatives`` how many of each step's best tokens are
    recorded; ``prefixes`` (target ids, one per source) start the outputs. The n-best lists
    come back in the order of ``sources``."""
    device = next(model.parameters()).device
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[Hypothesis]] = [[] for _ in sources]
    for chunk in _chunks(order, [search.alpha(len(sources[i])) for i in order], batch_size):
        alpha = search.alpha(len(sources[chunk[0]]))
        source = source_tensor([sources[i] for i in chunk], pad_id, eos_id).to(device)
        options = {"max_length_ratio": search.max_length_ratio,
                   "max_length_extra": search.max_length_extra,
                   "need_attention": need_attention, "bans": bans,
                   "alternatives": search.alternatives,
                   "prefix": None if prefixes is None else [prefixes[i] for i in chunk]}
        if search.beam_size == 1:
            found = [[h] for h in greedy_search(model, source, bos_id, eos_id, **options)]
        else:
            found = beam_search(model, source, bos_id, eos_id, search.beam_size, search.n_best,
                                alpha, **options)
        for i, nbest in zip(chunk, found):
            results[i] = nbest
    return results


def _chunks(order: list[int], alphas: list[float], batch_size: int) -> list[list[int]]:
    """``order`` cut into batches of at most ``batch_size`` that each share one α."""
    chunks: list[list[int]] = []
    previous = None
    for i, alpha in zip(order, alphas):
        if not chunks or len(chunks[-1]) == batch_size or alpha != previous:
            chunks.append([])
        chunks[-1].append(i)
        previous = alpha
    return chunks
