"""The embedded Hindi–English corpus: hand-written pairs in 22 domains, shipped with the
package as fixed train/dev/test splits (``hindi<TAB>english<TAB>domain``, one pair a line),
each with its word alignment links (``SPLIT.align``, Pharaoh, Hindi word first; written by
eflomal through scripts/build_corpus.py).

The seed chapters' showcase sentences live here too: they are kept out of every split so that
what the model does with them shows what it learned, not what it memorised.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from translator.errors import TranslatorError
from translator.lines import read_lines
from translator.links import Link, read_pharaoh, word_counts

CORPUS_DIR = Path(__file__).resolve().parent
SPLITS = ("train", "dev", "test")  # each with its word links (SPLIT.align)
# round 3: new dev/test sentences of every domain, scored beside the pinned dev and test
SECOND_SPLITS = ("dev2", "test2")

# (Hindi, English). The Rajesh sentence is the seeds' own; the other two are the seeds'
# English sentences with the project's Hindi translation.
SHOWCASE = [
    ("राजेश ने कल शाम को अपनी बहन के लिए दिल्ली से मुंबई की ट्रेन टिकट बुक की",
     "Rajesh booked a Delhi-to-Mumbai train ticket for his sister yesterday evening."),
    ("मैकेनिक ने स्कूटर ठीक कर दिया क्योंकि उससे पेट्रोल टपक रहा था",
     "The mechanic fixed the scooter because it was leaking petrol."),
    ("UPI भुगतान विफल हो गया लेकिन पैसे कट गए, कृपया रिफ़ंड करें",
     "UPI payment failed but amount deducted, refund please."),
]

# Words of the showcase sentences that the corpus must teach (each in ≥ 3 training pairs).
SHOWCASE_WORDS_HI = ["राजेश", "कल शाम", "बहन", "के लिए", "दिल्ली", "मुंबई", "ट्रेन", "टिकट",
                     "बुक की", "मैकेनिक", "स्कूटर", "पेट्रोल", "भुगतान"]
SHOWCASE_WORDS_EN = ["mechanic", "scooter", "petrol", "leaking", "UPI", "payment", "failed",
                     "deducted", "refund"]


def read_split(split: str, directory: Path = CORPUS_DIR) -> list[tuple[str, str, str]]:
    """(hindi, english, domain) triples of one split (`translator.lines`: only '\\n' ends a
    line, so that the split stays aligned with its links)."""
    path = directory / f"{split}.tsv"
    rows = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 3:
            raise TranslatorError(f"{path} line {number} has {len(fields)} fields; each line "
                                  "must be hindi<TAB>english<TAB>domain")
        hindi, english, domain = fields
        rows.append((hindi, english, domain))
    return rows


def links_path(split: str, directory: Path = CORPUS_DIR) -> Path:
    """The split's word alignment links: a Pharaoh file beside its TSV (see translator.links)."""
    return directory / f"{split}.align"


def read_split_links(split: str, directory: Path = CORPUS_DIR) -> list[list[Link]]:
    """The Hindi-first word links of each pair of one split, checked line by line against the
    split's sentences (one line per pair, every index inside its sentence)."""
    rows = read_split(split, directory)
    return read_pharaoh(links_path(split, directory), word_counts(h for h, _, _ in rows),
                        word_counts(e for _, e, _ in rows))


# Each showcase sentence's three key words (Hindi, English), as patterns a word must match
# whole: a pair with two of one sentence's key words on one side is too close to it.
SHOWCASE_KEYWORDS = [
    (["राजेश.*", "बहन.*", "टिकट.*"], ["rajesh.*", "sister.*", "ticket.*"]),
    (["मैकेनिक.*", "स्कूटर.*", "पेट्रोल.*"], ["mechanic.*", "scooter.*", "petrol.*"]),
    (["विफल.*", "कट|कटा|कटी|कटे|कटने", "रिफ़ंड.*|रिफंड.*"], ["fail.*", "deduct.*", "refund.*"]),
]
FAMILY_FILE = CORPUS_DIR / "showcase_family.tsv"
FIRST_TRIES_FILE = CORPUS_DIR / "first_tries.tsv"


def _key_words_found(text: str, patterns: list[str]) -> int:
    words = _words(text)
    return sum(any(re.fullmatch(pattern, word) for word in words) for pattern in patterns)


def is_close_to_showcase(hindi: str, english: str) -> bool:
    """A showcase sentence, or a pair close to one: two of its three key words on one side
    (the Rajesh sentence's family, `read_showcase_family`, is checked by the corpus builder
    with word overlap)."""
    return any(_key_words_found(hindi, hindi_keys) >= 2
               or _key_words_found(english, english_keys) >= 2
               for hindi_keys, english_keys in SHOWCASE_KEYWORDS)


