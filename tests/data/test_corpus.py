"""Corpus: file discovery, decoding, the held-out split, JSONL indexing and its errors."""
import json

import pytest

from c2jax.data import corpus


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_source_files_skip_installed_hidden_and_bytecode_dirs(tmp_path):
    for rel in ("b.py", "a/x.py", "a/notes.txt", "site-packages/pkg.py", "dist-packages/d.py",
                "__pycache__/c.py", ".venv/v.py", "z/.git/hooks.py"):
        _write(tmp_path / rel, "x = 1\n")
    assert corpus.list_source_files(tmp_path) == ["a/x.py", "b.py"]
    assert corpus.list_source_files(tmp_path, (".txt", ".py")) == ["a/notes.txt", "a/x.py", "b.py"]


def test_stdlib_corpus_has_no_site_packages():
    relpaths = corpus.list_source_files(corpus.stdlib_dir())
    assert len(relpaths) > 500 and "json/decoder.py" in relpaths
    assert not any("site-packages" in p for p in relpaths)


def test_missing_and_empty_directories_are_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="corpus directory .*nope does not exist"):
        corpus.list_source_files(tmp_path / "nope")
    _write(tmp_path / "f.py", "")
    with pytest.raises(NotADirectoryError, match="f.py is not a directory"):
        corpus.list_source_files(tmp_path / "f.py")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="empty holds no files ending in"):
        corpus.list_source_files(tmp_path / "empty")


def test_undecodable_bytes_are_replaced(tmp_path):
    (tmp_path / "latin1.py").write_bytes("s = 'café'\n".encode("latin-1"))
    assert corpus.read_source_text(tmp_path / "latin1.py") == "s = 'caf\ufffd'\n"


def test_held_out_split_is_disjoint_covering_stable_and_near_the_fraction():
    keys = [f"pkg/module_{i}.py".encode() for i in range(2000)]
    train = corpus.split_indices(keys, "train", 0.2)
    held_out = corpus.split_indices(keys, "eval", 0.2)
    assert sorted(train + held_out) == list(range(2000))
    assert 300 < len(held_out) < 500
    # Adding documents never moves an existing one between splits.
    more = keys + [f"new/file_{i}.py".encode() for i in range(500)]
    assert corpus.split_indices(more, "eval", 0.2)[:len(held_out)] == held_out
    assert corpus.split_indices(keys, "eval", 0.0) == []
    with pytest.raises(ValueError, match="split 'test' is unknown"):
        corpus.split_indices(keys, "test", 0.2)


def test_jsonl_records_are_read_by_index_and_blank_lines_skipped(tmp_path):
    messages = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join([json.dumps({"text": "première ligne", "id": 7}), "",
                               json.dumps({"messages": messages}), "   ",
                               json.dumps({"text": "last"})]) + "\n")
    offsets, line_numbers, keys = corpus.index_jsonl(path)
    assert line_numbers == [1, 3, 5]
    docs = corpus.JsonlDocuments(path, offsets, line_numbers)
    assert len(docs) == 3
    assert docs[0] == {"text": "première ligne"}  # metadata keys are dropped
    assert docs[1] == {"messages": messages}
    assert docs[2] == {"text": "last"}


@pytest.mark.parametrize("line, error", [
    ('{"text": "ok"', r"bad.jsonl:2: not valid JSON"),
    ('["text"]', r"bad.jsonl:2: a record must be a JSON object .* got list"),
    ('{"txt": "typo"}', r"bad.jsonl:2: a record needs exactly one of \"text\" or \"messages\", "
                        r"found keys \['txt'\]"),
    ('{"text": "a", "messages": []}', r"bad.jsonl:2: a record needs exactly one"),
    ('{"text": 5}', r"bad.jsonl:2: \"text\" must be a string, got int"),
    ('{"messages": [{"role": "user", "content": "x"}, {"role": "bot", "content": "y"}]}',
     r"bad.jsonl:2: message 1 has role 'bot'"),
])
def test_bad_jsonl_lines_name_file_and_line(tmp_path, line, error):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"text": "fine"}) + "\n" + line + "\n")
    with pytest.raises(ValueError, match=error):
        corpus.index_jsonl(path)


def test_non_utf8_jsonl_line_is_named(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "caf\xe9"}\n')
    with pytest.raises(ValueError, match="bad.jsonl:2: not valid JSON"):
        corpus.index_jsonl(path)


def test_open_documents_errors_name_the_source(tmp_path):
    with pytest.raises(FileNotFoundError, match="data source .*missing.jsonl does not exist"):
        corpus.open_documents(str(tmp_path / "missing.jsonl"), split="train", eval_fraction=0.1)
    _write(tmp_path / "data.csv", "a,b\n")
    with pytest.raises(ValueError, match="data.csv is a file but not .jsonl"):
        corpus.open_documents(str(tmp_path / "data.csv"), split="train", eval_fraction=0.1)
    (tmp_path / "empty.jsonl").write_text("\n\n")
    with pytest.raises(ValueError, match="empty.jsonl holds no records"):
        corpus.open_documents(str(tmp_path / "empty.jsonl"), split="train", eval_fraction=0.1)
    _write(tmp_path / "one" / "a.py", "x = 1\n")
    with pytest.raises(ValueError, match="the 'eval' split of .*one is empty"):
        corpus.open_documents(str(tmp_path / "one"), split="eval", eval_fraction=0.0)


def test_open_documents_reads_a_directory_split(tmp_path):
    for i in range(40):
        _write(tmp_path / f"m{i}.py", f"value = {i}\n")
    train = corpus.open_documents(str(tmp_path), split="train", eval_fraction=0.25)
    held_out = corpus.open_documents(str(tmp_path), split="eval", eval_fraction=0.25)
    assert len(train) + len(held_out) == 40 and len(held_out) > 0
    texts = {train[i]["text"] for i in range(len(train))} | {
        held_out[i]["text"] for i in range(len(held_out))}
    assert texts == {f"value = {i}\n" for i in range(40)}
