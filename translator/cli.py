"""The command line: one command with six subcommands, also installed as console scripts.

    python -m translator train [--config FILE] [--resume RUN] [section.key=value ...]
    python -m translator translate "TEXT" [--run RUN] [--to en|hi] [--beam N]
                                          [--plot FILE.png] [--html FILE.html]
    python -m translator evaluate [--run RUN] [--src FILE --ref FILE] [--to en|hi]
    python -m translator align --run RUN --src FILE --tgt FILE [--gold FILE] [--to en|hi]
    python -m translator demo [--causal]
    python -m translator plot-run [RUN] [--curves-only]

`translator-train`, `translator-translate`, ... (pyproject.toml) and `scripts/*.py` call the
same ``*_main`` functions. Each parses its arguments, calls the package and turns a
`TranslatorError` into one sentence on standard error and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from translator import explorer, plotting
from translator.alignment import (
    AlignmentError,
    align_pairs,
    alignment_error_rate,
    check_links,
    describe_view,
    format_pharaoh,
    merge_to_words,
    read_pharaoh,
    resolve_layer,
    select_attention,
)
from translator.config import Config, load_config
from translator.data import TAGS, load_splits, split_tag
from translator.demo import run_demo
from translator.errors import TranslatorError
from translator.metrics import corpus_scores
from translator.run_dir import RunDir
from translator.training import direction_rows, is_main_process, say, train
from translator.translate import Translation, Translator

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"
PLOT_OPTIONS = ("plot", "plot_heads", "plot_layers", "html")
PLOT_SUFFIXES = {"plot": plotting.FORMATS, "plot_heads": plotting.FORMATS,
                 "plot_layers": plotting.FORMATS, "html": explorer.SUFFIXES}


def decode_lines(data: bytes, where: str) -> list[str]:
    """The lines of UTF-8 ``data`` (only '\\n' ends a line; a '\\r' before it is dropped)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        raise TranslatorError(f"{where} is not UTF-8 text (line {line} has the byte "
                              f"0x{data[error.start]:02x}); convert it to UTF-8 first, e.g. "
                              "with iconv -f latin1 -t utf-8") from None
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return [line.removesuffix("\r") for line in lines]


