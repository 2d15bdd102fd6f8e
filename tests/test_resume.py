"""What --resume keeps: the keys a resumed run may change pass, every other change is refused
by name with the override to drop, and the README lists the keys that may change."""

import dataclasses
import re
from pathlib import Path

import pytest

from translator.config import TrainConfig, config_to_dict, load_config
from translator.resume import MAY_CHANGE, ResumeError, changed_keys, check_resume

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke.yaml"


def changed_value(value):
    """A valid value other than ``value`` for a train key."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return {"auto": "cpu", "cpu": "auto", "fp32": "bf16"}.get(value, "fp32")
    return value + 1


def test_every_key_that_may_change_on_resume_is_a_train_key():
    assert set(MAY_CHANGE) <= {f.name for f in dataclasses.fields(TrainConfig)}


@pytest.mark.parametrize("key", MAY_CHANGE)
def test_a_key_that_may_change_passes(key):
    saved = load_config(SMOKE)
    new = dataclasses.replace(saved, train=dataclasses.replace(
        saved.train, **{key: changed_value(getattr(saved.train, key))}))
    assert new != saved
    check_resume(saved, new, "runs/x")


@pytest.mark.parametrize("override, message", [
    ("model.d_model=128", "runs/x was trained with d_model 64; --resume keeps the run's model; "
     "drop model.d_model=128 or start a new run"),
    ("data.direction=en-hi", "runs/x was trained with direction hi-en; --resume keeps the run's "
     "data source and direction; drop data.direction=en-hi or start a new run"),
    ("data.source=hub", "keeps the run's data source and direction; drop data.source=hub"),
    ("tokenizer.vocab_size=900", "vocab_size 600; --resume keeps the run's tokenizer; drop "
     "tokenizer.vocab_size=900"),
    ("train.learning_rate=0.5", "learning_rate 0.003; --resume keeps the run's training recipe "
     "(optimiser, schedule, batches, seed); drop train.learning_rate=0.5"),
    ("train.seed=7", "drop train.seed=7"),
    ("train.batch_tokens=100", "drop train.batch_tokens=100"),
    ("train.run_name=other", "--resume continues runs/x in place, so it takes no new run folder; "
     "drop train.run_name=other"),
])
def test_a_key_the_checkpoint_fixes_is_refused_by_name(override, message):
    with pytest.raises(ResumeError) as raised:
        check_resume(load_config(SMOKE), load_config(SMOKE, [override]), "runs/x")
    assert message in str(raised.value)


def test_several_refused_keys_are_named_in_one_sentence():
    with pytest.raises(ResumeError) as raised:
        check_resume(load_config(SMOKE), load_config(SMOKE, [
            "model.layers=2", "tokenizer.joint=false", "train.max_steps=99"]), "runs/x")
    assert str(raised.value) == (
        "runs/x was trained with joint true, layers 1; --resume keeps the run's model and "
        "tokenizer; drop tokenizer.joint=false model.layers=2 or start a new run")


def test_keys_an_older_checkpoint_lacks_are_not_compared():
    saved = config_to_dict(load_config(SMOKE))
    del saved["model"]["d_model"]
    assert changed_keys(saved, load_config(SMOKE, ["model.d_model=128"])) == []


def test_the_readme_lists_the_keys_that_may_change_on_resume():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    paragraph = re.search(r"Keys that may change on `--resume`:(.*?)\n\n", readme, re.S)
    assert paragraph, "README: the 'Keys that may change on `--resume`:' paragraph is missing"
    assert re.findall(r"`train\.(\w+)`", paragraph.group(1)) == list(MAY_CHANGE)
