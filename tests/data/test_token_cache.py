"""Token cache: cached documents equal fresh encodings; reused until corpus or tokenizer change."""
import numpy as np

from c2jax.data import corpus, token_cache, tokenizer
from c2jax.data.pipeline import DocumentEncoder


def _encode(documents, tok):
    return token_cache.encode_once(documents, DocumentEncoder(tok).map,
                                   documents_fingerprint=documents.fingerprint(),
                                   tokenizer_fingerprint=tok.fingerprint())


def _entries():
    return sorted((tokenizer.cache_dir() / "tokens").iterdir())


def test_cached_documents_equal_fresh_encodings_and_are_reused(small_tokenizer, tmp_path):
    for i, name in enumerate(("a.py", "b.py", "c.py")):
        (tmp_path / name).write_text(f"def f{i}():\n    return 'caf\u00e9 {i}'\n" * (i + 1))
    documents = corpus.SourceFileDocuments(tmp_path, ["a.py", "b.py", "c.py"])
    encoder = DocumentEncoder(small_tokenizer)

    cached = _encode(documents, small_tokenizer)
    assert len(cached) == 3
    for i in range(3):
        fresh = encoder.map(documents[i])
        np.testing.assert_array_equal(cached[i]["ids"], fresh["ids"])
        np.testing.assert_array_equal(cached[i]["loss_mask"], fresh["loss_mask"])
    assert cached.num_tokens == sum(len(encoder.map(documents[i])["ids"]) for i in range(3))

    entries = [e for e in _entries() if not e.name.startswith(".")]
    written = (cached.directory / "ids.npy").stat().st_mtime_ns
    again = _encode(documents, small_tokenizer)
    assert again.directory == cached.directory
    assert (again.directory / "ids.npy").stat().st_mtime_ns == written  # read, not rebuilt

    (tmp_path / "b.py").write_text("changed = True\n")
    changed = _encode(documents, small_tokenizer)
    assert changed.directory != cached.directory
    assert small_tokenizer.decode(changed[1]["ids"][1:-1]) == "changed = True\n"
    assert len([e for e in _entries() if not e.name.startswith(".")]) == len(entries) + 1


def test_another_tokenizer_gets_its_own_entry(small_tokenizer, sample_files, tmp_path):
    other = tokenizer.train_tokenizer([corpus.read_source_text(sample_files[0])], 300)
    (tmp_path / "m.py").write_text("print('hello')\n")
    documents = corpus.SourceFileDocuments(tmp_path, ["m.py"])
    mine, theirs = _encode(documents, small_tokenizer), _encode(documents, other)
    assert mine.directory != theirs.directory
    assert other.decode(theirs[0]["ids"][1:-1]) == "print('hello')\n"


def test_conversations_are_cached_with_their_loss_mask(small_tokenizer, tmp_path):
    path = tmp_path / "chat.jsonl"
    path.write_text('{"messages": [{"role": "user", "content": "hi"}, '
                    '{"role": "assistant", "content": "hello"}]}\n')
    offsets, line_numbers, _ = corpus.index_jsonl(path)
    documents = corpus.JsonlDocuments(path, offsets, line_numbers)
    cached = _encode(documents, small_tokenizer)
    fresh = DocumentEncoder(small_tokenizer).map(documents[0])
    np.testing.assert_array_equal(cached[0]["loss_mask"], fresh["loss_mask"])
    assert 0 < cached[0]["loss_mask"].sum() < len(cached[0]["loss_mask"])
