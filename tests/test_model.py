"""The Transformer: positions, masks, tying, and the key/value cache."""

import math

import pytest
import torch

from translator.model import ModelConfig, Transformer, sinusoidal_positions

PAD = 0


def tiny_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    config = ModelConfig(d_model=32, heads=8, layers=2, d_ff=64, dropout=0.0,
                         source_vocab_size=50, target_vocab_size=50, pad_id=PAD)
    for key, value in overrides.items():
        setattr(config, key, value)
    return Transformer(config).eval()


def test_positional_encoding_matches_the_closed_form():
    table = sinusoidal_positions(50, 16)
    for pos in (0, 1, 7, 49):
        for i in (0, 3, 7):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-6)


def test_output_shape_and_tied_projection():
    model = tiny_model()
    source = torch.randint(1, 50, (2, 7))
    target = torch.randint(1, 50, (2, 5))
    assert model(source, target).shape == (2, 5, 50)
    # source and target share one embedding, which is also the output projection
    assert model.source_embeddings is model.target_embeddings
    names = [name for name, _ in model.named_parameters()]
    assert not any("output" in n and "weight" in n for n in names)


def test_separate_vocabularies():
    model = tiny_model(share_embeddings=False, target_vocab_size=40)
    logits = model(torch.randint(1, 50, (2, 6)), torch.randint(1, 40, (2, 4)))
    assert logits.shape == (2, 4, 40)
    assert model.source_embeddings is not model.target_embeddings


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_future_target_tokens_never_change_earlier_outputs(norm):
    model = tiny_model(norm=norm)
    source = torch.randint(1, 50, (1, 6))
    target = torch.randint(1, 50, (1, 8))
    changed = target.clone()
    changed[0, 5:] = torch.randint(1, 50, (3,))
    before, after = model(source, target), model(source, changed)
    assert torch.allclose(before[:, :5], after[:, :5], atol=1e-5)
    assert not torch.allclose(before[:, 5:], after[:, 5:])


def test_padded_source_tokens_never_change_any_output():
    model = tiny_model()
    source = torch.tensor([[5, 6, 7, 8, PAD, PAD]])
    target = torch.randint(1, 50, (1, 4))
    reference = model(source, target)
    # a padded position keeps pad id (so the mask holds) but its embedding changes
    with torch.no_grad():
        model.source_embeddings.tokens.weight[PAD] += 3.0
    assert torch.allclose(model(source, target), reference, atol=1e-5)
    # and the same sentence without the padding gives the same outputs
    assert torch.allclose(model(source[:, :4], target), reference, atol=1e-5)


def test_cross_attention_weights_ignore_padding():
    model = tiny_model()
    source = torch.tensor([[5, 6, 7, PAD]])
    memory, source_mask = model.encode(source)
    out = model.decode(torch.tensor([[2, 9, 10]]), memory, source_mask, need_weights=True)
    assert len(out.cross_attention) == 2
    weights = out.cross_attention[0]
    assert weights.shape == (1, 8, 3, 4)
    assert (weights[..., 3] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(1, 8, 3))


@pytest.mark.parametrize("norm", ["pre", "post"])
def test_incremental_decoding_with_cache_matches_full_forward(norm):
    model = tiny_model(norm=norm)
    source = torch.tensor([[5, 6, 7, 8, 9], [11, 12, 13, PAD, PAD]])
    target = torch.randint(1, 50, (2, 7))
    memory, source_mask = model.encode(source)
    full = model.decode(target, memory, source_mask, need_weights=True)
    cache = model.new_cache()
    steps = [model.decode(target[:, t : t + 1], memory, source_mask, cache, need_weights=True)
             for t in range(target.size(1))]
    incremental = torch.cat([s.logits for s in steps], dim=1)
    assert torch.allclose(incremental, full.logits, atol=1e-5)
    cross = torch.cat([s.cross_attention[-1] for s in steps], dim=2)
    assert torch.allclose(cross, full.cross_attention[-1], atol=1e-5)
    assert cache.length == 7 and cache.layers[0].self_attention.keys.shape[2] == 7


def test_cache_prefix_of_several_tokens_then_steps():
    model = tiny_model()
    source = torch.randint(1, 50, (1, 5))
    target = torch.randint(1, 50, (1, 6))
    memory, source_mask = model.encode(source)
    full = model.decode(target, memory, source_mask).logits
    cache = model.new_cache()
    first = model.decode(target[:, :4], memory, source_mask, cache).logits
    rest = [model.decode(target[:, t : t + 1], memory, source_mask, cache).logits
            for t in (4, 5)]
    assert torch.allclose(torch.cat([first, *rest], dim=1), full, atol=1e-5)


def test_cache_select_reorders_batch_rows():
    model = tiny_model()
    source = torch.randint(1, 50, (2, 5))
    memory, source_mask = model.encode(source)
    cache = model.new_cache()
    model.decode(torch.tensor([[2], [2]]), memory, source_mask, cache)
    order = torch.tensor([1, 1])
    cache.select(order)
    step = model.decode(torch.tensor([[9], [9]]), memory[order], source_mask[order], cache).logits
    full = model.decode(torch.tensor([[2, 9]]), memory[1:], source_mask[1:]).logits
    assert torch.allclose(step[0], full[0, -1:], atol=1e-5)
    assert torch.allclose(step[1], full[0, -1:], atol=1e-5)


def test_parameter_count_and_config_errors():
    model = tiny_model()
    assert model.num_parameters() == sum(p.numel() for p in model.parameters()) > 0
    with pytest.raises(ValueError, match="norm"):
        ModelConfig(norm="sandwich")
    with pytest.raises(ValueError, match="max_positions"):
        model(torch.randint(1, 50, (1, 2000)), torch.randint(1, 50, (1, 3)))
