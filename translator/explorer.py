"""The attention explorer: one self-contained HTML page to poke at a translation's
cross-attention in a browser, opened from disk, with no server and no network.

The page holds its data as inline JSON: the word-level matrices of every decoder layer and head
(and of each layer's mean of heads), merged from pieces to words by
`translator.alignment.merge_to_words` exactly as the PNG and JSON heatmaps are (EOS dropped,
rows renormalised), rounded to 4 decimals as in the JSON, and the hard links of each view
(`translator.alignment.hard_links`: the brightest source word of each target word). A small
inline script (plain JavaScript drawing SVG) shows:

- the source, the translation (and a reference, when given) in full;
- a layer selector and a head selector (each head, or the mean of heads); the default view is
  the project's (`translator.alignment.DEFAULT_LAYER`, mean of heads);
- Bahdanau's picture (soft weights: source words across the top, output words down the side)
  and the hard links, side by side; hovering an output word lights its row and the source words
  it drew on, hovering a source word the reverse; each cell's weight shows on hover;
- the view can be set from the URL: ``#layer=1&head=3`` (``head=mean`` for the mean),
  ``&word=t2`` (output word 2) or ``&word=s0`` (source word 0) to light a word,
  ``&numbers=1`` to write the weights in the cells.

Devanagari is drawn with Noto Sans Devanagari (the `fontpkg_noto_sans_devanagari` package),
embedded as a WOFF web font subset to the characters on the page, its shaping tables kept, so
conjuncts come out right on machines that have no Devanagari font. A strict
Content-Security-Policy (scripts and styles by hash, fonts only from the page itself, nothing
else) keeps the page from reaching the network. The page writes what went wrong (script
errors, blocked requests) and every resource it loaded into ``<pre id="diagnostics">``, so a
headless browser can check it (``chromium --headless --dump-dom page.html``).
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from typing import Any

from torch import Tensor

from translator.alignment import (
    AlignmentError,
    describe_view,
    hard_links,
    merge_to_words,
    resolve_layer,
    select_attention,
)

SUFFIXES = (".html", ".htm")
FONT_FAMILY = "Explorer Noto Sans Devanagari"
# Noto Sans Devanagari is a variable font (weight 100–900, width 62.5–100); the page uses one
# static instance, which keeps the embedded subset near 20 KB.
FONT_INSTANCE = {"wght": 400, "wdth": 100}
# Characters the page's own labels and tooltips use, on top of the sentences' own.
UI_TEXT = ("0123456789.,:;–—←→·%()[]/<>‘’'\"#=&?!- abcdefghijklmnopqrstuvwxyz"
           "ABCDEFGHIJKLMNOPQRSTUVWXYZ\u25cc\u200c\u200d")
DATA_ID = "explorer-data"
_DATA_SCRIPT = re.compile(rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>',
                          re.DOTALL)


# ---------------------------------------------------------------- the data


def _rounded(weights: Tensor) -> list[list[float]]:
    """4 decimals, as `WordAlignment.to_dict` writes the JSON."""
    return [[round(float(w), 4) for w in row] for row in weights]


def _view(matrix: Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str]
          ) -> tuple[list[list[float]], list[list[int]], list[float]]:
    """One view's word-level weights (EOS dropped), hard links, and each output word's share of
    attention that went to the source EOS (before the EOS column was dropped)."""
    words = merge_to_words(matrix, source_pieces, target_pieces)
    kept = merge_to_words(matrix, source_pieces, target_pieces, eos="keep")
    eos_share = [round(float(w), 4) for w in kept.weights[: len(words.target_words), -1]]
    links = [[i, j] for i, j in hard_links(words.weights)]
    return _rounded(words.weights), links, eos_share


def explorer_data(
    attention: Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str],
    source_text: str, translation_text: str, title: str = "cross-attention explorer",
    reference: str | None = None, layer: int | None = None, heads: list[int] | None = None,
    full_context: bool = False,
) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data (``full_context``: the titles say the
    attention is the full-context pass's).

    ``attention`` is [layers, heads, T+1, S+1] as a `Translation` carries it (T target pieces
    plus the EOS step, S source pieces plus the source EOS). ``layer`` (None: the default
    layer) is the view the page opens on; its "mean" is the mean of ``heads`` (None: all), as
    in `translator.plotting.draw_attention`. Keys: ``weights``, ``links``, ``eos_share`` and
    ``titles`` each hold ``{"mean": [per layer], "heads": [per layer][per head]}``.
    """
    if attention.dim() != 4:
        raise AlignmentError(f"attention of shape {tuple(attention.shape)} is not [layers, heads, "
                             "target steps, source positions]; pass a Translation's attention")
    num_layers, num_heads = attention.shape[:2]
    default = resolve_layer(layer, num_layers)
    mean_heads = list(range(num_heads)) if heads is None else list(heads)
    first = merge_to_words(attention[0, 0], source_pieces, target_pieces)
    result: dict[str, Any] = {key: {"mean": [], "heads": []}
                              for key in ("weights", "links", "eos_share", "titles")}
    for index in range(num_layers):
        views = [_view(select_attention(attention, index, mean_heads), source_pieces,
                       target_pieces)]
        views += [_view(attention[index, h], source_pieces, target_pieces)
                  for h in range(num_heads)]
        titles = [describe_view(attention, index, heads, full_context)]
        titles += [describe_view(attention, index, [h], full_context) for h in range(num_heads)]
        for key, values in zip(("weights", "links", "eos_share"), zip(*views)):
            result[key]["mean"].append(values[0])
            result[key]["heads"].append(list(values[1:]))
        result["titles"]["mean"].append(titles[0])
        result["titles"]["heads"].append(titles[1:])
    return {"title": title, "source": source_text, "translation": translation_text,
            "reference": reference, "source_words": first.source_words,
            "target_words": first.target_words, "layers": num_layers, "heads": num_heads,
            "mean_heads": mean_heads, "default_layer": default, "eos": "drop", **result}