def read_lines(path: Path) -> list[str]:
    """The lines of a UTF-8 text file (only '\\n' ends a line)."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise TranslatorError(f"cannot read {path}: {error.strerror}") from None
    return decode_lines(data, str(path))


def check_output_folder(path: Path) -> None:
    """Refuse, before any work is done, a file to be written into a folder that is not there."""
    folder = path.parent
    if not folder.is_dir():
        raise TranslatorError(f"cannot write {path}: the folder {folder} does not exist; "
                              "create it first or choose another path")


def write_failure(error: OSError) -> str:
    """One sentence for a file that could not be written, with the resume command when the
    file belongs to a run that has a checkpoint."""
    message = f"cannot write {error.filename or 'a file'}: {error.strerror or error}"
    if error.filename:
        for folder in Path(os.fsdecode(error.filename)).resolve().parents:
            if (folder / "checkpoints" / "last.pt").is_file():
                return (f"{message}; free some space (or fix the folder), then continue with: "
                        f"python scripts/train.py --resume {folder}")
    return message


def _to_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", default=None, metavar="en|hi",
                        help="the language to translate into, for a model trained with "
                        "data.direction=both (default: English for input that is mostly "
                        "Devanagari, else Hindi); a model of one direction takes only its own")


def check_to(language: str | None) -> None:
    """Refuse an unknown --to before anything is loaded (argparse's choices would print a
    usage block as well as the error)."""
    if language is not None and language not in TAGS:
        raise TranslatorError(f"--to {language} is not a language this tool translates into; "
                              "use --to en (English) or --to hi (Hindi)")


def _run_arguments(parser: argparse.ArgumentParser, checkpoint: bool = True) -> None:
    parser.add_argument("--run", type=Path, default=None,
                        help="run folder (default: runs/latest, the newest run)")
    if checkpoint:
        parser.add_argument("--checkpoint", default="best",
                            help="best (default; last.pt if there is none), last, or a .pt file")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")


# ---------------------------------------------------------------- train


def train_arguments(parser: argparse.ArgumentParser) -> None:
    default = (f"YAML config (default: {DEFAULT_CONFIG.relative_to(Path.cwd())})"
               if DEFAULT_CONFIG.is_relative_to(Path.cwd()) else "YAML config")
    parser.add_argument("--config", type=Path, default=None, help=default)
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                        help="continue a run from its last checkpoint (its own config.yaml is "
                        "used; overrides still apply, e.g. train.max_steps=6000)")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value",
                        help="dotted overrides, e.g. train.max_steps=200 model.layers=2")


def arrow(direction: str) -> str:
    """"hi → en" for "hi-en"."""
    return direction.replace("-", " → ")


def translation_direction(translation: Translation, direction: str) -> str:
    """The direction ``translation`` went: the model's, or for a model of both directions
    the one its target language says."""
    if translation.target_language is None:
        return direction
    return "hi-en" if translation.target_language == "en" else "en-hi"


def draw_showcase(run_dir: RunDir, beam_size: int, device: str = "auto",
                  checkpoint: str = "best") -> list[Path]:
    """The showcase sentences, in the run's direction, as its ``checkpoint`` translates them:
    heatmaps/showcase-N.png, .svg, -heads.png, -layers.png, .json (`translator.plotting`) and
    showcase-N.html, the attention explorer (`translator.explorer`), from one translation."""
    translator = Translator.from_run(run_dir, checkpoint, device)
    showcase = plotting.translate_showcase(translator, beam_size)
    paths = plotting.draw_showcase_heatmaps(translator, run_dir.heatmaps_dir, beam_size,
                                            showcase)
    for number, (source, reference, result) in enumerate(showcase, start=1):
        paths.append(explorer.write_explorer(
            run_dir.heatmaps_dir / f"showcase-{number}.html", result.attention,
            result.source_pieces, result.target_pieces, source, result.text,
            title=f"showcase sentence {number} · "
            f"{arrow(plotting.showcase_direction(translator.direction))} · "
            f"beam {beam_size}", reference=reference,
            full_context=translator.config.train.alignment_full_context))
    say(f"showcase heatmaps: {len(paths)} files in {run_dir.heatmaps_dir} (open "
        f"showcase-1.html in a browser to explore them)")
    return paths


def draw_curves(run_dir: RunDir, best_by: str = "chrf") -> Path:
    """RUN/curves.png from RUN/metrics.jsonl, the best checkpoint (by ``best_by``) marked."""
    path = plotting.plot_learning_curves(run_dir.metrics_file, run_dir.curves_file, best_by)
    say(f"learning curves: {path}")
    return path


def train_and_draw(config: Config, resume: Path | None = None) -> tuple[Path, int]:
    """`translator.training.train`, then the learning curves and (unless train.heatmaps is
    off) the showcase heatmaps and explorer pages."""
    run_dir, code = train(config, resume)
    if code == 0 and is_main_process():
        draw_curves(RunDir(run_dir), config.train.early_stopping_metric)
        if config.train.heatmaps:
            draw_showcase(RunDir(run_dir), config.train.test_beam_size, config.train.device)
    return run_dir, code


def run_train(args: argparse.Namespace) -> int:
    try:
        if args.resume is not None and args.config is not None:
            raise TranslatorError("--resume continues a run with its own config.yaml; drop "
                                  f"--config {args.config}, or start a new run without --resume")
        if args.resume is not None:
            config = RunDir.open(args.resume).read_config(args.overrides)
        else:
            config = load_config(args.config or DEFAULT_CONFIG, args.overrides)
        run_dir, code = train_and_draw(config, resume=args.resume)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a full disk or a folder gone (checkpoints say so themselves)
        print(f"error: {write_failure(error)}", file=sys.stderr)
        return 2
    print(run_dir)
    return code


# ---------------------------------------------------------------- translate


def translate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT",
                        help="sentences to translate (default: one a line from --file or "
                        "standard input)")
    parser.add_argument("--file", type=Path, help="a UTF-8 file of sentences, one a line")
    _run_arguments(parser)
    _to_argument(parser)
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 is greedy (default 5)")
    parser.add_argument("--n-best", type=int, default=1,
                        help="translations per sentence, at most the beam size (default 1)")
    search_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--json", action="store_true",
                        help="one JSON object a line: source, text, score, tokens, warnings")
    parser.add_argument("--plot", type=Path, metavar="FILE.png",
                        help="heatmap of the cross-attention, merged to words (.png or .svg)")
    parser.add_argument("--plot-heads", type=Path, metavar="FILE.png",
                        help="a grid of every head of one layer (--layer)")
    parser.add_argument("--plot-layers", type=Path, metavar="FILE.png",
                        help="a grid of every layer, heads averaged")
    parser.add_argument("--html", type=Path, metavar="FILE.html",
                        help="the attention explorer: one self-contained page (open it from "
                        "disk in a browser) with every layer and head, hover and links")
    parser.add_argument("--layer", type=int, default=None,
                        help="decoder layer for --plot and --plot-heads, and the one --html "
                        "opens on (default: translator.alignment.DEFAULT_LAYER; -1 is the "
                        "last)")


def read_inputs(args: argparse.Namespace) -> list[str]:
    if args.texts and args.file:
        raise TranslatorError("give texts on the command line or --file, not both")
    if args.texts:
        for number, text in enumerate(args.texts, start=1):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # bytes that were not UTF-8, kept as surrogates
                raise TranslatorError(f"text {number} on the command line is not UTF-8 text; "
                                      "convert it to UTF-8 first, e.g. with iconv -f latin1 "
                                      "-t utf-8") from None
        return args.texts
    if args.file:
        return read_lines(args.file)
    if sys.stdin.isatty():
        print("reading sentences from standard input, one a line (Ctrl-D to end)",
              file=sys.stderr)
    if hasattr(sys.stdin, "buffer"):  # bytes, so that text that is not UTF-8 is caught
        return decode_lines(sys.stdin.buffer.read(), "standard input")
    return sys.stdin.read().splitlines()


def output_line(translation: Translation, as_json: bool) -> str:
    if as_json:
        return json.dumps(translation.to_dict(), ensure_ascii=False)
    if translation.nbest:
        return "\t".join(t.text for t in translation.nbest)
    return translation.text


def plot_paths(path: Path, count: int, suffixes: tuple[str, ...] = plotting.FORMATS
               ) -> list[Path]:
    """FILE.png for one translation; FILE-1.png, FILE-2.png, ... for several."""
    if path.suffix.lower() not in suffixes:
        kind = "image format" if suffixes == plotting.FORMATS else "format"
        raise TranslatorError(f"cannot tell the {kind} of {path}; end it in "
                              f"{' or '.join(suffixes)}")
    if count == 1:
        return [path]
    return [path.with_name(f"{path.stem}-{n}{path.suffix}") for n in range(1, count + 1)]


def draw_plots(args: argparse.Namespace, translations: list[Translation],
               direction: str = "hi-en", full_context: bool = False) -> None:
    """The heatmaps (and explorer pages) asked for, of every non-empty translation; their
    paths to stderr. ``full_context``: the attention is the full-context pass's (titles)."""
    drawn = [t for t in translations if t.attention is not None]
    for option in PLOT_OPTIONS:
        path = getattr(args, option)
        if path is None:
            continue
        for t, out in zip(drawn, plot_paths(path, len(drawn), PLOT_SUFFIXES[option])):
            if option == "html":
                explorer.write_explorer(out, t.attention, t.source_pieces, t.target_pieces,
                                        t.source, t.text, layer=args.layer,
                                        full_context=full_context,
                                        title="cross-attention explorer · "
                                        f"{arrow(translation_direction(t, direction))} · "
                                        f"beam {args.beam}")
            elif option == "plot":
                words = merge_to_words(select_attention(t.attention, args.layer),
                                       t.source_pieces, t.target_pieces)
                plotting.plot_heatmap(words, out, title=describe_view(
                    t.attention, args.layer, full_context=full_context))
            elif option == "plot_heads":
                plotting.plot_heads(t.attention, t.source_pieces, t.target_pieces, args.layer,
                                    out)
            else:
                plotting.plot_layers(t.attention, t.source_pieces, t.target_pieces, out)
            print(f"wrote {out}", file=sys.stderr)


