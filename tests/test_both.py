"""data.direction=both: one model that translates both ways, told which by a tag before the
source. A tiny model trained here in seconds on a tiny corpus it learns by heart; the tag must
choose the language it writes, the dev and test splits are scored both ways, and the commands
take --to (with one sentence and exit code 2 for a --to they cannot honour)."""

import json
from pathlib import Path

import pytest

from translator.alignment import align_pairs
from translator.cli import evaluate_main, translate_main
from translator.config import load_config
from translator.direction import scores_of
from translator.drawing import translate_showcase
from translator.training import train
from translator.translate import (
    TranslateError,
    Translator,
    devanagari_share,
    max_source_pieces,
    script_warning,
)

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ROOT / "configs" / "smoke.yaml"

# Each pair is learnt both ways. The last four rows make the tag necessary: Hindi is often
# written with English words in Latin letters, so "OK thank you" and "UPI payment failed" are
# the Hindi side of one row and the English side of another. A model that ignored the tag could
# not tell whether to write "okay, thanks" or "ठीक है धन्यवाद" for "OK thank you".
TRAIN = [
    ("मैं घर जा रहा हूँ", "I am going home"),
    ("आज बारिश हो रही है", "it is raining today"),
    ("क्या आप चाय पिएँगे", "would you like some tea"),
    ("मेरी बहन पुणे में है", "my sister is in Pune"),
    ("ट्रेन देर से आई", "the train came late"),
    ("दुकान बंद है", "the shop is closed"),
    ("OK thank you", "okay, thanks"),
    ("ठीक है धन्यवाद", "OK thank you"),
    ("UPI payment failed", "the UPI payment did not go through"),
    ("यूपीआई भुगतान विफल", "UPI payment failed"),
]
DEV = [("कल मिलते हैं", "see you tomorrow"), ("पानी ठंडा है", "the water is cold")]
TEST = [("मुझे भूख लगी है", "I am hungry"), ("बस आ गई", "the bus has come"),
        ("खाना तैयार है", "the food is ready")]
BOTH_WAYS = ["OK thank you", "UPI payment failed"]  # sources of both languages


def devanagari(text: str) -> bool:
    return bool(text) and (devanagari_share(text) or 0.0) >= 0.5


def latin(text: str) -> bool:
    return bool(text) and devanagari_share(text) == 0.0


def write_tsv(path: Path, rows) -> str:
    path.write_text("".join(f"{hi}\t{en}\n" for hi, en in rows), encoding="utf-8")
    return str(path)


def train_both(folder: Path) -> Path:
    """A run of direction both in ``folder``, with guided alignment (monotone links written by
    hand); about 10 s on one core."""
    links = folder / "train.align"
    links.write_text("".join(" ".join(f"{k}-{k}" for k in range(min(len(hi.split()),
                                                                     len(en.split())))) + "\n"
                             for hi, en in TRAIN), encoding="utf-8")
    config = load_config(SMOKE, [
        f"train.output_dir={folder / 'runs'}", "train.run_name=both", "train.heatmaps=false",
        "data.direction=both", "data.source=files",
        f"data.train_path={write_tsv(folder / 'train.tsv', TRAIN)}",
        f"data.dev_path={write_tsv(folder / 'dev.tsv', DEV)}",
        f"data.test_path={write_tsv(folder / 'test.tsv', TEST)}",
        f"data.train_alignment_path={links}", "train.alignment_weight=0.1",
        "tokenizer.vocab_size=400", "model.max_positions=32", "model.layers=2",
        "train.max_steps=250", "train.eval_every=125", "train.log_every=50",
        "train.warmup_steps=20", "train.batch_tokens=4000", "train.threads=1"])
    run_dir, code = train(config)
    assert code == 0
    return run_dir


@pytest.fixture(scope="module")
def both_run(tmp_path_factory) -> Path:
    return train_both(tmp_path_factory.mktemp("both"))


@pytest.fixture(scope="module")
def translator(both_run) -> Translator:
    return Translator.from_run(both_run, device="cpu")


# ---------------------------------------------------------------- the tag chooses the language


@pytest.mark.parametrize("source", BOTH_WAYS)
def test_the_tag_alone_chooses_the_language_written(translator, source):
    """The same source text, asked for English and then Hindi: Latin letters, then Devanagari
    (the same output twice would mean the tag was ignored somewhere on its way)."""
    english, hindi = (translator.translate([source], beam_size=1, target_language=language)[0]
                      for language in ("en", "hi"))
    assert latin(english.text), english.text
    assert devanagari(hindi.text), hindi.text
    # a tag at the start of the text asks as --to does
    assert translator.translate([f"<2hi> {source}"], beam_size=1)[0].text == hindi.text
    assert translator.translate([f"<2en> {source}"], beam_size=1)[0].text == english.text


def test_the_language_comes_from_the_tag_not_from_anything_else(translator, monkeypatch):
    """The control of the test above: with the tag held fixed, asking for Hindi or English
    gives one and the same output, so the two scripts above come from the tag alone."""
    monkeypatch.setitem(translator.tokenizer.tags, "hi", translator.tokenizer.tags["en"])
    english, hindi = (translator.translate([BOTH_WAYS[0]], beam_size=1,
                                           target_language=language)[0].text
                      for language in ("en", "hi"))
    assert english == hindi and latin(hindi)


def test_without_a_target_language_the_script_decides(translator):
    hindi_source, english_source = TRAIN[0][0], TRAIN[3][1]
    to_english, to_hindi = translator.translate([hindi_source, english_source], beam_size=2)
    assert (to_english.target_language, to_hindi.target_language) == ("en", "hi")
    assert latin(to_english.text) and devanagari(to_hindi.text)
    assert to_english.warnings == to_hindi.warnings == []


