"""Our Transformer against JoeyNMT 2.3.0 on public Hindi→English data, on this CPU.

The same training data, model size, vocabulary and wall-clock budget for both; then BLEU and
chrF on the same held-out sets, training tokens/s and decoding sentences/s (greedy, beam 5).

    python bench/joeynmt_bench.py                   # 10 minutes of training per system
    python bench/joeynmt_bench.py --minutes 1 --eval-sentences 16 --sets embedded_test \
        --log-every 10 --eval-every 20          # a quick check that everything runs

Needs ../shared/data/public (public data on the team's machines, not part of the project);
without it the bench says so and exits 0. JoeyNMT is installed on first use into its own
virtual environment, bench/.venv-joeynmt, by bench/joeynmt/setup.sh (never a dependency of
the project). Each system runs alone, one after the other, on --threads CPU threads.

1. Data. Train: tatoeba_manythings, tico19, ntrex128, wpt05_align_dev (its 30 pre-tokenized
   pairs, for the alignment benchmark; never its gold links) and the embedded corpus's train
   split. Dev: the embedded dev split. Evaluation: flores/dev, iitb_wmt14/dev and the embedded
   test split. All of it passes once through translator.data.load_splits (normalised; long and
   ill-proportioned train pairs and duplicates dropped; evaluation pairs whose sentence occurs
   in train removed) into bench/results/data/, which both systems read.
2. Ours: translator.training.train with configs/default.yaml and SHARED below, for --minutes
   from its first step. The run folder bench/results/public-ours is kept (the alignment
   benchmark reuses it). Its SentencePiece model (joint, trained on the train split) is
   JoeyNMT's tokenizer and vocabulary too.
3. JoeyNMT: `python -m joeynmt train` with bench/joeynmt/config.yaml filled from SHARED. It has
   no time limit, so it gets SIGINT --minutes after it logs its first epoch; it then saves
   its weights.
4. Both: the weights at the end of the budget (last.pt, latest.ckpt) translate the evaluation
   sets greedily and with beam 5 (batches of 64 sentences). BLEU and chrF: sacrebleu on the
   detokenised output, the same code for both. Prints a Markdown report and writes it to
   bench/results/joeynmt.md.
"""

import argparse
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import yaml

from translator.config import load_config
from translator.data import DataConfig, LoadedData, Pair, load_splits
from translator.errors import TranslatorError
from translator.metrics import corpus_scores
from translator.run_dir import RunDir
from translator.tokenizer import Tokenizer
from translator.training import train
from translator.translate import Translator

ROOT = Path(__file__).resolve().parents[1]
PUBLIC = ROOT.parent / "shared" / "data" / "public"
RESULTS = ROOT / "bench" / "results"
DATA = RESULTS / "data"
OURS_RUN = RunDir(RESULTS / "public-ours")
JOEY_RUN = RESULTS / "public-joeynmt"
REPORT = RESULTS / "joeynmt.md"
JOEY_DIR = ROOT / "bench" / "joeynmt"
JOEY_PYTHON = ROOT / "bench" / ".venv-joeynmt" / "bin" / "python"

# public folder -> file prefix inside it, for the training data
PUBLIC_TRAIN = {"tatoeba_manythings": "train", "tico19": "test", "ntrex128": "test",
                "wpt05_align_dev": "dev"}
PUBLIC_EVAL = {"flores_dev": "flores/dev", "iitb_dev": "iitb_wmt14/dev"}
EVAL_SETS = ["flores_dev", "iitb_dev", "embedded_test"]
SET_LABELS = {"flores_dev": "FLORES dev", "iitb_dev": "IITB dev", "embedded_test": "embedded test"}
BEAMS = [1, 5]
DECODE_BATCH = 64  # sentences per decoding batch, both systems

