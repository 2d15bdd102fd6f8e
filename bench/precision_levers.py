"""The levers of a bf16 training step on a CPU, timed against fp32 (issue 32).

    python bench/precision_levers.py [VARIANTS] [STEPS]     # THREADS=1 for one thread
    python bench/precision_levers.py fp32,bf16,bf16-attention-fp32,bf16-explicit 15
    python bench/precision_levers.py fp32,bf16 40 --fresh     # each timing on new batches
    ONEDNN_PRIMITIVE_CACHE_CAPACITY=1024 python bench/precision_levers.py fp32,bf16 40 --fresh
    python bench/precision_levers.py fp32,bf16 25 --windows 12   # as a run goes on

Builds the default run (configs/default.yaml) and times `Trainer.train_step` on the same STEPS
batches for each variant, the variants alternating for three rounds (the best round counts),
so that a busy machine slows all alike. Variants: fp32 and bf16 as the package runs them;
bf16-attention-fp32, the attention core cast to fp32 inside the bf16 step; fp32-explicit and
bf16-explicit, the attention's explicit four steps (`translator.attention`) forced in place of
PyTorch's fused kernel. Prints ms/step and each variant's speed over fp32's, with the CPU.

--fresh times every round of every variant on batches of its own, never seen before, as a run
meets them: a bf16 step then also pays for oneDNN compiling kernels for the new shapes, which
the repeated batches hide. oneDNN keeps 1,024 compiled kernels (ONEDNN_PRIMITIVE_CACHE_CAPACITY);
a default run's ~650 batch shapes need more, so with ONEDNN_VERBOSE=2 a bf16 step shows ~32
kernels compiled again (150 steps: 4,875 cache misses). Raising the capacity to 32,768 was
tried and dropped (2026-12-03, Zen 5 with avx512_bf16, quiet): the bf16 default run grew to
6.7 GB and made 2,801 steps, against 3,454 with the default cache and 3,783 in fp32. Padding
every batch's lengths up to a multiple of 8 (186 shapes an epoch) with a cache of 4,096 was
tried too (session 10): bf16 then read 11,138 real tokens/s against 13,255 unpadded, and fp32
8,699 against 12,607, so it was dropped. With --fresh the batches differ between variants:
compare them by real tokens/s (padding not counted), not ms/step.

--windows N times each variant as a run meets its batches: in a process of its own (so that no
variant inherits another's compiled kernels), N consecutive windows of STEPS new batches, and
prints each window's ms/step. This is what showed the cache's cost (session 13, 2026-12-04):
before the fix the bf16 step was fast for its first ~30 steps, while the cache filled, and
~1.3× slower after, when every new shape evicted a kernel; --fresh's three rounds of 40 steps
hid it. Since then bf16 on a CPU rounds linear layers' rows up to a multiple of 32
(`translator.device.LinearRowsRounded`) and runs the attention core in fp32
(`translator.attention`): after warm-up a step compiles nothing.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import translator.attention as attention  # noqa: E402
from translator.build import build_run  # noqa: E402
from translator.config import load_config  # noqa: E402
from translator.device import cpu_model, native_bf16_flags  # noqa: E402
from translator.run_dir import RunDir  # noqa: E402
from translator.training import Trainer  # noqa: E402

FUSED = F.scaled_dot_product_attention


class Functional:
    """torch.nn.functional with a replaceable scaled_dot_product_attention."""

    scaled_dot_product_attention = staticmethod(FUSED)

    def __getattr__(self, name: str):
        return getattr(F, name)


def attention_core_in_fp32(q, k, v, attn_mask=None, dropout_p=0.0, **kwargs):
    out = FUSED(q.float(), k.float(), v.float(), attn_mask=attn_mask, dropout_p=dropout_p,
                **kwargs)
    return out.to(q.dtype)


def explicit_steps(q, k, v, attn_mask=None, dropout_p=0.0, **kwargs):
    return attention.scaled_dot_product_attention(q, k, v, attn_mask, dropout_p)[0]


# name: (precision, the attention core; None: the package's own choice)
VARIANTS = {
    "fp32": ("fp32", FUSED),
    "bf16": ("bf16", None),  # as translator.attention chooses
    "bf16-attention-fp32": ("bf16", attention_core_in_fp32),
    "fp32-explicit": ("fp32", explicit_steps),
    "bf16-explicit": ("bf16", explicit_steps),
    "bf16-weights": ("bf16", None),  # + nn.Linear weights kept in bf16, fp32 masters (below)
}


def bf16_weights_with_fp32_masters(run) -> None:
    """Issue 32's lever "no per-step casts of weights": every nn.Linear's weight and bias held
    in bf16 (autocast then casts none of them), the optimiser updating fp32 master copies
    (the grads copied up before its step, the masters copied down after). The tied output
    layer stays fp32 (it is the target embedding). Only for --windows: it changes the model
    for good, so each such variant needs a process of its own."""
    masters = {}
    for module in run.model.modules():
        if isinstance(module, torch.nn.Linear):
            for param in module.parameters():
                masters[param] = param.detach().clone()  # fp32
                param.data = param.data.to(torch.bfloat16)
    for group in run.optimizer.param_groups:
        group["params"] = [masters.get(param, param) for param in group["params"]]
    pairs = list(masters.items())
    step = run.optimizer.step

    def master_step(*args, **kwargs):
        for param, master in pairs:
            master.grad = None if param.grad is None else param.grad.float()
        result = step(*args, **kwargs)
        for param, master in pairs:
            param.data.copy_(master)
        return result

    run.optimizer.step = master_step


def use_variant(run, name: str) -> None:
    """The run's precision and attention core as variant ``name`` has them."""
    run.precision, core = VARIANTS[name]
    attention.F = F  # None: the package's own path (bf16 on a CPU: an fp32 core)
    if core is not None:
        functional = Functional()
        functional.scaled_dot_product_attention = core
        attention.F = functional


