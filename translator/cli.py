"""The command line: one command with ten subcommands, also installed as console scripts.

    python -m translator train [--config FILE] [--resume RUN] [section.key=value ...]
    python -m translator translate "TEXT" [--run RUN] [--to en|hi] [--beam N]
                                          [--plot FILE.png] [--html FILE.html]
    python -m translator evaluate [--run RUN] [--src FILE --ref FILE] [--to en|hi]
    python -m translator align --run RUN --src FILE --tgt FILE [--gold FILE] [--to en|hi]
    python -m translator demo [--causal]
    python -m translator plot-run [RUN] [--curves-only]
    python -m translator serve [--run RUN] [--host 127.0.0.1] [--port 8080] [--backend ct2]
    python -m translator export-ct2 RUN OUT [--quantization int8|int8_float32|float32]
    python -m translator export-hf RUN OUT

`translator-train`, `translator-translate`, ... (pyproject.toml) and `scripts/*.py` call the
same ``*_main`` functions. This module only parses arguments and calls the package; every
`TranslatorError` (and a file that cannot be written) becomes one sentence on standard error
and exit code 2, in one place (`_run`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path

from translator.alignment import align_pairs, alignment_error_rate
from translator.config import SearchConfig, load_config
from translator.ct2 import QUANTIZATIONS, export
from translator.demo import run_demo
from translator.direction import TAGS
from translator.drawing import (
    PICTURES,
    check_picture_path,
    check_views,
    draw_curves,
    draw_showcase,
    draw_translations,
)
from translator.encoded import cache_entries, cache_folder, clear_cache, held_out_pairs
from translator.errors import TranslatorError
from translator.evaluator import Evaluator, direction_pairs
from translator.hf import export as export_hf
from translator.lines import ICONV_HINT, decode_lines, read_lines
from translator.links import format_line, read_pharaoh, word_counts
from translator.reporting import say
from translator.run_dir import RunDir
from translator.serve import serve
from translator.training import train
from translator.translate import BACKENDS, Translation, Translator

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CONFIG = ROOT / "configs" / "default.yaml"


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


def _run(command: Callable[[argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command; what went wrong is one sentence on stderr and exit code 2."""
    try:
        return command(args)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
    except OSError as error:  # a full disk or a folder gone (checkpoints say so themselves)
        print(f"error: {write_failure(error)}", file=sys.stderr)
    return 2


# ---------------------------------------------------------------- shared arguments


def _run_arguments(parser: argparse.ArgumentParser, positional: bool = False) -> None:
    if positional:
        parser.add_argument("run", type=Path, nargs="?", default=None, metavar="RUN",
                            help="run folder (default: runs/latest, the newest run)")
    else:
        parser.add_argument("--run", type=Path, default=None,
                            help="run folder (default: runs/latest, the newest run)")
    parser.add_argument("--checkpoint", default="best",
                        help="best (default; last.pt if there is none), last, step-N, or a "
                        ".pt file")
    parser.add_argument("--device", default="auto", help="auto (default), cpu, cuda, cuda:N")


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


def _search_arguments(parser: argparse.ArgumentParser, n_best: bool = False) -> None:
    parser.add_argument("--beam", type=int, default=None,
                        help="beam size; 1 is greedy (default: the run's search.beam_size)")
    if n_best:
        parser.add_argument("--n-best", type=int, default=None,
                            help="translations per sentence, at most the beam size (default 1)")
    parser.add_argument("--no-repeat-ngram", type=int, default=None, metavar="N",
                        help="never write the same N pieces twice; 0: off (default: the run's "
                        "search.no_repeat_ngram)")
    parser.add_argument("--allow-doubled-words", action="store_true",
                        help="let a word follow itself (\"failed failed\"), which the run's "
                        "search.no_doubled_words may ban")
    parser.add_argument("--length-penalty", type=float, default=None, metavar="ALPHA",
                        help="beam search's GNMT length penalty α; higher favours longer "
                        "translations (default: the run's search.length_penalty)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")