def run_translate(args: argparse.Namespace) -> int:
    plots = {option: getattr(args, option) for option in PLOT_OPTIONS if getattr(args, option)}
    try:
        for option, path in plots.items():  # a bad suffix is caught before the translating
            plot_paths(path, 1, PLOT_SUFFIXES[option])
            check_output_folder(path)  # and so is a folder that is not there
        check_to(args.to)
        texts = read_inputs(args)
        translator = Translator.from_run(args.run, args.checkpoint, args.device)
        translator.check_target_language(args.to)  # --to hi for a hi-en model, say
        apply_search_arguments(args, translator)
        if plots:  # an unknown layer is caught before the translating too
            resolve_layer(args.layer, translator.model.config.num_decoder_layers)
        translations = translator.translate(texts, beam_size=args.beam, n_best=args.n_best,
                                            batch_size=args.batch_size,
                                            need_attention=bool(plots), target_language=args.to)
        for number, translation in enumerate(translations, start=1):
            for warning in translation.warnings:
                print(f"warning: input {number}: {warning}", file=sys.stderr)
            print(output_line(translation, args.json), flush=True)
        draw_plots(args, translations, translator.direction,
                   translator.config.train.alignment_full_context)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a picture that cannot be written (the translations are out)
        print(f"error: {write_failure(error)}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------- evaluate


def search_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--no-repeat-ngram", type=int, default=None, metavar="N",
                        help="never write the same N pieces twice; 0: off (default: the run's "
                        "train.no_repeat_ngram)")
    parser.add_argument("--allow-doubled-words", action="store_true",
                        help="let a word follow itself (\"failed failed\"), which the run's "
                        "train.no_doubled_words may ban")
    parser.add_argument("--length-penalty", type=float, default=None, metavar="ALPHA",
                        help="beam search's GNMT length penalty α; higher favours longer "
                        "translations (default: the run's train.length_penalty)")


