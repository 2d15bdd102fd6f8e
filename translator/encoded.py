"""The encoded corpus as arrays, and the cache that lets a second run or a resume start at once.

`prepare_data` turns a config's data and tokenizer sections into what training reads: the clean
splits, the tokenizer and the token ids of every pair. Each of its three stages is kept in the
cache folder (``data.cache_dir``; by default ``<train.output_dir>/cache``) under a key of all
it depends on::

    data-KEY/        the clean splits: train.arrow (Arrow IPC), dev.jsonl, test.jsonl, report
                     KEY: the raw data's fingerprint (data.data_fingerprint) + the data section
    tokenizer-KEY/   SentencePiece trained on a sample of the clean train split
                     KEY: the data key + the tokenizer section
    encoded-KEY/     the train split's token ids: flat arrays and offsets (.npy, memory-mapped)
                     KEY: the data key + the tokenizer's fingerprint + model.max_positions

A second run with the same data and tokenizer settings, or a resume, finds all three and reads
no text at all; a change of the data or of the tokenizer rebuilds what depends on it. Each
entry is written to a temporary folder and renamed into place, and its meta.json lists the
size and hash of every file, checked before the entry is used: a damaged entry is rebuilt with
a warning, never trusted.

`EncodedCorpus` holds token ids as one flat array per side and an offsets array (2 bytes a
token, 4 beyond 65,536 pieces), never as lists of Python ints, and pads a batch of them into
the same tensors as `batching.make_batch`.

Why one module of ~670 lines: the arrays, the cache entries and the three stages share one
contract (an entry's key names everything its arrays were made from), which reads best in one
place; split, each part would need the others to be understood.
"""

from __future__ import annotations

import array
import dataclasses
import hashlib
import itertools
import json
import logging
import os
import shutil
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import torch
import torch.distributed as dist

from translator import data as data_module
from translator import direction as direction_module
from translator import tokenizer as tokenizer_module
from translator.batching import Batch
from translator.config import Config, load_config
from translator.data import (
    BATCH_ROWS,
    LoadedData,
    Pair,
    data_fingerprint,
    load_splits,
)
from translator.direction import TAGS, Direction, split_tag
from translator.errors import TranslatorError
from translator.tokenizer import Tokenizer, TokenizerError

log = logging.getLogger(__name__)


def source_hash(*paths: str) -> str:
    """A short hash of these source files, for cache keys: an edit makes new entries."""
    return hashlib.sha256(b"".join(Path(path).read_bytes() for path in paths)).hexdigest()[:16]


# The code that makes an entry is part of its key: a change of normalisation, filters,
# SentencePiece training or encoding (a new version of the package, or an edit) makes new
# entries instead of reusing old ones.
DATA_CODE = source_hash(data_module.__file__, direction_module.__file__, __file__)
TOKENIZER_CODE = source_hash(tokenizer_module.__file__)
TOKENIZER_SAMPLE_SEED = 0  # the sample SentencePiece trains on does not follow train.seed
META = "meta.json"
ID_FILES = ("source_ids", "source_offsets", "target_ids", "target_offsets")
_PAIR_SCHEMA = pa.schema([("source", pa.string()), ("target", pa.string())])


class CacheWarning(UserWarning):
    """A cache entry was damaged and is being rebuilt."""


class CacheError(TranslatorError):
    """The cache folder cannot be used; the message says why."""


# ---------------------------------------------------------------- the encoded corpus


class _IdLists(Sequence):
    """One side of an EncodedCorpus as a sequence of lists of ids (made on demand)."""

    def __init__(self, ids: np.ndarray, offsets: np.ndarray) -> None:
        self._ids, self._offsets = ids, offsets

    def __len__(self) -> int:
        return len(self._offsets) - 1

    def __getitem__(self, index: int) -> list[int]:  # type: ignore[override]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        index %= len(self)
        return self._ids[self._offsets[index]:self._offsets[index + 1]].tolist()


