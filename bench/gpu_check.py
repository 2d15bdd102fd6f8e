"""The GPU path in one command (issue 16): CUDA tests, Transformer-base training speed in bf16
eager and compiled, DDP over NCCL under torchrun, and FLORES decoding speed.

    python3 bench/gpu_check.py --prepare                   # here, once: data + 32k tokenizer
    python3 bench/gpu_check.py --out DIR                   # on the GPU: about 7 minutes
    python3 bench/gpu_check.py --out DIR --cpu-rehearsal   # here: the same steps, tiny, gloo
    python3 bench/gpu_check.py --out DIR --only train_eager decode --seconds 60 --budget 150

The steps, in order, are the table in check_steps() below, each one function; each is guarded
so that a failure is logged and the rest still run.

Everything it writes goes to --out (at most 8 files, no folders: what the device tool brings
back): results.md (the tables), results.json (every number), gpu_check.log (this log),
cuda_tests.log, torchrun.log, flores-dev-greedy.en, flores-dev-beam5.en. Run folders and
checkpoints go to --work (a temporary folder by default). Exit code 0 when every step passed.

Model FLOPs are the matmul FLOPs of the padded batches (bench/train_speed.py's formula, checked
there against torch.utils.flop_counter); the fraction of peak divides them, per second, by the
matmul rate measured in the same run. tokens/s counts non-pad source + target tokens.

The data (--prepare, from ../shared/data/public and the embedded corpus): train = the embedded
train split plus Tatoeba, TICO-19, NTREX-128, the Joshua Wikipedia set (4 references), UD PUD,
the XQuAD questions and contexts and the 30 WPT-05 pairs; dev = IITB dev (newsdev2014);
FLORES dev (997 sentences) only for decoding; and a 32,000-piece joint SentencePiece model
trained on that train split, so the GPU spends no time on it. The GPU image lacks `datasets`
and the Devanagari font package: this path imports neither (the rehearsal blocks both).
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

# The GPU machine runs this from a copy of the checkout with no `translator` installed, so the
# checkout (and bench/, for train_speed) go on the path before the imports below.
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(1, str(ROOT / "bench"))

import torch.distributed as dist  # noqa: E402
from torch import nn  # noqa: E402
from train_speed import training_flops  # noqa: E402

from translator.batching import Batch, TokenBatchSampler  # noqa: E402
from translator.build import Run, build_run  # noqa: E402
from translator.config import (  # noqa: E402
    Config,
    ModelConfig,
    SearchConfig,
    load_config,
    save_config,
)
from translator.corpus import read_split  # noqa: E402
from translator.data import load_splits  # noqa: E402
from translator.device import autocast  # noqa: E402
from translator.metrics import corpus_scores  # noqa: E402
from translator.run_dir import RunDir  # noqa: E402
from translator.tokenizer import Tokenizer  # noqa: E402
from translator.training import Trainer  # noqa: E402
from translator.translate import translate  # noqa: E402

Record = dict[str, Any]  # one step's numbers, as results.json keeps them
Step = Callable[["Check", Record], None]


def check_steps() -> list[tuple[str, Step]]:
    """The steps, in order: results.json's and results.md's step names, and what runs."""
    return [
        ("environment", check_environment),  # versions, the GPU; blocks what the GPU lacks
        ("data", check_data),  # the prepared train/dev/FLORES files and the tokenizer
        ("cuda_tests", run_cuda_tests),  # pytest -m cuda tests/test_cuda.py
        ("matmul_peak", measure_matmul_peak),  # the bf16 rate the training is measured by
        ("train_eager", train_eager),  # configs/iitb.yaml's model, bf16, timed steps
        ("train_compile", train_compiled),  # the same with train.compile=true
        ("torchrun_ddp", run_torchrun_ddp),  # the Trainer's loop under torchrun, DDP
        ("decode", decode_flores),  # greedy and beam 5 over FLORES dev
        ("profile", profile_eager),  # last: the profiler's bookkeeping takes a while
    ]


IITB = ROOT / "configs" / "iitb.yaml"
DATA = ROOT / "bench" / "results" / "gpu-check-data"
PUBLIC = [ROOT / "shared" / "data" / "public", ROOT.parent / "shared" / "data" / "public"]
TRAIN_SETS = ["tatoeba_manythings/train", "tico19/test", "ntrex128/test", "joshua_wiki/train4",
              "ud_pud/test", "xquad/questions", "xquad/contexts", "wpt05_align_dev/dev"]
DEV_SET, DECODE_SET = "iitb_wmt14/dev", "flores/dev"
TOKENIZER_VOCAB = 32_000  # configs/iitb.yaml's
NOT_ON_THE_GPU = ("datasets", "fontpkg_noto_sans_devanagari")  # packages the GPU image lacks
SWEEP_SECONDS = 15.0  # timed per --sweep-batch-tokens size
TARGETS = {"train_compile": 0.35, "train_eager": 0.20}  # of the bf16 matmul peak (issue 16)


# ---------------------------------------------------------------- the plan


@dataclass
class Plan:
    """What the steps do: the GPU check, or its CPU rehearsal."""

    rehearsal: bool
    device: str  # "cuda" or "cpu"
    backend: str  # what torchrun's process group must be: "nccl" or "gloo"
    model_overrides: list[str]  # on configs/iitb.yaml's model
    vocab_size: int  # SentencePiece pieces
    train_lines: int | None  # train pairs used (None: all)
    batch_tokens: int
    seconds: float  # timed training per run
    warmup_steps: dict[str, int]  # untimed steps before the timed window, per run
    matmul_size: int
    profile_steps: int
    ddp_steps: int
    ddp_eval_sentences: int  # dev sentences its validation translates
    decode_sentences: int | None  # FLORES dev sentences decoded (None: all 997)
    decode_seconds: float  # a search stops after the chunk that passes this
    timeout_s: int  # for each subprocess (the tests, torchrun)
    budget_s: float  # decoding shrinks to what is left of it
    extra: list[str] = field(default_factory=list)  # more config overrides, from the command


def make_plan(args: argparse.Namespace) -> Plan:
    """The GPU check's sizes, or the rehearsal's: a tiny model and seconds, not minutes."""
    if args.cpu_rehearsal:
        return Plan(rehearsal=True, device="cpu", backend="gloo",
                    model_overrides=["model.d_model=64", "model.heads=8", "model.layers=1",
                                     "model.d_ff=128", "model.max_positions=256",
                                     "model.attention_dropout=0.0"],  # the fused kernel on CPUs
                    vocab_size=1000, train_lines=4000, batch_tokens=args.batch_tokens or 1000,
                    seconds=args.seconds or 2.0, warmup_steps={"eager": 1, "compile": 2},
                    matmul_size=256, profile_steps=2, ddp_steps=10, ddp_eval_sentences=5,
                    decode_sentences=16, decode_seconds=15.0, timeout_s=300, budget_s=300.0,
                    extra=args.overrides)
    return Plan(rehearsal=False, device="cuda", backend="nccl", model_overrides=[],
                vocab_size=TOKENIZER_VOCAB, train_lines=None,
                batch_tokens=args.batch_tokens or 25_000, seconds=args.seconds or 90.0,
                warmup_steps={"eager": 3, "compile": 10}, matmul_size=8192, profile_steps=3,
                ddp_steps=50, ddp_eval_sentences=50, decode_sentences=None,
                decode_seconds=60.0, timeout_s=240, budget_s=args.budget or 420.0,
                extra=args.overrides)


@dataclass
class Check:
    """What the steps share: the plan, the folders, and what one step leaves for later ones."""

    plan: Plan
    report: Report
    out: Path  # what comes back from the device machine
    work: Path  # run folders and checkpoints
    data: Path  # the prepared folder; the data step swaps in the rehearsal's smaller copy
    env: dict[str, str]  # for the subprocesses (the tests, torchrun)
    sweep_batch_tokens: list[int]
    peak: float | None = None  # the measured bf16 matmul FLOP/s
    trained: Run | None = None  # the training run with the most steps, whose weights decode
    trained_steps: int = 0
    eager: tuple[Trainer, Iterator[Batch]] | None = None  # the eager run, to profile

    def say(self, message: str) -> None:
        self.report.log(message)

    def keep_trained(self, run: Run, record: Record) -> None:
        """Decode with ``run``'s weights if it trained more steps than the run kept so far (a
        compiled run that spent its window recompiling must not stand for the eager one)."""
        steps = record["steps"] + len(record["warmup_step_seconds"])
        if steps > self.trained_steps:
            self.trained, self.trained_steps = run, steps


# ---------------------------------------------------------------- the steps


def check_environment(check: Check, record: Record) -> None:
    """Records the versions, the CPUs and the GPU, and whether the packages the GPU image lacks
    are installed; fails without a GPU in the GPU check. The rehearsal blocks those packages,
    here and in the subprocesses."""
    describe_environment(record)
    if check.plan.device == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("no GPU is visible; use --cpu-rehearsal on a CPU")
    if check.plan.rehearsal:
        blocked = block_missing_packages(check.work)
        check.env["PYTHONPATH"] = os.pathsep.join([str(blocked), check.env["PYTHONPATH"]])
        record["blocked_for_the_rehearsal"] = list(NOT_ON_THE_GPU)


def check_data(check: Check, record: Record) -> None:
    """Checks (writing them when the public sets are here, or for the rehearsal) the prepared
    train/dev/FLORES files and the tokenizer; records their sizes. The rehearsal goes on with a
    small copy and a small tokenizer."""
    plan, data = check.plan, check.data
    if not (data / "train.en").is_file() and (public_dir() or plan.rehearsal):
        prepare_files(data, public_dir(), say=check.say)
    if not (data / "train.en").is_file():
        raise RuntimeError(f"no prepared data in {data}: run python3 bench/gpu_check.py "
                           "--prepare where ../shared/data/public is, and carry the folder")
    if plan.rehearsal:
        check.data = data = rehearsal_data(data, check.work, plan)
    elif not (data / "tokenizer" / "tokenizer.json").is_file():
        check.say("no prepared tokenizer: training it here (bench/gpu_check.py --prepare saves "
                  "this time)")
        prepare_tokenizer(data, plan, check.work, say=check.say)
    record.update(folder=str(data), train_pairs=len(file_lines(data / "train.en")),
                  dev_pairs=len(file_lines(data / "dev.en")),
                  flores_sentences=len(file_lines(data / "flores-dev.hi")),
                  vocab=Tokenizer.load(data / "tokenizer").source_vocab_size)
    record["summary"] = (f"{record['train_pairs']:,} train pairs, {record['dev_pairs']} dev, "
                         f"{record['flores_sentences']} FLORES; {record['vocab']:,} pieces")


def run_cuda_tests(check: Check, record: Record) -> None:
    """Runs the CUDA-marked tests (on the CPU in the rehearsal) into cuda_tests.log; records
    pytest's exit code and summary line. Fails when they fail, or when any was skipped on a
    GPU."""
    plan, log = check.plan, check.out / "cuda_tests.log"
    command = [sys.executable, "-m", "pytest", "-q", "-rs", "-m", "cuda", "-p",
               "no:cacheprovider", "tests/test_cuda.py"]
    env = {**check.env, "TRANSLATOR_CUDA_TESTS_ON_CPU": "1"} if plan.rehearsal else check.env
    returncode = run_logged(command, log, env, plan.timeout_s)
    summary = next((line.strip("= ") for line in reversed(file_lines(log)) if " in " in line
                    and ("passed" in line or "failed" in line or "error" in line)), "no summary")
    record.update(returncode=returncode, summary=summary)
    if returncode != 0:
        raise RuntimeError(f"pytest exited with {returncode}: {summary}")
    if "skipped" in summary and not plan.rehearsal:
        raise RuntimeError(f"CUDA tests were skipped: {summary}")


def measure_matmul_peak(check: Check, record: Record) -> None:
    """Measures the best bf16 FLOP/s of a size³ torch.matmul on random data (the divisor of
    the training's fraction of peak); records the size and TFLOP/s."""
    size, device = check.plan.matmul_size, torch.device(check.plan.device)
    a = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=device, dtype=torch.bfloat16)
    repeats = 20 if device.type == "cuda" else 3
    for _ in range(3):  # warm-up: kernel selection and clocks
        torch.matmul(a, b)
    best = math.inf
    for _ in range(5):
        synchronize()
        started = time.perf_counter()
        for _ in range(repeats):
            torch.matmul(a, b)
        synchronize()
        best = min(best, (time.perf_counter() - started) / repeats)
    check.peak = flops = 2 * size**3 / best
    record.update(size=size, tflops=round(flops / 1e12, 6),
                  summary=f"{flops / 1e12:,.1f} TFLOP/s ({size}³ bf16, best of 5 × {repeats})")


