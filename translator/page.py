"""The model in one page: a trained run exported as one self-contained HTML file that
translates any sentence in the browser, offline, and shows its attention.

    python -m translator.page runs/latest model.html [--weights int8|float16]
    translator-export-page runs/latest model.html

The page holds everything it needs, inline: the model's weights (int8 with one scale per
matrix row by default, or float16; base64), the SentencePiece pieces and scores of both sides,
the run's search settings, and a decoder in plain JavaScript (``explorer/page.js``) that does
what `translator.translate.Translator` does with ``beam_size=1``: the normalisation of
`translator.data.normalize`, SentencePiece's unigram Viterbi (byte fallback, unknown
pieces), the split of long inputs, the encoder, greedy decoding with a key/value cache, the
length limit and repetition bans of `translator.search`, detokenisation, and the
cross-attention of every layer and head, shown in the attention explorer
(`translator.explorer`, whose script the page runs again for each sentence). Its
Content-Security-Policy is the explorer's: scripts and styles by hash, the font inline,
nothing else, so the page reaches no network and works from ``file://``.

Plain JavaScript on Float32Arrays rather than an inlined WebAssembly runtime: a page opened
from disk cannot fetch a .wasm file and has no SharedArrayBuffer for threads, and the default
model (4.6M parameters) decodes a sentence in a fraction of a second without either
(bench/page_bench.py measures it).
"""

from __future__ import annotations

import argparse
import base64
import html
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import torch

from translator import corpus
from translator.alignment import supervised_layer
from translator.direction import TAGS, Direction
from translator.errors import TranslatorError
from translator.explorer import (
    FONT_FAMILY,
    UI_TEXT,
    check_suffix,
    font_face_css,
    html_document,
)
from translator.explorer import _asset as explorer_asset
from translator.explorer import _hash as script_hash
from translator.run_dir import RunDir
from translator.translate import Translator

WEIGHT_FORMATS = ("int8", "float16")
# Bigger models make pages of hundreds of megabytes and decode too slowly in plain JavaScript.
MAX_PARAMETERS = 50_000_000
# SentencePiece piece types (sentencepiece_model.proto), as the page's tokenizer reads them.
NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6
# Every Devanagari letter and sign, so that any Hindi typed into the box is drawn with the
# embedded font, not only the characters of the pieces.
DEVANAGARI = "".join(chr(c) for c in range(0x0900, 0x0980))
MODEL_ID, WEIGHTS_ID, EXPLORER_JS_ID = "page-model", "page-weights", "page-explorer-js"


class PageError(TranslatorError):
    """A run that cannot be made into a page; the message says why."""


# ---------------------------------------------------------------- the weights


def _matrix_int8(matrix: np.ndarray) -> tuple[bytes, bytes]:
    """Symmetric int8 with one float32 scale per row (the output unit of a linear layer, the
    token of an embedding): a row's largest weight maps to ±127."""
    scales = np.abs(matrix).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    quantised = np.rint(matrix / scales[:, None]).clip(-127, 127).astype(np.int8)
    return quantised.tobytes(), scales.astype("<f4").tobytes()


def _pad4(blob: bytearray) -> int:
    """Pad ``blob`` to a multiple of 4 bytes (a Float32Array must start on one); its length."""
    blob.extend(b"\0" * (-len(blob) % 4))
    return len(blob)


def weights_blob(model: torch.nn.Module, weights: str) -> tuple[bytes, dict[str, Any]]:
    """Every parameter of ``model`` in one byte string, and where each one lies in it:
    ``{name: {"shape", "kind": "f32"|"f16"|"i8", "offset", "scales"}}``. Matrices are int8
    (per-row scales) or float16; vectors (biases, layer norms: 1 % of the weights) stay
    float32. A tied embedding is stored once, under the first name it has."""
    if weights not in WEIGHT_FORMATS:
        raise PageError(f"--weights must be one of {', '.join(WEIGHT_FORMATS)}, not {weights!r}")
    blob, layout, seen = bytearray(), {}, set()
    for name, parameter in model.named_parameters():  # shared parameters are listed once
        if id(parameter) in seen:
            continue
        seen.add(id(parameter))
        array = parameter.detach().float().cpu().numpy()
        entry: dict[str, Any] = {"shape": list(array.shape), "offset": _pad4(blob)}
        if array.ndim == 1:
            entry["kind"] = "f32"
            blob.extend(array.astype("<f4").tobytes())
        elif weights == "float16":
            entry["kind"] = "f16"
            blob.extend(array.astype("<f2").tobytes())
        else:
            data, scales = _matrix_int8(array)
            entry["kind"] = "i8"
            blob.extend(data)
            entry["scales"] = _pad4(blob)
            blob.extend(scales)
        layout[name] = entry
    return bytes(blob), layout


