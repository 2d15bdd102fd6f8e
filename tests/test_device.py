"""Devices and precision: names resolved or refused with one sentence, fp16 refused on CPUs,
autocast only where a lower precision is asked for."""

import pytest
import torch
import torch._dynamo
from torch._dynamo.utils import counters

from translator import device
from translator.build import precision_reason
from translator.device import (
    DeviceError,
    autocast,
    device_rng_state,
    fused_optimizer,
    resolve_device,
    resolve_precision,
    set_device_rng_state,
)
from translator.dropout import dropout, dropout_state


@pytest.fixture(autouse=True)
def _cudnn_attention_restored():
    """resolve_device("cuda") switches cuDNN's attention off process-wide; put it back."""
    enabled = torch.backends.cuda.cudnn_sdp_enabled()
    yield
    torch.backends.cuda.enable_cudnn_sdp(enabled)


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
    assert resolve_precision("auto", cpu) is None  # native: the run times both
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


class LinearShapes(torch.overrides.TorchFunctionMode):
    """Records the input shape of every F.linear call that reaches it."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if func is torch.nn.functional.linear:
            self.shapes.append(tuple(args[0].shape))
        return func(*args, **(kwargs or {}))


def test_bf16_on_a_cpu_rounds_linear_rows_and_changes_no_result():
    """In bf16 on a CPU a linear layer's matmul sees its rows (batch × length) rounded up to a
    multiple of device.ROW_MULTIPLE (so oneDNN meets few shapes), and returns what the plain
    layer returns, for every row count, with and without a bias, on 2-D and 3-D inputs."""
    cpu = torch.device("cpu")
    layer = torch.nn.Linear(16, 5)
    for shape in [(3, 7, 16), (1, 1, 16), (32, 16), (2, 16, 16), (45, 16)]:
        x = torch.randn(shape)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            expected = layer(x), torch.nn.functional.linear(x, layer.weight)
        with LinearShapes() as seen, autocast(cpu, "bf16"):
            got = layer(x), torch.nn.functional.linear(x, layer.weight)
        rows = x.shape[:-1].numel()
        padded = -(-rows // device.ROW_MULTIPLE) * device.ROW_MULTIPLE
        assert seen.shapes == [(padded, 16)] * 2, shape
        for a, b in zip(got, expected):
            assert a.shape == b.shape and a.dtype == torch.bfloat16 and torch.equal(a, b)
    with LinearShapes() as seen, autocast(cpu, "fp32"):
        layer(torch.randn(3, 7, 16))
    assert seen.shapes == [(3, 7, 16)]  # fp32 is left alone


def test_rounded_linear_rows_compile_once_for_every_row_count():
    """Under torch.compile (dynamic shapes) the rounding is one graph for every batch shape: a
    branch on whether the rows are already a multiple was a guard, and batches alternating
    between the two cases recompiled until torch gave up compiling (train.compile in bf16)."""
    layer = torch.nn.Linear(16, 5)
    torch._dynamo.reset()
    counters.clear()
    compiled = torch.compile(layer, backend="eager", dynamic=True)
    try:
        for rows in (5, 32, 7, 64, 9, 40):
            x = torch.randn(2, rows, 16)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                expected = layer(x)
            with autocast(torch.device("cpu"), "bf16"):
                got = compiled(x)
            assert torch.equal(got, expected), rows
        assert counters["stats"]["unique_graphs"] == 1
    finally:  # later tests must not inherit this test's compiled code
        torch._dynamo.reset()


# ---------------------------------------------------------------- Apple silicon (MPS)
# This machine has no MPS: torch.backends.mps.is_available is stubbed, and the paths MPS takes
# (chosen by device type) are run on the CPU.


def test_auto_chooses_cuda_then_mps_then_the_cpu(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("mps")
    assert resolve_device("mps") == torch.device("mps")
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")
    with pytest.raises(DeviceError, match=r"asks for Apple's GPU \(MPS\) but torch finds none"):
        resolve_device("mps")


def test_a_gpu_keeps_attention_off_cudnn(monkeypatch):
    # cuDNN's attention builds a graph per batch shape: 6.5x slower training on an H200
    torch.backends.cuda.enable_cudnn_sdp(True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    resolve_device("cpu")
    assert torch.backends.cuda.cudnn_sdp_enabled()  # a CPU run leaves the setting alone
    resolve_device("cuda")
    assert not torch.backends.cuda.cudnn_sdp_enabled()


def test_mps_computes_in_fp32_unless_asked():
    mps = torch.device("mps")
    assert resolve_precision("auto", mps) == "fp32"
    assert resolve_precision("probe", mps) == "fp32"  # no CPU probe on a GPU
    assert resolve_precision("bf16", mps) == "bf16" and resolve_precision("fp16", mps) == "fp16"
    assert "MPS" in precision_reason("auto", mps)


def test_the_optimiser_mps_gets_steps_on_the_cpu_as_the_plain_one():
    assert fused_optimizer(torch.device("mps")) and fused_optimizer(torch.device("cpu"))
    assert not fused_optimizer(torch.device("meta"))
    torch.manual_seed(0)
    plain, fused = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    fused.load_state_dict(plain.state_dict())
    x = torch.randn(16, 8)
    for model, flag in ((plain, False), (fused, fused_optimizer(torch.device("mps")))):
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, fused=flag)
        for _ in range(3):
            optimizer.zero_grad()
            model(x).square().mean().backward()
            optimizer.step()
    assert torch.allclose(plain.weight, fused.weight, atol=1e-6)
    assert not torch.equal(plain.weight, torch.nn.Linear(8, 4).weight)


def test_the_mps_random_state_is_saved_and_restored(monkeypatch):
    """MPS's dropout is torch's, drawn from the device's own state: a checkpoint keeps it."""
    restored = []
    monkeypatch.setattr(torch.mps, "get_rng_state", lambda: torch.tensor([7, 8, 9]))
    monkeypatch.setattr(torch.mps, "set_rng_state", restored.append)
    mps, cpu = torch.device("mps"), torch.device("cpu")
    assert torch.equal(device_rng_state(mps), torch.tensor([7, 8, 9]))
    assert device_rng_state(cpu) is None
    set_device_rng_state(cpu, torch.tensor([1]))
    set_device_rng_state(mps, torch.tensor([1, 2]))
    assert len(restored) == 1 and torch.equal(restored[0], torch.tensor([1, 2]))


def test_dropout_off_the_cpu_is_torchs_own():
    """The CPU's fast stream only on CPUs: a tensor elsewhere (here: meta, shapes only) takes
    torch's dropout, which MPS and CUDA run natively, and leaves the CPU stream untouched."""
    before = dropout_state()
    out = dropout(torch.empty(4, 5, device="meta"), 0.5)
    assert out.device.type == "meta" and out.shape == (4, 5)
    assert dropout_state() == before

