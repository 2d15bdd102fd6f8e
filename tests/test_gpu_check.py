"""The GPU check's CPU rehearsal (bench/gpu_check.py --cpu-rehearsal): every step of the
one-call GPU check (issue 16) runs on the CPU with a tiny model, short times and gloo, with
`datasets` and the Devanagari font package blocked as on the GPU image, and leaves what the
device tool brings back: at most 8 plain files, no folders."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PREPARED = ROOT / "bench" / "results" / "gpu-check-data"
FILES = {"results.md", "results.json", "gpu_check.log", "cuda_tests.log", "torchrun.log",
         "flores-dev-greedy.en", "flores-dev-beam5.en"}
STEPS = ["environment", "data", "cuda_tests", "matmul_peak", "train_eager", "train_compile",
         "torchrun_ddp", "decode", "profile"]


@pytest.mark.slow
@pytest.mark.timeout(960)  # its subprocess may take 900 s
def test_the_gpu_check_rehearses_every_step_on_the_cpu(tmp_path):
    out, work = tmp_path / "out", tmp_path / "work"
    # the prepared folder when there is one; else the script writes one from the public sets
    # (or, without them, from the embedded corpus)
    data = PREPARED if (PREPARED / "train.en").is_file() else tmp_path / "data"
    result = subprocess.run(
        [sys.executable, "bench/gpu_check.py", "--cpu-rehearsal", "--out", str(out), "--work",
         str(work), "--data", str(data)],
        cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, (result.stdout + result.stderr)[-4000:]
    results = json.loads((out / "results.json").read_text())
    assert list(results["steps"]) == STEPS
    assert {name: r["status"] for name, r in results["steps"].items()} == dict.fromkeys(
        STEPS, "ok")
    assert results["imported_packages_the_gpu_lacks"] == []
    assert {p.name for p in out.iterdir()} == FILES and all(p.is_file() for p in out.iterdir())
    steps = results["steps"]
    assert steps["cuda_tests"]["summary"].startswith("6 passed")
    assert steps["torchrun_ddp"]["backend"] == "gloo" and steps["torchrun_ddp"]["ddp"] is True
    assert steps["train_compile"]["steps"] > 0 and steps["train_eager"]["tokens_per_second"] > 0
    assert [s["sentences"] for s in steps["decode"]["searches"]] == [16, 16]
    table = (out / "results.md").read_text(encoding="utf-8")
    for heading in ("| step | status |", "## Training:", "## torchrun", "## Decoding FLORES"):
        assert heading in table
