"""Outputs of a trained run folder, recorded with one version of the code and compared with
another: the check that a refactoring changed no behaviour (issue 11).

    python bench/refactor_check.py record  --run RUN --out /tmp/before.json
    python bench/refactor_check.py compare --run RUN --against /tmp/before.json
    python bench/refactor_check.py compare-runs RUN_A RUN_B     # two trainings, same config

`record` loads RUN (as `translator.translate.Translator` does) and writes, for the first 50 dev
sentences of the run's data: greedy and beam-5 translations (text, tokens, score, the 2-best
list), a hash of the beam's cross-attention of every sentence, one long input that the
Translator splits, the showcase sentences translated with their attention (greedy and beam 4,
as the heatmaps draw them), forced-alignment Pharaoh links of the dev pairs (default layer and
layer 0) and corpus BLEU/chrF/chrF++ of the beam output. `compare` records again with the code
on the path and lists every difference (exit 1 if there is one). `compare-runs` compares two
run folders trained from the same config: metrics (without timings), test scores and
hypotheses, the showcase heatmaps' JSON, config.yaml and every checkpoint tensor.

Only public calls that both versions have are used, so the same file runs against either.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout, uninstalled

from translator import alignment  # noqa: E402
from translator.corpus import SHOWCASE  # noqa: E402
from translator.data import load_splits  # noqa: E402
from translator.translate import Translator  # noqa: E402

try:  # where corpus_scores lives after the refactoring
    from translator.metrics import corpus_scores  # noqa: E402
except ImportError:  # before it
    from translator.translate import corpus_scores  # noqa: E402

SENTENCES = 50
TIMING_KEYS = ("tokens_per_second",)


def digest(tensor: torch.Tensor | None) -> str | None:
    if tensor is None:
        return None
    return hashlib.sha256(tensor.float().contiguous().numpy().tobytes()).hexdigest()[:16]


def translations(translator: Translator, texts: list[str], beam: int, n_best: int,
                 attention: bool) -> list[dict]:
    records = []
    for t in translator.translate(texts, beam_size=beam, n_best=n_best,
                                  need_attention=attention):
        records.append({"text": t.text, "tokens": t.tokens, "score": round(t.score, 5),
                        "nbest": [[n.text, round(n.score, 5)] for n in t.nbest],
                        "warnings": t.warnings, "attention": digest(t.attention),
                        "attention_sum": None if t.attention is None else
                        round(float(t.attention.sum()), 4)})
    return records


def showcase_translation(translator: Translator, source: str, beam: int) -> tuple:
    """(text, attention, source pieces, target pieces) as the heatmaps of issue 11's code drew
    them: no repetition bans, length penalty 1."""
    if hasattr(alignment, "translate_with_attention"):  # before issue 23
        return alignment.translate_with_attention(translator.model, translator.tokenizer,
                                                  source, beam_size=beam)
    result = translator.translate([source], beam_size=beam, batch_size=1, need_attention=True,
                                  no_repeat_ngram=0, no_doubled_words=False, length_penalty=1.0)
    return result[0].text, result[0].attention.float().cpu(), result[0].source_pieces, \
        result[0].target_pieces


def pharaoh_line(links: list) -> str:
    if hasattr(alignment, "format_pharaoh"):  # before issue 23
        return alignment.format_pharaoh(links)
    from translator.links import format_line
    return format_line(links)


def record(run: Path) -> dict:
    torch.set_num_threads(1)
    translator = Translator.from_run(run, device="cpu")
    dev = load_splits(translator.config.data).splits["dev"][:SENTENCES]
    sources = [p.source for p in dev]
    long_input = " ".join(sources[:40])
    result: dict = {
        "greedy": translations(translator, sources, 1, 1, False),
        "beam5": translations(translator, sources, 5, 2, True),
        "long_input": translations(translator, [long_input], 3, 1, True),
    }
    hypotheses = [r["text"] for r in result["beam5"]]
    scores = corpus_scores(hypotheses, [p.target for p in dev])
    result["scores"] = {k: round(v, 4) if isinstance(v, float) else v for k, v in scores.items()}
    showcase = []
    for hindi, english in SHOWCASE:
        source = hindi if translator.direction == "hi-en" else english
        for beam in (1, 4):
            text, attention, source_pieces, target_pieces = showcase_translation(
                translator, source, beam)
            showcase.append({"beam": beam, "text": text, "attention": digest(attention),
                             "source_pieces": source_pieces, "target_pieces": target_pieces})
    result["showcase"] = showcase
    pairs = [(p.source, p.target) for p in dev]
    for layer in (None, 0):
        links = alignment.align_pairs(translator.model, translator.tokenizer, pairs, layer=layer)
        result[f"pharaoh_layer_{layer}"] = [pharaoh_line(x) for x in links]
    return result


def differences(before, after, where: str = "") -> list[str]:
    if isinstance(before, dict) and isinstance(after, dict):
        found = []
        for key in sorted(set(before) | set(after)):
            if key not in before or key not in after:
                found.append(f"{where}/{key}: only in {'after' if key in after else 'before'}")
            else:
                found += differences(before[key], after[key], f"{where}/{key}")
        return found
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after))
                for d in differences(b, a, f"{where}[{i}]")]
    return [] if before == after else [f"{where}: {before!r} != {after!r}"]


def report(found: list[str], checked: str) -> int:
    if found:
        print(f"{len(found)} difference(s) in {checked}:")
        print("\n".join(f"  {line}" for line in found[:40]))
        return 1
    print(f"identical: {checked}")
    return 0


def jsonl(path: Path) -> list[dict]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    return [{k: v for k, v in row.items() if k not in TIMING_KEYS} for row in rows]


def compare_runs(a: Path, b: Path) -> int:
    found = differences(jsonl(a / "metrics.jsonl"), jsonl(b / "metrics.jsonl"), "metrics.jsonl")
    for name in ("test_scores.json", "test_hypotheses.txt", "config.yaml",
                 *sorted(p.relative_to(a).as_posix() for p in (a / "heatmaps").glob("*.json"))):
        text_a, text_b = (a / name).read_text(encoding="utf-8"), (b / name).read_text(
            encoding="utf-8")
        if name == "config.yaml":  # the run's own name and folder differ by construction
            text_a, text_b = (
                "\n".join(line for line in t.splitlines()
                          if not line.strip().startswith(("run_name:", "output_dir:")))
                for t in (text_a, text_b))
        if text_a != text_b:
            found.append(f"{name} differs")
    checkpoints = sorted(p.name for p in (a / "checkpoints").glob("*.pt"))
    if checkpoints != sorted(p.name for p in (b / "checkpoints").glob("*.pt")):
        found.append("different checkpoint files")
    for name in checkpoints:
        state_a = torch.load(a / "checkpoints" / name, weights_only=False)
        state_b = torch.load(b / "checkpoints" / name, weights_only=False)
        for key, tensor in state_a["model"].items():
            if not torch.equal(tensor, state_b["model"][key]):
                found.append(f"{name}: model weight {key} differs")
        for key in ("step", "best", "sampler", "tokenizer", "evaluations_without_improvement"):
            if state_a.get(key) != state_b.get(key):
                found.append(f"{name}: {key} differs")
    return report(found, f"{a} and {b} (metrics, test scores, hypotheses, heatmap JSON, "
                  f"config, {len(checkpoints)} checkpoints)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    record_parser = commands.add_parser("record", help="write a run's outputs to a JSON file")
    record_parser.add_argument("--run", type=Path, required=True)
    record_parser.add_argument("--out", type=Path, required=True)
    compare_parser = commands.add_parser("compare", help="record again and compare")
    compare_parser.add_argument("--run", type=Path, required=True)
    compare_parser.add_argument("--against", type=Path, required=True)
    runs_parser = commands.add_parser("compare-runs", help="two trainings of one config")
    runs_parser.add_argument("runs", type=Path, nargs=2)
    args = parser.parse_args()
    if args.command == "compare-runs":
        return compare_runs(*args.runs)
    outputs = record(args.run)
    if args.command == "record":
        args.out.write_text(json.dumps(outputs, ensure_ascii=False, indent=1) + "\n",
                            encoding="utf-8")
        print(f"wrote {args.out}")
        return 0
    before = json.loads(args.against.read_text(encoding="utf-8"))
    return report(differences(before, outputs), f"{args.run} against {args.against}")


if __name__ == "__main__":
    sys.exit(main())
