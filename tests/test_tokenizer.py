"""Tests for translator.tokenizer: SentencePiece training, round trips, saving and loading."""

import dataclasses
import json
import unicodedata

import pytest
import sentencepiece as spm

from translator.corpus import read_split
from translator.data import normalize
from translator.direction import TAGS
from translator.tokenizer import Tokenizer, TokenizerConfig, TokenizerError, capitalized

HINDI = [
    "मैं घर जा रहा हूँ।",
    "आज बारिश हो रही है।",
    "क्या आप चाय पिएँगे?",
    "मेरी बहन अगले महीने पुणे से घर आ रही है।",
    "डॉक्टर साहब, मेरे सिर में बहुत दर्द हो रहा है।",
    "कल का मैच बारिश की वजह से रद्द हो गया।",
    "मैंने दुकानदार को UPI से ₹340 भेज दिए।",
    "राजेश कक्षा में हमेशा सबसे आगे बैठता है।",
]
ENGLISH = [
    "I am going home.",
    "It is raining today.",
    "Would you like some tea?",
    "My sister is coming home from Pune next month.",
    "Doctor, I have a terrible headache.",
    "Yesterday's match was called off because of rain.",
    "I sent ₹340 to the shopkeeper through UPI.",
    "Rajesh always sits in the front row of the class.",
]
UNSEEN = [
    "पढ़ाई ज़रूरी है, ठीक? 😀",  # Hindi with nukta letters and an emoji
    "தமிழ் மொழி",  # Tamil
    "中文 and Ελληνικά, naïve café",  # Chinese, Greek, accents
    "ｆｕｌｌ ｗｉｄｔｈ ½ ﬁne …",  # characters NFKC would rewrite
    unicodedata.normalize("NFD", "ऩई  बात\u200b नहीं"),  # decomposed, zero-width space
]


def train(tmp_path, **settings):
    cfg = TokenizerConfig(**settings)
    return Tokenizer.train(cfg, HINDI * 3, ENGLISH * 3, tmp_path / "tokenizer")


@pytest.mark.parametrize("model_type", ["unigram", "bpe"])
@pytest.mark.parametrize("joint", [True, False])
def test_round_trip_including_unseen_characters(tmp_path, model_type, joint):
    tokenizer = train(tmp_path, model_type=model_type, joint=joint)
    assert tokenizer.joint is joint
    for text in HINDI + UNSEEN:
        ids = tokenizer.encode_source(text)
        assert tokenizer.unk_id not in ids
        assert tokenizer.decode_source(ids) == normalize(text)
    for text in ENGLISH + UNSEEN:
        ids = tokenizer.encode_target(text)
        assert tokenizer.unk_id not in ids
        assert tokenizer.decode_target(ids) == normalize(text)


@pytest.mark.parametrize("joint", [True, False])
def test_save_and_load_round_trip(tmp_path, joint):
    trained = train(tmp_path, joint=joint, model_type="bpe")
    expected_files = {"joint.model"} if joint else {"source.model", "target.model"}
    saved = {path.name for path in (tmp_path / "tokenizer").iterdir()}
    assert saved == expected_files | {"tokenizer.json"}

    loaded = Tokenizer.load(tmp_path / "tokenizer")
    assert loaded.cfg == trained.cfg
    assert (loaded.source_vocab_size, loaded.target_vocab_size) == (
        trained.source_vocab_size,
        trained.target_vocab_size,
    )
    for text in HINDI + UNSEEN:
        assert loaded.encode_source(text) == trained.encode_source(text)
        assert loaded.encode_target(text) == trained.encode_target(text)


def test_separate_models_learn_their_own_language(tmp_path):
    tokenizer = train(tmp_path, joint=False)
    hindi = "आज बारिश हो रही है।"
    source_pieces = tokenizer.source_pieces(tokenizer.encode_source(hindi))
    target_pieces = tokenizer.target_pieces(tokenizer.encode_target(hindi))
    assert not any(piece.startswith("<0x") for piece in source_pieces)
    assert any(piece.startswith("<0x") for piece in target_pieces)  # Hindi unseen there


