"""The Translator, the one decoding path (`translate`) and the translate/evaluate commands,
on a run folder built here: a small tokenizer and a model fitted for a few seconds, saved the
way training saves them (training one would take longer than all these tests)."""

import dataclasses
import io
import json
import shutil
from pathlib import Path

import pytest
import sacrebleu
import torch

from translator.alignment import SentenceAttention, merge_to_words, resolve_layer, select_attention
from translator.checkpoint import load_checkpoint
from translator.cli import evaluate_main, translate_main
from translator.corpus import SHOWCASE, read_split
from translator.drawing import all_heads_as_words
from translator.errors import TranslatorError
from translator.explorer import read_explorer_data
from translator.run_dir import RunDirError
from translator.tokenizer import Tokenizer, piece_words
from translator.translate import TranslateError, Translator, max_source_pieces, translate

ROOT = Path(__file__).resolve().parent.parent
MAX_POSITIONS = 64  # the fitted run's (conftest.FITTED_POSITIONS)
RAJESH = SHOWCASE[0][0]
HINDI = [RAJESH, "मेरा नाम राम है।", "UPI भुगतान विफल हो गया", "कल बारिश होगी",
         "आज बैंक बंद है।", "मैं घर जा रहा हूँ"]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def run_dir(fitted_run) -> Path:
    return fitted_run


@pytest.fixture(scope="module")
def translator(run_dir) -> Translator:
    return Translator.from_run(run_dir, device="cpu")


def one_sentence(error: Exception) -> str:
    message = str(error)
    assert "\n" not in message and "Traceback" not in message
    return message


# ---------------------------------------------------------------- loading


def test_from_run_loads_model_tokenizer_and_config(translator, run_dir):
    assert translator.direction == "hi-en"
    assert translator.model.config.max_positions == MAX_POSITIONS
    assert not translator.model.training
    assert translator.tokenizer.fingerprint() == load_checkpoint(
        run_dir / "checkpoints" / "best.pt")["tokenizer"]
    assert translator.to("cpu") is translator and translator.device.type == "cpu"


def test_best_falls_back_to_last(tmp_path, run_dir, translator):
    copy = shutil.copytree(run_dir, tmp_path / "run")
    (copy / "checkpoints" / "best.pt").rename(copy / "checkpoints" / "last.pt")
    from_last = Translator.from_run(copy)
    for name, weight in translator.model.state_dict().items():
        assert torch.equal(from_last.model.state_dict()[name], weight), name
    assert from_last.translate(HINDI, beam_size=2) == translator.translate(HINDI, beam_size=2)