@dataclass(frozen=True)
class FamilyVariant:
    """A variant of the Rajesh sentence, held out like it: its reference, the facts a
    translation must keep (each fact: its accepted English spellings) and the route
    (origin, destination) it must keep in order, if it has one."""

    hindi: str
    english: str
    facts: tuple[tuple[str, ...], ...]
    route: tuple[str, str] | None


def read_showcase_family(path: Path = FAMILY_FILE) -> list[FamilyVariant]:
    """The showcase family: ``hindi<TAB>english<TAB>facts<TAB>route`` lines, facts as
    ``fact;fact`` with ``spelling|spelling`` each, route as ``origin>destination``."""
    variants = []
    for number, line in enumerate(read_lines(path), start=1):
        fields = line.split("\t")
        if len(fields) != 4 or not all(fields[:3]):
            raise TranslatorError(f"{path} line {number}: expected hindi, english, facts and "
                                  "route, separated by tabs")
        hindi, english, facts, route = fields
        origin, _, destination = route.partition(">")
        variants.append(FamilyVariant(
            hindi, english, tuple(tuple(f.split("|")) for f in facts.split(";")),
            (origin, destination) if destination else None))
    return variants


def read_first_tries(path: Path = FIRST_TRIES_FILE) -> list[tuple[str, list[str]]]:
    """What a new user types first: (hindi, its accepted English answers), held out."""
    tries = []
    for number, line in enumerate(read_lines(path), start=1):
        hindi, _, answers = line.partition("\t")
        if not hindi or not answers:
            raise TranslatorError(f"{path} line {number}: expected hindi<TAB>answer | answer")
        tries.append((hindi, [answer.strip() for answer in answers.split("|")]))
    return tries


def count_occurrences(rows: list[tuple[str, str, str]]) -> dict[str, int]:
    """In how many pairs each showcase word occurs (Hindi words on the Hindi side, English
    words, case-insensitively at a word start, on the English side)."""
    counts = {}
    for word in SHOWCASE_WORDS_HI:
        counts[word] = sum(word in hindi for hindi, _, _ in rows)
    for word in SHOWCASE_WORDS_EN:
        pattern = re.compile(rf"\b{re.escape(word)}", re.IGNORECASE)
        counts[word] = sum(bool(pattern.search(english)) for _, english, _ in rows)
    return counts


def _words(text: str) -> list[str]:
    return re.findall(r"[\w\u0900-\u097F]+", text.lower())


def statistics_table(directory: Path = CORPUS_DIR) -> str:
    """The data card's numbers, as Markdown, recomputed from the split files."""
    names = SPLITS + tuple(s for s in SECOND_SPLITS if (directory / f"{s}.tsv").is_file())
    splits = {split: read_split(split, directory) for split in names}
    everything = [row for rows in splits.values() for row in rows]
    domains = sorted({domain for _, _, domain in everything})
    out = ["### Pairs per domain and split", "",
           f"| domain | {' | '.join(names)} | total |", "|---|" + "---:|" * (len(names) + 1)]
    for domain in domains:
        counts = [sum(d == domain for _, _, d in splits[s]) for s in names]
        out.append(f"| {domain} | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    totals = [len(splits[s]) for s in names]
    out.append("| **all** | " + " | ".join(map(str, totals)) + f" | {sum(totals)} |")
    out += ["", "### Lengths (words, split on whitespace)", "",
            "| side | min | median | mean | max | pairs with ≥ 15 words |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, column in (("English", 1), ("Hindi", 0)):
        lengths = [len(row[column].split()) for row in everything]
        long_share = sum(n >= 15 for n in lengths) / len(lengths)
        out.append(f"| {name} | {min(lengths)} | {statistics.median(lengths):g} | "
                   f"{statistics.mean(lengths):.1f} | {max(lengths)} | {long_share:.1%} |")
    out += ["", "### Vocabulary (distinct lower-cased words)", "",
            "| side | all splits | train |", "|---|---:|---:|"]
    for name, column in (("English", 1), ("Hindi", 0)):
        vocab_all = {w for row in everything for w in _words(row[column])}
        vocab_train = {w for row in splits["train"] for w in _words(row[column])}
        out.append(f"| {name} | {len(vocab_all)} | {len(vocab_train)} |")
    out += ["", "### Showcase words: training pairs that contain each", "",
            "| word | pairs |", "|---|---:|"]
    for word, count in count_occurrences(splits["train"]).items():
        out.append(f"| {word} | {count} |")
    return "\n".join(out) + "\n"
