"""The grain pipeline end to end: layout, determinism, sharding, resume, eval split, errors."""
import json

import numpy as np
import pytest

from c2jax.data import chat, corpus, packing
from c2jax.data.config import data_config
from c2jax.data.pipeline import DocumentEncoder, make_batch_iterator
from environments import tool_format as tf

STDLIB_JSON_PACKAGE = str(corpus.stdlib_dir() / "json")  # 5 real files, ~40 KB


def _config(source, **overrides):
    settings = dict(seq_len=64, batch_size=4, eval_fraction=0.0)
    return data_config(source=str(source), **{**settings, **overrides})


def _take(iterator, n):
    return [next(iterator) for _ in range(n)]


def _assert_same_batches(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for name in x:
            np.testing.assert_array_equal(x[name], y[name], err_msg=name)


def _documents_in(batches, tokenizer):
    """Decoded documents of a one-pass stream: every document starts with <|bos|>."""
    bos = tokenizer.token_id(tf.BOS)
    stream = np.concatenate([b["tokens"][b["segment_ids"] > 0] for b in batches])
    starts = np.flatnonzero(stream == bos)
    assert starts[0] == 0
    return [tokenizer.decode(piece[1:]) for piece in np.split(stream, starts[1:])]


@pytest.fixture
def text_jsonl(tmp_path):
    path = tmp_path / "docs.jsonl"
    texts = [f"document {i}: " + " ".join(f"word{j * i % 17}" for j in range(i % 9 + 1))
             for i in range(30)]
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path, texts


def test_batches_have_the_documented_layout(small_tokenizer):
    with make_batch_iterator(_config(STDLIB_JSON_PACKAGE), small_tokenizer) as batches:
        batch = next(batches)
    assert set(batch) == set(packing.ROW_FEATURES)
    for name, dtype in (("tokens", np.int32), ("targets", np.int32), ("loss_mask", np.float32),
                        ("segment_ids", np.int32), ("positions", np.int32)):
        assert batch[name].shape == (4, 64) and batch[name].dtype == dtype
    real = batch["segment_ids"] > 0
    np.testing.assert_array_equal(batch["loss_mask"], real.astype(np.float32))
    assert batch["tokens"].max() < small_tokenizer.vocab_size


def test_same_seed_same_batches_other_seed_other_batches(small_tokenizer):
    cfg = _config(STDLIB_JSON_PACKAGE)
    with make_batch_iterator(cfg, small_tokenizer) as a, \
            make_batch_iterator(cfg, small_tokenizer) as b, \
            make_batch_iterator(_config(STDLIB_JSON_PACKAGE, seed=1), small_tokenizer) as c:
        first, second, other = _take(a, 6), _take(b, 6), _take(c, 6)
    _assert_same_batches(first, second)
    assert any(not np.array_equal(x["tokens"], y["tokens"]) for x, y in zip(first, other))


def test_resumed_iterator_yields_exactly_the_batches_it_would_have(small_tokenizer):
    cfg = _config(STDLIB_JSON_PACKAGE)  # default read threads and batch prefetch
    with make_batch_iterator(cfg, small_tokenizer) as original:
        _take(original, 5)
        state = json.loads(json.dumps(original.get_state()))  # as a checkpoint stores it
        expected = _take(original, 7)
    assert state["grain"]["remainder_slices"]["tokens"] != [-1, -1]  # resumes mid-document
    with make_batch_iterator(cfg, small_tokenizer) as resumed:
        resumed.set_state(state)
        _assert_same_batches(_take(resumed, 7), expected)


def test_resume_crosses_an_epoch_boundary(small_tokenizer, text_jsonl):
    path, _ = text_jsonl
    cfg = _config(path, seq_len=16, batch_size=2)
    with make_batch_iterator(cfg, small_tokenizer) as original:
        _take(original, 9)
        state = original.get_state()
        expected = _take(original, 40)  # an epoch here is ~15 batches
    with make_batch_iterator(cfg, small_tokenizer) as resumed:
        resumed.set_state(state)
        _assert_same_batches(_take(resumed, 40), expected)


def test_a_state_from_another_pipeline_is_refused_naming_the_fields(small_tokenizer):
    with make_batch_iterator(_config(STDLIB_JSON_PACKAGE), small_tokenizer) as original:
        next(original)
        state = original.get_state()
    other = _config(STDLIB_JSON_PACKAGE, batch_size=8)
    with make_batch_iterator(other, small_tokenizer, shard_index=1, shard_count=2) as changed:
        with pytest.raises(ValueError, match=r"batch_size: saved 4, now 8.*shard_count: saved 1, "
                                             r"now 2.*shard_index: saved 0, now 1"):
            changed.set_state(state)


def test_shards_are_disjoint_and_cover_every_document_once(small_tokenizer, text_jsonl):
    path, texts = text_jsonl
    cfg = _config(path, seq_len=16, batch_size=1, num_epochs=1)  # batch 1 drops nothing
    seen = []
    for shard in range(3):
        with make_batch_iterator(cfg, small_tokenizer, shard_index=shard, shard_count=3) as it:
            docs = _documents_in(list(it), small_tokenizer)
        assert len(docs) == 10
        seen.append(docs)
    assert sorted(sum(seen, [])) == sorted(texts)
    assert all(not set(a) & set(b) for i, a in enumerate(seen) for b in seen[i + 1:])


def test_one_epoch_is_a_shuffled_pass_and_the_next_epoch_reshuffles(small_tokenizer, text_jsonl):
    path, texts = text_jsonl
    once = _config(path, seq_len=16, batch_size=1, num_epochs=1)
    with make_batch_iterator(once, small_tokenizer) as it:
        epoch = _documents_in(list(it), small_tokenizer)
    assert sorted(epoch) == sorted(texts) and epoch != texts
    twice = _config(path, seq_len=16, batch_size=1, num_epochs=2)
    with make_batch_iterator(twice, small_tokenizer) as it:
        both = _documents_in(list(it), small_tokenizer)
    assert both[:30] == epoch and sorted(both[30:]) == sorted(texts) and both[30:] != epoch


def test_eval_split_is_one_unshuffled_pass_of_held_out_documents(small_tokenizer, tmp_path):
    for i in range(40):
        (tmp_path / f"m{i:02d}.py").write_text(f"value = {i}\n" * (i % 5 + 1))
    cfg = data_config(source=str(tmp_path), seq_len=32, batch_size=3, eval_fraction=0.3)
    held_out = corpus.open_documents(str(tmp_path), split="eval", eval_fraction=0.3)
    with make_batch_iterator(cfg, small_tokenizer, split="eval") as it:
        batches = list(it)
    assert all(b["tokens"].shape == (3, 32) for b in batches)  # the last one padded
    expected = [held_out[i]["text"] for i in range(len(held_out))]
    assert _documents_in(batches, small_tokenizer) == expected


def test_conversations_keep_their_assistant_only_loss_mask(small_tokenizer, tmp_path):
    messages = [{"role": "system", "content": "Be brief."},
                {"role": "user", "content": "2+2?"},
                {"role": "assistant", "content": "",
                 "tool_call": {"tool": "calc", "args": {"e": "2+2"}}},
                {"role": "tool", "content": "4"},
                {"role": "assistant", "content": "4."}]
    path = tmp_path / "sft.jsonl"
    path.write_text(json.dumps({"messages": messages}) + "\n")
    rendered = chat.ChatTemplate(small_tokenizer).render(messages)
    n = len(rendered.ids) - 1
    cfg = data_config(source=str(path), seq_len=n + 5, batch_size=1, eval_fraction=0.0,
                      num_epochs=1)
    with make_batch_iterator(cfg, small_tokenizer) as it:
        row = {k: v[0] for k, v in next(it).items()}
    np.testing.assert_array_equal(row["tokens"][:n], rendered.ids[:-1])
    np.testing.assert_array_equal(row["targets"][:n], rendered.ids[1:])
    np.testing.assert_array_equal(row["loss_mask"][:n], rendered.loss_mask[1:])
    assert not row["loss_mask"][n:].any() and not row["segment_ids"][n:].any()
    assert row["targets"][n - 1] == small_tokenizer.token_id(tf.END)


def test_text_documents_are_framed_by_bos_and_eos(small_tokenizer):
    encoded = DocumentEncoder(small_tokenizer).map({"text": "x = 1"})
    ids = small_tokenizer.encode("x = 1")
    bos, eos = small_tokenizer.token_id(tf.BOS), small_tokenizer.token_id(tf.EOS)
    assert encoded["ids"].dtype == np.int32 and list(encoded["ids"]) == [bos, *ids, eos]
    assert encoded["loss_mask"].dtype == np.uint8 and encoded["loss_mask"].all()


@pytest.mark.parametrize("split", ["train", "eval"])
def test_token_cache_on_and_off_give_the_same_batches(small_tokenizer, text_jsonl, split):
    path, _ = text_jsonl
    batches = []
    for cache_tokens in (True, False):
        cfg = _config(path, seq_len=16, batch_size=2, cache_tokens=cache_tokens,
                      eval_fraction=0.3)
        with make_batch_iterator(cfg, small_tokenizer, split=split) as it:
            batches.append(_take(it, 12) if split == "train" else list(it))
    _assert_same_batches(*batches)


def test_bad_inputs_are_named(small_tokenizer, tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty holds no files ending in"):
        make_batch_iterator(_config(tmp_path / "empty"), small_tokenizer)
    with pytest.raises(FileNotFoundError, match="data source .*absent does not exist"):
        make_batch_iterator(_config(tmp_path / "absent"), small_tokenizer)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": "ok"}\n{"text": oops}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:3: not valid JSON"):
        make_batch_iterator(_config(bad), small_tokenizer)
    with pytest.raises(ValueError, match=r"shard_index=2 must be in \[0, shard_count=2\)"):
        make_batch_iterator(_config(STDLIB_JSON_PACKAGE), small_tokenizer, shard_index=2,
                            shard_count=2)
    with pytest.raises(ValueError, match="shard_count=9 exceeds the 5 documents"):
        make_batch_iterator(_config(STDLIB_JSON_PACKAGE), small_tokenizer, shard_count=9)
    with pytest.raises(ValueError, match="field 'seq_len' = 0 is invalid: must be positive"):
        make_batch_iterator(_config(STDLIB_JSON_PACKAGE, seq_len=0), small_tokenizer)
    with pytest.raises(KeyError, match="seq_lenn"):
        data_config(seq_lenn=128)


def test_closed_iterator_says_so(small_tokenizer):
    it = make_batch_iterator(_config(STDLIB_JSON_PACKAGE), small_tokenizer)
    next(it)
    it.close()
    it.close()
    with pytest.raises(ValueError, match="closed"):
        next(it)
    with pytest.raises(ValueError, match="closed"):
        it.get_state()
