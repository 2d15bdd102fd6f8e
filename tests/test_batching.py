"""Tests for translator.batching: token-budget batches, shuffling, resuming, sharding, and
the padded tensors a training step and a search read."""

import random

import torch

from translator.batching import (
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
