"""Fuzzing with hypothesis: arbitrary Unicode (every plane, control characters, lone combining
marks, zero-width joiners, right-to-left marks, lone surrogates, 10,000-character words)
through normalisation, the tokenizer, `translate`, word merging, the heatmap, JSON and explorer
writers, Pharaoh parsing and config overrides. Nothing but the project's own error type may
escape, and every translate call returns one output per input.

Seeded (derandomize: the same examples on every run, no example database) and bounded
(max_examples per test), so the whole file runs in well under a minute."""

import json
import string

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from translator import alignment, explorer, links, plotting
from translator.config import Config, TrainConfig, load_config
from translator.data import normalize
from translator.errors import TranslatorError
from translator.translate import Translator

FUZZ = settings(derandomize=True, database=None, deadline=None, max_examples=60,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

SPECIAL = [
    "\u200d", "\u200c",  # zero-width joiner, non-joiner
    "\u200b", "\ufeff",  # zero-width space, BOM
    "\u200e", "\u200f", "\u202e", "\u2066", "\u061c",  # LTR/RTL marks and overrides
    "\u0301", "\u093c", "\u094d", "\u0902", "\u0951",  # lone combining marks, nukta, virama
    "\x00", "\x07", "\x1b", "\x7f", "\x85", "\t", "\r", "\n", "\u2028", "\u3000",  # controls
    "\U0001f600", "\U0001f1ee\U0001f1f3", "\U0010fffd", "\U000e0001",  # astral planes
    "क", "ज़", "क़", "ऩ", "a", "é", "ß", "ﬁ", " ", "</script>", "<!--", "&amp;", "\\", '"',
]
ATOM = st.sampled_from(SPECIAL) | st.characters()  # any character, the special ones often


def strings(atoms, min_size: int = 0, max_size: int = 80):
    """Strings joined from ``atoms`` (each one character or a short sequence)."""
    return st.lists(atoms, min_size=min_size, max_size=max_size).map("".join)


# one "word" of up to 10,000 characters: a short run of atoms repeated
LONG_WORDS = st.builds(lambda unit, length: (unit * length)[:length],
                       strings(ATOM, min_size=1, max_size=3), st.integers(1_000, 10_000))

# a few characters that compose, combine, vanish or split, so that their sequences come up
DENSE = strings(st.sampled_from(["a", "e", "न", "क", "\u0301", "\u093c", "\u094d", "\u200b",
                                 "\ufeff", "\u200d", " ", "\u00a0"]), max_size=12)

TEXT = st.one_of(
    st.text(),  # every plane (no surrogates)
    DENSE,
    strings(st.sampled_from(SPECIAL), max_size=40),
    strings(ATOM),
    LONG_WORDS,
)
TEXT_WITH_SURROGATES = TEXT | strings(st.characters(categories=["Cs"]) | ATOM, min_size=1,
                                      max_size=10)


@pytest.fixture(scope="module")
def translator(tiny_run, one_thread):
    return Translator.from_run(tiny_run, checkpoint="last", device="cpu")


# ---------------------------------------------------------------- text


@FUZZ
@given(TEXT_WITH_SURROGATES, st.booleans())
def test_normalize_takes_any_text_and_is_idempotent(text, nukta):
    once = normalize(text, nukta)
    assert isinstance(once, str) and once == normalize(once, nukta)
    assert once == once.strip() and "  " not in once


@FUZZ
@given(TEXT_WITH_SURROGATES)
def test_the_tokenizer_encodes_any_text_or_says_why(translator, text):
    tokenizer = translator.tokenizer
    try:
        ids = tokenizer.encode_source(text)
    except TranslatorError:
        assert any(0xD800 <= ord(c) <= 0xDFFF for c in text)  # only lone surrogates
        return
    assert all(0 <= i < tokenizer.source_vocab_size for i in ids)
    assert tokenizer.unk_id not in ids  # byte fallback covers every character
    assert tokenizer.decode_source(ids) == normalize(text)
    assert len(tokenizer.source_pieces(ids)) == len(ids)


# ---------------------------------------------------------------- translating


# for translating, words of up to 300 characters (each part of a long input is searched)
SENTENCES = st.one_of(
    TEXT_WITH_SURROGATES.map(lambda text: text[:300]),
    st.lists(strings(ATOM, max_size=12), max_size=40).map(" ".join),
)


def check_translations(texts, results, n_best):
    assert len(results) == len(texts)
    for text, result in zip(texts, results):
        assert result.source == text and isinstance(result.text, str)
        assert len(result.nbest) == 0 if n_best == 1 else 1 <= len(result.nbest) <= n_best
        if result.attention is None:
            assert not result.tokens or any("too long" in w for w in result.warnings)
            continue
        layers, heads, rows, columns = result.attention.shape
        assert rows == len(result.target_pieces) + 1
        assert columns == len(result.source_pieces) + 1
        assert torch.isfinite(result.attention).all()
        words = alignment.merge_to_words(alignment.select_attention(result.attention),
                                         result.source_pieces, result.target_pieces)
        assert words.weights.shape == (len(words.target_words), len(words.source_words))
        sums = words.weights.sum(1)
        assert torch.all(((sums - 1).abs() < 1e-4) | (sums == 0))


@settings(FUZZ, max_examples=30)
@given(st.lists(SENTENCES, min_size=1, max_size=4), st.integers(1, 3), st.data())
def test_translate_returns_one_output_per_input_or_says_why(translator, texts, beam, data):
    n_best = data.draw(st.integers(1, beam))
    try:
        results = translator.translate(texts, beam_size=beam, n_best=n_best, batch_size=64)
    except TranslatorError:
        assert any(0xD800 <= ord(c) <= 0xDFFF for text in texts for c in text)
        return
    check_translations(texts, results, n_best)


@pytest.mark.parametrize("word", ["x" * 10_000, "क्ष" * 3_334])
def test_a_10000_character_word_is_translated_in_parts(translator, word):
    results = translator.translate([word, "नमस्ते"], beam_size=1, batch_size=64)
    check_translations([word, "नमस्ते"], results, 1)
    assert any("split into" in w for w in results[0].warnings)


# ---------------------------------------------------------------- writers


def word_alignments(max_words: int = 6):
    """WordAlignment of arbitrary words (any text, long ones included) and weights."""
    words = st.lists(TEXT.filter(bool), min_size=1, max_size=max_words)
    return st.tuples(words, words, st.integers(0, 2**31 - 1)).map(
        lambda t: alignment.WordAlignment(
            t[0], t[1], torch.softmax(torch.randn(len(t[1]), len(t[0]),
                                                  generator=torch.Generator().manual_seed(t[2])),
                                      dim=1)))


@FUZZ
@given(word_alignments(), TEXT)
def test_the_json_writer_round_trips_any_words(tmp_path, words, sentence):
    path = plotting.save_alignment_json(words, tmp_path / "a.json", source=sentence)
    record = json.loads(path.read_text(encoding="utf-8"))
    assert record["source_words"] == words.source_words and record["source"] == sentence
    assert record["target_words"] == words.target_words


@settings(FUZZ, max_examples=4)
@given(word_alignments(max_words=3), st.sampled_from([".png", ".svg"]))
def test_the_heatmap_writer_draws_any_words(tmp_path, words, suffix):
    try:
        path = plotting.plot_heatmap(words, tmp_path / f"h{suffix}", title="fuzz")
    except TranslatorError:
        return
    assert path.stat().st_size > 0


@settings(FUZZ, max_examples=3)  # each page embeds a font subset: about a second
@given(st.lists(TEXT.filter(bool), min_size=1, max_size=4), TEXT, TEXT)
def test_the_explorer_keeps_any_text(tmp_path, pieces, source, translation):
    source_pieces = ["▁" + p for p in pieces]
    attention = torch.softmax(torch.randn(1, 2, 3, len(source_pieces) + 1), dim=-1)
    path = explorer.write_explorer(tmp_path / "e.html", attention, source_pieces,
                                   ["▁a", "▁b"], source, translation, title=source[:50])
    data = explorer.read_explorer_data(path)
    assert (data["source"], data["translation"]) == (source, translation)
    page = path.read_text(encoding="utf-8").lower()
    assert page.count("<script") == page.count("</script")  # no text broke out of its script


# ---------------------------------------------------------------- Pharaoh and configs


PHARAOH = st.one_of(
    TEXT_WITH_SURROGATES,
    st.lists(st.tuples(st.integers(0, 30), st.integers(0, 30)).map(lambda t: f"{t[0]}-{t[1]}")
             | st.text(st.sampled_from(string.digits + "-٣३ \t"), max_size=12)
             | st.integers(4_000, 5_000).map(lambda n: "1" * n + "-0"),
             max_size=8).map(" ".join),
)


@FUZZ
@given(PHARAOH, st.integers(0, 40), st.integers(0, 40), st.booleans())
def test_pharaoh_lines_parse_or_say_why(line, hindi, english, english_first):
    """A line is refused exactly when the oracle (`pharaoh_links`) says it is not a Pharaoh
    line of this pair, and parsed to the oracle's links otherwise."""
    expected = pharaoh_links(line, hindi, english, english_first)
    try:
        parsed = links.parse_line(line, hindi, english, "fuzz", english_first)
    except TranslatorError:
        assert expected is None, f"a valid line was refused: {line!r}"
        return
    assert parsed == expected
    again = links.format_line(links.swap(parsed) if english_first else parsed)
    assert links.parse_line(again, hindi, english, "fuzz", english_first) == parsed


def pharaoh_links(line: str, hindi: int, english: int, english_first: bool):
    """The sorted distinct links of a Pharaoh line (ASCII numbers i-j inside the pair's
    words), or None when it is not one: written apart from `links.parse_line`."""
    found = set()
    for item in line.split():
        numbers = item.split("-")
        if len(numbers) != 2 or not all(n.isascii() and n.isdigit() for n in numbers):
            return None
        first, second = (int(n) if len(n) < 10 else 10**10 for n in numbers)
        i, j = (second, first) if english_first else (first, second)
        if i >= hindi or j >= english:
            return None
        found.add((i, j))
    return sorted(found)



KEYS = [f"{section}.{key}" for section, values in
        {"data": Config().data, "tokenizer": Config().tokenizer, "model": Config().model,
         "train": TrainConfig()}.items() for key in vars(values)]
VALUES = st.one_of(
    TEXT_WITH_SURROGATES,
    st.integers(-10, 10_000).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(str),
    st.sampled_from(["null", "true", "no", "[]", "{}", "[0.9, 0.98]", "{a: 1}", "1e-3", "5e-4",
                     "!!python/object:os.system", "[[[[", "&a [*a]", "2026-11-30", "0x10",
                     "'quoted'", "- item", ": colon", ".inf", "-.nan", "~", "9" * 5000]),
)
OVERRIDES = st.one_of(
    st.tuples(st.sampled_from(KEYS), VALUES).map("=".join),
    st.tuples(TEXT, VALUES).map("=".join),
    TEXT_WITH_SURROGATES,
)


# overrides that must load, with the value each must give (a refusal of any fails)
VALID_OVERRIDES = st.one_of(
    st.integers(1, 10**6).map(lambda n: ("train.max_steps", str(n), n)),
    st.integers(0, 2**31 - 1).map(lambda n: ("train.seed", str(n), n)),
    st.integers(1, 16).map(lambda n: ("search.beam_size", str(n), n)),
    st.integers(0, 9).map(lambda n: ("model.dropout", f"0.{n}", n / 10)),
    st.sampled_from(["hi-en", "en-hi", "both"]).map(lambda d: ("data.direction", d, d)),
    st.sampled_from(["0.001", "0.0005", "0.1"]).map(
        lambda v: ("train.learning_rate", v, float(v))),
    st.sampled_from(["chrf", "bleu", "loss"]).map(
        lambda v: ("train.early_stopping_metric", v, v)),
)


@settings(FUZZ, max_examples=100)
@given(st.lists(VALID_OVERRIDES, min_size=1, max_size=3, unique_by=lambda o: o[0]))
def test_valid_config_overrides_load_and_set_their_value(overrides):
    config = load_config(None, [f"{key}={text}" for key, text, _ in overrides])
    for key, _, value in overrides:
        section, name = key.split(".")
        assert getattr(getattr(config, section), name) == value, key


@settings(FUZZ, max_examples=200)
@given(st.lists(OVERRIDES, min_size=1, max_size=3))
def test_config_overrides_load_or_say_why(overrides):
    try:
        config = load_config(None, overrides)
    except TranslatorError:
        return
    assert isinstance(config, Config)
    assert config.model.d_model % config.model.heads == 0
