"""Translate files with a trained JoeyNMT model and time it.

The JoeyNMT half of the decoding measurement of bench/joeynmt_bench.py; it runs under
bench/.venv-joeynmt's Python, not ours:

    bench/.venv-joeynmt/bin/python bench/joeynmt/decode.py CONFIG CHECKPOINT OUT.json \\
        --input flores=bench/results/data/flores_dev.hi --beams 1 5 --threads 2

Writes {name: {beam: {"seconds": s, "hypotheses": [...]}}} to OUT.json. The clock covers what
a user waits for: handing the sentences to JoeyNMT and predict() (tokenising, batching,
search, detokenising); not loading the model.
"""

import argparse
import json
import time
from pathlib import Path

import torch
from joeynmt.config import load_config, parse_global_args
from joeynmt.helpers_for_ddp import get_logger
from joeynmt.prediction import predict, prepare


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("config")
    parser.add_argument("checkpoint")
    parser.add_argument("output")
    parser.add_argument("--input", action="append", required=True, metavar="NAME=FILE",
                        help="a source file to translate (one sentence a line)")
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--log", help="write JoeyNMT's log here")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    torch.set_num_threads(args.threads)
    if args.log:
        get_logger("", log_file=args.log)
    cfg = load_config(Path(args.config))
    cfg["testing"]["load_model"] = args.checkpoint
    joey = parse_global_args(cfg, rank=0, mode="translate")
    model, _, _, stream = prepare(joey, rank=0, mode="translate")

    def translate(lines: list[str], beam: int) -> list[str]:
        stream.reset_cache()
        for line in lines:
            stream.set_item(line)
        _, _, hypotheses, *_ = predict(
            model=model, data=stream, device=joey.device, n_gpu=joey.n_gpu,
            compute_loss=False, normalization="none", num_workers=joey.num_workers,
            args=joey.test._replace(beam_size=beam, n_best=1), autocast=joey.autocast)
        return hypotheses

    results: dict[str, dict[int, dict]] = {}
    for item in args.input:
        name, path = item.split("=", 1)
        lines = [line for line in Path(path).read_text(encoding="utf-8").split("\n") if line]
        results[name] = {}
        for beam in args.beams:
            started = time.perf_counter()
            hypotheses = translate(lines, beam)
            seconds = time.perf_counter() - started
            results[name][beam] = {"seconds": seconds, "hypotheses": hypotheses}
    Path(args.output).write_text(json.dumps(results, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
