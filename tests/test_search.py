"""Greedy and beam search on a small random model: the cache changes nothing, beam 1 is
greedy, n-best lists are ranked, batching changes nothing, the returned attention is the
chosen output's, lengths stay within their limits."""

import pytest
import torch

from translator.model import ModelConfig, Transformer
from translator.search import (
    RepetitionBans,
    beam_search,
    gnmt_length_penalty,
    greedy_search,
    output_limits,
)

PAD, BOS, EOS = 0, 2, 3
VOCAB = 40


def random_model(eos_bias: float = 2.5, max_positions: int = 64, layers: int = 2) -> Transformer:
    """A random model whose EOS bias makes outputs end at different lengths (0 to the limit),
    so finishing, early stopping and the limits all get exercised."""
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, heads=4, layers=layers, d_ff=64, dropout=0.0,
                         source_vocab_size=VOCAB, target_vocab_size=VOCAB, pad_id=PAD,
                         max_positions=max_positions)
    model = Transformer(config).eval()
    with torch.no_grad():
        model.output_bias[EOS] += eos_bias
    return model


def sentences(lengths: list[int], seed: int = 1) -> list[list[int]]:
    """Source ids ending with EOS, of the given lengths (EOS included)."""
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(4, VOCAB, (n - 1,), generator=generator).tolist() + [EOS]
            for n in lengths]


def padded(rows: list[list[int]]) -> torch.Tensor:
    width = max(map(len, rows))
    return torch.tensor([row + [PAD] * (width - len(row)) for row in rows])


LENGTHS = [9, 4, 12, 2, 7, 9]


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def model():
    return random_model()


@pytest.fixture(scope="module")
def source():
    return padded(sentences(LENGTHS))


def test_the_random_model_gives_outputs_of_many_lengths(model, source):
    lengths = {len(h.tokens) for h in greedy_search(model, source, BOS, EOS)}
    lengths |= {len(h.tokens) for n in beam_search(model, source, BOS, EOS, 4, 4) for h in n}
    assert len(lengths) >= 4  # otherwise the other tests here prove little


@pytest.mark.parametrize("beam", [1, 4])
def test_cached_and_uncached_decoding_agree(model, source, beam):
    if beam == 1:
        cached = [[h] for h in greedy_search(model, source, BOS, EOS, use_cache=True)]
        uncached = [[h] for h in greedy_search(model, source, BOS, EOS, use_cache=False)]
    else:
        cached = beam_search(model, source, BOS, EOS, beam, n_best=beam, use_cache=True)
        uncached = beam_search(model, source, BOS, EOS, beam, n_best=beam, use_cache=False)
    for with_cache, without in zip(cached, uncached):
        assert [h.tokens for h in with_cache] == [h.tokens for h in without]
        for a, b in zip(with_cache, without):
            assert a.score == pytest.approx(b.score, abs=1e-4)
            assert torch.allclose(a.cross_attention, b.cross_attention, atol=1e-5)


def test_beam_size_one_is_greedy(model, source):
    greedy = greedy_search(model, source, BOS, EOS)
    beam = [nbest[0] for nbest in beam_search(model, source, BOS, EOS, beam_size=1)]
    for g, b in zip(greedy, beam):
        assert b.tokens == g.tokens
        assert b.log_prob == pytest.approx(g.score, abs=1e-4)
        assert torch.allclose(b.cross_attention, g.cross_attention, atol=1e-6)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_nbest_lists_are_sorted_by_the_length_penalised_score(model, source, alpha):
    results = beam_search(model, source, BOS, EOS, beam_size=5, n_best=5, length_penalty=alpha)
    for nbest in results:
        assert len(nbest) == 5
        scores = [h.score for h in nbest]
        assert scores == sorted(scores, reverse=True)
        assert len({tuple(h.tokens) for h in nbest}) == 5  # five different hypotheses
        for h in nbest:
            penalty = gnmt_length_penalty(len(h.tokens) + 1, alpha)
            assert h.score == pytest.approx(h.log_prob / penalty)