# ---------------------------------------------------------------- the font


@cache
def _font_bytes() -> bytes:
    import fontpkg_noto_sans_devanagari as noto

    return sorted((noto.ROOT / "files").glob("*.ttf"))[0].read_bytes()


def font_face_css(text: str) -> str:
    """An @font-face rule embedding Noto Sans Devanagari as base64 WOFF, subset to the glyphs
    ``text`` needs (and what the shaping features reach from them: half forms, conjuncts,
    vowel-sign variants), with its GSUB/GPOS tables kept."""
    from fontTools import subset
    from fontTools.ttLib import TTFont
    from fontTools.varLib import instancer

    font = TTFont(io.BytesIO(_font_bytes()))
    options = subset.Options()  # its default layout features include the Indic ones
    options.flavor = "woff"
    subsetter = subset.Subsetter(options)
    subsetter.populate(text=text)
    subsetter.subset(font)
    if "fvar" in font:
        font = instancer.instantiateVariableFont(font, FONT_INSTANCE)
    font.flavor = "woff"
    buffer = io.BytesIO()
    font.save(buffer)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (f'@font-face {{ font-family: "{FONT_FAMILY}"; font-weight: 400; '
            f'src: url(data:font/woff;base64,{encoded}) format("woff"); }}\n')


# ---------------------------------------------------------------- the page


def _hash(source: str) -> str:
    digest = hashlib.sha256(source.encode("utf-8")).digest()
    return "'sha256-" + base64.b64encode(digest).decode("ascii") + "'"


def _lang(text: str) -> str:
    return "hi" if re.search("[\u0900-\u097f]", text) else "en"


def _sentence(label: str, text: str) -> str:
    return (f'<p><span class="label">{label}</span> '
            f'<span lang="{_lang(text)}">{html.escape(text)}</span></p>')