# What both systems share. Ours gets it as config overrides, JoeyNMT through its template.
SHARED = {
    "vocab_size": 8000,  # one joint SentencePiece model (unigram) for both
    "d_model": 256,
    "heads": 8,
    "layers": 3,  # encoder layers = decoder layers
    "d_ff": 1024,
    "dropout": 0.1,  # a 10-minute budget is a few epochs: little to regularise
    "batch_tokens": 3000,  # padded source + target tokens per batch (JoeyNMT: half, per side)
    "learning_rate": 1e-3,  # peak, after a linear warm-up, then ∝ 1/√step
    "warmup_steps": 400,
    "adam_betas": [0.9, 0.98],
    "label_smoothing": 0.1,
    "clip_norm": 1.0,
}


class BenchError(Exception):
    """The bench cannot go on; the message says why and what to do."""


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0,
                        help="training budget per system, from its first step (default 10)")
    parser.add_argument("--threads", type=int, default=2, help="CPU threads per system")
    parser.add_argument("--eval-sentences", type=int, default=100,
                        help="translate the first N sentences of each set (default 100; 0: "
                        "all, several times longer, mostly JoeyNMT's uncached search)")
    parser.add_argument("--sets", nargs="+", choices=EVAL_SETS, default=EVAL_SETS,
                        help="evaluation sets (default: all three)")
    parser.add_argument("--log-every", type=int, default=50, help="steps between log lines")
    parser.add_argument("--eval-every", type=int, default=500,
                        help="steps between validations on the dev split (both systems)")
    parser.add_argument("--precision", default="fp32", choices=["fp32", "bf16"],
                        help="ours only (JoeyNMT has no bf16 on CPU); default fp32")
    parser.add_argument("--evaluate-only", action="store_true",
                        help="skip training: evaluate the runs already in bench/results")
    args = parser.parse_args()
    if args.eval_every % args.log_every:
        parser.error("--eval-every must be a multiple of --log-every (JoeyNMT requires it)")
    return args


# ---------------------------------------------------------------- data


@dataclass
class BenchData:
    train: Path  # prefixes of line-aligned .hi/.en files
    dev: Path
    evals: dict[str, Path]
    summary: list[str] = field(default_factory=list)  # Markdown lines


def unfiltered(**paths: str) -> DataConfig:
    """Normalised, non-empty pairs, with no other filter."""
    return DataConfig(source="files", format="text", max_words=0, max_length_ratio=0,
                      dedupe=False, remove_leakage=False, **paths)


def write_pairs(pairs: list[Pair], prefix: Path) -> Path:
    """PREFIX.hi and PREFIX.en (direction hi-en: the source is Hindi)."""
    prefix.parent.mkdir(parents=True, exist_ok=True)
    for suffix, side in ((".hi", 0), (".en", 1)):
        text = "".join(pair[side] + "\n" for pair in pairs)
        prefix.with_name(prefix.name + suffix).write_text(text, encoding="utf-8")
    return prefix


def prepare_data(eval_sentences: int, sets: list[str]) -> BenchData:
    """Collect the raw sets, then clean them the way training would, once, for both."""
    embedded = load_splits(DataConfig(source="embedded", max_words=0, max_length_ratio=0,
                                      dedupe=False, remove_leakage=False)).splits
    raw_train, summary = list(embedded["train"]), []
    counts = [f"embedded train {len(embedded['train']):,}"]
    for folder, name in PUBLIC_TRAIN.items():
        pairs = load_splits(unfiltered(train_path=str(PUBLIC / folder / name))).splits["train"]
        raw_train += pairs
        counts.append(f"{folder} {len(pairs):,}")
    summary.append(f"- train sources (pairs): {', '.join(counts)}")
    write_pairs(raw_train, DATA / "raw_train")
    write_pairs(embedded["dev"], DATA / "raw_dev")
    raw_evals = {"embedded_test": write_pairs(embedded["test"], DATA / "raw_embedded_test")}
    for name, path in PUBLIC_EVAL.items():
        pairs = load_splits(unfiltered(train_path=str(PUBLIC / path))).splits["train"]
        raw_evals[name] = write_pairs(pairs, DATA / f"raw_{name}")

    evals, loaded = {}, None
    for name in sets:
        loaded = load_splits(DataConfig(source="files", format="text",
                                        train_path=str(DATA / "raw_train"),
                                        dev_path=str(DATA / "raw_dev"),
                                        test_path=str(raw_evals[name])))
        test = loaded.splits["test"][: eval_sentences or None]
        evals[name] = write_pairs(test, DATA / name)
        summary.append(f"- {SET_LABELS[name]}: {_split_line(loaded, 'test')}, "
                       f"{len(test):,} translated")
    summary[1:1] = [f"- train: {_split_line(loaded, 'train')}",
                    f"- dev (embedded dev): {_split_line(loaded, 'dev')}"]
    return BenchData(write_pairs(loaded.splits["train"], DATA / "train"),
                     write_pairs(loaded.splits["dev"], DATA / "dev"), evals, summary)


