"""Word alignment links between Hindi and English sentences: Pharaoh files, symmetrisation
and the eflomal aligner. (Guided alignment turns them into links between SentencePiece pieces:
`translator.guided`.)

The convention, everywhere in this module and in every link file it reads or writes: a link
``(i, j)``, written ``i-j`` in a Pharaoh line, joins Hindi word ``i`` to English word ``j``,
both 0-based, words being the whitespace-separated words of the sentence as stored (already
normalised). Links are Hindi-first whatever the model's direction; `swap` turns them around
for an English → Hindi model. A Pharaoh file has one line per sentence pair, in the corpus's
order; an empty line is a pair without links.

eflomal (Östling & Tiedemann 2016; GPL-3.0, an optional extra: ``pip install -e '.[align]'``)
is used as a tool through its Python API, never copied. It aligns in two directions:
*forward* links each English word to at most one Hindi word, *reverse* links each Hindi word
to at most one English word; `symmetrize` combines the two with the heuristics of Koehn, Och
and Marcu (2003) as the Moses manual describes them (see `SYMMETRIZATIONS`). eflomal's sampler
seeds itself from /dev/urandom and has no seed option, so two runs give slightly different
links.
"""

from __future__ import annotations

import concurrent.futures
import importlib
import multiprocessing
import os
import re
import tempfile
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from translator.errors import TranslatorError
from translator.lines import read_lines

# (i, j) of a Pharaoh item "i-j", 0-based: (Hindi word, English word) in the corpus's link
# files and guided alignment; (source word, target word) in what `align` writes and reads as
# gold; (source piece, target piece) after `guided.piece_links`
Link = tuple[int, int]

# intersection: links both directions agree on (precise, sparse); union: every link of
# either (dense, noisy); grow-diag: the intersection grown into neighbouring (also diagonal)
# union links that align a still-unaligned word; -final: then every remaining directional
# link with a still-unaligned word on either side; -final-and: only where both are unaligned.
SYMMETRIZATIONS = ("intersection", "union", "grow-diag", "grow-diag-final", "grow-diag-final-and")
# Chosen by measurement: the lowest AER on the 30 WPT-05 pairs for eflomal on the embedded
# corpus (0.567 against 0.572 grow-diag-final, 0.577 union, 0.582 grow-diag, 0.610
# intersection) and on the public sets + embedded train (0.439; 0.444 to 0.477), mean of 5
# runs each (python bench/alignment_bench.py --eflomal-only --repeats 5, 2026-12-01).
DEFAULT_SYMMETRIZATION = "grow-diag-final-and"
INSTALL_HINT = "pip install -e '.[align]'"

_LINK = re.compile(r"([0-9]{1,9})-([0-9]{1,9})")  # a word number, not a 4,301-digit int
_NEIGHBOURS = ((-1, 0), (0, -1), (1, 0), (0, 1), (-1, -1), (-1, 1), (1, -1), (1, 1))


class LinksError(TranslatorError):
    """Word links cannot be read, written or computed as asked; the message says why."""


class AlignerMissingError(LinksError):
    """The eflomal word aligner (an optional extra) is not installed."""


# ---------------------------------------------------------------- Pharaoh files


def word_counts(sentences: Iterable[str]) -> list[int]:
    """The number of whitespace words of each sentence."""
    return [len(sentence.split()) for sentence in sentences]


def swap(links: Iterable[Link]) -> list[Link]:
    """(i, j) → (j, i), sorted: Hindi-first links as English-first ones, or back."""
    return sorted((j, i) for i, j in links)


def format_line(links: Iterable[Link]) -> str:
    """One Pharaoh line, 'i-j i-j ...', links sorted and each once."""
    return " ".join(f"{i}-{j}" for i, j in sorted(set(links)))


