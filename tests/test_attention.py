"""The seeds' worked examples, the mask, and the claims the chapters make about attention."""

import math

import pytest
import torch

from translator.attention import (
    MultiHeadAttention,
    causal_mask,
    scaled_dot_product_attention,
)
from translator.dropout import dropout, dropout_state, seed_dropout, set_dropout_state

Q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
K = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
V = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])


def rounded(x: torch.Tensor) -> list:
    """To 4 decimals, as the chapters print them."""
    values = x.tolist()
    if isinstance(values[0], list):
        return [[round(v, 4) for v in row] for row in values]
    return [round(v, 4) for v in values]


def test_raw_scores_match_the_seed():
    assert (Q @ K.T).tolist() == [[1, 0, 1], [0, 1, -1], [1, 1, 0]]


def test_upi_payment_failed_weights_and_outputs():
    output, weights = scaled_dot_product_attention(Q, K, V)
    assert rounded(weights) == [[0.4011, 0.1978, 0.4011], [0.2840, 0.5760, 0.1400],
                                [0.4011, 0.4011, 0.1978]]
    assert rounded(output) == [[0.8022, 0.7967], [0.4240, 1.2920], [0.5989, 1.0000]]


def test_it_refers_to_scooter():
    k = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
    v = torch.tensor([[2.0, 0.0], [0.0, 2.0], [1.0, -1.0]])
    output, weights = scaled_dot_product_attention(torch.tensor([[0.0, 4.0]]), k, v)
    assert rounded(weights) == [[0.0454, 0.7679, 0.1867]]
    assert rounded(output) == [[0.2775, 1.3491]]


def test_attention_is_not_symmetric():
    _, weights = scaled_dot_product_attention(Q, K, V)
    assert round(weights[0, 1].item(), 4) == 0.1978  # UPI → payment
    assert round(weights[1, 0].item(), 4) == 0.2840  # payment → UPI
    assert not torch.allclose(weights, weights.T)


def test_batched_over_leading_dimensions():
    q = torch.randn(2, 3, 5, 4)
    k, v = torch.randn(2, 3, 7, 4), torch.randn(2, 3, 7, 6)
    output, weights = scaled_dot_product_attention(q, k, v)
    assert output.shape == (2, 3, 5, 6) and weights.shape == (2, 3, 5, 7)
    single, _ = scaled_dot_product_attention(q[1, 2], k[1, 2], v[1, 2])
    assert torch.allclose(output[1, 2], single, atol=1e-6)


def test_causal_mask_zeroes_the_future_and_rows_still_sum_to_one():
    _, weights = scaled_dot_product_attention(Q, K, V, causal_mask(3))
    upper = torch.triu(torch.ones(3, 3, dtype=torch.bool), diagonal=1)
    assert (weights[upper] == 0).all()
    assert torch.allclose(weights.sum(-1), torch.ones(3))
    # the last row sees everything, so it equals the unmasked row
    assert rounded(weights[2]) == [0.4011, 0.4011, 0.1978]


def test_causal_mask_after_cached_positions():
    """The model's mask when several new positions follow ``past`` cached ones: each new
    query sees the cache and the new positions up to itself."""
    assert causal_mask(3).tolist() == [[True, False, False], [True, True, False],
                                       [True, True, True]]
    assert causal_mask(2, past=3).tolist() == [[True, True, True, True, False],
                                               [True, True, True, True, True]]


def test_scaling_restores_unit_variance():
    generator = torch.Generator().manual_seed(0)
    for d_k in (16, 64, 256):
        q = torch.randn(20000, d_k, generator=generator)
        k = torch.randn(20000, d_k, generator=generator)
        dots = (q * k).sum(-1)
        assert dots.var().item() == pytest.approx(d_k, rel=0.1)
        assert (dots / math.sqrt(d_k)).var().item() == pytest.approx(1.0, rel=0.1)


