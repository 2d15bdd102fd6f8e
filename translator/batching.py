"""Token ids → padded tensors: length-bucketed token batches for training, padding for search.

`TokenBatchSampler` cuts a split into batches of similar-length sentences within a budget of
padded tokens (and shards them across processes); `make_batch` pads one batch's source and
target ids into the tensors a training step reads; `source_tensor` pads sources alone, for
decoding.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Competence:
    """A competence-based curriculum (Platanios et al. 2019, square-root competence): at
    batch t of the first ``steps``, only the easiest c(t) of the pairs may be drawn,
    c(t) = √(t(1 − c0²)/steps + c0²), from c0 = ``initial`` up to all of them. c(t) is rounded
    up to a ``levels``-th, so the eligible pairs are batched afresh at most ``levels`` times."""

    difficulty: np.ndarray  # [n] each pair's rank by difficulty as a share, in (0, 1]
    steps: int
    initial: float = 0.01
    levels: int = 20

    @classmethod
    def of(cls, difficulty: np.ndarray, steps: int) -> Competence:
        """From any difficulty score per pair (higher: harder); ties by position."""
        ranks = np.empty(len(difficulty), dtype=np.float64)
        ranks[np.argsort(difficulty, kind="stable")] = np.arange(1, len(difficulty) + 1)
        return cls(ranks / max(len(difficulty), 1), steps)

    def at(self, step: int | np.ndarray) -> np.ndarray:
        """c(step) rounded up to a level (1.0 from ``steps`` on)."""
        c0 = self.initial
        exact = np.sqrt(np.minimum(np.asarray(step) / self.steps, 1.0) * (1 - c0 * c0) + c0 * c0)
        return np.ceil(np.round(exact * self.levels, 9)) / self.levels

    def level(self, step: int) -> tuple[float, int]:
        """(the level at ``step``, the first step at that level)."""
        level = float(self.at(step))
        # c(t) is increasing, so the level's first step is found by bisection
        low, high = 0, step
        while low < high:
            middle = (low + high) // 2
            if self.at(middle) < level:
                low = middle + 1
            else:
                high = middle
        return level, low


class TokenBatchSampler:
    """Batches of sentence indices whose padded size stays within `max_tokens`.

    `lengths[i]` is (source_len, target_len) of pair i as it will appear in the batch tensors
    (count the eos/bos that make_batch adds). A batch costs n_sentences * (longest source +
    longest target); a single pair above `max_tokens` forms a batch of its own.

    Pairs are sorted by length (ties in random order) and cut into batches greedily, so
    neighbours have similar lengths and little padding; the batch order is then shuffled.
    Both depend only on (seed, epoch), so every shard computes the same global order and takes
    every num_shards-th batch. To give all shards the same number of batches, the last
    len % num_shards batches of the (shuffled) order are skipped in that epoch.

    Iterating yields the rest of the current epoch and then moves to the next; `state_dict`
    records (epoch, position) so a restored sampler yields exactly the remaining batches. The
    position counts the batches handed out so far (the trainer takes them one by one, so that
    is also how many it has trained on).
    """

    def __init__(
        self,
        lengths: Sequence[tuple[int, int]] | np.ndarray,
        max_tokens: int,
        seed: int,
        shuffle: bool = True,
        num_shards: int = 1,
        shard_index: int = 0,
        competence: Competence | None = None,
    ) -> None:
        if max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if not 0 <= shard_index < num_shards:
            raise ValueError(f"shard_index {shard_index} is outside 0..{num_shards - 1}")
        # [n, 2] (source, target) lengths: 16 bytes a pair, sorted by numpy each epoch
        self.lengths = np.asarray(lengths, dtype=np.int64).reshape(-1, 2)
        self.max_tokens = max_tokens
        self.seed = seed
        self.shuffle = shuffle
        self.num_shards = num_shards
        self.shard_index = shard_index
        self.epoch = 0
        self.position = 0
        self._batches_per_shard: int | None = None  # counted on first use
        self._cached: tuple[int, list[list[int]]] | None = None  # one epoch's batches
        # a curriculum's first steps draw from the easiest pairs only (see Competence)
        self.competence = competence
        self.curriculum_position = 0  # this shard's batches handed out under the curriculum
        self._level_cache: dict = {}  # the current level: its count and latest pass

    def _global_batches(self, epoch: int) -> list[list[int]]:
        order = list(range(len(self.lengths)))
        rng = random.Random(f"{self.seed}:{epoch}")
        if self.shuffle:
            rng.shuffle(order)
        return self._cut(np.asarray(order, dtype=np.int64), rng)

    def _cut(self, shuffled: np.ndarray, rng: random.Random) -> list[list[int]]:
        """The pairs ``shuffled`` (indices, in random order) as batches in random order."""
        # Sort by (source, target) length; lexsort is stable, so ties keep their random order.
        keys = self.lengths[shuffled]
        ordered = shuffled[np.lexsort((keys[:, 1], keys[:, 0]))]
        sources, targets = self.lengths[ordered].T.tolist() if len(ordered) else ([], [])
        # Cut greedily: a batch grows while its padded size stays within max_tokens.
        cuts: list[int] = []
        size = longest_source = longest_target = 0
        for position, (source_len, target_len) in enumerate(zip(sources, targets)):
            new_source = source_len if source_len > longest_source else longest_source
            new_target = target_len if target_len > longest_target else longest_target
            if size and (size + 1) * (new_source + new_target) > self.max_tokens:
                cuts.append(position)
                size, new_source, new_target = 0, source_len, target_len
            size += 1
            longest_source, longest_target = new_source, new_target
        batches = [batch.tolist() for batch in np.split(ordered, cuts)] if size else []
        if self.shuffle:
            rng.shuffle(batches)
        return batches

    def _all_batches(self, epoch: int) -> list[list[int]]:
        """`_global_batches(epoch)`, kept for the next call (counting the batches and then
        iterating the same epoch, as a run does at its start, costs one sort, not two)."""
        if self._cached is None or self._cached[0] != epoch:
            self._cached = (epoch, self._global_batches(epoch))
        return self._cached[1]

    def epoch_batches(self, epoch: int) -> list[list[int]]:
        """This shard's batches of `epoch`, in order."""
        batches = self._all_batches(epoch)[self.shard_index :: self.num_shards]
        return batches[: len(self)]

    def _curriculum_batch(self, step: int) -> list[int]:
        """This shard's batch at curriculum step ``step``: the pairs eligible at the step's
        level, cut into batches afresh for each pass over them; shards take turns."""
        level, first_step = self.competence.level(step)
        turn = (step - first_step) * self.num_shards + self.shard_index
        if self._level_cache.get("level") != level:  # a new level: its pass 0, and its count
            self._level_cache = {"level": level, "pass": 0,
                                 "batches": self._level_batches(level, 0)}
            self._level_cache["count"] = len(self._level_cache["batches"])  # every pass's
        passes, index = divmod(turn, self._level_cache["count"])
        if self._level_cache["pass"] != passes:  # only the latest pass is kept
            self._level_cache.update({"pass": passes,
                                      "batches": self._level_batches(level, passes)})
        return self._level_cache["batches"][index]

    def _level_batches(self, level: float, passes: int) -> list[list[int]]:
        """One pass over the pairs eligible at ``level``, cut into batches."""
        difficulty = self.competence.difficulty  # the easiest pair is always eligible
        eligible = np.flatnonzero(difficulty <= max(level, difficulty.min())).tolist()
        rng = random.Random(f"{self.seed}:curriculum:{level}:{passes}")
        rng.shuffle(eligible)
        return self._cut(np.asarray(eligible, dtype=np.int64), rng)

    def __iter__(self) -> Iterator[list[int]]:
        if self.competence is not None:
            while self.curriculum_position < self.competence.steps:
                batch = self._curriculum_batch(self.curriculum_position)
                self.curriculum_position += 1
                yield batch
        batches = self.epoch_batches(self.epoch)
        while self.position < len(batches):
            batch = batches[self.position]
            self.position += 1
            yield batch
        self.epoch += 1
        self.position = 0

    def __len__(self) -> int:
        if self._batches_per_shard is None:
            # The batch count depends only on the sorted lengths, so any epoch gives it.
            self._batches_per_shard = len(self._all_batches(self.epoch)) // self.num_shards
        return self._batches_per_shard

    def state_dict(self) -> dict[str, int]:
        curriculum = {"curriculum_position": self.curriculum_position} if self.competence else {}
        if self.position >= len(self):  # the epoch is used up: resume at the next one
            return {"epoch": self.epoch + 1, "position": 0, **curriculum}
        return {"epoch": self.epoch, "position": self.position, **curriculum}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = int(state["epoch"]), int(state["position"])
        self.curriculum_position = int(state.get("curriculum_position", 0))


