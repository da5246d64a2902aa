"""Synthetic copy documents mixed into training: a block of random token ids given twice.

    documents = copy_task.mix_in(documents, fraction=0.25, seed=0, shard=0, blocks=(16, 120),
                                 first_id=16, vocab_size=8192, bos_id=1, eos_id=2)

An agent copies names from a tool's output into its next call; that needs the induction
circuit (Olsson et al. 2022), and the tiny model does not form it from a few million tokens of
code (BENCHMARKS.md, "The copy toy: a positional copy forms, induction does not"; the toy is
`experiments/copy_toy.py`). Mixing these in teaches it: with short blocks (8-32 ids) and
the copy toy's settings, ~2,500 steps of nearly only copies form it in the tiny model (the RL
warm start's induction stage, experiments/warm_start.py); with the recipe's optimizer it does
not form.

A copy document is `<|bos|> block block <|eos|>` with `block` a run of uniformly random
non-special ids, every token trained: the first copy is noise, the second is free for a model
that copies. Document `i` is a pure function of (seed, shard, i), so the mixture is
deterministic and a resumed pipeline reproduces it.

`mix_in` interleaves them with the real documents at document level (grain's `MapDataset.mix`:
a fixed pattern by index, so the iterator state stays grain's). Training split only: held-out
losses stay on the real data.
"""
from __future__ import annotations

import functools

import grain
import numpy as np

#: Copy documents available to a mixture; the real documents run out long before these.
_COUNT = 10**12


def copy_document(index: int, *, seed: int, shard: int, blocks: tuple[int, int], first_id: int,
                  vocab_size: int, bos_id: int, eos_id: int) -> dict[str, np.ndarray]:
    """Copy document `index` of host `shard`: `{"ids": int32 [2 n + 2], "loss_mask": uint8
    [2 n + 2]}` (all 1), n uniform in `blocks` (inclusive), block ids uniform in
    [first_id, vocab_size)."""
    rng = np.random.default_rng([seed, shard, index])
    n = int(rng.integers(blocks[0], blocks[1] + 1))
    block = rng.integers(first_id, vocab_size, size=n)
    ids = np.concatenate([[bos_id], block, block, [eos_id]]).astype(np.int32)
    return {"ids": ids, "loss_mask": np.ones(ids.shape, np.uint8)}


def mix_in(documents: grain.MapDataset, *, fraction: float, **document_args
           ) -> grain.MapDataset:
    """`documents` (encoded: `{"ids", "loss_mask"}`) with copy documents making up `fraction`
    of the result; `documents` itself when fraction is 0. document_args: `copy_document`'s
    keyword arguments other than index."""
    if not fraction:
        return documents
    copies = grain.MapDataset.range(_COUNT).map(
        functools.partial(copy_document, **document_args))
    return grain.MapDataset.mix([documents, copies], weights=[1.0 - fraction, fraction])