def _split_line(loaded: LoadedData, split: str) -> str:
    line = next(ln for ln in loaded.summary().splitlines() if ln.startswith(f"{split}:"))
    return line.split(": ", 1)[1]


def read_pairs(prefix: Path) -> tuple[list[str], list[str]]:
    """(sources, references) of PREFIX.hi / PREFIX.en as written by write_pairs."""
    sides = [prefix.with_name(prefix.name + s).read_text(encoding="utf-8").split("\n")[:-1]
             for s in (".hi", ".en")]
    return sides[0], sides[1]


# ---------------------------------------------------------------- training


@dataclass
class Training:
    system: str
    steps: int
    epoch: int  # the epoch in progress at the end (1-based)
    parameters: int
    tokens_per_second: float | None  # source + target tokens, validation time left out


def ours_overrides(args: argparse.Namespace, data: BenchData) -> list[str]:
    s = SHARED
    return [
        "data.source=files", "data.format=text", f"data.train_path={data.train}",
        f"data.dev_path={data.dev}", "data.test_path=null",
        f"tokenizer.vocab_size={s['vocab_size']}", "tokenizer.joint=true",
        f"model.d_model={s['d_model']}", f"model.heads={s['heads']}",
        f"model.layers={s['layers']}", "model.decoder_layers=null", f"model.d_ff={s['d_ff']}",
        f"model.dropout={s['dropout']}", "model.norm=pre", "model.share_embeddings=true",
        f"train.output_dir={RESULTS}", f"train.run_name={OURS_RUN.path.name}",
        "train.overwrite=true",
        "train.device=cpu", f"train.precision={args.precision}", f"train.threads={args.threads}",
        f"train.max_minutes={args.minutes}", "train.max_steps=10000000",
        f"train.batch_tokens={s['batch_tokens']}", "train.accumulate=1",
        f"train.learning_rate={s['learning_rate']}", f"train.warmup_steps={s['warmup_steps']}",
        f"train.adam_betas={s['adam_betas']}", "train.weight_decay=0.0",
        f"train.label_smoothing={s['label_smoothing']}", f"train.clip_norm={s['clip_norm']}",
        f"train.log_every={args.log_every}", f"train.eval_every={args.eval_every}",
        "train.eval_sentences=0", "train.early_stopping_metric=chrf", "train.patience=0",
        "train.keep_best=1",
    ]


def train_ours(args: argparse.Namespace, data: BenchData) -> None:
    config = load_config(ROOT / "configs" / "default.yaml", ours_overrides(args, data))
    run_dir, code = train(config)
    if code != 0:
        raise BenchError(f"our training stopped with exit code {code}; see {run_dir}/train.log")


def ours_training(args: argparse.Namespace) -> Training:
    """Steps, epoch and tokens/s from metrics.jsonl. A log window that holds a validation
    (the first one after it) is left out, as JoeyNMT leaves validation time out."""
    records = [json.loads(line) for line in
               OURS_RUN.metrics_file.read_text(encoding="utf-8").splitlines()]
    train_records = [r for r in records if r["kind"] == "train"]
    clean = [r["tokens_per_second"] for r in train_records
             if r["step"] <= args.eval_every or (r["step"] - args.log_every) % args.eval_every]
    model = Translator.from_run(OURS_RUN, checkpoint="last", device="cpu").model
    state = OURS_RUN.load_checkpoint("last")
    return Training("ours", state["step"], state["sampler"]["epoch"] + 1,
                    sum(p.numel() for p in model.parameters()),
                    statistics.mean(clean) if clean else None)