def parse_line(line: str, first_words: int, second_words: int, where: str = "input",
               reverse: bool = False, sides: tuple[str, str] = ("Hindi", "English")
               ) -> list[Link]:
    """The links of one Pharaoh line, sorted and each once, checked against the pair's word
    counts (``first_words`` of the first side, Hindi for the corpus's links). ``reverse``:
    the line writes the second side's word first (as WPT-05's gold does); the links are
    swapped back. ``sides`` names the two sides in messages."""
    links = set()
    for item in line.split():
        match = _LINK.fullmatch(item)
        if not match:
            raise LinksError(f"{where}: {item!r} is not a Pharaoh link; write links as i-j with "
                             "0-based word numbers, separated by spaces")
        first, second = int(match.group(1)), int(match.group(2))
        i, j = (second, first) if reverse else (first, second)
        if i >= first_words or j >= second_words:
            order = f"{sides[1 if reverse else 0]} word first"
            raise LinksError(f"{where}: link {item} points past the pair's {first_words} "
                             f"{sides[0]} and {second_words} {sides[1]} words (0-based, "
                             f"{order}); is the file for these sentences, in this order?")
        links.add((i, j))
    return sorted(links)


def read_pharaoh(path: str | Path, first_words_per_line: Sequence[int],
                 second_words_per_line: Sequence[int], reverse: bool = False,
                 sides: tuple[str, str] = ("Hindi", "English")) -> list[list[Link]]:
    """One sorted list of links per line of the Pharaoh file at ``path``: the one reader of
    link files (the corpus's, ``data.train_alignment_path``, gold links for AER).

    The file must have one line per sentence pair (``len(first_words_per_line)``), and every
    link must fall inside its pair's words (`word_counts` of each side gives the counts);
    ``reverse`` and ``sides`` as in `parse_line`. Only '\\n' ends a line, as for the corpus
    files."""
    path = Path(path)
    if len(first_words_per_line) != len(second_words_per_line):
        raise LinksError(f"{len(first_words_per_line)} {sides[0]} but "
                         f"{len(second_words_per_line)} {sides[1]} word counts; give one of "
                         "each per sentence pair")
    lines = read_lines(path, LinksError)
    if len(lines) != len(first_words_per_line):
        raise LinksError(f"{path} has {len(lines)} lines but there are "
                         f"{len(first_words_per_line)} sentence pairs; a link file needs one "
                         "line per pair, in the same order")
    return [parse_line(line, first, second, f"{path} line {number}", reverse,
                       sides)
            for number, (line, first, second)
            in enumerate(zip(lines, first_words_per_line, second_words_per_line), start=1)]


def write_pharaoh(path: str | Path, links_per_line: Iterable[Iterable[Link]]) -> None:
    """Write one Pharaoh line per sentence pair (Hindi word first)."""
    text = "".join(format_line(links) + "\n" for links in links_per_line)
    Path(path).write_text(text, encoding="utf-8")


# ---------------------------------------------------------------- symmetrisation


def symmetrize(forward: Iterable[Link], reverse: Iterable[Link],
               method: str = DEFAULT_SYMMETRIZATION) -> list[Link]:
    """One sentence pair's links from its two directional alignments, sorted.

    Written from the description of Koehn et al. (2003) and the Moses manual: start from the
    intersection; grow-diag then sweeps the words in order (Hindi word i, then English word
    j), and for every link (i, j) of the alignment adds each of its eight neighbours that is
    in the union and has its Hindi or its English word still unaligned, repeating sweeps until
    nothing is added; -final then adds, in order, forward links and then reverse links whose
    Hindi or English word is still unaligned (-final-and: both)."""
    if method not in SYMMETRIZATIONS:
        raise LinksError(f"unknown symmetrisation {method!r}; use one of: "
                         f"{', '.join(SYMMETRIZATIONS)}")
    forward, reverse = set(forward), set(reverse)
    if method == "intersection":
        return sorted(forward & reverse)
    if method == "union":
        return sorted(forward | reverse)
    alignment: set[Link] = set()
    row_links: dict[int, set[int]] = {}  # Hindi word -> the English words it is linked to
    hindi_aligned: set[int] = set()
    english_aligned: set[int] = set()

    def add(link: Link) -> None:
        alignment.add(link)
        row_links.setdefault(link[0], set()).add(link[1])
        hindi_aligned.add(link[0])
        english_aligned.add(link[1])

    for link in forward & reverse:
        add(link)
    union = forward | reverse
    rows = max((i for i, _ in union), default=-1) + 1
    added = True
    while added:  # one sweep over the grid, row by row, each row left to right
        added = False
        for i in range(rows):
            j = -1
            while True:  # the next link of row i, including links this sweep just added
                later = [col for col in row_links.get(i, ()) if col > j]
                if not later:
                    break
                j = min(later)
                for di, dj in _NEIGHBOURS:
                    link = (i + di, j + dj)
                    if link in union and link not in alignment and (
                            link[0] not in hindi_aligned or link[1] not in english_aligned):
                        add(link)
                        added = True
    if method == "grow-diag":
        return sorted(alignment)
    both = method == "grow-diag-final-and"
    for directional in (forward, reverse):
        for link in sorted(directional - alignment):
            hindi_free, english_free = link[0] not in hindi_aligned, link[1] not in english_aligned
            if (hindi_free and english_free) if both else (hindi_free or english_free):
                add(link)
    return sorted(alignment)


