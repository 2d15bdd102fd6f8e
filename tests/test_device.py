"""Devices and precision: names resolved or refused with one sentence, fp16 refused on CPUs,
autocast only where a lower precision is asked for."""

import pytest
import torch

from translator import device
from translator.device import (
    DeviceError,
    autocast,
    resolve_device,
    resolve_precision,
)


def test_device_names():
    assert resolve_device("cpu") == torch.device("cpu")
    expected = "cuda" if torch.cuda.is_available() else "cpu"
    assert resolve_device("auto").type == expected
    with pytest.raises(DeviceError, match="unknown device 'gpu'"):
        resolve_device("gpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="a GPU is visible")
def test_cuda_without_a_gpu_is_refused():
    with pytest.raises(DeviceError, match="no GPU is visible"):
        resolve_device("cuda")


def test_precision_on_a_cpu(monkeypatch):
    cpu = torch.device("cpu")
    monkeypatch.setattr(device, "native_bf16_flags", lambda: [])
    assert resolve_precision("auto", cpu) == "fp32"  # bf16 emulated: slower, no probe
    assert resolve_precision("probe", cpu) == "fp32"  # nothing to time
    monkeypatch.setattr(device, "native_bf16_flags", lambda: ["avx512_bf16"])
    assert resolve_precision("auto", cpu) == "fp32"  # measured: fewer steps in bf16
    assert resolve_precision("probe", cpu) is None  # native: the run times both
    assert resolve_precision("bf16", cpu) == "bf16" and resolve_precision("fp32", cpu) == "fp32"
    with pytest.raises(DeviceError, match="fp16 on a CPU"):
        resolve_precision("fp16", cpu)


def test_autocast_only_below_fp32():
    cpu = torch.device("cpu")
    x = torch.ones(2, 2)
    with autocast(cpu, "fp32"):
        assert (x @ x).dtype == torch.float32
    with autocast(cpu, "bf16"):
        assert (x @ x).dtype == torch.bfloat16
