"""Decoding speed: greedy and beam search, with and without the key/value cache.

    python bench/decode_bench.py --run runs/latest            # the embedded test split
    python bench/decode_bench.py --run runs/smoke --sentences 100 --device cuda
    python bench/decode_bench.py --run runs/latest --ct2     # and CTranslate2 (pip .[ct2])

Translates the embedded corpus's test split (sources in the run's direction) in batches of
similar length and prints a Markdown table: sentences/s, output tokens/s (the chosen
translations' tokens, EOS included) and the cache's speed-up. Cached and uncached decoding
must produce the same tokens; the table says whether they did. A third row per search records
what the model weighed (``--alternatives N``, default 5: each token's log-probability and its
step's N best tokens, `translator.search.TokenRecords`): its cost is the row's speed against
the cached one's, and it must not change the tokens either.

With --ct2 a second table compares whole translations (`Translator.translate` against
`translator.translate.Translator.from_export`: text in, text out) of ours and of the run's
CTranslate2 exports in float32 and int8, greedy and beam 5, on 1 and 2 CPU threads:
sentences/s, test chrF, and the share of outputs identical to ours. Both sides search with the
run's settings less the doubled-word ban, which CTranslate2 does not have.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import tempfile

from translator.batching import source_tensor
from translator.data import DataConfig, load_splits
from translator.errors import TranslatorError
from translator.metrics import corpus_scores
from translator.search import beam_search, greedy_search
from translator.translate import Translator, max_source_pieces


def batches(translator: Translator, sources: list[str], batch_size: int) -> list[torch.Tensor]:
    tok = translator.tokenizer
    limit = max_source_pieces(translator.model, tok)
    ids = sorted((tok.encode_source(s)[:limit] for s in sources), key=len)
    return [source_tensor(ids[i : i + batch_size], tok.pad_id, tok.eos_id).to(translator.device)
            for i in range(0, len(ids), batch_size)]


def decode(translator: Translator, source: torch.Tensor, beam: int, use_cache: bool,
           alternatives: int = 0) -> list[list[int]]:
    tok, model = translator.tokenizer, translator.model
    if beam == 1:
        found = greedy_search(model, source, tok.bos_id, tok.eos_id, use_cache=use_cache,
                              need_attention=False, alternatives=alternatives)
    else:
        found = [nbest[0] for nbest in beam_search(model, source, tok.bos_id, tok.eos_id, beam,
                                                   use_cache=use_cache, need_attention=False,
                                                   alternatives=alternatives)]
    return [h.tokens for h in found]


def run(translator: Translator, sources: list[torch.Tensor], beam: int, use_cache: bool,
        alternatives: int = 0) -> tuple[float, list[list[int]]]:
    decode(translator, sources[0][:2], beam, use_cache, alternatives)  # warm-up
    if translator.device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    outputs = [tokens for source in sources for tokens in decode(translator, source, beam,
                                                                   use_cache, alternatives)]
    if translator.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - started, outputs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--run", type=Path, default=None, help="run folder (default: newest)")
    parser.add_argument("--sentences", type=int, default=0, help="first N test sentences (0: all)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: default)")
    parser.add_argument("--alternatives", type=int, default=5,
                        help="the alternatives row's N (0: no such row)")
    parser.add_argument("--ct2", action="store_true",
                        help="also compare with CTranslate2 exports (float32, int8)")
    parser.add_argument("--ct2-only", action="store_true", help="only the CTranslate2 table")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    try:
        translator = Translator.from_run(args.run, device=args.device)
        data = DataConfig(source="embedded", direction=translator.direction)
        test = load_splits(data).splits["test"]
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    if args.sentences:
        test = test[: args.sentences]
    sources = batches(translator, [pair.source for pair in test], args.batch_size)
    params = translator.model.num_parameters()
    print(f"{len(test)} test sentences, batches of {args.batch_size}, {params:,} parameters, "
          f"device {translator.device}, {torch.get_num_threads()} CPU threads\n")
    if args.ct2_only:
        return ct2_table(args, translator, test)
    print("| search | KV cache | sentences/s | tokens/s | seconds | cache speed-up | same tokens |")
    print("|---|---|---:|---:|---:|---:|---|")
    for beam in (1, args.beam):
        name = "greedy" if beam == 1 else f"beam {beam}"
        timings = {}
        for use_cache in (True, False):
            seconds, outputs = run(translator, sources, beam, use_cache)
            tokens = sum(len(t) + 1 for t in outputs)
            timings[use_cache] = (seconds, outputs)
            same = "" if use_cache else ("yes" if outputs == timings[True][1] else "NO")
            speed_up = "" if use_cache else f"{seconds / timings[True][0]:.1f}×"
            print(f"| {name} | {'on' if use_cache else 'off'} | {len(outputs) / seconds:.1f} | "
                  f"{tokens / seconds:,.0f} | {seconds:.2f} | {speed_up} | {same} |", flush=True)
        if args.alternatives:
            seconds, outputs = run(translator, sources, beam, True, args.alternatives)
            same = "yes" if outputs == timings[True][1] else "NO"
            print(f"| {name}, {args.alternatives} alternatives | on | "
                  f"{len(outputs) / seconds:.1f} | {tokens / seconds:,.0f} | {seconds:.2f} | "
                  f"{seconds / timings[True][0]:.2f}× the time | {same} |", flush=True)
    return ct2_table(args, translator, test) if args.ct2 else 0


def ct2_table(args: argparse.Namespace, translator: Translator, test: list) -> int:
    """The second table: ours against CTranslate2, whole translations, 1 and 2 threads."""
    from translator.ct2 import export

    sources, references = [p.source for p in test], [p.target for p in test]
    with tempfile.TemporaryDirectory() as folder:
        try:
            exports = {q: export(translator.run_dir, Path(folder) / q, q)
                       for q in ("float32", "int8")}
        except TranslatorError as error:
            print(f"error: {error}", file=sys.stderr)
            return 2
        print(f"\n{len(sources)} test sentences, batches of {args.batch_size}, whole "
              "translations (text in, text out), no doubled-word ban on either side\n")
        print("| model | search | threads | sentences/s | chrF | same as ours |")
        print("|---|---|---:|---:|---:|---:|")
        for threads in (1, 2):
            torch.set_num_threads(threads)
            models = {"ours (PyTorch fp32)": translator}
            models |= {f"CTranslate2 {q}": Translator.from_export(path, "cpu", threads)
                       for q, path in exports.items()}
            for beam in (1, args.beam):
                ours_tokens = None
                for name, model in models.items():
                    settings = dict(beam_size=beam, no_doubled_words=False)
                    model.translate(sources[:8], need_attention=False, **settings)  # warm-up
                    started = time.perf_counter()
                    found = model.translate(sources, need_attention=False,
                                            batch_size=args.batch_size, **settings)
                    seconds = time.perf_counter() - started
                    chrf = corpus_scores([t.text for t in found], references, ["chrf"])["chrf"]
                    tokens = [t.tokens for t in found]
                    ours_tokens = ours_tokens or tokens
                    same = sum(a == b for a, b in zip(tokens, ours_tokens)) / len(tokens)
                    search = "greedy" if beam == 1 else f"beam {beam}"
                    print(f"| {name} | {search} | {threads} | {len(found) / seconds:.1f} | "
                          f"{chrf:.2f} | {same:.1%} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
