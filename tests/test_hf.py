"""Hugging Face transformers exports (skipped without transformers): what
``AutoModelForSeq2SeqLM`` and ``AutoTokenizer`` load from an export is our model. On untrained
tiny models of several shapes (pre-norm → Pegasus, post-norm → Marian; one embedding, two, two
stacked in Pegasus's one table; joint and separate vocabularies; both directions with tags):
the tokenizer gives our source ids, teacher-forced logits are ours within 1e-4, and greedy
``generate`` writes our tokens and our text. Without the permutation of the model axis the
logits are not ours (the check can fail). The command line and its one-sentence errors too."""

import builtins
import json
import warnings
from pathlib import Path

import pytest
import torch

from translator import cli
from translator.config import Config, TokenizerConfig
from translator.data import DataConfig, load_splits
from translator.direction import TAGS
from translator.tokenizer import BOS_ID, EOS_ID, capitalized
from translator.translate import Translator

transformers = pytest.importorskip("transformers", reason='pip install -e ".[hf]"')

from translator import hf  # noqa: E402

MAX_POSITIONS = 48
# name: model settings, direction, joint vocabulary, the EOS bias that makes this random model
# end some outputs itself and run others to the length limit
SHAPES = {
    "pre-norm, shared (Pegasus)": (dict(norm="pre"), "hi-en", True, 0.8),
    "pre-norm, two vocabularies, both directions (Pegasus, stacked)": (
        dict(norm="pre", share_embeddings=False), "both", False, 2.0),
    "pre-norm, joint vocabulary, two embeddings (Pegasus, stacked)": (
        dict(norm="pre", share_embeddings=False), "hi-en", True, 1.5),
    "post-norm, two vocabularies, deeper decoder (Marian)": (
        dict(norm="post", share_embeddings=False, decoder_layers=2), "hi-en", False, 1.0),
    "post-norm, shared, both directions (Marian)": (dict(norm="post"), "both", True, 0.8),
}


def make_run(untrained_run, path: Path, model: dict, direction: str, joint: bool,
             eos_bias: float = 0.0) -> Path:
    """An untrained tiny run (random weights, 48 positions) of the given shape."""
    def search(config: Config) -> None:
        config.search.beam_size, config.search.no_repeat_ngram = 3, 2

    # the target vocabulary a size of its own, so that a mix-up of the two shows
    sizes = TokenizerConfig(vocab_size=400, joint=joint, target_vocab_size=None if joint else 350)
    return untrained_run(path, dict(max_positions=MAX_POSITIONS) | model, direction, sizes,
                         seed=2, eos_bias=eos_bias, adjust=search)


@pytest.fixture(scope="module")
def pairs() -> list[tuple[str, str]]:
    return [(pair.source, pair.target) for pair in load_splits(DataConfig()).splits["dev"]]


@pytest.fixture(scope="module", params=list(SHAPES))
def exported(request, tmp_path_factory, one_thread, untrained_run):
    """(our Translator, their tokenizer, their model, the offset of source ids, direction)."""
    model, direction, joint, eos_bias = SHAPES[request.param]
    folder = tmp_path_factory.mktemp("hf")
    run = make_run(untrained_run, folder / "run", model, direction, joint, eos_bias)
    out = hf.export(run, folder / "export")
    ours = Translator.from_run(run, device="cpu")
    offset = ours.tokenizer.target_vocab_size if hf.stacked(ours.config.model) else 0
    with warnings.catch_warnings():  # theirs recommends sacremoses, which it does not use here
        warnings.filterwarnings("ignore", message=".*sacremoses")
        tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    return ours, tokenizer, theirs, offset, direction


def sources(ours: Translator, pairs: list, direction: str, count: int = 8) -> list[str]:
    """Short dev sources (a tag first for a model of both directions, each way in turn)."""
    texts = []
    for i, (hindi, english) in enumerate(pairs):
        text = hindi if direction != "both" else (
            f"{TAGS['en']} {hindi}" if i % 2 == 0 else f"{TAGS['hi']} {english}")
        if len(ours.tokenizer.encode_source(text)) <= 24:
            texts.append(text)
    return texts[:count]


def test_the_tokenizer_gives_our_source_ids(exported, pairs):
    ours, tokenizer, _, offset, direction = exported
    texts = sources(ours, pairs, direction, 20)
    expected = [[offset + i for i in ours.tokenizer.encode_source(text) + [EOS_ID]]
                for text in texts]
    assert tokenizer(texts).input_ids == expected
    if direction == "both":  # the tag is one id of its own, as ours
        assert {row[0] - offset for row in expected} == set(ours.tokenizer.tags.values())


def test_teacher_forced_logits_are_ours(exported, pairs):
    ours, _, theirs, offset, direction = exported
    target_size = ours.tokenizer.target_vocab_size
    worst = 0.0
    for text, (_, english) in zip(sources(ours, pairs, direction, 5), pairs):
        source = torch.tensor([ours.tokenizer.encode_source(text) + [EOS_ID]])
        target = torch.tensor([[BOS_ID, *ours.tokenizer.encode_target(english)[:30]]])
        with torch.no_grad():
            expected = ours.model(source, target)
            found = theirs(input_ids=source + offset, attention_mask=torch.ones_like(source),
                           decoder_input_ids=target).logits
        assert found.shape[-1] == target_size + (ours.tokenizer.source_vocab_size if offset
                                                 else 0)
        worst = max(worst, (found[..., :target_size] - expected).abs().max().item())
        if offset:  # the stacked source rows are never a next token
            assert torch.isneginf(found[..., target_size:]).all()
    assert worst < 1e-4


