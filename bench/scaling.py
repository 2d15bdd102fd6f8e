"""Time and memory as the sequence length doubles: the O(n²) term of attention.

    python bench/scaling.py                          # n = 16, 32, ..., 512; 8 sentences
    python bench/scaling.py --lengths 64 128 256 --batch 4

For each length n (source and target both n tokens, no padding, batch of `--batch`
sentences, the default model of configs/default.yaml in training mode):
  - one training step: forward + backward + AdamW step;
  - attention alone, the seeds' four steps (translator.attention.scaled_dot_product_attention,
    causal mask), forward + backward over [batch, heads, n, d_k];
  - attention alone, PyTorch's fused kernel (F.scaled_dot_product_attention, is_causal),
    which never holds the n × n weights.

Time: the median of timed repetitions after a warm-up. Memory: the peak of bytes allocated
during one call above what was allocated before it (parameters, optimiser state and inputs
are not counted), from the allocation and free events torch.profiler records
(profile_memory=True), summed in time order: the same events PyTorch's own memory profiler
uses, on a separate, untimed call. A training step's peak includes its gradients (4 bytes a
parameter, freed by zero_grad(set_to_none=True) before the next step, as in training).

Per doubling, a purely linear cost doubles (×2) and a quadratic one quadruples (×4).
"""

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile
from train_speed import matmul_flops

from translator.attention import causal_mask, scaled_dot_product_attention
from translator.config import load_config
from translator.model import Transformer
from translator.recipe import token_loss

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
MiB = 2**20


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", default=str(ROOT / "configs" / "default.yaml"))
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 32, 64, 128, 256, 512])
    parser.add_argument("--batch", type=int, default=8, help="sentences per batch")
    parser.add_argument("--vocab", type=int, default=4000, help="joint vocabulary size")
    parser.add_argument("--min-seconds", type=float, default=1.0,
                        help="time each measurement for at least this long (and 3 calls)")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("overrides", nargs="*", help="config overrides, e.g. model.dropout=0")
    return parser.parse_args()


def median_seconds(call: Callable[[], None], min_seconds: float) -> float:
    call()  # warm-up
    times: list[float] = []
    while len(times) < 3 or sum(times) < min_seconds:
        started = time.perf_counter()
        call()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def peak_bytes(call: Callable[[], None]) -> int:
    """Peak of (bytes allocated − bytes freed) during `call`, from the profiler's events."""
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as profiler:
        call()
    events = [e for e in profiler.profiler.kineto_results.events() if e.name() == "[memory]"]
    live = peak = 0
    for event in sorted(events, key=lambda e: e.start_ns()):
        live += event.nbytes()
        peak = max(peak, live)
    return peak


def training_step(model: Transformer, optimizer: torch.optim.Optimizer, batch: int, n: int,
                  vocab: int) -> Callable[[], None]:
    generator = torch.Generator().manual_seed(n)
    source = torch.randint(4, vocab, (batch, n), generator=generator)
    target = torch.randint(4, vocab, (batch, n + 1), generator=generator)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        logits = model(source, target[:, :-1])
        loss = token_loss(logits, target[:, 1:], model.config.pad_id, 0.1)
        (loss / target[:, 1:].numel()).backward()
        optimizer.step()

    return step


def attention_call(batch: int, heads: int, n: int, d_k: int, fused: bool) -> Callable[[], None]:
    q, k, v = (torch.randn(batch, heads, n, d_k, requires_grad=True) for _ in range(3))
    mask = causal_mask(n)

    def call() -> None:
        if fused:
            output = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            output, _ = scaled_dot_product_attention(q, k, v, mask)
        output.sum().backward()

    return call


def ratio(values: list[float], i: int) -> str:
    return "" if i == 0 else f"×{values[i] / values[i - 1]:.2f}"


def main() -> int:
    args = parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    config = load_config(args.config, args.overrides).model
    config.source_vocab_size = config.target_vocab_size = args.vocab
    if max(args.lengths) > config.max_positions:
        print(f"error: lengths above model.max_positions ({config.max_positions}) do not fit; "
              "pass shorter --lengths", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    model = Transformer(config).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    d_k = config.d_model // config.heads

    kinds = ["step", "attention", "fused"]
    seconds: dict[str, list[float]] = {kind: [] for kind in kinds}
    memory: dict[str, list[float]] = {kind: [] for kind in kinds}
    shares = []
    for n in args.lengths:
        calls = {
            "step": training_step(model, optimizer, args.batch, n, args.vocab),
            "attention": attention_call(args.batch, config.heads, n, d_k, fused=False),
            "fused": attention_call(args.batch, config.heads, n, d_k, fused=True),
        }
        for kind, call in calls.items():
            seconds[kind].append(median_seconds(call, args.min_seconds))
            memory[kind].append(peak_bytes(call) / MiB)
        flops = matmul_flops(config, args.batch, n, n)
        shares.append(flops["attention"] / sum(flops.values()))
        print(f"n = {n}: step {1000 * seconds['step'][-1]:,.1f} ms", file=sys.stderr)

    lines = [
        f"## Scaling with sequence length n (batch {args.batch}, d_model {config.d_model}, "
        f"{config.heads} heads, {config.layers}+{config.num_decoder_layers} layers, "
        f"dropout {config.dropout}; torch {torch.__version__}, threads: "
        f"{torch.get_num_threads()})",
        "",
        "One training step (forward + backward + AdamW). Attention share: the n² matmuls "
        "(Q·Kᵀ, weights·V) as a share of the step's matmul FLOPs.",
        "",
        "| n | step ms | per doubling | peak MiB | per doubling | attention share of FLOPs |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, n in enumerate(args.lengths):
        lines.append(f"| {n} | {1000 * seconds['step'][i]:,.1f} | {ratio(seconds['step'], i)} "
                     f"| {memory['step'][i]:,.1f} | {ratio(memory['step'], i)} "
                     f"| {shares[i]:.0%} |")
    lines += [
        "",
        f"Attention alone, one layer, forward + backward, [{args.batch}, {config.heads}, n, "
        f"{d_k}], causal: the seeds' four steps (n × n weights held) and PyTorch's fused "
        "kernel.",
        "",
        "| n | four steps ms | per doubling | peak MiB | per doubling "
        "| fused ms | per doubling | peak MiB | per doubling |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for i, n in enumerate(args.lengths):
        cells = [str(n)]
        for kind in ("attention", "fused"):
            cells += [f"{1000 * seconds[kind][i]:,.2f}", ratio(seconds[kind], i),
                      f"{memory[kind][i]:,.2f}", ratio(memory[kind], i)]
        lines.append("| " + " | ".join(cells) + " |")
    report = "\n".join(lines)
    print(report)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "scaling.md").write_text(report + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
