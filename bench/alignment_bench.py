"""Which cross-attention aligns words best, and how it compares with eflomal: AER on WPT-05 hi–en.

    python bench/alignment_bench.py --run bench/results/RUN   # score an already-trained run
    python bench/alignment_bench.py --minutes 60              # train one on public data, score it
    python bench/alignment_bench.py --minutes 2 model.layers=2  # config overrides go last
    python bench/alignment_bench.py --eflomal-only            # only the eflomal baseline
    python bench/alignment_bench.py --run RUN --reference embedded-test --no-eflomal

With ``--reference embedded-test`` the model is scored instead against the eflomal links that
ship with the embedded corpus's test split (460 pairs the model never trained on, in the
domains of the default run): silver links, not gold, so this AER says how closely attention
on unseen in-domain sentences reproduces the aligner that taught it, not how right it is.

Forced alignment (teacher forcing) of the 30 sentence pairs of ../shared/data/public/
wpt05_align_dev, pieces merged to words, EOS dropped, one link per target word (the argmax),
scored against the gold links (its first index is the English word) with
AER = 1 − 2|A∩G| / (|A| + |G|). Each layer is scored with its heads averaged, and each head
alone; "shifted" takes a word's row from the step where that word is the decoder's input
instead of its output (Shift-Att, Chen et al., 2020). Without --run, a model is trained first
with translator.training.train on every public set plus the embedded corpus's train split and
the alignment set's own sentence pairs (never its gold links), for --minutes of wall time.

The eflomal baseline (translator.links, needs ``pip install -e '.[align]'``) aligns, without
supervision, (a) the pairs that training run sees (the public sets + the embedded train split,
cleaned as training cleans them) and (b) the embedded corpus's three splits alone (what
scripts/build_corpus.py aligns to ship links), each with the 30 WPT-05 sentence pairs added
(never their gold links), and scores its forward and reverse links and every symmetrisation.
eflomal cannot be seeded, so each is run --repeats times: the mean AER and the range.
Reference points on the full 90-sentence set: fast_align 0.672, efmaral 0.483.

Beside attention, the attribution of each target word's log-probability to the source words
(`translator.alignment.attribution_matrix`: input × gradient, and integrated gradients with
--ig-steps points), merged to words as the explorer shows it, its argmax links scored the same
way, with the seconds each took (issue 33: which of the two the explorer shows, and why).
"""

