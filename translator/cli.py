"""The command line: one command with eleven subcommands, also installed as console scripts.

    python -m translator train [--config FILE] [--resume RUN | --init-from RUN] [key=value ...]
    python -m translator translate "TEXT" [--run RUN] [--to en|hi] [--beam N]
                                          [--plot FILE.png] [--html FILE.html]
    python -m translator evaluate [--run RUN] [--src FILE --ref FILE] [--to en|hi]
    python -m translator align --run RUN --src FILE --tgt FILE [--gold FILE] [--to en|hi]
    python -m translator demo [--causal]
    python -m translator plot-run [RUN] [--curves-only]
    python -m translator serve [--run RUN] [--host 127.0.0.1] [--port 8080] [--backend ct2]
    python -m translator cache list|clear [--older-than DAYS]
    python -m translator export-ct2 RUN OUT [--quantization int8|int8_float32|float32]
    python -m translator export-hf RUN OUT
    python -m translator export-page RUN OUT.html [--weights int8|float16]

This module parses arguments and calls the package, nothing else. Search flags come from
`SearchConfig`'s fields; one table, `COMMANDS`, gives each subcommand its arguments and what
runs, and its ``train_main``, ... (`__getattr__`) for the console scripts and `scripts/*.py`.
Every `TranslatorError` (or an unwritable file) is one sentence and exit 2, in `_run`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path

from translator.alignment import aer_summary, align_pairs, parse_heads, read_alignment_files
from translator.cache import cache_command
from translator.config import SEARCH_KEYS, SearchConfig, search_problem
from translator.ct2 import QUANTIZATIONS, export
from translator.demo import run_demo
from translator.direction import check_language
from translator.drawing import (
    PICTURES,
    check_picture_path,
    check_views,
    draw_translations,
    plot_run,
)
from translator.errors import TranslatorError, write_failure
from translator.evaluator import evaluate_run, evaluation_report
from translator.finetune import fine_tune_config
from translator.hf import export as export_hf
from translator.lines import read_texts
from translator.links import format_line
from translator.page import PAGE_HELP, page_arguments, run_page
from translator.resume import run_config
from translator.serve import check_port, limit_arguments, limits_of, serve
from translator.training import train
from translator.translate import BACKENDS, Translator

DEFAULT_CONFIG = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; what went wrong is one sentence on stderr and exit code 2."""
    try:
        return command(args)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
    except OSError as error:  # a full disk or a folder gone (checkpoints say so themselves)
        print(f"error: {write_failure(error)}", file=sys.stderr)
    return 2


def _run_arguments(parser: argparse.ArgumentParser, positional: bool = False) -> None:
    if positional:
        parser.add_argument("run", type=Path, nargs="?", default=None, metavar="RUN",
                            help="run folder (default: runs/latest, the newest run)")
    else:
        parser.add_argument("--run", type=Path, default=None,
                            help="run folder (default: runs/latest, the newest run)")
    _checkpoint_argument(parser)
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N, mps")


def _checkpoint_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--checkpoint", default="best",
                        help="best (default; last.pt if there is none), last, step-N, or a "
                        ".pt file")


def _to_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--to", default=None, metavar="en|hi",
                        help="the language to translate into, for a model trained with "
                        "data.direction=both (default: English for input that is mostly "
                        "Devanagari, else Hindi); a model of one direction takes only its own")


SEARCH_FLAGS = ("beam_size", "no_repeat_ngram", "no_doubled_words", "length_penalty",
                "short_source", "short_length_penalty")


def _search_arguments(parser: argparse.ArgumentParser, keys: tuple[str, ...] = SEARCH_FLAGS,
                      batch_size: bool = True) -> None:
    """A flag for each of ``keys`` (`SearchConfig` fields), from its field's metadata; unset,
    the run's search: section decides."""
    for key in keys:
        meta, default = SEARCH_KEYS[key], getattr(SearchConfig(), key)
        if isinstance(default, bool):  # a flag that lifts a ban
            parser.add_argument(meta["flag"], dest=key, action="store_const", const=False,
                                default=None, help=meta["help"])
        else:
            parser.add_argument(meta["flag"], dest=key, type=type(default),
                                default=None, metavar=meta["metavar"],
                                help=f"{meta['help']} (default: the run's search.{key})")
    if batch_size:
        parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")


