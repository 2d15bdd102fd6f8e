"""Build the embedded corpus's train split from the hand-written domain files, the word
alignment links of every split, and the data card's statistics; report pairs worth re-reading.

    python scripts/build_corpus.py           # domains/*.tsv → train.tsv, SPLIT.align, DATACARD.md
    python scripts/build_corpus.py --check   # exit 1 if DATACARD.md or a .align file is out of date
    python scripts/build_corpus.py --report  # the quality gate: outliers to re-read (eflomal)

Each domain file holds ``hindi<TAB>english`` lines. The dev and test splits are fixed: they
stay byte for byte as they are (so every score stays comparable with earlier ones), and every
other pair of the domain files goes to train. Pairs are normalised as the data pipeline
normalises them (translator.data.normalize); a pair is refused when its Hindi or its English
sentence, compared blind to case and punctuation, equals a dev, test or showcase sentence (or
one already taken), or when it is close to a showcase sentence; the refused new pairs are
counted by reason. Train is shuffled with a fixed seed.

The links (``SPLIT.align``: one Pharaoh line per TSV line, Hindi word first, see
translator.links) come from eflomal, run once, unsupervised, on the sentences of all three
splits together, in both directions, symmetrised with translator.links.DEFAULT_SYMMETRIZATION
(or --symmetrization).
Building them needs eflomal (``pip install -e '.[align]'``); checking them does not. eflomal
seeds its sampler from /dev/urandom, so a rebuild gives slightly different links.

The quality gate (--report) lists the train pairs whose word-count ratio is an outlier, or
whose eflomal cost (its per-sentence negative log-probability, both directions, per word) is
high among pairs of about their length: more than 3.5 robust standard deviations (median
absolute deviation) from the median. A writer re-reads those.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import unicodedata
from collections import Counter
from pathlib import Path

from translator.corpus import (
    CORPUS_DIR,
    SECOND_SPLITS,
    SHOWCASE,
    SPLITS,
    is_close_to_showcase,
    links_path,
    read_first_tries,
    read_showcase_family,
    read_split,
    read_split_links,
    statistics_table,
)
from translator.data import normalize
from translator.errors import TranslatorError
from translator.lines import read_lines
from translator.links import (
    DEFAULT_SYMMETRIZATION,
    SYMMETRIZATIONS,
    Link,
    eflomal_scores,
    run_eflomal,
    write_pharaoh,
)

DOMAINS_DIR = CORPUS_DIR / "domains"
CARD = CORPUS_DIR / "DATACARD.md"
BEGIN, END = "<!-- statistics:begin -->", "<!-- statistics:end -->"
FIXED = ("dev", "test")  # the held-out splits, never rebuilt
SEED = 20261130
NEAR_COPY = 0.7  # a train sentence sharing this share of its words with a held-out one goes
HELD2_DIR = CORPUS_DIR / "held2"
OUTLIER_DEVIATIONS = 3.5


def blind(text: str) -> str:
    """``text`` compared blind to case and punctuation: lower-cased, punctuation as spaces."""
    text = "".join(" " if unicodedata.category(c).startswith("P") else c for c in text.lower())
    return " ".join(text.split())


def read_domain_pairs(directory: Path = DOMAINS_DIR) -> list[tuple[str, str, str]]:
    """(hindi, english, domain) of every line of the domain files, normalised, in order; a
    file's domain is its name up to the first dot (travel.tsv, travel.r3.tsv: travel)."""
    rows = []
    for path in sorted(directory.glob("*.tsv")):
        for number, line in enumerate(read_lines(path), 1):
            fields = line.split("\t")
            if len(fields) != 2:
                sys.exit(f"{path}:{number}: expected 'hindi<TAB>english'")
            rows.append((normalize(fields[0]), normalize(fields[1]), path.name.split(".")[0]))
    return rows


