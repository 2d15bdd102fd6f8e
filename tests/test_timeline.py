"""Attention over training (translator/timeline.py): a smoke run writes one timeline entry per
validation (every layer and head, float16, rows summing to 1), a resume appends to it, each
validation logs the AERs that the run's last model gives again, and the showcase explorer's
training-step slider shows the stored numbers of the chosen step in headless Chromium."""

import json
import shutil
from pathlib import Path

import pytest
import torch

from translator import corpus
from translator.alignment import align_pairs, alignment_error_rate, supervised_layer
from translator.config import ConfigError, load_config
from translator.drawing import draw_showcase
from translator.explorer import read_explorer_data
from translator.run_dir import RunDir
from translator.timeline import (
    DEV_AER_PAIRS,
    TimelineSentence,
    dev_pairs_and_gold,
    read_timeline,
    showcase_gold,
    timeline_pairs,
    until,
)
from translator.training import Trainer, build_run
from translator.translate import Translator

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke.yaml"
CHROMIUM = shutil.which("chromium")


def fit(config, run_dir: RunDir, resume: bool = False) -> None:
    """Train as `train` does, without its test score (slow for a babbling model)."""
    run = build_run(config, run_dir, resume=resume)
    trainer = Trainer(run, resume=resume)
    try:
        run_dir.write_config(run.config)
        assert trainer.fit() == 0
    finally:
        trainer.close()