class EncodedCorpus:
    """Token ids of n sentence pairs (without bos/eos): per side one flat array of ids and n + 1
    offsets, so that pair i's source ids are ``source_ids[source_offsets[i]:source_offsets[i+1]]``.
    """

    def __init__(self, source_ids: np.ndarray, source_offsets: np.ndarray,
                 target_ids: np.ndarray, target_offsets: np.ndarray) -> None:
        if len(source_offsets) != len(target_offsets):
            raise ValueError("source and target offsets differ in length")
        self._source = (source_ids, source_offsets)
        self._target = (target_ids, target_offsets)

    def __len__(self) -> int:
        return len(self._source[1]) - 1

    @property
    def source_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(flat ids, n + 1 offsets) of the source side."""
        return self._source

    @property
    def target_arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """(flat ids, n + 1 offsets) of the target side."""
        return self._target

    @property
    def num_tokens(self) -> int:
        return len(self._source[0]) + len(self._target[0])

    @property
    def nbytes(self) -> int:
        return sum(array.nbytes for array in (*self._source, *self._target))

    def lengths(self) -> np.ndarray:
        """[n, 2]: the (source, target) length of each pair as a batch holds it (+ eos, +
        bos), what TokenBatchSampler sorts."""
        return np.stack([np.diff(self._source[1]), np.diff(self._target[1])], axis=1) + 1

    def source_difficulty(self, measure: str) -> np.ndarray:
        """[n]: how hard each pair's source is, for a curriculum: "length" in pieces, or
        "rarity", the sum of its pieces' −log unigram probabilities in this corpus (Platanios
        et al. 2019), which grows with length and with rare words."""
        ids, offsets = self._source
        if measure == "length":
            return np.diff(offsets).astype(np.float64)
        counts = np.bincount(ids).astype(np.float64)
        surprisal = -np.log(counts[ids] / len(ids))
        running = np.concatenate([[0.0], np.cumsum(surprisal)])
        return running[offsets[1:]] - running[offsets[:-1]]

    @property
    def source_ids(self) -> Sequence[list[int]]:
        return _IdLists(*self._source)

    @property
    def target_ids(self) -> Sequence[list[int]]:
        return _IdLists(*self._target)

    def batch(self, indices: Sequence[int], pad_id: int, bos_id: int, eos_id: int) -> Batch:
        """The pairs at ``indices`` padded into a Batch: the same tensors as
        ``batching.make_batch`` makes of the same ids."""
        if not len(indices):
            raise ValueError("need at least one pair for a batch")
        rows = np.asarray(indices, dtype=np.int64)
        source = _padded(*self._source, rows, pad_id, end=eos_id)
        target_input = _padded(*self._target, rows, pad_id, start=bos_id)
        target_output = _padded(*self._target, rows, pad_id, end=eos_id)
        target_offsets = self._target[1]
        tokens = int((target_offsets[rows + 1] - target_offsets[rows]).sum()) + len(rows)
        return Batch(torch.from_numpy(source), torch.from_numpy(target_input),
                     torch.from_numpy(target_output), tokens)

    @classmethod
    def encode(cls, batches: Iterable[Sequence[Pair]], tokenizer: Tokenizer,
               max_tokens: int) -> EncodedCorpus:
        """Encode batches of pairs (normalised, as `data.load_splits` gives them), each side cut
        to ``max_tokens - 1`` ids so that it fits the positional table with its eos/bos."""
        dtype = _id_dtype(max(tokenizer.source_vocab_size, tokenizer.target_vocab_size))
        parts: dict[str, list[np.ndarray]] = {"source": [], "target": []}
        counts: dict[str, list[np.ndarray]] = {"source": [], "target": []}
        for pairs in batches:
            if not pairs:
                continue
            sides = (("source", tokenizer.encode_sources, [p.source for p in pairs]),
                     ("target", tokenizer.target_model.encode, [p.target for p in pairs]))
            for side, encode, texts in sides:  # a tagged source: the tag's id first
                ids = [row[: max_tokens - 1] for row in encode(texts)]
                lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
                counts[side].append(lengths)
                parts[side].append(np.fromiter(itertools.chain.from_iterable(ids), dtype=dtype,
                                               count=int(lengths.sum())))
        arrays = []
        for side in ("source", "target"):
            lengths = np.concatenate(counts[side]) if counts[side] else np.zeros(0, np.int64)
            offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
            np.cumsum(lengths, out=offsets[1:])
            ids = np.concatenate(parts[side]) if parts[side] else np.zeros(0, dtype)
            parts[side].clear()
            arrays += [ids, offsets]
        return cls(*arrays)

    def save(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for name, values in zip(ID_FILES, (*self._source, *self._target)):
            np.save(directory / f"{name}.npy", values)

    @classmethod
    def load(cls, directory: Path, vocab_size: int) -> EncodedCorpus:
        """Memory-map the arrays `save` wrote; ValueError if they do not fit together or hold
        ids outside the vocabulary."""
        arrays = [np.load(directory / f"{name}.npy", mmap_mode="r") for name in ID_FILES]
        for ids, offsets in (arrays[:2], arrays[2:]):
            if ids.ndim != 1 or offsets.ndim != 1 or offsets.dtype != np.int64:
                raise ValueError("the arrays have the wrong shape or type")
            if len(offsets) == 0 or offsets[0] != 0 or offsets[-1] != len(ids):
                raise ValueError("the offsets do not span the ids")
            if len(ids) and (np.any(np.diff(offsets) < 0) or int(ids.max()) >= vocab_size):
                raise ValueError("the offsets go backwards or an id is outside the vocabulary")
        return cls(*arrays)


def _id_dtype(vocab_size: int) -> type:
    return np.uint16 if vocab_size <= 1 << 16 else np.int32


def _padded(ids: np.ndarray, offsets: np.ndarray, rows: np.ndarray, pad_id: int,
            start: int | None = None, end: int | None = None) -> np.ndarray:
    """[len(rows), longest + 1] int64: each row's ids with ``start`` before or ``end`` after
    them, right-padded with ``pad_id``."""
    first = offsets[rows]
    lengths = offsets[rows + 1] - first
    width = int(lengths.max()) + 1
    columns = np.arange(width)
    shift = 0 if start is None else 1
    inside = (columns >= shift) & (columns < lengths[:, None] + shift)
    out = np.full((len(rows), width), pad_id, dtype=np.int64)
    out[inside] = ids[(first[:, None] + columns - shift)[inside]]
    if start is None:
        out[np.arange(len(rows)), lengths] = end
    else:
        out[:, 0] = start
    return out


# ---------------------------------------------------------------- the clean train split on disk


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


class _PairWriter:
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


# ---------------------------------------------------------------- cache entries


def _key(*parts: object) -> str:
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as file:
        while chunk := file.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _warn(message: str) -> None:
    log.warning(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


class _Entry:
    """One folder of the cache: KIND-KEY, holding files and meta.json."""

    def __init__(self, root: Path, kind: str, key: str, what: str) -> None:
        self.path = root / f"{kind}-{key}"
        self.key = key
        self.what = what

    def usable(self, skip_hash: Iterable[str] = ()) -> bool:
        """True if the entry is there and whole (every file's size, and its hash unless named
        in ``skip_hash``, as meta.json says); a damaged entry is removed with a warning."""
        if not self.path.exists():
            return False
        problem = self.problem(set(skip_hash))
        if problem is None:
            try:  # meta.json's time is the entry's last use, what `cache clear` ages by
                os.utime(self.path / META)
            except OSError:
                pass  # a read-only cache is still a cache
            return True
        self.discard(problem)
        return False

    def discard(self, problem: str) -> None:
        _warn(f"the cached {self.what} in {self.path} is damaged ({problem}); rebuilding it")
        shutil.rmtree(self.path, ignore_errors=True)

    def problem(self, skip_hash: set[str]) -> str | None:
        try:
            meta = json.loads((self.path / META).read_text(encoding="utf-8"))
            files = {str(name): (int(size), str(digest))
                     for name, (size, digest) in dict(meta["files"]).items()}
        except (OSError, ValueError, KeyError, TypeError):
            return f"{META} is missing or unreadable"
        if meta.get("key") != self.key:
            return f"{META} names another key"
        for name, (size, digest) in files.items():
            path = self.path / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != size:
                return f"{name} has {path.stat().st_size} bytes, not {size}"
            if name not in skip_hash and file_digest(path) != digest:
                return f"{name} does not match its hash"
        return None

    def write(self, fill: Callable[[Path], dict]) -> None:
        """Build the entry in a temporary folder with ``fill`` (which returns extra meta) and
        rename it into place."""
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        try:
            extra = fill(temporary)
            files = {path.name: [path.stat().st_size, file_digest(path)]
                     for path in sorted(temporary.iterdir())}
            (temporary / META).write_text(json.dumps({"key": self.key, "files": files, **extra},
                                                     indent=1), encoding="utf-8")
            if self.path.exists():  # another process built it meanwhile, or a damaged one
                if self.problem(set()) is None:
                    return
                shutil.rmtree(self.path, ignore_errors=True)
            os.replace(temporary, self.path)
        except OSError as error:
            if self.path.is_dir() and self.problem(set()) is None:
                return  # another process renamed the same entry into place first
            raise CacheError(f"cannot write the data cache in {self.path.parent} ({error}); "
                             "free space or set data.cache_dir (or data.cache=false)") from None
        finally:
            shutil.rmtree(temporary, ignore_errors=True)


@dataclass(frozen=True)
class CacheEntry:
    """A folder of the cache, as `python -m translator cache list` shows it."""

    path: Path
    kind: str  # data, tokenizer, encoded or links; "unfinished": left by a stopped build
    size: int  # bytes
    last_used: float  # seconds since the epoch: when a run last read it (or it was built)


def cache_entries(root: Path) -> list[CacheEntry]:
    """Every entry in the cache folder ``root``, least recently used first ([] if none)."""
    if not root.is_dir():
        return []
    entries = []
    for path in root.iterdir():
        if not path.is_dir() or "-" not in path.name:
            continue  # not ours: leave it alone
        unfinished = path.name.startswith(".") and path.name.endswith(".tmp")
        kind = "unfinished" if unfinished else path.name.split("-", 1)[0]
        files = [file for file in path.rglob("*") if file.is_file()]
        meta = path / META
        last_used = (meta if meta.is_file() else path).stat().st_mtime
        entries.append(CacheEntry(path, kind, sum(file.stat().st_size for file in files),
                                  last_used))
    return sorted(entries, key=lambda entry: entry.last_used)


def clear_cache(root: Path, older_than_days: float | None = None,
                now: float | None = None) -> list[CacheEntry]:
    """Remove the entries of ``root`` (those unused for more than ``older_than_days`` days,
    when given) and return them. A run that needs one again rebuilds it."""
    cutoff = (now or time.time()) - (older_than_days or 0) * 86400
    removed = [entry for entry in cache_entries(root)
               if older_than_days is None or entry.last_used < cutoff]
    for entry in removed:
        shutil.rmtree(entry.path)
    return removed


def format_size(size: float) -> str:
    """Bytes as people read them: 512 B, 3.4 KiB, 1.2 MiB, 2.0 GiB."""
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} GiB"


def cache_command(action: str, root: Path | None, config: str | Path | None = None,
                  older_than_days: float | None = None) -> str:
    """`python -m translator cache list|clear`: the cache folder ``root`` (None: the one the
    config file ``config`` names, the defaults' for None) listed (one line per entry: size,
    kind, last use, name, least recently used first, and a line of totals) or cleared (of
    entries unused for more than ``older_than_days`` days, if given); what to print."""
    if older_than_days is not None and (action != "clear" or older_than_days < 0):
        raise CacheError("--older-than takes a number of days ≥ 0, with clear")
    root = root or cache_folder(load_config(config))
    if root is None:
        raise CacheError("that config turns the cache off (data.cache: false); name a folder "
                         "with --dir")
    if action == "clear":
        removed = clear_cache(root, older_than_days)
        return (f"removed {len(removed)} entries ({format_size(sum(e.size for e in removed))})"
                f" from {root}")
    entries, now = cache_entries(root), time.time()
    lines = [f"{format_size(entry.size):>10}  {entry.kind:<10}  used "
             f"{(now - entry.last_used) / 86400:5.1f} days ago  {entry.path.name}"
             for entry in entries]
    return "\n".join(lines + [f"{len(entries)} entries, "
                              f"{format_size(sum(e.size for e in entries))} in {root}"])


# ---------------------------------------------------------------- the three stages


@dataclass
class Stage:
    """When a stage of `prepare_data` ran (time.perf_counter) and where its result came from:
    "built", "cache" or "run folder"."""

    started: float
    ended: float
    source: str

    @property
    def seconds(self) -> float:
        return self.ended - self.started


@dataclass
class PreparedData:
    """What training reads: the tokenizer, the encoded train and dev splits, the clean pairs."""

    tokenizer: Tokenizer
    train: EncodedCorpus
    dev: EncodedCorpus
    train_pairs: Sequence[Pair]  # read from the cache (or memory) only when asked for
    dev_pairs: list[Pair]
    test_pairs: list[Pair]
    report: dict[str, Counter[str]]
    cache_dir: Path | None
    stages: dict[str, Stage] = field(default_factory=dict)
    encoded_key: str | None = None  # the train ids' cache key: what their links are keyed by

    @property
    def splits(self) -> dict[str, Sequence[Pair]]:
        return {"train": self.train_pairs, "dev": self.dev_pairs, "test": self.test_pairs}

    def summary(self) -> str:
        """The data report (one line per split) and a line on where each stage came from."""
        lines = LoadedData({}, self.report).summary()
        stages = ", ".join(f"{name} {stage.seconds:.1f} s ({stage.source})"
                           for name, stage in self.stages.items())
        return f"{lines}\nprepared: {stages}; {len(self.train):,} train pairs, " \
               f"{self.train.num_tokens:,} tokens in {self.train.nbytes / 2**20:,.0f} MiB"


class _CleanSplits:
    """The data stage: the clean splits in the cache (or in memory without a cache)."""

    def __init__(self, config: Config, root: Path | None) -> None:
        self.cfg = config.data
        fingerprint = data_fingerprint(self.cfg) if root is not None else None
        settings = {k: v for k, v in dataclasses.asdict(self.cfg).items()
                    if k not in ("cache", "cache_dir")}
        self.key = _key("data", DATA_CODE, fingerprint, settings) if fingerprint else None
        self.entry = (_Entry(root, "data", self.key, "clean data")
                      if root is not None and self.key else None)
        self._train: PairTable | None = None
        self.source = "built"

    def load(self) -> tuple[list[Pair], list[Pair], dict[str, Counter[str]]]:
        """dev, test and the report; the train split waits for `train()`, which checks the
        hash of its file first (a run that finds everything else in the cache never reads
        it)."""
        if self.entry is None:
            writer = _PairWriter(None)
            loaded = load_splits(self.cfg, train_sink=writer.write)
            writer.close()
            self._train = PairTable(writer.batches)
            return loaded.splits["dev"], loaded.splits["test"], loaded.report
        if self.entry.usable(skip_hash=("train.arrow",)):
            self.source = "cache"
            self._checked = False
        else:
            self.entry.write(self._fill)
            self._checked = True
        path = self.entry.path
        report = {split: Counter(counts) for split, counts in
                  json.loads((path / "report.json").read_text(encoding="utf-8")).items()}
        return _read_pairs(path / "dev.jsonl"), _read_pairs(path / "test.jsonl"), report

    def train(self) -> PairTable:
        if self._train is None:
            assert self.entry is not None
            if not self._checked and not self.entry.usable():
                self.entry.write(self._fill)
            self._checked = True
            self._train = PairTable(path=self.entry.path / "train.arrow")
        return self._train

    def _fill(self, folder: Path) -> dict:
        writer = _PairWriter(folder / "train.arrow")
        try:
            loaded = load_splits(self.cfg, train_sink=writer.write)
        finally:
            writer.close()
        for split in ("dev", "test"):
            _write_pairs(folder / f"{split}.jsonl", loaded.splits[split])
        (folder / "report.json").write_text(json.dumps(loaded.report) + "\n", encoding="utf-8")
        return {"train_pairs": loaded.report["train"]["kept"]}


class _LazyPairs(Sequence):
    """The clean train pairs, opened on first use."""

    def __init__(self, count: int, opener: Callable[[], PairTable]) -> None:
        self._count, self._opener, self._table = count, opener, None

    def _pairs(self) -> PairTable:
        if self._table is None:
            self._table = self._opener()
        return self._table

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, index: int) -> Pair:  # type: ignore[override]
        return self._pairs()[index]

    def __iter__(self) -> Iterator[Pair]:
        return iter(self._pairs())


def _write_pairs(path: Path, pairs: list[Pair]) -> None:
    path.write_text("".join(json.dumps(list(p), ensure_ascii=False) + "\n" for p in pairs),
                    encoding="utf-8")


def _read_pairs(path: Path) -> list[Pair]:
    return [Pair(*json.loads(line)) for line in path.read_text(encoding="utf-8").splitlines()]


def _tokenizer_sample(config: Config, train: PairTable) -> list[Pair]:
    """The pairs SentencePiece trains on: input_sentence_size sentences in all (both sides of a
    pair count for a joint model), a seeded random sample or the first ones."""
    cfg = config.tokenizer
    count = cfg.input_sentence_size // 2 if cfg.joint else cfg.input_sentence_size
    return train.sample(count, cfg.shuffle_input_sentence, TOKENIZER_SAMPLE_SEED)


def _train_tokenizer(config: Config, train: PairTable, directory: Path) -> None:
    sample = _tokenizer_sample(config, train)
    log.info("training SentencePiece on %d of %d train pairs", len(sample), len(train))
    sources = [p.source for p in sample]
    tags: tuple[str, ...] = ()
    if Direction(config.data.direction).both:  # the tags are pieces of their own, not text to learn
        sources, tags = [split_tag(text)[1] for text in sources], tuple(TAGS.values())
    Tokenizer.train(config.tokenizer, sources, [p.target for p in sample], directory, tags)


def cache_folder(config: Config) -> Path | None:
    """The cache folder the config names, or None when caching is off."""
    if not config.data.cache:
        return None
    return Path(config.data.cache_dir or Path(config.train.output_dir) / "cache").expanduser()


def held_out_pairs(config: Config, split: str) -> list[Pair]:
    """The clean dev or test pairs of ``config``'s data, as training scored them: read from the
    cache when it holds them (the train split is then never read), else prepared (and, with a
    cache, kept there) as training prepares them."""
    dev, test, _ = _CleanSplits(config, cache_folder(config)).load()
    return {"dev": dev, "test": test}[split]


def prepare_data(config: Config, tokenizer_dir: str | Path, resume: bool = False,
                 rank: int = 0) -> PreparedData:
    """The clean splits, the tokenizer (saved in ``tokenizer_dir``; read from there when
    ``resume``) and the encoded train and dev splits, from the cache where it has them.

    Under torchrun, rank 0 prepares (and fills the cache) while the other processes wait,
    then they read what it made: the tokenizer from ``tokenizer_dir``, the rest from the
    cache (or, without a cache, they prepare their own copy of the data)."""
    distributed = dist.is_available() and dist.is_initialized()
    if distributed and rank != 0:
        dist.barrier()  # rank 0 first
    try:
        return _prepare(config, Path(tokenizer_dir), resume or rank != 0)
    finally:
        if distributed and rank == 0:
            dist.barrier()


def _prepare(config: Config, tokenizer_dir: Path, tokenizer_from_run: bool) -> PreparedData:
    root = cache_folder(config)
    max_tokens = config.model.max_positions
    stages: dict[str, Stage] = {}

    started = time.perf_counter()
    clean = _CleanSplits(config, root)
    dev_pairs, test_pairs, report = clean.load()
    stages["data"] = Stage(started, time.perf_counter(), clean.source)

    started = time.perf_counter()
    tokenizer, source = _prepared_tokenizer(config, clean, root, tokenizer_dir,
                                            tokenizer_from_run)
    stages["tokenizer"] = Stage(started, time.perf_counter(), source)

    started = time.perf_counter()
    train, source, encoded_key = _encoded_train(clean, tokenizer, root, max_tokens)
    dev = EncodedCorpus.encode([dev_pairs], tokenizer, max_tokens)
    stages["encoding"] = Stage(started, time.perf_counter(), source)

    train_pairs = _LazyPairs(int(report["train"]["kept"]), clean.train)
    return PreparedData(tokenizer, train, dev, train_pairs, dev_pairs, test_pairs, report, root,
                        stages, encoded_key)


def _prepared_tokenizer(config: Config, clean: _CleanSplits, root: Path | None,
                        tokenizer_dir: Path, from_run: bool) -> tuple[Tokenizer, str]:
    """The run's tokenizer (in ``tokenizer_dir``) and where it came from."""
    if from_run:
        return Tokenizer.load(tokenizer_dir), "run folder"
    if clean.entry is None:
        _train_tokenizer(config, clean.train(), tokenizer_dir)
        return Tokenizer.load(tokenizer_dir), "built"
    key = _key("tokenizer", clean.key, TOKENIZER_CODE, dataclasses.asdict(config.tokenizer),
               TOKENIZER_SAMPLE_SEED)
    entry = _Entry(root, "tokenizer", key, "tokenizer")
    if entry.usable():
        tokenizer = _copy_tokenizer(entry, tokenizer_dir)
        if tokenizer is not None:
            return tokenizer, "cache"
    entry.write(lambda folder: _train_tokenizer(config, clean.train(), folder) or {})
    return _copy_tokenizer(entry, tokenizer_dir) or Tokenizer.load(tokenizer_dir), "built"


