"""Checkpoints written atomically (temporary file, fsync, rename) and read with clear errors.

A checkpoint name is always either the old file or the complete new one. A write that fails
(a full disk, a file-size limit) removes its temporary file, leaves the old checkpoint in
place and raises `CheckpointWriteError`, which says how much space a checkpoint needs. One
write can go out under several names (``also``): the others are hard links of the same file,
so best.pt written at the step of last.pt costs no second copy.
"""

from __future__ import annotations

import errno
import os
import pickle
import shutil
import tempfile
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

import torch

from translator.errors import TranslatorError


class CheckpointError(TranslatorError):
    """A checkpoint that is missing, truncated or not one of ours."""


class CheckpointWriteError(CheckpointError):
    """A checkpoint that could not be written; the old one, if any, is still in place."""

    def __init__(self, message: str, needed: int = 0) -> None:
        super().__init__(message)
        self.needed = needed  # bytes one checkpoint of this state takes


class _Sink:
    """What torch.save writes into: counts the bytes and keeps the OSError of the file
    (torch's serializer turns it into an unhelpful RuntimeError). No file: only counts."""

    def __init__(self, file: IO[bytes] | None = None) -> None:
        self.file = file
        self.size = 0
        self.error: OSError | None = None

    def write(self, data: bytes) -> int:
        try:
            written = self.file.write(data) if self.file is not None else len(data)
        except OSError as error:
            self.error = error
            raise
        self.size += written
        return written

    def flush(self) -> None:
        if self.file is not None:
            self.file.flush()


def serialized_size(state: dict[str, Any]) -> int:
    """The bytes ``state`` takes as a checkpoint file (serialized, nothing written)."""
    sink = _Sink()
    torch.save(state, sink)
    return sink.size


def megabytes(size: int) -> str:
    return f"{size / 1e6:,.1f} MB"


def _open_temporary(path: Path) -> tuple[Path, IO[bytes]]:
    """A new temporary file beside ``path`` (.NAME.XXXX.tmp), open for writing."""
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    return Path(temporary), os.fdopen(handle, "wb")


def _remove_leftovers(path: Path) -> None:
    """Temporary files of ``path`` left by a writer that was killed (one writer per run)."""
    for leftover in path.parent.glob(f".{path.name}.*.tmp"):
        leftover.unlink(missing_ok=True)


def _fsync_directory(directory: Path) -> None:
    """Make the renames in ``directory`` durable (where the system allows it)."""
    try:
        handle = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(handle)
    except OSError:
        pass
    finally:
        os.close(handle)


def _link_or_copy(source: Path, path: Path) -> None:
    """``path`` atomically replaced by the same content as ``source``: a hard link, or a
    copy where the file system has none."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.unlink(missing_ok=True)
    try:
        try:
            os.link(source, temporary)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            shutil.copyfile(source, temporary)
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise


def _write_failure(path: Path, error: OSError, state: dict[str, Any]) -> CheckpointWriteError:
    needed = serialized_size(state)
    size = megabytes(needed)
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        free = megabytes(shutil.disk_usage(path.parent).free)
        reason = (f"no space left on the disk for {path}: a checkpoint of this run needs "
                  f"{size} and {free} are free")
    elif error.errno == errno.EFBIG:
        reason = (f"{path} would be larger than this system lets a file be (ulimit -f): a "
                  f"checkpoint of this run is {size}")
    else:
        reason = f"cannot write {path}: {error.strerror or error} (a checkpoint is {size})"
    return CheckpointWriteError(f"{reason}; the half-written file was removed", needed)


def save_checkpoint(state: dict[str, Any], path: Path, also: Iterable[Path] = ()) -> None:
    """Write ``state`` to ``path`` (and the same file under each name in ``also``), so that
    every name is always either its old file or the complete new one: a crash mid-write
    leaves at most a stray temporary file, removed by the next write. A write the disk
    refuses raises `CheckpointWriteError` and leaves the old files as they were."""
    path, also = Path(path), [Path(other) for other in also]
    path.parent.mkdir(parents=True, exist_ok=True)
    for name in (path, *also):
        _remove_leftovers(name)
    temporary, file = _open_temporary(path)
    sink = _Sink(file)
    try:
        try:
            with file:
                torch.save(state, sink)
                file.flush()
                os.fsync(file.fileno())
            for other in also:
                _link_or_copy(temporary, other)
            os.replace(temporary, path)
        except (OSError, RuntimeError) as error:
            failure = sink.error or (error if isinstance(error, OSError) else None)
            if failure is None:
                raise
            temporary.unlink(missing_ok=True)
            raise _write_failure(path, failure, state) from None
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    _fsync_directory(path.parent)


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint {path} does not exist; check the run folder, or "
                              "train one with python scripts/train.py")
    try:
        state = torch.load(path, map_location=map_location, weights_only=False)
    except (RuntimeError, EOFError, zipfile.BadZipFile, pickle.UnpicklingError, OSError,
            ValueError, AttributeError, ImportError):
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated and cannot be read; "
                              "use another checkpoint of the run (last.pt or best.pt) or "
                              "train again") from None
    if not isinstance(state, dict) or "model" not in state or "config" not in state:
        raise CheckpointError(f"{path} is not a translator checkpoint (no model weights and "
                              "config in it)")
    return state
