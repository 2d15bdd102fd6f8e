"""Build the embedded corpus's fixed splits from the hand-written domain files, their word
alignment links, and the data card's statistics.

    python scripts/build_corpus.py           # domains/*.tsv → SPLIT.tsv, SPLIT.align, DATACARD.md
    python scripts/build_corpus.py --check   # exit 1 if DATACARD.md or a .align file is out of date

Each domain file holds ``hindi<TAB>english`` lines. Pairs are normalised as the data pipeline
normalises them (translator.data.normalize); a pair whose Hindi or English sentence already
occurred is dropped (so no sentence is in two splits), as is anything close to a showcase
sentence. Each domain gives the same share to dev and test, in an order shuffled with a fixed
seed.

The links (``SPLIT.align``: one Pharaoh line per TSV line, Hindi word first, see
translator.links) come from eflomal, run once, unsupervised, on the sentences of all three
splits together, in both directions, symmetrised with translator.links.DEFAULT_SYMMETRIZATION
(or --symmetrization).
Building them needs eflomal (``pip install -e '.[align]'``); checking them does not. eflomal
seeds its sampler from /dev/urandom, so a rebuild gives slightly different links.
"""

from __future__ import annotations

import argparse
import random
import sys

from translator.corpus import (
    CORPUS_DIR,
    SPLITS,
    is_close_to_showcase,
    links_path,
    read_split_links,
    statistics_table,
)
from translator.data import normalize
from translator.errors import TranslatorError
from translator.links import (
    DEFAULT_SYMMETRIZATION,
    SYMMETRIZATIONS,
    Link,
    run_eflomal,
    write_pharaoh,
)

DOMAINS_DIR = CORPUS_DIR / "domains"
CARD = CORPUS_DIR / "DATACARD.md"
BEGIN, END = "<!-- statistics:begin -->", "<!-- statistics:end -->"
HELD_OUT_SHARE = 0.06  # per domain, for dev and for test each


def read_domains() -> dict[str, list[tuple[str, str]]]:
    seen_hindi, seen_english = set(), set()
    domains: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(DOMAINS_DIR.glob("*.tsv")):
        pairs = []
        lines = path.read_bytes().decode("utf-8").split("\n")  # only '\n' ends a line
        if lines[-1] == "":
            lines.pop()
        for number, line in enumerate(lines, 1):
            fields = line.rstrip("\r").split("\t")
            if len(fields) != 2:
                sys.exit(f"{path}:{number}: expected 'hindi<TAB>english'")
            hindi, english = normalize(fields[0]), normalize(fields[1])
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


def align(splits: dict[str, list[tuple]], method: str) -> dict[str, list[list[Link]]]:
    """Each split's Hindi-first word links: eflomal run once on every split's pairs together,
    symmetrised with ``method``."""
    rows = [row for split in SPLITS for row in splits[split]]
    links = run_eflomal([h for h, _, _ in rows], [e for _, e, _ in rows], method)
    by_split, start = {}, 0
    for split in SPLITS:
        by_split[split] = links[start : start + len(splits[split])]
        start += len(splits[split])
    return by_split


def check() -> int:
    """0 when DATACARD.md's numbers and every split's links match the split files."""
    card = CARD.read_text(encoding="utf-8")
    problems = []
    if card_with_statistics(card, statistics_table()) != card:
        problems.append("DATACARD.md is out of date")
    for split in SPLITS:
        try:
            read_split_links(split)
        except TranslatorError as error:
            problems.append(str(error))
    if problems:
        print("\n".join(problems) + "\nrun python scripts/build_corpus.py")
        return 1
    print("DATACARD.md and the .align files match the split files")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--check", action="store_true", help="only check that DATACARD.md and "
                        "the .align files match the split files")
    parser.add_argument("--symmetrization", choices=SYMMETRIZATIONS,
                        default=DEFAULT_SYMMETRIZATION,
                        help=f"how to combine eflomal's two directions (default: "
                        f"{DEFAULT_SYMMETRIZATION}, the lowest AER on WPT-05)")
    args = parser.parse_args()
    if args.check:
        return check()
    splits = split_domains(read_domains())
    try:
        links = align(splits, args.symmetrization)  # first: without eflomal, nothing is written
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for split, rows in splits.items():
        text = "".join(f"{h}\t{e}\t{d}\n" for h, e, d in rows)
        (CORPUS_DIR / f"{split}.tsv").write_text(text, encoding="utf-8")
        write_pharaoh(links_path(split), links[split])
        print(f"{split}: {len(rows)} pairs, {sum(map(len, links[split]))} links "
              f"({args.symmetrization})")
    card = CARD.read_text(encoding="utf-8")
    CARD.write_text(card_with_statistics(card, statistics_table()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
