"""Translate with a trained run.

    python scripts/translate.py "राजेश ने कल शाम को ट्रेन टिकट बुक की"
    python scripts/translate.py --beam 5 --n-best 3 --json "पहला वाक्य" "दूसरा वाक्य"
    python scripts/translate.py --run runs/20261130-101500 < sentences.hi > sentences.en
    python scripts/translate.py --plot heatmap.png --plot-heads heads.png --layer 0 "कल शाम"

One output line per input line, in order; an empty input line gives an empty output line.
With --n-best K the K translations of a line are separated by tabs (--json gives their
scores too). Warnings (wrong script, input too long) go to standard error.

--plot/--plot-heads/--plot-layers draw the cross-attention of the translation that was
chosen (beam search too), merged to words: one file per non-empty input (FILE.png for one
input; FILE-1.png, FILE-2.png, ... for several).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from translator import plotting
from translator.alignment import describe_view, merge_to_words, resolve_layer, select_attention
from translator.errors import TranslatorError
from translator.translate import Translation, Translator

PLOT_OPTIONS = ("plot", "plot_heads", "plot_layers")


def read_inputs(args: argparse.Namespace) -> list[str]:
    if args.texts and args.file:
        raise TranslatorError("give texts on the command line or --file, not both")
    if args.texts:
        return args.texts
    if args.file:
        try:
            return args.file.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError) as error:
            reason = getattr(error, "strerror", None) or "it is not UTF-8 text"
            raise TranslatorError(f"cannot read {args.file}: {reason}") from None
    if sys.stdin.isatty():
        print("reading sentences from standard input, one a line (Ctrl-D to end)",
              file=sys.stderr)
    return sys.stdin.read().splitlines()


def output_line(translation: Translation, as_json: bool) -> str:
    if as_json:
        return json.dumps(translation.to_dict(), ensure_ascii=False)
    if translation.nbest:
        return "\t".join(t.text for t in translation.nbest)
    return translation.text


def plot_paths(path: Path, count: int) -> list[Path]:
    if path.suffix.lower() not in plotting.FORMATS:
        raise TranslatorError(f"cannot tell the image format of {path}; end it in .png or .svg")
    if count == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{n}{path.suffix}") for n in range(1, count + 1)]


def draw_plots(args: argparse.Namespace, translations: list[Translation]) -> None:
    """The heatmaps asked for, of every non-empty translation; their paths to stderr."""
    drawn = [t for t in translations if t.attention is not None]
    for option in PLOT_OPTIONS:
        path = getattr(args, option)
        if path is None:
            continue
        for t, out in zip(drawn, plot_paths(path, len(drawn))):
            if option == "plot":
                words = merge_to_words(select_attention(t.attention, args.layer),
                                       t.source_pieces, t.target_pieces)
                plotting.plot_heatmap(words, out, title=describe_view(t.attention, args.layer))
            elif option == "plot_heads":
                plotting.plot_heads(t.attention, t.source_pieces, t.target_pieces, args.layer,
                                    out)
            else:
                plotting.plot_layers(t.attention, t.source_pieces, t.target_pieces, out)
            print(f"wrote {out}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Translate sentences with a trained run.")
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="sentences to translate (default: one a line from --file or "
                        "standard input)")
    parser.add_argument("--file", type=Path, help="a UTF-8 file of sentences, one a line")
    parser.add_argument("--run", type=Path, default=None,
                        help="run folder (default: runs/latest, the newest run)")
    parser.add_argument("--checkpoint", default="best",
                        help="best (default; last.pt if there is none), last, or a .pt file")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 is greedy (default 5)")
    parser.add_argument("--n-best", type=int, default=1,
                        help="translations per sentence, at most the beam size (default 1)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object a line: source, text, score, tokens, warnings")
    parser.add_argument("--plot", type=Path, metavar="FILE.png",
                        help="heatmap of the cross-attention, merged to words (.png or .svg)")
    parser.add_argument("--plot-heads", type=Path, metavar="FILE.png",
                        help="a grid of every head of one layer (--layer)")
    parser.add_argument("--plot-layers", type=Path, metavar="FILE.png",
                        help="a grid of every layer, heads averaged")
    parser.add_argument("--layer", type=int, default=None,
                        help="decoder layer for --plot and --plot-heads (default: "
                        "translator.alignment.DEFAULT_LAYER; -1 is the last)")
    args = parser.parse_args(argv)
    plots = [getattr(args, option) for option in PLOT_OPTIONS if getattr(args, option)]
    try:
        for path in plots:
            plot_paths(path, 1)  # a bad suffix is caught before the translating
        texts = read_inputs(args)
        translator = Translator.from_run(args.run, args.checkpoint, args.device)
        if plots:  # an unknown layer is caught before the translating too
            resolve_layer(args.layer, translator.model.config.num_decoder_layers)
        translations = translator.translate(texts, beam_size=args.beam, n_best=args.n_best,
                                            batch_size=args.batch_size,
                                            need_attention=bool(plots))
        for number, translation in enumerate(translations, start=1):
            for warning in translation.warnings:
                print(f"warning: input {number}: {warning}", file=sys.stderr)
            print(output_line(translation, args.json), flush=True)
        draw_plots(args, translations)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
