"""The encoded corpus as arrays, and the three stages that make it, each kept in the cache so
that a second run or a resume starts at once.

`prepare_data` turns a config's data and tokenizer sections into what training reads: the clean
splits, the tokenizer and the token ids of every pair. Each of its three stages is kept in the
cache folder (``data.cache_dir``; by default ``<train.output_dir>/cache``) as an entry
(`translator.cache`) under a key of all it depends on::

    data-KEY/        the clean splits: train.arrow (Arrow IPC), dev.jsonl, test.jsonl, report
                     KEY: the raw data's fingerprint (data.data_fingerprint) + the data section
    tokenizer-KEY/   SentencePiece trained on a sample of the clean train split
                     KEY: the data key + the tokenizer section
    encoded-KEY/     the train split's token ids: flat arrays and offsets (.npy, memory-mapped)
                     KEY: the data key + the tokenizer's fingerprint + model.max_positions

A second run with the same data and tokenizer settings, or a resume, finds all three and reads
no text at all; a change of the data or of the tokenizer rebuilds what depends on it; a
damaged entry is rebuilt with a warning, never trusted. (Guided alignment's piece links are a
fourth entry, keyed by the encoded one: `translator.guided`.)

`EncodedCorpus` holds token ids as one flat array per side and an offsets array (2 bytes a
token, 4 beyond 65,536 pieces), never as lists of Python ints, and pads a batch of them into
the same tensors as `batching.make_batch`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import logging
import shutil
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist

from translator import cache as cache_module
from translator import data as data_module
from translator import direction as direction_module
from translator import hub as hub_module
from translator import pair_table as pair_table_module
from translator import rows as rows_module
from translator import tokenizer as tokenizer_module
from translator.batching import Batch
from translator.cache import META, Entry, cache_folder, cache_key, source_hash
from translator.config import Config
from translator.data import LoadedData, Pair, data_fingerprint, load_splits
from translator.direction import TAGS, Direction, split_tag
from translator.pair_table import PairTable, PairWriter
from translator.tokenizer import Tokenizer, TokenizerError

log = logging.getLogger(__name__)

# The code that makes an entry is part of its key: a change of reading, normalisation, filters,
# SentencePiece training or encoding (a new version of the package, or an edit) makes new
# entries instead of reusing old ones.
DATA_CODE = source_hash(data_module.__file__, direction_module.__file__, __file__,
                        hub_module.__file__, rows_module.__file__, pair_table_module.__file__,
                        cache_module.__file__)
TOKENIZER_CODE = source_hash(tokenizer_module.__file__)
TOKENIZER_SAMPLE_SEED = 0  # the sample SentencePiece trains on does not follow train.seed
ID_FILES = ("source_ids", "source_offsets", "target_ids", "target_offsets")


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
                     ("target", tokenizer.encode_targets, [p.target for p in pairs]))
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
        self.key = cache_key("data", DATA_CODE, fingerprint, settings) if fingerprint else None
        self.entry = (Entry(root, "data", self.key, "clean data")
                      if root is not None and self.key else None)
        self._train: PairTable | None = None
        self.source = "built"

    def load(self) -> tuple[list[Pair], list[Pair], dict[str, Counter[str]]]:
        """dev, test and the report; the train split waits for `train()`, which checks the
        hash of its file first (a run that finds everything else in the cache never reads
        it)."""
        if self.entry is None:
            writer = PairWriter(None)
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
        writer = PairWriter(folder / "train.arrow")
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
    key = cache_key("tokenizer", clean.key, TOKENIZER_CODE, dataclasses.asdict(config.tokenizer),
               TOKENIZER_SAMPLE_SEED)
    entry = Entry(root, "tokenizer", key, "tokenizer")
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
    key = cache_key("encoded", clean.key, TOKENIZER_CODE, tokenizer.fingerprint(), max_tokens)
    entry = Entry(root, "encoded", key, "encoded train split")
    vocab_size = max(tokenizer.source_vocab_size, tokenizer.target_vocab_size)
    if entry.usable():
        try:
            return EncodedCorpus.load(entry.path, vocab_size), "cache", key
        except (OSError, ValueError) as error:
            entry.discard(str(error))
    entry.write(lambda folder: EncodedCorpus.encode(clean.train().batches(), tokenizer,
                                                    max_tokens).save(folder) or {})
    return EncodedCorpus.load(entry.path, vocab_size), "built", key


def _copy_tokenizer(entry: Entry, tokenizer_dir: Path) -> Tokenizer | None:
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