def real_tokens(batches: list, pad_id: int) -> int:
    """Source + target tokens of ``batches``, padding not counted."""
    return sum(int((b.source != pad_id).sum()) + b.num_target_tokens for b in batches)


def windows(names: list[str], steps: int, count: int) -> int:
    """Each variant in a fresh process: ``count`` windows of ``steps`` new batches each."""
    rows = []
    for name in names:
        child = subprocess.run([sys.executable, __file__, name, str(steps), "--child-windows",
                                str(count)], capture_output=True, text=True, check=True)
        rows.append((name, json.loads(child.stdout.strip().splitlines()[-1])))
    flags = ", ".join(native_bf16_flags()) or "no native bf16"
    print(f"## Training steps as a run meets its batches: {cpu_model()} ({flags}), "
          f"{torch.get_num_threads()} thread(s), {count} windows of {steps} new default-recipe "
          f"batches, each variant in its own process\n")
    print("| variant | ms/step, window by window | median after the first 2 "
          "| real tokens/s after the first 2 |\n|---|---|---:|---:|")
    for name, result in rows:
        print(f"| {name} | {' '.join(f'{ms:.0f}' for ms in result['ms'])} | "
              f"{result['median_ms']:.1f} | "
              f"{result['tokens_per_s']:,.0f} |")
    return 0


def child_windows(name: str, steps: int, count: int) -> int:
    run, trainer = build_trainer()
    use_variant(run, name)
    if name == "bf16-weights":
        bf16_weights_with_fp32_masters(run)
    source, times, tokens = trainer.batches(), [], []
    for _ in range(count):
        batches = [next(source) for _ in range(steps)]
        tokens.append(real_tokens(batches, run.tokenizer.pad_id))
        stream, started = iter(batches), time.perf_counter()
        for _ in batches:
            trainer.train_step(stream)
        times.append((time.perf_counter() - started) / steps * 1000)
    later = slice(2, None) if count > 2 else slice(None)  # after the first 2 windows
    seconds = sum(times[later]) * steps / 1000
    print(json.dumps({"ms": times, "median_ms": statistics.median(times[later]),
                      "tokens_per_s": sum(tokens[later]) / seconds}))
    return 0


def build_trainer() -> tuple:
    folder = Path(tempfile.mkdtemp(prefix="precision-levers-"))
    config = load_config(ROOT / "configs" / "default.yaml", [
        f"train.output_dir={folder}", "train.max_minutes=0", "train.heatmaps=false",
        "train.precision=fp32"])
    run = build_run(config, RunDir.new(folder))
    return run, Trainer(run)


def main() -> int:
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    if "--child-windows" in sys.argv:
        at = sys.argv.index("--child-windows")
        return child_windows(sys.argv[1], int(sys.argv[2]), int(sys.argv[at + 1]))
    if "--windows" in sys.argv:
        at = sys.argv.index("--windows")
        names = sys.argv[1].split(",")
        return windows(names, int(sys.argv[2]), int(sys.argv[at + 1]))
    fresh = "--fresh" in sys.argv
    args = [a for a in sys.argv[1:] if a != "--fresh"]
    names = args[0].split(",") if args else [n for n in VARIANTS if n != "bf16-weights"]
    if "bf16-weights" in names:
        print("error: bf16-weights changes the model for good, so it cannot alternate with other "
              "variants in one process; time it with --windows N", file=sys.stderr)
        return 2
    steps = int(args[1]) if len(args) > 1 else 10
    run, trainer = build_trainer()
    source = trainer.batches()
    batches = [next(source) for _ in range(steps)]
    best = {name: float("inf") for name in names}
    real: dict[str, float] = {}  # source + target tokens (padding not counted) a second
    for _ in range(3):
        for name in names:
            use_variant(run, name)
            if fresh:  # batches this process has not met yet, as in a run
                batches = [next(source) for _ in range(steps)]
            else:
                for batch in batches[:2]:  # untimed: first calls of this variant's kernels
                    trainer.train_step(iter([batch]))
            stream, started = iter(batches), time.perf_counter()
            for _ in batches:
                trainer.train_step(stream)
            seconds = time.perf_counter() - started
            if seconds / steps * 1000 < best[name]:  # fresh batches differ: count real tokens
                real[name] = real_tokens(batches, run.tokenizer.pad_id) / seconds
            best[name] = min(best[name], seconds / steps * 1000)
    flags = ", ".join(native_bf16_flags()) or "no native bf16"
    kind = "new batches each round" if fresh else "the same batches each round"
    capacity = os.environ.get("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "1024")
    print(f"## A training step's precision levers: {cpu_model()} ({flags}), "
          f"{torch.get_num_threads()} thread(s), {steps} default-recipe batches ({kind}, oneDNN "
          f"cache {capacity} kernels), best of 3\n")
    print("| variant | ms/step | speed × fp32 | real tokens/s |\n|---|---:|---:|---:|")
    for name in names:
        ratio = f"{best['fp32'] / best[name]:.2f}" if "fp32" in best else "–"
        print(f"| {name} | {best[name]:.1f} | {ratio} | {real[name]:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
