"""Configs: YAML + dotted overrides, rejected by key name when wrong."""

from pathlib import Path

import pytest
import yaml

from translator.config import ConfigError, load_config

CONFIGS = Path(__file__).resolve().parent.parent / "configs"


@pytest.mark.parametrize("name", ["default.yaml", "smoke.yaml", "iitb.yaml"])
def test_shipped_configs_load(name):
    """Every shipped config loads, and each key it writes reaches the config with its value."""
    written = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    config = load_config(CONFIGS / name)
    for section, values in written.items():
        for key, value in (values or {}).items():
            assert getattr(getattr(config, section), key) == value, f"{name}: {section}.{key}"


def test_iitb_is_transformer_base():
    model = load_config(CONFIGS / "iitb.yaml").model
    assert (model.d_model, model.heads, model.layers, model.d_ff) == (512, 8, 6, 2048)


def test_overrides_are_typed():
    config = load_config(CONFIGS / "default.yaml",
                         ["train.max_steps=200", "model.layers=2", "train.learning_rate=5e-4",
                          "data.max_rows=null", "train.adam_betas=[0.9, 0.99]"])
    assert config.train.max_steps == 200 and config.model.layers == 2
    assert config.train.learning_rate == pytest.approx(5e-4)
    assert config.train.adam_betas == [0.9, 0.99]
    assert load_config(None, ["train.learning_rate=1"]).train.learning_rate == 1.0


@pytest.mark.parametrize("override, key", [
    ("train.max_stepz=3", "train.max_stepz"),
    ("modle.layers=2", "modle"),
    ("train.max_steps=many", "train.max_steps"),
    ("model.dropout=true", "model.dropout"),
    ("data.hub_splits=5", "data.hub_splits"),
    ("train.precision=fp8", "precision"),
])
def test_bad_keys_and_types_are_named(override, key):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_config(CONFIGS / "default.yaml", [override])


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("train:\n  max_steps: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(broken)
    scalar = tmp_path / "scalar.yaml"
    scalar.write_text("42\n")
    with pytest.raises(ConfigError, match="sections"):
        load_config(scalar)
    with pytest.raises(ConfigError, match="section.key=value"):
        load_config(None, ["max_steps"])


def test_a_legacy_search_override_wins_over_the_config_file_and_says_so(capsys):
    """train.test_beam_size=1 on the command line, with configs/iitb.yaml's search.beam_size: 5:
    the command line wins, and the notice says what the override was read as and what it
    replaced (issue 30: it was announced as read, then dropped for the file's 5)."""
    config = load_config(CONFIGS / "iitb.yaml", ["train.test_beam_size=1"])
    assert config.search.beam_size == 1
    notice = capsys.readouterr().err
    assert "train.test_beam_size=1 is read as search.beam_size=1" in notice
    assert "replacing search.beam_size: 5" in notice


@pytest.mark.parametrize("overrides, beam", [
    (["search.beam_size=3", "train.test_beam_size=1"], 1),
    (["train.test_beam_size=1", "search.beam_size=3"], 3),
])
def test_a_legacy_override_counts_where_it_stands_among_the_overrides(overrides, beam):
    """A renamed key is an override like any other: the last one given wins."""
    assert load_config(CONFIGS / "iitb.yaml", overrides).search.beam_size == beam


def test_legacy_search_keys_in_a_config_file_still_read(tmp_path, capsys):
    """A file written before the search section: its train: search keys are read as search:
    keys, with a notice; one it also sets under search: keeps its search: value."""
    path = tmp_path / "old.yaml"
    path.write_text("train:\n  test_beam_size: 4\n  length_penalty: 0.6\n"
                    "search:\n  length_penalty: 1.2\n", encoding="utf-8")
    config = load_config(path)
    assert (config.search.beam_size, config.search.length_penalty) == (4, 1.2)
    assert "train.test_beam_size → search.beam_size" in capsys.readouterr().err
