"""The default run, timed: python scripts/train.py with configs/default.yaml, start to finish.

    python bench/default_run.py                       # the whole default run
    python bench/default_run.py train.max_steps=30    # a quick check of this bench

Runs scripts/train.py as a child process (the default config, with any overrides given here)
into bench/results/default-run/run (a previous run there is deleted first), and times the
whole of it: loading the corpus, training SentencePiece, training, validations and the final
test-split score. Then it reads the run's metrics.jsonl and test_scores.json, translates the
seeds' showcase sentences with the trained model (translator.translate.Translator, beam as in
the test score), checks which facts of each made it into the translation and whether the
Rajesh heatmap (RUN/heatmaps/showcase-1.json) lights each content word's source word
brightest, and prints Markdown tables, also written to bench/results/default_run.md.
Then it scores the new dev2/test2 splits (round-1 domains, round-2 domains and the short
phrases apart) and prints the run's showcase-family and first-tries checks (held_out.json).
Targets (issues 12, 13, 31): at most 10 minutes on a 2-core CPU, chrF ≥ 48 on the test split
(beam 5), every fact of the showcase sentences, no repeated word, a correct heatmap; ≥ 24
variants of the showcase family whole, ≥ 50 of 60 first tries right.
"""

import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

from translator.corpus import SECOND_SPLITS, SHOWCASE, read_split
from translator.errors import TranslatorError
from translator.held_out import describe
from translator.metrics import corpus_scores, repeated_words
from translator.run_dir import RunDir
from translator.translate import Translator

ROOT = Path(__file__).resolve().parents[1]

RESULTS = ROOT / "bench" / "results"
OUTPUT_DIR = RESULTS / "default-run"
RUN_NAME = "run"
TARGET_MINUTES = 10.0
# The facts of each showcase sentence: any of the spellings counts (lower-cased match).
FACTS = [
    {"Rajesh": ["rajesh"], "booked": ["book"], "ticket": ["ticket"], "train": ["train"],
     "Delhi": ["delhi"], "Mumbai": ["mumbai", "bombay"], "sister": ["sister"],
     "yesterday": ["yesterday"], "evening": ["evening"]},
    {"mechanic": ["mechanic"], "fixed": ["fixed", "repaired"], "scooter": ["scooter"],
     "because": ["because", "since", "as "], "leaking": ["leak", "dripping"],
     "petrol": ["petrol", "fuel"]},
    {"UPI": ["upi"], "payment": ["payment"], "failed": ["fail"],
     "deducted": ["deducted", "debited", "cut"], "refund": ["refund"]},
]
# Rajesh heatmap: the source word each English content word should draw on most.
RAJESH_LINKS = {"rajesh": "राजेश", "sister": "बहन", "delhi": "दिल्ली", "mumbai": "मुंबई",
                "train": "ट्रेन", "ticket": "टिकट", "booked": "बुक", "book": "बुक",
                "yesterday": "कल", "evening": "शाम"}


def missing_facts(text: str, facts: dict[str, list[str]]) -> list[str]:
    lowered = text.lower()
    return [fact for fact, spellings in facts.items()
            if not any(spelling in lowered for spelling in spellings)]


ROUND_1_DOMAINS = {"payments", "travel", "family", "food", "health", "weather", "school",
                   "shopping", "office", "tech_support", "sport", "festivals", "directions",
                   "news"}


def second_split_rows(translator: Translator, beam: int) -> list[tuple[str, str, str, str]]:
    """(split, domain group, chrF, sentences) of dev2 and test2: round-1 domains, round-2
    domains and the short phrases apart, translated with the test score's beam."""
    rows = []
    for split in SECOND_SPLITS:
        pairs = read_split(split)
        outputs = [r.text for r in translator.translate([h for h, _, _ in pairs],
                                                        beam_size=beam, need_attention=False)]
        groups = {"round-1 domains": lambda d: d in ROUND_1_DOMAINS,
                  "round-2 domains": lambda d: d not in ROUND_1_DOMAINS and d != "phrases",
                  "short phrases": lambda d: d == "phrases", "all": lambda d: True}
        for name, member in groups.items():
            chosen = [(o, e) for o, (_, e, d) in zip(outputs, pairs) if member(d)]
            if chosen:
                chrf = corpus_scores([o for o, _ in chosen], [e for _, e in chosen],
                                     metrics=("chrf",))["chrf"]
                rows.append((split, name, f"{chrf:.1f}", str(len(chosen))))
    return rows


