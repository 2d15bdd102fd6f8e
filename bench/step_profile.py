"""Where the time of a training step goes: the default recipe's steps, timed by part, and the
operators torch.profiler finds most expensive.

    python bench/step_profile.py [--steps 50] [--warmup 10] [--threads 2] [key=value ...]

The parts are timed with forward and backward hooks on the model's modules and wrappers
around the loss, the optimiser, gradient clipping and the batches (each moment goes to the
innermost part running, so parts never overlap): embeddings, each attention (encoder self,
decoder self, cross), feed-forward, layer norms, dropout, output projection + loss, the
guided-alignment loss, gradient clipping, the optimiser, batching (with the guided-alignment
targets), and everything else (autograd's own work, residual adds, the glue between them).
Backward time is attributed by module as the autograd engine reaches it; where it
interleaves two branches the split between them is approximate, the total is not. Prints a
Markdown table (bench/README.md) with the CPU model, threads and precision.
"""

from __future__ import annotations

import argparse
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
from translator.device import cpu_model
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--config", type=Path, default=ROOT / "configs" / "default.yaml")
    parser.add_argument("--steps", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--top", type=int, default=15, help="operators listed")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    folder = Path(tempfile.mkdtemp(prefix="step-profile-"))
    config = load_config(args.config, [f"train.output_dir={folder}", "train.max_minutes=0",
                                       "train.heatmaps=false", *args.overrides])
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
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        for _ in range(min(20, args.steps)):
            trainer.train_step(stream)
    print(f"## One training step by part: {cpu_model()}, {args.threads} thread(s), "
          f"{run.precision}, {run.model.num_parameters():,} parameters, batches of "
          f"{config.train.batch_tokens} tokens; {args.steps} steps after {args.warmup} "
          f"warm-up\n")
    print(f"{total / args.steps * 1000:.1f} ms a step, {tokens / total:,.0f} tokens/s\n")
    print("| part | ms/step | share |\n|---|---:|---:|")
    named = sum(parts.seconds.values())
    rows = sorted(parts.seconds.items(), key=lambda item: -item[1])
    rows.append(("everything else (autograd, residual adds, glue)", total - named))
    for name, seconds in rows:
        print(f"| {name} | {seconds / args.steps * 1000:.1f} | {seconds / total:.1%} |")
    print(f"\n## The {args.top} most expensive operators (torch.profiler, self CPU time, "
          f"{min(20, args.steps)} steps)\n")
    print(profile.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.top))
    return 0


if __name__ == "__main__":
    sys.exit(main())