def test_a_wider_beam_finds_at_least_as_probable_an_output_here(model, source):
    greedy = greedy_search(model, source, BOS, EOS)
    beam = beam_search(model, source, BOS, EOS, beam_size=6, length_penalty=0.0)
    assert sum(b[0].log_prob for b in beam) > sum(g.score for g in greedy)


@pytest.mark.parametrize("beam", [1, 3])
def test_batched_and_one_by_one_decoding_agree(model, beam):
    rows = sentences(LENGTHS)
    batched = beam_search(model, padded(rows), BOS, EOS, beam, n_best=beam)
    for row, nbest in zip(rows, batched):
        alone = beam_search(model, padded([row]), BOS, EOS, beam, n_best=beam)[0]
        assert [h.tokens for h in alone] == [h.tokens for h in nbest]
        for a, b in zip(alone, nbest):
            assert a.score == pytest.approx(b.score, abs=1e-4)
            # the batch's padding columns get no weight; the rest is the same
            assert torch.allclose(a.cross_attention, b.cross_attention[..., : len(row)],
                                  atol=1e-5)
            assert not b.cross_attention[..., len(row):].any()


def test_beam_attention_equals_teacher_forced_rescoring(model, source):
    results = beam_search(model, source, BOS, EOS, beam_size=4, n_best=4)
    for row, nbest in enumerate(results):
        memory, source_mask = model.encode(source[row : row + 1])
        for h in nbest:  # every hypothesis of the list, not only the best
            target_input = torch.tensor([[BOS, *h.tokens]])
            with torch.no_grad():
                out = model.decode(target_input, memory, source_mask, need_weights=True)
            forced = torch.cat(out.cross_attention)  # [layers, heads, T + 1, S]
            assert h.cross_attention.shape == forced.shape
            assert torch.allclose(h.cross_attention, forced, atol=1e-5)
            log_probs = out.logits[0].log_softmax(-1)
            expected = log_probs.gather(1, torch.tensor([*h.tokens, EOS])[:, None]).sum()
            assert h.log_prob == pytest.approx(expected.item(), abs=1e-4)


def test_outputs_stop_at_each_sentences_own_limit_with_an_eos_row():
    never_ends = random_model(eos_bias=-30.0)
    source = padded(sentences([3, 10]))
    limits = output_limits(source, never_ends, ratio=1.5, extra=2).tolist()
    assert limits == [6, 17]
    for hypotheses in (greedy_search(never_ends, source, BOS, EOS, max_length_extra=2),
                       [n[0] for n in beam_search(never_ends, source, BOS, EOS, 3,
                                                  max_length_extra=2)]):
        for h, limit in zip(hypotheses, limits):
            assert len(h.tokens) + 1 == limit  # EOS was made the only choice at the limit
            assert h.cross_attention.shape[2] == limit


def test_a_source_near_max_positions_does_not_overrun_the_positions():
    model = random_model(eos_bias=-30.0, max_positions=16)
    source = padded(sentences([16]))
    for h in [greedy_search(model, source, BOS, EOS)[0], beam_search(model, source, BOS,
                                                                      EOS, 2)[0][0]]:
        assert len(h.tokens) + 1 == 16


def test_beam_search_stops_early_once_every_beam_has_ended(monkeypatch):
    eager = random_model(eos_bias=8.0)  # EOS is by far the most probable next token
    source = padded(sentences([20, 30]))
    steps = []
    decode = eager.decode
    monkeypatch.setattr(eager, "decode", lambda *a, **k: steps.append(1) or decode(*a, **k))
    results = beam_search(eager, source, BOS, EOS, beam_size=3, n_best=3)
    assert len(steps) < 10 < int(output_limits(source, eager, 1.5, 10).max())
    assert all(len(nbest) == 3 for nbest in results)


