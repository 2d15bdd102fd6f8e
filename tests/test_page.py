"""The model in one page (translator.page): in headless Chromium, its JavaScript tokenizer gives
the Python tokenizer's ids, its greedy search our greedy search's tokens, text and attention,
and the page makes no request, keeps typed text as text and survives an empty box and a long
paste. The runs are untrained (random weights, rounded to float16 so that the float16 page holds
exactly the weights PyTorch decodes with): what is checked is the arithmetic, not quality;
bench/page_bench.py measures a trained run."""

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from translator.checkpoint import load_checkpoint
from translator.config import TokenizerConfig
from translator.corpus import SHOWCASE, read_split
from translator.data import normalize
from translator.page import (
    MAX_PARAMETERS,
    PageError,
    check_size,
    export_page,
    main,
    weights_blob,
)
from translator.run_dir import RunDir
from translator.translate import Translator

CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH: the browser checks of the page need it "
    "(apt-get install chromium)")
HARD_CASES = [
    "ज़रूर फ़ोन करना, क़लम और ख़त भी लाना",  # nukta letters, precomposed and decomposed
    "ज\u093c\u0930\u0942\u0930 \u0958 \u095b पढ़ाई",  # decomposed nukta, U+0958, U+095B
    "क्\u200dष क्\u200cष स्\u200dत्री",  # ZWJ and ZWNJ (kept), a zero-width space (dropped)
    "a\u200bb\ufeffc",  # ZWSP and BOM vanish before NFC
    "UPI 2024 में ₹1,250.50 का OTP 987654 आया",  # Latin and digits inside Hindi
    "Meet me at 10:30 at Gate 4B, ok?",
    "बधाई हो 🎉😀👍🏽 family 👨‍👩‍👧",  # emoji, skin tone, ZWJ sequences: byte fallback
    "  spaces\tand\u00a0tabs\u2003and\u3000 ideographic  ",  # whitespace Python splits on
    "<2en> a tag-like start, <s> </s> <unk> <pad>",
    "Ω≈ç√∫ 漢字 العربية ελληνικά",  # scripts the tokenizer never saw
    "",
    "न" * 3 + "।" * 4 + "?!",
    ("राजेश ने कल शाम को अपनी बहन के लिए टिकट बुक की। " * 40)[:2000],  # a 2,000-character line
]


def _float16_weights(path: Path) -> None:
    """Round the run's weights to float16, so the float16 page holds exactly what PyTorch uses."""
    run = RunDir(path)
    state = load_checkpoint(run.checkpoint("last"))
    state["model"] = {k: v.half().float() if v.is_floating_point() else v
                      for k, v in state["model"].items()}
    run.save_checkpoint("last", state)


def _bans(config) -> None:
    config.search.no_repeat_ngram = 3
    config.search.no_doubled_words = True


def _bans_and_full_context(config) -> None:
    _bans(config)
    config.train.alignment_full_context = True  # attention read again without the causal mask


@pytest.fixture(scope="module")
def runs(tmp_path_factory, untrained_run):
    """A pre-norm hi-en run (tied, joint vocabulary, first words truecased, as the default
    run's) and a post-norm run of both directions (one vocabulary per side, untied,
    full-context attention), each with the n-gram and doubled-word bans."""
    folder = tmp_path_factory.mktemp("page")
    pre = untrained_run(folder / "pre", dict(d_model=32, heads=4, layers=2, d_ff=64,
                                             max_positions=128), adjust=_bans,
                        tokenizer=TokenizerConfig(vocab_size=400, truecase=True))
    post = untrained_run(folder / "post", dict(d_model=24, heads=3, layers=1, decoder_layers=2,
                                               d_ff=48, max_positions=64, norm="post",
                                               share_embeddings=False),
                         direction="both", tokenizer=TokenizerConfig(vocab_size=400, joint=False),
                         seed=1, adjust=_bans_and_full_context)
    for run in (pre, post):
        _float16_weights(run)
    return {"pre": pre, "post": post}