# ---------------------------------------------------------------- eflomal


def _eflomal():
    try:
        return importlib.import_module("eflomal")
    except ImportError:
        raise AlignerMissingError("the eflomal word aligner is not installed; install it with "
                                  f"{INSTALL_HINT} (or give a Pharaoh file of links instead)"
                                  ) from None


def aligner_words(sentence: str) -> str:
    """The sentence as the aligner sees it: each whitespace word without the punctuation at
    its ends ("है।" → "है", "evening." → "evening"; a word of punctuation only stays), so
    that word positions are unchanged but "है।" and "है" count as one word. eflomal
    lower-cases by itself."""
    return " ".join(_strip_punctuation(word) for word in sentence.split())


def _strip_punctuation(word: str) -> str:
    start, end = 0, len(word)
    while start < end and unicodedata.category(word[start]).startswith("P"):
        start += 1
    while end > start and unicodedata.category(word[end - 1]).startswith("P"):
        end -= 1
    return word[start:end] or word


def run_eflomal_directions(
    hindi_sentences: Sequence[str], english_sentences: Sequence[str], *,
    samplers: int = 3, iterations: float = 1.0, strip_punctuation: bool = True,
    quiet: bool = True,
) -> tuple[list[list[Link]], list[list[Link]]]:
    """eflomal's forward and reverse links (both Hindi-first), one list per sentence pair.

    ``samplers`` independent samplers are averaged (eflomal's default: 3); ``iterations``
    scales eflomal's automatic iteration counts; ``strip_punctuation`` gives eflomal the
    `aligner_words` of each sentence instead of its words as they are. A pair with an empty
    side gets no links."""
    forward: list[list[Link]] = [[] for _ in hindi_sentences]
    reverse: list[list[Link]] = [[] for _ in hindi_sentences]
    for n, links in _eflomal_links(hindi_sentences, english_sentences, None, samplers,
                                   iterations, strip_punctuation, quiet):
        forward[n], reverse[n] = links
    return forward, reverse


def _eflomal_links(hindi_sentences: Sequence[str], english_sentences: Sequence[str],
                   method: str | None, samplers: int, iterations: float,
                   strip_punctuation: bool, quiet: bool) -> Iterator[tuple[int, Any]]:
    """(pair number, links) of each pair without an empty side: eflomal's (forward, reverse)
    links, or with a ``method`` both symmetrised. The Python work before and after eflomal
    (the aligner's words, reading and symmetrising its links) runs in worker processes when
    there are many pairs: at IITB size it took minutes on one core."""
    if len(hindi_sentences) != len(english_sentences):
        raise LinksError(f"{len(hindi_sentences)} Hindi but {len(english_sentences)} English "
                         "sentences; give them as line-aligned pairs")
    eflomal = _eflomal()
    usable = [n for n, (h, e) in enumerate(zip(hindi_sentences, english_sentences))
              if h.split() and e.split()]
    if not usable:
        return
    hindi = _in_processes(_aligner_lines, [hindi_sentences[n] for n in usable],
                          strip_punctuation)
    english = _in_processes(_aligner_lines, [english_sentences[n] for n in usable],
                            strip_punctuation)
    aligner = eflomal.Aligner(n_samplers=samplers, rel_iterations=iterations)
    with tempfile.TemporaryDirectory(prefix="eflomal-") as folder:
        forward_path, reverse_path = Path(folder) / "forward", Path(folder) / "reverse"
        aligner.align(hindi, english, links_filename_fwd=str(forward_path),
                      links_filename_rev=str(reverse_path), quiet=quiet)
        # eflomal writes both directions source (here: Hindi) first.
        lines = [read_lines(path, LinksError) for path in (forward_path, reverse_path)]
    if not len(lines[0]) == len(lines[1]) == len(usable):
        raise LinksError(f"eflomal wrote {len(lines[0])} and {len(lines[1])} lines of links "
                         f"for {len(usable)} sentence pairs")
    rows = list(zip(*lines, word_counts(hindi), word_counts(english)))
    yield from zip(usable, _in_processes(_parsed_links, rows, method))


