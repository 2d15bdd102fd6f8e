"""How much padding token batching saves, and how long data preparation takes.

    python bench/data_bench.py                  # the embedded corpus's train split
    python bench/data_bench.py --train my.tsv   # any hindi<TAB>english file

Prints Markdown: the padding fraction of length-bucketed token batches against fixed-size
batches of sentences in random order (both over SentencePiece ids, bos/eos included), and the
wall time of loading the data and training the tokenizer.
"""

import argparse
import random
import sys
import tempfile
import time

from translator.batching import TokenBatchSampler, padding_fraction
from translator.data import DataConfig, embedded_corpus_dir, load_splits
from translator.errors import TranslatorError
from translator.tokenizer import Tokenizer, TokenizerConfig


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--train", help="a hindi<TAB>english TSV instead of the embedded corpus")
    parser.add_argument("--vocab-size", type=int, default=4000)
    parser.add_argument("--model-type", default="unigram", choices=["unigram", "bpe"])
    parser.add_argument("--max-tokens", type=int, default=4096, help="token batch budget")
    parser.add_argument("--batch-size", type=int, default=32, help="fixed batch, in sentences")
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()


def fixed_size_batches(count: int, batch_size: int, seed: int) -> list[list[int]]:
    order = list(range(count))
    random.Random(seed).shuffle(order)
    return [order[i : i + batch_size] for i in range(0, count, batch_size)]


def main() -> int:
    args = parse_args()
    if args.train:
        data_cfg, corpus = DataConfig(source="files", train_path=args.train), args.train
    else:
        if not (embedded_corpus_dir() / "train.tsv").is_file():
            print(
                f"skipped: the embedded corpus is not built yet ({embedded_corpus_dir()} has no "
                "train.tsv); pass --train FILE.tsv to measure another corpus."
            )
            return 0
        data_cfg, corpus = DataConfig(), "embedded corpus"

    started = time.perf_counter()
    try:
        train = load_splits(data_cfg).splits["train"]
        loaded = time.perf_counter()
        tokenizer_cfg = TokenizerConfig(vocab_size=args.vocab_size, model_type=args.model_type)
        with tempfile.TemporaryDirectory() as out_dir:
            tokenizer = Tokenizer.train(
                tokenizer_cfg, [p.source for p in train], [p.target for p in train], out_dir
            )
    except TranslatorError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    trained = time.perf_counter()
    lengths = [
        (len(tokenizer.encode_source(p.source)) + 1, len(tokenizer.encode_target(p.target)) + 1)
        for p in train
    ]
    encoded = time.perf_counter()

    token_batches = list(TokenBatchSampler(lengths, args.max_tokens, args.seed))
    fixed_batches = fixed_size_batches(len(lengths), args.batch_size, args.seed)
    tokens = sum(s + t for s, t in lengths)
    print(
        f"## Data pipeline: {corpus}, train split, {len(train):,} pairs, {tokens:,} tokens "
        f"(SentencePiece {args.model_type}, {tokenizer.source_vocab_size:,} pieces)\n"
    )
    print("| batching | batches | sentences / batch | padding |")
    print("| --- | ---: | ---: | ---: |")
    for name, batches in (
        (f"token batches, <= {args.max_tokens} padded tokens, by length", token_batches),
        (f"fixed {args.batch_size} sentences, random order", fixed_batches),
    ):
        print(
            f"| {name} | {len(batches):,} | {len(lengths) / len(batches):.1f} "
            f"| {padding_fraction(batches, lengths):.1%} |"
        )
    print("\n| step | wall time |")
    print("| --- | ---: |")
    print(f"| load, normalise, filter (all splits) | {loaded - started:.2f} s |")
    print(f"| train SentencePiece | {trained - loaded:.2f} s |")
    print(f"| encode the train split | {encoded - trained:.2f} s |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
