"""Plots: heatmap, head and layer grids in PNG and SVG, JSON, Devanagari drawn with its own
font (no missing glyphs, conjuncts shaped), and the showcase set from a trained smoke model."""

import json
import warnings
from pathlib import Path

import pytest
import torch

import translator.corpus
from translator.alignment import SentenceAttention, View, WordAlignment
from translator.config import load_config
from translator.data import embedded_corpus_dir
from translator.drawing import (
    draw_showcase_heatmaps,
    plot_heads,
    plot_layers,
    showcase_sources,
    translate_showcase,
)
from translator.errors import TranslatorError
from translator.plotting import devanagari_font, plot_heatmap, save_alignment_json
from translator.training import train
from translator.translate import Translator

SMOKE_CONFIG = Path(__file__).resolve().parents[1] / "configs" / "smoke.yaml"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"

SOURCE_WORDS = ["राजेश", "ने", "ट्रेन", "टिकट", "बुक", "की"]
TARGET_WORDS = ["Rajesh", "booked", "a", "train", "ticket"]
SOURCE_PIECES = ["▁राजेश", "▁ने", "▁ट्", "रेन", "▁टिकट", "▁बुक", "▁की"]
TARGET_PIECES = ["▁Raj", "esh", "▁booked", "▁a", "▁train", "▁ticket"]


def missing_glyph_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def word_alignment(source_words=SOURCE_WORDS) -> WordAlignment:
    torch.manual_seed(0)
    weights = torch.rand(len(TARGET_WORDS), len(source_words)).softmax(-1)
    return WordAlignment(list(source_words), list(TARGET_WORDS), weights)


def random_attention(layers: int = 2, heads: int = 8) -> torch.Tensor:
    torch.manual_seed(0)
    return torch.randn(layers, heads, len(TARGET_PIECES) + 1, len(SOURCE_PIECES) + 1).softmax(-1)


