"""The prepared-data cache: its folder, its entries' keys, the entries themselves, and the
`cache list|clear` command.

An entry is one folder of the cache, ``KIND-KEY`` (kinds: data, tokenizer, encoded, links;
`translator.encoded` and `translator.guided` make them), whose KEY hashes everything the entry
was made from. It is written to a temporary folder and renamed into place, and its meta.json
lists the size and hash of every file, checked before the entry is used: a damaged entry is
rebuilt with a warning, never trusted. meta.json's time is the entry's last use, which
`cache clear --older-than` ages by.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import time
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from translator.config import Config, load_config
from translator.errors import TranslatorError

log = logging.getLogger(__name__)

META = "meta.json"


def source_hash(*paths: str) -> str:
    """A short hash of these source files, for cache keys: an edit makes new entries."""
    return hashlib.sha256(b"".join(Path(path).read_bytes() for path in paths)).hexdigest()[:16]


class CacheWarning(UserWarning):
    """A cache entry was damaged and is being rebuilt."""


class CacheError(TranslatorError):
    """The cache folder cannot be used; the message says why."""


def cache_folder(config: Config) -> Path | None:
    """The cache folder the config names, or None when caching is off."""
    if not config.data.cache:
        return None
    return Path(config.data.cache_dir or Path(config.train.output_dir) / "cache").expanduser()


# ---------------------------------------------------------------- entries


def cache_key(*parts: object) -> str:
    """A short hash of ``parts`` (JSON-able, or made so by str): the KEY of an entry."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def file_digest(path: Path) -> str:
    digest = hashlib.blake2b(digest_size=16)
    with path.open("rb") as file:
        while chunk := file.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def _warn(message: str) -> None:
    log.warning(message)
    warnings.warn(message, CacheWarning, stacklevel=3)


class Entry:
    """One folder of the cache: KIND-KEY, holding files and meta.json."""

    def __init__(self, root: Path, kind: str, key: str, what: str) -> None:
        self.path = root / f"{kind}-{key}"
        self.key = key
        self.what = what

    def usable(self, skip_hash: Iterable[str] = ()) -> bool:
        """True if the entry is there and whole (every file's size, and its hash unless named
        in ``skip_hash``, as meta.json says); a damaged entry is removed with a warning."""
        if not self.path.exists():
            return False
        problem = self.problem(set(skip_hash))
        if problem is None:
            try:  # meta.json's time is the entry's last use, what `cache clear` ages by
                os.utime(self.path / META)
            except OSError:
                pass  # a read-only cache is still a cache
            return True
        self.discard(problem)
        return False

    def discard(self, problem: str) -> None:
        _warn(f"the cached {self.what} in {self.path} is damaged ({problem}); rebuilding it")
        shutil.rmtree(self.path, ignore_errors=True)

    def problem(self, skip_hash: set[str]) -> str | None:
        try:
            meta = json.loads((self.path / META).read_text(encoding="utf-8"))
            files = {str(name): (int(size), str(digest))
                     for name, (size, digest) in dict(meta["files"]).items()}
        except (OSError, ValueError, KeyError, TypeError):
            return f"{META} is missing or unreadable"
        if meta.get("key") != self.key:
            return f"{META} names another key"
        for name, (size, digest) in files.items():
            path = self.path / name
            if not path.is_file():
                return f"{name} is missing"
            if path.stat().st_size != size:
                return f"{name} has {path.stat().st_size} bytes, not {size}"
            if name not in skip_hash and file_digest(path) != digest:
                return f"{name} does not match its hash"
        return None

    def write(self, fill: Callable[[Path], dict]) -> None:
        """Build the entry in a temporary folder with ``fill`` (which returns extra meta) and
        rename it into place."""
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}.tmp")
        shutil.rmtree(temporary, ignore_errors=True)
        temporary.mkdir(parents=True)
        try:
            extra = fill(temporary)
            files = {path.name: [path.stat().st_size, file_digest(path)]
                     for path in sorted(temporary.iterdir())}
            (temporary / META).write_text(json.dumps({"key": self.key, "files": files, **extra},
                                                     indent=1), encoding="utf-8")
            if self.path.exists():  # another process built it meanwhile, or a damaged one
                if self.problem(set()) is None:
                    return
                shutil.rmtree(self.path, ignore_errors=True)
            os.replace(temporary, self.path)
        except OSError as error:
            if self.path.is_dir() and self.problem(set()) is None:
                return  # another process renamed the same entry into place first
            raise CacheError(f"cannot write the data cache in {self.path.parent} ({error}); "
                             "free space or set data.cache_dir (or data.cache=false)") from None
        finally:
            shutil.rmtree(temporary, ignore_errors=True)


