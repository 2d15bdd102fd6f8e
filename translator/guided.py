"""Guided alignment's targets, in the order a run makes them: word links for the training
pairs, their word → piece links as arrays, and the cache entry that keeps them.

1. Word links, Hindi word first (`translator.links`' convention): the embedded corpus ships
   them (train.align), data.train_alignment_path gives them for other data (both made for
   the raw rows and found again by the normalised text), else eflomal aligns the clean train
   pairs once (`pair_word_links`).
2. Piece links: every piece of a target word is linked to every piece of each source word
   linked to it (`piece_links`, on the arrays of all pairs at once); for direction "both" a
   source's tag is a piece of no word, and an en→hi pair takes its links swapped
   (`pair_piece_links`). `PieceLinks` holds them as two arrays, 8 bytes a link.
3. The cache: an entry ``links-KEY`` beside the encoded train ids, keyed by their key, where
   the word links come from and this module's code (`cached_piece_links`).

`guided_alignment_targets` is what `build.build_run` calls when train.alignment_weight > 0;
`batching.alignment_targets` turns a batch's piece links into the loss's target matrices.
"""

from __future__ import annotations

import array
import dataclasses
import itertools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

import numpy as np
import torch.distributed as dist

from translator import links as links_module
from translator.cache import Entry, cache_key, file_digest, source_hash
from translator.config import Config, DataConfig
from translator.corpus import read_split, read_split_links
from translator.data import Pair, embedded_corpus_dir, normalize, raw_splits, require_file
from translator.direction import TAGS, Direction, split_tag
from translator.encoded import EncodedCorpus, PreparedData
from translator.links import (
    AlignerMissingError,
    Link,
    LinksError,
    read_pharaoh,
    run_eflomal,
    word_counts,
)
from translator.reporting import log, say
from translator.rows import DataError
from translator.tokenizer import Tokenizer

# the code that turns word links into a run's piece links: an edit makes new cache entries
LINKS_CODE = source_hash(__file__, links_module.__file__)


# ---------------------------------------------------------------- word links of the train pairs

WordLinks = dict[tuple[str, str], list[Link]]  # (hindi, english), normalised -> Hindi-first


def load_train_links(cfg: DataConfig) -> WordLinks:
    """Word links made for the raw train rows, keyed by the normalised (hindi, english) pair,
    so they follow their pairs through filtering and de-duplication: the embedded corpus's
    shipped links, or ``cfg.train_alignment_path``'s. A pair whose words changed under
    normalisation keeps no links. (Data without either gets eflomal's links of its clean
    pairs instead: `eflomal_links`.)"""
    if cfg.source == "embedded" and cfg.train_alignment_path is None:
        rows = [(hindi, english) for hindi, english, _ in read_split("train")]
        links = read_split_links("train")
    else:
        if cfg.train_alignment_path is None:
            raise DataError("these data ship no word links: give data.train_alignment_path, "
                            "or let eflomal align the clean pairs (translator.guided)")
        rows = list(raw_splits(cfg)["train"])
        require_file(Path(cfg.train_alignment_path), "; give the Pharaoh file of the train "
                      "rows as data.train_alignment_path")
        links = read_pharaoh(cfg.train_alignment_path, word_counts(h for h, _ in rows),
                             word_counts(e for _, e in rows))
    keyed: WordLinks = {}
    for (hindi, english), pair_links in zip(rows, links):
        raw_counts = (len(hindi.split()), len(english.split()))
        hindi, english = normalize(hindi, cfg.normalize_nukta), normalize(english)
        if (len(hindi.split()), len(english.split())) == raw_counts:
            keyed[(hindi, english)] = pair_links
    return keyed


def ships_links(cfg: DataConfig) -> bool:
    """Whether ``cfg``'s train rows come with word links (the embedded corpus's, or a file)."""
    return cfg.train_alignment_path is not None or cfg.source == "embedded"