def test_separate_models_may_have_vocabularies_of_their_own_size(tmp_path):
    """tokenizer.target_vocab_size (joint: false): the target's size, vocab_size the source's;
    saved and loaded with the tokenizer."""
    rows = read_split("train")[:3000]
    cfg = TokenizerConfig(vocab_size=1500, joint=False, target_vocab_size=600)
    tokenizer = Tokenizer.train(cfg, [h for h, _, _ in rows], [e for _, e, _ in rows], tmp_path)
    assert (tokenizer.source_vocab_size, tokenizer.target_vocab_size) == (1500, 600)
    loaded = Tokenizer.load(tmp_path)
    assert (loaded.source_vocab_size, loaded.target_vocab_size) == (1500, 600)
    with pytest.raises(ValueError, match="needs joint: false"):
        TokenizerConfig(target_vocab_size=600)


def test_joint_model_shares_one_vocabulary(tmp_path):
    tokenizer = train(tmp_path, joint=True)
    assert tokenizer.source_vocab_size == tokenizer.target_vocab_size
    assert tokenizer.encode_source("बारिश rain") == tokenizer.encode_target("बारिश rain")


def test_pieces_mark_word_starts_and_special_ids_are_fixed(tmp_path):
    tokenizer = train(tmp_path)
    assert (tokenizer.pad_id, tokenizer.unk_id, tokenizer.bos_id, tokenizer.eos_id) == (0, 1, 2, 3)
    pieces = tokenizer.target_pieces(tokenizer.encode_target("It is raining today."))
    assert "".join(pieces) == "▁It▁is▁raining▁today."
    assert sum(piece.startswith("▁") for piece in pieces) == 4


def test_decode_skips_pad_and_bos_and_stops_at_eos(tmp_path):
    tokenizer = train(tmp_path)
    ids = tokenizer.encode_target("It is raining today.")
    raw = [tokenizer.bos_id, *ids, tokenizer.eos_id, *ids, tokenizer.pad_id]
    assert tokenizer.decode_target(raw) == "It is raining today."


def test_training_is_quiet(tmp_path, capfd):
    train(tmp_path)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_small_corpus_with_large_vocab_size_does_not_crash(tmp_path):
    tokenizer = train(tmp_path, vocab_size=32000)
    assert 260 < tokenizer.source_vocab_size < 32000


def test_vocab_size_below_the_characters_needed(tmp_path):
    with pytest.raises(TokenizerError, match="vocab_size 100 is too small.*at least \\d+"):
        train(tmp_path, vocab_size=100)


def test_unknown_model_type(tmp_path):
    with pytest.raises(TokenizerError, match="Unknown tokenizer.model_type 'word'"):
        train(tmp_path, model_type="word")


def test_no_training_text(tmp_path):
    with pytest.raises(TokenizerError, match="no text"):
        Tokenizer.train(TokenizerConfig(), [], ["", " "], tmp_path)


def test_folder_without_tokenizer(tmp_path):
    with pytest.raises(TokenizerError, match="holds no tokenizer"):
        Tokenizer.load(tmp_path)


def test_corrupt_model_file(tmp_path):
    train(tmp_path)
    (tmp_path / "tokenizer" / "joint.model").write_bytes(b"not a model")
    with pytest.raises(TokenizerError, match="joint.model is not a valid SentencePiece model"):
        Tokenizer.load(tmp_path / "tokenizer")


def test_missing_model_file(tmp_path):
    train(tmp_path, joint=False)
    (tmp_path / "tokenizer" / "target.model").unlink()
    with pytest.raises(TokenizerError, match="target.model is missing"):
        Tokenizer.load(tmp_path / "tokenizer")


def test_corrupt_config_file(tmp_path):
    train(tmp_path)
    (tmp_path / "tokenizer" / "tokenizer.json").write_text("[1, 2")
    with pytest.raises(TokenizerError, match="not a valid tokenizer config"):
        Tokenizer.load(tmp_path / "tokenizer")


# ---------------------------------------------------------------- data.direction=both


@pytest.mark.parametrize("joint", [True, False])
def test_the_tags_of_both_directions_are_single_source_pieces(tmp_path, joint):
    tokenizer = Tokenizer.train(TokenizerConfig(joint=joint), HINDI * 3, ENGLISH * 3,
                                tmp_path / "tokenizer", tags=TAGS.values())
    assert set(tokenizer.tags) == {"en", "hi"}
    for language, tag in TAGS.items():
        ids = tokenizer.encode_source(f"{tag} {ENGLISH[0]}")
        assert ids == [tokenizer.tags[language], *tokenizer.encode_source(ENGLISH[0])]
        assert tokenizer.source_pieces(ids)[0] == tag
        # never split, wherever it stands
        assert tag in tokenizer.source_pieces(tokenizer.encode_source(f"घर {tag}घर"))
    assert Tokenizer.load(tmp_path / "tokenizer").tags == tokenizer.tags
    assert tokenizer.encode_sources([f"<2hi> {ENGLISH[1]}", HINDI[1]]) == [
        tokenizer.encode_source(f"<2hi> {ENGLISH[1]}"), tokenizer.encode_source(HINDI[1])]


