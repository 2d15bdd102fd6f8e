"""train.tensorboard: event files under RUN/tensorboard with the loss, learning rate and
tokens/s of each log step, the dev scores and the showcase heatmaps (images) of each
validation; without the package, one sentence and exit code 2 before anything is prepared."""

import json
import sys
from pathlib import Path

import pytest

from translator.cli import train_main
from translator.config import load_config
from translator.training import train

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"


def test_event_files_hold_the_named_scalars_and_the_showcase_images(tmp_path, small_corpus):
    pytest.importorskip("tensorboard", reason="the tensorboard extra is not installed")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir, code = train(load_config(SMOKE, [
        f"train.output_dir={tmp_path}", "train.run_name=board", "train.heatmaps=false",
        "train.tensorboard=true", "train.max_steps=10", "train.log_every=5",
        "train.eval_every=5", *small_corpus["general"]]))
    assert code == 0
    events = EventAccumulator(str(run_dir / "tensorboard"), size_guidance={"images": 0})
    events.Reload()
    tags = events.Tags()
    assert {"train/loss", "train/learning_rate", "train/tokens_per_second", "dev/loss",
            "dev/perplexity", "dev/bleu", "dev/chrf"} <= set(tags["scalars"])
    assert {"showcase/1", "showcase/2", "showcase/3"} <= set(tags["images"])
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    train_records = [r for r in records if r["kind"] == "train"]
    logged = events.Scalars("train/loss")
    assert [e.step for e in logged] == [r["step"] for r in train_records] == [5, 10]
    assert [e.value for e in logged] == pytest.approx([r["loss"] for r in train_records])
    validations = [r for r in records if r["kind"] == "validation"]
    assert [e.value for e in events.Scalars("dev/chrf")] == pytest.approx(
        [r["dev_chrf"] for r in validations])
    images = events.Images("showcase/1")
    assert [image.step for image in images] == [5, 10]
    assert images[0].encoded_image_string[:8] == b"\x89PNG\r\n\x1a\n"
    assert images[0].width > 100 and images[0].height > 100


def test_without_the_package_it_is_one_sentence(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # import fails
    code = train_main(["--config", str(SMOKE), f"train.output_dir={tmp_path}",
                       "train.tensorboard=true"])
    error = capsys.readouterr().err.strip()
    assert code == 2 and error.count("\n") == 0
    assert error == ("error: train.tensorboard is on but the tensorboard package is not "
                     "installed; pip install -e '.[tensorboard]' or set train.tensorboard=false")
    assert not list(tmp_path.iterdir())  # refused before a run folder was made