# ---------------------------------------------------------------- list and clear


@dataclass(frozen=True)
class CacheEntry:
    """A folder of the cache, as `python -m translator cache list` shows it."""

    path: Path
    kind: str  # data, tokenizer, encoded or links; "unfinished": left by a stopped build
    size: int  # bytes
    last_used: float  # seconds since the epoch: when a run last read it (or it was built)


def cache_entries(root: Path) -> list[CacheEntry]:
    """Every entry in the cache folder ``root``, least recently used first ([] if none)."""
    if not root.is_dir():
        return []
    entries = []
    for path in root.iterdir():
        if not path.is_dir() or "-" not in path.name:
            continue  # not ours: leave it alone
        unfinished = path.name.startswith(".") and path.name.endswith(".tmp")
        kind = "unfinished" if unfinished else path.name.split("-", 1)[0]
        files = [file for file in path.rglob("*") if file.is_file()]
        meta = path / META
        last_used = (meta if meta.is_file() else path).stat().st_mtime
        entries.append(CacheEntry(path, kind, sum(file.stat().st_size for file in files),
                                  last_used))
    return sorted(entries, key=lambda entry: entry.last_used)


def clear_cache(root: Path, older_than_days: float | None = None,
                now: float | None = None) -> list[CacheEntry]:
    """Remove the entries of ``root`` (those unused for more than ``older_than_days`` days,
    when given) and return them. A run that needs one again rebuilds it."""
    cutoff = (now or time.time()) - (older_than_days or 0) * 86400
    removed = [entry for entry in cache_entries(root)
               if older_than_days is None or entry.last_used < cutoff]
    for entry in removed:
        shutil.rmtree(entry.path)
    return removed


def format_size(size: float) -> str:
    """Bytes as people read them: 512 B, 3.4 KiB, 1.2 MiB, 2.0 GiB."""
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB"):
        size /= 1024
        if size < 1024:
            return f"{size:.1f} {unit}"
    return f"{size / 1024:.1f} GiB"


def cache_command(action: str, root: Path | None, config: str | Path | None = None,
                  older_than_days: float | None = None) -> str:
    """`python -m translator cache list|clear`: the cache folder ``root`` (None: the one the
    config file ``config`` names, the defaults' for None) listed (one line per entry: size,
    kind, last use, name, least recently used first, and a line of totals) or cleared (of
    entries unused for more than ``older_than_days`` days, if given); what to print."""
    if older_than_days is not None and (action != "clear" or older_than_days < 0):
        raise CacheError("--older-than takes a number of days ≥ 0, with clear")
    root = root or cache_folder(load_config(config))
    if root is None:
        raise CacheError("that config turns the cache off (data.cache: false); name a folder "
                         "with --dir")
    if action == "clear":
        removed = clear_cache(root, older_than_days)
        return (f"removed {len(removed)} entries ({format_size(sum(e.size for e in removed))})"
                f" from {root}")
    entries, now = cache_entries(root), time.time()
    lines = [f"{format_size(entry.size):>10}  {entry.kind:<10}  used "
             f"{(now - entry.last_used) / 86400:5.1f} days ago  {entry.path.name}"
             for entry in entries]
    return "\n".join(lines + [f"{len(entries)} entries, "
                              f"{format_size(sum(e.size for e in entries))} in {root}"])
