"""Packing: variable-length documents -> fixed-length rows that attention cannot cross.

Next-token layout. A document's ids `d = [d0 .. dn]` (with its per-token loss mask `m`)
becomes an *example* `tokens = d[:-1]`, `targets = d[1:]`, `loss_mask = m[1:]`: position i
reads `tokens[i]` and is trained to predict `targets[i]`. The shift happens per document before
packing, so a target is never the first token of the next document.

Rows. Examples are concatenated and cut into rows of `seq_len` (grain's
`ConcatThenSplitIterDataset`); a document longer than the space left is split and continues in
the next row. Each row holds, all `[seq]`:

    tokens       int32    input ids (0 = `<|pad|>` after the last document)
    targets      int32    next-token ids (0 on padding)
    loss_mask    float32  1 where the target is trained on, 0 on padding / masked tokens
    segment_ids  int32    1, 2, ... per document piece in the row; 0 on padding
    positions    int32    0, 1, ... restarting at 0 for every document piece

Attention is allowed only between equal nonzero `segment_ids` (causally). A document split
across rows restarts at position 0 in the next row: each row is self-contained, so a
position never exceeds `seq_len - 1` and rows can be shuffled and sharded independently.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import grain
import numpy as np
from grain.experimental import ConcatThenSplitIterDataset

#: The features of one packed row (each `[seq]`) and of a batch (each `[batch, seq]`).
ROW_FEATURES = ("tokens", "targets", "loss_mask", "segment_ids", "positions")
_EXAMPLE_FEATURES = ("tokens", "targets", "loss_mask")


def next_token_example(ids: Sequence[int], loss_mask: Sequence[int]) -> dict[str, np.ndarray]:
    """One document `[n]` -> `{"tokens", "targets", "loss_mask"}`, each `[n - 1]`."""
    ids = np.asarray(ids, dtype=np.int32)
    loss_mask = np.asarray(loss_mask, dtype=np.float32)
    if ids.shape != loss_mask.shape or ids.ndim != 1:
        raise ValueError(f"ids {ids.shape} and loss_mask {loss_mask.shape} must be equal 1-D "
                         "shapes")
    if len(ids) < 2:
        raise ValueError(f"a document needs at least 2 tokens to make a next-token pair, "
                         f"got {len(ids)}")
    return {"tokens": ids[:-1], "targets": ids[1:], "loss_mask": loss_mask[1:]}


def pack_examples(examples: grain.IterDataset, seq_len: int) -> grain.IterDataset:
    """Examples (dicts of `[n]` arrays from `next_token_example`) -> rows of `ROW_FEATURES`."""
    if seq_len < 1:
        raise ValueError(f"seq_len={seq_len} must be positive")
    packed = ConcatThenSplitIterDataset(
        examples, length_struct={name: seq_len for name in _EXAMPLE_FEATURES})
    return packed.map(_row_from_packed)


def _row_from_packed(packed: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    # The three features are packed in lockstep (same lengths, same split points), so the
    # segment ids and positions grain writes for `tokens` hold for all of them.
    return {
        "tokens": packed["tokens"],
        "targets": packed["targets"],
        "loss_mask": packed["loss_mask"],
        "segment_ids": packed["tokens_segment_ids"],
        "positions": packed["tokens_positions"],
    }


def state_from_json(state: Any) -> Any:
    """Undoes JSON's tuple -> list on a grain iterator state that contains a packing state.

    grain 0.2.18's packing iterator marks "no partial document" with the tuple (-1, -1) and
    compares by `!=`, so after a JSON round trip (its own checkpoint handler writes JSON) the
    list [-1, -1] would read as a partial document and corrupt the resumed stream.
    """
    if isinstance(state, dict):
        return {key: ({name: tuple(sl) for name, sl in value.items()}
                      if key == "remainder_slices" else state_from_json(value))
                for key, value in state.items()}
    if isinstance(state, list):
        return [state_from_json(item) for item in state]
    return state