def train_eager(check: Check, record: Record) -> None:
    """Times configs/iitb.yaml's model in bf16 autocast, eager: warm-up steps, then
    plan.seconds of Trainer.train_step; records what timed_training does. Its trainer stays
    for the profile."""
    plan = check.plan
    baseline = gpu_memory_baseline()
    run = new_run(plan, check.data, check.work, "eager", False)
    trainer = Trainer(run)
    batches = timed_training("eager", run, trainer, plan.warmup_steps["eager"], plan.seconds,
                             check.peak, baseline, record, check.say)
    check.eager = trainer, batches
    check.keep_trained(run, record)


def train_compiled(check: Check, record: Record) -> None:
    """The same with train.compile=true (inductor; aot_eager in the rehearsal), its warm-up
    steps (the compilation) timed apart; records the backend, what timed_training does, and
    one more timed window per --sweep-batch-tokens size under "sweep"."""
    plan = check.plan
    baseline = gpu_memory_baseline()
    run = new_run(plan, check.data, check.work, "compile", True)
    trainer = compiled_trainer(run, plan.rehearsal)
    record["backend"] = "aot_eager (rehearsal)" if plan.rehearsal else "inductor"
    timed_training("compile", run, trainer, plan.warmup_steps["compile"], plan.seconds,
                   check.peak, baseline, record, check.say)
    check.keep_trained(run, record)
    record["sweep"] = []
    for batch_tokens in check.sweep_batch_tokens:  # the same compiled model, other batches
        run.sampler = TokenBatchSampler(run.train_data.lengths(), batch_tokens,
                                        run.config.train.seed, shuffle=True)
        record["sweep"].append({})
        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
        timed_training(f"compile, {batch_tokens:,} tokens", run, trainer, 3,
                       min(SWEEP_SECONDS, plan.seconds), check.peak, baseline,
                       record["sweep"][-1], check.say)


