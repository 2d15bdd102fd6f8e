"""Tests for translator.links: Pharaoh files, symmetrisation, eflomal and word → piece links."""

import concurrent.futures
import os
import sys
import types
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from translator.guided import piece_links
from translator.links import (
    SYMMETRIZATIONS,
    LinksError,
    aligner_words,
    format_line,
    read_pharaoh,
    run_eflomal,
    run_eflomal_directions,
    swap,
    symmetrize,
    word_counts,
    write_pharaoh,
)

HINDI = ["राजेश ने टिकट बुक की", "धन्यवाद", "मेरी सीट कहाँ है?"]
ENGLISH = ["Rajesh booked the ticket", "Thank you very much", "Where is my seat?"]
LINKS = [[(0, 0), (2, 3), (3, 1), (4, 1)], [], [(0, 2), (1, 3), (2, 0), (3, 1)]]


def counts():
    return word_counts(HINDI), word_counts(ENGLISH)


# ---------------------------------------------------------------- Pharaoh files


def test_pharaoh_round_trip(tmp_path):
    path = tmp_path / "links.align"
    write_pharaoh(path, LINKS)
    assert path.read_text(encoding="utf-8") == "0-0 2-3 3-1 4-1\n\n0-2 1-3 2-0 3-1\n"
    assert read_pharaoh(path, *counts()) == LINKS


def test_read_sorts_and_drops_repeated_links(tmp_path):
    path = tmp_path / "links.align"
    path.write_text("4-1 0-0 0-0\n\n3-1\n", encoding="utf-8")
    assert read_pharaoh(path, *counts()) == [[(0, 0), (4, 1)], [], [(3, 1)]]


def test_english_first_files_are_swapped_to_hindi_first(tmp_path):
    path = tmp_path / "gold.en-hi"
    path.write_text("".join(format_line(swap(links)) + "\n" for links in LINKS),
                    encoding="utf-8")
    assert read_pharaoh(path, *counts(), reverse=True) == LINKS


def test_only_newline_ends_a_line(tmp_path):
    path = tmp_path / "links.align"
    path.write_bytes(b"0-0\r\n\n1-1")  # CRLF tolerated, no final newline needed
    assert read_pharaoh(path, *counts()) == [[(0, 0)], [], [(1, 1)]]


@pytest.mark.parametrize("token", ["1:2", "a-b", "1-", "-1-2", "1-2-3", "१-२"])
def test_malformed_link_names_file_line_and_token(tmp_path, token):
    path = tmp_path / "links.align"
    path.write_text(f"0-0\n\n0-0 {token}\n", encoding="utf-8")
    with pytest.raises(LinksError, match=rf"links.align line 3: '{token}' is not a Pharaoh"):
        read_pharaoh(path, *counts())


@pytest.mark.parametrize("link", ["5-0", "0-4"])
def test_link_past_its_sentence_names_file_line_and_sizes(tmp_path, link):
    path = tmp_path / "links.align"
    path.write_text(f"0-0 {link}\n\n\n", encoding="utf-8")
    with pytest.raises(LinksError, match=rf"line 1: link {link} points past the pair's 5 Hindi "
                                         "and 4 English words"):
        read_pharaoh(path, *counts())


def test_links_are_checked_against_their_own_line(tmp_path):
    path = tmp_path / "links.align"
    path.write_text("\n1-0\n\n", encoding="utf-8")  # fine for line 1; line 2 has 1 Hindi word
    with pytest.raises(LinksError, match="line 2: link 1-0 points past the pair's 1 Hindi"):
        read_pharaoh(path, *counts())
    path.write_text("\n0-3\n\n", encoding="utf-8")
    assert read_pharaoh(path, *counts())[1] == [(0, 3)]


@pytest.mark.parametrize("text", ["0-0\n\n", "0-0\n\n\n\n", ""])
def test_line_count_must_match_the_corpus(tmp_path, text):
    path = tmp_path / "links.align"
    path.write_text(text, encoding="utf-8")
    lines = text.count("\n")
    with pytest.raises(LinksError, match=rf"links.align has {lines} lines but there are 3 "
                                         "sentence pairs"):
        read_pharaoh(path, *counts())


