"""Checkpoints written atomically (temporary file, fsync, rename) and read with clear errors."""

from __future__ import annotations

import os
import pickle
import tempfile
import zipfile
from pathlib import Path
from typing import Any

import torch

from translator.errors import TranslatorError


class CheckpointError(TranslatorError):
    """A checkpoint that is missing, truncated or not one of ours."""


def save_checkpoint(state: dict[str, Any], path: Path) -> None:
    """Write ``state`` so that ``path`` is always either the old file or the complete new
    one: a crash mid-write leaves only a stray temporary file, never a half checkpoint."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(state, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


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