def _encoded_train(clean: _CleanSplits, tokenizer: Tokenizer, root: Path | None,
                   max_tokens: int) -> tuple[EncodedCorpus, str, str | None]:
    """The encoded train split, where it came from and its cache key (None: no cache)."""
    if clean.entry is None:
        return (EncodedCorpus.encode(clean.train().batches(), tokenizer, max_tokens), "built",
                None)
    key = _key("encoded", clean.key, TOKENIZER_CODE, tokenizer.fingerprint(), max_tokens)
    entry = _Entry(root, "encoded", key, "encoded train split")
    vocab_size = max(tokenizer.source_vocab_size, tokenizer.target_vocab_size)
    if entry.usable():
        try:
            return EncodedCorpus.load(entry.path, vocab_size), "cache", key
        except (OSError, ValueError) as error:
            entry.discard(str(error))
    entry.write(lambda folder: EncodedCorpus.encode(clean.train().batches(), tokenizer,
                                                    max_tokens).save(folder) or {})
    return EncodedCorpus.load(entry.path, vocab_size), "built", key


def _copy_tokenizer(entry: _Entry, tokenizer_dir: Path) -> Tokenizer | None:
    """The cached tokenizer, copied into the run's tokenizer folder; None (and the entry
    removed, with a warning) if it does not load."""
    tokenizer_dir.mkdir(parents=True, exist_ok=True)
    for path in entry.path.iterdir():
        if path.name != META:
            shutil.copyfile(path, tokenizer_dir / path.name)
    try:
        return Tokenizer.load(tokenizer_dir)
    except TokenizerError as error:
        entry.discard(str(error))
        return None


