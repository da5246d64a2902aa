"""Synthetic copy documents (c2jax/data/copy_task.py) and their mixture into the pipeline."""
import json

import numpy as np
import pytest

from c2jax.data import copy_task
from c2jax.data.config import data_config
from c2jax.data.pipeline import make_batch_iterator
from environments import tool_format as tf

_ARGS = dict(seed=3, shard=0, blocks=(4, 9), first_id=20, vocab_size=100, bos_id=1, eos_id=2)


def test_a_copy_document_is_a_random_block_given_twice():
    lengths = set()
    for index in range(50):
        doc = copy_task.copy_document(index, **_ARGS)
        ids = doc["ids"]
        n = (len(ids) - 2) // 2
        lengths.add(n)
        assert ids[0] == 1 and ids[-1] == 2 and 4 <= n <= 9
        np.testing.assert_array_equal(ids[1:1 + n], ids[1 + n:-1])
        assert ids[1:-1].min() >= 20 and ids[1:-1].max() < 100
        np.testing.assert_array_equal(doc["loss_mask"], np.ones_like(ids))
    assert lengths == set(range(4, 10))
    again = copy_task.copy_document(7, **_ARGS)["ids"]
    np.testing.assert_array_equal(again, copy_task.copy_document(7, **_ARGS)["ids"])
    other_shard = copy_task.copy_document(7, **{**_ARGS, "shard": 1})["ids"]
    assert not np.array_equal(again, other_shard)


def _segments(batches, bos):
    """Every document of the batches as its input tokens (the packer splits a document across
    rows in order, so the rows' tokens in order, cut at <|bos|>, give them back whole)."""
    stream = np.concatenate([b["tokens"][b["segment_ids"] > 0] for b in batches])
    starts = np.flatnonzero(stream == bos)
    return np.split(stream, starts)[1:]


def _is_copy(tokens):
    n = (len(tokens) - 1) // 2      # inputs: <|bos|> block block (the <|eos|> is a target)
    return len(tokens) % 2 == 1 and n >= 1 and np.array_equal(tokens[1:1 + n], tokens[1 + n:])


@pytest.fixture
def short_docs(tmp_path):
    path = tmp_path / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": f"document number {i} says hello"}) + "\n"
                            for i in range(40)))
    return path


def test_the_train_split_mixes_copies_at_the_fraction_and_eval_never(small_tokenizer, short_docs):
    cfg = data_config(source=str(short_docs), seq_len=64, batch_size=4, eval_fraction=0.2,
                      copy_fraction=0.5, copy_block=(3, 12))
    bos = small_tokenizer.token_id(tf.BOS)
    with make_batch_iterator(cfg, small_tokenizer) as train:
        docs = _segments([next(train) for _ in range(30)], bos)
    copies = [d for d in docs if _is_copy(d)]
    assert 0.4 < len(copies) / len(docs) < 0.6
    assert min(d[1:].min() for d in copies) >= len(tf.SPECIAL_TOKENS)
    with make_batch_iterator(cfg, small_tokenizer, split="eval") as held_out:
        assert not any(_is_copy(d) for d in _segments(list(held_out), bos))
    plain = data_config(source=str(short_docs), seq_len=64, batch_size=4, eval_fraction=0.2)
    with make_batch_iterator(plain, small_tokenizer) as train:
        assert not any(_is_copy(d) for d in _segments([next(train) for _ in range(30)], bos))


def test_a_mixed_stream_resumes_exactly(small_tokenizer, short_docs):
    cfg = data_config(source=str(short_docs), seq_len=32, batch_size=2, eval_fraction=0.0,
                      copy_fraction=0.3, copy_block=(3, 12))
    with make_batch_iterator(cfg, small_tokenizer) as original:
        [next(original) for _ in range(7)]
        state = json.loads(json.dumps(original.get_state()))
        expected = [next(original) for _ in range(20)]
    assert state["pipeline"]["copy_fraction"] == 0.3
    with make_batch_iterator(cfg, small_tokenizer) as resumed:
        resumed.set_state(state)
        for want, got in zip(expected, [next(resumed) for _ in range(20)]):
            for name in want:
                np.testing.assert_array_equal(want[name], got[name], err_msg=name)


@pytest.mark.parametrize("overrides, match", [
    (dict(copy_fraction=1.0), "copy_fraction"),
    (dict(copy_fraction=0.2, copy_block=(5, 4)), "copy_block.*min <= max"),
    (dict(copy_fraction=0.2, copy_block=(4, 40)), "copy_block.*seq_len=64"),
])
def test_bad_copy_settings_name_the_field(small_tokenizer, short_docs, overrides, match):
    cfg = data_config(source=str(short_docs), seq_len=64, **overrides)
    with pytest.raises(ValueError, match=match):
        make_batch_iterator(cfg, small_tokenizer)