def test_unreadable_file_and_mismatched_counts(tmp_path):
    with pytest.raises(LinksError, match="cannot read .*missing.align: No such file"):
        read_pharaoh(tmp_path / "missing.align", *counts())
    (tmp_path / "links.align").write_bytes(b"0-0\n\xff\n\n")
    with pytest.raises(LinksError, match="UTF-8"):
        read_pharaoh(tmp_path / "links.align", *counts())
    with pytest.raises(LinksError, match="3 Hindi but 2 English word counts"):
        read_pharaoh(tmp_path / "links.align", [5, 1, 4], [4, 4])


# ---------------------------------------------------------------- symmetrisation

# Worked by hand: 5 Hindi × 6 English words. Forward links each English word to one Hindi
# word, reverse each Hindi word to one English word.
#
#   intersection          (0,0) (1,1)
#   union                 + (1,2) (2,1) (0,5) (3,4) (3,5)
#   grow-diag             (1,1)'s neighbours (1,2) and (2,1) are in the union and each has an
#                         unaligned word (English 2, Hindi 2): added. (0,5), (3,4), (3,5)
#                         touch no aligned link.
#   grow-diag-final       forward: (0,5) English 5 unaligned → added; (3,4) both unaligned →
#                         added. reverse: (3,5) Hindi 3 and English 5 now aligned → not added.
#   grow-diag-final-and   forward: (0,5) Hindi 0 aligned → not added; (3,4) → added.
#                         reverse: (3,5) Hindi 3 aligned → not added.
FORWARD = {(0, 0), (1, 1), (1, 2), (0, 5), (3, 4)}
REVERSE = {(0, 0), (1, 1), (2, 1), (3, 5)}
EXPECTED = {
    "intersection": [(0, 0), (1, 1)],
    "union": [(0, 0), (0, 5), (1, 1), (1, 2), (2, 1), (3, 4), (3, 5)],
    "grow-diag": [(0, 0), (1, 1), (1, 2), (2, 1)],
    "grow-diag-final": [(0, 0), (0, 5), (1, 1), (1, 2), (2, 1), (3, 4)],
    "grow-diag-final-and": [(0, 0), (1, 1), (1, 2), (2, 1), (3, 4)],
}


@pytest.mark.parametrize("method", SYMMETRIZATIONS)
def test_symmetrisation_on_a_hand_worked_example(method):
    assert symmetrize(FORWARD, REVERSE, method) == EXPECTED[method]


def test_grow_diag_keeps_growing_from_links_it_added():
    # A diagonal chain reachable only step by step from the one agreed link (0,0).
    forward = {(0, 0), (1, 1), (2, 2)}
    reverse = {(0, 0), (3, 3)}
    assert symmetrize(forward, reverse, "grow-diag") == [(0, 0), (1, 1), (2, 2), (3, 3)]
    # Every link of a row is visited, not only the last one: (1,0) grows from (0,0).
    assert symmetrize({(0, 0), (0, 3), (1, 0)}, {(0, 0), (0, 3)}, "grow-diag") == [
        (0, 0), (0, 3), (1, 0)]
    # ... but never adds a union link whose two words are both aligned already.
    assert symmetrize({(0, 0), (1, 1), (0, 1)}, {(0, 0), (1, 1)}, "grow-diag") == [(0, 0),
                                                                                   (1, 1)]


def test_symmetrisation_of_nothing_and_unknown_methods():
    for method in SYMMETRIZATIONS:
        assert symmetrize([], [], method) == []
    with pytest.raises(LinksError, match="unknown symmetrisation 'grow'"):
        symmetrize(FORWARD, REVERSE, "grow")


# ---------------------------------------------------------------- words → pieces


def pieces_of(starts: list[bool]) -> tuple[np.ndarray, np.ndarray]:
    """One pair's pieces as `piece_links` takes them: word starts and offsets."""
    return np.array(starts), np.array([0, len(starts)])


