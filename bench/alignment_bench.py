"""Which cross-attention aligns words best: AER of every decoder layer and head on WPT-05 hi–en.

    python bench/alignment_bench.py --run bench/results/RUN   # score an already-trained run
    python bench/alignment_bench.py --minutes 60              # train one on public data, score it
    python bench/alignment_bench.py --minutes 2 model.layers=2  # config overrides go last

Forced alignment (teacher forcing) of the 30 sentence pairs of ../shared/data/public/
wpt05_align_dev, pieces merged to words, EOS dropped, one link per target word (the argmax),
scored against the gold links (its first index is the English word) with
AER = 1 − 2|A∩G| / (|A| + |G|). Each layer is scored with its heads averaged, and each head
alone; "shifted" takes a word's row from the step where that word is the decoder's input
instead of its output (Shift-Att, Chen et al., 2020). Without --run, a model is trained first
with translator.training.train on every public set plus the embedded corpus's train split and
the alignment set's own sentence pairs (never its gold links), for --minutes of wall time.
Reference points on the full 90-sentence set: fast_align 0.672, efmaral 0.483.
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout, uninstalled

from translator.alignment import (  # noqa: E402
    alignment_error_rate,
    hard_links,
    merge_to_words,
    piece_words,
    read_pharaoh,
    teacher_forced_attentions,
)
from translator.config import load_config  # noqa: E402
from translator.data import embedded_corpus_dir  # noqa: E402
from translator.errors import TranslatorError  # noqa: E402
from translator.training import train  # noqa: E402
from translator.translate import Translator  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO.parent / "shared" / "data" / "public"
ALIGNMENT_SET = "wpt05_align_dev"
REFERENCES = "fast_align 0.672, efmaral 0.483 (full 90-sentence set)"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, help="a trained run folder to score (else: train)")
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="wall-clock training budget when no --run is given")
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "default.yaml")
    parser.add_argument("--data", type=Path, default=PUBLIC, help="the public data folder")
    parser.add_argument("--output-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    parser.add_argument("overrides", nargs="*", metavar="section.key=value",
                        help="config overrides for the training run")
    return parser.parse_args()


def parallel_files(data: Path) -> list[tuple[Path, Path]]:
    """Every line-aligned X.hi / X.en pair under the public data folder."""
    return [(hindi, hindi.with_suffix(".en")) for hindi in sorted(data.glob("*/*.hi"))
            if hindi.with_suffix(".en").is_file()]


def write_training_tsv(data: Path, path: Path) -> int:
    """hindi<TAB>english lines: the public sets, then the embedded train split."""
    rows = []
    for hindi_path, english_path in parallel_files(data):
        hindi = hindi_path.read_text(encoding="utf-8").splitlines()
        english = english_path.read_text(encoding="utf-8").splitlines()
        rows += [f"{h.replace(chr(9), ' ')}\t{e.replace(chr(9), ' ')}"
                 for h, e in zip(hindi, english)]
    rows += (embedded_corpus_dir() / "train.tsv").read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return len(rows)


def train_on_public_data(args: argparse.Namespace) -> Path:
    args.output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        train_path = Path(folder) / "train.tsv"
        count = write_training_tsv(args.data, train_path)
        print(f"training for {args.minutes:g} minutes on {count:,} pairs ...", file=sys.stderr)
        config = load_config(args.config, [
            "data.source=files", "data.direction=hi-en", f"data.train_path={train_path}",
            f"data.dev_path={embedded_corpus_dir() / 'dev.tsv'}", "data.test_path=null",
            f"train.max_minutes={args.minutes}", "train.max_steps=1000000",
            f"train.device={args.device}", f"train.output_dir={args.output_dir}",
            f"train.run_name=alignment-{time.strftime('%Y%m%d-%H%M%S')}", *args.overrides])
        run_dir, code = train(config)
    if code != 0:
        raise TranslatorError(f"training stopped with exit code {code}")
    return run_dir


def read_alignment_set(folder: Path, source_side: str) -> tuple[list[tuple[str, str]], list]:
    """(source, target) pairs in the model's direction and gold links as (source, target)."""
    hindi = (folder / "dev.hi").read_text(encoding="utf-8").splitlines()
    english = (folder / "dev.en").read_text(encoding="utf-8").splitlines()
    # The gold file's first index is the English word.
    gold = read_pharaoh(folder / "dev.en-hi.pharaoh", reverse=source_side == "hi")
    pairs = list(zip(hindi, english)) if source_side == "hi" else list(zip(english, hindi))
    return pairs, gold


