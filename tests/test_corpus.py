"""The embedded corpus: well-formed, disjoint splits, showcase sentences held out, showcase
words covered, and the data card's numbers current."""

import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from translator.corpus import (
    CORPUS_DIR,
    SHOWCASE,
    SPLITS,
    count_occurrences,
    read_split,
    statistics_table,
)

ROOT = Path(__file__).resolve().parent.parent
PUBLIC = ROOT.parent / "shared" / "data" / "public"


@pytest.fixture(scope="module")
def splits():
    return {split: read_split(split) for split in SPLITS}


def test_split_sizes(splits):
    assert len(splits["dev"]) >= 250 and len(splits["test"]) >= 250
    assert sum(len(rows) for rows in splits.values()) >= 5000
    assert len({domain for _, _, domain in splits["train"]}) >= 12


def test_every_line_is_a_normalised_pair(splits):
    for rows in splits.values():
        for hindi, english, domain in rows:
            assert hindi.strip() and english.strip() and domain
            assert unicodedata.normalize("NFC", hindi) == hindi
            assert any("\u0900" <= c <= "\u097f" for c in hindi)
            assert not any("\u0900" <= c <= "\u097f" for c in english)
            assert 3 <= len(english.split()) <= 40


def test_no_sentence_repeats_within_or_across_splits(splits):
    everything = [row for rows in splits.values() for row in rows]
    assert len({hindi for hindi, _, _ in everything}) == len(everything)
    assert len({english.lower() for _, english, _ in everything}) == len(everything)


def test_lengths_as_stated(splits):
    lengths = [len(english.split()) for rows in splits.values() for _, english, _ in rows]
    assert 10 <= sum(lengths) / len(lengths) <= 13
    assert sum(n >= 15 for n in lengths) / len(lengths) >= 0.2


def test_showcase_sentences_are_absent(splits):
    for rows in splits.values():
        hindi_side = {h.rstrip("।") for h, _, _ in rows}
        english_side = {e.lower() for _, e, _ in rows}
        for hindi, english in SHOWCASE:
            assert hindi.rstrip("।") not in hindi_side
            assert english.lower() not in english_side


def test_showcase_words_occur_in_at_least_three_training_pairs(splits):
    counts = count_occurrences(splits["train"])
    assert all(count >= 3 for count in counts.values()), counts


def test_data_card_numbers_are_current():
    card = (CORPUS_DIR / "DATACARD.md").read_text(encoding="utf-8")
    assert statistics_table() in card
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "build_corpus.py"), "--check"],
                           capture_output=True, text=True)
    assert check.returncode == 0, check.stdout


@pytest.mark.skipif(not PUBLIC.is_dir(), reason="../shared/data/public is not here")
def test_no_pair_is_copied_from_the_public_sets(splits):
    ours = {(h, e) for rows in splits.values() for h, e, _ in rows}
    for hindi_file in PUBLIC.glob("*/*.hi"):
        english_file = hindi_file.with_suffix(".en")
        if not english_file.exists():
            continue
        hindi_lines = hindi_file.read_text(encoding="utf-8").splitlines()
        english_lines = english_file.read_text(encoding="utf-8").splitlines()
        for hindi, english in zip(hindi_lines, english_lines):
            pair = (" ".join(unicodedata.normalize("NFC", hindi).split()),
                    " ".join(english.split()))
            assert pair not in ours, f"{hindi_file.parent.name}: {pair}"