@pytest.fixture(scope="module")
def pages(runs, tmp_path_factory):
    folder = tmp_path_factory.mktemp("pages")
    return {name: export_page(run, folder / f"{name}.html", "float16")
            for name, run in runs.items()}


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    if CHROMIUM is None:
        pytest.skip("no chromium on PATH (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM,
                                              args=["--no-sandbox", "--disable-gpu"])
        yield launched
        launched.close()


class Opened:
    """A page open in Chromium, with every request and error it caused."""

    def __init__(self, browser, path: Path) -> None:
        self.page = browser.new_page(viewport={"width": 1000, "height": 700})
        self.page.set_default_timeout(60_000)
        self.requests, self.errors = [], []
        self.page.on("request", lambda request: self.requests.append(request.url))
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda message: self.errors.append(message.text)
                     if message.type == "error" else None)
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_function("window.pageModel && window.pageModel.ready()")

    def diagnostics(self) -> dict:
        return json.loads(self.page.text_content("#diagnostics"))

    def translate(self, texts: list[str], language: str | None = None,
                  attention: bool = True) -> list[dict]:
        return self.page.evaluate(
            "([texts, language, attention]) => texts.map((t) => {"
            " const r = pageModel.translate(t, language);"
            " return {tokens: r.tokens, text: r.text, attention: attention ? r.attention : null,"
            " source_pieces: r.sourcePieces, target_pieces: r.targetPieces,"
            " warnings: r.warnings}; })",
            [texts, language, attention])


@pytest.fixture(scope="module")
def opened(browser, pages):
    return {name: Opened(browser, path) for name, path in pages.items()}


def dev_and_test() -> list[str]:
    return [text for split in ("dev", "test") for hindi, english, _ in read_split(split)
            for text in (hindi, english)]


# ---------------------------------------------------------------- without a browser


def test_a_run_too_big_is_refused_in_one_sentence():
    check_size(MAX_PARAMETERS)
    with pytest.raises(PageError, match=r"has 61\.2M parameters, more than the 50M"):
        check_size(61_234_567)


def test_the_command_writes_a_page_and_refuses_a_bad_name(runs, tmp_path, capsys):
    assert main([str(runs["pre"]), str(tmp_path / "model.html")]) == 0
    text = (tmp_path / "model.html").read_text(encoding="utf-8")
    assert '"weights":"int8"' in text and "default-src 'none'" in text
    assert main([str(runs["pre"]), str(tmp_path / "model.png")]) == 2
    assert "end " in capsys.readouterr().err


def test_int8_is_smaller_and_each_weight_within_half_a_step(runs, pages, tmp_path):
    int8 = export_page(runs["pre"], tmp_path / "int8.html", "int8")
    assert int8.stat().st_size < pages["pre"].stat().st_size
    model = Translator.from_run(runs["pre"], device="cpu").model
    blob, layout = weights_blob(model, "int8")
    weight = model.decoder_layers[0].cross_attention.w_q.weight.detach().numpy()
    entry = layout["decoder_layers.0.cross_attention.w_q.weight"]
    rows, columns = entry["shape"]
    values = np.frombuffer(blob, np.int8, rows * columns, entry["offset"]).reshape(rows, columns)
    scales = np.frombuffer(blob, "<f4", rows, entry["scales"])
    assert entry["kind"] == "i8" and np.abs(values).max() == 127
    assert (np.abs(values * scales[:, None] - weight) <= scales[:, None] / 2 + 1e-7).all()
    assert layout["output_bias"]["kind"] == "f32"  # vectors stay float32
    assert "target_embeddings.tokens.weight" not in layout  # a tied embedding, stored once


# ---------------------------------------------------------------- in Chromium


@needs_chromium
def test_the_pieces_are_the_python_tokenizers(opened, runs):
    texts = dev_and_test() + HARD_CASES + [hindi for hindi, _ in SHOWCASE]
    for name in ("pre", "post"):
        tokenizer = Translator.from_run(runs[name], device="cpu").tokenizer
        page = opened[name].page
        got = page.evaluate("texts => texts.map((t) => pageModel.encodeSource(t))", texts)
        different = [text for text, ids in zip(texts, got) if ids != tokenizer.encode_source(text)]
        assert different == [], different[:3]
        normalised = page.evaluate("texts => texts.map((t) => pageModel.normalize(t))", texts)
        assert normalised == [normalize(text) for text in texts]


