"""Where the numbers are computed, and in which precision: one CPU/GPU code path.

`resolve_device` turns a config's "auto" / "cpu" / "cuda[:N]" / "mps" into a torch device
("auto": CUDA, then Apple's MPS, then the CPU; under torchrun, "cuda" is this process's own
GPU); `resolve_precision` picks fp32, bf16 or fp16 for it; `autocast` is the context every
forward pass runs in (nanoGPT's `nullcontext` for fp32). What differs by device type is chosen
here by the type, so that MPS takes the GPU paths that work there: torch's own dropout (the
CPU has a faster stream, translator.dropout) and its random state, the fused optimiser, and
fp32 unless another precision is asked for. MPS is untested on this project's machines.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

from translator.errors import TranslatorError


class DeviceError(TranslatorError):
    """A device or precision that this machine cannot provide; the message says why."""


def cpu_model() -> str:
    """This machine's CPU as /proc/cpuinfo names it (what a benchmark's table is headed by)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def mps_available() -> bool:
    """Whether Apple's GPU (Metal Performance Shaders) can be used by torch here."""
    backend = getattr(torch.backends, "mps", None)
    return bool(backend is not None and backend.is_available())


def resolve_device(name: str) -> torch.device:
    """"auto" → CUDA if visible, else MPS (Apple silicon) if available, else CPU; under
    torchrun "cuda" means this process's GPU. Handing out a CUDA device also keeps attention off
    cuDNN's backend (`avoid_cudnn_attention`), so every caller gets the fast kernels."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "mps" if mps_available() else "cpu"
    if name == "cuda" and dist.is_initialized():
        name = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise DeviceError(f"unknown device {name!r}; use auto, cpu, cuda, cuda:N or mps") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"device {name} asks for CUDA but no GPU is visible; use cpu or auto")
    if device.type == "mps" and not mps_available():
        raise DeviceError(f"device {name} asks for Apple's GPU (MPS) but torch finds none here "
                          "(it needs Apple silicon, macOS 12.3 or later and a torch built with "
                          "MPS); use cpu or auto")
    if device.type == "cuda":
        avoid_cudnn_attention()
    return device


def avoid_cudnn_attention() -> None:
    """Keep ``scaled_dot_product_attention`` off cuDNN's backend on GPUs (torch then takes
    its memory-efficient or flash kernel). Why: cuDNN builds an attention graph for each new
    (batch, length) shape, and a run's batches bring new shapes for hundreds of steps: on an
    H200, Transformer-base in bf16 ran 48,570 tokens/s with it and 314,585 without
    (bench/gpu_check.py, 2026-12-04, docs/gpu.md)."""
    torch.backends.cuda.enable_cudnn_sdp(False)


# the device types whose torch has fused AdamW kernels (one kernel for all parameters)
FUSED_OPTIMIZER_DEVICES = ("cpu", "cuda", "mps")


def fused_optimizer(device: torch.device) -> bool:
    """Whether the optimiser on ``device`` uses torch's fused kernel."""
    return device.type in FUSED_OPTIMIZER_DEVICES


def device_rng_state(device: torch.device) -> torch.Tensor | None:
    """The random state of an MPS device, whose dropout (torch's own, translator.dropout)
    draws from it: saved in a checkpoint so that a resume draws the same masks. None elsewhere
    (CUDA's states are saved for every GPU, the CPU's stream by translator.dropout)."""
    return torch.mps.get_rng_state() if device.type == "mps" else None


def set_device_rng_state(device: torch.device, state: torch.Tensor | None) -> None:
    if device.type == "mps" and state is not None:
        torch.mps.set_rng_state(state.cpu())


def native_bf16_flags() -> list[str]:
    """The CPU features that make bf16 matrix products native (fast) here: x86's
    ``avx512_bf16`` / ``amx_bf16``, Arm's ``bf16``, as /proc/cpuinfo lists them; none where
    it cannot be read."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = set(line.split(":", 1)[1].split())
                return [f for f in ("avx512_bf16", "amx_bf16", "bf16") if f in flags]
    except OSError:
        pass
    return []


def resolve_precision(precision: str, device: torch.device) -> str | None:
    """A forced precision as it is; auto: on GPUs bf16 where supported, else fp16; on a CPU with
    native bf16 (avx512_bf16, amx_bf16) None: the run times both on its first batches and keeps
    the faster (`translator.build.probe_precision`; "probe" asks for the same); fp32 on other
    CPUs, where bf16 is emulated and slower, with no probe. On a Zen 5 with avx512_bf16 the
    bf16 default run made 1.21× the steps of fp32 (4,348 against 3,601) once linear rows were
    rounded and attention kept in fp32 (issue 32, docs/performance.md). On MPS: fp32."""
    if device.type == "cpu" and precision == "fp16":
        raise DeviceError("fp16 on a CPU is about 100× slower than fp32; use "
                          "train.precision=bf16 or fp32")
    if precision not in ("auto", "probe"):
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    if device.type == "mps":  # untested here: fp32 until a lower precision is measured there
        return "fp32"
    return None if native_bf16_flags() else "fp32"


ROW_MULTIPLE = 32  # bf16 on a CPU: linear layers see row counts rounded up to this


class LinearRowsRounded(TorchFunctionMode):
    """Within it, ``F.linear`` (every nn.Linear, the output layer) pads its input's rows (batch ×
    length) with zeros up to a multiple of ``ROW_MULTIPLE`` and drops the extra output rows:
    the same result. Why: oneDNN, which runs PyTorch's bf16 matmuls on a CPU, compiles a kernel
    for each new shape and keeps 1,024; a run's batches bring ~650 shapes an epoch, so the cache
    churned and bf16 steps slowed as a run went on. Rounded, a run needs a few dozen row counts
    (issue 32, docs/performance.md). fp32 matmuls compile nothing and are left alone."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is not F.linear or args[0].dim() < 2:
            return func(*args, **kwargs)
        x, weight, *bias = args
        rows = x.shape[:-1].numel()
        # no branch on rows (a multiple already gets a padding of 0): under torch.compile a
        # branch on a batch's shape would be a guard, and each new shape a recompilation
        padding = -rows % ROW_MULTIPLE
        flat = F.pad(x.reshape(rows, x.shape[-1]), (0, 0, 0, padding))
        return func(flat, weight, *bias, **kwargs)[:rows].view(*x.shape[:-1], weight.shape[0])


@contextmanager
def autocast(device: torch.device, precision: str) -> Iterator[None]:
    """The context a forward pass runs in: nothing for fp32, torch.autocast otherwise (and, in
    bf16 on a CPU, linear layers' rows rounded for oneDNN's kernel cache)."""
    if precision == "fp32":
        yield
        return
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    rounded = device.type == "cpu" and dtype == torch.bfloat16
    with torch.autocast(device_type=device.type, dtype=dtype), (
            LinearRowsRounded() if rounded else nullcontext()):
        yield
