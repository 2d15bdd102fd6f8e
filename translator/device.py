"""Where the numbers are computed, and in which precision: one CPU/GPU code path.

`resolve_device` turns a config's "auto" / "cpu" / "cuda[:N]" into a torch device (under
torchrun, "cuda" is this process's own GPU); `resolve_precision` picks fp32, bf16 or fp16 for
it; `autocast` is the context every forward pass runs in (nanoGPT's `nullcontext` for fp32).
"""

from __future__ import annotations

import os
import platform
from contextlib import AbstractContextManager, nullcontext
from pathlib import Path

import torch
import torch.distributed as dist

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


def resolve_device(name: str) -> torch.device:
    """"auto" → CUDA if visible, else CPU; under torchrun "cuda" means this process's GPU."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and dist.is_initialized():
        name = f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}"
    try:
        device = torch.device(name)
    except RuntimeError:
        raise DeviceError(f"unknown device {name!r}; use auto, cpu, cuda or cuda:N") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise DeviceError(f"device {name} asks for CUDA but no GPU is visible; use cpu or auto")
    return device


def resolve_precision(precision: str, device: torch.device) -> str:
    """auto: on GPUs bf16 where supported, else fp16; on CPUs fp32, because it was measured
    faster there even where bf16 is native: on an AMX Xeon (2 cores) the default model made
    12,285 tokens/s in fp32 and 8,424 under bf16 autocast (bench/train_speed.py, 2026-12-01):
    at this size the casts of weights and activations each step cost more than the bf16
    matmuls save. train.precision=bf16 still asks for it (for a bigger model, say)."""
    if device.type == "cpu" and precision == "fp16":
        raise DeviceError("fp16 on a CPU is about 100× slower than fp32; use "
                          "train.precision=bf16 or fp32")
    if precision != "auto":
        return precision
    if device.type == "cuda":
        return "bf16" if torch.cuda.is_bf16_supported() else "fp16"
    return "fp32"


def autocast(device: torch.device, precision: str) -> AbstractContextManager:
    """The context a forward pass runs in: nothing for fp32, torch.autocast otherwise."""
    if precision == "fp32":
        return nullcontext()
    dtype = torch.bfloat16 if precision == "bf16" else torch.float16
    return torch.autocast(device_type=device.type, dtype=dtype)
