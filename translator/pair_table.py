"""The clean train split as sentence pairs in Arrow: `PairTable` reads them (in memory, or an
Arrow IPC file one record batch of BATCH_ROWS pairs at a time, UTF-8 strings rather than Python
objects) and `PairWriter` writes them as the data pipeline hands them over. The prepared-data
cache keeps the split this way (train.arrow: `translator.encoded`).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pyarrow as pa

from translator.data import Pair
from translator.rows import BATCH_ROWS

_PAIR_SCHEMA = pa.schema([("source", pa.string()), ("target", pa.string())])


class PairTable(Sequence):
    """Sentence pairs in Arrow (UTF-8 strings, not Python objects): in memory, or an Arrow IPC
    file read one batch of BATCH_ROWS at a time."""

    def __init__(self, batches: list[pa.RecordBatch] | None = None,
                 path: Path | None = None) -> None:
        self._batches = batches
        self._path = path
        if path is not None:  # every batch but the last holds BATCH_ROWS pairs
            with pa.OSFile(str(path)) as file:
                reader = pa.ipc.open_file(file)
                last = reader.num_record_batches - 1
                self._count = last * BATCH_ROWS + reader.get_batch(last).num_rows \
                    if last >= 0 else 0
        else:
            self._count = sum(batch.num_rows for batch in batches or [])

    def __len__(self) -> int:
        return self._count

    def batches(self) -> Iterator[list[Pair]]:
        """The pairs, BATCH_ROWS at a time."""
        for batch in self._record_batches():
            yield list(map(Pair, batch.column(0).to_pylist(), batch.column(1).to_pylist()))

    def __iter__(self) -> Iterator[Pair]:
        return itertools.chain.from_iterable(self.batches())

    def __getitem__(self, index: int) -> Pair:  # type: ignore[override]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        batch = self._record_batch(index // BATCH_ROWS)
        row = index % BATCH_ROWS
        return Pair(batch.column(0)[row].as_py(), batch.column(1)[row].as_py())

    def sample(self, count: int, shuffle: bool, seed: int) -> list[Pair]:
        """``count`` pairs: a uniform random sample (in corpus order), or the first ones."""
        if count <= 0 or count >= len(self):
            return list(self)
        if not shuffle:
            return list(itertools.islice(self, count))
        chosen = np.sort(np.random.default_rng(seed).choice(len(self), count, replace=False))
        found, start = [], 0
        for batch in self._record_batches():
            stop = start + batch.num_rows
            here = chosen[(chosen >= start) & (chosen < stop)] - start
            if len(here):
                taken = batch.take(pa.array(here))
                found += map(Pair, taken.column(0).to_pylist(), taken.column(1).to_pylist())
            start = stop
        return found

    def _record_batches(self) -> Iterator[pa.RecordBatch]:
        if self._path is None:
            yield from self._batches or []
            return
        with pa.OSFile(str(self._path)) as file:
            reader = pa.ipc.open_file(file)
            for i in range(reader.num_record_batches):
                yield reader.get_batch(i)

    def _record_batch(self, number: int) -> pa.RecordBatch:
        if self._path is None:
            return self._batches[number]
        with pa.OSFile(str(self._path)) as file:
            return pa.ipc.open_file(file).get_batch(number)


class PairWriter:
    """Collects pairs into record batches of BATCH_ROWS: into an Arrow IPC file, or kept."""

    def __init__(self, path: Path | None) -> None:
        self._pending: list[Pair] = []
        self.batches: list[pa.RecordBatch] = []
        self._file = pa.OSFile(str(path), "wb") if path is not None else None
        self._writer = pa.ipc.new_file(self._file, _PAIR_SCHEMA) if self._file else None

    def write(self, pairs: list[Pair]) -> None:
        self._pending += pairs
        while len(self._pending) >= BATCH_ROWS:
            self._flush(self._pending[:BATCH_ROWS])
            del self._pending[:BATCH_ROWS]

    def close(self) -> None:
        if self._pending:
            self._flush(self._pending)
            self._pending = []
        if self._writer is not None:
            self._writer.close()
            self._file.close()

    def _flush(self, pairs: list[Pair]) -> None:
        batch = pa.record_batch([pa.array([p.source for p in pairs], pa.string()),
                                 pa.array([p.target for p in pairs], pa.string())],
                                schema=_PAIR_SCHEMA)
        if self._writer is not None:
            self._writer.write_batch(batch)
        else:
            self.batches.append(batch)
