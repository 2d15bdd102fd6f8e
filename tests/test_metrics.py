"""corpus_scores: sacrebleu's numbers and signatures, computed in one place."""

import pytest
import sacrebleu

from translator.metrics import corpus_scores

HYPOTHESES = ["The train is late today.", "I am going home", "It rains."]
REFERENCES = ["The train is late today.", "I'm going home.", "It is raining."]


def test_scores_are_sacrebleus():
    scores = corpus_scores(HYPOTHESES, REFERENCES)
    assert scores["bleu"] == sacrebleu.corpus_bleu(HYPOTHESES, [REFERENCES]).score
    assert scores["chrf"] == sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES]).score
    assert scores["chrf++"] == sacrebleu.corpus_chrf(HYPOTHESES, [REFERENCES],
                                                     word_order=2).score
    assert 0 < scores["bleu"] < 100
    assert scores["bleu_signature"].startswith("nrefs:1|case:mixed|eff:no|tok:13a")
    assert "nw:0" in scores["chrf_signature"] and "nw:2" in scores["chrf++_signature"]


def test_a_subset_of_metrics_and_an_unknown_one():
    assert set(corpus_scores(HYPOTHESES, REFERENCES, metrics=("chrf",))) == {
        "chrf", "chrf_signature"}
    assert corpus_scores(REFERENCES, REFERENCES, metrics=("bleu",))["bleu"] == pytest.approx(100)
    with pytest.raises(ValueError, match="unknown metric 'ter'"):
        corpus_scores(HYPOTHESES, REFERENCES, metrics=("ter",))
