"""Build the embedded corpus's fixed splits from the hand-written domain files, and write the
data card's statistics.

    python scripts/build_corpus.py           # domains/*.tsv → train/dev/test.tsv + DATACARD.md
    python scripts/build_corpus.py --check   # exit 1 if DATACARD.md's numbers are out of date

Each domain file holds ``hindi<TAB>english`` lines. Pairs are NFC-normalised; a pair whose
Hindi or English sentence already occurred is dropped (so no sentence is in two splits), as is
anything close to a showcase sentence. Each domain gives the same share to dev and test, in
an order shuffled with a fixed seed.
"""

from __future__ import annotations

import argparse
import random
import sys
import unicodedata

from translator.corpus import CORPUS_DIR, SPLITS, is_close_to_showcase, statistics_table

DOMAINS_DIR = CORPUS_DIR / "domains"
CARD = CORPUS_DIR / "DATACARD.md"
BEGIN, END = "<!-- statistics:begin -->", "<!-- statistics:end -->"
HELD_OUT_SHARE = 0.06  # per domain, for dev and for test each


def clean(text: str) -> str:
    return " ".join(unicodedata.normalize("NFC", text).replace("\u200b", "").split())


def read_domains() -> dict[str, list[tuple[str, str]]]:
    seen_hindi, seen_english = set(), set()
    domains: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(DOMAINS_DIR.glob("*.tsv")):
        pairs = []
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            fields = line.split("\t")
            if len(fields) != 2:
                sys.exit(f"{path}:{number}: expected 'hindi<TAB>english'")
            hindi, english = clean(fields[0]), clean(fields[1])
            if (not hindi or not english or hindi in seen_hindi
                    or english.lower() in seen_english or is_close_to_showcase(hindi, english)):
                continue
            seen_hindi.add(hindi)
            seen_english.add(english.lower())
            pairs.append((hindi, english))
        domains[path.stem] = pairs
    return domains


def split_domains(domains: dict[str, list[tuple[str, str]]]) -> dict[str, list[tuple]]:
    rng = random.Random(20261130)
    splits: dict[str, list[tuple]] = {split: [] for split in SPLITS}
    for domain, pairs in domains.items():
        pairs = pairs[:]
        rng.shuffle(pairs)
        held_out = round(len(pairs) * HELD_OUT_SHARE)
        rows = [(hindi, english, domain) for hindi, english in pairs]
        splits["test"] += rows[:held_out]
        splits["dev"] += rows[held_out : 2 * held_out]
        splits["train"] += rows[2 * held_out :]
    for rows in splits.values():
        rng.shuffle(rows)
    return splits


def card_with_statistics(card: str, table: str) -> str:
    before, rest = card.split(BEGIN, 1)
    _, after = rest.split(END, 1)
    return f"{before}{BEGIN}\n{table}{END}{after}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="only check that DATACARD.md matches the split files")
    args = parser.parse_args()
    card = CARD.read_text(encoding="utf-8")
    if args.check:
        expected = card_with_statistics(card, statistics_table())
        if expected != card:
            print("DATACARD.md is out of date; run python scripts/build_corpus.py")
            return 1
        print("DATACARD.md matches the split files")
        return 0
    splits = split_domains(read_domains())
    for split, rows in splits.items():
        text = "".join(f"{h}\t{e}\t{d}\n" for h, e, d in rows)
        (CORPUS_DIR / f"{split}.tsv").write_text(text, encoding="utf-8")
        print(f"{split}: {len(rows)} pairs")
    CARD.write_text(card_with_statistics(card, statistics_table()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
