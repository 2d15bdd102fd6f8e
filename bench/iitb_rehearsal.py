"""A CPU rehearsal of configs/iitb.yaml: the real config, only the overrides a 2-core machine
needs, on the IITB stand-in (or a saved copy of the real dataset); the last CPU check before
bench/gpu_check.py runs on a GPU.

    python bench/make_iitb_standin.py --out bench/results/iitb-standin     # once (eflomal)
    python bench/iitb_rehearsal.py --hub-id bench/results/iitb-standin [--minutes 20]
    python bench/iitb_rehearsal.py --hub-id DIR --minutes 2 data.max_rows=20000   # quick

Runs `python scripts/train.py --config configs/iitb.yaml` as a child process with
`train.device=cpu`, a smaller `train.batch_tokens`, `train.max_minutes`, `train.compile=false`
(torch.compile loses on CPUs: bench/compile_bench.py), both cores, log and validation steps
sized for a CPU, and greedy search for the final test score (a Transformer-base beam search
of the test split would take longer than the training). Its output streams through; then a
table of the loss at each log step, the dev chrF of each validation (the stand-in's dev split is
the real IITB dev set, WMT14 newsdev2014), tokens/s, wall time and the peak memory of the
training process, also written to bench/results/iitb_rehearsal.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from translator.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "iitb-rehearsal"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hub-id", required=True, help="the stand-in folder (or a dataset "
                        "saved in the hub's layout)")
    parser.add_argument("--minutes", type=float, default=20.0)
    parser.add_argument("--batch-tokens", type=int, default=4000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="more config overrides")
    args = parser.parse_args()
    overrides = [f"data.hub_id={Path(args.hub_id).resolve()}", "train.device=cpu",
                 f"train.batch_tokens={args.batch_tokens}", f"train.max_minutes={args.minutes}",
                 "train.compile=false", f"train.threads={args.threads}", "train.log_every=10",
                 "train.eval_every=100", "train.eval_sentences=520", "search.beam_size=1",
                 f"train.output_dir={OUT}", "train.run_name=run", "train.overwrite=true",
                 *args.overrides]
    command = [sys.executable, "scripts/train.py", "--config", "configs/iitb.yaml", *overrides]
    print("$ " + " ".join(command), flush=True)
    started = time.time()
    code = subprocess.run(command, cwd=ROOT).returncode
    wall = (time.time() - started) / 60
    peak_gib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20  # KiB on Linux
    if code != 0:
        print(f"error: training stopped with exit code {code}", file=sys.stderr)
        return code
    records = [json.loads(line) for line in
               (OUT / "run" / "metrics.jsonl").read_text(encoding="utf-8").splitlines() if line]
    train = [r for r in records if r["kind"] == "train"]
    validations = [r for r in records if r["kind"] == "validation"]
    lines = [f"## configs/iitb.yaml rehearsed on CPU ({time.strftime('%Y-%m-%d %H:%M')}, "
             f"{cpu_model()}, {args.threads} threads)", "",
             f"`python bench/iitb_rehearsal.py --hub-id {args.hub_id} --minutes {args.minutes:g} "
             f"{' '.join(args.overrides)}`; wall {wall:.1f} min (data, SentencePiece, eflomal, "
             f"training, test score), peak RSS of the training process {peak_gib:.1f} GiB", "",
             "| step | loss | tokens/s |", "|---:|---:|---:|"]
    lines += [f"| {r['step']} | {r['loss']:.3f} | {r.get('tokens_per_second', 0):,.0f} |"
              for r in train]
    lines += ["", "| step | dev loss | dev chrF (greedy, IITB dev) |", "|---:|---:|---:|"]
    lines += [f"| {r['step']} | {r['dev_loss']:.3f} | {r.get('dev_chrf', float('nan')):.1f} |"
              for r in validations]
    report = "\n".join(lines)
    print(report)
    (OUT.parent / "iitb_rehearsal.md").write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
