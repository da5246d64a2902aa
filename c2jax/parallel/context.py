"""Context parallelism: the load-balanced sequence order for causal attention.

With the sequence split over `n` context shards, causal attention gives the last shard n times
the work of the first. Cutting the sequence into 2n chunks and giving shard r the chunks r and
2n-1-r equalises it (the "dual chunk swap" of MaxText / Megatron-CP). The model permutes its
integer inputs into this order on entry and the hidden states back before the output heads;
attention masks by positions, so nothing else changes.
"""
from __future__ import annotations

import numpy as np


def load_balance_order(seq_len: int, shards: int) -> np.ndarray:
    """int `[seq_len]`: original index of each slot of the load-balanced layout."""
    chunks = 2 * shards
    if seq_len % chunks:
        raise ValueError(f"sequence length {seq_len} must be divisible by 2 * context shards "
                         f"({chunks}) for load-balanced context parallelism")
    size = seq_len // chunks
    order = []
    for r in range(shards):
        for chunk in (r, chunks - 1 - r):
            order.extend(range(chunk * size, (chunk + 1) * size))
    return np.asarray(order, dtype=np.int32)


def inverse_order(order: np.ndarray) -> np.ndarray:
    """The permutation that undoes `order`."""
    inverse = np.empty_like(order)
    inverse[order] = np.arange(order.size, dtype=order.dtype)
    return inverse
