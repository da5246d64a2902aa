"""Tokenizer: training, the special-token policy, round trips, save/load, caching, errors."""
import pickle
from pathlib import Path

import pytest
import tokenizers
from tokenizers import models, pre_tokenizers

from c2jax.data import corpus, tokenizer
from environments.tool_format import END, SPECIAL_TOKENS

SMALL_VOCAB = 512  # as the `small_tokenizer` fixture


def test_special_tokens_are_the_first_ids_and_pad_is_zero(small_tokenizer):
    assert [small_tokenizer.token_id(t) for t in SPECIAL_TOKENS] == list(range(len(SPECIAL_TOKENS)))
    assert small_tokenizer.pad_id == 0
    assert small_tokenizer.vocab_size == SMALL_VOCAB


def test_round_trip_on_stdlib_text_with_non_ascii(small_tokenizer, sample_files):
    texts = [corpus.read_source_text(p) for p in sample_files]
    assert sum(ord(c) > 127 for c in texts[0]) > 10  # shlex.py: accented letters
    for text in texts + ["naïve café — 中文 🙂 \t\r\n\x00"]:
        ids = small_tokenizer.encode(text)
        assert small_tokenizer.decode(ids) == text
        assert len(ids) < len(text.encode())  # BPE merges actually compress the text


def test_round_trip_on_a_file_that_is_not_utf8(small_tokenizer):
    path = corpus.stdlib_dir() / "test" / "encoded_modules" / "module_iso_8859_1.py"
    text = corpus.read_source_text(path)
    assert "\ufffd" in text
    assert small_tokenizer.decode(small_tokenizer.encode(text)) == text


def test_special_token_strings_in_text_stay_plain_text(small_tokenizer):
    text = f"if line == '{END}': stop  # <|assistant|> <|pad|>"
    ids = small_tokenizer.encode(text)
    assert not set(ids) & set(range(len(SPECIAL_TOKENS)))
    assert small_tokenizer.decode(ids) == text
    end_id = small_tokenizer.token_id(END)
    assert small_tokenizer.decode([end_id]) == END


def test_pickling_keeps_the_plain_text_policy(small_tokenizer):
    restored = pickle.loads(pickle.dumps(small_tokenizer))
    assert restored.encode(END) == small_tokenizer.encode(END) != [small_tokenizer.token_id(END)]
    assert restored.fingerprint() == small_tokenizer.fingerprint()


def test_save_then_load_from_directory_or_file(small_tokenizer, tmp_path):
    path = tokenizer.save_tokenizer(small_tokenizer, tmp_path / "ckpt" / "step_10")
    assert path == tmp_path / "ckpt" / "step_10" / "tokenizer.json"
    for where in (path.parent, path):
        loaded = tokenizer.load_tokenizer(where)
        assert loaded.fingerprint() == small_tokenizer.fingerprint()
        assert loaded.encode(f"x = 1 {END}") == small_tokenizer.encode(f"x = 1 {END}")


def test_load_any_tokenizer_json_and_name_a_missing_special_token(tmp_path):
    vocab = {"[UNK]": 0, "hello": 1, "world": 2}
    foreign = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    foreign.pre_tokenizer = pre_tokenizers.Whitespace()
    foreign.save(str(tmp_path / "tokenizer.json"))
    loaded = tokenizer.load_tokenizer(tmp_path)
    assert loaded.encode("hello world") == [1, 2]
    with pytest.raises(KeyError, match=r"<\|end\|>"):
        loaded.token_id(END)


def test_load_errors_name_the_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="no tokenizer at .*nowhere"):
        tokenizer.load_tokenizer(tmp_path / "nowhere")
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json is not a valid HF tokenizer.json"):
        tokenizer.load_tokenizer(tmp_path)


def test_training_on_an_empty_corpus_is_an_error():
    with pytest.raises(ValueError, match="empty corpus"):
        tokenizer.train_tokenizer([], SMALL_VOCAB)
    with pytest.raises(ValueError, match="empty corpus"):
        tokenizer.train_tokenizer(["", ""], SMALL_VOCAB)


def test_a_vocabulary_smaller_than_bytes_plus_specials_is_an_error():
    with pytest.raises(ValueError, match="vocab_size=100 is too small.*at least 268"):
        tokenizer.train_tokenizer(["x = 1"], 100)


def test_cached_tokenizer_trains_once_per_corpus_state(tmp_path, monkeypatch, sample_files):
    monkeypatch.setenv(tokenizer.CACHE_ENV_VAR, str(tmp_path / "cache"))
    assert tokenizer.cache_dir() == tmp_path / "cache"
    root = tmp_path / "corpus"
    root.mkdir()
    for p in sample_files[:2]:
        (root / p.name).write_bytes(p.read_bytes())

    first = tokenizer.cached_tokenizer(root, SMALL_VOCAB)
    [entry] = (tmp_path / "cache" / "tokenizers").iterdir()
    saved_at = (entry / "tokenizer.json").stat().st_mtime_ns
    again = tokenizer.cached_tokenizer(root, SMALL_VOCAB)
    assert again.fingerprint() == first.fingerprint()
    assert (entry / "tokenizer.json").stat().st_mtime_ns == saved_at  # loaded, not retrained

    (root / "extra.py").write_text("def extra():\n    return 'added later'\n")
    tokenizer.cached_tokenizer(root, SMALL_VOCAB)
    tokenizer.cached_tokenizer(root, SMALL_VOCAB + 64)
    assert len(list((tmp_path / "cache" / "tokenizers").iterdir())) == 3


def test_cached_tokenizer_errors_name_the_directory(tmp_path, monkeypatch):
    monkeypatch.setenv(tokenizer.CACHE_ENV_VAR, str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="corpus directory .*missing does not exist"):
        tokenizer.cached_tokenizer(tmp_path / "missing", SMALL_VOCAB)
    (tmp_path / "empty" / "site-packages").mkdir(parents=True)
    (tmp_path / "empty" / "site-packages" / "hidden.py").write_text("x = 1\n")
    with pytest.raises(ValueError, match=r"empty holds no files ending in \('.py',\)"):
        tokenizer.cached_tokenizer(tmp_path / "empty", SMALL_VOCAB)


def test_tokenizer_from_config_loads_the_configured_path(small_tokenizer, tmp_path):
    from c2jax.data.config import data_config
    tokenizer.save_tokenizer(small_tokenizer, tmp_path)
    cfg = data_config(tokenizer={"path": str(tmp_path), "vocab_size": 8192})
    assert tokenizer.tokenizer_from_config(cfg.tokenizer).fingerprint() == \
        small_tokenizer.fingerprint()


def test_default_cache_dir_is_under_the_repository(monkeypatch):
    monkeypatch.delenv(tokenizer.CACHE_ENV_VAR, raising=False)
    assert tokenizer.cache_dir() == Path(__file__).resolve().parents[2] / ".cache"