def test_heatmap_png_and_svg_without_missing_glyphs(tmp_path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in ("map.png", "map.svg"):
            plot_heatmap(word_alignment(), tmp_path / name, title="layer 1, mean of heads",
                         annotate=True)
    assert missing_glyph_warnings(caught) == []
    assert (tmp_path / "map.png").read_bytes().startswith(PNG_MAGIC)
    assert "<svg" in (tmp_path / "map.svg").read_text(encoding="utf-8")
    with pytest.raises(ValueError, match=".png or .svg"):
        plot_heatmap(word_alignment(), tmp_path / "map.jpg")


def test_the_warning_check_catches_a_missing_glyph(tmp_path):
    """The check above could fail: a Chinese character is in neither font."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plot_heatmap(word_alignment(["漢", *SOURCE_WORDS[1:]]), tmp_path / "map.png")
    assert missing_glyph_warnings(caught)


def test_devanagari_conjuncts_are_shaped():
    """Shaped, क्ष is one conjunct glyph, narrower than the two letters क and ष side by side;
    drawn letter by letter (no shaping) it would be wider."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextToPath

    font = FontProperties(family=[devanagari_font()], size=20)
    width = TextToPath().get_text_width_height_descent
    assert width("क्ष", font, ismath=False)[0] < width("कष", font, ismath=False)[0]


def test_head_and_layer_grids(tmp_path):
    sentence = SentenceAttention.every(random_attention(), SOURCE_PIECES, TARGET_PIECES)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        heads = plot_heads(sentence, View(1), tmp_path / "heads.png")
        layers = plot_layers(sentence, tmp_path / "layers.svg")
    assert missing_glyph_warnings(caught) == []
    assert heads.read_bytes().startswith(PNG_MAGIC)
    assert "<svg" in layers.read_text(encoding="utf-8")


def test_alignment_json(tmp_path):
    path = save_alignment_json(word_alignment(), tmp_path / "a.json", layer=1,
                               source="राजेश ने ट्रेन टिकट बुक की")
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["source_words"] == SOURCE_WORDS and record["target_words"] == TARGET_WORDS
    assert len(record["weights"]) == len(TARGET_WORDS)
    assert all(sum(row) == pytest.approx(1, abs=1e-3) for row in record["weights"])
    assert record["layer"] == 1 and record["eos"] == "drop"
    assert "राजेश" in path.read_text(encoding="utf-8")  # readable, not \\u escapes


@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    """The smoke config on 400 embedded pairs, a few steps and no test split: a trained run
    folder in seconds."""
    out = tmp_path_factory.mktemp("runs")
    rows = (embedded_corpus_dir() / "train.tsv").read_text(encoding="utf-8").splitlines()
    (out / "train.tsv").write_text("\n".join(rows[:400]) + "\n", encoding="utf-8")
    (out / "dev.tsv").write_text("\n".join(rows[400:410]) + "\n", encoding="utf-8")
    config = load_config(SMOKE_CONFIG, [
        "data.source=files", f"data.train_path={out / 'train.tsv'}",
        f"data.dev_path={out / 'dev.tsv'}", f"train.output_dir={out}", "train.run_name=x",
        "train.max_steps=6", "train.eval_every=6"])
    run_dir, code = train(config)
    assert code == 0
    return run_dir


def test_showcase_heatmaps_from_a_smoke_run(smoke_run, tmp_path, monkeypatch):
    # One short Hindi sentence keeps the untrained model's babble (and the test) short.
    monkeypatch.setattr(translator.corpus, "SHOWCASE", [("मुंबई की ट्रेन", "the train to Mumbai")])
    run = Translator.from_run(smoke_run, device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        paths = draw_showcase_heatmaps(run, tmp_path / "heatmaps")
    assert missing_glyph_warnings(caught) == []
    names = sorted(p.name for p in paths)
    assert names == ["showcase-1-heads.png", "showcase-1-layers.png", "showcase-1.json",
                     "showcase-1.png", "showcase-1.svg"]
    assert all(p.is_file() and p.stat().st_size > 0 for p in paths)
    record = json.loads((tmp_path / "heatmaps" / "showcase-1.json").read_text(encoding="utf-8"))
    assert record["source"] == "मुंबई की ट्रेन" and record["direction"] == "hi-en"
    assert record["source_words"] == ["मुंबई", "की", "ट्रेन"]
    assert record["translation"] == run.translate(["मुंबई की ट्रेन"])[0].text  # the run's search
    layers, heads = run.config.model.layers, run.config.model.heads
    assert len(record["all_heads"]) == layers and len(record["all_heads"][0]) == heads
    assert len(record["weights"]) == len(record["target_words"])


def test_showcase_sources_follow_the_direction():
    hindi = [hi for hi, _ in translator.corpus.SHOWCASE]
    english = [en for _, en in translator.corpus.SHOWCASE]
    assert showcase_sources("hi-en") == list(zip(hindi, english))
    assert showcase_sources("en-hi") == list(zip(english, hindi))
    # an English→Hindi model is shown the seeds' own English sentences
    sources = [source for source, _ in showcase_sources("en-hi")]
    assert "The mechanic fixed the scooter because it was leaking petrol." in sources
    assert "UPI payment failed but amount deducted, refund please." in sources
    assert showcase_sources("both") == showcase_sources("hi-en")  # drawn hi→en
    with pytest.raises(TranslatorError, match="hi-en, en-hi, both"):
        showcase_sources("hi-fr")


def test_showcase_heatmaps_of_an_en_hi_model(smoke_run, tmp_path, monkeypatch):
    """For en-hi the English side is the source and the Hindi side the reference. (The smoke
    model is hi-en; which side it is given is all this checks.)"""
    monkeypatch.setattr(translator.corpus, "SHOWCASE", [("मुंबई की ट्रेन", "the train to Mumbai")])
    run = Translator.from_run(smoke_run, device="cpu")
    run.direction = "en-hi"
    showcase = translate_showcase(run)
    (source, reference, result), = showcase
    assert (source, reference) == ("the train to Mumbai", "मुंबई की ट्रेन")
    assert result.source == source and result.attention is not None
    paths = draw_showcase_heatmaps(run, tmp_path, showcase=showcase)
    assert len(paths) == 5
    record = json.loads((tmp_path / "showcase-1.json").read_text(encoding="utf-8"))
    assert record["direction"] == "en-hi" and record["source"] == "the train to Mumbai"
    assert record["reference"] == "मुंबई की ट्रेन" and record["translation"] == result.text
    assert record["source_words"] == ["the", "train", "to", "Mumbai"]