def run_torchrun_ddp(check: Check, record: Record) -> None:
    """Runs the Trainer's own loop (validation, checkpoints) under torchrun --nproc_per_node=1,
    in a process of its own, into torchrun.log; records what the worker found (backend,
    DDP-wrapped, steps, losses). Fails when any of those is not what the plan expects."""
    plan = check.plan
    spec = write_ddp_spec(plan, check.data, check.work)
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               "--nproc_per_node=1", str(Path(__file__).resolve()), "--ddp-worker", str(spec)]
    env = {**check.env, "OMP_NUM_THREADS": "1"} if plan.rehearsal else check.env
    returncode = run_logged(command, check.out / "torchrun.log", env, plan.timeout_s,
                            echo_command=True)
    if returncode != 0:
        raise RuntimeError(f"torchrun exited with {returncode}; see torchrun.log")
    found = json.loads((check.work / "ddp-result.json").read_text())
    record.update(found)
    record["summary"] = (f"{found['backend']}, DDP {found['ddp']}, {found['steps']} steps in "
                         f"{found['fit_seconds']:.1f} s, loss {found['loss_first']:.3f} → "
                         f"{found['loss_last']:.3f}")
    problems = ddp_problems(found, plan)
    if problems:
        raise RuntimeError("; ".join(problems))


def decode_flores(check: Check, record: Record) -> None:
    """Greedy and beam 5 over FLORES dev with the latest trained run's weights, in its
    precision, each search cut short when time runs out; writes flores-dev-{greedy,beam5}.en
    and records each search's sentences, seconds, sentences/s, BLEU and chrF."""
    plan, run = check.plan, check.trained
    if run is None:
        raise RuntimeError("no trained weights (both training steps failed)")
    record["weights"] = (f"the {run.run_dir.path.name} run's weights after "
                         f"{check.trained_steps:,} steps ({plan.seconds:g} s timed), "
                         f"{run.precision}")
    sources = file_lines(check.data / "flores-dev.hi")[: plan.decode_sentences]
    references = file_lines(check.data / "flores-dev.en")[: plan.decode_sentences]
    cap = max(5.0, min(plan.decode_seconds, (plan.budget_s - check.report.elapsed) / 2))
    record["searches"] = []
    for beam, label in ((1, "greedy"), (5, "beam5")):
        hypotheses, seconds = timed_search(run, sources, beam, cap)
        scores = corpus_scores(hypotheses, references[: len(hypotheses)],
                               metrics=("bleu", "chrf"))
        (check.out / f"flores-dev-{label}.en").write_text(
            "".join(f"{h}\n" for h in hypotheses), encoding="utf-8")
        search = {"search": "greedy" if beam == 1 else f"beam {beam}",
                  "sentences": len(hypotheses), "seconds": round(seconds, 2),
                  "sentences_per_second": round(len(hypotheses) / seconds, 2),
                  "bleu": round(scores["bleu"], 2), "chrf": round(scores["chrf"], 2)}
        record["searches"].append(search)
        check.say(f"decode {search['search']}: {search['sentences']} sentences in "
                  f"{seconds:.1f} s, {search['sentences_per_second']:.1f}/s, BLEU "
                  f"{search['bleu']:.1f} chrF {search['chrf']:.1f}")
    record["summary"] = "; ".join(f"{s['search']} {s['sentences_per_second']:,.1f} sentences/s"
                                  f" ({s['sentences']})" for s in record["searches"])


def profile_eager(check: Check, record: Record) -> None:
    """A few more of the eager run's steps under torch.profiler (skipped when the budget is
    spent); records the shares of their wall time in the optimiser step and attention (device
    time of those ops on a GPU, CPU time on a CPU) and in fetching batches, and the top ops."""
    if check.eager is None:
        raise RuntimeError("no eager run to profile")
    if check.report.elapsed > check.plan.budget_s - 20:
        record.update(status="skipped", summary="no time left in the budget")
        return
    trainer, batches = check.eager
    cuda = torch.cuda.is_available()
    fetching = [0.0]  # host seconds spent in next(batches)
    source = timed_fetches(batches, fetching)
    trainer.train_step(source)  # the profiler's own first-step cost stays out
    fetching[0] = 0.0
    events, wall = profiled_steps(trainer, source, check.plan.profile_steps, cuda)

    def share(pattern: str) -> float:
        return sum(op_micros(e, cuda) for e in events if re.search(pattern, e.key)) / 1e6 / wall

    record.update(steps=check.plan.profile_steps, wall_seconds=round(wall, 3),
                  basis="device time of the ops" if cuda else "CPU time of the ops",
                  shares={"optimiser": round(share(r"^Optimizer\.step#"), 4),
                          "attention": round(share(r"^aten::scaled_dot_product_attention$|"
                                                   r"evaluate_function: ScaledDotProduct"), 4),
                          "data": round(fetching[0] / wall, 4)})
    top = sorted(events, key=lambda e: op_micros(e, cuda), reverse=True)
    record["top_ops"] = [[e.key, round(op_micros(e, cuda) / 1e3, 1)] for e in top[:12]]
    record["summary"] = ", ".join(f"{k} {v:.1%}" for k, v in record["shares"].items())


