"""CTranslate2 exports (skipped without ctranslate2): this project's converter makes a model
that decodes as ours does. On untrained tiny models of several shapes (pre- and post-norm,
shared and separate embeddings, deeper decoders, a supervised last layer, both directions
with tags): float32 greedy outputs are our tokens on the dev split, and the attention
CTranslate2 returns is our alignment layer's mean of heads within 1e-4. Given a trained run
(TRANSLATOR_TRAINED_RUN=runs/latest), the issue's quality bars are checked on it: greedy
≥ 99 % identical on the dev split, beam 5 ≥ 95 % without the n-gram ban, int8 chrF on the
test split within 0.5 of ours. The int8 bar also runs in every suite, on a run the suite
trains. The command line (export-ct2, translate --backend ct2) and the server's ct2 backend are
exercised too."""

import json
import os
import threading
from pathlib import Path
from urllib.parse import quote

import pytest
import torch

from translator import cli, plotting
from translator.config import Config
from translator.data import DataConfig, load_splits
from translator.explorer import read_explorer_data
from translator.metrics import corpus_scores
from translator.serve import make_server
from translator.translate import Translator

ctranslate2 = pytest.importorskip("ctranslate2", reason='pip install -e ".[ct2]"')

from translator.ct2 import alignment_layer, export  # noqa: E402
from translator.decoders import CT2Error  # noqa: E402

TRAINED_RUN = os.environ.get("TRANSLATOR_TRAINED_RUN")
needs_trained_run = pytest.mark.skipif(
    not TRAINED_RUN, reason="set TRANSLATOR_TRAINED_RUN to a trained run folder (e.g. "
    "runs/latest) to check the quality bars")
RAJESH = "राजेश ने कल शाम को अपनी बहन के लिए दिल्ली से मुंबई की ट्रेन टिकट बुक की"

# name: model settings, guided alignment's layer (None: off), direction
SHAPES = {
    "pre-norm, shared": (dict(norm="pre"), None, "hi-en"),
    "post-norm, separate embeddings, deeper decoder": (
        dict(norm="post", share_embeddings=False, layers=1, decoder_layers=3), None, "hi-en"),
    "supervised last layer": (dict(norm="pre", layers=2), -1, "hi-en"),
    "both directions": (dict(norm="pre"), None, "both"),
}


def make_run(untrained_run, path: Path, model: dict, supervised: int | None,
             direction: str) -> Path:
    """An untrained tiny run (random weights, 48 positions) of the given shape."""
    def supervise(config: Config) -> None:
        if supervised is not None:
            config.train.alignment_weight, config.train.alignment_layer = 0.5, supervised
    return untrained_run(path, model, direction, seed=1, adjust=supervise)


@pytest.fixture(scope="module")
def dev_sources() -> list[str]:
    return [pair.source for pair in load_splits(DataConfig()).splits["dev"]][:150]


@pytest.fixture(scope="module", params=list(SHAPES))
def exported(request, tmp_path_factory, one_thread, untrained_run):
    """(our Translator, the float32 export's) of one shape."""
    folder = tmp_path_factory.mktemp("ct2")
    run = make_run(untrained_run, folder / "run", *SHAPES[request.param])
    out = export(run, folder / "export", "float32")
    return Translator.from_run(run, device="cpu"), Translator.from_export(out, "cpu", threads=1)


def test_float32_greedy_outputs_and_attention_are_ours(exported, dev_sources):
    ours, theirs = exported
    assert theirs.decoder.alignment_layer == alignment_layer(ours.config)
    settings = dict(beam_size=1, no_doubled_words=False, no_repeat_ngram=3)
    expected = ours.translate(dev_sources, **settings)
    found = theirs.translate(dev_sources, **settings)
    assert [t.tokens for t in found] == [t.tokens for t in expected]
    assert [t.text for t in found] == [t.text for t in expected]
    layer = theirs.decoder.alignment_layer
    compared = 0
    for a, b in zip(expected, found):
        assert b.attention.shape[:2] == (1, 1) and b.source_pieces == a.source_pieces
        mean = a.attention[layer].mean(0)  # [T+1, S+1]
        if b.attention.shape[2] == mean.shape[0]:  # ended before its length limit
            assert torch.allclose(b.attention[0, 0], mean, atol=1e-4)
            compared += 1
    assert compared >= 10