def explorer_html(data: dict[str, Any]) -> str:
    """The page for `explorer_data`'s ``data``: one string, everything inline."""
    text = "".join([data["title"], data["source"], data["translation"],
                    data["reference"] or "", *data["source_words"], *data["target_words"],
                    *data["titles"]["mean"], UI_TEXT])
    style = font_face_css(text) + _CSS.replace("FONT_FAMILY", FONT_FAMILY)
    # "<" escaped, so no "</script>" or "<!--" inside the data can end the script element
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    policy = (f"default-src 'none'; script-src {_hash(_DIAGNOSTICS_JS)} {_hash(_EXPLORER_JS)}; "
              f"style-src {_hash(style)}; font-src data:; img-src data:; base-uri 'none'; "
              "form-action 'none'")
    sentences = [_sentence("source", data["source"]),
                 _sentence("translation", data["translation"])]
    if data["reference"]:
        sentences.append(_sentence("reference", data["reference"]))
    title = html.escape(data["title"])
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script>{_DIAGNOSTICS_JS}</script>
<style>{style}</style>
</head>
<body>
<h1>{title}</h1>
<div class="sentences">
{chr(10).join(sentences)}
</div>
<div class="controls">
<label>layer <select id="layer"></select></label>
<label>head <select id="head"></select></label>
<label><input type="checkbox" id="numbers"> weights in the cells</label>
<span id="view-title"></span>
</div>
<div class="panels">
<section class="panel">
<h2>Soft weights (Bahdanau's view)</h2>
<p class="hint">Each row is an output word; its cells show how it divided its attention over
the source words (the row sums to 1; the source end-of-sentence token is left out and the rows
renormalised). Hover a word or a cell.</p>
<svg id="heatmap" role="img" aria-label="attention heatmap"></svg>
</section>
<section class="panel">
<h2>Hard links</h2>
<p class="hint">Each output word linked to the source word it drew on most (the brightest cell
of its row), as scripts/align.py writes them.</p>
<svg id="links" role="img" aria-label="hard alignment links"></svg>
</section>
</div>
<div id="tooltip" role="tooltip"></div>
<svg id="measure" aria-hidden="true"></svg>
<pre id="diagnostics" hidden></pre>
<script type="application/json" id="{DATA_ID}">{payload}</script>
<script>{_EXPLORER_JS}</script>
</body>
</html>
"""


def write_explorer(
    path: str | Path, attention: Tensor, source_pieces: Sequence[str],
    target_pieces: Sequence[str], source_text: str, translation_text: str,
    title: str = "cross-attention explorer", reference: str | None = None,
    layer: int | None = None, heads: list[int] | None = None, full_context: bool = False,
) -> Path:
    """Write the explorer page of one translation to ``path`` (.html); see `explorer_data` for
    the arguments. Returns the path."""
    path = Path(path)
    if path.suffix.lower() not in SUFFIXES:
        raise ValueError(f"the explorer is an HTML page; end {path} in .html")
    data = explorer_data(attention, source_pieces, target_pieces, source_text,
                         translation_text, title, reference, layer, heads, full_context)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(explorer_html(data), encoding="utf-8")
    return path


def read_explorer_data(path: str | Path) -> dict[str, Any]:
    """The data embedded in an explorer page (the inverse of `explorer_html`)."""
    match = _DATA_SCRIPT.search(Path(path).read_text(encoding="utf-8"))
    if match is None:
        raise AlignmentError(f"{path} holds no explorer data; is it a page write_explorer made?")
    return json.loads(match.group(1))


# ---------------------------------------------------------------- what the page runs

_CSS = """
:root { font-family: "FONT_FAMILY", system-ui, sans-serif; color: #222; background: #fff; }
body { margin: 16px 20px; font-size: 15px; line-height: 1.45; }
h1 { font-size: 18px; margin: 0 0 6px; }
h2 { font-size: 14px; margin: 0 0 2px; }
.sentences p { margin: 2px 0; }
.sentences .label { display: inline-block; width: 6.5em; color: #666; }
.controls { display: flex; flex-wrap: wrap; gap: 6px 18px; align-items: center;
  margin: 10px 0 12px; }
#view-title { color: #666; font-size: 13px; }
.panels { display: flex; flex-wrap: wrap; gap: 18px 40px; align-items: flex-start; }
.hint { color: #666; font-size: 12px; margin: 0 0 6px; max-width: 27em; }
svg text { font-family: inherit; font-size: 13px; fill: #222; }
svg .word { cursor: default; }
svg .word.lit { font-weight: bold; fill: #a63603; }
svg .number { font-size: 9px; pointer-events: none; }
svg .box { fill: none; stroke: #e6550d; stroke-width: 2; pointer-events: none; }
svg .empty { fill: #888; font-style: italic; }
#measure { position: absolute; left: -10000px; top: 0; width: 10px; height: 10px; }
#tooltip { position: absolute; display: none; pointer-events: none; background: #222;
  color: #fff; padding: 3px 8px; border-radius: 4px; font-size: 13px; white-space: nowrap; }
"""

# Runs first: records script errors, refused requests and loaded resources in #diagnostics.
_DIAGNOSTICS_JS = """
"use strict";
(function () {
  var log = {errors: [], blocked: [], resources: [], rendered: null, grid: null};
  function write() {
    log.resources = performance.getEntriesByType("resource").map(function (e) {
      return e.name;
    });
    log.fonts = Array.from(document.fonts, function (face) {
      return face.family + ": " + face.status;
    });
    var out = document.getElementById("diagnostics");
    if (out) { out.textContent = JSON.stringify(log); }
  }
  window.onerror = function (message, source, line, column) {
    log.errors.push(String(message) + " (line " + line + ":" + column + ")");
    write();
  };
  window.addEventListener("error", function (event) {  // failed loads of elements
    if (event.target !== window) { log.errors.push("failed to load " + event.target.tagName); }
    write();
  }, true);
  window.addEventListener("unhandledrejection", function (event) {
    log.errors.push("unhandled rejection: " + String(event.reason));
    write();
  });
  document.addEventListener("securitypolicyviolation", function (event) {
    log.blocked.push(event.violatedDirective + " " + event.blockedURI);
    write();
  });
  window.addEventListener("load", write);
  window.explorerReport = function (fields) { Object.assign(log, fields); write(); };
})();
"""

_EXPLORER_JS = r"""
"use strict";
(function () {
  const data = JSON.parse(document.getElementById("explorer-data").textContent);
  const SVG = "http://www.w3.org/2000/svg";
  const CELL = 30, ROW = 26, LINK_GAP = 110, PAD = 4;
  // matplotlib's "Blues" (ColorBrewer), as the PNG heatmaps use it
  const BLUES = [[247, 251, 255], [222, 235, 247], [198, 219, 239], [158, 202, 225],
    [107, 174, 214], [66, 146, 198], [33, 113, 181], [8, 81, 156], [8, 48, 107]];
  const source = data.source_words, target = data.target_words;
  const state = {layer: data.default_layer, head: "mean", word: null, numbers: false};
  const parts = {};  // what a highlight touches, rebuilt by each render
  const $ = (id) => document.getElementById(id);

  function colour(weight) {
    const x = Math.min(1, Math.max(0, weight)) * (BLUES.length - 1);
    const k = Math.min(BLUES.length - 2, Math.floor(x)), f = x - k;
    const rgb = BLUES[k].map((v, n) => Math.round(v + f * (BLUES[k + 1][n] - v)));
    return "rgb(" + rgb.join(",") + ")";
  }

  function node(name, attributes, parent, text) {
    const element = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attributes)) element.setAttribute(key, value);
    if (text !== undefined) element.textContent = text;
    if (parent) parent.appendChild(element);
    return element;
  }

  function widths(words) {
    const measure = $("measure");
    const sizes = words.map((w) => node("text", {}, measure, w).getComputedTextLength());
    measure.replaceChildren();
    return sizes.length ? sizes : [0];
  }

  function current() {
    const pick = (key) => state.head === "mean" ? data[key].mean[state.layer]
      : data[key].heads[state.layer][state.head];
    return {weights: pick("weights"), links: pick("links"), eos: pick("eos_share"),
      title: pick("titles")};
  }

  // ------------------------------------------------ the URL hash and the selectors

  function readHash() {
    const params = new URLSearchParams(location.hash.replace(/^#/, ""));
    const layer = Number(params.get("layer")), head = params.get("head");
    state.layer = Number.isInteger(layer) && params.has("layer") && layer >= 0 &&
      layer < data.layers ? layer : data.default_layer;
    state.head = head !== null && /^\d+$/.test(head) && Number(head) < data.heads
      ? Number(head) : "mean";
    const word = /^([st])(\d+)$/.exec(params.get("word") || "");
    const count = word && (word[1] === "s" ? source.length : target.length);
    state.word = word && Number(word[2]) < count
      ? (word[1] === "s" ? {i: Number(word[2])} : {j: Number(word[2])}) : null;
    state.numbers = params.get("numbers") === "1";
  }

  function writeHash() {
    let hash = "layer=" + state.layer + "&head=" + state.head;
    if (state.numbers) hash += "&numbers=1";
    location.hash = hash;  // the hashchange handler renders
  }

  function fillSelectors() {
    const layer = $("layer"), head = $("head");
    for (let l = 0; l < data.layers; l++) {
      const option = new Option("layer " + l + (l === data.default_layer ? " (default)" : ""), l);
      layer.add(option);
    }
    const heads = data.mean_heads;
    const mean = heads.length === data.heads ? "mean of all " + data.heads + " heads"
      : "mean of heads " + heads.join(",");
    head.add(new Option(mean, "mean"));
    for (let h = 0; h < data.heads; h++) head.add(new Option("head " + h, h));
    layer.addEventListener("change", () => { state.layer = Number(layer.value); writeHash(); });
    head.addEventListener("change", () => {
      state.head = head.value === "mean" ? "mean" : Number(head.value);
      writeHash();
    });
    $("numbers").addEventListener("change", () => {
      state.numbers = $("numbers").checked;
      writeHash();
    });
  }

  // ------------------------------------------------ drawing

  function drawHeatmap(view) {
    const svg = $("heatmap");
    svg.replaceChildren();
    parts.cells = []; parts.sourceLabels = []; parts.targetLabels = [];
    if (!target.length || !source.length) {
      svg.setAttribute("width", 320); svg.setAttribute("height", 30);
      node("text", {x: 0, y: 20, class: "empty"}, svg, "(empty translation: nothing to show)");
      return null;
    }
    const sourceWidths = widths(source), targetWidths = widths(target);
    const left = Math.max(...targetWidths) + 10;
    const top = Math.max(...sourceWidths) * Math.sin(Math.PI / 3) + 12;
    let right = left + source.length * CELL;
    source.forEach((word, i) => {
      const x = left + (i + 0.5) * CELL;
      right = Math.max(right, x + sourceWidths[i] / 2 + PAD);
      parts.sourceLabels.push(node("text", {class: "word", "data-i": i,
        transform: "translate(" + (x - 4) + "," + (top - 6) + ") rotate(-60)"}, svg, word));
    });
    target.forEach((word, j) => {
      parts.targetLabels.push(node("text", {class: "word", "data-j": j, x: left - 8,
        y: top + (j + 0.5) * CELL + 4, "text-anchor": "end"}, svg, word));
    });
    const grid = node("g", {id: "grid"}, svg);
    view.weights.forEach((row, j) => row.forEach((w, i) => {
      const cell = node("rect", {x: left + i * CELL, y: top + j * CELL, width: CELL - 1,
        height: CELL - 1, fill: colour(w), "data-i": i, "data-j": j}, grid);
      parts.cells.push(cell);
      if (state.numbers) {
        node("text", {class: "number", x: left + (i + 0.5) * CELL, y: top + (j + 0.5) * CELL + 3,
          "text-anchor": "middle", fill: w > 0.55 ? "#fff" : "#222"}, svg,
          w >= 1 ? "1" : w.toFixed(2).replace(/^0/, ""));
      }
    }));
    parts.rowBox = node("rect", {class: "box", x: left - 1, width: source.length * CELL + 1,
      height: CELL + 1, visibility: "hidden"}, svg);
    parts.columnBox = node("rect", {class: "box", y: top - 1, width: CELL + 1,
      height: target.length * CELL + 1, visibility: "hidden"}, svg);
    parts.left = left; parts.top = top;
    // the colour scale, 0 to 1
    const scaleTop = top + target.length * CELL + 14, scaleWidth = Math.min(200, right - left);
    const gradient = node("linearGradient", {id: "scale"}, node("defs", {}, svg));
    BLUES.forEach((c, k) => node("stop", {offset: k / (BLUES.length - 1),
      "stop-color": "rgb(" + c.join(",") + ")"}, gradient));
    node("rect", {x: left, y: scaleTop, width: scaleWidth, height: 10, fill: "url(#scale)",
      stroke: "#ccc"}, svg);
    node("text", {x: left - 6, y: scaleTop + 9, "text-anchor": "end"}, svg, "0");
    node("text", {x: left + scaleWidth + 6, y: scaleTop + 9}, svg, "1  attention weight");
    svg.setAttribute("width", Math.ceil(Math.max(right, left + scaleWidth + 140)));
    svg.setAttribute("height", Math.ceil(scaleTop + 20));
    return grid;
  }

  function drawLinks(view) {
    const svg = $("links");
    svg.replaceChildren();
    parts.lines = []; parts.linkSource = []; parts.linkTarget = [];
    const sourceWidth = Math.max(...widths(source.concat(["source"])));
    const targetWidth = Math.max(...widths(target.concat(["translation"])));
    const xSource = sourceWidth + 10, xTarget = xSource + LINK_GAP;
    const rows = Math.max(source.length, target.length, 1);
    const y = (k, n) => 30 + (k + 0.5 + (rows - n) / 2) * ROW;
    node("text", {x: xSource, y: 14, "text-anchor": "end", class: "empty"}, svg, "source");
    node("text", {x: xTarget, y: 14, class: "empty"}, svg, "translation");
    for (const [i, j] of view.links) {
      const w = view.weights[j][i];
      parts.lines.push(node("line", {x1: xSource + PAD, y1: y(i, source.length) - 4,
        x2: xTarget - PAD, y2: y(j, target.length) - 4, stroke: colour(0.35 + 0.65 * w),
        "stroke-width": 1.5 + 2 * w, "data-i": i, "data-j": j}, svg));
    }
    source.forEach((word, i) => parts.linkSource.push(node("text", {class: "word",
      "data-i": i, x: xSource, y: y(i, source.length), "text-anchor": "end"}, svg, word)));
    target.forEach((word, j) => {
      const linked = view.links.some((link) => link[1] === j);
      parts.linkTarget.push(node("text", {class: "word" + (linked ? "" : " empty"),
        "data-j": j, x: xTarget, y: y(j, target.length)}, svg, word));
    });
    svg.setAttribute("width", Math.ceil(xTarget + targetWidth + 10));
    svg.setAttribute("height", Math.ceil(30 + rows * ROW + 10));
  }

  // ------------------------------------------------ highlighting and the tooltip

  function emphasis(labels, values) {
    const top = Math.max(...values, 1e-9);
    labels.forEach((label, k) => {
      label.setAttribute("opacity", (0.25 + 0.75 * values[k] / top).toFixed(3));
      label.classList.toggle("lit", values[k] === top);
    });
  }

  function highlight(focus) {
    const weights = current().weights;
    const sourceLabels = parts.sourceLabels.concat(parts.linkSource);
    const targetLabels = parts.targetLabels.concat(parts.linkTarget);
    const clear = (labels) => labels.forEach((label) => {
      label.removeAttribute("opacity"); label.classList.remove("lit");
    });
    clear(sourceLabels); clear(targetLabels);
    if (parts.rowBox) {
      parts.rowBox.setAttribute("visibility", "hidden");
      parts.columnBox.setAttribute("visibility", "hidden");
    }
    parts.lines.forEach((line) => line.removeAttribute("opacity"));
    if (!focus || !weights.length) return;
    const hasI = focus.i !== undefined, hasJ = focus.j !== undefined;
    const i = focus.i, j = focus.j;
    if (hasJ && parts.rowBox) {
      parts.rowBox.setAttribute("y", parts.top + j * CELL - 1);
      parts.rowBox.setAttribute("visibility", "visible");
    }
    if (hasI && parts.columnBox) {
      parts.columnBox.setAttribute("x", parts.left + i * CELL - 1);
      parts.columnBox.setAttribute("visibility", "visible");
    }
    const pair = (n, k) => Array.from({length: n}, (_, m) => (m === k ? 1 : 0));
    const bySource = hasJ ? (hasI ? pair(source.length, i) : weights[j]) : null;
    const byTarget = hasI ? (hasJ ? pair(target.length, j) : weights.map((row) => row[i]))
      : null;
    if (bySource) {
      emphasis(parts.sourceLabels, bySource); emphasis(parts.linkSource, bySource);
      emphasis(parts.targetLabels, pair(target.length, j));
      emphasis(parts.linkTarget, pair(target.length, j));
    }
    if (byTarget) {
      emphasis(parts.targetLabels, byTarget); emphasis(parts.linkTarget, byTarget);
      if (!bySource) {
        emphasis(parts.sourceLabels, pair(source.length, i));
        emphasis(parts.linkSource, pair(source.length, i));
      }
    }
    parts.lines.forEach((line) => {
      const touches = (!hasI || Number(line.dataset.i) === i) &&
        (!hasJ || Number(line.dataset.j) === j);
      line.setAttribute("opacity", touches ? 1 : 0.12);
    });
  }

  function describe(focus) {
    const view = current(), weights = view.weights;
    const fixed = (w) => w.toFixed(3);
    if (focus.i !== undefined && focus.j !== undefined) {
      return "‘" + target[focus.j] + "’ ← ‘" + source[focus.i] + "’: " +
        fixed(weights[focus.j][focus.i]);
    }
    if (focus.j !== undefined) {
      const row = weights[focus.j], best = row.indexOf(Math.max(...row));
      const eos = Math.round(100 * view.eos[focus.j]);
      return row.every((w) => w === 0)
        ? "‘" + target[focus.j] + "’ gave all its attention to the end-of-sentence token"
        : "‘" + target[focus.j] + "’ drew most on ‘" + source[best] + "’ (" + fixed(row[best]) +
          "); " + eos + "% of its raw attention went to </s>";
    }
    const column = weights.map((row) => row[focus.i]);
    const best = column.indexOf(Math.max(...column));
    return "‘" + source[focus.i] + "’: drawn on most by ‘" + target[best] + "’ (" +
      fixed(column[best]) + ")";
  }

  function showTooltip(focus, x, y) {
    const tooltip = $("tooltip");
    tooltip.textContent = describe(focus);
    tooltip.style.left = (x + 14) + "px";
    tooltip.style.top = (y + 14) + "px";
    tooltip.style.display = "block";
  }

  function focusOf(element) {
    const focus = {};
    if (element.dataset.i !== undefined) focus.i = Number(element.dataset.i);
    if (element.dataset.j !== undefined) focus.j = Number(element.dataset.j);
    return focus.i === undefined && focus.j === undefined ? null : focus;
  }

  function pinned() {  // the word named in the URL, lit when the mouse is elsewhere
    highlight(state.word);
    $("tooltip").style.display = "none";
    if (!state.word) return;
    const rect = $("heatmap").getBoundingClientRect();  // under the heatmap
    showTooltip(state.word, rect.left + window.scrollX - 14, rect.bottom + window.scrollY - 10);
  }

  function listen(svg) {
    svg.addEventListener("mouseover", (event) => {
      const focus = focusOf(event.target);
      if (!focus) return;
      highlight(focus);
      showTooltip(focus, event.pageX, event.pageY);
    });
    svg.addEventListener("mousemove", (event) => {
      const tooltip = $("tooltip");
      if (tooltip.style.display === "block" && focusOf(event.target)) {
        tooltip.style.left = (event.pageX + 14) + "px";
        tooltip.style.top = (event.pageY + 14) + "px";
      }
    });
    svg.addEventListener("mouseout", (event) => {
      if (focusOf(event.target)) pinned();
    });
  }

  // ------------------------------------------------ putting it together

  function render() {
    readHash();
    const view = current();
    $("layer").value = String(state.layer);
    $("head").value = String(state.head);
    $("numbers").checked = state.numbers;
    $("view-title").textContent = view.title;
    const grid = drawHeatmap(view);
    drawLinks(view);
    pinned();
    const box = grid && grid.getBoundingClientRect();
    window.explorerReport({rendered: view.title, grid: box && {x: box.left + window.scrollX,
      y: box.top + window.scrollY, width: box.width, height: box.height}});
  }

  fillSelectors();
  listen($("heatmap"));
  listen($("links"));
  window.addEventListener("hashchange", render);
  render();
  // The web font loads when first used; measure the words again once it is there.
  Promise.all(Array.from(document.fonts, (face) => face.load())).then(render);
})();
"""
