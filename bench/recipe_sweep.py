"""The low-resource recipe, measured: train variants for the same budget, one at a time.

    python bench/recipe_sweep.py                        # every variant, 4 training minutes each
    python bench/recipe_sweep.py --only base,guided0.2 --minutes 8 train.threads=1
    python bench/recipe_sweep.py --only base,linear --minutes 3
    python bench/recipe_sweep.py --base current --only default,warmup100 --minutes 8 \
        train.threads=1                                  # round 2: on configs/default.yaml

Round 1 (`--base pre-sweep`, the default) sets every variant on the pre-sweep recipe; round 2
(`--base current`) on configs/default.yaml as it is (guided alignment on), with its validation
settings, so that a winner carries over to the default run unchanged.

Each variant is `python scripts/train.py` with the pre-sweep recipe (`BASE`: the 2026-11-30
default, which "base" runs alone) plus its overrides and `train.max_minutes` (the training
loop's wall time, validations included), run as a child process into
bench/results/sweep/<variant>. The table gives the dev chrF/BLEU of the last
validation and of the averaged checkpoint (when the variant averages), the test score of the
kept best checkpoint (beam 5), steps done, tokens/s, and the AER of the default heatmap view
(decoder layer -2, heads averaged) on WPT-05 (gold) and on the embedded test split (silver:
its shipped eflomal links), from bench/alignment_bench.py. Results are appended to
bench/results/sweep/results.jsonl as each variant ends, so an interrupted sweep keeps them.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from translator.device import cpu_model

ROOT = Path(__file__).resolve().parents[1]

from alignment_bench import default_view_aer  # noqa: E402  (bench/, beside this file)

OUT = ROOT / "bench" / "results" / "sweep"

# the recipe before the sweep (the 2026-11-30 default), on top of which every variant is set
BASE = ["train.schedule=inverse_sqrt", "train.alignment_weight=0", "train.average_last=0",
        "train.learning_rate=0.002", "train.warmup_steps=300", "train.batch_tokens=3000",
        "model.dropout=0.2", "tokenizer.vocab_size=4000"]
COMMON = ["train.heatmaps=false", "search.beam_size=5", "train.max_steps=100000",
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


SMALL = ["model.layers=2", "model.d_ff=512", "train.batch_tokens=1500"]
# round 2: overrides of configs/default.yaml as it is (guided alignment λ 0.2, inverse square
# root, warm-up 300, lr 0.002, batches of 3000 tokens, dropout 0.2, 4k vocabulary)
CURRENT: dict[str, list[str]] = {
    "default": [],
    "warmup100": ["train.warmup_steps=100"],
    "warmup100+lr3e-3": ["train.warmup_steps=100", "train.learning_rate=0.003"],
    "linear-w100": ["train.warmup_steps=100", "train.schedule=linear"],
    "drop0.1": ["model.dropout=0.1"],
    "drop0.1+attn0": ["model.dropout=0.1", "model.attention_dropout=0.0"],
    "batch1500": ["train.batch_tokens=1500"],
    "ff512": ["model.d_ff=512"],
    "layers2": ["model.layers=2"],
    "d192-ff768": ["model.d_model=192", "model.d_ff=768"],
    "vocab2k": ["tokenizer.vocab_size=2000"],
    "vocab8k": ["tokenizer.vocab_size=8000"],
    "ls0.2": ["train.label_smoothing=0.2"],
    "ls0.0": ["train.label_smoothing=0.0"],
    "guided0.05": ["train.alignment_weight=0.05"],
    "guided0.5": ["train.alignment_weight=0.5"],
    "guided-head0": ["train.alignment_head=0"],
    "unguided": ["train.alignment_weight=0"],
    "both": ["data.direction=both"],
    # round 3: round 2's winners together (smaller batches: more updates; cheaper steps)
    "b1500+ff512": ["train.batch_tokens=1500", "model.d_ff=512"],
    "b1500+layers2+ff512": ["train.batch_tokens=1500", "model.layers=2", "model.d_ff=512"],
    "b1000": ["train.batch_tokens=1000"],
    "b1000+ff512": ["train.batch_tokens=1000", "model.d_ff=512"],
    "b1500+ff512+both": ["train.batch_tokens=1500", "model.d_ff=512", "data.direction=both"],
    "b1500+ff512+w150": ["train.batch_tokens=1500", "model.d_ff=512", "train.warmup_steps=150"],
    # round 4: on the round-3 winner, "small" (2+2 layers, d_ff 512, batches of 1500 tokens)
    **{f"small{name}": SMALL + extra for name, extra in {
        "": [],
        "+b1000": ["train.batch_tokens=1000"],
        "+lr3e-3": ["train.learning_rate=0.003"],
        "+unguided": ["train.alignment_weight=0"],
        "+guided0.5": ["train.alignment_weight=0.5"],
        "+guided0.05": ["train.alignment_weight=0.05"],
        "+vocab2k": ["tokenizer.vocab_size=2000"],
        "+vocab8k": ["tokenizer.vocab_size=8000"],
        "+guided-head0": ["train.alignment_head=0"],
        "+intersect": [f"data.train_alignment_path={ROOT}/bench/results/links/"
                       "train.intersection.align"],
        "+both": ["data.direction=both"],
        "+drop0.1": ["model.dropout=0.1"],
    }.items()},
    # round 7 ("c23k-"): on the 23,683-pair corpus (configs/default.yaml as it is): separate
    # source and target vocabularies (the target's tied to the output layer), both
    # directions, width, depth, dropout
    **{f"c23k-{name}": extra for name, extra in {
        "default": [],
        "both": ["data.direction=both"],
        **{f"sep{s // 1000}k{t // 1000}k": ["tokenizer.joint=false", f"tokenizer.vocab_size={s}",
                                            f"tokenizer.target_vocab_size={t}",
                                            "model.share_embeddings=false"]
           for s, t in ((4000, 2000), (8000, 2000), (4000, 1000), (8000, 4000), (8000, 1000),
                        (16000, 2000))},
        # round 8: on round 7's two best (8k/2k, 8k/1k)
        **{f"sep8k{t}k+{name}": ["tokenizer.joint=false", "tokenizer.vocab_size=8000",
                                 f"tokenizer.target_vocab_size={t * 1000}",
                                 "model.share_embeddings=false", *extra]
           for t in (1, 2)
           for name, extra in {"ff1024": ["model.d_ff=1024"], "layers3": ["model.layers=3"],
                               "drop0.1": ["model.dropout=0.1"],
                               "ls0.2": ["train.label_smoothing=0.2"]}.items()},
        "ff1024": ["model.d_ff=1024"],
        "layers3": ["model.layers=3"],
        "drop0.1": ["model.dropout=0.1"],
        "ls0.2": ["train.label_smoothing=0.2"],
    }.items()},
    # round 9 ("r9-"): on configs/default.yaml as round 8 left it (8k/1k, dropout 0.1,
    # α 2.2): the target vocabulary, dropout and label smoothing once more
    **{f"r9-{name}": extra for name, extra in {
        "default": [],
        "tgt2k": ["tokenizer.target_vocab_size=2000"],
        "drop0.05": ["model.dropout=0.05"],
        "drop0": ["model.dropout=0.0"],
        "ls0": ["train.label_smoothing=0.0"],
        "ls0.2": ["train.label_smoothing=0.2"],
        # a competence curriculum over the first 800 steps (about 40% of a one-thread run)
        "rarity800": ["train.curriculum=rarity", "train.curriculum_steps=800"],
        "length800": ["train.curriculum=length", "train.curriculum_steps=800"],
        "drop0+ls0": ["model.dropout=0.0", "train.label_smoothing=0.0"],
        "drop0+rarity800": ["model.dropout=0.0", "train.curriculum=rarity",
                            "train.curriculum_steps=800"],
    }.items()},
    # round 6: on configs/default.yaml as it is (small, λ 0.5); "long40" runs with --minutes 40
    # to find where this recipe levels off
    "long40": [],
    "attn0": ["model.attention_dropout=0.0"],
    "act0": ["model.activation_dropout=0.0"],
    "drop0.3": ["model.dropout=0.3"],
    "avg3": ["train.average_last=3"],
    "wdrop0.1": ["train.word_dropout=0.1"],
    "d192": ["model.d_model=192"],
    "attn0+fullctx": ["model.attention_dropout=0.0", "train.alignment_full_context=true"],
    # the two above as run at commit db83af4, whose default.yaml had the repetition bans on
    # (results.jsonl names them so; their runs are not reproduced by these overrides today)
    "attn0+bans": ["model.attention_dropout=0.0"],
    "attn0+bans+fullctx": ["model.attention_dropout=0.0", "train.alignment_full_context=true"],
}
BASES = {"pre-sweep": (BASE, VARIANTS), "current": ([], CURRENT)}


def records(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def aer_columns(run_dir: Path) -> dict[str, float | None]:
    """The table's AER columns for a trained run: its default heatmap view (decoder layer -2,
    heads averaged) against WPT-05's gold links (None without the public data) and against
    the embedded test split's shipped links; empty when the run saved no checkpoint."""
    if not (run_dir / "checkpoints").is_dir():
        return {}
    scores = {column: default_view_aer(run_dir, reference) for column, reference in
              (("aer_wpt05", "wpt05"), ("aer_in_domain", "embedded-test"))}
    return {column: None if value is None else round(value, 3)
            for column, value in scores.items()}


