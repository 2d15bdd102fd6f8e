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
from pathlib import Path

from translator.errors import TranslatorError
from translator.lines import read_lines
from translator.links import Link, read_pharaoh, word_counts

CORPUS_DIR = Path(__file__).resolve().parent
SPLITS = ("train", "dev", "test")

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


def is_close_to_showcase(hindi: str, english: str) -> bool:
    """The showcase sentences themselves or a close paraphrase (their key words together)."""
    english = english.lower()
    return (
        ("राजेश" in hindi and "बहन" in hindi and "टिकट" in hindi)
        or ("rajesh" in english and "sister" in english and "ticket" in english)
        or ("मैकेनिक" in hindi and "स्कूटर" in hindi and "पेट्रोल" in hindi)
        or ("mechanic" in english and "scooter" in english and "petrol" in english)
        or ("failed" in english and "deducted" in english and "refund" in english)
    )


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
    splits = {split: read_split(split, directory) for split in SPLITS}
    everything = [row for rows in splits.values() for row in rows]
    domains = sorted({domain for _, _, domain in everything})
    out = ["### Pairs per domain and split", "",
           "| domain | train | dev | test | total |", "|---|---:|---:|---:|---:|"]
    for domain in domains:
        counts = [sum(d == domain for _, _, d in splits[s]) for s in SPLITS]
        out.append(f"| {domain} | " + " | ".join(map(str, counts)) + f" | {sum(counts)} |")
    totals = [len(splits[s]) for s in SPLITS]
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
