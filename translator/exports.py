"""Export folders: what `translator.ct2` and `translator.hf` write a trained run into.

An export folder holds the engine's own files beside `EXPORT_FILE` (where the export came from
and how it was made). It is written whole or not at all (`written_whole`), and only into a new
folder or an earlier export (`check_export_folder`): a run folder is never replaced.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from translator.errors import TranslatorError

EXPORT_FILE = "export.json"  # what an export folder holds beside the engine's files


def check_export_folder(out: Path, error: type[TranslatorError]) -> None:
    """Refuse (with ``error``) an ``out`` that holds something other than an earlier export of
    this project (an export folder has `EXPORT_FILE`): a run folder, say, is never replaced."""
    if out.exists() and not (out / EXPORT_FILE).is_file() and (
            not out.is_dir() or any(out.iterdir())):
        raise error(f"{out} exists and is not an earlier export; name a new folder")


@contextmanager
def written_whole(out: Path) -> Iterator[Path]:
    """A new folder beside ``out`` to write an export into: renamed to ``out`` (replacing an
    earlier export) when the block ends, removed if it fails, so that ``out`` is never a half
    of one."""
    temporary = out.with_name(f".{out.name}.{os.getpid()}")
    shutil.rmtree(temporary, ignore_errors=True)
    temporary.mkdir(parents=True)
    try:
        yield temporary
    except BaseException:
        shutil.rmtree(temporary, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    temporary.rename(out)


def write_export_record(folder: Path, record: dict) -> None:
    """`EXPORT_FILE`: where an export came from and how it was made."""
    (folder / EXPORT_FILE).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")


def is_export(folder: Path) -> bool:
    return (folder / EXPORT_FILE).is_file()


def read_export_record(folder: Path) -> dict[str, Any]:
    """The `EXPORT_FILE` of an export folder."""
    return json.loads((folder / EXPORT_FILE).read_text(encoding="utf-8"))