def second_splits(rows: list[tuple[str, str, str]]) -> dict[str, list[tuple]]:
    """dev2 and test2 from the held2/ files: each domain's pairs shuffled with a fixed seed,
    the first half to dev2, the rest to test2."""
    splits = {"dev2": [], "test2": []}
    for domain in sorted({d for _, _, d in rows}):
        pairs = [row for row in rows if row[2] == domain]
        random.Random(f"{SEED}:{domain}").shuffle(pairs)
        splits["dev2"] += pairs[: len(pairs) // 2]
        splits["test2"] += pairs[len(pairs) // 2 :]
    return splits


def word_set(text: str) -> frozenset[str]:
    return frozenset(blind(text).split())


class NearCopies:
    """Which sentences share at least `NEAR_COPY` of their words (Jaccard: shared words over
    all words of the two) with one of a set of held-out sentences. Prefix filtering: two sets
    that similar share one of either set's rarest words, so only sentences sharing a rare word
    of a held-out sentence are compared."""

    def __init__(self, held_out: list[str]) -> None:
        self.sets = [word_set(text) for text in held_out]
        self.frequency = Counter(word for words in self.sets for word in words)
        self.index: dict[str, list[int]] = {}
        for number, words in enumerate(self.sets):
            for word in self.prefix(words):
                self.index.setdefault(word, []).append(number)

    def prefix(self, words: frozenset[str]) -> list[str]:
        rarest = sorted(words, key=lambda w: (self.frequency.get(w, 0), w))
        return rarest[: len(words) - math.ceil(NEAR_COPY * len(words)) + 1]

    def close(self, text: str) -> bool:
        words = word_set(text)
        candidates = {n for word in self.prefix(words) for n in self.index.get(word, ())}
        return any(len(words & self.sets[n]) >= NEAR_COPY * len(words | self.sets[n])
                   for n in candidates)


def train_rows(rows: list[tuple[str, str, str]], held_out: dict[str, list[tuple]]
               ) -> tuple[list[tuple], Counter]:
    """The train split: every domain pair that is not a held-out row, refused (and counted by
    reason) when a side equals a held-out, showcase, first-try or earlier sentence (`blind`),
    when it is close to a showcase sentence (`is_close_to_showcase`), or when a side is a near
    copy (`NearCopies`) of a held-out sentence or of the showcase family; shuffled with a
    fixed seed."""
    held = [row for split in held_out.values() for row in split]
    fixed = {(h, e) for h, e, _ in held}
    family = read_showcase_family()
    taken_hindi = {blind(h) for h, _, _ in held} | {blind(h) for h, _ in SHOWCASE}
    taken_hindi |= {blind(v.hindi) for v in family} | {blind(h) for h, _ in read_first_tries()}
    taken_english = {blind(e) for _, e, _ in held} | {blind(e) for _, e in SHOWCASE}
    taken_english |= {blind(v.english) for v in family}
    near_hindi = NearCopies([h for h, _, _ in held] + [v.hindi for v in family])
    near_english = NearCopies([e for _, e, _ in held] + [v.english for v in family])
    train, refused = [], Counter()
    for hindi, english, domain in rows:
        if (hindi, english) in fixed:
            continue  # a held-out pair, where it is
        if not hindi or not english:
            refused["empty"] += 1
        elif is_close_to_showcase(hindi, english):
            refused["close to a showcase sentence (two of its key words)"] += 1
        elif blind(hindi) in taken_hindi or blind(english) in taken_english:
            refused["a side repeats a held-out, showcase or earlier sentence"] += 1
        elif near_hindi.close(hindi) or near_english.close(english):
            refused[f"a side shares ≥ {NEAR_COPY:.0%} of its words with a held-out or "
                    "showcase-family sentence"] += 1
        else:
            taken_hindi.add(blind(hindi))
            taken_english.add(blind(english))
            train.append((hindi, english, domain))
    random.Random(SEED).shuffle(train)
    return train, refused


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


def robust_outliers(values: list[float], groups: list[int] | None = None,
                    high_only: bool = False) -> list[int]:
    """Indices of the values more than `OUTLIER_DEVIATIONS` robust standard deviations (1.4826
    × the median absolute deviation) from the median of their group (``groups``: a group
    number per value; None: one group); ``high_only``: above it only."""
    groups = groups or [0] * len(values)
    found = []
    for group in sorted(set(groups)):
        members = [i for i, g in enumerate(groups) if g == group]
        median = statistics.median(values[i] for i in members)
        spread = 1.4826 * statistics.median(abs(values[i] - median) for i in members) or 1e-9
        found += [i for i in members if (values[i] - median) / spread > OUTLIER_DEVIATIONS
                  or (not high_only and (median - values[i]) / spread > OUTLIER_DEVIATIONS)]
    return sorted(found)


def length_group(words: int) -> int:
    """Pairs of about the same length: eflomal's cost per word falls as sentences grow."""
    return next(i for i, limit in enumerate((8, 12, 16, 22, 30, 45, 10**9)) if words <= limit)


def report(rows: list[tuple[str, str, str]]) -> int:
    """Print the train pairs whose length ratio is an outlier, or whose eflomal cost per word
    is high for pairs of their length (words that do not fit each other: a mistranslation,
    a dropped clause, a typo)."""
    ratios = [math.log(len(h.split()) / len(e.split())) for h, e, _ in rows]
    scores = eflomal_scores([h for h, _, _ in rows], [e for _, e, _ in rows])
    words = [len(h.split()) + len(e.split()) for h, e, _ in rows]
    per_word = [score / count for score, count in zip(scores, words)]
    found = {"length ratio": robust_outliers(ratios),
             "eflomal cost per word (for its length)": robust_outliers(
                 per_word, [length_group(count) for count in words], high_only=True)}
    for reason, indices in found.items():
        print(f"## {len(indices)} pairs whose {reason} is an outlier (of {len(rows)})")
        for i in indices:
            hindi, english, domain = rows[i]
            print(f"{domain}\t{ratios[i]:+.2f}\t{per_word[i]:.2f}\t{hindi}\t{english}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=" ".join(__doc__.split("\n\n")[0].split()))
    parser.add_argument("--check", action="store_true", help="only check that DATACARD.md and "
                        "the .align files match the split files")
    parser.add_argument("--symmetrization", choices=SYMMETRIZATIONS,
                        default=DEFAULT_SYMMETRIZATION,
                        help=f"how to combine eflomal's two directions (default: "
                        f"{DEFAULT_SYMMETRIZATION}, the lowest AER on WPT-05)")
    parser.add_argument("--report", action="store_true", help="list the train pairs whose "
                        "length ratio or eflomal alignment score is an outlier, to re-read")
    args = parser.parse_args()
    if args.check:
        return check()
    if args.report:
        return report(read_split("train"))
    held_out = {split: read_split(split) for split in FIXED}
    second = second_splits(read_domain_pairs(HELD2_DIR))
    train, refused = train_rows(read_domain_pairs(), held_out | second)
    splits = {"train": train, **held_out}
    try:
        links = align(splits, args.symmetrization)  # first: without eflomal, nothing is written
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for split, rows in {"train": train, **second}.items():
        (CORPUS_DIR / f"{split}.tsv").write_text("".join(f"{h}\t{e}\t{d}\n" for h, e, d in rows),
                                                 encoding="utf-8")
    for split in SECOND_SPLITS:
        print(f"{split}: {len(second[split])} pairs from held2/")
    for split in SPLITS:
        write_pharaoh(links_path(split), links[split])
        print(f"{split}: {len(splits[split])} pairs, {sum(map(len, links[split]))} links "
              f"({args.symmetrization})" + ("" if split == "train" else ", kept as it was"))
    for reason, count in refused.most_common():
        print(f"refused: {count} pairs ({reason})")
    card = CARD.read_text(encoding="utf-8")
    CARD.write_text(card_with_statistics(card, statistics_table()), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
