"""Decoding speed: greedy and beam search, with and without the key/value cache.

    python bench/decode_bench.py --run runs/latest            # the embedded test split
    python bench/decode_bench.py --run runs/smoke --sentences 100 --device cuda

Translates the embedded corpus's test split (sources in the run's direction) in batches of
similar length and prints a Markdown table: sentences/s, output tokens/s (the chosen
translations' tokens, EOS included) and the cache's speed-up. Cached and uncached decoding
must produce the same tokens; the table says whether they did.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from translator.batching import source_tensor
from translator.data import DataConfig, load_splits
from translator.errors import TranslatorError
from translator.search import beam_search, greedy_search
from translator.translate import Translator, max_source_pieces


def batches(translator: Translator, sources: list[str], batch_size: int) -> list[torch.Tensor]:
    tok = translator.tokenizer
    limit = max_source_pieces(translator.model, tok)
    ids = sorted((tok.encode_source(s)[:limit] for s in sources), key=len)
    return [source_tensor(ids[i : i + batch_size], tok.pad_id, tok.eos_id).to(translator.device)
            for i in range(0, len(ids), batch_size)]


def decode(translator: Translator, source: torch.Tensor, beam: int, use_cache: bool
           ) -> list[list[int]]:
    tok, model = translator.tokenizer, translator.model
    if beam == 1:
        found = greedy_search(model, source, tok.bos_id, tok.eos_id, use_cache=use_cache,
                              need_attention=False)
    else:
        found = [nbest[0] for nbest in beam_search(model, source, tok.bos_id, tok.eos_id, beam,
                                                   use_cache=use_cache, need_attention=False)]
    return [h.tokens for h in found]


def run(translator: Translator, sources: list[torch.Tensor], beam: int, use_cache: bool
        ) -> tuple[float, list[list[int]]]:
    decode(translator, sources[0][:2], beam, use_cache)  # warm-up
    if translator.device.type == "cuda":
        torch.cuda.synchronize()
    started = time.perf_counter()
    outputs = [tokens for source in sources for tokens in decode(translator, source, beam,
                                                                   use_cache)]
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