def held_out_lines(run_dir: Path) -> list[str]:
    """The showcase family's and the first tries' tables, from the run's held_out.json."""
    path = RunDir(run_dir).held_out_file
    if not path.is_file():
        return ["(no held_out.json in the run)"]
    held = json.loads(path.read_text(encoding="utf-8"))
    summary, rows = held["summary"], held["sentences"]
    family = [r for r in rows if r["set"] == "family"]
    tries = [r for r in rows if r["set"] == "first_tries"]
    return [
        f"Showcase family ({describe(summary)}; targets: ≥ 24 whole, ≥ 50 first tries):", "",
        "| variant | ours | facts missing | repeated | route in order | whole |",
        "| --- | --- | --- | --- | :---: | :---: |",
        *(f"| {r['source']} | {r['output'] or '(empty)'} | {', '.join(r['missing']) or 'none'}"
          f" | {', '.join(r['repeated']) or 'none'} | "
          f"{'–' if r['route_in_order'] is None else 'yes' if r['route_in_order'] else '**no**'}"
          f" | {'yes' if r['whole'] else '**no**'} |" for r in family),
        "", "| first try | ours | accepted | right |", "| --- | --- | --- | :---: |",
        *(f"| {r['source']} | {r['output'] or '(empty)'} | {' / '.join(r['accepted'][:4])} | "
          f"{'yes' if r['right'] else '**no**'} |" for r in tries),
    ]


def heatmap_check(run_dir: Path) -> list[tuple[str, str, str, bool]]:
    """(output word, its brightest source word, the expected one, right?) for the Rajesh
    heatmap's content words, from the JSON the training run wrote."""
    path = RunDir(run_dir).heatmaps_dir / "showcase-1.json"
    if not path.is_file():
        return []
    data = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for word, weights in zip(data["target_words"], data["weights"]):
        key = word.strip(".,;:!?'\"").lower().removesuffix("'s")
        if key not in RAJESH_LINKS and key.removesuffix("s") in RAJESH_LINKS:  # "tickets"
            key = key.removesuffix("s")
        if key in RAJESH_LINKS:
            brightest = data["source_words"][max(range(len(weights)), key=weights.__getitem__)]
            rows.append((word, brightest, RAJESH_LINKS[key], brightest == RAJESH_LINKS[key]))
    return rows
TARGET_CHRF = 48.0


def run_training(overrides: list[str]) -> tuple[int, float]:
    """Exit code and wall seconds of scripts/train.py; its output goes to this terminal."""
    command = [sys.executable, str(ROOT / "scripts" / "train.py"),
               f"train.output_dir={OUTPUT_DIR}", f"train.run_name={RUN_NAME}", *overrides]
    print("$ " + " ".join(command), file=sys.stderr)
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    started = time.perf_counter()
    code = subprocess.run(command, cwd=ROOT, env=environment).returncode
    return code, time.perf_counter() - started


def read_metrics(run_dir: Path) -> list[dict]:
    path = RunDir(run_dir).metrics_file
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def run_setting(run_dir: Path) -> str:
    """'device cpu, fp32, 1 process(es)' as train.log states it (the resolved precision)."""
    log = RunDir(run_dir).log_file
    for line in log.read_text(encoding="utf-8").splitlines() if log.is_file() else []:
        if "device " in line and "|" in line:
            return line.rsplit("|", 1)[-1].strip()
    return "unknown"


def weights_scored(metrics: list[dict]) -> str:
    """Which weights best.pt holds: the average of the last validations (train.average_last)
    when it beat every validation on dev chrF, else the best validation's step."""
    validations = [m for m in metrics if m.get("kind") == "validation"]
    averaged = [m for m in metrics if m.get("kind") == "averaged"]
    if not validations:
        return "–"
    best = max(validations, key=lambda m: m["dev_chrf"])
    single = f"step {best['step']:,} (dev chrF {best['dev_chrf']:.1f})"
    if averaged and averaged[-1]["dev_chrf"] > best["dev_chrf"]:
        return (f"the average of the last {averaged[-1]['averaged']} validations (dev chrF "
                f"{averaged[-1]['dev_chrf']:.1f}; best single: {single})")
    return single + (f"; their average: dev chrF {averaged[-1]['dev_chrf']:.1f}"
                     if averaged else "")


