"""Search options on the dev split: what each of the run's search settings is worth.

    python bench/search_options.py --run bench/results/default-run/run

Translates the embedded dev split (460 sentences) with a trained run and prints dev BLEU/chrF
and the output's length over the references' (in BLEU tokens) for: the repetition bans off and on
(`search.no_repeat_ngram`, `search.no_doubled_words`), beam sizes 1, 5 and 8, GNMT length
penalties α from 0.6 to 3.0 (`search.length_penalty`), and — not a package option, a rerank
done here — GNMT's coverage penalty β · Σ_j log(min(1, Σ_i a_ij)) over the 5-best list, a
the supervised layer's mean attention, for β from 0.2 to 1.0. Dev, not test: these are the
figures the defaults were chosen on. Writes bench/results/search_options.md too.
"""

import argparse
import sys
import time
from pathlib import Path

import sacrebleu
import torch

from translator.data import embedded_corpus_dir
from translator.metrics import corpus_scores
from translator.translate import Translation, Translator

ROOT = Path(__file__).resolve().parents[1]

# (name, beam, no_repeat_ngram, no_doubled_words, length penalty α)
SETTINGS = [
    ("no bans", 5, 0, False, 1.0),
    ("bans (the default)", 5, 3, True, 1.0),
    ("bans, greedy", 1, 3, True, 1.0),
    ("bans, beam 8", 8, 3, True, 1.0),
    *[(f"bans, α {alpha}", 5, 3, True, alpha) for alpha in (0.6, 1.4, 1.8, 2.2, 3.0)],
]
COVERAGE_BETAS = (0.2, 0.5, 1.0)


def dev_pairs() -> list[tuple[str, str]]:
    lines = (embedded_corpus_dir() / "dev.tsv").read_text(encoding="utf-8").splitlines()
    return [tuple(line.split("\t")[:2]) for line in lines]


def coverage(translation: Translation) -> float:
    """Σ over source pieces of log(min(1, attention they received)): 0 when every source
    piece got at least a whole row's worth, the more negative the more was left out."""
    weights = translation.attention[-2].mean(0)[:, :-1]  # the default view, without EOS
    return weights.sum(0).clamp(1e-6, 1.0).log().sum().item()


def row(name: str, hypotheses: list[str], references: list[str], seconds: float) -> str:
    scores = corpus_scores(hypotheses, references)
    bleu = sacrebleu.corpus_bleu(hypotheses, [references])
    return (f"| {name} | {scores['bleu']:.2f} | {scores['chrf']:.2f} | "
            f"{bleu.sys_len / bleu.ref_len:.3f} | {seconds:.0f} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=ROOT / "bench" / "results" / "default-run"
                        / "run")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    translator = Translator.from_run(args.run, device="cpu")
    pairs = dev_pairs()
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    lines = [f"## Search options on the embedded dev split ({len(pairs)} sentences): {args.run}",
             "", "| search | dev BLEU | dev chrF | output / reference length (BLEU tokens) "
             "| seconds |",
             "|---|---:|---:|---:|---:|"]
    for name, beam, ngram, doubled, alpha in SETTINGS:
        translator.set_search(no_repeat_ngram=ngram, no_doubled_words=doubled,
                              length_penalty=alpha)
        started = time.perf_counter()
        results = translator.translate(sources, beam_size=beam, need_attention=False)
        lines.append(row(name, [r.text for r in results], references,
                         time.perf_counter() - started))
        print(lines[-1], file=sys.stderr, flush=True)
    translator.set_search(no_repeat_ngram=3, no_doubled_words=True, length_penalty=1.0)
    started = time.perf_counter()
    nbest = translator.translate(sources, beam_size=5, n_best=5, need_attention=True)
    seconds = time.perf_counter() - started
    for beta in COVERAGE_BETAS:
        chosen = [max(r.nbest, key=lambda t: t.score + beta * coverage(t)).text for r in nbest]
        lines.append(row(f"bans, 5-best reranked with coverage β {beta}", chosen, references,
                         seconds))
    table = "\n".join(lines)
    print(table)
    (ROOT / "bench" / "results").mkdir(parents=True, exist_ok=True)
    (ROOT / "bench" / "results" / "search_options.md").write_text(table + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