def padding_fraction(batches: list[list[int]], lengths: list[tuple[int, int]]) -> float:
    """Share of the padded source+target cells of `batches` that are padding."""
    padded = real = 0
    for batch in batches:
        source_lengths = [lengths[i][0] for i in batch]
        target_lengths = [lengths[i][1] for i in batch]
        padded += len(batch) * (max(source_lengths) + max(target_lengths))
        real += sum(source_lengths) + sum(target_lengths)
    return 1 - real / padded if padded else 0.0


@dataclass
class Batch:
    """Right-padded tensors for one training step."""

    source: torch.Tensor  # [B, S] source ids + eos
    target_input: torch.Tensor  # [B, T] bos + target ids (what the decoder reads)
    target_output: torch.Tensor  # [B, T] target ids + eos (what it must predict)
    num_target_tokens: int  # non-pad positions in target_output, to normalise the loss
    # [B, T, S] guided-alignment targets: row t is the distribution over source positions
    # that target position t should attend to (all zero where the pair has no links)
    alignment: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        return Batch(
            self.source.to(device),
            self.target_input.to(device),
            self.target_output.to(device),
            self.num_target_tokens,
            None if self.alignment is None else self.alignment.to(device),
        )


def pad(rows: list[list[int]], pad_id: int) -> torch.Tensor:
    """[len(rows), longest row] of ids, shorter rows right-padded with ``pad_id``."""
    width = max(len(row) for row in rows)
    return torch.tensor([row + [pad_id] * (width - len(row)) for row in rows], dtype=torch.long)


