"""A stand-in for the IIT Bombay English–Hindi corpus (cfilt/iitb-english-hindi), offline.

    python bench/make_iitb_standin.py                      # 1,659,083 train rows
    python bench/make_iitb_standin.py --train-rows 100000 --out bench/results/iitb-100k

Writes a Hugging Face `datasets` folder in the hub's layout and the exact IITB schema, which
`datasets.load_dataset(FOLDER)` reads as it reads the hub (and `data.hub_id=FOLDER` in a config):

    FOLDER/data/train-0000k-of-0000n.parquet   rows {"translation": {"en": ..., "hi": ...}}
    FOLDER/data/validation-00000-of-00001.parquet   (Translation(languages=["en", "hi"]))
    FOLDER/data/test-00000-of-00001.parquet
    FOLDER/README.md                           what it is and how it was made
    FOLDER/stats.json                          row counts and length statistics

With --format disk it writes `DatasetDict.save_to_disk(FOLDER)` instead (for load_from_disk).

How the rows are made, all from real human translations (needs ../shared/data/public and
eflomal, `pip install -e ".[align]"`):
- validation: the real IITB dev set (WMT14 newsdev2014, 520 pairs, iitb_wmt14/dev);
- test: NTREX-128 (newstest2019 with a human Hindi reference, 1,997 pairs; news, like the
  real IITB test set, which is not in the shared data);
- train, from sentence units: every other shared set (Tatoeba, TICO-19, FLORES dev, Joshua
  Wikipedia with all four references, UD PUD, XQuAD questions and context paragraphs) and the
  embedded corpus (all three splits), showcase, dev and test sentences excluded; a line
  holding several sentences is split into sentence pairs where both sides have as many
  sentences. Phrase units: eflomal aligns the sentence units (one sampler, grow-diag-final-
  and), and every phrase pair consistent with the links (2-7 English words, at most 8 Hindi
  words, no link leaving the pair) is a phrase unit, the kind of short segment (dictionary
  entries, headings, fragments) the real corpus has many of.
- Each train row joins one to three units on both sides in the same order, so it is still a
  translation of itself: 35% one phrase, 15% two phrases, 22% a sentence and a phrase, 20%
  two sentences, 5% three sentences (all random); every sentence unit also appears once on
  its own. The real corpus's noise is there too: 2% exact repeats of earlier rows, 0.1% rows
  with an empty side, 0.2% rows whose Hindi holds more than its English (a bad length
  ratio), and whole XQuAD paragraphs (over-long lines). This keeps the real vocabulary and
  gives 1.66M mostly distinct rows of 14.8 English words on average (median 9), meant to be
  near the real corpus's mean (which could not be checked offline).

Word types are limited to those of the ~30k sentence units, far fewer than the real corpus
has; stages whose cost grows with distinct words (SentencePiece) may be slower on real data.
"""

import argparse
import json
import re
import shutil
import sys
import time
from pathlib import Path

import datasets
import numpy as np
import pyarrow as pa

from translator.corpus import SHOWCASE, read_split
from translator.errors import TranslatorError
from translator.links import Link, run_eflomal

PUBLIC = Path(__file__).resolve().parents[2] / "shared" / "data" / "public"
IITB_TRAIN_ROWS = 1_659_083  # the hub dataset's train split
TRAIN_SETS = ["tatoeba_manythings/train", "tico19/test", "flores/dev", "joshua_wiki/train4",
              "ud_pud/test", "xquad/questions", "xquad/contexts"]
DEV_SET, TEST_SET = "iitb_wmt14/dev", "ntrex128/test"
# What a recombined train row is made of: (sentence units, phrase units) -> share of rows
ROW_KINDS = {(0, 1): 0.35, (0, 2): 0.15, (1, 1): 0.22, (2, 0): 0.20, (3, 0): 0.05}
PHRASE_WORDS = (2, 7)  # English words of a phrase unit
SHARD_ROWS = 500_000
_ENGLISH_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(A-Z0-9])")
_HINDI_END = re.compile(r"(?<=[।?!.|])\s+")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="bench/results/iitb-standin", help="dataset folder")
    parser.add_argument("--train-rows", type=int, default=IITB_TRAIN_ROWS)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--format", choices=["hub", "disk"], default="hub",
                        help="hub: parquet files in the hub layout; disk: save_to_disk")
    return parser.parse_args()


