"""The attention explorer: its embedded numbers are the JSON heatmap's, its links are
alignment.hard_links', its font covers the page's Devanagari, and, in a real (headless)
browser, it draws the grid, follows the URL hash, logs no script error and makes no request."""

import base64
import hashlib
import html
import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from translator import drawing, plotting
from translator.alignment import (
    ATTRIBUTION_TITLE,
    AlignmentError,
    SentenceAttention,
    attribution_words,
    describe_view,
    hard_links,
    resolve_layer,
    word_alignment,
)
from translator.explorer import (
    FONT_FAMILY,
    explorer_data,
    read_explorer_data,
    sentence_data,
    with_insight,
    write_explorer,
    write_page,
)
from translator.translate import Translation

SOURCE_PIECES = ["▁राजेश", "▁ने", "▁ट्", "रेन", "▁टिकट", "▁बुक", "▁की", "▁क्ष"]
TARGET_PIECES = ["▁Raj", "esh", "▁booked", "▁a", "▁train", "▁ticket"]
SOURCE = "राजेश ने ट्रेन टिकट बुक की क्ष"
TRANSLATION = "Rajesh booked a train ticket"
CHROMIUM = shutil.which("chromium")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH: the browser checks of the explorer need it "
    "(apt-get install chromium)")


def random_attention(layers: int = 3, heads: int = 8, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    scores = torch.randn(layers, heads, len(TARGET_PIECES) + 1, len(SOURCE_PIECES) + 1,
                         generator=generator)
    return (2 * scores).softmax(-1)


def close(a, b, tolerance: float = 1e-6) -> bool:
    if isinstance(a, list):
        return len(a) == len(b) and all(close(x, y, tolerance) for x, y in zip(a, b))
    return abs(a - b) <= tolerance


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("explorer") / "rajesh.html"
    return write_explorer(path, random_attention(), SOURCE_PIECES, TARGET_PIECES, SOURCE,
                          TRANSLATION, title="Rajesh", reference="Rajesh booked a ticket.")


# ---------------------------------------------------------------- the page's data


def test_embedded_numbers_equal_the_json_heatmap(tmp_path, page, monkeypatch):
    monkeypatch.setattr(plotting, "plot_heatmap", lambda *args, **kwargs: tmp_path)
    for name in ("plot_heads", "plot_layers"):  # only the JSON is needed
        monkeypatch.setattr(drawing, name, lambda *args, **kwargs: tmp_path)
    attention = random_attention()
    drawing.draw_attention(SentenceAttention.every(attention, SOURCE_PIECES, TARGET_PIECES),
                           tmp_path, "rajesh")
    record = json.loads((tmp_path / "rajesh.json").read_text(encoding="utf-8"))
    data = read_explorer_data(page)
    layer = resolve_layer(None, attention.size(0))
    assert data["default_layer"] == record["layer"] == layer == 1
    assert data["source_words"] == record["source_words"]
    assert data["target_words"] == record["target_words"]
    assert close(data["weights"]["mean"][layer], record["weights"])  # the PNG's view
    assert close(data["weights"]["heads"], record["all_heads"])
    assert data["titles"]["mean"][layer] == record["view"] == describe_view(attention)


def test_links_titles_and_heads_of_every_view():
    attention = random_attention(layers=2, heads=4)
    data = explorer_data(attention, SOURCE_PIECES, TARGET_PIECES, SOURCE, TRANSLATION,
                         layer=0, heads=[1, 3])
    assert data["default_layer"] == 0 and data["mean_heads"] == [1, 3]
    for layer in range(2):
        mean = word_alignment(attention, SOURCE_PIECES, TARGET_PIECES, layer, [1, 3])
        assert data["links"]["mean"][layer] == [list(link) for link in hard_links(mean.weights)]
        assert close(data["weights"]["mean"][layer], mean.to_dict()["weights"])
        assert data["titles"]["mean"][layer] == describe_view(attention, layer, [1, 3])
        for head in range(4):
            one = word_alignment(attention, SOURCE_PIECES, TARGET_PIECES, layer, [head])
            assert data["links"]["heads"][layer][head] == [
                list(link) for link in hard_links(one.weights)]
            assert data["titles"]["heads"][layer][head] == f"layer {layer} (of 0–1), head {head}"


def test_a_row_that_went_all_to_eos_has_no_link_and_says_so():
    attention = random_attention(layers=1, heads=1)
    attention[0, 0, 2] = 0.0
    attention[0, 0, 2, -1] = 1.0  # "booked" looks only at the source EOS
    data = explorer_data(attention, SOURCE_PIECES, TARGET_PIECES, SOURCE, TRANSLATION)
    assert data["weights"]["mean"][0][1] == [0.0] * 7
    assert data["eos_share"]["mean"][0][1] == 1.0
    assert all(j != 1 for _, j in data["links"]["mean"][0])


def test_an_empty_translation_has_nothing_to_draw():
    attention = torch.full((2, 4, 1, 4), 0.25)  # only the EOS step, over 3 pieces and EOS
    data = explorer_data(attention, SOURCE_PIECES[:3], [], SOURCE, "")
    assert data["target_words"] == [] and data["weights"]["mean"] == [[], []]
    assert data["links"]["heads"] == [[[]] * 4] * 2


def test_text_is_escaped_and_the_policy_allows_only_the_page_itself(tmp_path):
    nasty = 'a </script><script>alert(1)</script> <!-- "b" & c'
    path = write_explorer(tmp_path / "x.html", random_attention(1, 2), SOURCE_PIECES,
                          TARGET_PIECES, SOURCE, nasty, title=nasty)
    text = path.read_text(encoding="utf-8")
    assert "<script>alert(1)" not in text
    data = read_explorer_data(path)
    assert data["translation"] == data["title"] == nasty
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', text).group(1)
    assert "default-src 'none'" in policy and "connect-src" not in policy
    scripts = re.findall(r"<script>(.*?)</script>", text, re.DOTALL)
    styles = re.findall(r"<style>(.*?)</style>", text, re.DOTALL)
    assert len(scripts) == 2 and len(styles) == 1
    for inline in scripts + styles:  # each inline script and style is allowed by its hash
        digest = base64.b64encode(hashlib.sha256(inline.encode()).digest()).decode()
        assert f"'sha256-{digest}'" in policy
    assert not re.search(r"""(src|href)=["']?(https?:|//)""", text)


def test_the_embedded_font_covers_the_devanagari_and_keeps_its_shaping(page):
    from fontTools.ttLib import TTFont

    text = page.read_text(encoding="utf-8")
    woff = re.search(r"data:font/woff;base64,([A-Za-z0-9+/=]+)", text).group(1)
    font = TTFont(io.BytesIO(base64.b64decode(woff)))
    cmap = font.getBestCmap()
    assert {ord(c) for c in SOURCE if not c.isspace()} <= set(cmap)
    assert {"GSUB", "GPOS"} <= set(font.keys()) and "fvar" not in font
    features = {record.FeatureTag for record in font["GSUB"].table.FeatureList.FeatureRecord}
    assert {"half", "blwf", "pres", "akhn"} & features  # conjuncts such as क्ष and ट्र
    assert len(woff) < 60_000


def test_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match=".html"):
        write_explorer(tmp_path / "x.png", random_attention(), SOURCE_PIECES, TARGET_PIECES,
                       SOURCE, TRANSLATION)
    with pytest.raises(AlignmentError, match="layers, heads"):
        write_explorer(tmp_path / "x.html", random_attention()[0], SOURCE_PIECES,
                       TARGET_PIECES, SOURCE, TRANSLATION)
    plain = tmp_path / "plain.html"
    plain.write_text("<html></html>", encoding="utf-8")
    with pytest.raises(AlignmentError, match="no explorer data"):
        read_explorer_data(plain)