def eflomal_links(rows: Sequence[tuple[str, str]]) -> list[list[Link]]:
    """Hindi-first word links of (hindi, english) ``rows`` from eflomal, run once over all of
    them (the default symmetrisation, as the embedded corpus's shipped links)."""
    log.info("running eflomal on %d train pairs for guided alignment", len(rows))
    try:
        return run_eflomal([h for h, _ in rows], [e for _, e in rows])
    except AlignerMissingError:
        raise  # training goes on without guided alignment (guided_alignment_targets)
    except LinksError as error:
        raise DataError(f"guided alignment (train.alignment_weight > 0) needs word links, "
                        f"but {error}; or give data.train_alignment_path, or set "
                        "train.alignment_weight=0") from None


def hindi_first_key(pair: Pair, direction: Direction) -> tuple[str, str]:
    """A training pair as (hindi, english), its tag removed: what word links are made for."""
    language, source = split_tag(pair.source) if direction.both else (None, pair.source)
    return (source, pair.target) if direction.hindi_first(language) else (pair.target, source)


def pair_word_links(config: Config, pairs: Sequence[Pair]) -> list[list[Link] | None]:
    """Each training pair's Hindi-first word links: the embedded corpus's shipped links or
    data.train_alignment_path's (made for the raw rows, found by text), else eflomal run once
    over the clean pairs themselves (each Hindi–English pair once, for "both")."""
    direction = Direction(config.data.direction)
    keys = [hindi_first_key(pair, direction) for pair in pairs]
    if ships_links(config.data):
        keyed = load_train_links(config.data)
        return [keyed.get(key) for key in keys]
    unique = list(dict.fromkeys(keys))
    links = eflomal_links(unique)
    if len(unique) == len(keys):  # every pair once (de-duplicated, one direction)
        return list(links)
    by_key = dict(zip(unique, links))
    return [by_key[key] for key in keys]


# ---------------------------------------------------------------- words → pieces


