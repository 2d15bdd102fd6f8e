"""Attention heatmaps: one word-level matrix per sentence, a grid of matrices (a layer's heads,
all layers), the numbers behind them as JSON, and a run's learning curves. These functions draw
the word matrices and labels they are given; which views they are is chosen by
`translator.drawing` (and computed by `translator.alignment`).

Bahdanau's picture: source words along the top, generated words down the side, each cell
shaded by how much that output word drew on that source word. Devanagari is drawn with Noto
Sans Devanagari (the `fontpkg_noto_sans_devanagari` package), which matplotlib ≥ 3.11 shapes
with libraqm, so conjuncts and vowel signs come out right. Figures are built without pyplot
(no global state, nothing left open) and saved as PNG (Agg) or SVG, by the file's suffix.
"""

from __future__ import annotations

import json
import math
from functools import cache
from pathlib import Path

import matplotlib
from matplotlib.figure import Figure
from torch import Tensor

from translator.alignment import EOS_LABEL, WordAlignment, rounded
from translator.errors import TranslatorError

FORMATS = (".png", ".svg")
COLOUR_MAP = "Blues"
DPI = 150
GRID_DPI = 100  # grids are for an overview; their PNGs stay small and quick to write
CELL_INCHES = 0.42  # side of one word cell in the single heatmap
MAX_INCHES = 30.0  # a babbling model's 200-word output still makes a usable file


@cache
def devanagari_font() -> str:
    """Register Noto Sans Devanagari with matplotlib (once) and return its family name."""
    import fontpkg_noto_sans_devanagari as noto
    from matplotlib import font_manager

    for path in sorted((noto.ROOT / "files").glob("*.ttf")):
        font_manager.fontManager.addfont(str(path))
    return noto.FAMILY


def _style() -> dict:
    """Devanagari first, DejaVu Sans (matplotlib's own) for anything it lacks."""
    return {"font.family": [devanagari_font(), "DejaVu Sans"], "svg.fonttype": "path",
            "axes.titlesize": 10, "figure.titlesize": 11}


def _save(figure: Figure, path: str | Path, dpi: int = DPI) -> Path:
    path = Path(path)
    if path.suffix.lower() not in FORMATS:
        raise ValueError(f"cannot tell the image format of {path}; end it in .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def _draw_matrix(axes, alignment: WordAlignment, annotate: bool, x_labels: bool,
                 y_labels: bool, font_size: float = 9):
    """Shade ``alignment`` into ``axes``: source words across the top, target words down."""
    weights = alignment.weights.float().numpy()
    image = axes.imshow(weights, cmap=COLOUR_MAP, vmin=0.0, vmax=1.0, aspect="auto",
                        interpolation="nearest")
    axes.xaxis.tick_top()
    if x_labels:
        axes.set_xticks(range(len(alignment.source_words)), alignment.source_words,
                        rotation=60, ha="left", rotation_mode="anchor", fontsize=font_size)
    else:  # no ticks at all: a grid's inner panels stay clean (and quick to draw)
        axes.set_xticks([])
    if y_labels:
        axes.set_yticks(range(len(alignment.target_words)), alignment.target_words,
                        fontsize=font_size)
    else:
        axes.set_yticks([])
    axes.tick_params(length=0)
    if alignment.eos_kept:  # set the EOS column (and row) apart from the words
        axes.axvline(len(alignment.source_words) - 1.5, color="grey", linewidth=1)
        if alignment.target_words and alignment.target_words[-1] == EOS_LABEL:
            axes.axhline(len(alignment.target_words) - 1.5, color="grey", linewidth=1)
    if annotate:
        for j, row in enumerate(weights):
            for i, weight in enumerate(row):
                axes.text(i, j, f"{weight:.2f}".lstrip("0") if weight < 1 else "1",
                          ha="center", va="center", fontsize=font_size - 2,
                          color="white" if weight > 0.55 else "black")
    return image


def _size(words: int) -> float:
    return min(MAX_INCHES, max(1.0, words * CELL_INCHES))


def plot_heatmap(alignment: WordAlignment, path: str | Path, title: str = "cross-attention",
                 annotate: bool = False, scale: str = "attention weight") -> Path:
    """One sentence's word-level matrix with a colour bar named ``scale``; ``annotate`` writes
    each weight in its cell. Format from the suffix (.png or .svg)."""
    with matplotlib.rc_context(_style()):
        figure = Figure(figsize=(_size(len(alignment.source_words)) + 2.5,
                                 _size(len(alignment.target_words)) + 1.5))
        axes = figure.add_subplot()
        if alignment.weights.numel() == 0:
            axes.set_axis_off()
            axes.text(0.5, 0.5, "(empty translation: nothing to show)", ha="center")
        else:
            image = _draw_matrix(axes, alignment, annotate, x_labels=True, y_labels=True)
            figure.colorbar(image, ax=axes, fraction=0.04, pad=0.03, label=scale)
        axes.set_title(title, pad=12)
        return _save(figure, path)