def apply_search_arguments(args: argparse.Namespace, translator: Translator) -> None:
    translator.set_search(args.no_repeat_ngram, False if args.allow_doubled_words else None,
                          args.length_penalty)


def evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
    parser.add_argument("--src", type=Path, help="source sentences, one a line")
    parser.add_argument("--ref", type=Path, help="reference translations, line-aligned")
    _to_argument(parser)  # without --src: the test split's half in that direction (default en)
    parser.add_argument("--out", type=Path, default=None, help="where to write the hypotheses")
    parser.add_argument("--beam", type=int, default=5, help="beam size; 1 is greedy (default 5)")
    search_arguments(parser)
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")


def sources_and_references(args: argparse.Namespace, translator: Translator
                           ) -> tuple[str, list[str], list[str]]:
    """(a name for the set, source lines, reference lines)."""
    if (args.src is None) != (args.ref is None):
        raise TranslatorError("give both --src and --ref, or neither to use the run's test split")
    if args.src is None:
        test = load_splits(translator.config.data).splits["test"]
        if translator.direction == "both":  # one direction's half, hi→en unless --to hi
            language = args.to or "en"
            test = [test[i]._replace(source=split_tag(test[i].source)[1])
                    for i in direction_rows(test, language)]
        sources, references, name = [p.source for p in test], [p.target for p in test], "test"
    else:
        sources, references, name = read_lines(args.src), read_lines(args.ref), args.src.stem
        if len(sources) != len(references):
            raise TranslatorError(f"{args.src} has {len(sources)} lines but {args.ref} has "
                                  f"{len(references)}; they must be line-aligned")
    if not sources:
        raise TranslatorError("there are no sentences to evaluate (the source is empty)")
    return name, sources, references


def run_evaluate(args: argparse.Namespace) -> int:
    try:
        check_to(args.to)
        translator = Translator.from_run(args.run, args.checkpoint, args.device)
        translator.check_target_language(args.to)
        apply_search_arguments(args, translator)
        name, sources, references = sources_and_references(args, translator)
        language = args.to or ("en" if translator.direction == "both" and args.src is None
                               else None)
        translations = translator.translate(sources, beam_size=args.beam,
                                            batch_size=args.batch_size, need_attention=False,
                                            target_language=language)
        hypotheses = [t.text for t in translations]
        out = args.out or translator.run_dir.hypotheses_file(name, args.beam)
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
        train = translator.config.train
        print(json.dumps({"sentences": len(sources), "beam_size": args.beam,
                          "no_repeat_ngram": train.no_repeat_ngram,
                          "no_doubled_words": train.no_doubled_words,
                          "length_penalty": train.length_penalty,
                          "hypotheses": str(out), **scores}, ensure_ascii=False))
        return 0
    print(f"{len(sources)} sentences, beam {args.beam}; hypotheses in {out}")
    for metric, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("chrf++", "chrF++")):
        print(f"{label:<7}{scores[metric]:6.2f}  {scores[metric + '_signature']}")
    return 0


# ---------------------------------------------------------------- align


def align_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser, checkpoint=False)
    parser.add_argument("--src", type=Path, required=True, help="source sentences, one a line")
    parser.add_argument("--tgt", type=Path, required=True, help="target sentences, line-aligned")
    parser.add_argument("--layer", type=int, default=None,
                        help="decoder layer, 0-based, negative from the top (default: "
                        "translator.alignment.DEFAULT_LAYER)")
    parser.add_argument("--heads", default=None, help="heads to average, e.g. 0,3 (default: all)")
    parser.add_argument("--threshold", type=float, default=None,
                        help="link every source word with at least this weight instead of "
                        "the single strongest")
    parser.add_argument("--shift", action="store_true",
                        help="Shift-Att reading: a word's row from the step where it is the "
                        "decoder's input (measured worse than the default on this project's "
                        "models: bench/README.md)")
    _to_argument(parser)
    parser.add_argument("--gold", type=Path, default=None, help="gold Pharaoh links: print AER")
    parser.add_argument("--gold-reversed", action="store_true",
                        help="the gold file's first index is the TARGET word (e.g. WPT-05 "
                        "en-hi gold for a hi→en model)")
    parser.add_argument("--checkpoint", default="best", help="best (default) or last")