# ---------------------------------------------------------------- in a real browser


def browse(page: Path, hash_: str, out_dir: Path, screenshot: bool = True) -> tuple[dict, Path]:
    """Open ``page#hash_`` in headless Chromium: its diagnostics and its screenshot."""
    shot = out_dir / f"shot-{hash_.replace('&', '_').replace('=', '-') or 'default'}.png"
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--no-first-run", "--virtual-time-budget=5000", "--window-size=900,600",
               "--force-device-scale-factor=1",
               f"--user-data-dir={out_dir / 'profile'}", "--dump-dom",
               f"{page.resolve().as_uri()}#{hash_}"]
    if screenshot:
        command.insert(-2, f"--screenshot={shot}")
    done = subprocess.run(command, capture_output=True, text=True, timeout=90)
    found = re.search(r'<pre id="diagnostics"[^>]*>(.*?)</pre>', done.stdout, re.DOTALL)
    assert found, f"no diagnostics in the page's DOM; chromium said: {done.stderr[-2000:]}"
    return json.loads(html.unescape(found.group(1))), shot


def grid_pixels(shot: Path, grid: dict) -> np.ndarray:
    """The screenshot's pixels inside the grid (2 pixels in from its edges), [y, x, RGB]."""
    from PIL import Image

    with Image.open(shot) as image:
        pixels = np.asarray(image.convert("RGB"), dtype=np.int32)
    x, y = round(grid["x"]), round(grid["y"])
    return pixels[y + 2 : y + round(grid["height"]) - 2, x + 2 : x + round(grid["width"]) - 2]