def one_pair(links: list[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    pairs = np.zeros(len(links), dtype=np.int64)
    return pairs, np.array([s for s, _ in links]), np.array([t for _, t in links])


def as_list(found: tuple[np.ndarray, np.ndarray]) -> list[list[tuple[int, int]]]:
    links, offsets = found
    return [[tuple(link) for link in links[a:b].tolist()] for a, b in zip(offsets, offsets[1:])]


def test_piece_links_on_a_hand_built_example():
    # Source words: "राजेश" = 2 pieces (0, 1), "ने" = piece 2, "बुक" = piece 3.
    # Target words: "Rajesh" = piece 0, "booked" = pieces 1, 2, "it" = piece 3, "." = piece 4.
    source = pieces_of([True, False, True, True])
    target = pieces_of([True, True, False, True, True])
    word_links = [(0, 0), (2, 1), (1, 2), (2, 2), (2, 2)]  # "." (word 3) has no link
    assert as_list(piece_links(one_pair(word_links), *source, *target)) == [[
        (0, 0), (1, 0),  # Rajesh → both pieces of राजेश
        (2, 3),  # it → ने
        (3, 1), (3, 2),  # each piece of booked → बुक
        (3, 3),  # it → बुक too (given twice, kept once)
    ]]


def test_piece_links_in_the_english_to_hindi_direction_and_after_a_tag():
    hindi, english = [True, False, True], [True, True, False]
    hindi_first = [(0, 1), (1, 0)]
    # English source, Hindi target: swap the word links first.
    assert as_list(piece_links(one_pair(swap(hindi_first)), *pieces_of(english),
                               *pieces_of(hindi))) == [[(0, 2), (1, 0), (1, 1), (2, 0), (2, 1)]]
    # a tag piece first (it would not start a word by itself): every source piece one on
    tagged = pieces_of([False, *english])
    assert as_list(piece_links(one_pair(swap(hindi_first)), *tagged, *pieces_of(hindi),
                               source_skip=np.array([True]))) == [
        [(1, 2), (2, 0), (2, 1), (3, 0), (3, 1)]]


def test_piece_links_leave_out_a_pair_with_links_past_its_pieces():
    # three pairs: a link past pair 0's two source words, none for pair 1, a good pair 2
    starts, offsets = np.array([True, True, True, True, False]), np.array([0, 2, 3, 5])
    targets, target_offsets = np.array([True, True, True]), np.array([0, 1, 2, 3])
    word_links = (np.array([0, 0, 2]), np.array([0, 2, 0]), np.array([0, 0, 0]))
    assert as_list(piece_links(word_links, starts, offsets, targets, target_offsets)) == [
        [], [], [(0, 0), (1, 0)]]


# ---------------------------------------------------------------- eflomal


def test_aligner_words_keep_positions():
    sentence = 'मेरी सीट कहाँ है? "Hello," (U.S.) — है।'
    words = aligner_words(sentence).split()
    assert words == ["मेरी", "सीट", "कहाँ", "है", "Hello", "U.S", "—", "है"]
    assert len(words) == len(sentence.split())


def test_missing_eflomal_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", None)  # makes `import eflomal` fail
    with pytest.raises(LinksError, match=r"eflomal .* not installed.*pip install -e '\.\[align\]'"):
        run_eflomal(HINDI, ENGLISH)


class FakeAligner:
    """Stands in for eflomal.Aligner: links word k to word k, forward only where the English
    word is capitalised, and records what it was given."""

    given: list[tuple[list[str], list[str]]] = []

    def __init__(self, **settings):
        self.settings = settings

    def align(self, hindi, english, links_filename_fwd, links_filename_rev, quiet=True):
        FakeAligner.given.append((list(hindi), list(english)))
        forward, reverse = [], []
        for h, e in zip(hindi, english):
            size = min(len(h.split()), len(e.split()))
            forward.append(" ".join(f"{k}-{k}" for k in range(size) if e.split()[k].istitle()))
            reverse.append(" ".join(f"{k}-{k}" for k in range(size)))
        Path(links_filename_fwd).write_text("".join(f + "\n" for f in forward), encoding="utf-8")
        Path(links_filename_rev).write_text("".join(r + "\n" for r in reverse), encoding="utf-8")


def test_run_eflomal_maps_links_back_to_every_pair(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", types.SimpleNamespace(Aligner=FakeAligner))
    FakeAligner.given.clear()
    hindi = ["एक दो।", "", "तीन चार पाँच"]
    english = ["One two.", "Empty Hindi side", "Three four five"]
    forward, reverse = run_eflomal_directions(hindi, english)
    # The pair with an empty side is not given to the aligner and gets no links.
    assert FakeAligner.given == [(["एक दो\n", "तीन चार पाँच\n"], ["One two\n", "Three four five\n"])]
    assert forward == [[(0, 0)], [], [(0, 0)]]
    assert reverse == [[(0, 0), (1, 1)], [], [(0, 0), (1, 1), (2, 2)]]
    assert run_eflomal(hindi, english, "intersection") == forward
    assert run_eflomal(hindi, english, "union") == reverse
    run_eflomal_directions(hindi, english, strip_punctuation=False)
    assert FakeAligner.given[-1][1][0] == "One two.\n"


def test_run_eflomal_does_its_python_work_in_processes_with_the_same_result(monkeypatch):
    """Many pairs: the aligner's words and the links' reading and symmetrising run in
    worker processes, chunk by chunk, and give what one process gives."""
    from translator import links
    monkeypatch.setitem(sys.modules, "eflomal", types.SimpleNamespace(Aligner=FakeAligner))
    hindi = [f"एक दो{'।' * (n % 2)} तीन" for n in range(7)] + ["", "चार"]
    english = [f"One two{'.' * (n % 3)} three" for n in range(7)] + ["Empty", "Four"]
    one_process = run_eflomal(hindi, english)
    FakeAligner.given.clear()
    used = []
    real = concurrent.futures.ProcessPoolExecutor
    monkeypatch.setattr(concurrent.futures, "ProcessPoolExecutor",
                        lambda *a, **k: used.append(a) or real(*a, **k))
    monkeypatch.setattr(links, "CHUNK", 2)  # 4 chunks of the 8 pairs eflomal sees
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert run_eflomal(hindi, english) == one_process
    assert len(used) == 3 and FakeAligner.given[0][0][1] == "एक दो तीन\n"
    assert one_process[7] == [] and one_process[1] == [(0, 0), (1, 1), (2, 2)]


def test_run_eflomal_rejects_unaligned_input(monkeypatch):
    monkeypatch.setitem(sys.modules, "eflomal", types.SimpleNamespace(Aligner=FakeAligner))
    with pytest.raises(LinksError, match="3 Hindi but 2 English sentences"):
        run_eflomal(HINDI, ENGLISH[:2])
    with pytest.raises(LinksError, match="unknown symmetrisation"):
        run_eflomal(HINDI, ENGLISH, "best")


def test_real_eflomal_finds_unambiguous_links():
    pytest.importorskip("eflomal")
    # Word h_k always translates to E_k; English puts them in the other order after a word
    # of its own, so a link read the wrong way round would point past the Hindi words.
    hindi, english = [], []
    for a in range(8):
        for b in range(8):
            if a != b:
                hindi.append(f"h{a} h{b}")
                english.append(f"ex E{b} E{a}")
    links = run_eflomal(hindi, english, "intersection", samplers=1)
    right = sum(links[n] == [(0, 2), (1, 1)] for n in range(len(hindi)))
    assert right >= 0.9 * len(hindi)


def piece_links_of_one_pair(links, source_starts, target_starts, skip):
    """The rule of `piece_links`, one pair at a time, as a reader would write it."""
    def word_of_piece(starts, skip):
        words, word = [], -1
        for n, start in enumerate(starts):
            if skip and n == 0:  # the tag: in no word
                words.append(None)
                continue
            word += start or n == int(skip)  # a pair's first word piece starts a word
            words.append(word)
        return words
    sources, targets = word_of_piece(source_starts, skip), word_of_piece(target_starts, False)
    if any(s not in sources or t not in targets for s, t in links):
        return []
    return sorted({(p, q) for s, t in links for p, ps in enumerate(sources) if ps == s
                   for q, qt in enumerate(targets) if qt == t})


@given(st.lists(st.tuples(st.lists(st.booleans(), min_size=1, max_size=8),
                          st.lists(st.booleans(), min_size=1, max_size=8), st.booleans(),
                          st.lists(st.tuples(st.integers(0, 8), st.integers(0, 8)), max_size=6)),
                max_size=6))
@settings(max_examples=200, deadline=None)
def test_piece_links_of_many_pairs_follow_the_one_pair_rule(pairs):
    pairs = [(s, t, skip and len(s) > 1, links) for s, t, skip, links in pairs]
    flat = [(n, s, t) for n, (*_, links) in enumerate(pairs) for s, t in links]
    word_links = tuple(np.array([link[i] for link in flat], dtype=np.int64) for i in range(3))
    def side(k):
        return (np.array([b for pair in pairs for b in pair[k]], dtype=bool),
                np.cumsum([0] + [len(pair[k]) for pair in pairs]))
    found = as_list(piece_links(word_links, *side(0), *side(1),
                                source_skip=np.array([p[2] for p in pairs], dtype=bool)))
    assert found == [piece_links_of_one_pair(links, s, t, skip) for s, t, skip, links in pairs]
