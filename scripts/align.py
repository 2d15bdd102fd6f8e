"""Word alignments of given sentence pairs from a trained model's cross-attention.

    python scripts/align.py --run runs/latest --src test.hi --tgt test.en
    python scripts/align.py --run RUN --src dev.hi --tgt dev.en \\
        --gold dev.en-hi.pharaoh --gold-reversed          # + AER; gold indexes English first

Prints one line of 0-based Pharaoh links per sentence pair ("i-j": source word i, target word
j; words are whitespace-separated), forced alignment by teacher forcing: each target word is
linked to the source word it attends to most (or, with --threshold, to every source word with
at least that weight) in the chosen layer, its heads averaged. A pair with an empty side gets
an empty line. With --gold, the alignment error rate goes to standard error.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from translator.alignment import (
    AlignmentError,
    align_pairs,
    alignment_error_rate,
    check_links,
    format_pharaoh,
    read_pharaoh,
)
from translator.errors import TranslatorError
from translator.translate import Translator


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        raise AlignmentError(f"cannot read {path}; check the path and that it is UTF-8 "
                             "text, one sentence a line") from None


def parse_heads(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(h) for h in text.split(",")]
    except ValueError:
        raise AlignmentError(f"--heads {text!r} must be head numbers separated by commas, "
                             "e.g. 0,3,5") from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Word alignments from cross-attention.")
    parser.add_argument("--run", type=Path, default=None,
                        help="run folder (default: the newest run under runs/)")
    parser.add_argument("--src", type=Path, required=True, help="source sentences, one a line")
    parser.add_argument("--tgt", type=Path, required=True, help="target sentences, line-aligned")
    parser.add_argument("--layer", type=int, default=None,
                        help="decoder layer, 0-based, negative from the top (default: "
                        "translator.alignment.DEFAULT_LAYER)")
    parser.add_argument("--heads", default=None, help="heads to average, e.g. 0,3 (default: all)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="link every source word with at least this weight instead of "
                        "the single strongest")
    parser.add_argument("--gold", type=Path, default=None, help="gold Pharaoh links: print AER")
    parser.add_argument("--gold-reversed", action="store_true",
                        help="the gold file's first index is the TARGET word (e.g. WPT-05 "
                        "en-hi gold for a hi→en model)")
    parser.add_argument("--checkpoint", default="best", help="best (default) or last")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, ...")
    args = parser.parse_args(argv)
    try:
        sources, targets = read_lines(args.src), read_lines(args.tgt)
        if len(sources) != len(targets):
            raise AlignmentError(f"{args.src} has {len(sources)} lines but {args.tgt} has "
                                 f"{len(targets)}; the files must be line-aligned")
        pairs = list(zip(sources, targets))
        gold = None
        if args.gold is not None:
            gold = read_pharaoh(args.gold, reverse=args.gold_reversed)
            if len(gold) != len(pairs):
                raise AlignmentError(f"{args.gold} has {len(gold)} lines for {len(pairs)} "
                                     "sentence pairs; give one line per pair")
            check_links(gold, pairs, str(args.gold))
        translator = Translator.from_run(args.run, args.checkpoint, args.device)
        links = align_pairs(translator.model, translator.tokenizer, pairs, args.layer,
                            parse_heads(args.heads), args.threshold, translator.device)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for sentence_links in links:
        print(format_pharaoh(sentence_links))
    if gold is not None:
        aer = alignment_error_rate(links, gold)
        print(f"AER {aer:.4f} ({len(pairs)} sentence pairs, {sum(map(len, links))} links, "
              f"{sum(map(len, gold))} gold links)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