import argparse
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from translator.alignment import (
    DEFAULT_LAYER,
    alignment_error_rate,
    attribution_matrix,
    attribution_words,
    hard_links,
    merge_to_words,
    piece_words,
    teacher_forced_attentions,
)
from translator.alignment import (
    shifted as shifted_rows,
)
from translator.config import load_config
from translator.corpus import SPLITS, read_split, read_split_links
from translator.data import embedded_corpus_dir, load_splits, normalize
from translator.errors import TranslatorError
from translator.links import (
    SYMMETRIZATIONS,
    Link,
    read_pharaoh,
    run_eflomal_directions,
    swap,
    symmetrize,
    word_counts,
)
from translator.training import train
from translator.translate import Translator

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO.parent / "shared" / "data" / "public"
ALIGNMENT_SET = "wpt05_align_dev"
REFERENCES = "fast_align 0.672, efmaral 0.483 (full 90-sentence set)"
EFLOMAL_VIEWS = ("forward", "reverse", *SYMMETRIZATIONS)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, help="a trained run folder to score (else: train)")
    parser.add_argument("--minutes", type=float, default=60.0,
                        help="wall-clock training budget when no --run is given")
    parser.add_argument("--config", type=Path, default=REPO / "configs" / "default.yaml")
    parser.add_argument("--data", type=Path, default=PUBLIC, help="the public data folder")
    parser.add_argument("--output-dir", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--device", default="auto", help="auto, cpu, cuda, ...")
    parser.add_argument("--eflomal-only", action="store_true",
                        help="only the eflomal baseline: no model is trained or scored")
    parser.add_argument("--no-eflomal", action="store_true", help="skip the eflomal baseline")
    parser.add_argument("--repeats", type=int, default=3,
                        help="eflomal runs per corpus (it cannot be seeded)")
    parser.add_argument("--reference", choices=["wpt05", "embedded-test"], default="wpt05",
                        help="wpt05: gold links (default); embedded-test: the shipped eflomal "
                             "links of the embedded test split (silver, in-domain)")
    parser.add_argument("--ig-steps", type=int, default=16,
                        help="integrated gradients' points between zero and the embeddings "
                        "(0: input × gradient only)")
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


def training_config(args: argparse.Namespace, train_path: Path):
    """The config of the bench's training run, reading its pairs from ``train_path``."""
    return load_config(args.config, [
        "data.source=files", "data.direction=hi-en", f"data.train_path={train_path}",
        f"data.dev_path={embedded_corpus_dir() / 'dev.tsv'}", "data.test_path=null",
        f"train.max_minutes={args.minutes}", "train.max_steps=1000000",
        f"train.device={args.device}", f"train.output_dir={args.output_dir}",
        f"train.run_name=alignment-{time.strftime('%Y%m%d-%H%M%S')}", *args.overrides])


def train_on_public_data(args: argparse.Namespace) -> Path:
    args.output_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as folder:
        train_path = Path(folder) / "train.tsv"
        count = write_training_tsv(args.data, train_path)
        print(f"training for {args.minutes:g} minutes on {count:,} pairs ...", file=sys.stderr)
        run_dir, code = train(training_config(args, train_path))
    if code != 0:
        raise TranslatorError(f"training stopped with exit code {code}")
    return run_dir


def read_alignment_set(folder: Path) -> tuple[list[tuple[str, str]], list[list[Link]]]:
    """The (hindi, english) pairs and their gold links, Hindi-first (the file writes the
    English word first), checked against the sentences."""
    hindi = (folder / "dev.hi").read_text(encoding="utf-8").splitlines()
    english = (folder / "dev.en").read_text(encoding="utf-8").splitlines()
    gold = read_pharaoh(folder / "dev.en-hi.pharaoh", word_counts(hindi), word_counts(english),
                        reverse=True)
    return list(zip(hindi, english)), gold


def read_embedded_test() -> tuple[list[tuple[str, str]], list[list[Link]]]:
    """The embedded test split's (hindi, english) pairs and its shipped Hindi-first links."""
    return [(hindi, english) for hindi, english, _ in read_split("test")], \
        read_split_links("test")


def read_reference(reference: str, data: Path) -> tuple[list[tuple[str, str]],
                                                         list[list[Link]], str]:
    """(hindi, english) pairs, their Hindi-first links and the set's name for ``reference``:
    "wpt05" (gold, in ``data``) or "embedded-test" (silver: the shipped eflomal links)."""
    if reference == "wpt05":
        return *read_alignment_set(data / ALIGNMENT_SET), ALIGNMENT_SET
    return *read_embedded_test(), "the embedded test split (silver: its shipped eflomal links)"


def in_direction(pairs: list[tuple[str, str]], gold: list[list[Link]],
                 source_side: str) -> tuple[list[tuple[str, str]], list[list[Link]]]:
    """Pairs as (source, target) and links as (source word, target word) for the model."""
    if source_side == "hi":
        return pairs, gold
    return [(english, hindi) for hindi, english in pairs], [swap(links) for links in gold]


def score(attentions, gold, view, shifted: bool = False) -> float:
    """AER of the argmax links of ``view(attention)`` [T+1, S+1] over all sentences."""
    predicted = []
    for attention, source_pieces, target_pieces in attentions:
        weights = view(attention)
        if shifted:
            weights = shifted_rows(weights)
        predicted.append(hard_links(merge_to_words(weights, source_pieces, target_pieces).weights))
    return alignment_error_rate(predicted, gold)


def diagonal_links(source_words: int, target_words: int) -> list[tuple[int, int]]:
    """Each target word linked to the source word at the same relative position."""
    return [(min(source_words - 1, int((j + 0.5) * source_words / target_words)), j)
            for j in range(target_words)]


def markdown_table(header: list[str], rows: list[list[str]], align: str = "---:") -> list[str]:
    """A Markdown table: the first column left-aligned, the others as ``align``."""
    return ["| " + " | ".join(header) + " |",
            "| --- |" + f" {align} |" * (len(header) - 1),
            *("| " + " | ".join(row) + " |" for row in rows)]


def model_report(attentions, gold) -> list[str]:
    """The model's Markdown tables: layers (heads averaged), all layers, every head."""
    num_layers, num_heads = attentions[0][0].shape[:2]
    rows = []  # view, AER, AER shifted
    layer_scores = []
    for layer in range(num_layers):
        def layer_mean(attention, layer=layer):
            return attention[layer].mean(0)
        layer_scores.append(score(attentions, gold, layer_mean))
        rows.append([f"layer {layer}, mean of {num_heads} heads", f"{layer_scores[-1]:.3f}",
                     f"{score(attentions, gold, layer_mean, shifted=True):.3f}"])

    def everything(attention):
        return attention.mean((0, 1))
    rows.append(["all layers, mean of all heads", f"{score(attentions, gold, everything):.3f}",
                 f"{score(attentions, gold, everything, shifted=True):.3f}"])
    predicted = [diagonal_links(len(piece_words(s)[0]), len(piece_words(t)[0]))
                 for _, s, t in attentions]
    rows.append(["baseline: the diagonal", f"{alignment_error_rate(predicted, gold):.3f}", ""])
    head_scores = [[score(attentions, gold, lambda a, layer=layer, head=head: a[layer, head])
                    for head in range(num_heads)] for layer in range(num_layers)]
    best = min((s, layer, head) for layer, row in enumerate(head_scores)
               for head, s in enumerate(row))
    rows.append([f"best single head: layer {best[1]} head {best[2]}", f"{best[0]:.3f}", ""])
    lines = markdown_table(["view", "AER", "AER, shifted"], rows)

    lines += ["", *markdown_table(
        ["AER per head", *(f"head {h}" for h in range(num_heads))],
        [[f"layer {layer}", *(f"{s:.3f}" for s in row)] for layer, row in enumerate(head_scores)])]
    chosen = min(range(num_layers), key=layer_scores.__getitem__)
    lines.append(f"\nlowest AER of the head averages: layer {chosen} "
                 f"({layer_scores[chosen]:.3f}), DEFAULT_LAYER = {chosen - num_layers} counting "
                 f"from the top. Reference points: {REFERENCES}.")
    return lines


# ---------------------------------------------------------------- the eflomal baseline


@dataclass
class AlignerCorpus:
    """Sentence pairs eflomal aligns (the WPT-05 pairs are added after them)."""

    name: str
    pairs: list[tuple[str, str]]  # (hindi, english)
    strip_punctuation: bool = True  # see translator.links.aligner_words


def model_training_pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """(hindi, english): the pairs the bench's training run sees, cleaned as it cleans them
    (without the WPT-05 pairs, which the baseline adds itself)."""
    with tempfile.TemporaryDirectory() as folder:
        train_path = Path(folder) / "train.tsv"
        write_training_tsv(args.data, train_path)
        config = training_config(args, train_path)
        pairs = load_splits(config.data).splits["train"]
    hindi_first = config.data.direction == "hi-en"
    return [(p.source, p.target) if hindi_first else (p.target, p.source) for p in pairs]


def aligner_corpora(args: argparse.Namespace, wpt: list[tuple[str, str]]) -> list[AlignerCorpus]:
    """What the baseline aligns; add a corpus here to add a column."""
    held_out = {(normalize(hindi), normalize(english)) for hindi, english in wpt}
    public = [pair for pair in model_training_pairs(args) if pair not in held_out]
    embedded = [(h, e) for split in SPLITS for h, e, _ in read_split(split)]
    return [
        AlignerCorpus("public sets + embedded train", public),
        AlignerCorpus("embedded corpus (what build_corpus.py aligns)", embedded),
        AlignerCorpus("embedded corpus, punctuation left on the words", embedded, False),
    ]


def eflomal_scores(corpus: AlignerCorpus, wpt: list[tuple[str, str]], gold,
                   repeats: int) -> dict[str, list[float]]:
    """AER of every view of eflomal's links of the WPT-05 pairs, one per repeat."""
    scores: dict[str, list[float]] = {view: [] for view in EFLOMAL_VIEWS}
    pairs = corpus.pairs + wpt
    for repeat in range(repeats):
        started = time.perf_counter()
        forward, reverse = run_eflomal_directions(
            [h for h, _ in pairs], [e for _, e in pairs],
            strip_punctuation=corpus.strip_punctuation)
        forward, reverse = forward[-len(wpt):], reverse[-len(wpt):]
        print(f"eflomal on {corpus.name} ({len(pairs):,} pairs), run {repeat + 1}: "
              f"{time.perf_counter() - started:.0f} s", file=sys.stderr)
        scores["forward"].append(alignment_error_rate(forward, gold))
        scores["reverse"].append(alignment_error_rate(reverse, gold))
        for method in SYMMETRIZATIONS:
            links = [symmetrize(f, r, method) for f, r in zip(forward, reverse)]
            scores[method].append(alignment_error_rate(links, gold))
    return scores


def eflomal_report(args: argparse.Namespace, folder: Path) -> list[str]:
    """The baseline's table: one row per view, one column per aligned corpus."""
    wpt, gold = read_alignment_set(folder)
    corpora = aligner_corpora(args, wpt)
    columns = [eflomal_scores(corpus, wpt, gold, args.repeats) for corpus in corpora]
    names = {"forward": "forward alone (each English word → ≤ 1 Hindi word)",
             "reverse": "reverse alone (each Hindi word → ≤ 1 English word)"}
    rows = [[names.get(view, view),
             *(f"{statistics.mean(c[view]):.3f} ({min(c[view]):.3f}–{max(c[view]):.3f})"
               for c in columns)] for view in EFLOMAL_VIEWS]
    header = ["eflomal links", *(f"{c.name}, {len(c.pairs):,} + {len(wpt)} pairs"
                                 for c in corpora)]
    return [f"## eflomal baseline: AER on the {len(wpt)} pairs of {ALIGNMENT_SET}, mean of "
            f"{args.repeats} runs (min–max)\n", *markdown_table(header, rows)]


def main() -> int:
    args = parse_args()
    folder = args.data / ALIGNMENT_SET
    if args.reference == "embedded-test":
        args.no_eflomal = True  # the reference is eflomal's own output
    if not folder.is_dir() and args.reference == "wpt05":
        print(f"skipped: {folder} is absent; this benchmark needs the public data in "
              "../shared/data/public (pass --data DIR if it lives elsewhere).")
        return 0
    sections = []
    try:
        if not args.eflomal_only:
            sections.append(model_section(args))
        if not args.no_eflomal:
            sections.append(eflomal_report(args, folder))
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report = "\n\n".join("\n".join(lines) for lines in sections)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.reference == "wpt05" else f"-{args.reference}"
    (args.output_dir / f"alignment{suffix}.md").write_text(report + "\n", encoding="utf-8")
    print(report)
    return 0


def default_view_aer(run_dir: Path, reference: str, data: Path = PUBLIC) -> float | None:
    """AER of a run's default view (translator.alignment.DEFAULT_LAYER, heads averaged)
    against ``reference`` ("wpt05" or "embedded-test"); None when WPT-05 is absent. For
    bench/recipe_sweep.py's table."""
    if reference == "wpt05" and not (data / ALIGNMENT_SET).is_dir():
        return None
    translator = Translator.from_run(run_dir)
    pairs, gold, _ = read_reference(reference, data)
    pairs, gold = in_direction(pairs, gold, translator.direction.split("-")[0])
    attentions = teacher_forced_attentions(
        translator.model, translator.tokenizer, pairs, translator.device,
        full_context=translator.config.train.alignment_full_context)
    return score(attentions, gold, lambda attention: attention[DEFAULT_LAYER].mean(0))


def attribution_report(translator: Translator, pairs: list[tuple[str, str]], gold,
                       ig_steps: int) -> list[str]:
    """AER of the argmax links of the word-level attribution, input × gradient and
    integrated gradients, and the seconds each took for all pairs."""
    tokenizer, model = translator.tokenizer, translator.model
    rows = []
    methods = [("input × gradient", 1)]
    if ig_steps > 1:
        methods.append((f"integrated gradients, {ig_steps} steps", ig_steps))
    for name, steps in methods:
        started, predicted = time.perf_counter(), []
        for source, target in pairs:
            source_ids = tokenizer.tag_ids("en" if tokenizer.tags else None) + (
                tokenizer.encode_source(source))
            target_ids = tokenizer.encode_target(target)
            matrix = attribution_matrix(model, tokenizer, source_ids, target_ids, steps)
            tag = len(source_ids) - len(tokenizer.encode_source(source))
            words = attribution_words(matrix[:, tag:], tokenizer.source_pieces(source_ids[tag:]),
                                      tokenizer.target_pieces(target_ids))
            predicted.append(hard_links(words.weights))
        seconds = time.perf_counter() - started
        rows.append([f"attribution: {name}", f"{alignment_error_rate(predicted, gold):.3f}",
                     f"{seconds:.1f}"])
    return ["", *markdown_table(["view", "AER", "seconds"], rows)]


def model_section(args: argparse.Namespace) -> list[str]:
    """Train (or load) the run and score its cross-attention."""
    run_dir = args.run or train_on_public_data(args)
    translator = Translator.from_run(run_dir, device=args.device)
    direction = translator.direction
    pairs, gold, name = read_reference(args.reference, args.data)
    pairs, gold = in_direction(pairs, gold, direction.split("-")[0])
    attentions = teacher_forced_attentions(
        translator.model, translator.tokenizer, pairs, translator.device,
        full_context=translator.config.train.alignment_full_context)
    for (source, _), (_, source_pieces, _) in zip(pairs, attentions):
        if len(source.split()) != len(piece_words(source_pieces)[0]):
            raise TranslatorError(f"the pieces of {source!r} do not spell its words")
    return [f"## Attention alignment: {run_dir}, {direction}, {len(pairs)} sentence pairs of "
            f"{name}\n", *model_report(attentions, gold),
            *attribution_report(translator, pairs, gold, args.ig_steps)]


if __name__ == "__main__":
    sys.exit(main())