# ---------------------------------------------------------------- what the steps use


def describe_environment(record: Record) -> None:
    """Versions of Python, torch, CUDA and the packages; the GPU's properties (or the CPU)."""
    import importlib.util

    import sacrebleu
    import sentencepiece

    record.update(python=platform.python_version(), torch=torch.__version__,
                  cuda=torch.version.cuda, sentencepiece=sentencepiece.__version__,
                  sacrebleu=sacrebleu.__version__, cpus=os.cpu_count())
    for name in NOT_ON_THE_GPU:
        record[f"{name}_installed"] = importlib.util.find_spec(name) is not None
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        record.update(device_name=props.name, capability=f"{props.major}.{props.minor}",
                      memory_gib=round(props.total_memory / 2**30, 1),
                      bf16_supported=torch.cuda.is_bf16_supported(),
                      nccl=str(torch.cuda.nccl.version()),
                      cudnn=torch.backends.cudnn.version())
    else:
        record["device_name"] = f"CPU ({platform.processor() or platform.machine()})"
    record["summary"] = (f"{record['device_name']}; torch {record['torch']}, CUDA "
                         f"{record['cuda']}, Python {record['python']}")


def block_missing_packages(work: Path) -> Path:
    """Stand-ins that refuse to import the packages the GPU image lacks (for the rehearsal)."""
    blocked = work / "not-on-the-gpu"
    for name in NOT_ON_THE_GPU:
        (blocked / name).mkdir(parents=True, exist_ok=True)
        (blocked / name / "__init__.py").write_text(
            f"raise ImportError('{name} is not installed on the GPU image "
            "(bench/gpu_check.py --cpu-rehearsal blocks it)')\n")
    sys.path.insert(0, str(blocked))
    return blocked


def run_logged(command: list[str], log_path: Path, env: dict[str, str], timeout_s: int,
               echo_command: bool = False) -> int:
    """Runs ``command`` from the checkout with its output (and, if asked, the command line
    first) in ``log_path``; returns its exit code. A timeout raises, failing the step."""
    with log_path.open("w", encoding="utf-8") as log:
        if echo_command:
            log.write(" ".join(command) + "\n")
            log.flush()
        result = subprocess.run(command, cwd=ROOT, env=env, stdout=log,
                                stderr=subprocess.STDOUT, timeout=timeout_s)
    return result.returncode


def gpu_memory_baseline() -> int:
    """What is allocated now, with the peak counter reset to it."""
    if not torch.cuda.is_available():
        return 0
    torch.cuda.reset_peak_memory_stats()
    return torch.cuda.memory_allocated()