# ---------------------------------------------------------------- guided-alignment links


class PieceLinks(Sequence):
    """Each training pair's (source piece, target piece) links for guided alignment, held as
    two arrays (all links [L, 2] and n + 1 offsets) instead of a list of tuples per pair: 8
    bytes a link instead of about 64, which at IITB size (1.66M pairs, tens of links each) is
    the difference between megabytes and gigabytes. Item i is a list of (source, target)
    pairs, or None for a pair without links."""

    def __init__(self, links: np.ndarray, offsets: np.ndarray) -> None:
        self.links, self.offsets = links, offsets

    @classmethod
    def concatenate(cls, parts: Sequence[PieceLinks]) -> PieceLinks:
        """The pairs of ``parts``, one after another."""
        starts = np.cumsum([0] + [len(part.links) for part in parts[:-1]])
        offsets = [part.offsets[:-1] + start for part, start in zip(parts, starts)]
        offsets.append(np.array([sum(len(part.links) for part in parts)]))
        return cls(np.concatenate([part.links for part in parts]).astype(np.int32),
                   np.concatenate(offsets).astype(np.int64))

    @classmethod
    def collect(cls, per_pair: Iterable[Sequence[tuple[int, int]] | None]) -> PieceLinks:
        """From one list of links (or None) per pair, consumed as it comes."""
        flat, counts = array.array("i"), array.array("q", [0])
        for links in per_pair:
            counts.append(len(links or ()))
            flat.extend(itertools.chain.from_iterable(links or ()))
        return cls(np.frombuffer(flat, dtype=np.int32).reshape(-1, 2),
                   np.cumsum(np.frombuffer(counts, dtype=np.int64)))

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> list[tuple[int, int]] | None:  # type: ignore[override]
        start, end = self.offsets[index], self.offsets[index + 1]
        return [tuple(link) for link in self.links[start:end].tolist()] if end > start else None

    @property
    def linked(self) -> int:
        """How many pairs have links."""
        return int(np.count_nonzero(np.diff(self.offsets)))

    def save(self, folder: Path) -> None:
        np.save(folder / "links.npy", self.links)
        np.save(folder / "link_offsets.npy", self.offsets)

    @classmethod
    def load(cls, folder: Path, pairs: int) -> PieceLinks:
        links = np.load(folder / "links.npy", mmap_mode="r")
        offsets = np.load(folder / "link_offsets.npy")
        if (links.ndim != 2 or links.shape[1] != 2 or len(offsets) != pairs + 1
                or offsets[-1] != len(links) or (np.diff(offsets) < 0).any()):
            raise ValueError("the link arrays do not fit the training pairs")
        return cls(links, offsets)


def cached_piece_links(prepared: PreparedData, settings: dict,
                       make: Callable[[], PieceLinks],
                       rank: int = 0) -> tuple[PieceLinks, str]:
    """The training pairs' piece links and where they came from ("cache" or "built"): from
    the cache under a key of the train ids' key and ``settings`` (where the word links come
    from, the aligner's settings, the code that turns them into piece links), else ``make()``
    (kept in the cache). Under torchrun rank 0 makes them while the others wait."""
    if prepared.encoded_key is None or prepared.cache_dir is None:
        return make(), "built"
    entry = _Entry(prepared.cache_dir, "links", _key("links", prepared.encoded_key, settings),
                   "guided-alignment links")
    distributed = dist.is_available() and dist.is_initialized()
    if distributed and rank != 0:
        dist.barrier()  # rank 0 first
    try:
        if entry.usable():
            try:
                return PieceLinks.load(entry.path, len(prepared.train)), "cache"
            except (OSError, ValueError) as error:
                entry.discard(str(error))
        entry.write(lambda folder: make().save(folder) or {})
        return PieceLinks.load(entry.path, len(prepared.train)), "built"
    finally:
        if distributed and rank == 0:
            dist.barrier()