def test_unusable_run_folders_get_one_clear_sentence(tmp_path, run_dir):
    with pytest.raises(RunDirError, match="does not exist"):
        Translator.from_run(tmp_path / "nowhere")
    with pytest.raises(RunDirError, match="not a run folder"):
        Translator.from_run(tmp_path)
    copy = shutil.copytree(run_dir, tmp_path / "run")
    (copy / "checkpoints" / "best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(TranslatorError, match="corrupt") as error:
        Translator.from_run(copy)
    one_sentence(error.value)
    shutil.rmtree(copy / "checkpoints")
    with pytest.raises(RunDirError, match="no checkpoint") as error:
        Translator.from_run(copy)
    one_sentence(error.value)


def test_a_checkpoint_with_another_tokenizer_is_refused(tmp_path, run_dir, translator):
    copy = shutil.copytree(run_dir, tmp_path / "run")
    shutil.rmtree(copy / "tokenizer")
    other = read_split("train")[600:1200]
    Tokenizer.train(translator.tokenizer.cfg, [hi for hi, _, _ in other],
                    [en for _, en, _ in other], copy / "tokenizer")
    with pytest.raises(TranslateError, match="another tokenizer") as error:
        Translator.from_run(copy)
    one_sentence(error.value)


# ---------------------------------------------------------------- translating


def test_results_carry_text_tokens_pieces_and_attention(translator):
    for result in translator.translate(HINDI, beam_size=3):
        assert result.text == translator.tokenizer.decode_target(result.tokens)
        assert result.target_pieces == translator.tokenizer.target_pieces(result.tokens)
        assert result.source_pieces == translator.tokenizer.source_pieces(
            translator.tokenizer.encode_source(result.source))
        layers, heads, rows, columns = result.attention.shape
        assert (layers, heads) == (2, 8)
        assert (rows, columns) == (len(result.target_pieces) + 1, len(result.source_pieces) + 1)
        assert torch.allclose(result.attention.sum(-1), torch.ones(layers, heads, rows),
                              atol=1e-5)
        assert result.warnings == [] and result.nbest == []
        # a model of one direction reads no tag and reports no target language
        assert result.target_language is None and "target_language" not in result.to_dict()
    assert translator.tokenizer.tags == {}
    assert max_source_pieces(translator.model, translator.tokenizer) == MAX_POSITIONS - 1


def test_beam_attention_equals_teacher_forced_rescoring(translator):
    tok = translator.tokenizer
    for result in translator.translate(HINDI, beam_size=4, n_best=3):
        for candidate in result.nbest:
            source = torch.tensor([tok.encode_source(result.source) + [tok.eos_id]])
            with torch.no_grad():
                memory, mask = translator.model.encode(source)
                out = translator.model.decode(torch.tensor([[tok.bos_id, *candidate.tokens]]),
                                              memory, mask, need_weights=True)
            assert torch.allclose(candidate.attention, torch.cat(out.cross_attention),
                                  atol=1e-5)


def test_batched_and_one_by_one_translation_agree(translator):
    batched = translator.translate(HINDI, beam_size=3, n_best=2, batch_size=4)
    for text, together in zip(HINDI, batched):
        alone = translator.translate([text], beam_size=3, n_best=2, batch_size=1)[0]
        assert dataclasses.replace(alone, score=together.score) == together  # text, tokens, ...
        assert alone.score == pytest.approx(together.score, abs=1e-4)
        assert [t.tokens for t in alone.nbest] == [t.tokens for t in together.nbest]
        assert torch.allclose(alone.attention, together.attention, atol=1e-5)


def test_nbest_lists_are_sorted_and_start_with_the_result(translator):
    for result in translator.translate(HINDI, beam_size=4, n_best=4):
        scores = [t.score for t in result.nbest]
        assert len(scores) == 4 and scores == sorted(scores, reverse=True)
        assert result.nbest[0] == result and result.nbest[0].nbest == []


def test_empty_inputs_give_empty_translations(translator):
    results = translator.translate(["", "   ", RAJESH, "\u200b"], beam_size=2)
    for i in (0, 1, 3):
        assert results[i].text == "" and results[i].tokens == [] and results[i].attention is None
    assert results[2].tokens
    assert translator.translate([]) == []


def test_long_input_is_split_with_a_warning_and_does_not_crash(translator):
    long_text = " ".join([RAJESH] * 6)  # far more pieces than MAX_POSITIONS
    ids = translator.tokenizer.encode_source(long_text)
    assert len(ids) > MAX_POSITIONS
    for beam in (1, 3):
        result = translator.translate([long_text, "कल"], beam_size=beam)[0]
        assert any("split into" in w for w in result.warnings)
        assert result.text and result.source_pieces == translator.tokenizer.source_pieces(ids)
        rows, columns = len(result.target_pieces) + 1, len(result.source_pieces) + 1
        assert result.attention.shape[2:] == (rows, columns)
        assert torch.allclose(result.attention.sum(-1), torch.ones(2, 8, rows), atol=1e-5)


def test_text_in_the_wrong_script_gets_a_warning_and_a_translation(translator):
    texts = ["The train is late.", "UPI भुगतान विफल हो गया"]
    english, mixed = translator.translate(texts, beam_size=2)
    assert len(english.warnings) == 1 and "Devanagari" in english.warnings[0]
    assert mixed.warnings == []  # Latin words inside Hindi are normal
    # the warning changes nothing else: the same translation as without a direction to check
    search = dataclasses.replace(translator.search, beam_size=2)
    unchecked = translate(translator.model, translator.tokenizer, texts, search)
    assert [t.warnings for t in unchecked] == [[], []]
    assert dataclasses.replace(english, warnings=[]) == unchecked[0] and mixed == unchecked[1]


def test_unknown_characters_go_through_byte_fallback(translator):
    result = translator.translate(["राजेश 🚆 龍"], beam_size=2)[0]
    assert any(piece.startswith("<0x") for piece in result.source_pieces)
    assert translator.tokenizer.unk_id not in translator.tokenizer.encode_source(result.source)


def test_bad_requests_are_refused(translator):
    with pytest.raises(TranslateError, match="n-best"):
        translator.translate(["कल"], beam_size=2, n_best=3)
    with pytest.raises(TypeError):
        translator.translate("कल")


# ---------------------------------------------------------------- the commands


def test_translate_command_prints_one_line_per_input_line(run_dir, monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(f"{RAJESH}\n\nकल बारिश होगी\n"))
    assert translate_main(["--run", str(run_dir), "--beam", "2"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""
    expected = Translator.from_run(run_dir).translate([RAJESH], beam_size=2)[0].text
    assert lines[0] == expected


def test_translate_command_json_and_nbest(run_dir, tmp_path, capsys):
    source = tmp_path / "in.hi"
    source.write_text("कल बारिश होगी\n\nThe train is late.\n", encoding="utf-8")
    assert translate_main(["--run", str(run_dir), "--file", str(source), "--json",
                                  "--beam", "3", "--n-best", "2"]) == 0
    captured = capsys.readouterr()
    records = [json.loads(line) for line in captured.out.splitlines()]
    assert [r["source"] for r in records] == ["कल बारिश होगी", "", "The train is late."]
    assert len(records[0]["nbest"]) == 2 and records[1]["text"] == ""
    assert "warning: input 3:" in captured.err
    assert translate_main(["--run", str(run_dir), "--beam", "3", "--n-best", "2",
                                  "कल बारिश होगी"]) == 0
    assert capsys.readouterr().out.count("\t") == 1


def test_translate_command_errors_are_one_line_and_exit_2(tmp_path, capsys):
    assert translate_main(["--run", str(tmp_path / "none"), "कल"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_evaluate_command_scores_equal_sacrebleus(run_dir, tmp_path, capsys):
    pairs = read_split("test")[:12]
    src, ref, out = tmp_path / "test.hi", tmp_path / "test.en", tmp_path / "hyp.en"
    src.write_text("".join(hi + "\n" for hi, _, _ in pairs), encoding="utf-8")
    ref.write_text("".join(en + "\n" for _, en, _ in pairs), encoding="utf-8")
    assert evaluate_main(["--run", str(run_dir), "--src", str(src), "--ref", str(ref),
                                 "--out", str(out), "--beam", "2", "--json"]) == 0
    scores = json.loads(capsys.readouterr().out)
    hypotheses = out.read_text(encoding="utf-8").splitlines()
    references = [en for _, en, _ in pairs]
    assert len(hypotheses) == 12
    assert scores["bleu"] == sacrebleu.corpus_bleu(hypotheses, [references]).score
    assert scores["chrf"] == sacrebleu.corpus_chrf(hypotheses, [references]).score
    assert scores["chrf++"] == sacrebleu.corpus_chrf(hypotheses, [references],
                                                     word_order=2).score
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed")
    assert "nw:2" in scores["chrf++_signature"]


def test_evaluate_command_refuses_misaligned_files(run_dir, tmp_path, capsys):
    src, ref = tmp_path / "a.hi", tmp_path / "a.en"
    src.write_text("कल\nआज\n", encoding="utf-8")
    ref.write_text("yesterday\n", encoding="utf-8")
    assert evaluate_main(["--run", str(run_dir), "--src", str(src), "--ref",
                                 str(ref)]) == 2
    assert "line-aligned" in capsys.readouterr().err


def test_translate_command_draws_the_chosen_beams_heatmaps(run_dir, tmp_path, capsys):
    heatmap, heads = tmp_path / "heatmap.png", tmp_path / "heads.png"
    assert translate_main(["--run", str(run_dir), "--beam", "3", "--plot", str(heatmap),
                                  "--plot-heads", str(heads), "--layer", "-1", "कल"]) == 0
    for path in (heatmap, heads):
        assert path.read_bytes()[:4] == b"\x89PNG"
    assert translate_main(["--run", str(run_dir), "--layer", "7", "--plot",
                                  str(heatmap), "कल"]) == 2
    assert "layer 7 does not exist" in capsys.readouterr().err


def test_translate_command_writes_explorer_pages_of_the_plotted_numbers(run_dir, tmp_path,
                                                                        capsys):
    """--html: one page per non-empty input (numbered for several), holding the numbers
    --plot draws (the chosen beam's attention merged to words) and every layer and head."""
    texts = ["कल बारिश होगी", "", "मेरा नाम राम है।"]
    assert translate_main(["--run", str(run_dir), "--beam", "3", "--layer", "0", "--html",
                           str(tmp_path / "page.html"), *texts]) == 0
    err = capsys.readouterr().err
    pages = [tmp_path / "page-1.html", tmp_path / "page-2.html"]
    assert all(f"wrote {page}" in err for page in pages)
    assert not (tmp_path / "page-3.html").exists()
    results = Translator.from_run(run_dir).translate([texts[0], texts[2]], beam_size=3)
    for page, result in zip(pages, results):
        data = read_explorer_data(page)
        layers = result.attention.size(0)
        plotted = merge_to_words(select_attention(result.attention, 0), result.source_pieces,
                                 result.target_pieces).to_dict()
        assert data["source"] == result.source and data["translation"] == result.text
        assert data["default_layer"] == resolve_layer(0, layers) == 0
        assert data["source_words"] == plotted["source_words"]
        assert data["target_words"] == plotted["target_words"]
        assert data["weights"]["mean"][0] == plotted["weights"]
        assert data["weights"]["heads"] == all_heads_as_words(SentenceAttention.of(result))
        assert "hi → en" in data["title"] and "beam 3" in data["title"]
    assert translate_main(["--run", str(run_dir), "--html", str(tmp_path / "page.png"),
                           "कल"]) == 2
    assert "end it in .html or .htm" in capsys.readouterr().err


# ---------------------------------------------------------------- what the model weighed, a prefix


def teacher_forced_log_probs(translator, text: str, tokens: list[int]) -> list[float]:
    """The model's log-probability of each of ``tokens`` and the EOS, reading ``text``."""
    tok, model = translator.tokenizer, translator.model
    source = torch.tensor([tok.encode_source(text) + [tok.eos_id]])
    with torch.no_grad():
        memory, mask = model.encode(source)
        logits = model.decode(torch.tensor([[tok.bos_id, *tokens]]), memory, mask).logits[0]
    chosen = torch.tensor([*tokens, tok.eos_id])[:, None]
    return logits.log_softmax(-1).gather(1, chosen).squeeze(1).tolist()


@pytest.mark.parametrize("beam", [1, 4])
def test_translations_carry_what_the_model_weighed_per_piece_and_per_word(translator, beam):
    for t in translator.translate(HINDI, beam_size=beam, alternatives=5):
        steps, words = t.steps(), t.words()
        assert [s["piece"] for s in steps] == [*t.target_pieces, "</s>"]
        assert [s["log_prob"] for s in steps] == pytest.approx(
            teacher_forced_log_probs(translator, t.source, t.tokens), abs=1e-5)
        assert [w["word"] for w in words] == piece_words(t.target_pieces)[0]  # the rows
        assert sum(w["log_prob"] for w in words) + steps[-1]["log_prob"] == pytest.approx(
            sum(t.token_log_probs), abs=1e-4)
        for step in steps:
            assert len(step["alternatives"]) == 5
            assert sum(p for _, p in step["alternatives"]) <= 1 + 1e-6
        firsts = [steps[i] for i, w in enumerate(piece_words(t.target_pieces)[1])
                  if i == 0 or w != piece_words(t.target_pieces)[1][i - 1]]
        assert [w["alternatives"] for w in words] == [s["alternatives"] for s in firsts]
        if beam == 1:  # greedy wrote each step's most probable piece
            assert [s["alternatives"][0][0] for s in steps] == [s["piece"] for s in steps]
        record = t.to_dict()
        assert record["steps"] == steps and record["words"] == words


def test_without_alternatives_the_json_is_as_before(translator):
    t = translator.translate([RAJESH])[0]
    assert t.token_log_probs is None and t.steps() == [] and t.words() == []
    assert set(t.to_dict()) == {"source", "text", "score", "tokens", "warnings"}


@pytest.mark.parametrize("beam", [1, 4])
def test_a_prefix_starts_the_translation_and_is_scored_by_the_model(translator, beam):
    prefix = "Yesterday evening"
    pieces = translator.tokenizer.target_pieces(translator.tokenizer.encode_target(prefix))
    found = translator.translate(HINDI, beam_size=beam, prefix=prefix, alternatives=2,
                                 length_penalty=0.0)
    for t in found:
        assert t.text.startswith(prefix) and t.target_pieces[: len(pieces)] == pieces
        assert t.prefix_pieces == len(pieces) and t.to_dict()["prefix_pieces"] == len(pieces)
        expected = teacher_forced_log_probs(translator, t.source, t.tokens)
        assert t.token_log_probs == pytest.approx(expected, abs=1e-5)
        assert t.score == pytest.approx(sum(expected), abs=1e-4)  # α = 0: the plain sum


@pytest.mark.parametrize("beam", [1, 4])
def test_an_empty_prefix_changes_nothing(translator, beam):
    plain = translator.translate(HINDI, beam_size=beam)
    for prefix in ("", [""] * len(HINDI)):
        empty = translator.translate(HINDI, beam_size=beam, prefix=prefix)
        assert [(t.text, t.score) for t in empty] == [(t.text, t.score) for t in plain]
        assert all(t.prefix_pieces == 0 for t in empty)


def test_prefixes_one_per_text_and_bad_prefixes(translator):
    found = translator.translate(HINDI[:2], prefix=["Rajesh", "My"], need_attention=False)
    assert found[0].text.startswith("Rajesh") and found[1].text.startswith("My")
    with pytest.raises(TranslateError, match="2 prefixes for 3 texts"):
        translator.translate(HINDI[:3], prefix=["a", "b"])
    with pytest.raises(TranslateError, match="more than the model can write"):
        translator.translate([RAJESH], prefix="the " * MAX_POSITIONS)


def test_a_long_input_split_into_parts_starts_with_the_prefix(translator):
    long_text = " ".join([RAJESH] * 6)
    t = translator.translate([long_text], prefix="Yesterday", alternatives=3,
                             need_attention=False)[0]
    assert t.text.startswith("Yesterday") and len(t.token_log_probs) == len(t.tokens) + 1


def test_translate_command_prefix_and_alternatives(run_dir, capsys):
    assert translate_main(["--run", str(run_dir), "--json", "--prefix", "Yesterday evening",
                           "--alternatives", "3", "--beam", "1", RAJESH]) == 0
    record = json.loads(capsys.readouterr().out)
    assert record["text"].startswith("Yesterday evening")
    assert len(record["steps"]) == len(record["tokens"]) + 1
    assert all(len(step["alternatives"]) == 3 for step in record["steps"])
    assert translate_main(["--run", str(run_dir), "--alternatives", "-1", RAJESH]) == 2
    assert capsys.readouterr().err.startswith("error: --alternatives must be 0 (off) or more")


def test_ctranslate2_refuses_a_prefix_and_alternatives_in_one_sentence():
    from translator.config import SearchConfig
    from translator.decoders import CT2Error, refuse_steps

    refuse_steps(SearchConfig(), [[], []])  # nothing asked: nothing refused
    with pytest.raises(CT2Error, match="prefix .* PyTorch backend"):
        refuse_steps(SearchConfig(), [[5], []])
    with pytest.raises(CT2Error, match="alternatives .* PyTorch backend"):
        refuse_steps(SearchConfig(alternatives=5), None)


def test_translate_command_plots_the_attribution_and_pages_carry_it(run_dir, tmp_path, capsys):
    picture, page = tmp_path / "attribution.png", tmp_path / "page.html"
    assert translate_main(["--run", str(run_dir), "--plot", str(picture), "--attribution",
                           "--html", str(page), "--alternatives", "4", RAJESH]) == 0
    assert picture.stat().st_size > 1000
    data = read_explorer_data(page)
    assert len(data["attribution"]["weights"]) == len(data["target_words"])
    assert [w["word"] for w in data["weighed"]] == data["target_words"]
    assert all(len(w["alternatives"]) == 4 for w in data["weighed"])