def search_changes(args: argparse.Namespace) -> dict:
    """The search settings the flags change, each checked (`search_problem`) by its flag."""
    changes = {key: getattr(args, key) for key in SEARCH_KEYS
               if getattr(args, key, None) is not None}
    for key, value in changes.items():
        if problem := search_problem(key, value):
            raise TranslatorError(f"{SEARCH_KEYS[key]['flag']} {problem}")
    return changes


def _backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="torch", choices=BACKENDS,
                        help="torch (default): the run's PyTorch model; ct2: a CTranslate2 "
                        "export, named by --run (python -m translator export-ct2 RUN OUT)")
    parser.add_argument("--threads", type=int, default=0, help="CPU threads of CTranslate2 "
                        "for --backend ct2 (default 0: its own choice)")


def load_translator(args: argparse.Namespace) -> Translator:
    """The run's Translator (with --backend ct2, the export's), searching as the flags say,
    checked against --to; a search setting its decoder cannot apply is a notice."""
    check_language(args.to)
    translator = Translator.load(args.run, getattr(args, "backend", "torch"), args.checkpoint,
                                 args.device, getattr(args, "threads", 0), args.to,
                                 **search_changes(args))
    for notice in translator.unsupported_settings():
        print(f"notice: {notice}", file=sys.stderr)
    return translator


# ---------------------------------------------------------------- the commands


def train_arguments(parser: argparse.ArgumentParser) -> None:
    default = (f"YAML config (default: {DEFAULT_CONFIG.relative_to(Path.cwd())})"
               if DEFAULT_CONFIG.is_relative_to(Path.cwd()) else "YAML config")
    parser.add_argument("--config", type=Path, default=None, help=default)
    parser.add_argument("--resume", type=Path, default=None, metavar="RUN_DIR",
                        help="continue a run from its last checkpoint (its own config.yaml is "
                        "used; overrides still apply, e.g. train.max_steps=6000)")
    parser.add_argument("--init-from", type=Path, metavar="RUN_DIR", help="fine-tune: a new "
                        "run from RUN_DIR's weights, tokenizer and model (docs/training.md)")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value",
                        help="dotted overrides, e.g. train.max_steps=200 model.layers=2")


def run_train(args: argparse.Namespace) -> int:
    config = fine_tune_config(args.init_from, args.config, args.overrides, args.resume) \
        if args.init_from else run_config(args.config, args.resume, args.overrides, DEFAULT_CONFIG)
    run_dir, code = train(config, resume=args.resume)
    print(run_dir)
    return code


def translate_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("texts", nargs="*", metavar="TEXT", help="sentences to translate "
                        "(default: one a line from --file or standard input)")
    parser.add_argument("--file", type=Path, help="a UTF-8 file of sentences, one a line")
    _run_arguments(parser)
    _to_argument(parser)
    _search_arguments(parser, ("beam_size", "n_best", *SEARCH_FLAGS[1:], "alternatives"))
    parser.add_argument("--prefix", metavar="TEXT", help="text every translation starts with")
    parser.add_argument("--json", action="store_true", help="a JSON object a line: source, text, "
                        "score, tokens, warnings (--alternatives: steps, words)")
    for kind, (what, suffixes) in PICTURES.items():
        metavar = "FILE" + suffixes[0].upper()
        parser.add_argument(f"--{kind.replace('_', '-')}", type=Path, metavar=metavar,
                            help=f"{what} ({' or '.join(suffixes)})")
    parser.add_argument("--attribution", action="store_true", help="--plot: input × gradient")
    parser.add_argument("--layer", type=int, default=None, help="decoder layer of --plot, "
                        "--plot-heads and --html (default: alignment.DEFAULT_LAYER; -1: last)")
    _backend_argument(parser)