def source_tensor(source_ids: list[list[int]], pad_id: int, eos_id: int) -> torch.Tensor:
    """[B, S] source ids + EOS, right-padded: what the encoder reads (training and search)."""
    return pad([[*ids, eos_id] for ids in source_ids], pad_id)


def make_batch(
    source_ids: list[list[int]], target_ids: list[list[int]], pad_id: int, bos_id: int, eos_id: int
) -> Batch:
    """Pad a list of (source, target) id sequences, without bos/eos, into a Batch."""
    if not source_ids or len(source_ids) != len(target_ids):
        raise ValueError(
            f"need equally many sources and targets, got {len(source_ids)} and {len(target_ids)}"
        )
    source = source_tensor(source_ids, pad_id, eos_id)
    target_input = pad([[bos_id, *ids] for ids in target_ids], pad_id)
    target_output = pad([[*ids, eos_id] for ids in target_ids], pad_id)
    num_target_tokens = sum(len(ids) + 1 for ids in target_ids)
    return Batch(source, target_input, target_output, num_target_tokens)



def alignment_targets(piece_links: list[list[tuple[int, int]] | None], target_len: int,
                      source_len: int) -> torch.Tensor:
    """[B, target_len, source_len] attention targets from each row's (source piece, target
    piece) links: a target piece linked to n source pieces puts 1/n on each of them; pieces
    without links (and rows given None) stay all zero and are left out of the loss."""
    cells = [(row, target, source) for row, links in enumerate(piece_links)
             for source, target in links or () if source < source_len and target < target_len]
    targets = torch.zeros(len(piece_links), target_len, source_len)
    if cells:  # one indexed write for the whole batch: a write per link costs ~7% of a step
        rows, target_pieces, source_pieces = torch.tensor(cells).unbind(1)
        targets[rows, target_pieces, source_pieces] = 1.0
    counts = targets.sum(-1, keepdim=True)
    return targets / counts.clamp_min(1.0)
