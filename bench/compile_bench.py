"""Does `torch.compile` pay inside the default run's budget on this CPU? Eager against
compiled training of the default model, compile time counted.

    python bench/compile_bench.py [--steps 300] [--threads 2] [--modes eager,static,dynamic]

Each mode trains the default recipe (configs/default.yaml, the embedded train split and its
links as local files, so every mode sees the same batches) for `--steps` steps in a fresh
process and times every step: "eager" as the default run trains; "static" with
`train.compile=true` (torch.compile's default: a graph per batch shape until it marks the
shapes dynamic itself); "dynamic" with `torch.compile(dynamic=True)` (symbolic shapes from the
first step: one compilation for all batch shapes). The table gives the first step (where
compilation happens), the total wall time, the median step of the second half (steady state),
how many steps each mode would make in 8 minutes at that rate after its total warm-up
(total minus steps × steady median), and the ratio to eager.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from translator.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]
BUDGET_S = 8 * 60

PROBE = r"""
import functools, json, sys, tempfile, time
from pathlib import Path
import torch
from translator.build import build_run
from translator.config import load_config
from translator.run_dir import RunDir
from translator.training import Trainer
steps, threads, mode, overrides = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4:]
torch.set_num_threads(threads)
if mode == "dynamic":
    torch.compile = functools.partial(torch.compile, dynamic=True)
folder = Path(tempfile.mkdtemp())
compiled = ["train.compile=true"] if mode != "eager" else []
config = load_config("configs/default.yaml", [f"train.output_dir={folder}", *compiled,
                                              *overrides])
run = build_run(config, RunDir.new(folder))
trainer = Trainer(run)
batches = trainer.batches()
times, losses = [], []
for _ in range(steps):
    started = time.perf_counter()
    losses.append(trainer.train_step(batches)[0])
    times.append(time.perf_counter() - started)
print(json.dumps({"times": times, "losses": losses, "precision": run.precision}))
"""


def probe(mode: str, steps: int, threads: int, overrides: list[str]) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, str(steps), str(threads), mode,
                             *overrides], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{mode}: the probe failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--modes", default="eager,static,dynamic")
    parser.add_argument("overrides", nargs="*", help="for every mode, e.g. model.d_ff=1024")
    args = parser.parse_args()
    corpus = ROOT / "translator" / "corpus"
    data = ["data.source=files", f"data.train_path={corpus / 'train.tsv'}",
            f"data.dev_path={corpus / 'dev.tsv'}",
            f"data.train_alignment_path={corpus / 'train.align'}", "train.max_minutes=0",
            f"data.cache_dir={tempfile.mkdtemp(prefix='compile-bench-cache-')}",
            *args.overrides]
    rows = {}
    for mode in args.modes.split(","):
        rows[mode] = probe(mode, args.steps, args.threads, data)
        print(f"{mode}: first step {rows[mode]['times'][0]:.1f} s, "
              f"total {sum(rows[mode]['times']):.1f} s", file=sys.stderr)
    print(f"## torch.compile on {cpu_model()}: the default model, {args.threads} thread(s), "
          f"{args.steps} steps, {rows[next(iter(rows))]['precision']}\n")
    print("| mode | first step s | total s | steady ms/step | warm-up s | steps in 8 min | "
          "× eager | loss at the end |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    in_budget = {}
    for mode, row in rows.items():
        times = row["times"]
        steady = sorted(times[len(times) // 2:])[len(times[len(times) // 2:]) // 2]
        warm_up = max(sum(times) - len(times) * steady, 0.0)
        in_budget[mode] = max(BUDGET_S - warm_up, 0.0) / steady
        base = in_budget.get("eager", in_budget[mode])
        print(f"| {mode} | {times[0]:.1f} | {sum(times):.1f} | {steady * 1000:.1f} | "
              f"{warm_up:.1f} | {in_budget[mode]:,.0f} | {in_budget[mode] / base:.2f} | "
              f"{row['losses'][-1]:.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