def score(attentions, gold, view, shifted: bool = False) -> float:
    """AER of the argmax links of ``view(attention)`` [T+1, S+1] over all sentences."""
    predicted = []
    for attention, source_pieces, target_pieces in attentions:
        weights = view(attention)
        if shifted:  # the row of the step whose input is the word: rows 1..T (the last: EOS)
            weights = weights[1:]
        predicted.append(hard_links(merge_to_words(weights, source_pieces, target_pieces).weights))
    return alignment_error_rate(predicted, gold)


def diagonal_links(source_words: int, target_words: int) -> list[tuple[int, int]]:
    """Each target word linked to the source word at the same relative position."""
    return [(min(source_words - 1, int((j + 0.5) * source_words / target_words)), j)
            for j in range(target_words)]


def report(attentions, gold) -> None:
    """Print the Markdown tables: layers (heads averaged), all layers, every head."""
    num_layers, num_heads = attentions[0][0].shape[:2]
    print("| view | AER | AER, shifted |")
    print("| --- | ---: | ---: |")
    layer_scores = []
    for layer in range(num_layers):
        def layer_mean(attention, layer=layer):
            return attention[layer].mean(0)
        layer_scores.append(score(attentions, gold, layer_mean))
        print(f"| layer {layer}, mean of {num_heads} heads | {layer_scores[-1]:.3f} | "
              f"{score(attentions, gold, layer_mean, shifted=True):.3f} |")

    def everything(attention):
        return attention.mean((0, 1))
    print(f"| all layers, mean of all heads | {score(attentions, gold, everything):.3f} | "
          f"{score(attentions, gold, everything, shifted=True):.3f} |")
    predicted = [diagonal_links(len(piece_words(s)[0]), len(piece_words(t)[0]))
                 for _, s, t in attentions]
    print(f"| baseline: the diagonal | {alignment_error_rate(predicted, gold):.3f} | |")
    head_scores = [[score(attentions, gold, lambda a, layer=layer, head=head: a[layer, head])
                    for head in range(num_heads)] for layer in range(num_layers)]
    best = min((s, layer, head) for layer, row in enumerate(head_scores)
               for head, s in enumerate(row))
    print(f"| best single head: layer {best[1]} head {best[2]} | {best[0]:.3f} | |")

    print("\n| AER per head | " + " | ".join(f"head {h}" for h in range(num_heads)) + " |")
    print("| --- |" + " ---: |" * num_heads)
    for layer, row in enumerate(head_scores):
        print(f"| layer {layer} | " + " | ".join(f"{s:.3f}" for s in row) + " |")
    chosen = min(range(num_layers), key=layer_scores.__getitem__)
    print(f"\nlowest AER of the head averages: layer {chosen} ({layer_scores[chosen]:.3f}), "
          f"DEFAULT_LAYER = {chosen - num_layers} counting from the top. Reference points: "
          f"{REFERENCES}.")


def main() -> int:
    args = parse_args()
    folder = args.data / ALIGNMENT_SET
    if not folder.is_dir():
        print(f"skipped: {folder} is absent; this benchmark needs the public data in "
              "../shared/data/public (pass --data DIR if it lives elsewhere).")
        return 0
    try:
        run_dir = args.run or train_on_public_data(args)
        translator = Translator.from_run(run_dir, device=args.device)
        direction = translator.direction
        pairs, gold = read_alignment_set(folder, direction.split("-")[0])
        attentions = teacher_forced_attentions(translator.model, translator.tokenizer, pairs,
                                               translator.device)
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    for (source, _), (_, source_pieces, _) in zip(pairs, attentions):
        if len(source.split()) != len(piece_words(source_pieces)[0]):
            print(f"error: the pieces of {source!r} do not spell its words", file=sys.stderr)
            return 1

    print(f"## Attention alignment: {run_dir}, {direction}, {len(pairs)} sentence pairs of "
          f"{ALIGNMENT_SET}\n")
    report(attentions, gold)
    return 0


if __name__ == "__main__":
    sys.exit(main())
