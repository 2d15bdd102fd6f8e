"""The seeds' worked examples of scaled dot-product attention, printed step by step.

    python -m translator demo            # "UPI payment failed" and "it" → scooter
    python -m translator demo --causal   # the 3×3 example under a causal mask

Each step (score, scale, mask, softmax, weighted sum) is computed here by hand, printed to 4
decimals as the chapters print it, and checked against
`translator.attention.scaled_dot_product_attention`.
"""

from __future__ import annotations

import math

import torch

from translator.attention import causal_mask, scaled_dot_product_attention

# The chapter's hand-picked 2-d vectors (invented for hand-traceable arithmetic).
UPI_TOKENS = ["UPI", "payment", "failed"]
UPI_Q = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
UPI_K = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, -1.0]])
UPI_V = torch.tensor([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])

IT_TOKENS = ["mechanic", "scooter", "petrol"]
IT_Q = torch.tensor([[0.0, 4.0]])
IT_K = torch.tensor([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]])
IT_V = torch.tensor([[2.0, 0.0], [0.0, 2.0], [1.0, -1.0]])


def fmt(row: torch.Tensor) -> str:
    return "[" + ", ".join(f"{x:7.4f}" for x in row.tolist()) + "]"


def print_matrix(title: str, matrix: torch.Tensor, rows: list[str], columns: list[str]) -> None:
    print(title)
    print(" " * 10 + "".join(f"{c:>9}" for c in columns))
    for name, row in zip(rows, matrix):
        print(f"{name:<10}" + "".join(f"{x:9.4f}" for x in row.tolist()))
    print()


def walk_through(
    title: str, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
    queries: list[str], keys: list[str], mask: torch.Tensor | None = None,
) -> None:
    """Print the four steps, then check them against the library function."""
    print(f"=== {title} ===\n")
    d_k = q.size(-1)
    scores = q @ k.T
    print_matrix("Step 1 — raw scores Q·Kᵀ", scores, queries, keys)
    scaled = scores / math.sqrt(d_k)
    print_matrix(f"Step 2 — scaled by 1/√d_k = 1/√{d_k} = {1 / math.sqrt(d_k):.4f}",
                 scaled, queries, keys)
    if mask is not None:
        scaled = scaled.masked_fill(~mask, float("-inf"))
        print_matrix("Step 2b — mask: −∞ where a token would see the future", scaled, queries, keys)
    exponentials = scaled.exp()
    sums = exponentials.sum(dim=-1, keepdim=True)
    print_matrix("Step 3a — e^x of each scaled score, and each row's sum",
                 torch.cat([exponentials, sums], dim=-1), queries, keys + ["sum"])
    weights = exponentials / sums
    print_matrix("Step 3b — softmax: divide by the row's sum (each row sums to 1)",
                 weights, queries, keys)
    output = weights @ v
    print("Step 4 — weighted sum of the values")
    for name, row in zip(queries, output):
        print(f"context({name}) = {fmt(row)}")
    library_output, library_weights = scaled_dot_product_attention(q, k, v, mask)
    assert torch.allclose(library_output, output) and torch.allclose(library_weights, weights)
    print("(translator.attention.scaled_dot_product_attention gives the same numbers)\n")


def run_demo(causal: bool = False) -> None:
    """The "UPI payment failed" and "it" examples, or the first under a causal mask."""
    if causal:
        walk_through("Causal self-attention on 'UPI payment failed'", UPI_Q, UPI_K, UPI_V,
                     UPI_TOKENS, UPI_TOKENS, mask=causal_mask(3))
        return
    walk_through("Self-attention on 'UPI payment failed'", UPI_Q, UPI_K, UPI_V,
                 UPI_TOKENS, UPI_TOKENS)
    walk_through("What does 'it' refer to? (The mechanic fixed the scooter because it ...)",
                 IT_Q, IT_K, IT_V, ["it"], IT_TOKENS)
