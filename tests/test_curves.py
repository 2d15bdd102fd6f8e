"""Learning curves from a run's metrics.jsonl: a PNG (and SVG) with the best checkpoint marked,
and a clear TranslatorError for a missing, empty or broken metrics file."""

import json

import matplotlib
import pytest

from translator.errors import TranslatorError
from translator.plotting import _read_metrics, plot_learning_curves

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def write_metrics(path, records, tail: str = "") -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail, encoding="utf-8")


def run_records() -> list[dict]:
    records = []
    for step in range(10, 101, 10):
        records.append({"kind": "train", "step": step, "loss": 6.0 - step / 25, "lr": 1e-3,
                        "tokens_per_second": 5000, "epoch": 0})
        if step % 50 == 0:
            chrf = {50: 30.0, 100: 28.0}[step]  # the best checkpoint is step 50's
            records.append({"kind": "validation", "step": step, "dev_loss": 3.0 - step / 100,
                            "dev_perplexity": 10.0, "dev_bleu": chrf / 3, "dev_chrf": chrf,
                            "dev_sentences": 20})
    records.append({"kind": "test", "step": 100, "split": "test", "bleu": 9.0, "chrf": 29.0})
    return records


def test_curves_of_a_run(tmp_path):
    metrics = tmp_path / "run" / "metrics.jsonl"
    metrics.parent.mkdir()
    write_metrics(metrics, run_records())
    out = plot_learning_curves(metrics, tmp_path / "run" / "curves.png")
    assert out.read_bytes().startswith(PNG_MAGIC)
    with matplotlib.rc_context({"svg.fonttype": "none"}):  # text kept as text, to read back
        svg = plot_learning_curves(metrics, tmp_path / "curves.svg")
    text = svg.read_text(encoding="utf-8")
    for label in ("train loss", "dev loss", "dev chrF", "dev BLEU", "learning curves: run"):
        assert label in text
    assert "best checkpoint (dev chrF), step 50" in text  # the highest dev chrF, not the last


def test_records_by_step_after_a_resume_and_a_cut_last_line(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    records = run_records()
    resumed = {"kind": "train", "step": 50, "loss": 1.5}  # step 50 logged again after a resume
    write_metrics(metrics, records + [resumed], tail='{"kind": "train", "st')
    train, validation = _read_metrics(metrics)
    assert sorted(train) == list(range(10, 101, 10)) and train[50]["loss"] == 1.5
    assert sorted(validation) == [50, 100]
    assert plot_learning_curves(metrics, tmp_path / "c.png", best_by="loss").exists()


def test_only_train_records_still_draw(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    write_metrics(metrics, [r for r in run_records() if r["kind"] == "train"])
    assert plot_learning_curves(metrics, tmp_path / "c.png").read_bytes().startswith(PNG_MAGIC)


@pytest.mark.parametrize(("content", "message"), [
    (None, "cannot read metrics file"),
    ("", "no train or validation records"),
    ('{"kind": "test", "step": 3, "bleu": 1.0}\n', "no train or validation records"),
    ('{"kind": "train", "step": 1, "loss": 2.0}\nnot json\n{"kind": "train"}\n',
     "line 2 is not a JSON record"),
    ("[1, 2]\n", "line 1 is not a JSON object"),
    ('{"kind": "validation", "step": 5, "dev_loss": 2.0}\n', "lacks a number for dev_bleu"),
])
def test_bad_metrics_are_a_clear_error(tmp_path, content, message):
    metrics = tmp_path / "metrics.jsonl"
    if content is not None:
        metrics.write_text(content, encoding="utf-8")
    with pytest.raises(TranslatorError, match=message):
        plot_learning_curves(metrics, tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


def test_bad_arguments(tmp_path):
    metrics = tmp_path / "metrics.jsonl"
    write_metrics(metrics, run_records())
    with pytest.raises(ValueError, match="best_by"):
        plot_learning_curves(metrics, tmp_path / "c.png", best_by="ter")
    with pytest.raises(ValueError, match=".png or .svg"):
        plot_learning_curves(metrics, tmp_path / "c.jpg")