# SentencePiece version -> {joint: fingerprint}; pyproject pins sentencepiece to these versions
# (another may cut other pieces: take its fingerprints with the code that made these, add them)
FINGERPRINTS = {"0.2.3": {True: "0b603959fd004b58", False: "b9683db98dd1612d"}}


@pytest.mark.parametrize("joint", [True, False])
def test_a_tokenizer_without_tags_is_the_one_made_before_tags_existed(tmp_path, joint):
    """hi-en and en-hi tokenizers stay byte for byte what they were (their fingerprints were
    taken before direction both existed), so their checkpoints and caches still fit."""
    assert spm.__version__ in FINGERPRINTS, (
        f"SentencePiece {spm.__version__} is outside the versions pyproject.toml pins "
        f"({', '.join(FINGERPRINTS)}): install one of them, or add its fingerprints here")
    tokenizer = train(tmp_path, joint=joint)  # truecase off, as before it existed
    assert tokenizer.fingerprint() == FINGERPRINTS[spm.__version__][joint]
    assert tokenizer.tags == {}
    assert "<2en>" not in tokenizer.source_pieces(tokenizer.encode_source("<2en> घर"))


def test_truecase_encodes_a_first_word_as_it_is_written_mid_sentence(tmp_path):
    rows = read_split("train")[:3000]
    hindi, english = [h for h, _, _ in rows], [e for _, e, _ in rows]
    cfg = TokenizerConfig(vocab_size=1500, joint=False, target_vocab_size=600, truecase=True)
    tokenizer = Tokenizer.train(cfg, hindi, english, tmp_path / "tokenizer")
    assert len(tokenizer.target_model.encode("Water")) > 1  # spelled out as written
    assert tokenizer.target_model.encode("water", out_type=str) == ["▁water"]
    # "water" has a piece of its own; "Delhi" and "The" are pieces as written (their small
    # forms are not shorter); "UPI" is spelled either way
    for text, first in [("Water, please", "▁water"), ("Delhi is big.", "▁Delhi"),
                        ("The train", "▁The"), ("UPI failed", "▁")]:
        ids = tokenizer.encode_target(text)
        assert tokenizer.target_pieces(ids)[0] == first, text
        assert tokenizer.decode_target(ids) == text
        assert "".join(tokenizer.shown_target_pieces(ids)).replace("▁", " ").strip() == text
    # the batch form, which encodes a corpus, alike
    assert tokenizer.encode_targets(["Water, please", "Delhi is big."]) == [
        tokenizer.encode_target("Water, please"), tokenizer.encode_target("Delhi is big.")]
    # a tokenizer without it (the default) encodes the text as written and decodes it so
    plain = Tokenizer.train(dataclasses.replace(cfg, truecase=False), hindi, english,
                            tmp_path / "plain")
    # the capital stays in the pieces (a model without truecasing learns "Water" and "water")
    assert "".join(plain.target_pieces(plain.encode_target("Water, please"))).startswith("▁W")
    assert plain.decode_target(plain.encode_target("water")) == "water"
    assert plain.fingerprint() != tokenizer.fingerprint()


def test_a_tokenizer_saved_before_truecase_loads_without_it(tmp_path):
    tokenizer = train(tmp_path, joint=False, truecase=True)
    config = tmp_path / "tokenizer" / "tokenizer.json"
    settings = json.loads(config.read_text())
    assert settings["truecase"] is True
    del settings["truecase"]
    config.write_text(json.dumps(settings))
    loaded = Tokenizer.load(tmp_path / "tokenizer")
    assert loaded.cfg.truecase is False
    assert loaded.fingerprint() != tokenizer.fingerprint()  # a checkpoint tells them apart


def test_capitalized_leaves_scripts_without_case_alone():
    assert capitalized("yes") == "Yes" and capitalized("▁yes") == "▁Yes"
    assert capitalized("नमस्ते") == "नमस्ते" and capitalized("") == ""
