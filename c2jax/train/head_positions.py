"""Where the output head runs: only the positions a loss is taken at (SFT's assistant tokens).

On a small model the LM head is most of a training step (tiny at 2048 tokens, vocab 8192:
1.35 s for forward + backward against 0.55 s with a 512-token vocab), while SFT trains on
about a quarter of its positions (the chat template masks system, user and tool turns). With
`train.head_fraction` f > 0 the loop hands the model `head_positions` `[b, ceil(f * s)]`, the
positions whose next-token or MTP targets carry loss, and the head runs there only; the loss
is the same (`tests/train/test_head_positions.py`). A batch with a row that needs more
positions than that runs the full-width step instead, so nothing is ever dropped.

    positions, valid = head_positions(loss_mask, mtp_depth, n)   # None when a row overflows
"""
from __future__ import annotations

import math

import numpy as np

#: The batch keys this module adds: int32 positions and their float32 validity, `[b, n]`.
KEYS = ("head_positions", "head_valid")


def width(seq_len: int, fraction: float) -> int:
    """Head positions per row for `train.head_fraction` (at least 1, at most seq_len)."""
    return min(seq_len, max(1, math.ceil(fraction * seq_len)))


def needed(loss_mask: np.ndarray, mtp_depth: int) -> np.ndarray:
    """bool `[b, s]`: position i has a loss at depth 0 (its own target) or at an MTP depth k,
    whose target is the one k positions later (`losses.mtp_targets`), so the mask at i + k."""
    mask = np.asarray(loss_mask) > 0
    out = mask.copy()
    for k in range(1, mtp_depth + 1):
        out[:, :-k] |= mask[:, k:]
    return out


def head_positions(loss_mask: np.ndarray, mtp_depth: int, n: int):
    """(positions int32 `[b, n]`, valid float32 `[b, n]`), the needed positions of each row in
    order, padded with position 0 marked invalid; None when a row needs more than n."""
    need = needed(loss_mask, mtp_depth)
    if need.sum(axis=1).max(initial=0) > n:
        return None
    b = need.shape[0]
    positions = np.zeros((b, n), np.int32)
    valid = np.zeros((b, n), np.float32)
    for row in range(b):
        idx = np.flatnonzero(need[row])
        positions[row, :idx.size] = idx
        valid[row, :idx.size] = 1.0
    return positions, valid