def test_attention_can_be_left_out(model, source):
    assert all(h.cross_attention is None for h in greedy_search(model, source, BOS, EOS,
                                                                need_attention=False))
    nbest = beam_search(model, source, BOS, EOS, 3, 2, need_attention=False)
    assert all(h.cross_attention is None for n in nbest for h in n)
    with_attention = beam_search(model, source, BOS, EOS, 3, 2)
    assert [[h.tokens for h in n] for n in nbest] == [[h.tokens for h in n]
                                                       for n in with_attention]


def test_pad_and_bos_are_never_generated():
    model = random_model()
    with torch.no_grad():  # make them the most probable tokens
        model.output_bias[PAD] += 50
        model.output_bias[BOS] += 50
    source = padded(sentences([5, 8]))
    outputs = [h.tokens for h in greedy_search(model, source, BOS, EOS)]
    outputs += [h.tokens for n in beam_search(model, source, BOS, EOS, 3, 3) for h in n]
    assert all(PAD not in tokens and BOS not in tokens for tokens in outputs)


def test_n_best_larger_than_the_beam_is_refused(model, source):
    with pytest.raises(ValueError, match="n_best"):
        beam_search(model, source, BOS, EOS, beam_size=2, n_best=3)


# ---------------------------------------------------------------- what the model weighed


def teacher_forced(model, row: list[int], tokens: list[int]) -> list[float]:
    """The model's log-probability of each of ``tokens`` and the EOS after them, given
    ``row`` (source ids with EOS): one pass over the whole output, no cache, no search."""
    memory, mask = model.encode(padded([row]))
    with torch.no_grad():
        logits = model.decode(torch.tensor([[BOS, *tokens]]), memory, mask).logits[0]
    return logits.float().log_softmax(-1).gather(1, torch.tensor([*tokens, EOS])[:, None]
                                                 ).squeeze(1).tolist()


def searched(model, rows, beam: int, **options):
    if beam == 1:
        return [[h] for h in greedy_search(model, padded(rows), BOS, EOS, **options)]
    return beam_search(model, padded(rows), BOS, EOS, beam, n_best=beam, **options)


def test_greedys_chosen_token_is_its_steps_top_alternative(model):
    for h in greedy_search(model, padded(sentences(LENGTHS)), BOS, EOS, alternatives=5):
        assert len(h.alternatives) == len(h.token_log_probs) == len(h.tokens) + 1
        for token, step in zip([*h.tokens, EOS], h.alternatives):
            assert step[0][0] == token
            probs = [p for _, p in step]
            assert probs == sorted(probs, reverse=True) and len(step) == 5
            assert sum(probs) <= 1 + 1e-6


@pytest.mark.parametrize("beam", [1, 4])
def test_token_log_probs_are_the_teacher_forced_models_of_the_returned_path(model, beam):
    rows = sentences(LENGTHS)
    for row, nbest in zip(rows, searched(model, rows, beam, alternatives=5)):
        for h in nbest:
            expected = teacher_forced(model, row, h.tokens)
            assert h.token_log_probs == pytest.approx(expected, abs=1e-5)
            assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
            # the chosen token is among its step's alternatives or less probable than the last
            for token, log_prob, step in zip([*h.tokens, EOS], h.token_log_probs,
                                             h.alternatives):
                assert dict(step).get(token, torch.tensor(log_prob).exp().item()) == (
                    pytest.approx(torch.tensor(log_prob).exp().item(), rel=1e-4))
                assert sum(p for _, p in step) <= 1 + 1e-6


@pytest.mark.parametrize("beam", [1, 4])
def test_recording_alternatives_changes_no_output(model, beam):
    rows = sentences(LENGTHS)
    plain, recorded = searched(model, rows, beam), searched(model, rows, beam, alternatives=3)
    for a, b in zip(plain, recorded):
        assert [h.tokens for h in a] == [h.tokens for h in b]
        assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-6)
        assert a[0].alternatives is None and len(b[0].alternatives[0]) == 3


@pytest.mark.parametrize("beam", [1, 4])
def test_alternatives_respect_the_bans(model, beam):
    bans = RepetitionBans(no_repeat_ngram=1)  # no piece twice
    for nbest in searched(model, sentences(LENGTHS), beam, alternatives=5, bans=bans):
        for h in nbest:
            for t, step in enumerate(h.alternatives):
                offered = {token for token, p in step if p > 0}
                assert not offered & set(h.tokens[:t])
                assert not offered & {PAD, BOS}