def piece_links(word_links: tuple[np.ndarray, np.ndarray, np.ndarray],
                source_starts: np.ndarray, source_offsets: np.ndarray,
                target_starts: np.ndarray, target_offsets: np.ndarray,
                source_skip: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(source piece, target piece) links of n sentence pairs, from their word links.

    ``word_links`` is three arrays, one item per link: the pair (0 to n - 1, ascending), the
    source word, the target word (for English → Hindi, the Hindi-first links swapped). The
    pieces of all pairs, one after another: ``*_starts[p]`` says whether piece p starts a
    word (its piece begins with "▁"; a pair's first piece always does), ``*_offsets`` (n + 1)
    where each pair's pieces begin; ``source_skip[i]``: pair i's first source piece (a tag)
    is in no word. Every piece of a target word is linked to every piece of each source word
    linked to that word; a target word without links gets none (leave it out of an alignment
    loss); a pair with a link past its words (a sentence cut at max_positions) gets none.

    Returns the links [L, 2] (int32, positions within their pair, each pair's sorted) and
    n + 1 offsets into them."""
    pair, source_word, target_word = word_links
    source = _Words(source_starts, source_offsets, source_skip)
    target = _Words(target_starts, target_offsets)
    fits = (source_word >= 0) & (source_word < source.count[pair]) & \
        (target_word >= 0) & (target_word < target.count[pair])
    usable = ~np.isin(pair, pair[~fits])
    pair, source_word, target_word = pair[usable], source_word[usable], target_word[usable]
    source_at, target_at = source.base[pair] + source_word, target.base[pair] + target_word
    source_first, target_first = source.first[source_at], target.first[target_at]
    target_len = target.end[target_at] - target_first
    sizes = (source.end[source_at] - source_first) * target_len
    # each link's block of (source piece, target piece), row by row
    link = np.repeat(np.arange(len(pair)), sizes)
    within = np.arange(int(sizes.sum())) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    pieces_pair = pair[link]
    source_piece = source_first[link] + within // target_len[link] - source.offsets[pieces_pair]
    target_piece = target_first[link] + within % target_len[link] - target.offsets[pieces_pair]
    order = np.lexsort((target_piece, source_piece, pieces_pair))
    found = np.stack([pieces_pair[order], source_piece[order], target_piece[order]], axis=1)
    once = np.ones(len(found), dtype=bool)  # a word link given twice gives its pieces once
    once[1:] = (found[1:] != found[:-1]).any(axis=1)
    found = found[once]
    counts = np.bincount(found[:, 0], minlength=len(source.count))
    return found[:, 1:].astype(np.int32), np.concatenate([[0], np.cumsum(counts)])


class _Words:
    """The words of n pairs' pieces (see `piece_links`): each word's first piece and end, and
    per pair its number of words and the index of its first word."""

    def __init__(self, starts: np.ndarray, offsets: np.ndarray,
                 skip: np.ndarray | None = None) -> None:
        self.offsets = offsets
        starts = starts.copy()
        pair_start = offsets[:-1]
        skip = np.zeros(len(pair_start), dtype=bool) if skip is None else skip
        first = pair_start + skip
        starts[first[first < offsets[1:]]] = True
        starts[pair_start[skip]] = False
        self.first = np.flatnonzero(starts)  # all pairs' words in order
        pair = np.searchsorted(offsets, self.first, side="right") - 1
        self.end = np.minimum(np.append(self.first[1:], len(starts)), offsets[pair + 1])
        self.count = np.bincount(pair, minlength=len(pair_start))
        self.base = np.cumsum(self.count) - self.count


# ---------------------------------------------------------------- piece links as arrays


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


def pair_piece_links(ids: EncodedCorpus, tokenizer: Tokenizer,
                     word_links: Sequence[list[Link] | None], direction: str,
                     chunk_pairs: int = 100_000) -> PieceLinks:
    """Each pair's Hindi-first ``word_links`` as (source piece, target piece) links of its
    encoded ``ids`` (`piece_links`' rule: every piece of a target word to every piece of
    each source word linked to it); none for pairs without links or whose links do not fit
    the pieces (a sentence cut at max_positions). For direction "both" a source's tag is its
    first piece, so its words' pieces stand one further on, and an en→hi pair takes its links
    swapped. Computed with arrays, ``chunk_pairs`` pairs at a time (per pair in Python, this
    took minutes at IITB size)."""
    direction = Direction(direction)
    source_ids, source_offsets = ids.source_arrays
    target_ids, target_offsets = ids.target_arrays
    pairs = len(source_offsets) - 1
    source_table = _word_start_table(source_ids, tokenizer.source_pieces)
    target_table = _word_start_table(target_ids, tokenizer.target_pieces)
    link_pairs, hindi_words, english_words = _flat_links(word_links)
    tag_language = _tag_languages(source_ids, source_offsets, tokenizer) if direction.both \
        else np.full(pairs, -1, dtype=np.int8)
    # per pair: whether its source is Hindi (for "both": whether it asks for English)
    hindi_source = tag_language == _LANGUAGE_CODES["en"] if direction.both \
        else np.full(pairs, direction.hindi_first(), dtype=bool)
    parts = []
    for first in range(0, max(pairs, 1), chunk_pairs):
        last = min(first + chunk_pairs, pairs)
        taken = slice(*np.searchsorted(link_pairs, [first, last]))
        sources, targets = source_offsets[first:last + 1], target_offsets[first:last + 1]
        pair = link_pairs[taken] - first
        hindi_first = hindi_source[first:last][pair]
        model_links = (pair, np.where(hindi_first, hindi_words[taken], english_words[taken]),
                       np.where(hindi_first, english_words[taken], hindi_words[taken]))
        parts.append(PieceLinks(*piece_links(
            model_links, source_table[source_ids[sources[0]:sources[-1]]], sources - sources[0],
            target_table[target_ids[targets[0]:targets[-1]]], targets - targets[0],
            source_skip=tag_language[first:last] >= 0)))
    return PieceLinks.concatenate(parts)


_LANGUAGE_CODES = {language: code for code, language in enumerate(TAGS)}


def _word_start_table(ids: np.ndarray, pieces) -> np.ndarray:
    """For every id up to the largest in ``ids``: whether its piece starts a word ("▁")."""
    present = np.unique(ids)
    table = np.zeros(int(present[-1]) + 1 if len(present) else 1, dtype=bool)
    table[present] = [piece.startswith("▁") for piece in pieces(present.tolist())]
    return table


def _tag_languages(ids: np.ndarray, offsets: np.ndarray, tokenizer: Tokenizer) -> np.ndarray:
    """Per pair, the code (`_LANGUAGE_CODES`) of the language its source's tag asks for, or
    -1 for a source without a tag piece first."""
    nonempty = offsets[1:] > offsets[:-1]
    first_ids = np.where(nonempty, ids[np.minimum(offsets[:-1], max(len(ids) - 1, 0))], -1) \
        if len(ids) else np.full(len(offsets) - 1, -1)
    languages = np.full(len(first_ids), -1, dtype=np.int8)
    present = np.unique(first_ids[first_ids >= 0])
    for piece_id, piece in zip(present.tolist(), tokenizer.source_pieces(present.tolist())):
        language = next((lang for lang, tag in TAGS.items() if tag == piece), None)
        if language is not None:
            languages[first_ids == piece_id] = _LANGUAGE_CODES[language]
    return languages


def _flat_links(word_links: Sequence[list[Link] | None]
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(pair index, first word, second word) of every link, pairs in order."""
    flat = PieceLinks.collect(word_links)  # any links per pair as two arrays, words here
    pairs = np.repeat(np.arange(len(flat)), np.diff(flat.offsets))
    return pairs, flat.links[:, 0], flat.links[:, 1]


# ---------------------------------------------------------------- the cache, a run's targets


def cached_piece_links(prepared: PreparedData, settings: dict,
                       make: Callable[[], PieceLinks],
                       rank: int = 0) -> tuple[PieceLinks, str]:
    """The training pairs' piece links and where they came from ("cache" or "built"): from
    the cache under a key of the train ids' key and ``settings`` (where the word links come
    from, the aligner's settings, the code that turns them into piece links), else ``make()``
    (kept in the cache). Under torchrun rank 0 makes them while the others wait."""
    if prepared.encoded_key is None or prepared.cache_dir is None:
        return make(), "built"
    entry = Entry(prepared.cache_dir, "links", cache_key("links", prepared.encoded_key, settings),
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


def guided_alignment_targets(config: Config, prepared: PreparedData,
                             rank: int = 0) -> tuple[Config, PieceLinks | None]:
    """The config the run trains with and the piece links of its training pairs for guided
    alignment, from the cache when it has them. Without eflomal (an optional extra) for data
    that ships no links, the run goes on unguided, saying what that costs and how to get it
    back: the config returned then says alignment_weight 0, as the run trains, and the links
    are None."""
    tokenizer = prepared.tokenizer
    try:
        links, source = cached_piece_links(
            prepared, links_settings(config.data), rank=rank,
            make=lambda: pair_piece_links(prepared.train, tokenizer,
                                          pair_word_links(config, prepared.train_pairs),
                                          config.data.direction))
    except AlignerMissingError as error:
        say(f"warning: guided alignment is off for this run: {error}. Without it the "
            "heatmaps align less well and test chrF was 4 points lower on the embedded corpus "
            "(docs/alignment.md)")
        return dataclasses.replace(config, train=dataclasses.replace(config.train,
                                                                     alignment_weight=0.0)), None
    log.info("guided alignment: word links for %d of %d training pairs (%s)",
             links.linked, len(prepared.train_pairs), source)
    return config, links


def links_settings(cfg: DataConfig) -> dict:
    """What the training pairs' links are made from, for their cache key: the links file (or
    the embedded corpus's), else eflomal and its settings; and the code that makes them."""
    if cfg.train_alignment_path is not None:
        origin = {"file": file_digest(Path(cfg.train_alignment_path))}
    elif cfg.source == "embedded":
        origin = {"file": file_digest(embedded_corpus_dir() / "train.align")}
    else:  # run_eflomal's settings are in links.py, whose code is part of LINKS_CODE
        origin = {"aligner": "eflomal"}
    return {**origin, "direction": cfg.direction, "code": LINKS_CODE}