def test_beam_search_agrees_without_the_ngram_ban(exported, dev_sources):
    """Without bans CTranslate2's beam stops as ours does, when beam_size hypotheses have ended
    (its α ≠ 0: with α = 0 it stops when its best beam ends). These untrained models often
    reach their length limit, where CTranslate2 cuts a hypothesis and ours ends it with an EOS
    and that EOS's log-probability, so they agree less often than a trained run (≥ 95 %,
    `test_a_trained_run_keeps_its_outputs_and_its_quality`)."""
    ours, theirs = exported
    settings = dict(beam_size=5, n_best=2, no_doubled_words=False, no_repeat_ngram=0)
    expected = ours.translate(dev_sources[:60], need_attention=False, **settings)
    found = theirs.translate(dev_sources[:60], need_attention=False, **settings)
    same = [a.tokens == b.tokens for a, b in zip(expected, found)]
    assert sum(same) / len(same) >= 0.65  # 70-87 % on these shapes (2026-12-02)
    for a, b in zip(expected, found):
        assert len(b.nbest) == len(a.nbest) and b.nbest[0].tokens == b.tokens


def test_an_export_serves_and_its_page_names_its_one_view(exported, dev_sources):
    ours, theirs = exported
    server = make_server(theirs, "127.0.0.1", 0, quiet=True)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              daemon=True)
    thread.start()
    try:
        import http.client

        host, port = server.server_address[:2]
        connection = http.client.HTTPConnection(host, port, timeout=180)
        body = json.dumps([{"src": s, "beam": 1} for s in dev_sources[:5]])
        connection.request("POST", "/translate", body=body.encode())
        answer = json.loads(connection.getresponse().read())
        expected = theirs.translate(dev_sources[:5], beam_size=1)
        assert [r["tgt"] for r in answer[0]] == [t.text for t in expected]
        connection.request("GET", "/?text=" + quote(RAJESH))
        page = connection.getresponse().read().decode("utf-8")
        assert "(CTranslate2)" in page and "form-action 'self'" in page
        connection.request("GET", "/health")
        assert json.loads(connection.getresponse().read())["backend"] == "ct2"
        connection.close()
    finally:
        server.shutdown()
        server.server_close()


# ---------------------------------------------------------------- the commands


def test_export_and_translate_from_the_command_line(tiny_run, tmp_path, capsys):
    out = tmp_path / "export"
    assert cli.main(["export-ct2", str(tiny_run), str(out), "--quantization", "float32"]) == 0
    assert capsys.readouterr().out.strip() == str(out)
    record = json.loads((out / "export.json").read_text(encoding="utf-8"))
    assert record["quantization"] == "float32" and (out / "model.bin").is_file()
    assert (out / "tokenizer" / "joint.model").is_file() and (out / "config.yaml").is_file()
    # an earlier export may be replaced, anything else is refused
    assert cli.main(["export-ct2", str(tiny_run), str(out), "--quantization", "int8"]) == 0
    capsys.readouterr()
    assert cli.main(["export-ct2", str(tiny_run), str(tiny_run)]) == 2
    assert "not an earlier export" in capsys.readouterr().err
    assert cli.main(["export-ct2", str(tiny_run), str(tmp_path / "x"), "--quantization",
                     "int4"]) == 2
    assert "is not one of int8, int8_float32, float32" in capsys.readouterr().err
    assert cli.main(["translate", "--backend", "ct2", "--run", str(out), "--beam", "1",
                     "--json", RAJESH]) == 0
    record = json.loads(capsys.readouterr().out)
    expected = Translator.from_export(out, "cpu", threads=1).translate([RAJESH], beam_size=1)
    assert record["source"] == RAJESH and record["text"] == expected[0].text
    assert cli.main(["translate", "--backend", "ct2", "--run", str(tiny_run), RAJESH]) == 2
    assert "is not a CTranslate2 export" in capsys.readouterr().err
    picture = tmp_path / "heads.png"
    assert cli.main(["translate", "--backend", "ct2", "--run", str(out), "--plot-heads",
                     str(picture), RAJESH]) == 2
    assert "only the PyTorch backend" in capsys.readouterr().err


