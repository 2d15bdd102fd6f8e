"""Where the time of a training step goes: the default recipe's steps, timed by part, and the
operators torch.profiler finds most expensive.

    python bench/step_profile.py [--steps 50] [--warmup 10] [--threads 2] [key=value ...]
    python bench/step_profile.py --precisions fp32 bf16    # the two side by side (default)

The parts are timed with forward and backward hooks on the model's modules and wrappers
around the loss, the optimiser, gradient clipping and the batches (each moment goes to the
innermost part running, so parts never overlap): embeddings, each attention (encoder self,
decoder self, cross), feed-forward, layer norms, dropout, output projection + loss, the
guided-alignment loss, gradient clipping, the optimiser, batching (with the guided-alignment
targets), and everything else (autograd's own work, residual adds, the glue between them).
Backward time is attributed by module as the autograd engine reaches it; where it
interleaves two branches the split between them is approximate, the total is not. Prints a
Markdown table (bench/README.md) with the CPU model, its native-bf16 flags, threads and
precision: with several --precisions, each is profiled in a process of its own and the parts
are set side by side (ms/step in each, and the first's time over each other's).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import torch
from torch import nn

import translator.recipe as recipe
from translator.attention import MultiHeadAttention
from translator.build import build_run
from translator.config import load_config
from translator.device import cpu_model, native_bf16_flags
from translator.model import Dropout, Embeddings, FeedForward
from translator.run_dir import RunDir
from translator.training import Trainer

ROOT = Path(__file__).resolve().parents[1]


class Parts:
    """Exclusive wall time per part: a stack of the parts running, innermost first."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.stack: list[str] = []
        self.since = time.perf_counter()
        self.on = False

    def _charge(self) -> None:
        now = time.perf_counter()
        if self.on and self.stack:
            self.seconds[self.stack[-1]] += now - self.since
        self.since = now

    def push(self, name: str) -> None:
        self._charge()
        self.stack.append(name)

    def pop(self, name: str) -> None:
        self._charge()
        if name in self.stack:  # the innermost of that name
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(name)]

    def wrap(self, name: str, function):
        def wrapped(*args, **kwargs):
            self.push(name)
            try:
                return function(*args, **kwargs)
            finally:
                self.pop(name)
        return wrapped


def hook_modules(model: nn.Module, parts: Parts) -> None:
    """Forward and backward hooks that time each module of interest as its part."""
    def name_of(path: str, module: nn.Module) -> str | None:
        if isinstance(module, MultiHeadAttention):
            if path.startswith("encoder"):
                return "encoder self-attention"
            return "cross-attention" if "cross" in path else "decoder self-attention"
        if isinstance(module, FeedForward):
            return "feed-forward"
        if isinstance(module, nn.LayerNorm):
            return "layer norms"
        if isinstance(module, Embeddings):
            return "embeddings + positions"
        if isinstance(module, Dropout):
            return "dropout"
        return None

    for path, module in model.named_modules():
        name = name_of(path, module)
        if name is None:
            continue
        module.register_forward_pre_hook(lambda m, a, n=name: parts.push(n + " (fwd)"))
        module.register_forward_hook(lambda m, a, o, n=name: parts.pop(n + " (fwd)"))
        module.register_full_backward_pre_hook(lambda m, g, n=name: parts.push(n + " (bwd)"))
        module.register_full_backward_hook(lambda m, gi, go, n=name: parts.pop(n + " (bwd)"))
    # the output projection (in Transformer.decode) and the loss: from the decoder's last norm
    # to the end of the loss forward, and from the start of backward to that norm's backward
    model.decoder_norm.register_forward_hook(lambda m, a, o: parts.push("output + loss (fwd)"))
    model.decoder_norm.register_full_backward_pre_hook(
        lambda m, g: parts.pop("output + loss (bwd)"))


