"""Sentence pairs: read, normalise, filter and de-duplicate them.

One pipeline serves every source. A reader (embedded corpus, local files here, or a Hugging
Face hub dataset: `translator.hub`) yields raw (hindi, english) strings; `load_splits`
normalises them, drops empty, over-long and badly proportioned pairs, removes duplicates and
dev/test pairs that leak from train, and puts each pair in the configured direction: hi-en,
en-hi, or both, where every row gives two pairs, each source led by the tag of its target
language (`direction.TAGS`). (`translator.batching` turns their token ids into padded tensors.)
"""

from __future__ import annotations

import hashlib
import importlib.resources
import itertools
import json
import logging
import re
import unicodedata
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from translator.config import DataConfig
from translator.corpus import SPLITS
from translator.direction import NAMES as DIRECTION_NAMES
from translator.direction import Direction, split_tag, tagged
from translator.hub import check_hub_reachable, hub_fingerprint, read_hub_batches, read_hub_rows
from translator.lines import iter_lines
from translator.rows import BATCH_ROWS, DataError, RawBatch, row_languages

log = logging.getLogger(__name__)

SOURCES = ("embedded", "hub", "files")
FORMATS = ("auto", "text", "tsv", "jsonl", "parquet")


class Pair(NamedTuple):
    """A normalised sentence pair, already in the configured direction (for "both", the source
    starts with the target language's tag: see `direction.tagged`)."""

    source: str
    target: str


@dataclass
class LoadedData:
    """The three splits and, per split, how many pairs were read, kept and dropped.

    `report[split]` counts "read", "kept" and each reason a pair was dropped: "empty", and for
    train "too_long", "bad_ratio", "duplicate"; for dev/test "leaked" (shares its source or
    target with a train pair). With `remove_leakage` off such pairs are kept and counted as
    "leaked_not_removed".
    """

    splits: dict[str, list[Pair]]
    report: dict[str, Counter[str]]

    def summary(self) -> str:
        """One line per split, e.g. 'train: kept 950 of 1000 (empty 3, duplicate 47)'."""
        lines = []
        for split, counts in self.report.items():
            reasons = ", ".join(
                f"{reason} {n}" for reason, n in counts.items() if reason not in ("read", "kept")
            )
            line = f"{split}: kept {counts['kept']} of {counts['read']}"
            lines.append(f"{line} ({reasons})" if reasons else line)
        return "\n".join(lines)


# --- normalisation ---------------------------------------------------------------------------

# Invisible characters with no linguistic content. ZWJ/ZWNJ (U+200D/U+200C) are kept: in
# Devanagari they choose between conjunct and half-letter forms.
_INVISIBLE = ("\u200b", "\ufeff")
_NUKTA = "\u093c"
# After NFC the nukta letters U+0958..U+095F are always base + U+093C (they are excluded from
# composition). The nukta is folded only where it marks a Perso-Arabic or English loan sound
# (क़ ख़ ग़ ज़ फ़, and य़ which Hindi doesn't use), because writers use it inconsistently (ज़रूर and
# जरूर are the same word). ड़ and ढ़ are native Hindi phonemes, always written, and folding them
# would merge distinct words (पढ़ "read" vs पढ), so they are kept.
_FOLDED_NUKTA = re.compile(f"(?<=[कखगजफय]){_NUKTA}")


def normalize(text: str, nukta: bool = False) -> str:
    """Return `text` in NFC without zero-width spaces or BOMs, whitespace collapsed to single
    spaces and stripped; with `nukta`, loanword nukta letters are folded to their base letter."""
    for invisible in _INVISIBLE:  # str.replace: ~50x faster than str.translate on Devanagari
        text = text.replace(invisible, "")  # before NFC, which may compose what they separated
    text = unicodedata.normalize("NFC", text)
    if nukta:
        text = _FOLDED_NUKTA.sub("", text)
    return " ".join(text.split())


# --- readers: each yields raw (hindi, english) strings ------------------------------------