def run_translate(args: argparse.Namespace) -> int:
    pictures = {kind: getattr(args, kind) for kind in PICTURES if getattr(args, kind)}
    for kind, path in pictures.items():  # a bad path is refused before the translating
        check_picture_path(path, kind)
    check_language(args.to)
    texts = read_texts(args.texts, args.file)
    translator = load_translator(args)
    # pictures the decoder's attention cannot give, or an unknown layer: before translating
    check_views(pictures, args.layer, translator.decoder.layout)
    translations = translator.translate(texts, need_attention=bool(pictures), prefix=args.prefix,
                                        target_language=args.to, batch_size=args.batch_size)
    for number, translation in enumerate(translations, start=1):
        for warning in translation.warnings:
            print(f"warning: input {number}: {warning}", file=sys.stderr)
        print(translation.line(args.json), flush=True)
    for path in draw_translations(translations, pictures, translator, args.layer, args.attribution):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
    parser.add_argument("--src", type=Path, help="source sentences, one a line")
    parser.add_argument("--ref", type=Path, help="reference translations, line-aligned")
    _to_argument(parser)  # without --src: the test split's half in that direction (default en)
    parser.add_argument("--out", type=Path, default=None, help="where to write the hypotheses")
    _search_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")


def run_evaluate(args: argparse.Namespace) -> int:
    result = evaluate_run(load_translator(args), args.src, args.ref, args.to, args.out,
                          args.batch_size)
    print(evaluation_report(result, args.json))
    return 0


def align_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
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
                        "models: docs/alignment.md)")
    _to_argument(parser)
    parser.add_argument("--gold", type=Path, default=None, help="gold Pharaoh links: print AER")
    parser.add_argument("--gold-reversed", action="store_true",
                        help="the gold file's first index is the TARGET word (e.g. WPT-05 "
                        "en-hi gold for a hi→en model)")


def run_align(args: argparse.Namespace) -> int:
    check_language(args.to)
    pairs, gold = read_alignment_files(args.src, args.tgt, args.gold, args.gold_reversed)
    translator = Translator.from_run(args.run, args.checkpoint, args.device)
    translator.check_target_language(args.to)
    links = align_pairs(translator.model, translator.tokenizer, pairs, args.layer,
                        parse_heads(args.heads), args.threshold, translator.device,
                        shift=args.shift, target_language=args.to,
                        full_context=translator.config.train.alignment_full_context)
    for sentence_links in links:
        print(format_line(sentence_links))
    if gold is not None:
        print(aer_summary(links, gold), file=sys.stderr)
    return 0


def demo_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--causal", action="store_true",
                        help="show the 3×3 'UPI payment failed' example under a causal mask")


def plot_run_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser, positional=True)
    parser.add_argument("--curves-only", action="store_true",
                        help="redraw only curves.png (no translating)")
    _search_arguments(parser, ("beam_size",), batch_size=False)


def run_plot_run(args: argparse.Namespace) -> int:
    plot_run(args.run, search_changes(args).get("beam_size"), args.device, args.checkpoint,
             args.curves_only)
    return 0


def cache_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", choices=("list", "clear"),
                        help="list: the entries with sizes and last use; clear: remove them")
    parser.add_argument("--dir", type=Path, default=None,
                        help="the cache folder (default: the one --config names, "
                        "runs/cache for the default config)")
    parser.add_argument("--config", default=None,
                        help="a config whose data.cache_dir (or train.output_dir/cache) to use")
    parser.add_argument("--older-than", type=float, default=None, metavar="DAYS",
                        help="clear: only entries no run has read for more than DAYS days")


def run_cache(args: argparse.Namespace) -> int:
    print(cache_command(args.action, args.dir, args.config, args.older_than))
    return 0


def serve_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1, this machine only; "
                        "another host is reachable by others and warned about)")
    parser.add_argument("--port", type=int, default=8080,
                        help="port to listen on (default 8080; 0 picks a free one)")
    _backend_argument(parser)
    _search_arguments(parser)
    parser.add_argument("--quiet", action="store_true", help="no line per request on stderr")
    limit_arguments(parser)
    parser.set_defaults(to=None)


def run_serve(args: argparse.Namespace) -> int:
    check_port(args.port)
    limits = limits_of(args)
    return serve(load_translator(args), args.host, args.port, args.batch_size, args.quiet,
                 limits)