def synchronize() -> None:
    """Waits for the GPU's queued work, so that wall-clock times include it."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def compiled_trainer(run: Run, rehearsal: bool) -> Trainer:
    """The Trainer of a train.compile=true run; in the rehearsal, dynamo + AOTAutograd as on
    the GPU, without minutes of g++ (torch.compile's backend is aot_eager while it builds)."""
    if not rehearsal:
        return Trainer(run)
    compile_function = torch.compile
    torch.compile = functools.partial(compile_function, backend="aot_eager")
    try:
        return Trainer(run)
    finally:
        torch.compile = compile_function


def counted(batches: Iterator[Batch], config: ModelConfig, pad_id: int,
            seen: list[dict[str, int]]) -> Iterator[Batch]:
    """The trainer's batches, each one's shape, tokens and matmul FLOPs noted in ``seen``."""
    for batch in batches:
        seen.append({"flops": training_flops(config, batch),
                     "sentences": batch.source.size(0),
                     "padded": batch.source.numel() + batch.target_input.numel(),
                     "tokens": batch.num_target_tokens + int((batch.source != pad_id).sum())})
        yield batch


def timed_training(name: str, run: Run, trainer: Trainer, warmup_steps: int, seconds: float,
                   peak: float | None, baseline: int, record: Record,
                   say: Callable[[str], None]) -> Iterator[Batch]:
    """Warm-up steps, then ``seconds`` of timed steps; records the model, tokens/s, FLOP/s,
    step times, losses, and the peak GPU memory above ``baseline`` (what was allocated before
    the run was built). Returns the batches, to go on with."""
    seen: list[dict[str, int]] = []
    batches = counted(trainer.batches(), run.config.model, run.tokenizer.pad_id, seen)
    record["model"] = describe_model(run)
    warm_up(name, trainer, batches, warmup_steps, record, say)
    first = len(seen)  # the batches of the timed window start here
    losses, times, seconds = timed_steps(name, trainer, batches, seconds, say)
    record["batch_tokens"] = run.sampler.max_tokens
    record.update(training_numbers(seen[first:], losses, times, seconds, peak))
    if torch.cuda.is_available():
        record["peak_memory_gib"] = round((torch.cuda.max_memory_allocated() - baseline)
                                          / 2**30, 2)
    if run.config.train.compile:
        record_dynamo_stats(record)
    fraction = f", {record['fraction_of_peak']:.1%} of peak" if peak else ""
    record["summary"] = (f"{record['tokens_per_second']:,} tokens/s, "
                         f"{record['model_tflops']:,.2f} TFLOP/s{fraction}, {len(times)} steps")
    if not record["all_losses_finite"]:
        raise RuntimeError(f"a loss was not finite: {losses}")
    return batches


def describe_model(run: Run) -> str:
    """The run's model in a line: layers, widths, vocabulary, parameters."""
    config = run.config.model
    return (f"{config.layers}+{config.num_decoder_layers} layers, d_model "
            f"{config.d_model}, {config.heads} heads, d_ff {config.d_ff}, vocab "
            f"{config.target_vocab_size:,}, {run.model.num_parameters():,} parameters")


def warm_up(name: str, trainer: Trainer, batches: Iterator[Batch], steps: int, record: Record,
            say: Callable[[str], None]) -> None:
    """Untimed steps (compilation, allocator growth); records their seconds, in all and each."""
    started = time.perf_counter()
    warmup = []
    for _ in range(steps):
        step_started = time.perf_counter()
        trainer.train_step(batches)
        warmup.append(time.perf_counter() - step_started)
    synchronize()
    record["warmup_seconds"] = round(time.perf_counter() - started, 2)
    record["warmup_step_seconds"] = [round(s, 2) for s in warmup]
    say(f"{name}: warm-up {record['warmup_seconds']:.1f} s "
        f"({', '.join(f'{s:.2f}' for s in warmup)} s per step)")


def timed_steps(name: str, trainer: Trainer, batches: Iterator[Batch], seconds: float,
                say: Callable[[str], None]) -> tuple[list[float], list[float], float]:
    """Training steps until ``seconds`` have passed: their losses, their times, and the
    window's wall time (the GPU synchronised)."""
    losses, times = [], []
    started = time.perf_counter()
    while time.perf_counter() - started < seconds:
        step_started = time.perf_counter()
        loss, _ = trainer.train_step(batches)
        times.append(time.perf_counter() - step_started)
        losses.append(loss)
        if len(times) % 100 == 0:
            say(f"{name}: {len(times)} steps, loss {loss:.3f}")
    synchronize()
    return losses, times, time.perf_counter() - started


def training_numbers(window: list[dict[str, int]], losses: list[float], times: list[float],
                     seconds: float, peak: float | None) -> Record:
    """The timed window's rates, step times, batch shapes and losses, as results.json keeps
    them."""
    tokens = sum(b["tokens"] for b in window)
    flops = sum(b["flops"] for b in window)
    median = statistics.median(times)
    return dict(
        steps=len(times), timed_seconds=round(seconds, 2), tokens=tokens,
        tokens_per_second=round(tokens / seconds), model_tflops=round(flops / seconds / 1e12, 4),
        fraction_of_peak=round(flops / seconds / peak, 4) if peak else None,
        ms_per_step_median=round(1000 * median, 2), ms_per_step_max=round(1000 * max(times), 1),
        slow_steps=sum(t > 3 * median for t in times),
        sentences_per_batch=round(statistics.mean(b["sentences"] for b in window), 1),
        padding=round(1 - tokens / sum(b["padded"] for b in window), 4),
        loss_first=round(losses[0], 4), loss_last=round(losses[-1], 4),
        all_losses_finite=all(math.isfinite(x) for x in losses))


def record_dynamo_stats(record: Record) -> None:
    """torch._dynamo's counters (frames compiled, graph breaks), when that private API is
    there."""
    try:
        from torch._dynamo.utils import counters

        record["dynamo_stats"] = {k: int(v) for k, v in counters["stats"].items()}
    except Exception:  # noqa: BLE001 (a private API: report it when it is there)
        pass


def write_ddp_spec(plan: Plan, data: Path, work: Path) -> Path:
    """The torchrun worker's run folder (with the prepared tokenizer), config and spec file:
    plan.ddp_steps steps, one validation at the end, checkpoints kept."""
    run_dir = fresh_run_dir(data, work, "ddp")
    config = check_config(plan, data, work, "ddp", False, f"train.max_steps={plan.ddp_steps}",
                          f"train.eval_every={plan.ddp_steps}", "train.log_every=10",
                          f"train.eval_sentences={plan.ddp_eval_sentences}",
                          "train.keep_best=1")
    save_config(config, work / "ddp-config.yaml")
    spec = {"config": str(work / "ddp-config.yaml"), "run_dir": str(run_dir.path),
            "result": str(work / "ddp-result.json")}
    (work / "ddp-spec.json").write_text(json.dumps(spec))
    return work / "ddp-spec.json"


def ddp_problems(found: Record, plan: Plan) -> list[str]:
    """What in the torchrun worker's result is not what the plan expects."""
    problems = []
    if found["backend"] != plan.backend:
        problems.append(f"backend {found['backend']}, not {plan.backend}")
    if not found["ddp"]:
        problems.append("the model was not wrapped in DistributedDataParallel")
    if found["steps"] != plan.ddp_steps:
        problems.append(f"{found['steps']} steps, not {plan.ddp_steps}")
    if not all(math.isfinite(x) for x in found["losses"]):
        problems.append(f"losses {found['losses']}")
    return problems


def ddp_worker(spec_file: str) -> int:
    """One torchrun process: build_run (which starts the process group), Trainer.fit, and
    what the parent checks written to the spec's result file."""
    spec = json.loads(Path(spec_file).read_text())
    run = build_run(load_config(spec["config"]), RunDir(spec["run_dir"]), resume=True)
    backend = dist.get_backend() if dist.is_initialized() else None
    trainer = Trainer(run)
    wrapped = isinstance(trainer.train_model, nn.parallel.DistributedDataParallel)
    started = time.perf_counter()
    try:
        code = trainer.fit()
        seconds = time.perf_counter() - started
        if run.main:
            result = {"backend": backend, "world_size": run.world_size,
                      "device": str(run.device), "ddp": wrapped, "exit_code": code,
                      **fit_numbers(run, trainer.step, seconds)}
            Path(spec["result"]).write_text(json.dumps(result))
    finally:
        trainer.close()
    return code


def fit_numbers(run: Run, steps: int, seconds: float) -> Record:
    """Trainer.fit's steps, speed, losses (from metrics.jsonl) and checkpoints."""
    records = [json.loads(line) for line in run.run_dir.metrics_file.read_text().splitlines()]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    dev = [r for r in records if r["kind"] == "validation"]
    return {"steps": steps, "fit_seconds": round(seconds, 2),
            "steps_per_second": round(steps / seconds, 3),
            "losses": losses, "loss_first": losses[0], "loss_last": losses[-1],
            "dev_loss": dev[-1]["dev_loss"] if dev else None,
            "checkpoints": sorted(p.name for p in run.run_dir.checkpoints())}


def timed_search(run: Run, sources: list[str], beam: int,
                 cap: float) -> tuple[list[str], float]:
    """Translations of ``sources`` in chunks of 256 (batches of 64), stopping after the chunk
    that passes ``cap`` seconds; with the seconds they took."""
    hypotheses: list[str] = []
    synchronize()
    started = time.perf_counter()
    for start in range(0, len(sources), 256):
        with autocast(run.device, run.precision):
            results = translate(run.model, run.tokenizer, sources[start : start + 256],
                                SearchConfig(beam_size=beam), batch_size=64,
                                need_attention=False)
        hypotheses += [result.text for result in results]
        if time.perf_counter() - started > cap:
            break
    synchronize()
    return hypotheses, time.perf_counter() - started


def timed_fetches(source: Iterator[Batch], seconds: list[float]) -> Iterator[Batch]:
    """``source``'s batches, the time spent fetching them added to ``seconds[0]``."""
    while True:
        started = time.perf_counter()
        batch = next(source)
        seconds[0] += time.perf_counter() - started
        yield batch


def profiled_steps(trainer: Trainer, batches: Iterator[Batch], steps: int,
                   cuda: bool) -> tuple[Any, float]:
    """``steps`` training steps under torch.profiler: its per-op averages and their wall time."""
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as profiler:
        synchronize()
        started = time.perf_counter()
        for _ in range(steps):
            trainer.train_step(batches)
        synchronize()
        wall = time.perf_counter() - started
    return profiler.key_averages(), wall


def op_micros(event: Any, cuda: bool) -> float:
    """A profiled op's total time in µs: device time on a GPU, CPU time on a CPU."""
    if not cuda:
        return event.cpu_time_total
    return getattr(event, "device_time_total", None) or getattr(event, "cuda_time_total", 0)


# ---------------------------------------------------------------- the data and the runs


def public_dir() -> Path | None:
    """../shared/data/public (or shared/data/public in the checkout), when it is there."""
    return next((path for path in PUBLIC if path.is_dir()), None)


def file_lines(path: Path) -> list[str]:
    """A text file's lines, split on \\n only (the corpora hold other line separators).
    Unlike translator.lines.read_lines it keeps a '\\r' before the '\\n', as this check
    always has."""
    lines = path.read_bytes().decode("utf-8").split("\n")
    return lines[:-1] if lines and lines[-1] == "" else lines


def write_pair(prefix: Path, hindi: list[str], english: list[str]) -> None:
    """PREFIX.hi and PREFIX.en, line-aligned."""
    if len(hindi) != len(english):
        raise ValueError(f"{prefix}: {len(hindi)} Hindi lines against {len(english)} English")
    for suffix, lines in ((".hi", hindi), (".en", english)):
        prefix.with_name(prefix.name + suffix).write_text("".join(f"{line}\n" for line in lines),
                                                          encoding="utf-8")


def prepare_files(data: Path, public: Path | None,
                  say: Callable[[str], None] = print) -> None:
    """Text files (PREFIX.hi + PREFIX.en) of train, dev and FLORES dev in ``data``. Without
    the public sets (``public`` None, as in CI), the embedded corpus alone, its test split
    standing in for FLORES: enough for the rehearsal, not for the GPU check."""
    data.mkdir(parents=True, exist_ok=True)
    embedded = {split: read_split(split) for split in ("train", "dev", "test")}
    hindi = [h for h, _, _ in embedded["train"]]
    english = [e for _, e, _ in embedded["train"]]
    for name in TRAIN_SETS if public else []:
        hindi += file_lines(public / f"{name}.hi")
        english += file_lines(public / f"{name}.en")
    write_pair(data / "train", hindi, english)
    for target, name, split in (("dev", DEV_SET, "dev"), ("flores-dev", DECODE_SET, "test")):
        if public:
            write_pair(data / target, file_lines(public / f"{name}.hi"),
                       file_lines(public / f"{name}.en"))
        else:
            write_pair(data / target, [h for h, _, _ in embedded[split]],
                       [e for _, e, _ in embedded[split]])
    sources = (f"train: the embedded train split, {', '.join(TRAIN_SETS)}\ndev: {DEV_SET}\n"
               f"decoding: {DECODE_SET}\nfrom {public}" if public else
               "train, dev: the embedded corpus's; decoding: its test split (no public sets)")
    (data / "SOURCES.txt").write_text(f"{sources}\nwritten by bench/gpu_check.py\n")
    say(f"data: {len(hindi):,} train pairs written to {data}")


def prepare_tokenizer(data: Path, plan: Plan, work: Path,
                      say: Callable[[str], None] = print) -> None:
    """data/tokenizer: the joint SentencePiece model of the train split as training loads it
    (normalised and filtered), with plan.vocab_size pieces."""
    started = time.time()
    config = check_config(plan, data, work, "tokenizer", compile_model=False)
    train = load_splits(config.data).splits["train"]
    tokenizer = Tokenizer.train(config.tokenizer, [p.source for p in train],
                                [p.target for p in train], data / "tokenizer")
    say(f"tokenizer: {tokenizer.source_vocab_size:,} pieces from {len(train):,} pairs in "
        f"{time.time() - started:.0f} s")


def rehearsal_data(data: Path, work: Path, plan: Plan) -> Path:
    """The first plan.train_lines train pairs, 100 dev pairs and plan.decode_sentences FLORES
    sentences in work/data, with a small tokenizer trained on them."""
    small = work / "data"
    small.mkdir(parents=True, exist_ok=True)
    for prefix, count in (("train", plan.train_lines), ("dev", 100),
                          ("flores-dev", plan.decode_sentences)):
        write_pair(small / prefix, file_lines(data / f"{prefix}.hi")[:count],
                   file_lines(data / f"{prefix}.en")[:count])
    prepare_tokenizer(small, plan, work)
    return small


def check_config(plan: Plan, data: Path, work: Path, name: str, compile_model: bool,
                 *more: str) -> Config:
    """configs/iitb.yaml on the prepared local files, bf16, no test split, no heatmaps."""
    return load_config(IITB, [
        "data.source=files", f"data.train_path={data / 'train'}",
        f"data.dev_path={data / 'dev'}", "data.test_path=null",
        f"tokenizer.vocab_size={plan.vocab_size}", *plan.model_overrides,
        f"train.device={plan.device}", "train.precision=bf16", f"train.compile={compile_model}",
        f"train.batch_tokens={plan.batch_tokens}", "train.accumulate=1",
        f"train.output_dir={work}", f"train.run_name={name}", "train.heatmaps=false",
        "train.warmup_steps=300",  # so that 90 s of training gives weights worth decoding
        *(["train.threads=1"] if plan.rehearsal else []), *plan.extra, *more])


def fresh_run_dir(data: Path, work: Path, name: str) -> RunDir:
    """An empty run folder work/name holding the prepared tokenizer (so no run trains one)."""
    run_dir = RunDir(work / name)
    if run_dir.path.exists():
        shutil.rmtree(run_dir.path)
    shutil.copytree(data / "tokenizer", run_dir.tokenizer_dir)
    return run_dir


def new_run(plan: Plan, data: Path, work: Path, name: str, compile_model: bool,
            *more: str) -> Run:
    """build_run with the prepared tokenizer (resume=True reuses a run's tokenizer)."""
    run_dir = fresh_run_dir(data, work, name)
    return build_run(check_config(plan, data, work, name, compile_model, *more), run_dir,
                     resume=True)


# ---------------------------------------------------------------- the report


class Report:
    """The log (printed and written to gpu_check.log) and the results, rewritten after every
    step so that a run cut short still leaves every finished step's numbers."""

    def __init__(self, out: Path, plan: Plan, command: str) -> None:
        self.out, self.plan, self.started = out, plan, time.time()
        self.log_file = (out / "gpu_check.log").open("a", encoding="utf-8")
        self.results: dict[str, Any] = {
            "command": command, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
            "plan": asdict(plan), "steps": {}}

    def log(self, message: str) -> None:
        line = f"[{time.time() - self.started:6.1f}s] {message}"
        print(line, flush=True)
        self.log_file.write(line + "\n")
        self.log_file.flush()

    @property
    def elapsed(self) -> float:
        return time.time() - self.started

    @contextmanager
    def step(self, name: str) -> Iterator[Record]:
        """Run one step: its numbers go into the dict it yields; an exception is logged with
        its traceback and marks the step failed, and the next step runs."""
        record: Record = {"status": "running"}
        self.results["steps"][name] = record
        self.log(f"== {name}")
        started = time.time()
        try:
            yield record
            if record["status"] == "running":
                record["status"] = "ok"
        except Exception as error:  # noqa: BLE001 (one step's failure must not end the run)
            record["status"] = "failed"
            record["error"] = f"{type(error).__name__}: {error}"
            self.log_file.write(traceback.format_exc())
            self.log(f"{name} FAILED: {record['error']}")
        finally:
            record["seconds"] = round(time.time() - started, 1)
            self.log(f"{name}: {record['status']} in {record['seconds']:.1f} s")
            if torch.cuda.is_available():  # the next step's peak memory starts from here
                gc.collect()
                torch.cuda.empty_cache()
            self.write()

    def write(self) -> None:
        self.results["total_seconds"] = round(self.elapsed, 1)
        (self.out / "results.json").write_text(json.dumps(self.results, indent=2) + "\n")
        (self.out / "results.md").write_text(results_table(self.results), encoding="utf-8")

    def close(self) -> None:
        self.write()
        self.log_file.close()


# ---------------------------------------------------------------- results.md


def results_table(results: dict[str, Any]) -> str:
    """results.md: what ran, then one table per kind of number."""
    steps = results["steps"]
    lines = (summary_lines(results) + training_lines(results) + profile_lines(steps)
             + ddp_lines(steps) + decode_lines(steps))
    return "\n".join(lines) + "\n"


def markdown_table(header: list[str], align: str, rows: list[list[str]]) -> list[str]:
    """A Markdown table's lines; ``align`` has an l (left) or r (right) per column."""
    rule = ["---:" if a == "r" else "---" for a in align]
    return ["| " + " | ".join(cells) + " |" for cells in (header, rule, *rows)]


def cell(record: Record, key: str, form: str = "{}") -> str:
    """record[key] in a table cell: numbers formatted with ``form``, a missing one empty."""
    value = record.get(key)
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return form.format(value)
    return str(value)


def summary_lines(results: dict[str, Any]) -> list[str]:
    """The title (the GPU, torch, CUDA), the command and time, and each step's status."""
    steps = results["steps"]
    env = steps.get("environment", {})
    title = (f"# GPU check: {env.get('device_name', '?')}, torch {env.get('torch', '?')}, "
             f"CUDA {env.get('cuda', '-')}")
    when = (f"{results['date']}; `{results['command']}`; "
            f"{results.get('total_seconds', 0):.0f} s in all"
            + ("; **CPU rehearsal** (tiny model, gloo)" if results["plan"]["rehearsal"] else ""))
    rows = [[name, record["status"], cell(record, "seconds", "{:.0f}"),
             record.get("summary") or record.get("error", "")] for name, record in steps.items()]
    return [title, "", when, "",
            *markdown_table(["step", "status", "seconds", "what it found"], "llrl", rows)]


def training_lines(results: dict[str, Any]) -> list[str]:
    """## Training: the eager and compiled runs (and any sweep) against the matmul peak."""
    steps = results["steps"]
    runs = [(name.removeprefix("train_"), steps[name], TARGETS[name])
            for name in ("train_eager", "train_compile")
            if "tokens_per_second" in steps.get(name, {})]
    runs += [(f"compile, {r['batch_tokens']:,} tokens", r, TARGETS["train_compile"])
             for r in steps.get("train_compile", {}).get("sweep", []) if "tokens_per_second" in r]
    if not runs:
        return []
    model = runs[0][1].get("model", "")
    peak = steps.get("matmul_peak", {}).get("tflops")
    header = ["run", "timed steps", "tokens/s", "ms/step (median, max)", "model TFLOP/s",
              "of matmul peak", "target", "peak memory GiB", "warm-up s", "loss first → last"]
    return ["", f"## Training: {model}; bf16 autocast; {results['plan']['batch_tokens']:,}"
            "-token batches", "",
            f"matmul peak measured in this run: {peak:,.1f} TFLOP/s"
            if peak is not None else "matmul peak: not measured", "",
            *markdown_table(header, "lrrrrrlrrl",
                            [training_row(*run) for run in runs])]


def training_row(name: str, record: Record, target: float) -> list[str]:
    """One training run's cells, with ✔ or ✘ against its target share of the peak."""
    fraction = record.get("fraction_of_peak")
    verdict = "" if fraction is None else ("✔" if fraction >= target else "✘")
    return [name, f"{record['steps']:,}", f"{record['tokens_per_second']:,.0f}",
            f"{record['ms_per_step_median']:,.1f}, {record['ms_per_step_max']:,.0f}",
            f"{record['model_tflops']:,.2f}", cell(record, "fraction_of_peak", "{:.1%}"),
            f"≥ {target:.0%} {verdict}", cell(record, "peak_memory_gib", "{:.1f}"),
            f"{record['warmup_seconds']:.1f}",
            f"{record['loss_first']:.3f} → {record['loss_last']:.3f}"]


def profile_lines(steps: dict[str, Record]) -> list[str]:
    """The profile's shares, in a sentence."""
    profile = steps.get("profile", {})
    if "shares" not in profile:
        return []
    shares = ", ".join(f"{k} {v:.1%}" for k, v in profile["shares"].items())
    return ["", f"Profile of {profile['steps']} eager steps ({profile['basis']}): {shares}."]


def ddp_lines(steps: dict[str, Record]) -> list[str]:
    """## torchrun: the DDP run's backend, steps, speed and losses."""
    ddp = steps.get("torchrun_ddp", {})
    if "steps" not in ddp:
        return []
    header = ["backend", "DDP-wrapped", "steps", "seconds (fit)", "steps/s",
              "loss first → last", "dev loss"]
    row = [str(ddp["backend"]), str(ddp["ddp"]), str(ddp["steps"]), f"{ddp['fit_seconds']:.1f}",
           f"{ddp['steps_per_second']:.2f}",
           f"{ddp['loss_first']:.3f} → {ddp['loss_last']:.3f}", cell(ddp, "dev_loss", "{:.3f}")]
    return ["", "## torchrun --nproc_per_node=1", "", *markdown_table(header, "llrrrlr", [row])]


def decode_lines(steps: dict[str, Record]) -> list[str]:
    """## Decoding FLORES: each search's speed and scores."""
    decode = steps.get("decode", {})
    if not decode.get("searches"):
        return []
    header = ["search", "sentences", "seconds", "sentences/s", "BLEU", "chrF"]
    rows = [[s["search"], str(s["sentences"]), f"{s['seconds']:.1f}",
             f"{s['sentences_per_second']:.1f}", f"{s['bleu']:.1f}", f"{s['chrf']:.1f}"]
            for s in decode["searches"]]
    return ["", f"## Decoding FLORES dev ({decode.get('weights', '')})", "",
            *markdown_table(header, "lrrrrr", rows)]


# ---------------------------------------------------------------- the command


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="folder for every result and log (created)")
    parser.add_argument("--cpu-rehearsal", action="store_true",
                        help="the same steps on the CPU: tiny model, short times, gloo")
    parser.add_argument("--prepare", action="store_true",
                        help="only write --data (train/dev/FLORES files and the 32k tokenizer)")
    parser.add_argument("--data", type=Path, default=DATA, help=f"default: {DATA}")
    parser.add_argument("--work", type=Path, default=None,
                        help="run folders and checkpoints (default: a temporary folder)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="timed training per run (default 90; rehearsal 3)")
    parser.add_argument("--batch-tokens", type=int, default=None,
                        help="padded tokens per batch (default 25000; rehearsal 2000)")
    parser.add_argument("--sweep-batch-tokens", type=int, nargs="+", default=[], metavar="N",
                        help=f"after the compiled run, {SWEEP_SECONDS:g} s more at each of "
                        "these batch sizes (same model; about 20 s each)")
    parser.add_argument("--only", nargs="+", default=None, metavar="STEP",
                        choices=[name for name, _ in check_steps()],
                        help="run only these steps (environment and data always run); the "
                        "others are recorded as not run")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds the whole check may take; decoding and the profile "
                        "shrink to fit (default 420)")
    parser.add_argument("--ddp-worker", metavar="SPEC", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="more config overrides (section.key=value)")
    return parser.parse_args(argv)