# ---------------------------------------------------------------- a forced prefix


@pytest.mark.parametrize("beam", [1, 4])
def test_a_forced_prefix_starts_every_output_scored_by_the_model(model, beam):
    rows, prefix = sentences(LENGTHS), [7, 9, 7]  # a repeat: no ban may refuse a forced token
    bans = RepetitionBans(no_repeat_ngram=1)
    found = searched(model, rows, beam, prefix=[prefix] * len(rows), alternatives=2, bans=bans)
    for row, nbest in zip(rows, found):
        for h in nbest:
            assert h.tokens[:3] == prefix
            expected = teacher_forced(model, row, h.tokens)
            assert h.token_log_probs == pytest.approx(expected, abs=1e-5)
            assert h.log_prob == pytest.approx(sum(expected), abs=1e-4)


@pytest.mark.parametrize("beam", [1, 4])
def test_an_empty_prefix_changes_nothing(model, beam):
    rows = sentences(LENGTHS)
    plain, empty = searched(model, rows, beam), searched(model, rows, beam,
                                                         prefix=[[]] * len(rows))
    for a, b in zip(plain, empty):
        assert [(h.tokens, h.score) for h in a] == [(h.tokens, h.score) for h in b]


def test_prefixes_of_different_lengths_in_one_batch_equal_each_alone(model):
    rows = sentences(LENGTHS)
    prefixes = [[5, 6, 7][: i % 4] for i in range(len(rows))]
    for beam in (1, 3):
        batched = searched(model, rows, beam, prefix=prefixes)
        for row, prefix, nbest in zip(rows, prefixes, batched):
            alone = searched(model, [row], beam, prefix=[prefix])[0]
            assert [h.tokens for h in alone] == [h.tokens for h in nbest]
            assert nbest[0].tokens[: len(prefix)] == prefix


def test_a_prefix_longer_than_the_positions_is_refused():
    model = random_model(max_positions=8)
    with pytest.raises(ValueError, match="prefix of 8 pieces"):
        greedy_search(model, padded(sentences([3])), BOS, EOS, prefix=[[5] * 8])


def test_short_sources_are_ranked_with_their_own_alpha(model):
    """search.short_source: sources of at most N pieces are searched with
    short_length_penalty, the rest with length_penalty, each as if searched alone with its
    α; batches never mix the two."""
    from translator.config import SearchConfig
    from translator.search import search_in_batches

    rows = [row[:-1] for row in sentences(LENGTHS)]  # ids without EOS, as the package has them
    search = SearchConfig(beam_size=3, n_best=3, length_penalty=2.0, short_source=5,
                          short_length_penalty=0.0)
    assert [search.alpha(len(row)) for row in rows] == [2.0, 0.0, 2.0, 0.0, 2.0, 2.0]
    found = search_in_batches(model, rows, PAD, BOS, EOS, search, batch_size=4)
    for row, nbest in zip(rows, found):
        alone = beam_search(model, padded([row + [EOS]]), BOS, EOS, 3, n_best=3,
                            length_penalty=search.alpha(len(row)))[0]
        assert [h.tokens for h in nbest] == [h.tokens for h in alone]
        assert [h.score for h in nbest] == pytest.approx([h.score for h in alone], abs=1e-4)
    # off (0), every source takes length_penalty; the scores tell the two α apart here
    plain = search_in_batches(model, rows, PAD, BOS, EOS,
                              SearchConfig(beam_size=3, n_best=3, length_penalty=2.0))
    short = [i for i, row in enumerate(rows) if len(row) <= 5]
    assert all(plain[i][0].score != pytest.approx(found[i][0].score, abs=1e-4) for i in short)
    assert all(plain[i][0].score == pytest.approx(found[i][0].score, abs=1e-4)
               for i in range(len(rows)) if i not in short)
