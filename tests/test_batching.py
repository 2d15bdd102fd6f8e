"""Tests for translator.batching: token-budget batches, shuffling, resuming, sharding, and
the padded tensors a training step and a search read."""

import random

import numpy as np
import pytest
import torch

from translator.batching import (
    Competence,
    TokenBatchSampler,
    make_batch,
    pad,
    padding_fraction,
    source_tensor,
)


def random_lengths(n=600, seed=0):
    rng = random.Random(seed)
    lengths = []
    for _ in range(n):
        source = rng.randint(2, 60)
        lengths.append((source, max(2, source + rng.randint(-8, 8))))
    return [*lengths, (300, 250), (5, 500)]  # two pairs above the budget


def batch_cost(batch, lengths):
    return len(batch) * (max(lengths[i][0] for i in batch) + max(lengths[i][1] for i in batch))


def test_batches_respect_the_token_budget_and_cover_every_pair_once():
    lengths = random_lengths()
    sampler = TokenBatchSampler(lengths, max_tokens=400, seed=1)
    for _ in range(2):
        batches = list(sampler)
        assert len(batches) == len(sampler)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
        for batch in batches:
            assert batch_cost(batch, lengths) <= 400 or len(batch) == 1
    assert [len(lengths) - 2] in batches and [len(lengths) - 1] in batches


def test_batch_order_is_shuffled_not_sorted():
    lengths = random_lengths()
    batches = list(TokenBatchSampler(lengths, max_tokens=400, seed=1))
    longest = [max(lengths[i] for i in batch) for batch in batches]
    assert longest != sorted(longest) and longest != sorted(longest, reverse=True)


def test_epochs_differ_and_the_same_seed_repeats():
    lengths = random_lengths()
    sampler = TokenBatchSampler(lengths, max_tokens=400, seed=1)
    epoch0, epoch1 = list(sampler), list(sampler)
    assert epoch0 != epoch1
    again = TokenBatchSampler(lengths, max_tokens=400, seed=1)
    assert [list(again), list(again)] == [epoch0, epoch1]
    assert list(TokenBatchSampler(lengths, max_tokens=400, seed=2)) != epoch0


def test_resuming_mid_epoch_yields_exactly_the_remaining_batches():
    lengths = random_lengths()
    sampler = TokenBatchSampler(lengths, max_tokens=400, seed=3)
    list(sampler)  # finish epoch 0
    batches = iter(sampler)
    for _ in range(5):
        next(batches)
    state = sampler.state_dict()
    assert state == {"epoch": 1, "position": 5}
    remaining = list(batches)

    resumed = TokenBatchSampler(lengths, max_tokens=400, seed=3)
    resumed.load_state_dict(state)
    assert list(resumed) == remaining
    assert resumed.state_dict() == sampler.state_dict() == {"epoch": 2, "position": 0}


def test_shards_are_disjoint_equal_and_cover_the_trimmed_epoch():
    lengths = random_lengths()
    whole = TokenBatchSampler(lengths, max_tokens=400, seed=4)
    num_shards = 4
    assert len(whole) % num_shards != 0  # so the test exercises trimming
    shards = [
        TokenBatchSampler(lengths, max_tokens=400, seed=4, num_shards=num_shards, shard_index=k)
        for k in range(num_shards)
    ]
    per_shard = [list(shard) for shard in shards]
    batches_per_shard = len(whole) // num_shards
    assert [len(batches) for batches in per_shard] == [batches_per_shard] * num_shards
    assert [len(shard) for shard in shards] == [batches_per_shard] * num_shards
    seen = [i for batches in per_shard for batch in batches for i in batch]
    assert len(seen) == len(set(seen))
    trimmed_epoch = whole.epoch_batches(0)[: batches_per_shard * num_shards]
    assert sorted(seen) == sorted(i for batch in trimmed_epoch for i in batch)


def test_competence_rises_as_the_square_root_from_c0_to_every_pair():
    competence = Competence.of(np.arange(100.0), steps=400)
    exact = [np.sqrt(t / 400 * (1 - 0.01**2) + 0.01**2) for t in (0, 100, 399)]
    levels = [float(competence.at(t)) for t in (0, 100, 399, 400, 10_000)]
    assert levels[:3] == pytest.approx([np.ceil(c * 20) / 20 for c in exact])
    assert levels[3:] == [1.0, 1.0]
    assert competence.difficulty.min() == pytest.approx(0.01) and competence.difficulty.max() == 1
    level, first = competence.level(250)
    assert float(competence.at(first)) == level and float(competence.at(first - 1)) < level