def test_greedy_generate_writes_our_tokens_and_text(exported, pairs):
    ours, tokenizer, theirs, _, direction = exported
    texts = sources(ours, pairs, direction)
    # our length limit as generate's: every output may run to the model's last position
    expected = ours.translate(texts, need_attention=False, beam_size=1, no_doubled_words=False,
                              no_repeat_ngram=2, max_length_extra=MAX_POSITIONS)
    batch = tokenizer(texts, return_tensors="pt", padding=True)  # padded: masks matter
    with torch.no_grad():
        found = theirs.generate(**batch, num_beams=1)  # the n-gram ban from the export
    rows = [row.tolist()[1:] for row in found]  # after <s>: tokens, EOS (forced at the end)
    tokens = [row[: row.index(EOS_ID)] for row in rows]
    assert tokens == [t.tokens for t in expected]
    lengths = {len(t.tokens) for t in expected}
    # outputs the model ended and outputs ended by the EOS forced at the last position
    assert min(lengths) < MAX_POSITIONS - 1 == max(lengths)
    texts = tokenizer.batch_decode(found, skip_special_tokens=True)
    if ours.tokenizer.cfg.truecase:  # the first letter's capital is ours to give back
        texts = [capitalized(text) for text in texts]
    assert texts == [t.text for t in expected]


def test_the_generation_config_holds_the_runs_search(exported):
    ours, _, theirs, _, _ = exported
    settings = theirs.generation_config
    assert (settings.num_beams, settings.no_repeat_ngram_size) == (3, 2)
    assert (settings.decoder_start_token_id, settings.eos_token_id) == (BOS_ID, EOS_ID)
    assert settings.max_new_tokens == ours.config.model.max_positions
    expected = "PegasusForConditionalGeneration" if ours.config.model.norm == "pre" \
        else "MarianMTModel"
    assert type(theirs).__name__ == expected


def _logit_difference(run: Path, out: Path) -> float:
    """The largest difference of logits between our model and the export, with the export's
    position tables recomputed by transformers (as it does when Marian is saved again)."""
    ours = Translator.from_run(run, device="cpu")
    theirs = transformers.AutoModelForSeq2SeqLM.from_pretrained(out).eval()
    with torch.no_grad():
        for stack in (theirs.model.encoder, theirs.model.decoder):
            stack.embed_positions.weight.copy_(stack.embed_positions.create_weight())
        source = torch.tensor([ours.tokenizer.encode_source("मुझे ट्रेन पकड़नी है।") + [EOS_ID]])
        target = torch.tensor([[BOS_ID, *ours.tokenizer.encode_target("I must catch a train.")]])
        found = theirs(input_ids=source, decoder_input_ids=target).logits
        return (found - ours.model(source, target)).abs().max().item()


def test_their_own_position_table_is_ours_in_their_order(monkeypatch, tiny_run, tmp_path):
    """The export carries our table, but transformers may make its own (Marian leaves it out
    of the files it saves); with the axis in sin|cos order, that one fits the weights too. The
    check can fail: without the reordering, the model is another."""
    assert _logit_difference(tiny_run, hf.export(tiny_run, tmp_path / "ordered")) < 1e-4
    monkeypatch.setattr(hf, "sin_cos_order", lambda d_model: torch.arange(d_model))
    assert _logit_difference(tiny_run, hf.export(tiny_run, tmp_path / "interleaved")) > 1e-2


# ---------------------------------------------------------------- the command


def test_export_hf_from_the_command_line(tiny_run, tmp_path, capsys):
    out = tmp_path / "export"
    assert cli.main(["export-hf", str(tiny_run), str(out)]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    record = json.loads((out / "export.json").read_text(encoding="utf-8"))
    assert record["format"] == "transformers" and not record["stacked_vocabulary"]
    for name in ("config.json", "model.safetensors", "generation_config.json", "source.spm",
                 "target.spm", "vocab.json", "tokenizer_config.json"):
        assert (out / name).is_file(), name
    assert cli.main(["export-hf", str(tiny_run), str(out)]) == 0  # an earlier export: replaced
    capsys.readouterr()
    assert cli.main(["export-hf", str(tiny_run), str(tiny_run)]) == 2
    assert "not an earlier export" in capsys.readouterr().err
    assert cli.main(["export-hf", str(tmp_path / "no-run"), str(tmp_path / "x")]) == 2
    error = capsys.readouterr().err
    assert error.startswith("error: ") and error.count("\n") == 1 and "no-run" in error
    assert not (tmp_path / "x").exists()


def test_a_failed_export_leaves_nothing_behind(monkeypatch, tiny_run, tmp_path):
    def broken(*args, **kwargs):
        raise OSError(28, "No space left on device", "vocab.json")

    monkeypatch.setattr(hf, "hf_tokenizer", broken)
    with pytest.raises(OSError):
        hf.export(tiny_run, tmp_path / "export")
    assert list(tmp_path.iterdir()) == []  # neither the export nor its temporary folder


def test_a_missing_transformers_is_one_sentence(monkeypatch, tiny_run, tmp_path, capsys):
    real_import = builtins.__import__

    def no_transformers(name, *args, **kwargs):
        if name == "transformers" or name.startswith("transformers."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_transformers)
    assert cli.main(["export-hf", str(tiny_run), str(tmp_path / "export")]) == 2
    assert capsys.readouterr().err == (
        'error: export-hf needs the transformers package: pip install -e ".[hf]" (or pip '
        'install "transformers>=4.40")\n')
    assert not (tmp_path / "export").exists()
