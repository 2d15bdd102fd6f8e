"""The model in one page (translator.page): how big the page is, how fast it translates in
headless Chromium beside our PyTorch greedy search, and how often it writes what we write.

    python bench/page_bench.py --run runs/latest [--sentences 100]

For float16 and int8 weights: the page's size; greedy translations of the first N sentences
of the embedded test split, timed inside the page (performance.now around the JavaScript
decoder, attention included, one browser thread: JavaScript runs on one); ours on one
PyTorch thread, greedy with attention, both batched as `translate` does (32 a batch) and one
sentence at a time; the share of sentences whose tokens equal ours and the chrF of each
against the references. Prints a Markdown table with the CPU's model name.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
import time
from pathlib import Path

import sacrebleu
import torch

from translator.corpus import read_split
from translator.direction import Direction
from translator.page import export_page
from translator.translate import Translator


def cpu_name() -> str:
    info = Path("/proc/cpuinfo")
    names = re.findall(r"model name\s*:\s*(.+)", info.read_text()) if info.is_file() else []
    return f"{names[0].strip()} ({len(names)} threads)" if names else "unknown CPU"


def test_pairs(direction: Direction, count: int) -> list[tuple[str, str]]:
    """(source, reference) of the first ``count`` test pairs, in the run's reading direction."""
    hindi_first = direction.showcase() == "hi-en"
    rows = read_split("test")[:count]
    return [(h, e) if hindi_first else (e, h) for h, e, _ in rows]


def ours(translator: Translator, sources: list[str], batch_size: int) -> tuple[list, float]:
    started = time.perf_counter()
    found = translator.translate(sources, beam_size=1, batch_size=batch_size)
    return found, time.perf_counter() - started


def in_chromium(page_file: Path, sources: list[str]) -> tuple[list[dict], float]:
    """The page's translations of ``sources`` and the seconds they took inside the page."""
    from playwright.sync_api import sync_playwright

    chromium = shutil.which("chromium")
    if chromium is None:
        raise SystemExit("no chromium on PATH (apt-get install chromium)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium,
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        page.set_default_timeout(600_000)
        page.goto(page_file.resolve().as_uri())
        page.wait_for_function("window.pageModel && window.pageModel.ready()")
        found = page.evaluate("""sources => {
            const started = performance.now();
            const results = sources.map((s) => pageModel.translate(s));
            const ms = performance.now() - started;
            return {ms, results: results.map((r) => ({tokens: r.tokens, text: r.text}))};
        }""", sources)
        browser.close()
    return found["results"], found["ms"] / 1000


def chrf(hypotheses: list[str], references: list[str]) -> float:
    return sacrebleu.corpus_chrf(hypotheses, [references]).score


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the run folder")
    parser.add_argument("--sentences", type=int, default=100)
    args = parser.parse_args()
    torch.set_num_threads(1)
    translator = Translator.from_run(args.run, device="cpu")
    pairs = test_pairs(translator.direction, args.sentences)
    sources, references = [s for s, _ in pairs], [r for _, r in pairs]
    ours(translator, sources[:5], 32)  # warm-up
    batched, batched_seconds = ours(translator, sources, 32)
    single, single_seconds = ours(translator, sources, 1)
    single_same = sum(a.tokens == b.tokens for a, b in zip(single, batched)) / len(sources)
    rows = [("ours, PyTorch float32, batches of 32", "", len(sources) / batched_seconds,
             1.0, chrf([t.text for t in batched], references)),
            ("ours, PyTorch float32, one at a time", "", len(sources) / single_seconds,
             single_same, chrf([t.text for t in single], references))]
    with tempfile.TemporaryDirectory() as folder:
        for weights in ("float16", "int8"):
            path = export_page(args.run, Path(folder) / f"{weights}.html", weights)
            found, seconds = in_chromium(path, sources)
            same = sum(f["tokens"] == t.tokens for f, t in zip(found, batched)) / len(sources)
            rows.append((f"page, {weights}, Chromium", f"{path.stat().st_size / 1e6:.2f} MB",
                         len(sources) / seconds, same, chrf([f["text"] for f in found],
                                                            references)))
    print(f"run {args.run} ({translator.model.num_parameters():,} parameters, "
          f"{translator.direction.arrow}); {len(sources)} test sentences, greedy; {cpu_name()}")
    print()
    print("| decoder | page size | sentences/s | same tokens as ours | chrF | chrF − ours |")
    print("|---|---|---|---|---|---|")
    base = rows[0][4]
    for name, size, speed, same, score in rows:
        print(f"| {name} | {size or '–'} | {speed:.1f} | {100 * same:.0f} % | {score:.2f} | "
              f"{score - base:+.2f} |")


if __name__ == "__main__":
    main()