def joeynmt_python() -> Path:
    """The JoeyNMT virtual environment's Python, set up by bench/joeynmt/setup.sh if need be."""
    check = [str(JOEY_PYTHON), "-c", "import joeynmt, sentencepiece as s; "
             "assert hasattr(s.SentencePieceProcessor, 'SetVocabulary')"]
    if JOEY_PYTHON.is_file() and subprocess.run(check, capture_output=True).returncode == 0:
        return JOEY_PYTHON
    print("installing JoeyNMT 2.3.0 into bench/.venv-joeynmt (a few minutes) ...", flush=True)
    if subprocess.run(["bash", str(JOEY_DIR / "setup.sh")]).returncode != 0:
        raise BenchError("installing JoeyNMT failed (see pip's output above); fix it, then run "
                         "bash bench/joeynmt/setup.sh")
    return JOEY_PYTHON


def joeynmt_config(args: argparse.Namespace, data: BenchData, tokenizer_dir: Path) -> Path:
    """Fill the template with the shared settings and our SentencePiece model."""
    vocab = DATA / "joint_vocab.txt"  # the pieces in id order: the same vocabulary
    pieces = Tokenizer.load(tokenizer_dir).target_pieces(list(range(SHARED["vocab_size"])))
    vocab.write_text("".join(piece + "\n" for piece in pieces), encoding="utf-8")
    cfg = yaml.safe_load((JOEY_DIR / "config.yaml").read_text(encoding="utf-8"))
    s = SHARED
    cfg["model_dir"] = str(JOEY_RUN)
    cfg["data"].update(train=str(data.train), dev=str(data.dev))
    for side in ("src", "trg"):
        cfg["data"][side]["voc_file"] = str(vocab)
        cfg["data"][side]["tokenizer_cfg"]["model_file"] = str(tokenizer_dir / "joint.model")
    cfg["training"].update(
        adam_betas=s["adam_betas"], learning_rate=s["learning_rate"],
        learning_rate_warmup=s["warmup_steps"], label_smoothing=s["label_smoothing"],
        clip_grad_norm=s["clip_norm"], batch_size=s["batch_tokens"] // 2,
        logging_freq=args.log_every, validation_freq=args.eval_every)
    for part in ("encoder", "decoder"):
        cfg["model"][part].update(num_layers=s["layers"], num_heads=s["heads"],
                                  hidden_size=s["d_model"], ff_size=s["d_ff"],
                                  dropout=s["dropout"])
        cfg["model"][part]["embeddings"].update(embedding_dim=s["d_model"], dropout=s["dropout"])
    unset = _null_keys(cfg)
    if unset:
        raise BenchError(f"bench/joeynmt/config.yaml has keys the bench does not fill: "
                         f"{', '.join(unset)}; fill them in joeynmt_config()")
    path = RESULTS / "joeynmt_config.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True), encoding="utf-8")
    return path


def _null_keys(node: object, prefix: str = "") -> list[str]:
    if isinstance(node, dict):
        return [k for key, value in node.items() for k in _null_keys(value, f"{prefix}{key}.")]
    return [prefix.rstrip(".")] if node is None else []


def thread_env(threads: int) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def train_joeynmt(args: argparse.Namespace, python: Path, config: Path) -> None:
    """Run JoeyNMT until --minutes after its first epoch starts, then SIGINT it."""
    log = RESULTS / "joeynmt_train.out"
    with open(log, "w", encoding="utf-8") as out:
        process = subprocess.Popen([str(python), "-m", "joeynmt", "train", str(config),
                                    "--skip-test"], stdout=out, stderr=subprocess.STDOUT,
                                   env=thread_env(args.threads), cwd=ROOT)
        try:
            started = _wait_for_first_epoch(process, log)
            print(f"JoeyNMT is training for {args.minutes:g} minutes ...", flush=True)
            while process.poll() is None and time.time() < started + args.minutes * 60:
                time.sleep(1)
            if process.poll() is None:
                process.send_signal(signal.SIGINT)  # it saves its weights, then exits
                process.wait(timeout=300)
        finally:
            if process.poll() is None:
                process.kill()
    if process.returncode != 0 or not (JOEY_RUN / "latest.ckpt").exists():
        raise BenchError(f"JoeyNMT training failed (exit code {process.returncode}); its "
                         f"output is in {log}:\n{_tail(log)}")