def test_h_heads_cost_the_same_projections_as_one_head():
    def projection_parameters(attention: MultiHeadAttention) -> int:
        layers = (attention.w_q, attention.w_k, attention.w_v)
        return sum(p.numel() for layer in layers for p in layer.parameters())

    eight = MultiHeadAttention(512, heads=8)
    one = MultiHeadAttention(512, heads=1)
    assert eight.d_k == 64 and one.d_k == 512
    assert projection_parameters(eight) == projection_parameters(one) == 3 * (512 * 512 + 512)


def test_fused_and_explicit_paths_agree():
    torch.manual_seed(0)
    attention = MultiHeadAttention(64, heads=8).eval()
    x, memory = torch.randn(3, 5, 64), torch.randn(3, 9, 64)
    mask = torch.rand(3, 1, 1, 9) > 0.3
    mask[..., 0] = True  # no row may be fully masked
    fused, none = attention(x, memory, mask=mask)
    explicit, weights = attention(x, memory, mask=mask, need_weights=True)
    assert none is None and weights.shape == (3, 8, 5, 9)
    assert torch.allclose(fused, explicit, atol=1e-6)
    assert (weights.masked_select(~mask.expand_as(weights)) == 0).all()


def test_bf16_on_a_cpu_projects_in_bf16_and_attends_in_fp32():
    """Under bf16 autocast on a CPU the projections run in bf16 and the attention core in fp32
    (oneDNN would compile a bf16 kernel for every new batch shape): the weights come back in
    fp32, equal to the four steps computed in fp32 from the bf16 projections, and the output
    in bf16; fused and explicit paths still agree."""
    torch.manual_seed(0)
    attention = MultiHeadAttention(64, heads=8).eval()
    x, memory = torch.randn(3, 5, 64), torch.randn(3, 9, 64)
    mask = torch.rand(3, 1, 1, 9) > 0.3
    mask[..., 0] = True
    with torch.autocast("cpu", dtype=torch.bfloat16):
        fused, _ = attention(x, memory, mask=mask)
        explicit, weights = attention(x, memory, mask=mask, need_weights=True)
        q = attention.split_heads(attention.w_q(x))
        k, v = attention.project_keys_values(memory)
    assert q.dtype == torch.bfloat16 and fused.dtype == explicit.dtype == torch.bfloat16
    assert weights.dtype == torch.float32
    expected = torch.softmax((q.float() @ k.float().transpose(-2, -1) / math.sqrt(8))
                             .masked_fill(~mask, float("-inf")), dim=-1)
    assert torch.allclose(weights, expected, atol=1e-6)
    assert torch.allclose(fused.float(), explicit.float(), atol=1e-2)


def test_heads_must_divide_d_model():
    with pytest.raises(ValueError, match="divisible"):
        MultiHeadAttention(100, heads=8)


@pytest.mark.parametrize("p", [0.1, 0.2, 0.5])
def test_cpu_dropout_zeroes_the_share_asked_and_scales_the_rest(p):
    seed_dropout(0)
    x = torch.rand(400, 1000) + 1.0  # no zeros of its own
    x.requires_grad_(True)
    out = dropout(x, p)
    zeroed = out == 0
    assert abs(zeroed.float().mean().item() - p) < 0.005  # 400k draws: σ ≈ 0.0008
    kept = ~zeroed
    assert torch.allclose(out[kept], x[kept] / (1 - p))
    out.sum().backward()  # the gradient flows through the kept elements only, scaled alike
    assert torch.allclose(x.grad, kept.float() / (1 - p))
    # each row and column gets its share too: the 16-bit draws are not striped
    assert (zeroed.float().mean(0) - p).abs().max() < 0.1
    assert dropout(x, 0.0) is x


def test_the_dropout_stream_follows_its_seed_and_its_saved_state():
    """A resumed run draws the masks an uninterrupted one would: the stream's state is saved
    with a checkpoint and restored."""
    x = torch.ones(64, 64)
    seed_dropout(3)
    first = dropout(x, 0.5)
    state = dropout_state()
    second = dropout(x, 0.5)
    seed_dropout(3)
    assert torch.equal(dropout(x, 0.5), first)  # the same seed, the same masks
    set_dropout_state(state)
    assert torch.equal(dropout(x, 0.5), second)  # the saved state, the masks after it
    assert not torch.equal(first, second)