def prepare(args: argparse.Namespace) -> int:
    """--prepare: the data folder and its tokenizer, from the public sets."""
    public = public_dir()
    if public is None:
        print(f"error: no public data in {' or '.join(map(str, PUBLIC))}", file=sys.stderr)
        return 2
    prepare_files(args.data, public)
    prepare_tokenizer(args.data, make_plan(args), Path(tempfile.mkdtemp()))
    return 0


def start_check(args: argparse.Namespace) -> Check:
    """The plan, the folders, the report (its log opened) and the subprocesses' environment."""
    plan = make_plan(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = args.work or Path(tempfile.mkdtemp(prefix="gpu-check-"))
    work.mkdir(parents=True, exist_ok=True)
    report = Report(out, plan, " ".join(["python3", "bench/gpu_check.py", *sys.argv[1:]]))
    report.log(f"plan: {'CPU rehearsal' if plan.rehearsal else 'GPU check'}; out {out}; "
               f"work {work}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1",  # the subprocesses import from the checkout
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return Check(plan=plan, report=report, out=out, work=work, data=args.data, env=env,
                 sweep_batch_tokens=args.sweep_batch_tokens)


def finish(check: Check) -> int:
    """Records which missing packages got imported, logs the verdict, writes and prints the
    results; the exit code: 1 when a step failed or such a package was imported."""
    report = check.report
    imported = [name for name in NOT_ON_THE_GPU if name in sys.modules]
    report.results["imported_packages_the_gpu_lacks"] = imported
    failed = [name for name, record in report.results["steps"].items()
              if record["status"] == "failed"]
    report.log(f"done in {report.elapsed:.0f} s; "
               + (f"FAILED: {', '.join(failed)}" if failed else "every step passed")
               + (f"; imported {imported}, which the GPU image lacks" if imported else ""))
    report.close()
    print(results_table(report.results), flush=True)
    return 1 if failed or imported else 0


def main() -> int:
    args = parse_args()
    if args.ddp_worker:
        return ddp_worker(args.ddp_worker)
    if args.prepare:
        return prepare(args)
    if not args.out:
        print("error: --out DIR is needed", file=sys.stderr)
        return 2
    check = start_check(args)
    for name, step in check_steps():
        if args.only and name not in (*args.only, "environment", "data"):
            check.report.results["steps"][name] = {"status": "not run", "seconds": 0,
                                                   "summary": "not asked for (--only)"}
            continue
        with check.report.step(name) as record:
            step(check, record)
    return finish(check)


if __name__ == "__main__":
    sys.exit(main())
