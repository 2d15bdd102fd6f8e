"""MODEL_CARD.md: written at the end of a run and into each export (export-ct2; export-hf with
the Hugging Face YAML header, also as README.md), filled from the run folder with no
placeholder left: direction, data and licence, vocabularies, parameters, steps, time, device
and precision, test scores with signatures, the showcase translations, use and limits."""

import json
import re
from pathlib import Path

import pytest
import yaml

from translator.config import load_config
from translator.corpus import SHOWCASE
from translator.model_card import data_licence, data_source
from translator.training import train
from translator.translate import Translator

SMOKE = Path(__file__).resolve().parent.parent / "configs" / "smoke.yaml"
SECTIONS = ["## Model", "## Training", "## Scores", "## Showcase translations",
            "## Intended use", "## Limitations and known failure modes"]


@pytest.fixture(scope="module")
def run(tmp_path_factory, small_corpus) -> Path:
    output = tmp_path_factory.mktemp("runs")
    run_dir, code = train(load_config(SMOKE, [
        f"train.output_dir={output}", "train.run_name=carded", "train.heatmaps=false",
        "train.max_steps=20", "train.eval_every=10", *small_corpus["general"]]))
    assert code == 0
    return run_dir


def assert_filled(card: str) -> None:
    """No placeholder: nothing unrecorded, no None, no template braces, no empty value."""
    for placeholder in (r"not recorded", r"\bNone\b", r"\bnan\b", r"TODO", r"[{}?]"):
        assert not re.search(placeholder, card), placeholder
    assert not [line for line in card.splitlines() if line.rstrip().endswith(":")
                and line.startswith("- ")], "a field without a value"
    for section in SECTIONS:
        assert section in card, section


def test_a_run_folder_has_a_filled_card(run):
    card = (run / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert_filled(card)
    translator = Translator.from_run(run, device="cpu")
    scores = json.loads((run / "test_scores.json").read_text())
    assert "Direction: hi → en" in card
    assert f"Parameters: {translator.model.num_parameters():,}" in card
    assert "Steps: 20 " in card and "Device and precision: cpu, fp32, 1 process" in card
    assert "Sentence pairs (after cleaning): train 800, dev 60, test 60" in card
    assert f"one joint vocabulary of {translator.tokenizer.source_vocab_size:,} pieces" in card
    assert scores["bleu_signature"] in card and scores["chrf_signature"] in card
    assert f"chrF {scores['chrf']:.2f}" in card
    for hindi, english in SHOWCASE:
        output = translator.translate([hindi])[0].text or "(an empty translation)"
        assert f"- Source: {hindi}\n  - Reference: {english}\n  - This model: {output}" in card
    assert re.search(r"sha256 [0-9a-f]{64}", card)


def test_the_embedded_corpus_licence_is_read_from_its_data_card(run):
    text, hub = data_licence(load_config(SMOKE))
    assert (text, hub) == ("MIT (translator/corpus/DATACARD.md)", "mit")
    text, hub = data_licence(load_config(run / "config.yaml"))
    assert hub == "other" and text.startswith("unknown")


def test_local_files_are_named_and_a_missing_split_left_out(small_corpus):
    source = data_source(load_config(SMOKE, small_corpus["health"]))  # no test split
    assert source.startswith("local files: train /") and ", dev /" in source
    assert ", test " not in source and "None" not in source


def test_each_export_has_a_filled_card(run, tmp_path):
    pytest.importorskip("ctranslate2")
    pytest.importorskip("transformers")
    from translator.ct2 import export as export_ct2
    from translator.hf import export as export_hf

    ct2 = export_ct2(run, tmp_path / "ct2")
    card = (ct2 / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert_filled(card)
    assert not card.startswith("---")  # the hub's header only where the hub reads it
    assert "## This export" in card and "quantization int8" in card
    hf = export_hf(run, tmp_path / "hf")
    card = (hf / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert (hf / "README.md").read_text(encoding="utf-8") == card
    header, body = card.removeprefix("---\n").split("\n---\n", 1)
    metadata = yaml.safe_load(header)
    assert metadata["language"] == ["hi", "en"] and metadata["pipeline_tag"] == "translation"
    assert metadata["license"] == "other" and metadata["library_name"] == "transformers"
    assert_filled(body)
    assert "format transformers" in body and metadata["tags"][1] in ("marian", "pegasus")