def test_the_tag_is_no_source_word_of_the_pieces_or_the_attention(translator):
    result = translator.translate([TRAIN[1][0]], beam_size=2, target_language="en")[0]
    assert result.source_pieces == translator.tokenizer.source_pieces(
        translator.tokenizer.encode_source(TRAIN[1][0]))
    assert not any(piece.startswith("<2") for piece in result.source_pieces)
    assert result.attention.shape[2:] == (len(result.target_pieces) + 1,
                                          len(result.source_pieces) + 1)
    assert result.to_dict()["target_language"] == "en"
    # the EOS and the tag
    assert max_source_pieces(translator.model, translator.tokenizer) == 32 - 2
    # forced alignment reads the tag too, and links only the sentence's words
    links = align_pairs(translator.model, translator.tokenizer, [TRAIN[1]])[0]
    assert links and all(i < 5 and j < 4 for i, j in links)


def test_the_script_warning_follows_the_language_asked_for(translator):
    assert script_warning("the shop is closed", "both") is None  # the script decides
    assert script_warning("the shop is closed", "both", "hi") is None
    assert "not in Devanagari" in script_warning("the shop is closed", "both", "en")
    assert "is in Devanagari" in script_warning("दुकान बंद है", "both", "hi")
    result = translator.translate(["the shop is closed"], beam_size=1, target_language="en")[0]
    assert len(result.warnings) == 1 and "English was asked for" in result.warnings[0]


def test_the_showcase_of_a_both_run_is_drawn_hindi_to_english(translator):
    (source, reference, result), *_ = translate_showcase(translator)
    assert devanagari(source) and latin(reference) and result.target_language == "en"


def test_a_target_language_the_model_cannot_write_is_refused(translator, tiny_run):
    with pytest.raises(TranslateError, match="unknown target language 'fr'"):
        translator.translate(["कल"], target_language="fr")
    hi_en = Translator.from_run(tiny_run, device="cpu")
    assert hi_en.translate(["कल"], beam_size=1, target_language="en")[0].target_language is None
    with pytest.raises(TranslateError, match="translates Hindi to English only"):
        hi_en.translate(["कल"], target_language="hi")


# ---------------------------------------------------------------- scored both ways


def records(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]


def test_dev_is_scored_both_ways_under_hi_en_names_and_an_en_hi_section(both_run):
    validations = [r for r in records(both_run) if r["kind"] == "validation"]
    assert len(validations) == 2
    for record in validations:
        for name in ("dev_loss", "dev_perplexity", "dev_bleu", "dev_chrf", "dev_sentences"):
            assert name in record and name in record["en-hi"]
        # eval_sentences (20) counts per direction: both dev sentences, each way
        assert record["dev_sentences"] == record["en-hi"]["dev_sentences"] == len(DEV)
    log = (both_run / "train.log").read_text(encoding="utf-8")
    # guided alignment found the links of every pair, both ways
    assert f"word links for {2 * len(TRAIN)} of {2 * len(TRAIN)} training pairs" in log
    assert "en→hi BLEU" in log


def test_test_is_scored_both_ways(both_run):
    scores = json.loads((both_run / "test_scores.json").read_text())
    assert scores["sentences"] == scores["en-hi"]["sentences"] == len(TEST)
    for name in ("bleu", "chrf", "bleu_signature", "chrf_signature"):
        assert name in scores and name in scores["en-hi"]
    to_english = (both_run / "test_hypotheses.txt").read_text(encoding="utf-8").splitlines()
    to_hindi = (both_run / "test_hypotheses_en_hi.txt").read_text(encoding="utf-8").splitlines()
    assert len(to_english) == len(to_hindi) == len(TEST)
    # sentences never seen: a model this small writes some mix, but mostly the right script
    assert any(map(latin, to_english)) and any(map(devanagari, to_hindi))


# ---------------------------------------------------------------- the commands


def test_translate_to_on_the_command_line(both_run, capsys):
    for language, script in (("en", latin), ("hi", devanagari)):
        assert translate_main(["--run", str(both_run), "--beam", "1", "--to", language,
                               BOTH_WAYS[0]]) == 0
        output = capsys.readouterr().out.strip()
        assert script(output), output


def test_evaluate_takes_one_half_of_the_test_split(both_run, capsys):
    """hi→en by default, en→hi with --to hi: the translations training scored (beam 2, the
    best checkpoint) of that half."""
    test = json.loads((both_run / "test_scores.json").read_text())
    for to, written, section in (([], "test_hypotheses.txt", None),
                                 (["--to", "hi"], "test_hypotheses_en_hi.txt", "en-hi")):
        assert evaluate_main(["--run", str(both_run), "--beam", "2", "--json", *to]) == 0
        scores = json.loads(capsys.readouterr().out)
        expected = scores_of(test, section)["chrf"]
        assert scores["sentences"] == len(TEST) and scores["chrf"] == pytest.approx(expected,
                                                                                   abs=0.01)
        assert Path(scores["hypotheses"]).read_text(encoding="utf-8") == (
            both_run / written).read_text(encoding="utf-8")


@pytest.mark.parametrize("run, to, message", [
    ("both", "fr", "error: --to fr is not a language this tool translates into; use --to en "
     "(English) or --to hi (Hindi)"),
    ("hi-en", "hi", "error: this model translates Hindi to English only, so it cannot "
     "translate into Hindi; use a model trained with data.direction=both or en-hi"),
])
def test_a_to_the_model_cannot_honour_is_one_sentence_and_exit_2(both_run, tiny_run, capsys,
                                                                  run, to, message):
    folder = both_run if run == "both" else tiny_run
    assert translate_main(["--run", str(folder), "--to", to, "कल"]) == 2
    captured = capsys.readouterr()
    assert captured.err == message + "\n" and captured.out == ""