def _wait_for_first_epoch(process: subprocess.Popen, log: Path, limit_s: float = 600) -> float:
    """The time JoeyNMT logged "EPOCH 1": data and model are ready, steps begin."""
    deadline = time.time() + limit_s
    while time.time() < deadline:
        if "EPOCH 1" in log.read_text(encoding="utf-8", errors="replace"):
            return time.time()
        if process.poll() is not None:
            raise BenchError(f"JoeyNMT stopped before training began (exit code "
                             f"{process.returncode}); its output is in {log}:\n{_tail(log)}")
        time.sleep(0.5)
    raise BenchError(f"JoeyNMT did not start training within {limit_s:.0f} s; see {log}")


def _tail(path: Path, lines: int = 15) -> str:
    return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])


def joeynmt_training(ratio: float) -> Training:
    """Steps, epoch, parameters and tokens/s from JoeyNMT's train.log. JoeyNMT logs target
    tokens/s (validation time left out); × ``ratio`` (source + target per target token in
    the train split) puts it in our unit."""
    text = (JOEY_RUN / "train.log").read_text(encoding="utf-8", errors="replace")
    rates = [float(r) for r in re.findall(r"Tokens per Sec:\s+([\d.]+)", text)]
    interrupt = re.findall(r"Interrupt at epoch (\d+), step (\d+)", text)
    epochs = re.findall(r"EPOCH (\d+)", text)
    steps = re.findall(r"Step:\s+(\d+)", text)
    epoch, step = interrupt[-1] if interrupt else (epochs[-1], steps[-1] if steps else 0)
    parameters = re.findall(r"Total params: (\d+)", text)
    return Training("JoeyNMT 2.3.0", int(step), int(epoch),
                    int(parameters[-1]) if parameters else 0,
                    statistics.mean(rates) * ratio if rates else None)


def source_target_ratio(data: BenchData) -> float:
    """(source + target tokens) / target tokens over the train split, EOS/BOS included."""
    tokenizer = Tokenizer.load(OURS_RUN.tokenizer_dir)
    sources, targets = read_pairs(data.train)
    source = sum(len(tokenizer.encode_source(text)) + 1 for text in sources)
    target = sum(len(tokenizer.encode_target(text)) + 1 for text in targets)
    return (source + target) / target


# ---------------------------------------------------------------- decoding


@dataclass
class Decoding:
    system: str
    beam: int
    seconds: float = 0.0
    sentences: int = 0
    scores: dict[str, tuple[float, float]] = field(default_factory=dict)  # set: (BLEU, chrF)

    @property
    def sentences_per_second(self) -> float:
        return self.sentences / self.seconds if self.seconds else 0.0


def decode_ours(data: BenchData, threads: int) -> list[Decoding]:
    torch.set_num_threads(threads)
    translator = Translator.from_run(OURS_RUN, checkpoint="last", device="cpu")

    def translate(texts: list[str], beam: int) -> list[str]:
        return [t.text for t in translator.translate(texts, beam_size=beam,
                                                      batch_size=DECODE_BATCH,
                                                      need_attention=False)]

    results = []
    for beam in BEAMS:
        decoding = Decoding("ours", beam)
        for name, prefix in data.evals.items():
            sources, references = read_pairs(prefix)
            started = time.perf_counter()
            hypotheses = translate(sources, beam)
            _record(decoding, name, time.perf_counter() - started, hypotheses, references)
        results.append(decoding)
    return results