def plot_grid(panels: list[tuple[str, WordAlignment]], path: str | Path, title: str,
              columns: int) -> Path:
    """Named word matrices in a grid of ``columns``, sharing one colour scale; words on the
    outer edges only."""
    rows = math.ceil(len(panels) / columns)
    first = panels[0][1]
    width = min(MAX_INCHES / columns, max(1.5, len(first.source_words) * 0.22))
    height = min(MAX_INCHES / rows, max(1.5, len(first.target_words) * 0.22))
    with matplotlib.rc_context(_style()):
        figure = Figure(figsize=(columns * width + 2.5, rows * (height + 1.2) + 1.0),
                        layout="constrained")
        grid = figure.subplots(rows, columns, squeeze=False)
        image = None
        for index, axes in enumerate(grid.flat):
            if index >= len(panels) or first.weights.numel() == 0:
                axes.set_axis_off()
                continue
            name, alignment = panels[index]
            image = _draw_matrix(axes, alignment, annotate=False, x_labels=index < columns,
                                 y_labels=index % columns == 0, font_size=7)
            axes.set_xlabel(name, fontsize=9)
        if image is not None:
            figure.colorbar(image, ax=grid, fraction=0.02, pad=0.01, label="attention weight")
        figure.suptitle(title)
        return _save(figure, path, dpi=GRID_DPI)