def parse_heads(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(h) for h in text.split(",")]
    except ValueError:
        raise AlignmentError(f"--heads {text!r} must be head numbers separated by commas, "
                             "e.g. 0,3,5") from None


def run_align(args: argparse.Namespace) -> int:
    try:
        check_to(args.to)
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
        translator.check_target_language(args.to)
        links = align_pairs(translator.model, translator.tokenizer, pairs, args.layer,
                            parse_heads(args.heads), args.threshold, translator.device,
                            shift=args.shift, target_language=args.to,
                            full_context=translator.config.train.alignment_full_context)
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


# ---------------------------------------------------------------- demo


def demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--causal", action="store_true",
                        help="show the 3×3 'UPI payment failed' example under a causal mask")


def run_demo_command(args: argparse.Namespace) -> int:
    run_demo(causal=args.causal)
    return 0


# ---------------------------------------------------------------- plot-run


def plot_run_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, nargs="?", default=None, metavar="RUN",
                        help="run folder (default: runs/latest, the newest run)")
    parser.add_argument("--curves-only", action="store_true",
                        help="redraw only curves.png (no translating)")
    parser.add_argument("--checkpoint", default="best",
                        help="checkpoint for the showcase: best (default; last.pt if there is "
                        "none), last, or a .pt file")
    parser.add_argument("--beam", type=int, default=None,
                        help="beam size for the showcase (default: the run's "
                        "train.test_beam_size, as at the end of training)")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")


def run_plot_run(args: argparse.Namespace) -> int:
    try:
        run_dir = RunDir.find(args.run)
        cfg = run_dir.read_config().train
        draw_curves(run_dir, cfg.early_stopping_metric)
        if args.curves_only:
            return 0
        if not run_dir.checkpoints():
            say(f"{run_dir} has no checkpoint yet: the showcase heatmaps are not drawn")
            return 0
        beam = cfg.test_beam_size if args.beam is None else args.beam
        draw_showcase(run_dir, beam, args.device, args.checkpoint)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


# ---------------------------------------------------------------- one command


# name: (description, arguments, what runs)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None],
                          Callable[[argparse.Namespace], int]]] = {
    "train": ("Train a Hindi–English Transformer.", train_arguments, run_train),
    "translate": ("Translate sentences with a trained run.", translate_arguments,
                  run_translate),
    "evaluate": ("BLEU, chrF and chrF++ of a trained run.", evaluate_arguments, run_evaluate),
    "align": ("Word alignments from cross-attention.", align_arguments, run_align),
    "demo": ("The seeds' worked examples of attention, step by step.", demo_arguments,
             run_demo_command),
    "plot-run": ("Redraw a run's pictures: RUN/curves.png (learning curves, from "
                 "metrics.jsonl) and, if the run has a checkpoint, the showcase sentences' "
                 "heatmaps and explorer pages in RUN/heatmaps/ (translated again).",
                 plot_run_arguments, run_plot_run),
}


def _command_main(name: str, argv: list[str] | None) -> int:
    description, add_arguments, run = COMMANDS[name]
    parser = argparse.ArgumentParser(description=description)
    add_arguments(parser)
    return run(parser.parse_args(argv))


def train_main(argv: list[str] | None = None) -> int:
    return _command_main("train", argv)


def translate_main(argv: list[str] | None = None) -> int:
    return _command_main("translate", argv)


def evaluate_main(argv: list[str] | None = None) -> int:
    return _command_main("evaluate", argv)


def align_main(argv: list[str] | None = None) -> int:
    return _command_main("align", argv)


def demo_main(argv: list[str] | None = None) -> int:
    return _command_main("demo", argv)


def plot_run_main(argv: list[str] | None = None) -> int:
    return _command_main("plot-run", argv)


def main(argv: list[str] | None = None) -> int:
    """python -m translator COMMAND ...: the subcommands above under one name."""
    parser = argparse.ArgumentParser(
        prog="python -m translator",
        description="A small Hindi–English Transformer: train it, translate and evaluate "
        "with it, align words with its attention, redraw a run's pictures, and see attention "
        "worked by hand.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (description, add_arguments, run) in COMMANDS.items():
        command = commands.add_parser(name, help=description, description=description)
        add_arguments(command)
        command.set_defaults(run=run)
    args = parser.parse_args(argv)
    return args.run(args)
