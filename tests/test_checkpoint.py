"""Checkpoint files: atomic writes, hard-linked names, leftovers of a killed writer, and a
write the disk refuses (a full disk simulated by a file that raises ENOSPC mid-write, and a
real file-size limit)."""

import errno
import os
import resource
import signal
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import torch

import translator.checkpoint as checkpoint
from translator.checkpoint import (
    CheckpointWriteError,
    load_checkpoint,
    megabytes,
    save_checkpoint,
    serialized_size,
)
from translator.run_dir import RunDir

ROOT = Path(__file__).resolve().parent.parent


def state(size: int = 50_000, step: int = 1) -> dict:
    return {"model": {"w": torch.arange(size, dtype=torch.float32)}, "config": {}, "step": step}


class FullDisk:
    """A file that takes ``room`` bytes, then fails as a full disk does."""

    def __init__(self, file, room: int) -> None:
        self.file, self.room = file, room

    def write(self, data) -> int:
        if len(data) > self.room:
            raise OSError(errno.ENOSPC, "No space left on device")
        self.room -= len(data)
        return self.file.write(data)

    def __getattr__(self, name):  # flush, fileno, close, ...
        return getattr(self.file, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.file.close()


@pytest.fixture
def full_disk(monkeypatch):
    """Every checkpoint write from now on finds ``room`` bytes free (set .room)."""
    real = checkpoint._open_temporary
    disk = type("Disk", (), {"room": 1000})()

    def open_temporary(path):
        temporary, file = real(path)
        return temporary, FullDisk(file, disk.room)

    monkeypatch.setattr(checkpoint, "_open_temporary", open_temporary)
    return disk


def test_a_checkpoint_under_two_names_is_one_file(tmp_path):
    last, best = tmp_path / "last.pt", tmp_path / "best.pt"
    save_checkpoint(state(step=1), last, also=[best])
    assert os.stat(last).st_ino == os.stat(best).st_ino  # a hard link, no second copy
    save_checkpoint(state(step=2), last)  # replacing last.pt leaves best.pt as it was
    assert load_checkpoint(best)["step"] == 1 and load_checkpoint(last)["step"] == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["best.pt", "last.pt"]


def test_without_hard_links_the_other_name_is_a_copy(tmp_path, monkeypatch):
    def no_links(source, target):
        raise OSError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(checkpoint.os, "link", no_links)
    save_checkpoint(state(step=3), tmp_path / "last.pt", also=[tmp_path / "best.pt"])
    assert load_checkpoint(tmp_path / "best.pt")["step"] == 3


def test_the_leftovers_of_a_killed_writer_are_removed_by_the_next_write(tmp_path):
    leftover = tmp_path / ".last.pt.abc123.tmp"
    leftover.write_bytes(b"half a checkpoint")
    save_checkpoint(state(), tmp_path / "last.pt")
    assert not leftover.exists()


def test_the_size_of_a_checkpoint_is_known_without_writing_it(tmp_path):
    save_checkpoint(state(), tmp_path / "last.pt")
    assert serialized_size(state()) == (tmp_path / "last.pt").stat().st_size


def test_a_full_disk_keeps_the_old_checkpoint_and_says_what_one_needs(tmp_path, full_disk):
    run = RunDir(tmp_path / "run")
    full_disk.room = 10**9
    run.save_checkpoint("last", state(step=1), also=["best"])
    before = run.checkpoint("last").read_bytes()
    full_disk.room = 5_000  # the disk fills up in the middle of the next write
    with pytest.raises(CheckpointWriteError) as raised:
        run.save_checkpoint("last", state(step=2), also=["best"])
    message = str(raised.value)
    needed = serialized_size(state(step=2))
    assert raised.value.needed == needed
    assert f"no space left on the disk for {run.checkpoint('last')}" in message
    assert f"needs {megabytes(needed)}" in message and "are free" in message
    assert "the half-written file was removed" in message
    assert f"continue with: python scripts/train.py --resume {run}" in message
    assert run.checkpoint("last").read_bytes() == before  # the previous last.pt stays
    assert load_checkpoint(run.checkpoint("best"))["step"] == 1
    assert sorted(p.name for p in run.checkpoints_dir.iterdir()) == ["best.pt", "last.pt"]


def test_a_full_disk_before_the_first_checkpoint_says_to_start_again(tmp_path, full_disk):
    with pytest.raises(CheckpointWriteError, match="no checkpoint yet; once there is room, "
                       "start it again"):
        RunDir(tmp_path / "run").save_checkpoint("last", state())
    assert list((tmp_path / "run" / "checkpoints").iterdir()) == []


def test_an_error_that_is_not_the_disks_is_not_hidden(tmp_path):
    with pytest.raises(TypeError, match="pickle"):  # a bug, not a full disk: raised as it is
        save_checkpoint({"model": {}, "config": {}, "lock": threading.Lock()}, tmp_path / "x.pt")
    assert list(tmp_path.iterdir()) == []


WRITE_UNDER_A_LIMIT = """
import resource, sys, torch
from pathlib import Path
from translator.checkpoint import CheckpointWriteError, save_checkpoint
resource.setrlimit(resource.RLIMIT_FSIZE, (int(sys.argv[2]), resource.RLIM_INFINITY))
try:
    save_checkpoint({"model": {"w": torch.zeros(200_000)}, "config": {}}, Path(sys.argv[1]))
except CheckpointWriteError as error:
    print(error)
    sys.exit(2)
"""


@pytest.mark.skipif(not hasattr(resource, "RLIMIT_FSIZE"), reason="no file-size limit here")
def test_a_real_write_failure_inside_torchs_serializer_is_one_sentence(tmp_path):
    """A file-size limit (ulimit -f) makes the kernel refuse the write while torch.save is
    writing, as a full disk does (which torch reports as 'unexpected pos ...')."""
    path = tmp_path / "last.pt"
    result = subprocess.run([sys.executable, "-c", WRITE_UNDER_A_LIMIT, str(path), "100000"],
                            capture_output=True, text=True, timeout=120, cwd=ROOT,
                            preexec_fn=lambda: signal.signal(signal.SIGXFSZ, signal.SIG_IGN))
    assert result.returncode == 2, result.stderr[-2000:]
    assert "larger than this system lets a file be" in result.stdout
    assert "a checkpoint of this run is 0.8 MB" in result.stdout
    assert "Traceback" not in result.stderr and list(tmp_path.iterdir()) == []