@needs_chromium
def test_in_chromium_the_grid_is_drawn_and_each_view_differs(page, tmp_path):
    first, first_shot = browse(page, "", tmp_path)  # the default view
    second, second_shot = browse(page, "layer=0&head=2&word=t1", tmp_path)  # a word lit
    for report in (first, second):
        assert report["errors"] == [] and report["blocked"] == []
        assert report["resources"] == []  # the font is inline: nothing is fetched
        assert any(FONT_FAMILY in face and face.endswith("loaded") for face in report["fonts"])
    assert first["rendered"] == "layer 1 (of 0–2), mean of heads 0–7"
    assert second["rendered"] == "layer 0 (of 0–2), head 2"
    assert first["grid"] == second["grid"] and first["grid"]["width"] > 100
    one, two = grid_pixels(first_shot, first["grid"]), grid_pixels(second_shot, second["grid"])
    assert (one != 255).any(axis=2).mean() > 0.9  # shaded cells, not the white page
    assert len(np.unique(one.reshape(-1, 3), axis=0)) > 10  # of many shades
    assert np.abs(one - two).mean() > 10  # another layer and head: other cells


@needs_chromium
def test_in_chromium_the_diagnostics_catch_errors_and_requests(page, tmp_path):
    """The checks above are not vacuous: a request is refused and reported, a script error
    recorded."""
    broken = tmp_path / "broken.html"
    text = page.read_text(encoding="utf-8")
    text = text.replace("<h1>", '<img src="https://example.invalid/x.png" alt=""><h1>', 1)
    text = re.sub(r'(id="explorer-data">).*?(</script>)', r"\1{}\2", text, flags=re.DOTALL)
    broken.write_text(text, encoding="utf-8")
    report, _ = browse(broken, "", tmp_path, screenshot=False)
    assert any("example.invalid" in entry for entry in report["blocked"])
    assert report["errors"] and report["rendered"] is None


# ---------------------------------------------------------------- what the model weighed


def weighed_translation() -> Translation:
    """A Translation of the page's words with what the model weighed at each piece (the
    last step is the EOS), its first word written by a forced prefix."""
    alternatives = [[(piece, 0.6), ("▁other", 0.25), ("▁बुक", 0.1)]
                    for piece in [*TARGET_PIECES, "</s>"]]
    return Translation(SOURCE, TRANSLATION, list(range(len(TARGET_PIECES))), -3.0,
                       SOURCE_PIECES, TARGET_PIECES,
                       token_log_probs=[-0.5] * (len(TARGET_PIECES) + 1),
                       alternatives=alternatives, prefix_pieces=2)


@pytest.fixture(scope="module")
def insight_page(tmp_path_factory) -> Path:
    sentence = SentenceAttention.every(random_attention(), SOURCE_PIECES, TARGET_PIECES)
    data = sentence_data(sentence, SOURCE, TRANSLATION, title="Rajesh, weighed")
    signed = torch.linspace(-1, 1, (len(TARGET_PIECES) + 1) * (len(SOURCE_PIECES) + 1))
    attribution = attribution_words(signed.view(len(TARGET_PIECES) + 1, -1), SOURCE_PIECES,
                                    TARGET_PIECES)
    data = with_insight(data, weighed_translation(), attribution)
    return write_page(tmp_path_factory.mktemp("insight") / "weighed.html", data)


def test_the_page_holds_the_alternatives_the_prefix_and_the_attribution(insight_page):
    data = read_explorer_data(insight_page)
    assert [w["word"] for w in data["weighed"]] == data["target_words"]
    assert data["weighed"][0]["log_prob"] == -1.0  # Raj + esh
    assert data["weighed"][0]["alternatives"][0] == ["▁Raj", 0.6]  # its first piece's step
    assert data["prefix_words"] == 1  # ▁Raj esh: one word
    rows = data["attribution"]["weights"]
    assert all(abs(sum(row) - 1) < 1e-3 for row in rows)
    assert data["attribution"]["title"] == ATTRIBUTION_TITLE


@needs_chromium
def test_in_chromium_the_attribution_view_and_the_hovered_alternatives(insight_page, tmp_path):
    attention, attention_shot = browse(insight_page, "word=t2", tmp_path)
    attribution, attribution_shot = browse(insight_page, "show=attribution&word=t0", tmp_path)
    for report in (attention, attribution):
        assert report["errors"] == [] and report["blocked"] == [] and report["resources"] == []
    assert attention["rendered"] == "layer 1 (of 0–2), mean of heads 0–7"
    assert attribution["rendered"] == ATTRIBUTION_TITLE
    # hovering (here: pinning) an output word lists what its step weighed, as bars
    assert "its step weighed: (log-prob -0.50)" in attention["tooltip"]
    assert " a 0.600" in attention["tooltip"] and " other 0.250" in attention["tooltip"]
    assert "forced; the model would have written" in attribution["tooltip"]
    assert "depended most on" in attribution["tooltip"]
    one = grid_pixels(attention_shot, attention["grid"])
    two = grid_pixels(attribution_shot, attribution["grid"])
    assert np.abs(one - two).mean() > 10  # the third view is other numbers