def run_variant(name: str, overrides: list[str], minutes: float, extra: list[str],
                base: list[str], common: list[str], out: Path) -> dict:
    run_dir = out / name
    shutil.rmtree(run_dir, ignore_errors=True)
    command = [sys.executable, str(ROOT / "scripts" / "train.py"), *base, *common,
               f"train.max_minutes={minutes}", f"train.output_dir={out}",
               f"train.run_name={name}", *overrides, *extra]
    print("$ " + " ".join(command[1:]), file=sys.stderr, flush=True)
    started = time.perf_counter()
    with open(out / f"{name}.log", "w", encoding="utf-8") as log:
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
        "wall_min": round(wall / 60, 2),
        # the last validated step: training ends with a validation, the log line before it
        "steps": (validations or train)[-1]["step"] if train else 0,
        "tok_s": round(sum(speeds) / len(speeds)),
        "dev_chrf": validations[-1]["dev_chrf"] if validations else None,
        "dev_bleu": validations[-1]["dev_bleu"] if validations else None,
        "avg_chrf": averaged[-1]["dev_chrf"] if averaged else None,
        "avg_bleu": averaged[-1]["dev_bleu"] if averaged else None,
        "test_chrf": test[-1]["chrf"] if test else None,
        "test_bleu": test[-1]["bleu"] if test else None,
        **(aer_columns(run_dir) if code == 0 else {}),
    }