def _compare(ours, theirs) -> None:
    assert theirs["tokens"] == ours.tokens and theirs["text"] == ours.text
    assert theirs["source_pieces"] == ours.source_pieces
    assert theirs["target_pieces"] == ours.target_pieces  # truecased: the first a capital
    attention = torch.tensor(theirs["attention"])
    assert attention.shape == ours.attention.shape
    assert (attention - ours.attention).abs().max() <= 2e-3


@needs_chromium
def test_greedy_output_and_attention_are_ours(opened, runs, one_thread):
    sample = [hindi for hindi, _, _ in read_split("dev")[:10]] + HARD_CASES[:3]
    ours = Translator.from_run(runs["pre"], device="cpu").translate(sample, beam_size=1)
    for mine, theirs in zip(ours, opened["pre"].translate(sample)):
        _compare(mine, theirs)
    both = Translator.from_run(runs["post"], device="cpu")
    for language in ("en", "hi", None):  # asked for, or by the script
        texts = [SHOWCASE[0][0], SHOWCASE[1][1], "<2hi> " + SHOWCASE[2][1]]
        ours = both.translate(texts, beam_size=1, target_language=language)
        for mine, theirs in zip(ours, opened["post"].translate(texts, language)):
            _compare(mine, theirs)


@needs_chromium
def test_the_page_draws_the_explorer_and_makes_no_request(opened):
    for page in opened.values():
        page.page.wait_for_selector("#grid rect")
        report = page.diagnostics()
        assert report["errors"] == [] and report["blocked"] == [] and report["resources"] == []
        assert report["translated"] == 3 and report["rendered"].startswith("layer 0 (of 0–1)")
        assert page.errors == [] and page.requests == [page.url]
        assert page.page.input_value("#text") == "\n".join(h for h, _ in SHOWCASE)
    # the explorer's selectors still work on the page: another head, another view
    page = opened["pre"].page
    page.select_option("#head", "2")
    page.wait_for_function("document.getElementById('view-title').textContent"
                           ".endsWith('head 2')")


@needs_chromium
def test_typed_markup_stays_text(opened):
    page = opened["pre"].page
    nasty = ('<script>window.hacked = 1</script><img src="x" onerror="window.hacked = 2">'
             '</textarea><b>bold</b>')
    page.fill("#text", nasty)
    page.click("#translate")
    page.wait_for_function("document.getElementById('shown-source').textContent.length > 0")
    assert page.text_content("#shown-source") == nasty
    assert page.evaluate("window.hacked") is None
    assert page.query_selector("#results img, #explorer img, #results b") is None
    assert opened["pre"].errors == [] and opened["pre"].requests == [opened["pre"].url]
    assert opened["pre"].diagnostics()["blocked"] == []


@needs_chromium
def test_an_empty_box_and_a_long_paste(opened, runs, one_thread):
    page = opened["pre"].page
    page.fill("#text", "  \n\t\n")
    page.click("#translate")
    assert page.text_content("#status") == "Nothing to translate: type a sentence in the box."
    assert page.query_selector_all("#results li") == []
    paste = " ".join(hindi for hindi, _, _ in read_split("test"))[:5000]
    [ours] = Translator.from_run(runs["pre"], device="cpu").translate(
        [paste], beam_size=1, need_attention=False)
    page.fill("#text", paste)
    page.click("#translate")
    page.wait_for_selector("#results li")
    [theirs] = opened["pre"].translate([paste], attention=False)
    assert theirs["tokens"] == ours.tokens and theirs["text"] == ours.text
    assert theirs["warnings"][0] == ours.warnings[0] and "split into" in ours.warnings[0]
    assert "too long to draw" in page.text_content("#explorer-note")
    assert opened["pre"].diagnostics()["errors"] == []