# ---------------------------------------------------------------- the tokenizers


def _piece_type(model: Any, piece_id: int, piece: str) -> int:
    if model.is_unknown(piece_id):
        return UNKNOWN
    if model.is_control(piece_id):
        return CONTROL
    if model.is_byte(piece_id):
        return BYTE
    if model.is_unused(piece_id):
        return UNUSED
    # the Python API has no is_user_defined; this project's only user-defined symbols are the
    # direction tags (`translator.tokenizer._train_model`)
    return USER_DEFINED if piece in TAGS.values() else NORMAL


def vocabulary(model: Any) -> dict[str, list]:
    """A SentencePiece model's pieces, scores (float32, exact in JSON) and piece types."""
    size = model.get_piece_size()
    pieces = [model.id_to_piece(i) for i in range(size)]
    return {"pieces": pieces, "scores": [model.get_score(i) for i in range(size)],
            "types": [_piece_type(model, i, piece) for i, piece in enumerate(pieces)]}


# ---------------------------------------------------------------- what the page knows


def _test_scores(run: RunDir) -> dict[str, Any]:
    """BLEU and chrF of the run's test score (test_scores.json), or {} when it has none."""
    try:
        scores = json.loads(run.test_scores_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return {key: scores[key] for key in ("bleu", "chrf", "beam_size", "sentences")
            if isinstance(scores.get(key), (int, float))}


def _showcase(direction: Direction) -> list[str]:
    """The showcase sentences in the language the run reads (hi-en's for a model of both)."""
    hindi_first = direction.showcase() == "hi-en"
    return [hindi if hindi_first else english for hindi, english in corpus.SHOWCASE]


def model_data(translator: Translator, run: RunDir, weights: str) -> dict[str, Any]:
    """Everything the page's script needs apart from the weights, as JSON-ready data."""
    config, tokenizer = translator.config, translator.tokenizer
    model = config.model
    search = config.search
    return {
        "name": run.path.resolve().name,
        "direction": translator.direction.name,
        "arrow": translator.direction.arrow,
        "scores": _test_scores(run),
        "parameters": translator.model.num_parameters(),
        "weights": weights,
        "showcase": _showcase(translator.direction),
        "model": {"d_model": model.d_model, "heads": model.heads, "layers": model.layers,
                  "decoder_layers": model.num_decoder_layers, "d_ff": model.d_ff,
                  "norm": model.norm, "share_embeddings": model.share_embeddings,
                  "max_positions": model.max_positions},
        "ids": {"pad": tokenizer.pad_id, "unk": tokenizer.unk_id, "bos": tokenizer.bos_id,
                "eos": tokenizer.eos_id},
        "search": {"max_length_ratio": search.max_length_ratio,
                   "max_length_extra": search.max_length_extra,
                   "no_repeat_ngram": search.no_repeat_ngram,
                   "no_doubled_words": search.no_doubled_words},
        "tags": {language: tokenizer.tags[language] for language in tokenizer.tags},
        "truecase": tokenizer.cfg.truecase,  # output's first letter made a capital again
        "full_context": config.train.alignment_full_context,
        "default_layer": supervised_layer(config),
        "source": vocabulary(tokenizer.source_model),
        "target": None if tokenizer.joint else vocabulary(tokenizer.target_model),
    }


def check_size(parameters: int) -> None:
    if parameters > MAX_PARAMETERS:
        raise PageError(f"this run's model has {parameters / 1e6:.1f}M parameters, more than the "
                        f"{MAX_PARAMETERS // 1_000_000}M a page can carry and decode; export a "
                        "smaller model")


# ---------------------------------------------------------------- the page


def _font_text(data: dict[str, Any]) -> str:
    """The characters the page may draw: the pieces', the showcase's, every Devanagari sign
    and the labels'."""
    pieces = data["source"]["pieces"] + (data["target"] or {"pieces": []})["pieces"]
    return "".join([*pieces, *data["showcase"], data["name"], DEVANAGARI, UI_TEXT, "▁…⇄"])


def _json_script(element_id: str, value: Any) -> str:
    # "<" escaped, so no "</script>" or "<!--" inside the data can end the element
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return f'<script type="application/json" id="{element_id}">{text}</script>'


def page_html(data: dict[str, Any], blob: bytes, layout: dict[str, Any]) -> str:
    """The page: one string, everything inline."""
    style = (font_face_css(_font_text(data))
             + explorer_asset("explorer.css").replace("FONT_FAMILY", FONT_FAMILY)
             + explorer_asset("page.css"))
    diagnostics_js, explorer_js = explorer_asset("diagnostics.js"), explorer_asset("explorer.js")
    page_js = explorer_asset("page.js")
    # explorer.js runs once per translation, put into the page by page.js: allowed by its hash
    policy = (f"default-src 'none'; script-src {script_hash(diagnostics_js)} "
              f"{script_hash(page_js)} {script_hash(explorer_js)}; style-src {script_hash(style)}; "
              "font-src data:; img-src data:; base-uri 'none'; form-action 'none'")
    title = html.escape(f"{data['name']}: {data['arrow']}")
    template = (explorer_asset("page.html").replace("TITLE", title)
                .replace("PANELS\n", explorer_asset("panels.html")))
    body = (f'{template}\n<pre id="diagnostics" hidden></pre>\n'
            f'{_json_script(MODEL_ID, data | {"layout": layout})}\n'
            f'<script type="application/octet-stream" id="{WEIGHTS_ID}">'
            f"{base64.b64encode(blob).decode()}</script>\n"
            f"{_json_script(EXPLORER_JS_ID, explorer_js)}\n"
            '<script type="application/json" id="explorer-data">{}</script>\n'
            f"<script>{page_js}</script>\n")
    return html_document(policy, title, diagnostics_js, style, body)


def export_page(run_dir: str | Path, out_html: str | Path, weights: str = "int8",
                checkpoint: str = "best") -> Path:
    """Write the page of the run ``run_dir`` (its ``checkpoint``) to ``out_html`` (.html), with
    ``weights`` "int8" (per-row scales) or "float16". Returns the path."""
    check_suffix(out_html)
    if weights not in WEIGHT_FORMATS:
        raise PageError(f"--weights must be one of {', '.join(WEIGHT_FORMATS)}, not {weights!r}")
    run = RunDir.find(run_dir)
    translator = Translator.from_run(run, checkpoint, device="cpu")
    check_size(translator.model.num_parameters())
    blob, layout = weights_blob(translator.model, weights)
    text = page_html(model_data(translator, run, weights), blob, layout)
    out = Path(out_html)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text, encoding="utf-8")
    return out


PAGE_HELP = ("Write a run's model as one offline HTML page that translates in the browser and "
             "shows the attention.")


def page_arguments(parser: argparse.ArgumentParser) -> None:
    """export-page's arguments (the command line's table and `main` share them)."""
    parser.add_argument("run", help="the run folder (runs/latest, for example)")
    parser.add_argument("out", help="the page to write (.html)")
    parser.add_argument("--weights", choices=WEIGHT_FORMATS, default="int8",
                        help="int8 with one scale per row (smaller; the default) or float16")
    parser.add_argument("--checkpoint", default="best", help="best (default), last, step-N")


def run_page(args: argparse.Namespace) -> int:
    path = export_page(args.run, args.out, args.weights, args.checkpoint)
    print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m translator.page RUN OUT.html [--weights int8|float16]``."""
    parser = argparse.ArgumentParser(prog="translator-export-page", description=PAGE_HELP)
    page_arguments(parser)
    try:
        return run_page(parser.parse_args(argv))
    except (TranslatorError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