def table(results: list[dict], minutes: float) -> str:
    lines = [f"Recipe sweep: {minutes:g} training minutes per variant, {cpu_model()}, "
             f"{time.strftime('%Y-%m-%d')}", "",
             "| variant | overrides | steps | tok/s | dev chrF (last) | dev chrF (avg) | "
             "test BLEU | test chrF (beam 5) | AER WPT-05 | AER in-domain (silver) | wall min |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['variant']} | `{r['overrides'] or '(default)'}` | {r['steps']} | "
                     f"{r['tok_s']:,} | {r['dev_chrf']} | {r['avg_chrf'] or '-'} | "
                     f"{r['test_bleu']} | {r['test_chrf']} | {r.get('aer_wpt05') or '-'} | "
                     f"{r.get('aer_in_domain') or '-'} | {r['wall_min']} |")
    return "\n".join(lines)


def collected(out: Path, names: list[str]) -> list[dict]:
    """The newest result of each of ``names`` in out/results.jsonl, AER added where missing
    (results of a sweep started before the AER columns existed)."""
    newest = {}
    path = out / "results.jsonl"
    for line in path.read_text(encoding="utf-8").splitlines() if path.is_file() else []:
        result = json.loads(line)
        newest[result["variant"]] = result
    results = [newest[name] for name in names if name in newest]
    for result in results:
        if "aer_wpt05" not in result:
            result.update(aer_columns(out / result["variant"]))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated variant names")
    parser.add_argument("--minutes", type=float, default=4.0, help="training minutes each")
    parser.add_argument("--base", choices=list(BASES), default="pre-sweep",
                        help="pre-sweep: round 1's recipe; current: configs/default.yaml")
    parser.add_argument("--tag", default="", help="names the table file: recipe_sweep-TAG.md")
    parser.add_argument("--table", action="store_true",
                        help="train nothing: one table of every result in the base's "
                             "results.jsonl (the newest of each variant), AER filled in")
    parser.add_argument("overrides", nargs="*", help="extra overrides for every variant")
    args = parser.parse_args()
    base, variants = BASES[args.base]
    # round 2 keeps the default's validation settings, so a winner carries over unchanged
    common = COMMON if args.base == "pre-sweep" else [o for o in COMMON if "eval" not in o]
    names = [n for n in args.only.split(",") if n] or list(variants)
    unknown = [n for n in names if n not in variants]
    if unknown:
        parser.error(f"unknown variants {unknown}; known: {', '.join(variants)}")
    out = OUT if args.base == "pre-sweep" else OUT.parent / "sweep-current"
    out.mkdir(parents=True, exist_ok=True)
    if args.table:
        print(table(collected(out, names), args.minutes))
        return
    results = []
    for name in names:
        result = run_variant(name, variants[name], args.minutes, args.overrides, base, common,
                             out)
        results.append(result)
        with open(out / "results.jsonl", "a", encoding="utf-8") as file:
            file.write(json.dumps({**result, "minutes": args.minutes, "base": args.base,
                                   "date": time.strftime("%Y-%m-%d %H:%M")}) + "\n")
        print(table(results, args.minutes), flush=True)
    suffix = f"-{args.tag}" if args.tag else ""
    (OUT.parent / f"recipe_sweep{suffix}.md").write_text(table(results, args.minutes) + "\n")


if __name__ == "__main__":
    main()
