"""What `--resume` keeps: the checkpoint fixes the model's shape, the tokenizer, the data
(source, direction, files, filters) and the training recipe (optimiser, schedule, batches,
seed). A resume may change only how much longer and where it trains, how it validates and
reports (the train keys in `MAY_CHANGE`) and how it searches (every key of search:).
`check_resume` refuses any other change by name.

    check_resume(RunDir(path).read_config(), config_with_overrides, path)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from translator.config import Config, config_to_dict, load_config
from translator.errors import TranslatorError
from translator.run_dir import RunDir

# train keys a resumed run may change; every other key of every section is fixed
MAY_CHANGE = (
    "max_steps",  # train longer (or stop sooner)
    "max_minutes",  # a time limit for the whole run, counted from its start
    "device",  # continue on another device
    "precision",  # and in the precision that device supports
    "compile",
    "threads",
    "log_every",
    "eval_every",  # validation cadence
    "eval_sentences",
    "eval_samples",
    "patience",  # early stopping: validations without improvement, counted from the start
    "average_last",  # how many of the last validations to average at the end
    "heatmaps",  # the showcase heatmaps at the end
    "tensorboard",  # TensorBoard's event files from here on
)

# what a fixed key belongs to, for the message
KEPT = {
    "model": "model",
    "tokenizer": "tokenizer",
    "data": "data source and direction",
    "train": "training recipe (optimiser, schedule, batches, seed)",
}
RUN_FOLDER_KEYS = ("output_dir", "run_name", "overwrite")  # --resume names the folder itself


class ResumeError(TranslatorError):
    """An override that a resumed run cannot honour."""


def override_text(value: Any) -> str:
    """A value as it is written in an override (YAML): null, true, [0.9, 0.98]."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list):
        return "[" + ", ".join(override_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {override_text(v)}" for k, v in value.items()) + "}"
    return str(value)


def changed_keys(saved: Config | dict[str, Any], config: Config
                 ) -> list[tuple[str, str, Any, Any]]:
    """(section, key, saved value, new value) of every fixed key that ``config`` changes.
    A key the saved config lacks (written by an older version) is not compared."""
    before = saved if isinstance(saved, dict) else config_to_dict(saved)
    after = config_to_dict(config)
    changes = []
    for section, values in after.items():
        if section == "search":  # how translations are searched is no part of the weights
            continue
        old_section = before.get(section) or {}
        for key, value in values.items():
            if section == "train" and key in MAY_CHANGE:
                continue
            if key in old_section and old_section[key] != value:
                changes.append((section, key, old_section[key], value))
    return changes


def check_resume(saved: Config | dict[str, Any], config: Config, run: str | Path) -> None:
    """Refuse ``config`` for resuming the run ``run`` (trained as ``saved`` says) if it changes
    any key the checkpoint fixes, naming each one and the override to drop."""
    changes = changed_keys(saved, config)
    if not changes:
        return
    folder = [c for c in changes if c[0] == "train" and c[1] in RUN_FOLDER_KEYS]
    if folder:
        overrides = " ".join(f"train.{key}={override_text(new)}" for _, key, _, new in folder)
        raise ResumeError(f"--resume continues {run} in place, so it takes no new run folder; "
                          f"drop {overrides} or start a new run without --resume")
    trained = ", ".join(f"{key} {override_text(old)}" for _, key, old, _ in changes)
    kept = [KEPT[s] for s in KEPT if any(c[0] == s for c in changes)]
    kept_text = kept[0] if len(kept) == 1 else f"{', '.join(kept[:-1])} and {kept[-1]}"
    overrides = " ".join(f"{section}.{key}={override_text(new)}"
                         for section, key, _, new in changes)
    raise ResumeError(f"{run} was trained with {trained}; --resume keeps the run's "
                      f"{kept_text}; drop {overrides} or start a new run")


def run_config(config: Path | None, resume: Path | None, overrides: list[str],
               default: Path) -> Config:
    """The config a training starts from: a resumed run's own config.yaml, else ``config``
    (None: ``default``), with ``overrides`` applied."""
    if resume is not None and config is not None:
        raise ResumeError("--resume continues a run with its own config.yaml; drop "
                          f"--config {config}, or start a new run without --resume")
    if resume is not None:
        return RunDir.open(resume).read_config(overrides)
    return load_config(config or default, overrides)
