"""Errors the user can act on, each carrying a one-sentence message."""

import os
from pathlib import Path


class TranslatorError(Exception):
    """An error with a one-sentence message meant for the user."""


def write_failure(error: OSError) -> str:
    """One sentence for a file that could not be written, with the resume command when the
    file belongs to a run that has a checkpoint."""
    message = f"cannot write {error.filename or 'a file'}: {error.strerror or error}"
    if error.filename:
        for folder in Path(os.fsdecode(error.filename)).resolve().parents:
            if (folder / "checkpoints" / "last.pt").is_file():
                return (f"{message}; free some space (or fix the folder), then continue with: "
                        f"python scripts/train.py --resume {folder}")
    return message
