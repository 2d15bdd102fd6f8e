"""What a run tells the person at the terminal and its train.log: one line at a time, from
the main process only, kept clear of the progress bar (stdout carries only the run folder's
path, so that scripts can read it)."""

from __future__ import annotations

import logging
import sys

from tqdm import tqdm

from translator.distributed import is_main_process
from translator.run_dir import RunDir

log = logging.getLogger("translator")


def setup_logging(run_dir: RunDir | None) -> None:
    """The "translator" logger writes to the run's train.log (on the main process only)."""
    log.setLevel(logging.INFO)
    log.propagate = False
    for handler in list(log.handlers):
        log.removeHandler(handler)
        handler.close()
    if run_dir is not None:
        handler = logging.FileHandler(run_dir.log_file, encoding="utf-8")
        handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
        log.addHandler(handler)


def say(message: str) -> None:
    """A line for the person at the terminal (kept clear of the progress bar) and the log."""
    if is_main_process():
        tqdm.write(message, file=sys.stderr)
        log.info(message)