def test_a_curriculum_draws_only_eligible_pairs_then_every_pair():
    lengths = random_lengths()
    difficulty = np.array([source for source, _ in lengths], dtype=float)
    competence = Competence.of(difficulty, steps=2000)
    sampler = TokenBatchSampler(lengths, max_tokens=400, seed=6, competence=competence)
    batches = iter(sampler)
    early = [next(batches) for _ in range(60)]
    for step, batch in enumerate(early):
        assert competence.difficulty[batch].max() <= competence.at(step)
        assert batch_cost(batch, lengths) <= 400 or len(batch) == 1
    assert max(competence.difficulty[i] for i in early[0]) <= 0.05
    # the first level (5% of pairs) is seen several times over before it grows
    first_level = [i for step, b in enumerate(early) if competence.at(step) == 0.05 for i in b]
    assert len(first_level) > len(set(first_level))
    for _ in range(2000 - 60):
        next(batches)
    # then ordinary epochs over every pair, counted from epoch 0
    assert sampler.state_dict() == {"epoch": 0, "position": 0, "curriculum_position": 2000}
    epoch = [next(batches) for _ in range(len(sampler))]
    assert sorted(i for batch in epoch for i in batch) == list(range(len(lengths)))


def test_a_curriculum_resumes_exactly_and_its_shards_take_turns():
    lengths = random_lengths()
    competence = Competence.of(np.array([t for _, t in lengths], dtype=float), steps=40)
    sampler = TokenBatchSampler(lengths, max_tokens=400, seed=7, competence=competence)
    batches = iter(sampler)
    for _ in range(25):
        next(batches)
    state = sampler.state_dict()
    remaining = [next(batches) for _ in range(30)]
    resumed = TokenBatchSampler(lengths, max_tokens=400, seed=7, competence=competence)
    resumed.load_state_dict(state)
    again = iter(resumed)
    assert [next(again) for _ in range(30)] == remaining
    shards = [iter(TokenBatchSampler(lengths, max_tokens=100, seed=7, num_shards=2,
                                     shard_index=k, competence=competence)) for k in (0, 1)]
    first = [next(shard) for shard in shards]
    assert not set(first[0]) & set(first[1])  # two different batches of the same pass


def test_a_curriculum_over_a_few_pairs_starts_with_the_easiest_one():
    competence = Competence.of(np.array([3.0, 1.0, 2.0]), steps=100)  # 5% is no pair yet
    batches = iter(TokenBatchSampler([(3, 3), (4, 4), (5, 5)], 100, seed=1,
                                     competence=competence))
    assert next(batches) == [1]


def test_source_difficulty_by_length_and_by_rarity():
    from translator.encoded import EncodedCorpus
    # pairs: [1, 1], [1, 2], [3]: piece 1 is common, 2 and 3 are rare
    corpus = EncodedCorpus(np.array([1, 1, 1, 2, 3]), np.array([0, 2, 4, 5]),
                           np.array([1, 1, 1]), np.array([0, 1, 2, 3]))
    assert corpus.source_difficulty("length").tolist() == [2, 2, 1]
    rarity = corpus.source_difficulty("rarity")
    assert rarity == pytest.approx([2 * np.log(5 / 3), np.log(5 / 3) + np.log(5), np.log(5)])
    assert rarity[1] > rarity[0]  # same length, a rarer word


def test_unshuffled_batches_are_sorted_by_length_and_stable():
    lengths = random_lengths()
    sampler = TokenBatchSampler(lengths, max_tokens=400, seed=5, shuffle=False)
    first, second = list(sampler), list(sampler)
    assert first == second
    order = [i for batch in first for i in batch]
    assert [lengths[i] for i in order] == sorted(lengths)


def test_bucketing_pads_less_than_random_batches():
    lengths = random_lengths()
    bucketed = list(TokenBatchSampler(lengths, max_tokens=1000, seed=6))
    order = list(range(len(lengths)))
    random.Random(6).shuffle(order)
    fixed = [order[i : i + 32] for i in range(0, len(order), 32)]
    assert padding_fraction(bucketed, lengths) < 0.5 * padding_fraction(fixed, lengths)
    assert padding_fraction([[0]], lengths) == 0


def test_make_batch_pads_and_adds_bos_eos():
    batch = make_batch([[5, 6, 7], [8]], [[9], [10, 11]], pad_id=0, bos_id=2, eos_id=3)
    assert torch.equal(batch.source, torch.tensor([[5, 6, 7, 3], [8, 3, 0, 0]]))
    assert torch.equal(batch.target_input, torch.tensor([[2, 9, 0], [2, 10, 11]]))
    assert torch.equal(batch.target_output, torch.tensor([[9, 3, 0], [10, 11, 3]]))
    assert batch.source.dtype == torch.long
    assert batch.num_target_tokens == 5 == int((batch.target_output != 0).sum())
    assert batch.to("cpu").source.shape == (2, 4)


def test_source_tensor_pads_sources_for_search_as_make_batch_does():
    sources = [[5, 6, 7], [8]]
    assert torch.equal(source_tensor(sources, pad_id=0, eos_id=3),
                       make_batch(sources, [[1], [1]], pad_id=0, bos_id=2, eos_id=3).source)
    assert torch.equal(pad([[4], [4, 5, 6]], pad_id=9), torch.tensor([[4, 9, 9], [4, 5, 6]]))
