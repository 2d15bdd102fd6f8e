"""Fine-tuning (--init-from): a tiny run trained on general pairs, fine-tuned on health pairs.
The child keeps the parent's tokenizer byte for byte and starts from its weights with a fresh
optimiser; it lowers the health dev loss; overrides of what the weights fix are refused by
name; the parent is recorded; a fine-tuned run resumes exactly."""

import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from translator.build import build_run
from translator.checkpoint import load_checkpoint
from translator.cli import train_main
from translator.config import load_config
from translator.finetune import (
    FineTuneError,
    check_coverage,
    fine_tune_config,
    unknown_share,
)
from translator.run_dir import RunDir, file_sha256
from translator.tokenizer import Tokenizer
from translator.training import train

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"


def metrics(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def parent(tmp_path_factory, small_corpus) -> Path:
    output = tmp_path_factory.mktemp("runs")
    run_dir, code = train(load_config(SMOKE, [
        f"train.output_dir={output}", "train.run_name=parent", "train.heatmaps=false",
        "train.max_steps=40", "train.eval_every=20", *small_corpus["general"]]))
    assert code == 0
    return run_dir


def child_overrides(small_corpus, name: str, *more: str) -> list[str]:
    return [*small_corpus["health"], f"train.run_name={name}", "train.max_steps=20",
            "train.warmup_steps=5", "train.eval_every=10", *more]


@pytest.fixture(scope="module")
def child(parent, small_corpus) -> Path:
    run_dir, code = train(fine_tune_config(parent, None, child_overrides(small_corpus, "child")))
    assert code == 0
    return run_dir


def test_the_tokenizer_is_the_parents_byte_for_byte(parent, child):
    names = sorted(p.name for p in (parent / "tokenizer").iterdir())
    assert names == sorted(p.name for p in (child / "tokenizer").iterdir())
    for name in names:
        assert (parent / "tokenizer" / name).read_bytes() == (
            child / "tokenizer" / name).read_bytes(), name


def test_the_new_sets_dev_loss_falls_below_the_parents(child):
    records = metrics(child)
    before = [r for r in records if r["kind"] == "parent"]
    after = [r for r in records if r["kind"] == "validation"]
    assert len(before) == 1 and before[0]["step"] == 0
    assert after[-1]["dev_loss"] < before[0]["dev_loss"]


def test_it_starts_from_the_parents_weights_with_a_fresh_optimiser(parent, small_corpus,
                                                                   tmp_path):
    config = fine_tune_config(parent, None, child_overrides(small_corpus, "built"))
    run = build_run(config, RunDir(tmp_path / "built"))
    weights = load_checkpoint(parent / "checkpoints" / "best.pt")["model"]
    for name, tensor in run.model.state_dict().items():
        assert torch.equal(tensor, weights[name]), name
    assert run.optimizer.state == {} and run.scheduler.last_epoch == 0
    assert run.config.train.init_sha256 == file_sha256(parent / "checkpoints" / "best.pt")


def test_the_parent_is_recorded_in_config_and_card(parent, child):
    config = RunDir(child).read_config()
    assert config.train.init_from == str(parent)
    digest = file_sha256(parent / "checkpoints" / "best.pt")
    assert config.train.init_sha256 == digest
    card = (child / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert f"Fine-tuned from: {parent}" in card and digest in card
    assert "The parent model on this dev set before fine-tuning: chrF" in card


def test_fine_tuning_defaults_and_what_a_config_file_keeps(parent, tmp_path):
    saved = RunDir(parent).read_config()
    config = fine_tune_config(parent, None, [])
    assert config.train.learning_rate == saved.train.learning_rate / 4
    assert (config.train.warmup_steps, config.train.max_steps) == (100, 1000)
    assert config.model == saved.model and config.tokenizer == saved.tokenizer
    assert config.train.run_name is None
    domain = tmp_path / "domain.yaml"
    domain.write_text("train:\n  learning_rate: 0.0007\n  max_steps: 50\n")
    config = fine_tune_config(parent, domain, ["train.max_steps=60"])
    assert (config.train.learning_rate, config.train.warmup_steps) == (0.0007, 100)
    assert config.train.max_steps == 60 and config.model == saved.model


@pytest.mark.parametrize("override", ["model.d_model=128", "tokenizer.vocab_size=900",
                                      "train.init_sha256=abc"])
def test_an_override_of_what_the_weights_fix_is_refused_by_name(parent, override, capsys):
    with pytest.raises(FineTuneError, match=override.replace(".", r"\.")):
        fine_tune_config(parent, None, [override])
    assert train_main(["--init-from", str(parent), override]) == 2
    error = capsys.readouterr().err.strip()
    assert error.startswith("error: ") and override in error and error.count("\n") == 0


def test_a_config_file_with_another_model_is_refused_by_name(parent, tmp_path):
    other = tmp_path / "other.yaml"
    other.write_text("model:\n  d_model: 32\n  heads: 8\n")
    with pytest.raises(FineTuneError, match=r"model\.d_model=32"):
        fine_tune_config(parent, other, [])
    with pytest.raises(FineTuneError, match="--resume"):
        fine_tune_config(parent, None, [], resume=tmp_path)


def test_data_the_tokenizer_covers_poorly_is_warned_with_its_figure(parent, capsys):
    tokenizer = Tokenizer.load(parent / "tokenizer")

    def prepared(texts: list[str]) -> SimpleNamespace:
        ids = np.array([i for text in texts for i in tokenizer.encode_source(text)])
        arrays = (ids, np.array([0, len(ids)]))
        return SimpleNamespace(tokenizer=tokenizer,
                               train=SimpleNamespace(source_arrays=arrays, target_arrays=arrays))

    hindi = prepared(["राजेश ने टिकट बुक की", "मौसम आज अच्छा है"])
    assert check_coverage(hindi) < 0.01 and "warning" not in capsys.readouterr().err
    tamil = prepared(["வணக்கம் உலகம்", "நான் பள்ளிக்கு செல்கிறேன்"])
    share = check_coverage(tamil)
    assert share > 0.5 and share == unknown_share(tamil)
    assert f"warning: {share:.1%} of the new training data's pieces" in capsys.readouterr().err


def test_a_fine_tuned_run_resumes_exactly(parent, small_corpus, tmp_path):
    def child_config(name: str, steps: int):
        return fine_tune_config(parent, None, child_overrides(
            small_corpus, name, f"train.output_dir={tmp_path}", f"train.max_steps={steps}",
            "train.eval_every=100"))

    straight, _ = train(child_config("straight", 8))
    split, _ = train(child_config("split", 4))
    train(RunDir(split).read_config(["train.max_steps=8"]), resume=split)
    a = load_checkpoint(straight / "checkpoints" / "last.pt")
    b = load_checkpoint(split / "checkpoints" / "last.pt")
    assert a["step"] == b["step"] == 8
    for name, weight in a["model"].items():
        assert torch.equal(weight, b["model"][name]), name
    assert a["optimizer"]["state"].keys() == b["optimizer"]["state"].keys()