def search_changes(args: argparse.Namespace) -> dict:
    """The search settings the flags change (each checked with the flag's name)."""
    if args.no_repeat_ngram is not None and args.no_repeat_ngram < 0:
        raise TranslatorError(f"--no-repeat-ngram must be 0 (off) or more, not "
                              f"{args.no_repeat_ngram}")
    if args.length_penalty is not None and args.length_penalty < 0:
        raise TranslatorError(f"--length-penalty must be 0 (no penalty) or more, not "
                              f"{args.length_penalty}")
    changes = {"beam_size": args.beam, "n_best": getattr(args, "n_best", None),
               "no_repeat_ngram": args.no_repeat_ngram, "length_penalty": args.length_penalty,
               "no_doubled_words": False if args.allow_doubled_words else None}
    return {key: value for key, value in changes.items() if value is not None}


def _backend_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="torch", choices=BACKENDS,
                        help="torch (default): the run's PyTorch model; ct2: a CTranslate2 "
                        "export, named by --run (python -m translator export-ct2 RUN OUT)")
    parser.add_argument("--threads", type=int, default=0,
                        help="CPU threads of CTranslate2 for --backend ct2 (default 0: its "
                        "own choice)")


def load_translator(args: argparse.Namespace) -> Translator:
    """The run's Translator (with --backend ct2, the export's), searching as the flags say,
    checked against --to."""
    check_to(args.to)
    translator = Translator.load(args.run, getattr(args, "backend", "torch"), args.checkpoint,
                                 args.device, getattr(args, "threads", 0))
    for notice in translator.unsupported_settings():
        print(f"notice: {notice}", file=sys.stderr)
    translator.check_target_language(args.to)  # --to hi for a hi-en model, say
    changes = search_changes(args)
    if "beam_size" in changes and "n_best" not in changes:  # n-best at most the new beam
        changes["n_best"] = min(translator.search.n_best, changes["beam_size"])
    translator.set_search(**changes)
    return translator


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


def run_train(args: argparse.Namespace) -> int:
    if args.resume is not None and args.config is not None:
        raise TranslatorError("--resume continues a run with its own config.yaml; drop "
                              f"--config {args.config}, or start a new run without --resume")
    if args.resume is not None:
        config = RunDir.open(args.resume).read_config(args.overrides)
    else:
        config = load_config(args.config or DEFAULT_CONFIG, args.overrides)
    run_dir, code = train(config, resume=args.resume)
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
    _search_arguments(parser, n_best=True)
    parser.add_argument("--json", action="store_true",
                        help="one JSON object a line: source, text, score, tokens, warnings")
    for kind, (what, suffixes) in PICTURES.items():
        metavar = "FILE" + suffixes[0].upper()
        parser.add_argument(f"--{kind.replace('_', '-')}", type=Path, metavar=metavar,
                            help=f"{what} ({' or '.join(suffixes)})")
    parser.add_argument("--layer", type=int, default=None,
                        help="decoder layer for --plot and --plot-heads, and the one --html "
                        "opens on (default: translator.alignment.DEFAULT_LAYER; -1 is the "
                        "last)")
    _backend_argument(parser)


def read_inputs(args: argparse.Namespace) -> list[str]:
    if args.texts and args.file:
        raise TranslatorError("give texts on the command line or --file, not both")
    if args.texts:
        for number, text in enumerate(args.texts, start=1):
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:  # bytes that were not UTF-8, kept as surrogates
                raise TranslatorError(f"text {number} on the command line is not UTF-8 text; "
                                      f"{ICONV_HINT}") from None
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


def run_translate(args: argparse.Namespace) -> int:
    pictures = {kind: getattr(args, kind) for kind in PICTURES if getattr(args, kind)}
    for kind, path in pictures.items():  # a bad path is refused before the translating
        check_picture_path(path, kind)
    check_to(args.to)
    texts = read_inputs(args)
    translator = load_translator(args)
    # pictures the decoder's attention cannot give, or an unknown layer: before translating
    check_views(pictures, args.layer, translator.decoder.layout)
    translations = translator.translate(texts, need_attention=bool(pictures),
                                        target_language=args.to, batch_size=args.batch_size)
    for number, translation in enumerate(translations, start=1):
        for warning in translation.warnings:
            print(f"warning: input {number}: {warning}", file=sys.stderr)
        print(output_line(translation, args.json), flush=True)
    for path in draw_translations(translations, pictures, translator, args.layer):
        print(f"wrote {path}", file=sys.stderr)
    return 0


# ---------------------------------------------------------------- evaluate