def table(overrides: list[str], seconds: float, run_dir: Path) -> str:
    metrics = read_metrics(run_dir)
    train = [m for m in metrics if m.get("kind") == "train"]
    validations = [m for m in metrics if m.get("kind") == "validation"]
    scores = json.loads(RunDir(run_dir).test_scores_file.read_text(encoding="utf-8"))
    beam = scores.get("beam_size", 1)
    translator = Translator.from_run(run_dir, device="cpu")
    outputs = [r.text for r in translator.translate([h for h, _ in SHOWCASE], beam_size=beam,
                                                     need_attention=False)]
    heatmap = heatmap_check(run_dir)
    speeds = [m["tokens_per_second"] for m in train]
    minutes = seconds / 60
    rows = [
        ("wall time: data, SentencePiece, training, validations, test score",
         f"{minutes:.1f} min", f"< {TARGET_MINUTES:.0f} min",
         "yes" if minutes < TARGET_MINUTES else "**no**"),
        # the last step is validated when the time limit stops training between log lines
        ("optimiser steps", f"{max((m['step'] for m in train + validations), default=0):,}",
         "", ""),
        ("training tokens/s (median of logged windows; min–max)",
         f"{statistics.median(speeds):,.0f} ({min(speeds):,.0f}–{max(speeds):,.0f})"
         if speeds else "–", "", ""),
        ("last dev BLEU / chrF",
         f"{validations[-1]['dev_bleu']:.1f} / {validations[-1]['dev_chrf']:.1f}"
         if validations else "–", "", ""),
        ("weights scored (best.pt, by dev chrF)", weights_scored(metrics), "", ""),
        (f"test BLEU (beam {beam}, {scores.get('sentences', '?')} sentences)",
         f"{scores['bleu']:.1f}", "", ""),
        (f"test chrF (beam {beam})", f"{scores['chrf']:.1f}", f"≥ {TARGET_CHRF:.0f}",
         "yes" if scores["chrf"] >= TARGET_CHRF else "**no**"),
    ]
    lines = [
        "## The default run (issue 5)",
        "",
        f"`{' '.join(['python scripts/train.py', *overrides])}` on "
        f"{os.cpu_count()} CPU cores; {run_setting(run_dir)}; run folder "
        f"`{run_dir.relative_to(ROOT)}`."
        + (" With overrides, the targets (set for the default run) are for reference only."
           if overrides else ""),
        "",
        "| measure | value | target | met |",
        "| --- | ---: | ---: | :---: |",
        *(f"| {name} | {value} | {target} | {met} |" for name, value, target, met in rows),
        "",
        f"| showcase sentence | reference | ours (beam {beam}) | facts missing | repeated |",
        "| --- | --- | --- | --- | --- |",
        *(f"| {hindi} | {reference} | {text or '(empty)'} | "
          f"{', '.join(missing_facts(text, facts)) or 'none'} | "
          f"{', '.join(repeated_words(text)) or 'none'} |"
          for (hindi, reference), text, facts in zip(SHOWCASE, outputs, FACTS)),
        "",
        "| Rajesh heatmap: output word | brightest source word | expected | right |",
        "| --- | --- | --- | :---: |",
        *(f"| {word} | {brightest} | {expected} | {'yes' if right else '**no**'} |"
          for word, brightest, expected, right in heatmap),
        f"| **{sum(r[3] for r in heatmap)} of {len(heatmap)} right** | | | |",
        "",
        f"BLEU: `{scores.get('bleu_signature', '?')}`  ",
        f"chrF: `{scores.get('chrf_signature', '?')}`",
        "",
        f"| new held-out split | domains | chrF (beam {beam}) | sentences |",
        "| --- | --- | ---: | ---: |",
        *(f"| {' | '.join(row)} |" for row in second_split_rows(translator, beam)),
        "",
        *held_out_lines(run_dir),
    ]
    return "\n".join(lines)


def main() -> int:
    overrides = sys.argv[1:]
    if any(o in ("-h", "--help") for o in overrides):
        print(__doc__)
        return 0
    run_dir = OUTPUT_DIR / RUN_NAME
    shutil.rmtree(run_dir, ignore_errors=True)
    code, seconds = run_training(overrides)
    if code != 0:
        print(f"error: scripts/train.py exited with code {code}; its message is above",
              file=sys.stderr)
        return code
    if not RunDir(run_dir).test_scores_file.is_file():
        print(f"error: {run_dir} has no test_scores.json, so the run did not finish; see "
              f"{RunDir(run_dir).log_file}", file=sys.stderr)
        return 2
    try:
        report = table(overrides, seconds, run_dir)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "default_run.md").write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
