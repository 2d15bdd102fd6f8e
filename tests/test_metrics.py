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


def test_facts_repeats_and_route_order_of_a_translation():
    from translator.metrics import check_facts

    facts = [["rajesh"], ["booked", "book"], ["delhi"], ["mumbai", "bombay"], ["evening"]]
    route = ("delhi", "mumbai")
    good = check_facts("Rajesh booked a Delhi-to-Mumbai ticket in the evening.", facts,
                       route=route)
    assert good.whole and good.missing == [] and good.route_in_order is True
    twice = check_facts("Rajesh booked a ticket from Delhi to Delhi to Mumbai in the evening.",
                        facts, route=route)
    assert twice.repeated == ["delhi"] and not twice.whole
    # a hyphenated route and a spelled-out one say both cities twice (the default run's slip)
    both_forms = check_facts("Rajesh booked a Delhi-to-Mumbai ticket from Delhi to Mumbai in the"
                             " evening.", facts, route=route)
    assert both_forms.repeated == ["delhi", "mumbai"] and not both_forms.whole
    reversed_route = check_facts("Rajesh books a Mumbai-to-Delhi ticket.", facts, route=route)
    assert reversed_route.route_in_order is False and reversed_route.missing == ["evening"]
    # a word the reference itself says twice is not a repeat
    assert check_facts("Two tickets and two more tickets.", [], "two tickets, two tickets"
                       ).repeated == []
    assert check_facts("Bookings.", [["book"]]).missing == []  # a word start: book…
    assert check_facts("Ebook.", [["book"]]).missing == ["book"]


def test_first_try_answers_compared_blind_to_case_and_edge_punctuation():
    from translator.metrics import first_try_right

    assert first_try_right("Hello!", ["Hello", "Hi"]) and first_try_right(" good  NIGHT.",
                                                                          ["Good night"])
    assert not first_try_right("Water water.", ["Water"])
    assert not first_try_right("The sunlighto's belib", ["Hello"])


def test_held_out_scores_count_whole_variants_and_right_first_tries():
    from translator.corpus import read_first_tries, read_showcase_family
    from translator.held_out import score_held_out

    family, tries = read_showcase_family(), read_first_tries()
    answers = {v.hindi: v.english for v in family} | {h: a[0] for h, a in tries}
    summary, rows = score_held_out(lambda texts: [answers[t] for t in texts])
    assert summary["family_whole"] == len(family) and summary["first_tries_right"] == 60
    assert summary["family_facts_kept"] == 1.0 and len(rows) == len(family) + 60
    summary, _ = score_held_out(lambda texts: ["Delhi Delhi."] * len(texts))
    assert summary["family_whole"] == 0 and summary["first_tries_right"] == 0