def evaluate_arguments(parser: argparse.ArgumentParser) -> None:
    _run_arguments(parser)
    parser.add_argument("--src", type=Path, help="source sentences, one a line")
    parser.add_argument("--ref", type=Path, help="reference translations, line-aligned")
    _to_argument(parser)  # without --src: the test split's half in that direction (default en)
    parser.add_argument("--out", type=Path, default=None, help="where to write the hypotheses")
    _search_arguments(parser)
    parser.add_argument("--json", action="store_true", help="print the scores as JSON")


def sources_and_references(args: argparse.Namespace, translator: Translator
                           ) -> tuple[str, list[str], list[str]]:
    """(a name for the set, source lines, reference lines): --src and --ref, or the run's test
    split (one direction's half for a model of both directions: hi→en unless --to hi)."""
    if (args.src is None) != (args.ref is None):
        raise TranslatorError("give both --src and --ref, or neither to use the run's test split")
    if args.src is None:
        test = held_out_pairs(translator.config, "test")  # from the cache: train is not read
        if translator.direction.both:
            test = direction_pairs(test, args.to or "en")
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
    translator = load_translator(args)
    name, sources, references = sources_and_references(args, translator)
    language = args.to or ("en" if translator.direction.both and args.src is None else None)
    evaluator = Evaluator(translator.model, translator.tokenizer, translator.config,
                          translator.device, batch_size=args.batch_size)
    hypotheses, scores = evaluator.score_texts(sources, references, language)
    search = translator.search
    out = args.out or translator.run_dir.hypotheses_file(name, search.beam_size)
    try:
        out.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    except OSError as error:
        raise TranslatorError(f"cannot write the hypotheses to {out}: {error.strerror}") from None
    if args.json:
        print(json.dumps({"sentences": len(sources), "beam_size": search.beam_size,
                          "no_repeat_ngram": search.no_repeat_ngram,
                          "no_doubled_words": search.no_doubled_words,
                          "length_penalty": search.length_penalty,
                          "hypotheses": str(out), **scores}, ensure_ascii=False))
        return 0
    print(f"{len(sources)} sentences, beam {search.beam_size}; hypotheses in {out}")
    for metric, label in (("bleu", "BLEU"), ("chrf", "chrF"), ("chrf++", "chrF++")):
        print(f"{label:<7}{scores[metric]:6.2f}  {scores[metric + '_signature']}")
    return 0


# ---------------------------------------------------------------- align


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


def parse_heads(text: str | None) -> list[int] | None:
    if text is None:
        return None
    try:
        return [int(h) for h in text.split(",")]
    except ValueError:
        raise TranslatorError(f"--heads {text!r} must be head numbers separated by commas, "
                              "e.g. 0,3,5") from None


def run_align(args: argparse.Namespace) -> int:
    check_to(args.to)
    sources, targets = read_lines(args.src), read_lines(args.tgt)
    if len(sources) != len(targets):
        raise TranslatorError(f"{args.src} has {len(sources)} lines but {args.tgt} has "
                              f"{len(targets)}; the files must be line-aligned")
    pairs = list(zip(sources, targets))
    gold = None
    if args.gold is not None:
        gold = read_pharaoh(args.gold, word_counts(sources), word_counts(targets),
                            reverse=args.gold_reversed, sides=("source", "target"))
    translator = Translator.from_run(args.run, args.checkpoint, args.device)
    translator.check_target_language(args.to)
    links = align_pairs(translator.model, translator.tokenizer, pairs, args.layer,
                        parse_heads(args.heads), args.threshold, translator.device,
                        shift=args.shift, target_language=args.to,
                        full_context=translator.config.train.alignment_full_context)
    for sentence_links in links:
        print(format_line(sentence_links))
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
    _run_arguments(parser, positional=True)
    parser.add_argument("--curves-only", action="store_true",
                        help="redraw only curves.png (no translating)")
    parser.add_argument("--beam", type=int, default=None,
                        help="beam size for the showcase (default: the run's "
                        "search.beam_size, as at the end of training)")


def run_plot_run(args: argparse.Namespace) -> int:
    run_dir = RunDir.find(args.run)
    config = run_dir.read_config()
    draw_curves(run_dir, config.train.early_stopping_metric)
    if args.curves_only:
        return 0
    if not run_dir.checkpoints():
        say(f"{run_dir} has no checkpoint yet: the showcase heatmaps are not drawn")
        return 0
    if args.beam is not None:  # checked here, so that a bad one is one sentence
        try:
            dataclasses.replace(SearchConfig(), beam_size=args.beam)
        except ValueError as error:
            raise TranslatorError(f"--beam {args.beam}: {error}") from None
    draw_showcase(run_dir, args.beam, args.device, args.checkpoint)
    return 0


