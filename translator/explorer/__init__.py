"""The attention explorer: one self-contained HTML page to poke at a translation's
cross-attention in a browser, opened from disk, with no server and no network.

The page holds its data as inline JSON: the word-level matrices of every view the sentence's
attention offers (`translator.alignment.SentenceAttention`: each decoder layer's heads and their
mean), merged from pieces to words exactly as the PNG and JSON heatmaps are (EOS dropped, rows
renormalised), rounded to 4 decimals as in the JSON, with the title each view gives itself, and
the hard links of each view (`translator.alignment.hard_links`: the brightest source word of
each target word). The page computes no view of its own. A script
in plain JavaScript, drawing SVG, shows:

- the source, the translation (and a reference, when given) in full;
- a layer selector and a head selector (each head, or the mean of heads); the default view is
  the project's (`translator.alignment.DEFAULT_LAYER`, mean of heads);
- Bahdanau's picture (soft weights: source words across the top, output words down the side)
  and the hard links, side by side; hovering an output word lights its row and the source words
  it drew on, hovering a source word the reverse; each cell's weight shows on hover;
- for a showcase sentence of a run that kept its attention over training
  (`translator.timeline`), a training-step slider: each validation's attention, the model
  force-decoded on the reference; its last position, the default, is the final translation;
- what the model weighed (`with_insight`, when the translation recorded it): hovering an
  output word lists the most probable pieces of the step that chose it, as bars; a forced
  prefix's words are marked; and a third view, the input × gradient attribution
  (`translator.alignment.translation_attribution`), in place of attention in both panels
  (``&show=attribution``);
- the view can be set from the URL: ``#layer=1&head=3`` (``head=mean`` for the mean),
  ``&word=t2`` (output word 2) or ``&word=s0`` (source word 0) to light a word,
  ``&numbers=1`` to write the weights in the cells, ``&step=400`` for a training step.

Devanagari is drawn with Noto Sans Devanagari (the `fontpkg_noto_sans_devanagari` package),
embedded as a WOFF web font subset to the characters on the page, its shaping tables kept, so
conjuncts come out right on machines that have no Devanagari font. A strict
Content-Security-Policy (scripts and styles by hash, fonts only from the page itself, nothing
else) keeps the page from reaching the network. The page writes what went wrong (script
errors, blocked requests) and every resource it loaded into ``<pre id="diagnostics">``, so a
headless browser can check it (``chromium --headless --dump-dom page.html``).

The page's script and style are files of this package, beside this module (explorer.js,
diagnostics.js, explorer.css), read once and inlined into every page written, which stays one
self-contained file.
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
    ATTRIBUTION_TITLE,
    AlignmentError,
    SentenceAttention,
    View,
    WordAlignment,
    describe_view,
    hard_links,
    rounded,
)
from translator.timeline import TimelineSentence
from translator.tokenizer import piece_words
from translator.translate import Translation

SUFFIXES = (".html", ".htm")
FONT_FAMILY = "Explorer Noto Sans Devanagari"
# Noto Sans Devanagari is a variable font (weight 100–900, width 62.5–100); the page uses one
# static instance, which keeps the embedded subset near 20 KB.
FONT_INSTANCE = {"wght": 400, "wdth": 100}
# Characters the page's own labels and tooltips use, on top of the sentences' own.
UI_TEXT = ("0123456789.,:;–—←→·%()[]/<>‘’'\"#=&?!- abcdefghijklmnopqrstuvwxyz"
           "ABCDEFGHIJKLMNOPQRSTUVWXYZ\u25cc\u200c\u200d")
DATA_ID = "explorer-data"
_HERE = Path(__file__).resolve().parent
_DATA_SCRIPT = re.compile(rf'<script type="application/json" id="{DATA_ID}">(.*?)</script>',
                          re.DOTALL)


# ---------------------------------------------------------------- the data


def _view(sentence: SentenceAttention, matrix: Tensor
          ) -> tuple[list[list[float]], list[list[int]], list[float]]:
    """One view's word-level weights (EOS dropped), hard links, and each output word's share of
    attention that went to the source EOS (before the EOS column was dropped)."""
    words = sentence.merged(matrix)
    kept = sentence.merged(matrix, eos="keep")
    eos_share = rounded(kept.weights[: len(words.target_words), -1])
    links = [[i, j] for i, j in hard_links(words.weights)]
    return rounded(words.weights), links, eos_share


def explorer_data(
    attention: Tensor, source_pieces: Sequence[str], target_pieces: Sequence[str],
    source_text: str, translation_text: str, title: str = "cross-attention explorer",
    reference: str | None = None, layer: int | None = None, heads: list[int] | None = None,
    full_context: bool = False,
) -> dict[str, Any]:
    """`sentence_data` of ``attention`` [layers, heads, T+1, S+1] as our model returns it
    (``full_context``: the titles say the attention is the full-context pass's), opening on
    ``layer`` (None: the default layer) with the mean of ``heads`` (None: all)."""
    sentence = SentenceAttention.every(attention, source_pieces, target_pieces, full_context)
    return sentence_data(sentence, source_text, translation_text, title, reference,
                         View(layer, heads))


def sentence_data(sentence: SentenceAttention, source_text: str, translation_text: str,
                  title: str = "cross-attention explorer", reference: str | None = None,
                  view: View | None = None) -> dict[str, Any]:
    """Everything the page shows, as JSON-ready data: every view ``sentence`` offers, opening
    on ``view``'s layer (None: the default view); each layer's "mean" is the mean of
    ``view``'s heads (None: all), as in `translator.drawing.draw_attention`. Keys:
    ``weights``, ``links``, ``eos_share`` and ``titles`` each hold ``{"mean": [per layer],
    "heads": [per layer][per head]}``."""
    view = view or View()
    mean_heads = list(range(sentence.num_heads)) if view.heads is None else list(view.heads)
    first = sentence.merged(sentence.head_matrix(0, 0))
    result: dict[str, Any] = {key: {"mean": [], "heads": []}
                              for key in ("weights", "links", "eos_share", "titles")}
    for index, layer_view in enumerate(sentence.layer_views(view.heads)):
        matrices = [sentence.matrix(View(layer_view.layer, mean_heads))]
        matrices += [sentence.head_matrix(index, h) for h in range(sentence.num_heads)]
        views = [_view(sentence, matrix) for matrix in matrices]
        titles = [sentence.title(layer_view)]
        titles += [sentence.title(head) for head in sentence.head_views(layer_view)]
        for key, values in zip(("weights", "links", "eos_share"), zip(*views)):
            result[key]["mean"].append(values[0])
            result[key]["heads"].append(list(values[1:]))
        result["titles"]["mean"].append(titles[0])
        result["titles"]["heads"].append(titles[1:])
    return {"title": title, "source": source_text, "translation": translation_text,
            "reference": reference, "source_words": first.source_words,
            "target_words": first.target_words, "layers": sentence.num_layers,
            "heads": sentence.num_heads, "mean_heads": mean_heads,
            "default_layer": sentence.index(view), "eos": "drop", **result}


def timeline_data(followed: TimelineSentence, mean_heads: list[int]) -> dict[str, Any]:
    """The slider's data (``data["timeline"]``) from a sentence followed through training:
    its reference's words and, per validation, the keys ``weights``, ``links``, ``eos_share``
    and ``titles`` as `sentence_data` has them (each layer's "mean" over ``mean_heads``), read
    from the stored matrices exactly as the final view is (EOS dropped, rows renormalised)."""
    steps = []
    for index, step in enumerate(followed.steps):
        stored = followed.weights[index]
        layers, heads = stored.shape[:2]
        result: dict[str, Any] = {key: {"mean": [], "heads": []}
                                  for key in ("weights", "links", "eos_share", "titles")}
        for layer in range(layers):
            for key in result:
                result[key]["heads"].append([])
            for chosen in [mean_heads] + [[head] for head in range(heads)]:
                words = followed.words(index, layer, chosen)
                title = (f"{describe_view(stored, layer, chosen)} · step {step}, "
                         "force-decoded on the reference")
                values = (rounded(words.weights), [[i, j] for i, j in hard_links(words.weights)],
                          rounded(followed.eos_share(index, layer, chosen)), title)
                for key, value in zip(result, values):
                    if chosen is mean_heads:
                        result[key]["mean"].append(value)
                    else:
                        result[key]["heads"][layer].append(value)
        steps.append({"step": step, **result})
    return {"reference": followed.reference, "target_words": followed.target_words,
            "steps": steps}


def with_timeline(data: dict[str, Any], followed: list[TimelineSentence]) -> dict[str, Any]:
    """``data`` (`sentence_data`) with the slider's data of the followed sentence whose source
    and reference are the page's (`translator.timeline.read_timeline`); unchanged when none
    is, or when its words or layers are not the page's."""
    for sentence in followed:
        if ((sentence.source, sentence.reference) == (data["source"], data["reference"])
                and sentence.source_words == data["source_words"] and sentence.steps
                and tuple(sentence.weights[0].shape[:2]) == (data["layers"], data["heads"])):
            return {**data, "timeline": timeline_data(sentence, data["mean_heads"])}
    return data


def with_insight(data: dict[str, Any], translation: Translation,
                 attribution: WordAlignment | None = None) -> dict[str, Any]:
    """``data`` (`sentence_data` of ``translation``) with what the page shows beside attention,
    where there is some: ``weighed``, per output word what the model weighed
    (`Translation.words`: its log-probability, its step's alternatives); ``prefix_words``, the
    words a forced prefix wrote; ``attribution``, the third view (its word matrix, hard links
    and title). Words that are not the page's rows are left out."""
    extra: dict[str, Any] = {}
    words = translation.words()
    if words and [w["word"] for w in words] == data["target_words"]:
        extra["weighed"] = words
    if translation.prefix_pieces:
        extra["prefix_words"] = piece_words(translation.target_pieces)[1][
            translation.prefix_pieces - 1] + 1
    if attribution is not None and (attribution.target_words, attribution.source_words) == (
            data["target_words"], data["source_words"]):
        extra["attribution"] = {"weights": rounded(attribution.weights),
                                "links": [[i, j] for i, j in hard_links(attribution.weights)],
                                "title": ATTRIBUTION_TITLE}
    return {**data, **extra}


def _insight_text(data: dict[str, Any]) -> list[str]:
    """The characters of the alternatives' pieces, which the page's font must hold."""
    return [piece for word in data.get("weighed", []) for piece, _ in word["alternatives"]]


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

    font = TTFont(io.BytesIO(_font_bytes()), recalcTimestamp=False)  # the same bytes each time
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


@cache
def _asset(name: str) -> str:
    """One of the page's files (explorer.js, diagnostics.js, explorer.css), as text."""
    return (_HERE / name).read_text(encoding="utf-8")


def explorer_html(data: dict[str, Any], form_action: str = "'none'", header: str = "") -> str:
    """The page for `sentence_data`'s ``data``: one string, everything inline. A page served
    with a form lets it post to ``form_action`` (a CSP source: "'self'") and puts ``header``
    (HTML) first in its body; a file on disk posts nowhere."""
    text = "".join([data["title"], data["source"], data["translation"],
                    data["reference"] or "", *data["source_words"], *data["target_words"],
                    *data["titles"]["mean"], UI_TEXT,
                    *(data.get("timeline") or {}).get("target_words", []),
                    *_insight_text(data)])
    style = font_face_css(text) + _asset("explorer.css").replace("FONT_FAMILY", FONT_FAMILY)
    diagnostics_js, explorer_js = _asset("diagnostics.js"), _asset("explorer.js")
    # "<" escaped, so no "</script>" or "<!--" inside the data can end the script element
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    policy = (f"default-src 'none'; script-src {_hash(diagnostics_js)} {_hash(explorer_js)}; "
              f"style-src {_hash(style)}; font-src data:; img-src data:; base-uri 'none'; "
              f"form-action {form_action}")
    sentences = [_sentence("source", data["source"]),
                 _sentence("translation", data["translation"])]
    if data["reference"]:
        sentences.append(_sentence("reference", data["reference"]))
    title = html.escape(data["title"])
    body = (f'{header}<h1>{title}</h1>\n<div class="sentences">\n{chr(10).join(sentences)}\n'
            f'</div>\n{_asset("panels.html")}<pre id="diagnostics" hidden></pre>\n'
            f'<script type="application/json" id="{DATA_ID}">{payload}</script>\n'
            f"<script>{explorer_js}</script>\n")
    return html_document(policy, title, diagnostics_js, style, body)


def html_document(policy: str, title: str, diagnostics_js: str, style: str, body: str) -> str:
    """A page under ``policy`` (its Content-Security-Policy), the diagnostics script first:
    the explorer's and the model page's (translator.page) shell."""
    return f"""<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{policy}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<script>{diagnostics_js}</script>
<style>{style}</style>
</head>
<body>
{body}</body>
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
    check_suffix(path)
    return write_page(path, explorer_data(attention, source_pieces, target_pieces, source_text,
                                          translation_text, title, reference, layer, heads,
                                          full_context))


def check_suffix(path: str | Path) -> None:
    if Path(path).suffix.lower() not in SUFFIXES:
        raise ValueError(f"the explorer is an HTML page; end {path} in .html")


def write_page(path: str | Path, data: dict[str, Any]) -> Path:
    """Write the page of `sentence_data`'s ``data`` to ``path`` (.html). Returns the path."""
    path = Path(path)
    check_suffix(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(explorer_html(data), encoding="utf-8")
    return path


def read_explorer_data(path: str | Path) -> dict[str, Any]:
    """The data embedded in an explorer page (the inverse of `explorer_html`)."""
    match = _DATA_SCRIPT.search(Path(path).read_text(encoding="utf-8"))
    if match is None:
        raise AlignmentError(f"{path} holds no explorer data; is it a page write_explorer made?")
    return json.loads(match.group(1))