def plot_animation(frames: list[tuple[str, WordAlignment]], path: str | Path, title: str,
                   seconds_per_frame: float = 0.6) -> Path:
    """Word matrices of one sentence pair (the same words in every frame) as an animated GIF
    (matplotlib's Pillow writer), each frame titled with its name; the last frame is held
    three times as long."""
    from matplotlib.animation import FuncAnimation, PillowWriter
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    path = Path(path)
    if path.suffix.lower() != ".gif":
        raise ValueError(f"an animation is a GIF; end {path} in .gif")
    path.parent.mkdir(parents=True, exist_ok=True)
    first = frames[0][1]
    order = list(range(len(frames))) + [len(frames) - 1] * 2
    with matplotlib.rc_context(_style()):
        figure = Figure(figsize=(_size(len(first.source_words)) + 2.5,
                                 _size(len(first.target_words)) + 2.2), layout="constrained")
        FigureCanvasAgg(figure)
        axes = figure.add_subplot()
        image = _draw_matrix(axes, first, annotate=False, x_labels=True, y_labels=True)
        figure.colorbar(image, ax=axes, fraction=0.04, pad=0.03, label="attention weight")

        def show(k: int) -> list:
            image.set_data(frames[order[k]][1].weights.float().numpy())
            figure.suptitle(f"{title}\n{frames[order[k]][0]}")
            return [image]

        animation = FuncAnimation(figure, show, frames=len(order), blit=False)
        animation.save(path, writer=PillowWriter(fps=1 / seconds_per_frame), dpi=DPI // 2)
    return path


def save_alignment_json(alignment: WordAlignment, path: str | Path, **extra) -> Path:
    """Write the words and weights as JSON ({"source_words", "target_words", "weights",
    "eos"} plus ``extra`` keys, e.g. the sentence, the view, or all heads' matrices)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**alignment.to_dict(), **{key: rounded(value) if isinstance(value, Tensor)
                                        else value for key, value in extra.items()}}
    path.write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    return path


CURVE_METRICS = ("chrf", "bleu", "loss")  # what can pick the best checkpoint, as in training
CURVE_NAMES = {"chrf": "chrF", "bleu": "BLEU", "loss": "loss"}


def _read_metrics(path: Path) -> tuple[dict[int, dict], dict[int, dict]]:
    """The train and validation records of a metrics.jsonl, by step (a step logged twice, as
    after a resume, keeps its later record). A last line cut short (a run killed while writing
    it) is skipped; any other line that is not a record is an error."""
    required = {"train": ("step", "loss"),
                "validation": ("step", "dev_loss", "dev_bleu", "dev_chrf")}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        raise TranslatorError(f"cannot read metrics file {path}; give a run folder's "
                              "metrics.jsonl") from None
    lines = text.splitlines()
    records: dict[str, dict[int, dict]] = {"train": {}, "validation": {}}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines) and not text.endswith("\n"):
                continue
            raise TranslatorError(f"{path} line {number} is not a JSON record; is it a run's "
                                  "metrics.jsonl?") from None
        if not isinstance(record, dict):
            raise TranslatorError(f"{path} line {number} is not a JSON object")
        kind = record.get("kind")
        if kind not in required:
            continue  # "test" and any later kinds
        missing = [key for key in required[kind]
                   if not isinstance(record.get(key), (int, float))]
        if missing:
            raise TranslatorError(f"{path} line {number}: the {kind} record lacks a number for "
                                  f"{', '.join(missing)}")
        records[kind][int(record["step"])] = record
    if not records["train"] and not records["validation"]:
        raise TranslatorError(f"{path} has no train or validation records; has the run logged "
                              "a step yet?")
    return records["train"], records["validation"]


def plot_learning_curves(metrics_path: str | Path, out_path: str | Path,
                         best_by: str = "chrf") -> Path:
    """Learning curves of a run from its metrics.jsonl: train and dev loss against steps
    (above), dev BLEU and chrF against steps (below), the best checkpoint marked (the
    validation with the highest dev ``best_by``: "chrf", "bleu", or the lowest "loss", the
    first of equals, as the trainer picks best.pt). Format from the suffix (.png or .svg).
    A file that cannot be read or holds no records raises `TranslatorError`."""
    if best_by not in CURVE_METRICS:
        raise ValueError(f"best_by must be one of {CURVE_METRICS}, not {best_by!r}")
    metrics_path = Path(metrics_path)
    train, validation = _read_metrics(metrics_path)
    train_steps = sorted(train)
    dev_steps = sorted(validation)
    aligned = [s for s in dev_steps if "showcase_aer" in validation[s]]  # translator.timeline
    figure = Figure(figsize=(7.5, 8.5 if aligned else 6.0), layout="constrained")
    loss_axes, score_axes, *aer_axes = figure.subplots(3 if aligned else 2, 1, sharex=True)
    if train_steps:
        loss_axes.plot(train_steps, [train[s]["loss"] for s in train_steps], color="tab:blue",
                       linewidth=1.2, label="train loss")
    if dev_steps:
        loss_axes.plot(dev_steps, [validation[s]["dev_loss"] for s in dev_steps], "o-",
                       color="tab:orange", markersize=4, label="dev loss")
        score_axes.plot(dev_steps, [validation[s]["dev_chrf"] for s in dev_steps], "o-",
                        color="tab:green", markersize=4, label="dev chrF")
        score_axes.plot(dev_steps, [validation[s]["dev_bleu"] for s in dev_steps], "s-",
                        color="tab:purple", markersize=4, label="dev BLEU")
        key = "dev_loss" if best_by == "loss" else f"dev_{best_by}"
        sign = -1 if best_by == "loss" else 1
        best = max(dev_steps, key=lambda s: (sign * validation[s][key], -s))
        record = validation[best]
        for axes in (loss_axes, score_axes):
            axes.axvline(best, color="grey", linestyle="--", linewidth=1)
        score_axes.annotate(
            f"best checkpoint (dev {CURVE_NAMES[best_by]}), step {best}:\n"
            f"chrF {record['dev_chrf']:.1f}  "
            f"BLEU {record['dev_bleu']:.1f}  loss {record['dev_loss']:.3f}",
            xy=(best, record["dev_chrf"]), xytext=(0.02, 0.95), textcoords="axes fraction",
            va="top", fontsize=8, arrowprops={"arrowstyle": "->", "color": "grey"})
    else:
        score_axes.text(0.5, 0.5, "(no validation yet)", ha="center", va="center",
                        transform=score_axes.transAxes, color="grey")
    loss_axes.set_ylabel("loss (cross-entropy)")
    score_axes.set_ylabel("dev score")
    score_axes.set_ylim(bottom=0)
    if aligned:
        _plot_aer(aer_axes[0], aligned, validation)
    (aer_axes or [score_axes])[0].set_xlabel("step")
    for axes in (loss_axes, score_axes, *aer_axes):
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(loc="best", fontsize=8)
    figure.suptitle(f"learning curves: {metrics_path.parent.name or metrics_path.name}")
    return _save(figure, out_path, dpi=100)


def _plot_aer(axes, steps: list[int], validation: dict[int, dict]) -> None:
    """The alignment panel: AER of the showcase references against their gold links and of
    the first dev pairs against the corpus's links, at each validation (lower is better)."""
    axes.plot(steps, [validation[s]["showcase_aer"] for s in steps], "o-", color="tab:red",
              markersize=4, label="showcase AER (gold links)")
    dev = [s for s in steps if "dev_aer" in validation[s]]
    if dev:
        axes.plot(dev, [validation[s]["dev_aer"] for s in dev], "s-", color="tab:brown",
                  markersize=4, label="dev AER (first 200 pairs)")
    axes.set_ylabel("alignment error rate")
    axes.set_ylim(0, 1)
