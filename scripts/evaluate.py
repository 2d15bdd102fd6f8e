"""Score a trained run: corpus BLEU, chrF and chrF++ with sacrebleu, with their signatures.

    python scripts/evaluate.py --run runs/latest --src test.hi --ref test.en
    python scripts/evaluate.py --run runs/latest                 # the run's own test split
    python scripts/evaluate.py --src test.hi --ref test.en --beam 1 --json

The hypotheses are written to a file (--out; default: hypotheses-<name>-beam<N>.txt in the
run folder), one a line, so the scores can be checked with the sacrebleu command.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from translator.data import load_splits
from translator.errors import TranslatorError
from translator.translate import Translator, corpus_scores


def read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or "it is not UTF-8 text"
        raise TranslatorError(f"cannot read {path}: {reason}") from None


def sources_and_references(args: argparse.Namespace, translator: Translator
                           ) -> tuple[str, list[str], list[str]]:
    """(a name for the set, source lines, reference lines)."""
    if (args.src is None) != (args.ref is None):
        raise TranslatorError("give both --src and --ref, or neither to use the run's test split")
    if args.src is None:
        test = load_splits(translator.config.data).splits["test"]
        sources, references, name = [p.source for p in test], [p.target for p in test], "test"
    else:
        sources, references, name = read_lines(args.src), read_lines(args.ref), args.src.stem
        if len(sources) != len(references):
            raise TranslatorError(f"{args.src} has {len(sources)} lines but {args.ref} has "
                                  f"{len(references)}; they must be line-aligned")
    if not sources:
        raise TranslatorError("there are no sentences to evaluate (the source is empty)")
    return name, sources, references


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="BLEU, chrF and chrF++ of a trained run.")
    parser.add_argument("--run", type=Path, default=None,
                        help="run folder (default: runs/latest, the newest run)")
    parser.add_argument("--checkpoint", default="best",
                        help="best (default; last.pt if there is none), last, or a .pt file")
    parser.add_argument("--src", type=Path, help="source sentences, one a line")
    parser.add_argument("--ref", type=Path, help="reference translations, line-aligned")
    parser.add_argument("--out", type=Path, default=None, help="where to write the hypotheses")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 is greedy (default 5)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")
    args = parser.parse_args(argv)
    try:
        translator = Translator.from_run(args.run, args.checkpoint, args.device)
        name, sources, references = sources_and_references(args, translator)
        translations = translator.translate(sources, beam_size=args.beam,
                                            batch_size=args.batch_size, need_attention=False)
        hypotheses = [t.text for t in translations]
        out = args.out or translator.run_dir / f"hypotheses-{name}-beam{args.beam}.txt"
        try:
            out.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        except OSError as error:
            raise TranslatorError(f"cannot write the hypotheses to {out}: {error.strerror}"
                                  ) from None
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    scores = corpus_scores(hypotheses, references)
    if args.json:
        print(json.dumps({"sentences": len(sources), "beam_size": args.beam,
                          "hypotheses": str(out), **scores}, ensure_ascii=False))
        return 0
    print(f"{len(sources)} sentences, beam {args.beam}; hypotheses in {out}")
    for metric, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("chrf++", "chrF++")):
        print(f"{label:<7}{scores[metric]:6.2f}  {scores[metric + '_signature']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
