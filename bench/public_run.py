"""A longer run on real public data: the shared public training sets + the embedded corpus.

    python bench/public_run.py                      # 30 minutes, configs/default.yaml's recipe
    python bench/public_run.py --minutes 5 train.threads=1

Reads ../shared/data/public (benchmarks only; see its README): trains on every set there that
is training data — tatoeba_manythings, tico19, ntrex128, joshua_wiki (train4: each Hindi
sentence with each of its crowd references), ud_pud, xquad questions — plus the 30 WPT-05
sentence pairs (never their gold links) and the embedded corpus's train split; dev is the
embedded dev split. Guided alignment's word links come from eflomal, run by the trainer on
these train rows (pip install -e '.[align]'). Then it scores FLORES dev, IITB dev and the
embedded test split with beam 5 (translator.metrics.corpus_scores) and prints a table, also
written to bench/results/public_run.md. Score the run's alignments with
`python bench/alignment_bench.py --run bench/results/public-run/run`.
Targets (issue 12): FLORES dev chrF ≥ 32, IITB dev chrF ≥ 30 (beam 5) after 30 minutes.
"""

import argparse
import sys
import time
from pathlib import Path

from translator.config import load_config
from translator.data import embedded_corpus_dir, normalize
from translator.metrics import corpus_scores
from translator.training import train
from translator.translate import Translator

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = ROOT.parent / "shared" / "data" / "public"
OUT = ROOT / "bench" / "results" / "public-run"
TRAIN_SETS = ["tatoeba_manythings/train", "tico19/test", "ntrex128/test", "joshua_wiki/train4",
              "ud_pud/test", "xquad/questions", "wpt05_align_dev/dev"]
EVAL_SETS = {"FLORES dev": "flores/dev", "IITB dev": "iitb_wmt14/dev"}


def read_pairs(prefix: Path) -> list[tuple[str, str]]:
    hindi = prefix.with_suffix(".hi").read_text(encoding="utf-8").split("\n")
    english = prefix.with_suffix(".en").read_text(encoding="utf-8").split("\n")
    return [(h, e) for h, e in zip(hindi, english) if h.strip() and e.strip()]


def write_train(path: Path) -> dict[str, int]:
    counts, rows = {}, []
    for name in TRAIN_SETS:
        pairs = read_pairs(PUBLIC / name)
        counts[name] = len(pairs)
        rows += [f"{h.replace(chr(9), ' ')}\t{e.replace(chr(9), ' ')}" for h, e in pairs]
    embedded = (embedded_corpus_dir() / "train.tsv").read_text(encoding="utf-8").split("\n")
    embedded = ["\t".join(line.split("\t")[:2]) for line in embedded if line]
    counts["embedded train"] = len(embedded)
    path.write_text("\n".join(rows + embedded) + "\n", encoding="utf-8")
    return counts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. train.threads=1")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    counts = write_train(OUT / "train.tsv")
    config = load_config(ROOT / "configs" / "default.yaml", [
        "data.source=files", f"data.train_path={OUT / 'train.tsv'}",
        f"data.dev_path={embedded_corpus_dir() / 'dev.tsv'}",
        f"data.test_path={embedded_corpus_dir() / 'test.tsv'}",
        f"train.max_minutes={args.minutes}", "train.max_steps=1000000", "train.eval_every=500",
        f"train.output_dir={OUT}", "train.run_name=run", "train.overwrite=true",
        *args.overrides])
    started = time.time()
    run_dir, code = train(config)
    if code != 0:
        print(f"error: training stopped with exit code {code}", file=sys.stderr)
        return code
    translator = Translator.from_run(run_dir, device="cpu")
    lines = [f"## Public-data run ({time.strftime('%Y-%m-%d')}, {args.minutes:g} training "
             f"minutes, {(time.time() - started) / 60:.1f} min wall)", "",
             "train pairs read: " + ", ".join(f"{k} {v:,}" for k, v in counts.items()), "",
             "| set | sentences | BLEU | chrF (beam 5) |", "| --- | ---: | ---: | ---: |"]
    for label, name in EVAL_SETS.items():
        pairs = [(normalize(h), normalize(e)) for h, e in read_pairs(PUBLIC / name)]
        hypotheses = [t.text for t in translator.translate([h for h, _ in pairs], beam_size=5,
                                                            need_attention=False)]
        scores = corpus_scores(hypotheses, [e for _, e in pairs], metrics=("bleu", "chrf"))
        lines.append(f"| {label} | {len(pairs)} | {scores['bleu']:.1f} | {scores['chrf']:.1f} |")
        print(lines[-1], flush=True)
    test = (run_dir / "test_scores.json").read_text(encoding="utf-8")
    lines += ["", f"embedded test (the run's own score): `{' '.join(test.split())}`"]
    report = "\n".join(lines)
    print(report)
    (OUT.parent / "public_run.md").write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