def decode_joeynmt(python: Path, config: Path, data: BenchData, threads: int) -> list[Decoding]:
    output = RESULTS / "joeynmt_decode.json"
    inputs = [f"--input={name}={prefix.with_name(prefix.name + '.hi')}"
              for name, prefix in data.evals.items()]
    command = [str(python), str(JOEY_DIR / "decode.py"), str(config),
               str((JOEY_RUN / "latest.ckpt").resolve()), str(output), *inputs,
               "--beams", *map(str, BEAMS), "--threads", str(threads),
               "--log", str(RESULTS / "joeynmt_decode.log")]
    done = subprocess.run(command, env=thread_env(threads), cwd=ROOT, capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise BenchError(f"JoeyNMT decoding failed (exit code {done.returncode}):\n"
                         f"{done.stderr[-3000:]}")
    found = json.loads(output.read_text(encoding="utf-8"))
    results = []
    for beam in BEAMS:
        decoding = Decoding("JoeyNMT 2.3.0", beam)
        for name, prefix in data.evals.items():
            run = found[name][str(beam)]
            _record(decoding, name, run["seconds"], run["hypotheses"], read_pairs(prefix)[1])
        results.append(decoding)
    return results


def _record(decoding: Decoding, name: str, seconds: float, hypotheses: list[str],
            references: list[str]) -> None:
    """Add one set's time and scores; keep the output beside the data for a look."""
    decoding.seconds += seconds
    decoding.sentences += len(hypotheses)
    scores = corpus_scores(hypotheses, references, metrics=("bleu", "chrf"))
    decoding.scores[name] = (scores["bleu"], scores["chrf"])
    system = "ours" if decoding.system == "ours" else "joeynmt"
    path = RESULTS / "hypotheses" / f"{system}_beam{decoding.beam}_{name}.en"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")


# ---------------------------------------------------------------- the report


class Clock:
    """Wall time of each phase of the bench, for the report."""

    def __init__(self) -> None:
        self.last = time.perf_counter()
        self.laps: dict[str, float] = {}

    def lap(self, name: str) -> None:
        now = time.perf_counter()
        self.laps[name], self.last = now - self.last, now

    def line(self) -> str:
        parts = [f"{name} {seconds / 60:.1f}" for name, seconds in self.laps.items()]
        total = sum(self.laps.values()) / 60
        return f"Wall time (minutes): {', '.join(parts)}; total {total:.1f}."


def cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    names = re.findall(r"model name\s*:\s*(.+)", info.read_text()) if info.is_file() else []
    return names[0].strip() if names else platform.processor() or platform.machine()


def _number(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def render(args: argparse.Namespace, data: BenchData, trainings: list[Training],
           decodings: list[Decoding], clock: Clock) -> str:
    s = SHARED
    lines = [
        "# Ours against JoeyNMT 2.3.0 (public Hindi→English data)", "",
        f"{args.minutes:g} minutes of training per system from its first step, "
        f"{args.threads} CPU threads each, one system at a time; {cpu_name()}, torch "
        f"{torch.__version__}, ours in {args.precision}, JoeyNMT in fp32. Both: "
        f"{s['layers']}+{s['layers']} layers, d_model {s['d_model']}, {s['heads']} heads, "
        f"feed-forward {s['d_ff']}, dropout {s['dropout']}, one joint SentencePiece "
        f"vocabulary of {s['vocab_size']} pieces, tied embeddings, pre-norm, AdamW "
        f"{tuple(s['adam_betas'])}, peak lr {s['learning_rate']} after {s['warmup_steps']} "
        f"warm-up steps then ∝ 1/√step, label smoothing {s['label_smoothing']}, clip "
        f"{s['clip_norm']}, {s['batch_tokens']} padded source+target tokens per batch "
        f"(JoeyNMT: {s['batch_tokens'] // 2} per side), validation every {args.eval_every} "
        "steps on the embedded dev split.", "",
        "Data (pairs after translator.data.load_splits):", *data.summary, "",
        "| system | steps | epoch reached | parameters | train tokens/s |",
        "|---|---:|---:|---:|---:|",
    ]
    for t in trainings:
        lines.append(f"| {t.system} | {t.steps:,} | {t.epoch} | {t.parameters:,} | "
                     f"{_number(t.tokens_per_second)} |")
    names = list(data.evals)
    lines += ["", "| system | search | "
              + " | ".join(f"{SET_LABELS[n]} BLEU | {SET_LABELS[n]} chrF" for n in names)
              + " | sentences/s |",
              "|---|---|" + "---:|" * (2 * len(names) + 1)]
    for d in decodings:
        scores = " | ".join(f"{d.scores[n][0]:.1f} | {d.scores[n][1]:.1f}" for n in names)
        search = "greedy" if d.beam == 1 else f"beam {d.beam}"
        lines.append(f"| {d.system} | {search} | {scores} | {d.sentences_per_second:.1f} |")
    lines += ["", "Ours against JoeyNMT:", *comparison(trainings, decodings)]
    lines += ["", "train tokens/s: non-pad source + target tokens (EOS/BOS included) per second "
              "of training, validation time left out, averaged over the log windows. JoeyNMT "
              "logs target tokens only; its rate is scaled by the train split's (source + "
              "target) / target token ratio. sentences/s: all evaluation sentences over the "
              "time to translate them (text in, text out, model loading left out), batches of "
              f"{DECODE_BATCH}; ours decodes with its key/value cache, JoeyNMT recomputes the "
              "prefix at every step. BLEU and chrF: sacrebleu defaults on detokenised output.",
              "", clock.line(), ""]
    return "\n".join(lines)


def check_runs(args: argparse.Namespace) -> None:
    """For --evaluate-only: the runs exist; the report takes their budget and settings."""
    needed = [OURS_RUN.metrics_file, OURS_RUN.checkpoint("last"),
              JOEY_RUN / "train.log", JOEY_RUN / "latest.ckpt"]
    missing = [str(path.relative_to(ROOT)) for path in needed if not path.exists()]
    if missing:
        raise BenchError(f"--evaluate-only needs trained runs; missing: {', '.join(missing)}; "
                         "run the bench without --evaluate-only first")
    trained = OURS_RUN.read_config().train
    args.minutes, args.precision = trained.max_minutes, trained.precision
    args.log_every, args.eval_every = trained.log_every, trained.eval_every


def comparison(trainings: list[Training], decodings: list[Decoding]) -> list[str]:
    """Ratios of speed and differences of score, ours first."""
    ours_rate, joey_rate = (t.tokens_per_second for t in trainings)
    lines = []
    if ours_rate and joey_rate:
        lines.append(f"- training: {ours_rate / joey_rate:.2f}× JoeyNMT's tokens/s")
    for beam in BEAMS:
        ours, joey = (d for d in decodings if d.beam == beam)
        search = "greedy" if beam == 1 else f"beam {beam}"
        speed = ours.sentences_per_second / max(joey.sentences_per_second, 1e-9)
        scores = ", ".join(
            f"{SET_LABELS[n]} BLEU {ours.scores[n][0] - joey.scores[n][0]:+.1f} chrF "
            f"{ours.scores[n][1] - joey.scores[n][1]:+.1f}" for n in ours.scores)
        lines.append(f"- {search}: {speed:.2f}× JoeyNMT's sentences/s; {scores}")
    return lines


def main() -> int:
    args = parse_args()
    if not PUBLIC.is_dir():
        print(f"skipped: {PUBLIC} is absent; this benchmark needs the team's public "
              "Hindi–English data in ../shared/data/public.")
        return 0
    clock = Clock()
    try:
        python = joeynmt_python()
        data = prepare_data(args.eval_sentences, args.sets)
        clock.lap("set-up and data")
        if args.evaluate_only:
            check_runs(args)
        else:
            train_ours(args, data)
            clock.lap("ours training")
        config = joeynmt_config(args, data, OURS_RUN.tokenizer_dir)
        if not args.evaluate_only:
            train_joeynmt(args, python, config)
            clock.lap("JoeyNMT training")
        trainings = [ours_training(args), joeynmt_training(source_target_ratio(data))]
        print("decoding the evaluation sets ...", flush=True)
        decodings = decode_ours(data, args.threads)
        clock.lap("ours decoding")
        decodings += decode_joeynmt(python, config, data, args.threads)
        clock.lap("JoeyNMT decoding")
    except (BenchError, TranslatorError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = render(args, data, trainings, decodings, clock)
    REPORT.write_text(report, encoding="utf-8")
    print(report)
    print(f"written to {REPORT.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