def test_the_pictures_of_an_export_name_its_one_view(tiny_run, tmp_path, monkeypatch, capsys):
    """translate --backend ct2 --plot and --html title CTranslate2's one matrix with the layer
    it really is (the run's alignment layer), not as layer 0 of a one-layer model."""
    out = export(tiny_run, tmp_path / "export", "float32")
    layout = Translator.from_export(out, "cpu", threads=1).decoder.layout
    assert layout.layers == (alignment_layer(Translator.from_run(tiny_run, device="cpu").config),)
    expected = (f"layer {layout.layers[0]} (of 0–{layout.num_layers - 1}), mean of heads "
                f"0–{layout.num_heads - 1} (CTranslate2)")
    titles = []
    monkeypatch.setattr(plotting, "plot_heatmap",
                        lambda words, path, title="", **_: titles.append(title) or path)
    page = tmp_path / "page.html"
    assert cli.main(["translate", "--backend", "ct2", "--run", str(out), "--beam", "1",
                     "--plot", str(tmp_path / "a.png"), "--html", str(page), RAJESH]) == 0
    assert titles == [expected]
    data = read_explorer_data(page)
    assert data["titles"] == {"mean": [expected], "heads": [[expected]]}
    assert data["layers"] == data["heads"] == 1 and data["default_layer"] == 0


def test_a_missing_ctranslate2_is_one_sentence(monkeypatch, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_ctranslate2(name, *args, **kwargs):
        if name == "ctranslate2":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ctranslate2)
    with pytest.raises(CT2Error, match=r'pip install -e "\.\[ct2\]"'):
        Translator.from_export(tmp_path)


# ---------------------------------------------------------------- a run the suite trains


LEARNT_STEPS = 200


@pytest.fixture(scope="module")
def learnt_run(tmp_path_factory, one_thread, fitted_run_writer) -> Path:
    """conftest's fitted run, fitted LEARNT_STEPS Adam steps (not 40) so that it knows its 32
    pairs: a bar on babble would compare noise."""
    return fitted_run_writer(tmp_path_factory.mktemp("learnt") / "run", steps=LEARNT_STEPS)


@pytest.fixture(scope="module")
def fitted_exports(learnt_run, tmp_path_factory) -> dict[str, Translator]:
    folder = tmp_path_factory.mktemp("fitted-ct2")
    return {q: Translator.from_export(export(learnt_run, folder / q, q), "cpu", threads=1)
            for q in ("float32", "int8")}


def test_int8_keeps_the_quality_of_a_run_the_suite_trains(learnt_run, fitted_exports,
                                                          fitted_run_pairs, one_thread):
    """The int8 chrF bar in every run of the suite, on a run it trains and the 32 pairs that
    run has learnt (beam 5, the run's n-gram ban): within 0.5 chrF of ours, the issue's bar
    (measured 2026-12-03, one thread: ours 99.50, float32 99.50, int8 99.77; 40 steps, as
    conftest's fitted run, gave ours 28.96 and int8 29.92: babble, where one changed word
    moves chrF by more than the bar)."""
    ours = Translator.from_run(learnt_run, device="cpu")
    sources, references = zip(*fitted_run_pairs)
    beam = dict(beam_size=5, no_doubled_words=False)
    chrf = {name: corpus_scores([t.text for t in model.translate(
        list(sources), need_attention=False, **beam)], list(references), ["chrf"])["chrf"]
        for name, model in (("ours", ours), *fitted_exports.items())}
    assert chrf["ours"] > 90, chrf  # it has learnt them (else the bar compares noise)
    assert abs(chrf["int8"] - chrf["ours"]) <= 0.5, chrf