CHUNK = 50_000  # items a worker process takes at a time


def _in_processes(function: Callable[[list, Any], list], items: list, argument: Any) -> list:
    """``function(chunk, argument)`` over ``items`` in chunks, concatenated in order: in
    worker processes (one a core) when there is more than one chunk and more than one core."""
    chunks = [items[start:start + CHUNK] for start in range(0, len(items), CHUNK)]
    workers = min(len(os.sched_getaffinity(0)), len(chunks))
    if workers < 2:
        return [item for chunk in chunks for item in function(chunk, argument)]
    # spawn, not fork: the caller may hold threads (logging, torch) that fork would copy
    context = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context) as pool:
        done = pool.map(function, chunks, [argument] * len(chunks))
        return [item for chunk in done for item in chunk]


def _aligner_lines(sentences: list[str], strip_punctuation: bool) -> list[str]:
    """What eflomal reads: one line per sentence, its `aligner_words` (or its words)."""
    if strip_punctuation:
        return [aligner_words(sentence) + "\n" for sentence in sentences]
    return [" ".join(sentence.split()) + "\n" for sentence in sentences]


def _parsed_links(rows: list[tuple[str, str, int, int]], method: str | None) -> list:
    """Per (forward line, reverse line, Hindi words, English words): both directions'
    links, or with a ``method`` their symmetrisation."""
    found = []
    for forward_line, reverse_line, hindi_words, english_words in rows:
        forward = parse_line(forward_line, hindi_words, english_words, "eflomal's links")
        reverse = parse_line(reverse_line, hindi_words, english_words, "eflomal's links")
        found.append((forward, reverse) if method is None
                     else symmetrize(forward, reverse, method))
    return found


def eflomal_scores(hindi_sentences: Sequence[str], english_sentences: Sequence[str], *,
                   samplers: int = 3) -> list[float]:
    """eflomal's cost of each sentence pair (its negative log-probability, forward plus
    reverse; higher: the words fit each other worse), for finding pairs to re-read. A pair
    with an empty side costs 0."""
    eflomal = _eflomal()
    usable = [n for n, (h, e) in enumerate(zip(hindi_sentences, english_sentences))
              if h.split() and e.split()]
    costs = [0.0] * len(hindi_sentences)
    hindi = [aligner_words(hindi_sentences[n]) + "\n" for n in usable]
    english = [aligner_words(english_sentences[n]) + "\n" for n in usable]
    with tempfile.TemporaryDirectory(prefix="eflomal-") as folder:
        paths = [Path(folder) / "forward", Path(folder) / "reverse"]
        eflomal.Aligner(n_samplers=samplers).align(
            hindi, english, scores_filename_fwd=str(paths[0]),
            scores_filename_rev=str(paths[1]), quiet=True)
        for path in paths:
            for n, line in zip(usable, read_lines(path, LinksError)):
                costs[n] += float(line)
    return costs


def run_eflomal(
    hindi_sentences: Sequence[str], english_sentences: Sequence[str],
    method: str = DEFAULT_SYMMETRIZATION, *,
    samplers: int = 3, iterations: float = 1.0, strip_punctuation: bool = True,
    quiet: bool = True,
) -> list[list[Link]]:
    """Hindi-first word links of each sentence pair: eflomal run forward and reverse on all
    the pairs together (unsupervised), then symmetrised with ``method``."""
    if method not in SYMMETRIZATIONS:
        raise LinksError(f"unknown symmetrisation {method!r}; use one of: "
                         f"{', '.join(SYMMETRIZATIONS)}")
    links: list[list[Link]] = [[] for _ in hindi_sentences]
    for n, symmetrized in _eflomal_links(hindi_sentences, english_sentences, method, samplers,
                                         iterations, strip_punctuation, quiet):
        links[n] = symmetrized
    return links