def profile(args: argparse.Namespace, precision: str) -> dict:
    """One precision's step, timed by part, and its most expensive operators."""
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp(prefix="step-profile-"))
    config = load_config(args.config, [f"train.output_dir={folder}", "train.max_minutes=0",
                                       "train.heatmaps=false", *args.overrides,
                                       f"train.precision={precision}"])
    run = build_run(config, RunDir.new(folder))
    trainer = Trainer(run)
    parts = Parts()
    hook_modules(run.model, parts)
    recipe.token_loss = parts.wrap("output + loss (fwd)", recipe.token_loss)
    recipe.alignment_loss = parts.wrap("guided-alignment loss (fwd)", recipe.alignment_loss)
    real_batch_loss = recipe.batch_loss

    def batch_loss(*a, **k):
        loss = real_batch_loss(*a, **k)
        parts.pop("output + loss (fwd)")  # opened by the decoder norm's hook
        return loss

    import translator.training as training
    training.batch_loss = batch_loss
    real_backward = torch.Tensor.backward

    def backward(tensor, *a, **k):
        parts.push("output + loss (bwd)")  # closed by the decoder norm's backward hook
        try:
            return real_backward(tensor, *a, **k)
        finally:
            parts.pop("output + loss (bwd)")

    torch.Tensor.backward = backward
    run.optimizer.step = parts.wrap("optimiser", run.optimizer.step)
    run.optimizer.zero_grad = parts.wrap("optimiser", run.optimizer.zero_grad)
    nn.utils.clip_grad_norm_ = parts.wrap("gradient clipping", nn.utils.clip_grad_norm_)
    source = trainer.batches()

    def batches():
        while True:
            parts.push("batching + alignment targets")
            batch = next(source)
            parts.pop("batching + alignment targets")
            yield batch

    stream = batches()
    for _ in range(args.warmup):
        trainer.train_step(stream)
    parts.on = True
    tokens, started = 0, time.perf_counter()
    for _ in range(args.steps):
        tokens += trainer.train_step(stream)[1]
    total = time.perf_counter() - started
    parts.on = False
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profiled:
        for _ in range(min(20, args.steps)):
            trainer.train_step(stream)
    named = sum(parts.seconds.values())
    ms = {name: seconds / args.steps * 1000 for name, seconds in parts.seconds.items()}
    ms["everything else (autograd, residual adds, glue)"] = (total - named) / args.steps * 1000
    return {"precision": run.precision, "parameters": run.model.num_parameters(),
            "batch_tokens": config.train.batch_tokens, "ms_per_step": total / args.steps * 1000,
            "tokens_per_second": tokens / total, "parts": ms,
            "operators": profiled.key_averages().table(sort_by="self_cpu_time_total",
                                                       row_limit=args.top)}


def in_a_process(args: argparse.Namespace, precision: str) -> dict:
    """`profile` in a fresh process (one precision's warm-up and hooks never touch another's)."""
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        command = [sys.executable, __file__, "--single", precision, "--json", out.name,
                   "--steps", str(args.steps), "--warmup", str(args.warmup), "--threads",
                   str(args.threads), "--top", str(args.top), "--config", str(args.config),
                   *args.overrides]
        subprocess.run(command, check=True)
        return json.loads(Path(out.name).read_text())


def report(args: argparse.Namespace, results: list[dict]) -> None:
    first = results[0]
    flags = ", ".join(native_bf16_flags()) or "no native bf16"
    print(f"## One training step by part: {cpu_model()} ({flags}), {args.threads} thread(s), "
          f"{first['parameters']:,} parameters, batches of {first['batch_tokens']} tokens; "
          f"{args.steps} steps after {args.warmup} warm-up\n")
    names = [r["precision"] for r in results]
    print("| part | " + " | ".join(f"{n} ms/step" for n in names) + " | "
          + " | ".join(f"{names[0]} ÷ {n}" for n in names[1:]) + " |")
    print("|---|" + "---:|" * (2 * len(names) - 1))
    order = sorted(first["parts"], key=lambda part: -first["parts"][part])
    for part in [*order, "**the step**"]:
        values = [r["ms_per_step"] if part == "**the step**" else r["parts"].get(part, 0.0)
                  for r in results]
        ratios = [f"{values[0] / v:.2f}×" if v else "–" for v in values[1:]]
        print(f"| {part} | " + " | ".join(f"{v:.1f}" for v in values) + " | "
              + " | ".join(ratios) + " |")
    print("\n| precision | tokens/s |\n|---|---:|")
    for r in results:
        print(f"| {r['precision']} | {r['tokens_per_second']:,.0f} |")
    for r in results:
        print(f"\n## The {args.top} most expensive operators in {r['precision']} "
              f"(torch.profiler, self CPU time, {min(20, args.steps)} steps)\n")
        print(r["operators"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="operators listed")
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--single", help=argparse.SUPPRESS)  # one precision, in this process
    parser.add_argument("--json", help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    if args.single:
        Path(args.json).write_text(json.dumps(profile(args, args.single)))
        return 0
    report(args, [in_a_process(args, precision) for precision in args.precisions])
    return 0


if __name__ == "__main__":
    sys.exit(main())