def embedded_corpus_dir() -> Path:
    """The folder holding the corpus shipped inside the package (train/dev/test.tsv)."""
    return Path(str(importlib.resources.files("translator") / "corpus"))


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line) of a data file (`translator.lines`: only '\\n' ends a line)."""
    return iter_lines(path, DataError)


def _count_lines(path: Path) -> int:
    with path.open("rb") as lines:
        return sum(1 for _ in lines)


def _read_tsv(path: Path) -> Iterator[tuple[str, str]]:
    """Rows hindi<TAB>english; further columns (e.g. the corpus's domain) are ignored."""
    for number, line in _read_lines(path):
        if not line.strip():
            yield "", ""  # counted and dropped as "empty", so the report shows it
            continue
        columns = line.split("\t")
        if len(columns) < 2:
            raise DataError(
                f"{path} line {number} has no tab; each line must be hindi<TAB>english."
            )
        yield columns[0], columns[1]


def _read_text_pair(prefix: Path) -> Iterator[tuple[str, str]]:
    """Line-aligned PREFIX.hi and PREFIX.en."""
    hindi_path, english_path = _text_pair_paths(prefix)
    for path in (hindi_path, english_path):
        require_file(path)
    hindi_lines, english_lines = _count_lines(hindi_path), _count_lines(english_path)
    if hindi_lines != english_lines:
        raise DataError(
            f"{hindi_path} has {hindi_lines} lines but {english_path} has {english_lines}; "
            "the two files must be line-aligned."
        )
    for (_, hindi), (_, english) in zip(
        _read_lines(hindi_path), _read_lines(english_path), strict=True
    ):
        yield hindi, english


def _text_pair_paths(prefix: Path) -> tuple[Path, Path]:
    return prefix.with_name(prefix.name + ".hi"), prefix.with_name(prefix.name + ".en")


def _read_jsonl(path: Path, cfg: DataConfig) -> Iterator[tuple[str, str]]:
    for number, line in _read_lines(path):
        if not line.strip():
            continue  # blank lines are common at the end of JSONL files
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise DataError(
                f"{path} line {number} is not valid JSON ({error.msg}); "
                "each line must hold one JSON object."
            ) from None
        yield row_languages(row, cfg, f"{path} line {number}")


def _read_parquet(path: Path, cfg: DataConfig) -> Iterator[tuple[str, str]]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        table = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as error:
        raise DataError(f"{path} is not a readable Parquet file ({error}).") from None
    row_number = 0
    for batch in table.iter_batches(batch_size=10_000):
        for row in batch.to_pylist():
            row_number += 1
            yield row_languages(row, cfg, f"{path} row {row_number}")


def require_file(path: Path, hint: str = "") -> None:
    if not path.is_file():
        raise DataError(f"File not found: {path}{hint}.")


def _file_format(path: Path, configured: str) -> str:
    if configured != "auto":
        return configured
    by_extension = {".tsv": "tsv", ".jsonl": "jsonl", ".parquet": "parquet"}
    if path.suffix in by_extension:
        return by_extension[path.suffix]
    if all(p.is_file() for p in _text_pair_paths(path)):
        return "text"
    raise DataError(
        f"Cannot tell the format of {path} from its name (expected .tsv, .jsonl, .parquet, or a "
        "prefix with .hi and .en files); set data.format to text, tsv, jsonl or parquet."
    )


def _read_file(path_text: str, split: str, cfg: DataConfig) -> Iterator[tuple[str, str]]:
    path = Path(path_text).expanduser()
    file_format = _file_format(path, cfg.format)
    if file_format == "text":
        return _read_text_pair(path)
    require_file(path, f" (data.{split}_path)")
    if file_format == "tsv":
        return _read_tsv(path)
    if file_format == "jsonl":
        return _read_jsonl(path, cfg)
    return _read_parquet(path, cfg)


# --- the pipeline ------------------------------------------------------------------------


def _check_config(cfg: DataConfig) -> None:
    for name, value, allowed in (
        ("source", cfg.source, SOURCES),
        ("direction", cfg.direction, DIRECTION_NAMES),
        ("format", cfg.format, FORMATS),
    ):
        if value not in allowed:
            raise DataError(f"Unknown data.{name} '{value}'; use one of: {', '.join(allowed)}.")
    if cfg.source == "files" and not cfg.train_path:
        raise DataError("data.source=files needs data.train_path (and usually dev/test paths).")
    unknown_splits = set(cfg.hub_splits) - set(SPLITS)
    if cfg.source == "hub" and (unknown_splits or "train" not in cfg.hub_splits):
        raise DataError(
            f"data.hub_splits must map train (and optionally dev, test) to the dataset's split "
            f"names, not {', '.join(sorted(cfg.hub_splits)) or 'nothing'}."
        )


def raw_splits(cfg: DataConfig) -> dict[str, Iterator[tuple[str, str]]]:
    """Lazy raw (hindi, english) rows per split; a split the config leaves out is empty."""
    if cfg.source == "embedded":
        corpus = embedded_corpus_dir()
        for split in SPLITS:
            require_file(
                corpus / f"{split}.tsv",
                "; the embedded corpus is missing, so rebuild or reinstall the package, or use "
                "data.source=files",
            )
        return {split: _read_tsv(corpus / f"{split}.tsv") for split in SPLITS}
    if cfg.source == "hub":
        check_hub_reachable(cfg.hub_id)
        return {
            split: read_hub_rows(cfg, cfg.hub_splits[split]) if split in cfg.hub_splits
            else iter(()) for split in SPLITS
        }
    paths = {"train": cfg.train_path, "dev": cfg.dev_path, "test": cfg.test_path}
    return {
        split: _read_file(path, split, cfg) if path else iter(()) for split, path in paths.items()
    }


def _raw_batches(cfg: DataConfig) -> dict[str, Iterator[RawBatch]]:
    """Lazy raw (hindi, english) texts per split, BATCH_ROWS rows at a time."""
    if cfg.source == "hub" and not cfg.streaming:
        check_hub_reachable(cfg.hub_id)
        return {
            split: read_hub_batches(cfg, cfg.hub_splits[split]) if split in cfg.hub_splits
            else iter(()) for split in SPLITS
        }
    return {split: _batched(rows) for split, rows in raw_splits(cfg).items()}


def _batched(rows: Iterator[tuple[str, str]]) -> Iterator[RawBatch]:
    while chunk := list(itertools.islice(rows, BATCH_ROWS)):
        yield [hindi for hindi, _ in chunk], [english for _, english in chunk]


def _drop_reason(pair: Pair, is_train: bool, seen: set[int], cfg: DataConfig) -> str | None:
    """Why to drop `pair`, or None to keep it; remembers the hashes of kept train pairs in
    `seen` (a 64-bit hash per pair instead of the pair: a false duplicate has odds of about
    n²/2⁶⁵, 1 in 10⁷ for 1.66M pairs)."""
    if not pair.source or not pair.target:
        return "empty"
    if not is_train:
        return None
    # Normalised text has one space between words, so counting spaces counts words (the
    # tag of "both" is no word: both copies of a row must be kept or dropped alike).
    source = split_tag(pair.source)[1] if Direction(cfg.direction).both else pair.source
    source_words, target_words = source.count(" ") + 1, pair.target.count(" ") + 1
    if cfg.max_words and max(source_words, target_words) > cfg.max_words:
        return "too_long"
    # +1 smoothing keeps legitimate short pairs: "धन्यवाद" / "Thank you very much" is 2/5 = 2.5.
    longer, shorter = sorted((source_words + 1, target_words + 1), reverse=True)
    if cfg.max_length_ratio and longer / shorter > cfg.max_length_ratio:
        return "bad_ratio"
    if cfg.dedupe:
        key = hash(pair)
        if key in seen:
            return "duplicate"
        seen.add(key)
    return None


def _clean_batch(raw: RawBatch, is_train: bool, seen: set[int], cfg: DataConfig,
                 counts: Counter[str]) -> list[Pair]:
    """The pairs of a raw batch that are kept: normalised, in the configured direction,
    filtered; `counts` counts the pairs read and each reason a pair was dropped (for "both",
    two pairs a row: the filters treat both alike, so every count is twice that of hi-en)."""
    hindi = [normalize(text, cfg.normalize_nukta) for text in raw[0]]
    english = [normalize(text) for text in raw[1]]
    pairs = _directed(hindi, english, cfg.direction)
    counts["read"] += len(pairs)
    kept = []
    for pair in pairs:
        reason = _drop_reason(pair, is_train, seen, cfg)
        if reason:
            counts[reason] += 1
        else:
            kept.append(pair)
    return kept


def _directed(hindi: list[str], english: list[str], direction: str) -> list[Pair]:
    """The rows as pairs of ``direction``; for "both" each row twice, hi→en then en→hi (in
    that order, so that the first N rows of a split give N pairs each way), tagged."""
    if direction == "hi-en":
        return list(map(Pair, hindi, english))
    if direction == "en-hi":
        return list(map(Pair, english, hindi))
    pairs = []
    for hindi_text, english_text in zip(hindi, english):
        # an empty side stays empty, untagged, so that the pair is dropped as "empty"
        pairs += [Pair(tagged(hindi_text, "en") if hindi_text else "", english_text),
                  Pair(tagged(english_text, "hi") if english_text else "", hindi_text)]
    return pairs


def load_splits(cfg: DataConfig,
                train_sink: Callable[[list[Pair]], None] | None = None) -> LoadedData:
    """Read the configured source and return clean train/dev/test pairs with a report.

    All splits are normalised and lose empty pairs. Only train is filtered by length and
    de-duplicated: dev and test stay as published so scores remain comparable, except that
    pairs sharing a source or target with train are removed (or only counted, see
    `remove_leakage`), since they measure memory rather than translation.

    Rows pass BATCH_ROWS at a time, and train pairs are remembered only as hashes (for
    de-duplication and the leakage check), so with ``train_sink`` the kept train pairs are
    handed to it batch by batch instead of being kept (``splits["train"]`` stays empty) and a
    corpus of any size passes in bounded memory.
    """
    _check_config(cfg)
    raw = _raw_batches(cfg)
    report: dict[str, Counter[str]] = {split: Counter(read=0, kept=0) for split in SPLITS}
    splits: dict[str, list[Pair]] = {split: [] for split in SPLITS}
    seen: set[int] = set()
    train_sources, train_targets = array("q"), array("q")  # hashes of the kept train pairs'
    for split in SPLITS:
        for batch in raw[split]:
            kept = _clean_batch(batch, split == "train", seen, cfg, report[split])
            if split != "train":
                splits[split].extend(kept)
                continue
            report[split]["kept"] += len(kept)
            train_sources.extend(hash(pair.source) for pair in kept)
            train_targets.extend(hash(pair.target) for pair in kept)
            if train_sink is None:
                splits[split].extend(kept)
            else:
                train_sink(kept)
    del seen
    if not report["train"]["kept"]:
        raise DataError(_empty_train_message(cfg, report["train"]))
    for split in ("dev", "test"):
        splits[split] = _without_leakage(splits[split], train_sources, train_targets, cfg,
                                         report[split])
        report[split]["kept"] = len(splits[split])
    loaded = LoadedData(splits, report)
    log.info("data %s:\n%s", cfg.source, loaded.summary())
    return loaded


def data_fingerprint(cfg: DataConfig) -> str | None:
    """A hash of the raw data `load_splits` would read, found without reading its rows (for
    caches of what is made from it): the bytes of the embedded corpus or the local files, or
    what `datasets` records of a hub dataset's splits (their files or revision). None when
    it cannot be known without reading everything: a streaming hub dataset."""
    _check_config(cfg)
    if cfg.source == "hub":
        return hub_fingerprint(cfg)
    if cfg.source == "embedded":
        paths = {split: [embedded_corpus_dir() / f"{split}.tsv"] for split in SPLITS}
    else:
        named = {"train": cfg.train_path, "dev": cfg.dev_path, "test": cfg.test_path}
        paths = {split: _file_paths(path, split, cfg) for split, path in named.items() if path}
    digest = hashlib.blake2b(digest_size=16)
    for split, files in paths.items():
        for path in files:
            require_file(path, f" (data.{split}_path)" if cfg.source == "files" else "")
            digest.update(f"{split}:{path.name}:".encode())
            with path.open("rb") as file:
                while chunk := file.read(1 << 20):
                    digest.update(chunk)
    return digest.hexdigest()


def _file_paths(path_text: str, split: str, cfg: DataConfig) -> list[Path]:
    """The file(s) a data.SPLIT_path names: one, or PREFIX.hi and PREFIX.en."""
    path = Path(path_text).expanduser()
    return list(_text_pair_paths(path)) if _file_format(path, cfg.format) == "text" else [path]


def _empty_train_message(cfg: DataConfig, counts: Counter[str]) -> str:
    """Which file (or dataset split) gave no train pair, and why."""
    if cfg.source == "files":
        where, fix = f"data.train_path {cfg.train_path}", "point data.train_path at a file of pairs"
    elif cfg.source == "hub":
        where = f"the {cfg.hub_splits.get('train')!r} split of {cfg.hub_id}"
        fix = "check data.hub_id and data.hub_splits"
    else:
        where, fix = "the embedded corpus's train.tsv", "reinstall the package"
    if not counts["read"]:
        return f"the train split is empty: {where} holds no sentence pairs; {fix}"
    dropped = ", ".join(f"{number} {reason.replace('_', ' ')}" for reason, number in counts.items()
                        if reason not in ("read", "kept") and number)
    if counts["too_long"] or counts["bad_ratio"]:
        fix += ", or loosen data.max_words and data.max_length_ratio"
    return (f"the train split is empty: all {counts['read']} pairs of {where} were dropped "
            f"({dropped}); {fix}")


def _without_leakage(pairs: list[Pair], train_sources: array, train_targets: array,
                     cfg: DataConfig, counts: Counter[str]) -> list[Pair]:
    """`pairs` without those whose source or target occurs in train (given as the hashes of
    the kept train pairs' sources and targets)."""
    leaked_sources = {hash(pair.source) for pair in pairs}.intersection(train_sources)
    leaked_targets = {hash(pair.target) for pair in pairs}.intersection(train_targets)
    clean = [p for p in pairs
             if hash(p.source) not in leaked_sources and hash(p.target) not in leaked_targets]
    leaked = len(pairs) - len(clean)
    if not leaked:
        return pairs
    if cfg.remove_leakage:
        counts["leaked"] = leaked
        return clean
    counts["leaked_not_removed"] = leaked
    log.warning("%d dev/test pairs share a sentence with train (remove_leakage is off)", leaked)
    return pairs