def test_float32_beam_search_is_ours_on_a_run_the_suite_trains(learnt_run, fitted_exports,
                                                               fitted_run_pairs, one_thread):
    """Without the n-gram ban a learnt run's beam 5 is ours on every sentence (the untrained
    shapes above agree on 65 % or more only: they run into their length limit)."""
    ours = Translator.from_run(learnt_run, device="cpu")
    sources = [hindi for hindi, _ in fitted_run_pairs]
    unbanned = dict(beam_size=5, n_best=2, no_doubled_words=False, no_repeat_ngram=0)
    expected = ours.translate(sources, need_attention=False, **unbanned)
    found = fitted_exports["float32"].translate(sources, need_attention=False, **unbanned)
    assert [t.tokens for t in found] == [t.tokens for t in expected]
    # the second bests nearly all: CTranslate2's beam and ours may end a sentence's search at
    # different steps, which can change a second best (CI on a clean clone, 2026-12-03: 1 of
    # 32 differed, its score 0.02 apart; locally 0 of 32; the bests matched in both)
    seconds = [(a.nbest[1].tokens, b.nbest[1].tokens) for a, b in zip(found, expected)]
    assert sum(a == b for a, b in seconds) >= 0.9 * len(seconds)


# ---------------------------------------------------------------- a trained run


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    folder = tmp_path_factory.mktemp("trained")
    ours = Translator.from_run(TRAINED_RUN, device="cpu")
    exports = {q: Translator.from_export(export(TRAINED_RUN, folder / q, q), "cpu",
                                           threads=1)
               for q in ("float32", "int8")}
    return ours, exports


@needs_trained_run
def test_a_trained_run_keeps_its_outputs_and_its_quality(trained, one_thread):
    ours, exports = trained
    data = DataConfig(source="embedded", direction=ours.direction)
    splits = load_splits(data).splits
    dev = [pair.source for pair in splits["dev"]]
    greedy = dict(beam_size=1, no_doubled_words=False)
    same = [a.tokens == b.tokens for a, b in zip(
        ours.translate(dev, need_attention=False, **greedy),
        exports["float32"].translate(dev, need_attention=False, **greedy))]
    assert sum(same) / len(same) >= 0.99
    unbanned = dict(beam_size=5, no_doubled_words=False, no_repeat_ngram=0)
    same = [a.tokens == b.tokens for a, b in zip(
        ours.translate(dev, need_attention=False, **unbanned),
        exports["float32"].translate(dev, need_attention=False, **unbanned))]
    assert sum(same) / len(same) >= 0.95
    beam = dict(beam_size=5, no_doubled_words=False)
    pairs = list(zip(ours.translate(dev, need_attention=False, **beam),
                     exports["float32"].translate(dev, need_attention=False, **beam)))
    same = [a.tokens == b.tokens for a, b in pairs]
    # with the run's n-gram ban, not the 95 %: CTranslate2 renormalises the
    # log-probabilities after a ban and ours keeps the model's (docs/serve.md)
    assert sum(same) / len(same) >= 0.7
    # the same hypothesis has our GNMT-normalised score (CTranslate2 renormalises the
    # log-probabilities after its bans, so it is never lower)
    scores = [(a.score, b.score) for (a, b), agree in zip(pairs, same) if agree]
    assert all(a - 1e-3 <= b for a, b in scores)
    assert sum(abs(a - b) < 1e-3 for a, b in scores) / len(scores) >= 0.5
    test = splits["test"]
    sources, references = [p.source for p in test], [p.target for p in test]
    chrf = {name: corpus_scores([t.text for t in model.translate(
        sources, need_attention=False, **beam)], references, ["chrf"])["chrf"]
        for name, model in (("ours", ours), ("int8", exports["int8"]))}
    assert abs(chrf["int8"] - chrf["ours"]) <= 0.5, chrf