# ---------------------------------------------------------------- cache


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


def _size(size: float) -> str:
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} GiB"


def run_cache(args: argparse.Namespace) -> int:
    if args.older_than is not None and (args.action != "clear" or args.older_than < 0):
        raise TranslatorError("--older-than takes a number of days ≥ 0, with clear")
    root = args.dir or cache_folder(load_config(args.config))
    if root is None:
        raise TranslatorError("that config turns the cache off (data.cache: false); "
                              "name a folder with --dir")
    if args.action == "clear":
        removed = clear_cache(root, args.older_than)
        print(f"removed {len(removed)} entries ({_size(sum(e.size for e in removed))}) "
              f"from {root}")
        return 0
    entries = cache_entries(root)
    now = time.time()
    for entry in entries:
        days = (now - entry.last_used) / 86400
        print(f"{_size(entry.size):>10}  {entry.kind:<10}  used {days:5.1f} days ago  "
              f"{entry.path.name}")
    print(f"{len(entries)} entries, {_size(sum(e.size for e in entries))} in {root}")
    return 0


# ---------------------------------------------------------------- serve


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
    parser.set_defaults(to=None)


def run_serve(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        raise TranslatorError(f"--port {args.port} is not a port; use 0 to 65535 (0: any "
                              "free one)")
    translator = load_translator(args)
    return serve(translator, args.host, args.port, args.batch_size, args.quiet)


# ---------------------------------------------------------------- export-ct2


def export_ct2_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder to export")
    parser.add_argument("out", type=Path, metavar="OUT",
                        help="the folder to write (a new one, or an earlier export)")
    parser.add_argument("--quantization", default="int8", metavar="|".join(QUANTIZATIONS),
                        help="weight type (default int8: the fastest on CPUs)")
    parser.add_argument("--checkpoint", default="best",
                        help="best (default; last.pt if there is none), last, step-N, or a "
                        ".pt file")


def run_export_ct2(args: argparse.Namespace) -> int:
    out = export(args.run, args.out, args.quantization, args.checkpoint)
    print(out)
    return 0


# ---------------------------------------------------------------- export-hf


def export_hf_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run", type=Path, metavar="RUN", help="the run folder to export")
    parser.add_argument("out", type=Path, metavar="OUT",
                        help="the folder to write (a new one, or an earlier export)")
    parser.add_argument("--checkpoint", default="best",
                        help="best (default; last.pt if there is none), last, step-N, or a "
                        ".pt file")


def run_export_hf(args: argparse.Namespace) -> int:
    print(export_hf(args.run, args.out, args.checkpoint))
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
    "serve": ("Serve a trained run over HTTP: POST /translate (OpenNMT-py's REST shape), "
              "GET / (the attention explorer of a typed sentence), /health, /models.",
              serve_arguments, run_serve),
    "cache": ("List or clear the data cache (clean splits, tokenizers, token ids and "
              "guided-alignment links) that lets a second run start at once.", cache_arguments,
              run_cache),
    "export-ct2": ("Export a trained run to CTranslate2 (pip install -e \".[ct2]\"), for "
                   "translate --backend ct2 and serve --backend ct2.", export_ct2_arguments,
                   run_export_ct2),
    "export-hf": ("Export a trained run to a Hugging Face transformers model folder (pip "
                  "install -e \".[hf]\"), for AutoModelForSeq2SeqLM and AutoTokenizer.",
                  export_hf_arguments, run_export_hf),
}


def _command_main(name: str, argv: list[str] | None) -> int:
    description, add_arguments, run = COMMANDS[name]
    parser = argparse.ArgumentParser(description=description)
    add_arguments(parser)
    return _run(run, parser.parse_args(argv))


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


def serve_main(argv: list[str] | None = None) -> int:
    return _command_main("serve", argv)


def export_ct2_main(argv: list[str] | None = None) -> int:
    return _command_main("export-ct2", argv)


def export_hf_main(argv: list[str] | None = None) -> int:
    return _command_main("export-hf", argv)


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
        # not "run", which --run (the run folder) would overwrite
        command.set_defaults(run_command=run)
    args = parser.parse_args(argv)
    return _run(args.run_command, args)
