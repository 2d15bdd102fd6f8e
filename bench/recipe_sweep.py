"""The low-resource recipe, measured: train variants for the same budget, one at a time.

    python bench/recipe_sweep.py                        # every variant, 4 training minutes each
    python bench/recipe_sweep.py --only base,guided0.2 --minutes 8 train.threads=1
    python bench/recipe_sweep.py --only base,linear --minutes 3

Each variant is `python scripts/train.py` with the pre-sweep recipe (`BASE`: the 2026-11-30
default, which "base" runs alone) plus its overrides and `train.max_minutes` (the training
loop's wall time, validations included), run as a child process into
bench/results/sweep/<variant>. The table gives the dev chrF/BLEU of the last
validation and of the averaged checkpoint (when the variant averages), the test score of the
kept best checkpoint (beam 5), steps done and tokens/s. Results are appended to
bench/results/sweep/results.jsonl as each variant ends, so an interrupted sweep keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "bench" / "results" / "sweep"

# the recipe before the sweep (the 2026-11-30 default), on top of which every variant is set
BASE = ["train.schedule=inverse_sqrt", "train.alignment_weight=0", "train.average_last=0",
        "train.learning_rate=0.002", "train.warmup_steps=300", "train.batch_tokens=3000",
        "model.dropout=0.2", "tokenizer.vocab_size=4000"]
COMMON = ["train.heatmaps=false", "train.test_beam_size=5", "train.max_steps=100000",
          "train.eval_every=100", "train.eval_sentences=200", "train.log_every=25"]
LINEAR = ["train.schedule=linear", "train.average_last=3", "train.warmup_steps=100"]
# the combined candidate: more, cheaper updates, less regularisation, a budgeted schedule
FAST = ["train.schedule=linear", "train.decay_start=0.6", "train.average_last=3",
        "train.warmup_steps=100", "train.learning_rate=0.003", "train.batch_tokens=1500",
        "model.dropout=0.1", "model.d_ff=512"]


def without(recipe: list[str], key: str) -> list[str]:
    return [o for o in recipe if not o.startswith(key)]


VARIANTS: dict[str, list[str]] = {
    "base": [],  # the default recipe (inverse square root), same budget
    "linear": LINEAR,
    "fast": FAST,
    "guided0.2": ["train.alignment_weight=0.2"],
    "guided0.5": ["train.alignment_weight=0.5"],
    "guided0.2+wsd": ["train.alignment_weight=0.2", "train.schedule=linear",
                      "train.decay_start=0.7", "train.average_last=3"],
    "guided0.2+wdrop0.1": ["train.alignment_weight=0.2", "train.word_dropout=0.1"],
    "big-batch": ["train.batch_tokens=6000", "train.learning_rate=0.003",
                  "train.warmup_steps=150"],
    "wsd": ["train.schedule=linear", "train.decay_start=0.7", "train.average_last=3"],
    "fast-no-batch1500": without(FAST, "train.batch_tokens"),
    "fast-no-ff512": without(FAST, "model.d_ff"),
    "fast-no-drop0.1": without(FAST, "model.dropout"),
    "fast-no-lr3e-3": without(FAST, "train.learning_rate"),
    "fast-no-sched": without(without(without(FAST, "train.schedule"), "train.decay_start"),
                             "train.average_last") + ["train.warmup_steps=100"],
    "fast+vocab2k": FAST + ["tokenizer.vocab_size=2000"],
    "fast+wdrop0.1": FAST + ["train.word_dropout=0.1"],
    "fast+attn-drop0": FAST + ["model.attention_dropout=0.0"],
    "fast+guided0.3": FAST + ["train.alignment_weight=0.3"],
    "attn-drop0": LINEAR + ["model.attention_dropout=0.0"],  # lets the fused kernel run
    "ff512": LINEAR + ["model.d_ff=512"],
    "vocab2k": LINEAR + ["tokenizer.vocab_size=2000"],
    "vocab8k": LINEAR + ["tokenizer.vocab_size=8000"],
    "lr3e-3": LINEAR + ["train.learning_rate=0.003"],
    "wdrop0.1": LINEAR + ["train.word_dropout=0.1"],
    "drop0.1": LINEAR + ["model.dropout=0.1"],
    "batch6k": LINEAR + ["train.batch_tokens=6000"],
    "flores-reg": LINEAR + ["model.dropout=0.3", "model.attention_dropout=0.1",
                           "model.activation_dropout=0.1", "train.label_smoothing=0.2"],
    "ls0.2": LINEAR + ["train.label_smoothing=0.2"],
    "deep4-ff512": LINEAR + ["model.layers=4", "model.d_ff=512"],
}


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def records(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def run_variant(name: str, overrides: list[str], minutes: float, extra: list[str]) -> dict:
    run_dir = OUT / name
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [sys.executable, str(ROOT / "scripts" / "train.py"), *BASE, *COMMON,
               f"train.max_minutes={minutes}", f"train.output_dir={OUT}",
               f"train.run_name={name}", *overrides, *extra]
    print("$ " + " ".join(command[1:]), file=sys.stderr, flush=True)
    started = time.perf_counter()
    with open(OUT / f"{name}.log", "w", encoding="utf-8") as log:
        code = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}).returncode
    wall = time.perf_counter() - started
    metrics = records(run_dir)
    train = [m for m in metrics if m["kind"] == "train"]
    validations = [m for m in metrics if m["kind"] == "validation"]
    averaged = [m for m in metrics if m["kind"] == "averaged"]
    test = [m for m in metrics if m["kind"] == "test"]
    speeds = [m["tokens_per_second"] for m in train[1:]] or [0]
    return {
        "variant": name, "overrides": " ".join(overrides), "exit": code,
        "wall_min": round(wall / 60, 2), "steps": train[-1]["step"] if train else 0,
        "tok_s": round(sum(speeds) / len(speeds)),
        "dev_chrf": validations[-1]["dev_chrf"] if validations else None,
        "dev_bleu": validations[-1]["dev_bleu"] if validations else None,
        "avg_chrf": averaged[-1]["dev_chrf"] if averaged else None,
        "avg_bleu": averaged[-1]["dev_bleu"] if averaged else None,
        "test_chrf": test[-1]["chrf"] if test else None,
        "test_bleu": test[-1]["bleu"] if test else None,
    }


def table(results: list[dict], minutes: float) -> str:
    lines = [f"Recipe sweep: {minutes:g} training minutes per variant, {cpu_model()}, "
             f"{time.strftime('%Y-%m-%d')}", "",
             "| variant | overrides | steps | tok/s | dev chrF (last) | dev chrF (avg) | "
             "test BLEU | test chrF (beam 5) | wall min |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['variant']} | `{r['overrides'] or '(default)'}` | {r['steps']} | "
                     f"{r['tok_s']:,} | {r['dev_chrf']} | {r['avg_chrf'] or '-'} | "
                     f"{r['test_bleu']} | {r['test_chrf']} | {r['wall_min']} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument("--minutes", type=float, default=4.0, help="training minutes each")
    parser.add_argument("overrides", nargs="*", help="extra overrides for every variant")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(VARIANTS)
    unknown = [n for n in names if n not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(VARIANTS)}")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for name in names:
        result = run_variant(name, VARIANTS[name], args.minutes, args.overrides)
        results.append(result)
        with open(OUT / "results.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps({**result, "minutes": args.minutes,
                                   "date": time.strftime("%Y-%m-%d %H:%M")}) + "\n")
        print(table(results, args.minutes), flush=True)
    (OUT.parent / "recipe_sweep.md").write_text(table(results, args.minutes) + "\n")


if __name__ == "__main__":
    main()