def read_pairs(name: str) -> list[tuple[str, str]]:
    """(english, hindi) of a line-aligned NAME.en / NAME.hi pair of files."""
    english = (PUBLIC / f"{name}.en").read_bytes().decode("utf-8").split("\n")
    hindi = (PUBLIC / f"{name}.hi").read_bytes().decode("utf-8").split("\n")
    if english[-1] == "" and hindi[-1] == "":
        english, hindi = english[:-1], hindi[:-1]
    if len(english) != len(hindi):
        raise SystemExit(f"{name}: {len(english)} English lines, {len(hindi)} Hindi lines")
    return [(e.strip(), h.strip()) for e, h in zip(english, hindi)]


def sentence_units(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Split multi-sentence lines into sentence pairs where both sides split alike."""
    units = []
    for english, hindi in pairs:
        english_parts, hindi_parts = _ENGLISH_END.split(english), _HINDI_END.split(hindi)
        if len(english_parts) > 1 and len(english_parts) == len(hindi_parts):
            units.extend(zip(english_parts, hindi_parts))
        else:
            units.append((english, hindi))
    return units


def train_units() -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """(sentence units, whole paragraphs) for train, without showcase, dev or test sentences."""
    held_out = {text for pair in [*read_pairs(DEV_SET), *read_pairs(TEST_SET)] for text in pair}
    held_out |= {text for hindi, english in SHOWCASE for text in (english, hindi)}
    raw = [pair for name in TRAIN_SETS for pair in read_pairs(name)]
    raw += [(english, hindi) for split in ("train", "dev", "test")
            for hindi, english, _ in read_split(split)]
    units = [(e, h) for e, h in sentence_units(raw)
             if e and h and e not in held_out and h not in held_out]
    paragraphs = [(e, h) for e, h in read_pairs("xquad/contexts") if e and h]
    return list(dict.fromkeys(units)), paragraphs


def phrase_pairs(english: str, hindi: str, links: list[Link]) -> list[tuple[str, str]]:
    """(english, hindi) phrase pairs consistent with the Hindi-first word links (Koehn's phrase
    extraction without unaligned-word extension)."""
    english_words, hindi_words = english.split(), hindi.split()
    hindi_of: dict[int, list[int]] = {}
    english_of: dict[int, list[int]] = {}
    for i, j in links:
        hindi_of.setdefault(j, []).append(i)
        english_of.setdefault(i, []).append(j)
    shortest, longest = PHRASE_WORDS
    found = []
    for first in range(len(english_words)):
        for last in range(first + shortest - 1, min(len(english_words), first + longest)):
            linked = [i for j in range(first, last + 1) for i in hindi_of.get(j, ())]
            if not linked:
                continue
            start, end = min(linked), max(linked)
            if end - start >= longest + 1:
                continue
            if all(first <= j <= last for i in range(start, end + 1)
                   for j in english_of.get(i, ())):
                found.append((" ".join(english_words[first:last + 1]),
                              " ".join(hindi_words[start:end + 1])))
    return found


def make_train(rows: int, seed: int) -> tuple[list[str], list[str], dict[str, int]]:
    """English and Hindi columns of `rows` train rows, and how many of each kind."""
    rng = np.random.default_rng(seed)
    units, paragraphs = train_units()
    english_units = [e for e, _ in units]
    hindi_units = [h for _, h in units]
    print(f"{len(units):,} sentence units; aligning them with eflomal", file=sys.stderr)
    links = run_eflomal(hindi_units, english_units, samplers=1)
    phrases = sorted({pair for (english, hindi), pair_links in zip(units, links)
                      for pair in phrase_pairs(english, hindi, pair_links)})
    english_phrases = [e for e, _ in phrases]
    hindi_phrases = [h for _, h in phrases]
    print(f"{len(phrases):,} phrase units", file=sys.stderr)

    kinds = {"single_sentences": min(len(units), rows), "repeats": int(rows * 0.02),
             "empty_side": int(rows * 0.001), "bad_ratio": int(rows * 0.002),
             "paragraphs": min(len(paragraphs), rows // 2000)}
    recombined = max(0, rows - sum(kinds.values()))
    shares = np.array(list(ROW_KINDS.values()))
    row_kinds = rng.choice(len(ROW_KINDS), size=recombined, p=shares / shares.sum())
    english: list[str] = english_units[: kinds["single_sentences"]]
    hindi: list[str] = hindi_units[: kinds["single_sentences"]]
    # Phrases are dealt out without repeats (in a random order) until they run out.
    phrase_order = rng.permutation(len(phrases)).tolist()
    for kind, (sentence_count, phrase_count) in enumerate(ROW_KINDS):
        count = int((row_kinds == kind).sum())
        kinds[f"{sentence_count}_sentences_{phrase_count}_phrases"] = count
        sentences = rng.integers(0, len(units), size=(count, sentence_count)).tolist()
        for row in range(count):
            chosen = [(english_units[i], hindi_units[i]) for i in sentences[row]]
            for _ in range(phrase_count):
                index = phrase_order.pop() if phrase_order else int(rng.integers(len(phrases)))
                chosen.append((english_phrases[index], hindi_phrases[index]))
            english.append(" ".join(e for e, _ in chosen))
            hindi.append(" ".join(h for _, h in chosen))
    for index in rng.integers(0, len(units), size=kinds["bad_ratio"]).tolist():
        extra = int(rng.integers(0, len(units)))
        english.append(english_units[index])
        hindi.append(" ".join([hindi_units[index], hindi_units[extra], hindi_units[index]]))
    for number, index in enumerate(rng.integers(0, len(units), size=kinds["empty_side"])):
        english.append("" if number % 2 else english_units[index])
        hindi.append(hindi_units[index] if number % 2 else "")
    for e, h in paragraphs[: kinds["paragraphs"]]:
        english.append(e)
        hindi.append(h)
    for index in rng.integers(0, len(english), size=kinds["repeats"]).tolist():
        english.append(english[index])
        hindi.append(hindi[index])
    order = rng.permutation(len(english))  # repeats and noise spread through the split
    return [english[i] for i in order], [hindi[i] for i in order], kinds


def to_dataset(english: list[str], hindi: list[str]) -> datasets.Dataset:
    features = datasets.Features({"translation": datasets.Translation(languages=["en", "hi"])})
    column = pa.StructArray.from_arrays([pa.array(english, pa.string()),
                                         pa.array(hindi, pa.string())], names=["en", "hi"])
    table = pa.table({"translation": column})
    return datasets.Dataset(table.cast(features.arrow_schema))


def length_stats(english: list[str], hindi: list[str]) -> dict[str, float]:
    english_words = np.array([len(e.split()) for e in english])
    hindi_words = np.array([len(h.split()) for h in hindi])
    return {"rows": len(english), "mean_english_words": round(float(english_words.mean()), 2),
            "mean_hindi_words": round(float(hindi_words.mean()), 2),
            "median_english_words": float(np.median(english_words)),
            "p99_english_words": float(np.percentile(english_words, 99)),
            "english_word_types": len({w for e in english for w in e.split()}),
            "hindi_word_types": len({w for h in hindi for w in h.split()})}


def main() -> int:
    args = parse_args()
    if not PUBLIC.is_dir():
        print(f"skipped: {PUBLIC} (the shared public data) is not here")
        return 0
    started = time.perf_counter()
    out = Path(args.out)
    if out.exists():
        shutil.rmtree(out)
    try:
        english, hindi, kinds = make_train(args.train_rows, args.seed)
    except TranslatorError as error:  # no eflomal
        print(f"cannot make the stand-in: {error}")
        return 1
    splits = {"train": (english, hindi)}
    for split, name in (("validation", DEV_SET), ("test", TEST_SET)):
        pairs = read_pairs(name)
        splits[split] = ([e for e, _ in pairs], [h for _, h in pairs])
    stats = {"kinds": kinds, "seed": args.seed,
             **{split: length_stats(*columns) for split, columns in splits.items()}}
    if args.format == "disk":
        datasets.DatasetDict({split: to_dataset(*columns) for split, columns in
                              splits.items()}).save_to_disk(out)
    else:
        (out / "data").mkdir(parents=True)
        for split, (english_column, hindi_column) in splits.items():
            shards = max(1, -(-len(english_column) // SHARD_ROWS))
            for shard in range(shards):
                rows = slice(shard * SHARD_ROWS, (shard + 1) * SHARD_ROWS)
                dataset = to_dataset(english_column[rows], hindi_column[rows])
                dataset.to_parquet(out / "data" / f"{split}-{shard:05d}-of-{shards:05d}.parquet")
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    (out / "README.md").write_text(
        "# IITB English-Hindi stand-in (not the real corpus)\n\n"
        f"Written by bench/make_iitb_standin.py --train-rows {args.train_rows} --seed "
        f"{args.seed}; see that file for how the rows were made, and stats.json.\n",
        encoding="utf-8")
    print(json.dumps(stats, indent=2))
    print(f"wrote {out} in {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
