"""Packing invariants: segments, positions, no cross-document targets, each token once, in order."""
import json

import grain
import numpy as np
import pytest

from c2jax.data import packing

DOC_STRIDE = 1000  # document k holds ids k*1000 + 0, 1, ...: the owner of any id is id // 1000


def _documents(lengths):
    return [np.arange(len_, dtype=np.int32) + DOC_STRIDE * k for k, len_ in enumerate(lengths, 1)]


def _pack(documents, seq_len, masks=None):
    masks = masks or [np.ones(len(d), np.float32) for d in documents]
    examples = [packing.next_token_example(d, m) for d, m in zip(documents, masks)]
    rows = packing.pack_examples(grain.MapDataset.source(examples).to_iter_dataset(), seq_len)
    return list(rows)


def test_next_token_example_shifts_within_the_document():
    example = packing.next_token_example([5, 6, 7, 8], [0, 0, 1, 1])
    np.testing.assert_array_equal(example["tokens"], [5, 6, 7])
    np.testing.assert_array_equal(example["targets"], [6, 7, 8])
    np.testing.assert_array_equal(example["loss_mask"], [0, 1, 1])
    assert example["tokens"].dtype == np.int32 and example["loss_mask"].dtype == np.float32
    with pytest.raises(ValueError, match="at least 2 tokens"):
        packing.next_token_example([5], [1])
    with pytest.raises(ValueError, match="must be equal 1-D shapes"):
        packing.next_token_example([5, 6], [1])


@pytest.mark.parametrize("lengths, seq_len", [
    ([5, 3, 9, 2, 17, 4, 8], 8),          # short, exact-fit, and longer-than-a-row documents
    ([2, 2, 2, 2, 2], 3),                 # one-pair documents
    ([40], 16),                           # one document over three rows
    ([9, 9, 9], 8),                       # every document exactly seq_len examples
    ([3, 6, 2], 1),                       # degenerate one-token rows
])
def test_packing_invariants(lengths, seq_len):
    documents = _documents(lengths)
    rows = _pack(documents, seq_len)
    assert all(set(row) == set(packing.ROW_FEATURES) for row in rows)
    assert all(row[name].shape == (seq_len,) for row in rows for name in row)

    for row in rows:
        seg, pos, tok, tgt, mask = (row[k] for k in
                                    ("segment_ids", "positions", "tokens", "targets", "loss_mask"))
        real = seg > 0
        n_real = int(real.sum())
        assert real[:n_real].all() and not real[n_real:].any()  # padding only at the end
        assert not tok[~real].any() and not tgt[~real].any() and not mask[~real].any()
        assert seg[0] == 1 and np.all(np.diff(seg[:n_real]) >= 0)
        assert np.all(np.diff(seg[:n_real]) <= 1)
        for s in range(1, int(seg.max()) + 1):
            np.testing.assert_array_equal(pos[seg == s], np.arange((seg == s).sum()))
            assert len(set(tok[seg == s] // DOC_STRIDE)) == 1  # one document per segment
        # No target belongs to another document than its input: nothing crosses a boundary.
        np.testing.assert_array_equal(tgt[real] // DOC_STRIDE, tok[real] // DOC_STRIDE)
        np.testing.assert_array_equal(tgt[real], tok[real] + 1)
        assert mask[real].all()

    # Every input token appears exactly once, in document order; so does every target.
    all_tokens = np.concatenate([row["tokens"][row["segment_ids"] > 0] for row in rows])
    all_targets = np.concatenate([row["targets"][row["segment_ids"] > 0] for row in rows])
    np.testing.assert_array_equal(all_tokens, np.concatenate([d[:-1] for d in documents]))
    np.testing.assert_array_equal(all_targets, np.concatenate([d[1:] for d in documents]))
    # Rows are full except the last: packing wastes no space mid-stream.
    assert all((row["segment_ids"] > 0).all() for row in rows[:-1])


def test_loss_mask_travels_with_its_token():
    documents = _documents([6, 7])
    masks = [np.array([0, 0, 1, 1, 0, 1], np.float32), np.array([1, 0, 1, 0, 1, 0, 1], np.float32)]
    rows = _pack(documents, 4, masks)
    packed_mask = np.concatenate([row["loss_mask"][row["segment_ids"] > 0] for row in rows])
    np.testing.assert_array_equal(packed_mask, np.concatenate([m[1:] for m in masks]))


def test_a_split_document_restarts_positions_in_the_next_row():
    rows = _pack(_documents([3, 11]), 6)
    np.testing.assert_array_equal(rows[0]["segment_ids"], [1, 1, 2, 2, 2, 2])
    np.testing.assert_array_equal(rows[0]["positions"], [0, 1, 0, 1, 2, 3])
    np.testing.assert_array_equal(rows[1]["segment_ids"], [1, 1, 1, 1, 1, 1])
    np.testing.assert_array_equal(rows[1]["positions"], [0, 1, 2, 3, 4, 5])


@pytest.mark.parametrize("lengths", [[5] * 10, [7, 3, 9, 4, 6, 8, 5, 3, 10, 2]])
def test_resume_from_a_json_state_continues_with_the_same_rows(lengths):
    """[5] * 10 with seq_len 4 checkpoints with no partial document, the case JSON breaks."""
    examples = [packing.next_token_example(d, np.ones(len(d))) for d in _documents(lengths)]

    def fresh_rows():
        return iter(packing.pack_examples(grain.MapDataset.source(examples).to_iter_dataset(), 4))

    for taken in range(1, 6):
        rows = fresh_rows()
        for _ in range(taken):
            next(rows)
        state = json.loads(json.dumps(rows.get_state()))
        expected = [next(rows)["tokens"] for _ in range(3)]
        resumed = fresh_rows()
        resumed.set_state(packing.state_from_json(state))
        for want in expected:
            np.testing.assert_array_equal(next(resumed)["tokens"], want)


def test_state_from_json_restores_the_no_remainder_sentinel():
    state = {"parent_state": {"next_index": 3},
             "remainder_slices": {"tokens": [-1, -1], "targets": [4, 9]},
             "elements_from_buffer_after_checkpoint": 1}
    restored = packing.state_from_json({"outer": [state]})
    assert restored["outer"][0]["remainder_slices"] == {"tokens": (-1, -1), "targets": (4, 9)}
    assert restored["outer"][0]["parent_state"] == {"next_index": 3}


def test_seq_len_must_be_positive():
    with pytest.raises(ValueError, match="seq_len=0 must be positive"):
        packing.pack_examples(grain.MapDataset.range(1).to_iter_dataset(), 0)
