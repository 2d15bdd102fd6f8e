"""TensorBoard for a run (train.tensorboard: true, pip install -e '.[tensorboard]'): the loss,
learning rate and tokens/s at each log step, the dev scores and the showcase sentences'
heatmaps (as images) at each validation, under RUN/tensorboard.

    tensorboard --logdir runs        # every run's folder, side by side

JoeyNMT logs the same at its validations; here the images are the run's own heatmaps
(`plotting.plot_heatmap`), drawn with greedy search from the weights of that validation.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch
from matplotlib.image import imread

from translator import plotting
from translator.alignment import SentenceAttention, View
from translator.config import Config
from translator.drawing import translate_showcase
from translator.errors import TranslatorError
from translator.tokenizer import Tokenizer
from translator.translate import Translator

# the names of the scalars at a log step, from metrics.jsonl's train record
TRAIN_SCALARS = {"loss": "train/loss", "lr": "train/learning_rate",
                 "tokens_per_second": "train/tokens_per_second"}


class TensorBoardMissingError(TranslatorError):
    """train.tensorboard is on but the tensorboard package is not installed."""


def summary_writer_class() -> type:
    """torch's SummaryWriter, or one sentence saying how to get it."""
    try:
        from torch.utils.tensorboard import SummaryWriter  # noqa: PLC0415 (an optional extra)
    except ImportError:
        raise TensorBoardMissingError(
            "train.tensorboard is on but the tensorboard package is not installed; pip install "
            "-e '.[tensorboard]' or set train.tensorboard=false") from None
    return SummaryWriter


def dev_scalars(record: dict[str, Any], prefix: str = "dev") -> dict[str, float]:
    """"dev/chrf": 41.2, ... of a validation record; a run of both directions' en→hi section
    as "dev-en-hi/chrf"."""
    scalars = {}
    for key, value in record.items():
        if isinstance(value, dict):
            scalars |= dev_scalars(value, f"dev-{key}")
        elif key.startswith("dev_") and isinstance(value, (int, float)) and key != "dev_sentences":
            scalars[f"{prefix}/{key.removeprefix('dev_')}"] = float(value)
    return scalars


class RunBoard:
    """A run's TensorBoard event files, written by the main process."""

    def __init__(self, folder: Path) -> None:
        self.writer = summary_writer_class()(log_dir=str(folder))

    def log_train(self, record: dict[str, Any]) -> None:
        for key, tag in TRAIN_SCALARS.items():
            self.writer.add_scalar(tag, record[key], record["step"])
        self.writer.flush()

    def log_validation(self, record: dict[str, Any], model: torch.nn.Module,
                       tokenizer: Tokenizer, config: Config, device: torch.device) -> None:
        """The dev scores and the showcase heatmaps of the weights as they are now."""
        step = record["step"]
        for tag, value in dev_scalars(record).items():
            self.writer.add_scalar(tag, value, step)
        translator = Translator(model, tokenizer, config, device)
        showcase = translate_showcase(translator, beam_size=1)
        with tempfile.TemporaryDirectory() as folder:
            for number, (_, _, result) in enumerate(showcase, start=1):
                sentence = SentenceAttention.of(result)
                path = plotting.plot_heatmap(sentence.words(View()),
                                             Path(folder) / f"{number}.png",
                                             title=f"{sentence.title(View())} · step {step}")
                image = np.asarray(imread(path))[..., :3]  # RGBA → RGB, floats in [0, 1]
                self.writer.add_image(f"showcase/{number}", image, step, dataformats="HWC")
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()
