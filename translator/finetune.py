"""Fine-tuning: a new run that starts from a trained run's weights, with the parent's tokenizer
(copied byte for byte) and model settings, on new data, with a fresh optimiser, schedule and
step count.

    python scripts/train.py --init-from runs/general data.source=files data.train_path=...

The config starts from the parent's config.yaml (or ``--config FILE``) with the fine-tuning
defaults of `FINE_TUNE_DEFAULTS` over it; the command line's overrides come last. An override
of the model or tokenizer (which the weights fix) is refused by name, and so is a config file
whose model or tokenizer section differs from the parent's. The run records its parent (run
folder, checkpoint sha256) in config.yaml (train.init_from, train.init_sha256) and its model
card.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch
import yaml

from translator.checkpoint import load_checkpoint
from translator.config import Config, build_config, config_to_dict, load_config
from translator.encoded import PreparedData
from translator.errors import TranslatorError
from translator.reporting import log, say
from translator.resume import override_text
from translator.run_dir import RunDir, file_sha256

# The train keys a fine-tune sets unless the config file or an override does: a lower peak (a
# quarter of the parent's: the weights are already good, a full peak would undo much of what
# they know), a short warm-up and a short run; the rest (batches, validation, time limit) is the
# parent's or the file's.
FINE_TUNE_DEFAULTS = {
    "learning_rate": lambda parent: parent.train.learning_rate / 4,
    "warmup_steps": lambda parent: 100,
    "max_steps": lambda parent: 1000,
}
FIXED_SECTIONS = ("model", "tokenizer")  # what the parent's weights and pieces fix
# what --init-from and training set themselves, and a new run folder's name
PARENT_KEYS = ("init_from", "init_sha256")
COVERAGE_WARNING = 0.01  # warn when more than this share of the new data's pieces are
# <unk> or bytes: the parent's pieces do not cover the new text well


class FineTuneError(TranslatorError):
    """A fine-tune that cannot start as asked."""


def fine_tune_config(parent: str | Path, config: Path | None, overrides: list[str],
                     resume: Path | None = None) -> Config:
    """The config of a fine-tune of the run ``parent``: ``config`` (None: the parent's own
    config.yaml) with the parent's model and tokenizer and `FINE_TUNE_DEFAULTS`, then
    ``overrides``; an override (or a config file) that changes the model or tokenizer is
    refused by name."""
    if resume is not None:
        raise FineTuneError(f"--resume continues {resume} as it was started; drop "
                            f"--init-from {parent}")
    parent_dir = RunDir.open(parent)
    saved = parent_dir.read_config()
    for override in overrides:
        key = override.split("=", 1)[0].strip()
        section, _, name = key.partition(".")
        if section in FIXED_SECTIONS or (section == "train" and name in PARENT_KEYS):
            raise FineTuneError(f"--init-from keeps {parent_dir}'s {section} settings, which "
                                f"its weights were trained with; drop {override} (or train a "
                                "new model without --init-from)")
    written: dict[str, Any] = {}  # the sections of keys the config file itself sets
    values = config_to_dict(saved)
    if config is not None:
        base = load_config(config)
        written = yaml.safe_load(Path(config).read_text(encoding="utf-8")) or {}
        check_fixed_sections(written, values, config, parent_dir)
        values = {**config_to_dict(base), **{s: values[s] for s in FIXED_SECTIONS}}
    file_train = written.get("train") or {}
    for key, default in FINE_TUNE_DEFAULTS.items():
        if key not in file_train:
            values["train"][key] = default(saved)
    if config is None:
        values["train"].update(run_name=None, overwrite=False)
    values["train"].update(init_from=str(parent_dir.path), init_sha256=None)
    return build_config(values, overrides)


def check_fixed_sections(written: dict[str, Any], saved: dict[str, Any], config: Path,
                         parent: RunDir) -> None:
    """Refuse a config file that sets a model or tokenizer key to another value than the
    parent's (vocabulary sizes and the pad id come from the tokenizer: not compared)."""
    derived = ("source_vocab_size", "target_vocab_size", "pad_id")
    changed = [f"{section}.{key}={override_text(value)}" for section in FIXED_SECTIONS
               for key, value in (written.get(section) or {}).items()
               if key not in derived and saved[section].get(key) != value]
    if changed:
        raise FineTuneError(f"{config} sets {' '.join(changed)}, but --init-from keeps "
                            f"{parent}'s model and tokenizer; remove those keys from the file "
                            "or use one without model: and tokenizer: sections")


def copy_parent_tokenizer(config: Config, tokenizer_dir: Path) -> None:
    """The parent's tokenizer folder, copied byte for byte into the new run's."""
    parent = RunDir.open(config.train.init_from)
    shutil.copytree(parent.tokenizer_dir, tokenizer_dir, dirs_exist_ok=True)


def start_from_parent(config: Config, model: torch.nn.Module, fingerprint: str) -> str:
    """Load the parent's checkpoint weights into ``model``; returns the checkpoint's sha256,
    checked against train.init_sha256 when one is given."""
    parent = RunDir.open(config.train.init_from)
    path = parent.find_checkpoint(config.train.init_checkpoint)
    digest = file_sha256(path)
    expected = config.train.init_sha256
    if expected and expected != digest:
        raise FineTuneError(f"{path} has sha256 {digest}, not the {expected} that "
                            "train.init_sha256 names; the parent checkpoint has changed")
    state = load_checkpoint(path)
    if state.get("tokenizer") != fingerprint:
        raise FineTuneError(f"{path} was trained with another tokenizer than the one in "
                            f"{parent.tokenizer_dir}; fine-tune from an unchanged run folder")
    model.load_state_dict(state["model"])
    say(f"fine-tuning from {path} (sha256 {digest[:16]}…)")
    return digest


def unknown_share(prepared: PreparedData) -> float:
    """The share of the train split's pieces (both sides) that are <unk> or byte pieces: text
    the tokenizer does not cover with pieces of its own."""
    tokenizer, flagged, total = prepared.tokenizer, 0, 0
    for ids, model in ((prepared.train.source_arrays[0], tokenizer.source_model),
                       (prepared.train.target_arrays[0], tokenizer.target_model)):
        size = model.get_piece_size()
        poor = np.array([model.is_unknown(i) or model.is_byte(i) for i in range(size)])
        counts = np.bincount(np.asarray(ids, dtype=np.int64), minlength=size)[:size]
        flagged, total = flagged + int(counts[poor].sum()), total + int(counts.sum())
    return flagged / max(total, 1)


def check_coverage(prepared: PreparedData) -> float:
    """Warn, with the figure, when the parent's tokenizer covers the new data poorly."""
    share = unknown_share(prepared)
    log.info("fine-tune data: %.2f%% of the training pieces are <unk> or bytes", 100 * share)
    if share > COVERAGE_WARNING:
        say(f"warning: {share:.1%} of the new training data's pieces are <unk> or bytes (the "
            f"parent's tokenizer covers it poorly; above {COVERAGE_WARNING:.0%} the model "
            "learns such text slowly); a model trained from scratch makes its own pieces")
    return share