def export_arguments(parser: argparse.ArgumentParser, quantization: bool = False) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder to export")
    parser.add_argument("out", type=Path, metavar="OUT",
                        help="the folder to write (a new one, or an earlier export)")
    if quantization:
        parser.add_argument("--quantization", default="int8", metavar="|".join(QUANTIZATIONS),
                            help="weight type (default int8: the fastest on CPUs)")
    _checkpoint_argument(parser)


def run_export_ct2(args: argparse.Namespace) -> int:
    print(export(args.run, args.out, args.quantization, args.checkpoint))
    return 0


def run_export_hf(args: argparse.Namespace) -> int:
    print(export_hf(args.run, args.out, args.checkpoint))
    return 0


# ---------------------------------------------------------------- one command


# name: (description, arguments, what runs); each is also NAME_main (`__getattr__`)
COMMANDS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None],
                          Callable[[argparse.Namespace], int]]] = {
    "train": ("Train a Hindi–English Transformer.", train_arguments, run_train),
    "translate": ("Translate sentences with a trained run.", translate_arguments, run_translate),
    "evaluate": ("BLEU, chrF and chrF++ of a trained run.", evaluate_arguments, run_evaluate),
    "align": ("Word alignments from cross-attention.", align_arguments, run_align),
    "demo": ("The seeds' worked examples of attention.", demo_arguments,
             lambda args: run_demo(causal=args.causal) or 0),
    "plot-run": ("Redraw a run's pictures: RUN/curves.png (learning curves, from "
                 "metrics.jsonl) and, if the run has a checkpoint, the showcase sentences' "
                 "heatmaps and explorer pages in RUN/heatmaps/ (translated again).",
                 plot_run_arguments, run_plot_run),
    "serve": ("Serve a trained run over HTTP: POST /translate (OpenNMT-py's REST shape), "
              "GET / (the attention explorer of a typed sentence), /health, /models.",
              serve_arguments, run_serve),
    "cache": ("List or clear the data cache (clean splits, tokenizers, token ids and "
              "guided-alignment links) that lets a second run start at once.", cache_arguments,
              run_cache),
    "export-ct2": ("Export a trained run to CTranslate2 (pip install -e \".[ct2]\"), for "
                   "translate --backend ct2 and serve --backend ct2.",
                   partial(export_arguments, quantization=True), run_export_ct2),
    "export-hf": ("Export a trained run to a Hugging Face transformers model folder (pip "
                  "install -e \".[hf]\"), for AutoModelForSeq2SeqLM and AutoTokenizer.",
                  export_arguments, run_export_hf),
    "export-page": (PAGE_HELP, page_arguments, run_page),
}


def command_main(name: str, argv: list[str] | None = None) -> int:
    """One subcommand as a program of its own (a console script, scripts/*.py)."""
    description, add_arguments, run = COMMANDS[name]
    parser = argparse.ArgumentParser(description=description)
    add_arguments(parser)
    return _run(run, parser.parse_args(argv))


def __getattr__(name: str) -> Callable[[list[str] | None], int]:
    """``train_main``, ``plot_run_main``, ...: `command_main` of the `COMMANDS` entry."""
    command = name.removesuffix("_main").replace("_", "-")
    if name.endswith("_main") and command in COMMANDS:
        return partial(command_main, command)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main(argv: list[str] | None = None) -> int:
    """python -m translator COMMAND ...: the subcommands above under one name."""
    parser = argparse.ArgumentParser(
        prog="python -m translator",
        description="A small Hindi–English Transformer: train it, translate and evaluate "
        "with it, align words with its attention, redraw a run's pictures, serve it over HTTP, "
        "export it to CTranslate2 or Hugging Face transformers, and see attention worked by "
        "hand.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (description, add_arguments, run) in COMMANDS.items():
        command = commands.add_parser(name, help=description, description=description)
        add_arguments(command)
        command.set_defaults(run_command=run)  # not "run", which --run would overwrite
    args = parser.parse_args(argv)
    return _run(args.run_command, args)
