"""The run folder, owned here: what it holds, where each file lives, which run is the newest.

    runs/20261130-061500/
        config.yaml              the resolved config (vocabulary sizes filled in)
        tokenizer/               the SentencePiece model(s) and tokenizer.json
        checkpoints/last.pt      the latest state (resume from it)
        checkpoints/best.pt      the best by the early-stopping metric (step-N.pt: kept bests)
        metrics.jsonl            one JSON object per log step, validation and test score
        train.log                the same, plus sample translations
        test_scores.json         BLEU and chrF on the test split, with signatures
        test_hypotheses.txt      the translations those scores were computed from
        test_hypotheses_en_hi.txt  and the en→hi ones of a run of both directions
        curves.png               the learning curves drawn from metrics.jsonl
        MODEL_CARD.md            what the model is, its data, scores and limits (model_card.py)
        heatmaps/                the showcase sentences' alignment heatmaps and explorer pages
        tensorboard/             TensorBoard's event files (train.tensorboard: true)
        timeline.pt              their attention on the references at every validation
    runs/latest -> 20261130-061500

Every module and script asks a `RunDir` for these paths instead of spelling them out.
Checkpoints are written atomically (`translator.checkpoint`).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from translator.checkpoint import CheckpointWriteError, load_checkpoint, save_checkpoint
from translator.config import Config, load_config, save_config
from translator.errors import TranslatorError

RUNS_DIR = Path("runs")  # where training puts run folders by default (train.output_dir)
LATEST = "latest"  # the link in the runs folder that names the newest run


class RunDirError(TranslatorError):
    """A run folder that is missing, incomplete or must not be overwritten."""


@dataclass(frozen=True)
class RunDir:
    """One run folder; ``os.fspath(run_dir)`` is its path, so it goes wherever a path does."""

    path: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "path", Path(self.path))

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)

    # -- what it holds

    @property
    def config_file(self) -> Path:
        return self.path / "config.yaml"

    @property
    def tokenizer_dir(self) -> Path:
        return self.path / "tokenizer"

    @property
    def checkpoints_dir(self) -> Path:
        return self.path / "checkpoints"

    @property
    def metrics_file(self) -> Path:
        return self.path / "metrics.jsonl"

    @property
    def log_file(self) -> Path:
        return self.path / "train.log"

    @property
    def curves_file(self) -> Path:
        return self.path / "curves.png"

    @property
    def heatmaps_dir(self) -> Path:
        return self.path / "heatmaps"

    @property
    def timeline_file(self) -> Path:
        """The showcase's attention at every validation (translator/timeline.py)."""
        return self.path / "timeline.pt"

    @property
    def test_scores_file(self) -> Path:
        return self.path / "test_scores.json"

    @property
    def held_out_file(self) -> Path:
        """The showcase family's and the first tries' translations, checked (held_out.py)."""
        return self.path / "held_out.json"

    @property
    def test_hypotheses_file(self) -> Path:
        return self.path / "test_hypotheses.txt"

    @property
    def test_hypotheses_en_hi_file(self) -> Path:
        """The en→hi test translations of a run of data.direction=both."""
        return self.path / "test_hypotheses_en_hi.txt"

    def checkpoint(self, name: str) -> Path:
        """checkpoints/NAME.pt ("last", "best", "step-1200", ...)."""
        return self.checkpoints_dir / (name if name.endswith(".pt") else f"{name}.pt")

    @property
    def model_card_file(self) -> Path:
        """MODEL_CARD.md (translator.model_card), rewritten at the end of training."""
        return self.path / "MODEL_CARD.md"

    @property
    def tensorboard_dir(self) -> Path:
        """TensorBoard's event files (train.tensorboard: true)."""
        return self.path / "tensorboard"

    def hypotheses_file(self, name: str, beam_size: int) -> Path:
        """Where `evaluate` writes the hypotheses of a set: hypotheses-NAME-beamN.txt."""
        return self.path / f"hypotheses-{name}-beam{beam_size}.txt"

    # -- creating and finding runs

    @classmethod
    def new(cls, output_dir: str | Path, name: str | None = None,
            overwrite: bool = False) -> RunDir:
        """A fresh run folder under ``output_dir``, created here and atomically (an exclusive
        mkdir), so two runs started at once never share one. Named by the date and time when
        ``name`` is None, with -2, -3, ... when that name is taken; a named folder that exists
        is refused unless it is empty or ``overwrite``."""
        parent = Path(output_dir)
        try:
            parent.mkdir(parents=True, exist_ok=True)
            if name is None:
                stamp = time.strftime("%Y%m%d-%H%M%S")
                for number in itertools.count(1):
                    run_dir = cls(parent / (stamp if number == 1 else f"{stamp}-{number}"))
                    if _claim(run_dir.path):
                        return run_dir
            run_dir = cls(parent / name)
            if _claim(run_dir.path) or overwrite:
                return run_dir
            if run_dir.path.is_dir() and not any(run_dir.path.iterdir()) and _claim(
                    run_dir.checkpoints_dir):  # an empty folder, taken by whoever fills it first
                return run_dir
        except OSError as error:
            raise RunDirError(f"cannot create a run folder in {parent}: {error.strerror}; "
                              "choose another train.output_dir") from None
        raise RunDirError(f"run folder {run_dir} already exists; choose another "
                          "train.run_name, resume it with --resume, or pass "
                          "train.overwrite=true")

    @classmethod
    def open(cls, path: str | Path) -> RunDir:
        """An existing run folder (one with a config.yaml)."""
        run_dir = cls(Path(path))
        if not run_dir.path.is_dir():
            raise RunDirError(f"run folder {run_dir} does not exist; pass the folder that "
                              "python scripts/train.py printed")
        if not run_dir.config_file.is_file():
            raise RunDirError(f"{run_dir} is not a run folder (no config.yaml in it); pass "
                              "the folder that python scripts/train.py printed")
        return run_dir

    @classmethod
    def newest(cls, runs_dir: str | Path = RUNS_DIR) -> RunDir:
        """runs/latest if it names a run, else the folder under ``runs_dir`` whose newest
        checkpoint is the most recent."""
        runs_dir = Path(runs_dir)
        latest = runs_dir / LATEST
        if (latest / "config.yaml").is_file():
            return cls(latest.resolve())
        candidates = [cls(d) for d in runs_dir.iterdir() if d.is_dir()] if runs_dir.is_dir() \
            else []
        candidates = [r for r in candidates if r.config_file.is_file() and r.checkpoints()]
        if not candidates:
            raise RunDirError(f"no trained run found under {runs_dir}/; train one with python "
                              "scripts/train.py or pass --run DIR")
        return max(candidates, key=lambda r: max(p.stat().st_mtime for p in r.checkpoints()))

    @classmethod
    def find(cls, path: str | Path | None = None, runs_dir: str | Path = RUNS_DIR) -> RunDir:
        """``path`` if given (it must be a run folder), else the newest run."""
        return cls.open(path) if path is not None else cls.newest(runs_dir)

    def point_latest(self) -> None:
        """Make <runs folder>/latest a link to this run (replaced atomically)."""
        link = self.path.parent / LATEST
        temporary = self.path.parent / f".{LATEST}.{os.getpid()}"
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(self.path.name)
        os.replace(temporary, link)

    # -- its config and checkpoints

    def read_config(self, overrides: list[str] | None = None) -> Config:
        return load_config(self.config_file, overrides)

    def write_config(self, config: Config) -> None:
        save_config(config, self.config_file)

    def checkpoints(self) -> list[Path]:
        return sorted(self.checkpoints_dir.glob("*.pt"))

    def find_checkpoint(self, checkpoint: str = "best") -> Path:
        """The checkpoint ``checkpoint`` names: "best" (falling back to last.pt, which a run
        stopped before its first validation has alone), "last", "step-N", or a .pt file."""
        if checkpoint.endswith(".pt") and Path(checkpoint).is_file():
            return Path(checkpoint)
        path = self.checkpoint(checkpoint)
        if not path.is_file() and checkpoint == "best":
            path = self.checkpoint("last")
        if not path.is_file():
            raise RunDirError(f"{self} has no checkpoint {path.name} (in {self.checkpoints_dir});"
                              " train the run further or pick another with --checkpoint")
        return path

    def save_checkpoint(self, name: str, state: dict[str, Any], also: Iterable[str] = ()
                        ) -> Path:
        """Write checkpoints/NAME.pt atomically: it is always the old or the complete new one;
        each name in ``also`` ("best") becomes a hard link of the same file. A write the disk
        refuses says what is kept and how to go on."""
        path = self.checkpoint(name)
        try:
            save_checkpoint(state, path, [self.checkpoint(other) for other in also])
        except CheckpointWriteError as error:
            last = self.checkpoint("last")
            if last.is_file():
                advice = (f"{last} from the previous save is kept; once there is room, "
                          f"continue with: python scripts/train.py --resume {self}")
            else:
                advice = "the run has no checkpoint yet; once there is room, start it again"
            raise CheckpointWriteError(f"{error}; {advice}", error.needed) from None
        return path

    def load_checkpoint(self, name: str, map_location: str | torch.device = "cpu"
                        ) -> dict[str, Any]:
        return load_checkpoint(self.checkpoint(name), map_location)


def file_sha256(path: Path) -> str:
    """The sha256 of a file (a checkpoint, as a fine-tune's parent and a model card name it)."""
    digest = hashlib.sha256()
    with open(path, "rb") as file:
        while block := file.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _claim(path: Path) -> bool:
    """Create the folder ``path``; False if it exists (whoever created it owns it)."""
    try:
        path.mkdir()
    except FileExistsError:
        return False
    return True
