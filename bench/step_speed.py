"""Training steps per second of the default model, for two versions of the code in one run:
the check of "faster steps" against an earlier commit.

    git worktree add /tmp/before 02d3df6
    python bench/step_speed.py --before /tmp/before [--rounds 3] [--steps 60] [--threads 2]

Each round trains, in a fresh process, the default recipe of each checkout (its own
configs/default.yaml and package, run from the checkout as PYTHONPATH) on the same data (this
checkout's embedded train split and its links, given as local files, so both versions see the
same batches), `--steps` timed steps after 10 untimed ones. The versions alternate
(before, after, before, after, ...) so that a change in the machine's load falls on both; the
table gives each version's median step time over the rounds, its steps/s and the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from translator.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]

# run inside each checkout: build the run as that version's trainer does, time its steps
PROBE = r"""
import json, sys, tempfile, time
from pathlib import Path
import torch
try:
    from translator.build import build_run
except ImportError:  # before the training module was split
    from translator.training import build_run
from translator.config import load_config
from translator.run_dir import RunDir
from translator.training import Trainer
steps, threads, overrides = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3:]
torch.set_num_threads(threads)
folder = Path(tempfile.mkdtemp())
config = load_config("configs/default.yaml", [f"train.output_dir={folder}", *overrides])
run = build_run(config, RunDir.new(folder))
trainer = Trainer(run)
batches = trainer.batches()
for _ in range(10):
    trainer.train_step(batches)
times, tokens = [], 0
for _ in range(steps):
    started = time.perf_counter()
    tokens += trainer.train_step(batches)[1]
    times.append(time.perf_counter() - started)
print(json.dumps({"seconds": sum(times), "median": sorted(times)[len(times) // 2],
                  "tokens": tokens, "precision": run.precision}))
"""


def probe(checkout: Path, steps: int, threads: int, overrides: list[str]) -> dict:
    result = subprocess.run([sys.executable, "-c", PROBE, str(steps), str(threads), *overrides],
                            cwd=checkout, env={**os.environ, "PYTHONPATH": str(checkout)},
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"{checkout}: the probe failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="a checkout of the earlier "
                        "commit (git worktree add DIR COMMIT)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="for both versions, e.g. model.d_ff=1024")
    args = parser.parse_args()
    corpus = ROOT / "translator" / "corpus"
    data = ["data.source=files", f"data.train_path={corpus / 'train.tsv'}",
            f"data.dev_path={corpus / 'dev.tsv'}", f"data.train_alignment_path="
            f"{corpus / 'train.align'}", "train.max_minutes=0", f"data.cache_dir="
            f"{tempfile.mkdtemp(prefix='step-speed-cache-')}", *args.overrides]
    versions = {"before": args.before.resolve(), "after": ROOT}
    found: dict[str, list[dict]] = {name: [] for name in versions}
    for round_number in range(args.rounds):
        for name, checkout in versions.items():
            found[name].append(probe(checkout, args.steps, args.threads, data))
            print(f"round {round_number + 1} {name}: "
                  f"{found[name][-1]['median'] * 1000:.1f} ms/step", file=sys.stderr)
    commits = {name: subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"],
                                    capture_output=True, text=True).stdout.strip()
               for name, path in versions.items()}
    print(f"## Training steps of the default model: {cpu_model()}, {args.threads} thread(s), "
          f"{found['after'][0]['precision']}, {args.rounds} rounds of {args.steps} steps\n")
    print("| code | commit | median ms/step | steps/s | tokens/s | × before |")
    print("|---|---|---:|---:|---:|---:|")
    medians = {name: statistics.median(r["median"] for r in runs)
               for name, runs in found.items()}
    for name, runs in found.items():
        tokens = sum(r["tokens"] for r in runs) / sum(r["seconds"] for r in runs)
        print(f"| {name} | {commits[name]} | {medians[name] * 1000:.1f} | "
              f"{1 / medians[name]:.2f} | {tokens:,.0f} | "
              f"{medians['before'] / medians[name]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