def validations(run_dir: Path) -> list[dict]:
    lines = (run_dir / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
    return [record for record in map(json.loads, lines) if record["kind"] == "validation"]


@pytest.fixture(scope="module")
def timeline_run(tmp_path_factory) -> tuple[Path, list[TimelineSentence]]:
    """A smoke run of 4 steps (validations at 2 and 4), its timeline then, and the run
    resumed to 6 steps."""
    output = tmp_path_factory.mktemp("runs")
    run_dir = RunDir.new(output, "t")
    fit(load_config(SMOKE, [f"train.output_dir={output}", "train.max_steps=4",
                            "train.eval_every=2"]), run_dir)
    before = read_timeline(run_dir.timeline_file)
    fit(run_dir.read_config(["train.max_steps=6"]), run_dir, resume=True)
    return run_dir.path, before


def test_one_entry_per_validation_of_every_layer_and_head(timeline_run):
    run_dir, _ = timeline_run
    config = load_config(run_dir / "config.yaml")
    followed = read_timeline(RunDir(run_dir).timeline_file)
    assert [(s.source, s.reference) for s in followed] == list(corpus.SHOWCASE)
    steps = [record["step"] for record in validations(run_dir)]
    assert steps == [2, 4, 6]
    for sentence in followed:
        assert sentence.steps == steps
        assert sentence.source_words == sentence.source.split()
        assert sentence.target_words == sentence.reference.split()
        shape = (config.model.num_decoder_layers, config.model.heads,
                 len(sentence.target_words) + 1, len(sentence.source_words) + 1)
        for weights in sentence.weights:
            assert weights.dtype == torch.float16 and tuple(weights.shape) == shape
            assert torch.allclose(weights.float().sum(-1), torch.ones(shape[:-1]), atol=2e-3)
        assert not torch.equal(sentence.weights[0], sentence.weights[-1])  # it learned


def test_a_resumed_run_appends_to_the_timeline(timeline_run):
    run_dir, before = timeline_run
    after = read_timeline(RunDir(run_dir).timeline_file)
    for old, new in zip(before, after, strict=True):
        assert old.steps == [2, 4] and new.steps == [2, 4, 6]
        for a, b in zip(old.weights, new.weights[:2]):
            assert torch.equal(a, b)


def test_entries_after_the_resumed_checkpoint_are_dropped():
    weights = [torch.full((1, 1, 2, 2), 0.5, dtype=torch.float16) for _ in range(3)]
    sentence = TimelineSentence("a b", "c", ["a", "b"], ["c"], [5, 10, 15], weights)
    (kept,) = until([sentence], 10)
    assert kept.steps == [5, 10] and len(kept.weights) == 2


def test_each_validation_logs_the_aers_the_last_model_gives(timeline_run):
    run_dir, _ = timeline_run
    records = validations(run_dir)
    for record in records:
        assert 0 <= record["showcase_aer"] <= 1 and 0 <= record["dev_aer"] <= 1
        assert record["timeline_seconds"] > 0
    translator = Translator.from_run(run_dir, "last", "cpu")  # the weights of step 6
    config = translator.config
    layer = supervised_layer(config)
    dev_pairs, dev_gold = dev_pairs_and_gold(config)
    assert len(dev_pairs) == DEV_AER_PAIRS
    for pairs, gold, key in ((timeline_pairs(config), showcase_gold(config), "showcase_aer"),
                             (dev_pairs, dev_gold, "dev_aer")):
        links = align_pairs(translator.model, translator.tokenizer, pairs, layer)
        assert records[-1][key] == round(alignment_error_rate(links, gold), 4)


def test_the_gold_links_fit_the_showcase_and_follow_the_direction():
    hindi_first = showcase_gold(load_config(SMOKE))
    english_first = showcase_gold(load_config(SMOKE, ["data.direction=en-hi"]))
    for links, swapped, (hindi, english) in zip(hindi_first, english_first, corpus.SHOWCASE):
        assert all(i < len(hindi.split()) and j < len(english.split()) for i, j in links)
        assert sorted((j, i) for i, j in links) == swapped
        linked = {j for _, j in links}  # every English word but the articles has a link
        assert {j for j, word in enumerate(english.split())
                if word.lower() not in ("a", "the")} <= linked


def test_the_config_key_turns_it_off_or_adds_pairs():
    assert load_config(SMOKE, ["train.timeline=false"]).train.timeline is False
    pairs = load_config(SMOKE, ['train.timeline=[["मेरा घर", "my house"]]'])
    assert timeline_pairs(pairs)[-1] == ("मेरा घर", "my house")
    with pytest.raises(ConfigError, match=r"\[source, reference\] pairs"):
        load_config(SMOKE, ['train.timeline=[["only a source"]]'])


# ---------------------------------------------------------------- the slider, in Chromium


@pytest.fixture(scope="module")
def showcase_page(timeline_run) -> Path:
    """The run's showcase pictures as train draws them (greedy, to keep them small)."""
    run_dir, _ = timeline_run
    draw_showcase(RunDir(run_dir), beam_size=1, device="cpu", checkpoint="last")
    return run_dir / "heatmaps" / "showcase-1.html"


def test_the_animation_has_a_frame_per_validation(timeline_run, showcase_page):
    from PIL import Image

    run_dir, _ = timeline_run
    with Image.open(run_dir / "heatmaps" / "timeline-1.gif") as image:
        assert image.n_frames >= 3  # identical frames would be merged into one


def cell_weights(page) -> list[float]:
    """The grid's weights as its cells hold them (row by row)."""
    return page.eval_on_selector_all("#heatmap rect[data-w]",
                                     "all => all.map(r => Number(r.dataset.w))")


def labels(page) -> list[str]:
    return page.eval_on_selector_all("#heatmap text.word[data-j]",
                                     "all => all.map(t => t.textContent)")


def test_the_slider_shows_each_steps_stored_numbers_in_chromium(timeline_run, showcase_page):
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    run_dir, _ = timeline_run
    followed = read_timeline(RunDir(run_dir).timeline_file)[0]
    final = read_explorer_data(showcase_page)
    url = showcase_page.resolve().as_uri()
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM,
                                             args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1200, "height": 800})
        requests, errors = [], []
        page.on("request", lambda request: requests.append(request.url))
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("console", lambda message: errors.append(message.text)
                if message.type == "error" else None)
        page.goto(url)
        page.wait_for_function("document.getElementById('view-title').textContent !== ''")
        # the default: the final translation, the slider at its last position
        assert page.eval_on_selector("#step", "s => [s.value, s.max]") == ["3", "3"]
        assert labels(page) == final["target_words"]
        seen = []
        for index, step in enumerate(followed.steps):
            page.eval_on_selector("#step", "(s, v) => { s.value = String(v); "
                                  "s.dispatchEvent(new Event('input')); }", index)
            page.wait_for_function("(t) => document.getElementById('view-title').textContent"
                                   ".includes(t)", arg=f"step {step},")
            assert labels(page) == followed.target_words
            stored = followed.words(index, final["default_layer"]).weights.flatten().tolist()
            shown = cell_weights(page)
            assert len(shown) == len(stored)
            assert max(abs(a - b) for a, b in zip(shown, stored)) <= 1e-4  # 4 decimals
            seen.append(shown)
        assert seen[0] != seen[-1]  # the steps differ, so the grid did change
        page.eval_on_selector("#step", "s => { s.value = s.max; "
                              "s.dispatchEvent(new Event('input')); }")
        page.wait_for_function("!document.getElementById('view-title').textContent"
                               ".includes('step')")
        assert labels(page) == final["target_words"]
        diagnostics = json.loads(page.text_content("#diagnostics"))
        browser.close()
    assert errors == [] and diagnostics["errors"] == [] and diagnostics["blocked"] == []
    assert set(requests) == {url}  # nothing off the page
