"""Documents: which exist, how to read one, and which belong to the held-out split.

A document is a dict, either `{"text": str}` (source code, prose) or `{"messages": [...]}` (a
conversation in the `c2jax.data.chat` format). A source is random access (`len(source)`,
`source[i]`), the protocol grain's `MapDataset.source` needs to shuffle and shard by index.

- `SourceFileDocuments`: one document per file under a directory (default: the `.py` files of
  this interpreter's standard library, `source="stdlib"`). Files are decoded as UTF-8 with
  replacement, so a Latin-1 file costs a few U+FFFD characters, not a crash.
- `JsonlDocuments`: one document per non-blank line of a JSONL file, `{"text": ...}` or
  `{"messages": [...]}` (other keys are ignored as metadata). Every line is parsed and checked
  when the source is opened, so a bad line fails the run at start, naming the file and line,
  not hours in; afterwards only byte offsets are kept and lines are re-read on demand.

Held-out split: a document's key (a file's path relative to the root, or a JSONL line's bytes)
is hashed; it is held out ("eval") when the hash, as a fraction of 2**64, is below
`eval_fraction`. The assignment of one document never changes when others are added or removed.
"""
from __future__ import annotations

import hashlib
import json
import os
import sysconfig
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from c2jax.data import chat

DEFAULT_EXTENSIONS = (".py",)
SPLITS = ("train", "eval")
#: Directory names never descended into: installed packages, bytecode, hidden (.git, .venv).
EXCLUDED_DIRS = frozenset({"site-packages", "dist-packages", "__pycache__"})
STDLIB_SOURCE = "stdlib"


def stdlib_dir() -> Path:
    """The running interpreter's standard library directory (its site-packages is skipped)."""
    return Path(sysconfig.get_paths()["stdlib"])


def list_source_files(root: str | os.PathLike,
                      extensions: Sequence[str] = DEFAULT_EXTENSIONS) -> list[str]:
    """Sorted POSIX paths, relative to `root`, of files ending in one of `extensions`."""
    root = Path(root)
    if not root.exists():
        raise FileNotFoundError(f"corpus directory {root} does not exist")
    if not root.is_dir():
        raise NotADirectoryError(f"corpus path {root} is not a directory")
    suffixes = tuple(extensions)
    relpaths = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in EXCLUDED_DIRS and not d.startswith(".")]
        for name in files:
            if name.endswith(suffixes):
                relpaths.append((Path(directory) / name).relative_to(root).as_posix())
    if not relpaths:
        raise ValueError(f"corpus directory {root} holds no files ending in {suffixes} "
                         f"(skipped: hidden directories and {sorted(EXCLUDED_DIRS)})")
    return sorted(relpaths)


def read_source_text(path: str | os.PathLike) -> str:
    """The file's text, UTF-8 with undecodable bytes replaced by U+FFFD."""
    return Path(path).read_bytes().decode("utf-8", errors="replace")


def is_held_out(key: bytes, eval_fraction: float) -> bool:
    """Whether the document with this key belongs to the held-out ("eval") split."""
    digest = hashlib.sha256(key).digest()
    return int.from_bytes(digest[:8], "little") < eval_fraction * 2.0**64


def split_indices(keys: Sequence[bytes], split: str, eval_fraction: float) -> list[int]:
    """Indices of the documents (given by their keys) that belong to `split`."""
    if split not in SPLITS:
        raise ValueError(f"split {split!r} is unknown; choose one of {SPLITS}")
    if not 0.0 <= eval_fraction < 1.0:
        raise ValueError(f"eval_fraction={eval_fraction} must be in [0, 1)")
    want_held_out = split == "eval"
    return [i for i, key in enumerate(keys) if is_held_out(key, eval_fraction) == want_held_out]


class SourceFileDocuments:
    """Document `i` is `{"text": <file relpaths[i] under root>}`."""

    def __init__(self, root: str | os.PathLike, relpaths: Sequence[str]):
        self.root = Path(root)
        self.relpaths = list(relpaths)

    def __len__(self) -> int:
        return len(self.relpaths)

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {"text": read_source_text(self.root / self.relpaths[index])}

    def fingerprint(self) -> str:
        """Changes when a file is added, removed or rewritten (by path, size and mtime)."""
        digest = hashlib.sha256(str(self.root.resolve()).encode())
        for relpath in self.relpaths:
            stat = (self.root / relpath).stat()
            digest.update(f"\0{relpath}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"SourceFileDocuments({str(self.root)!r}, {len(self)} files)"


class JsonlDocuments:
    """Document `i` is the JSONL record at byte `offsets[i]` (file line `line_numbers[i]`)."""

    def __init__(self, path: str | os.PathLike, offsets: Sequence[int],
                 line_numbers: Sequence[int]):
        self.path = Path(path)
        self.offsets = np.asarray(offsets, dtype=np.int64)
        self.line_numbers = np.asarray(line_numbers, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.offsets)

    def __getitem__(self, index: int) -> dict[str, Any]:
        with open(self.path, "rb") as f:
            f.seek(int(self.offsets[index]))
            record = json.loads(f.readline())
        return {key: record[key] for key in ("text", "messages") if key in record}

    def fingerprint(self) -> str:
        """Changes when the file is rewritten or a different set of its lines is selected."""
        stat = self.path.stat()
        digest = hashlib.sha256(
            f"{self.path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}".encode())
        digest.update(self.offsets.tobytes())
        return digest.hexdigest()

    def __repr__(self) -> str:
        return f"JsonlDocuments({str(self.path)!r}, {len(self)} records)"


def index_jsonl(path: str | os.PathLike) -> tuple[list[int], list[int], list[bytes]]:
    """Checks every line of a JSONL file; returns (byte offsets, line numbers, keys) of records.

    Raises ValueError naming `path:line` for a line that is not a JSON object with a string
    "text" or a valid "messages" list.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"JSONL file {path} does not exist")
    offsets, line_numbers, keys = [], [], []
    offset = 0
    with open(path, "rb") as f:
        for line_number, line in enumerate(f, start=1):
            stripped = line.strip()
            if stripped:
                _check_record(stripped, f"{path}:{line_number}")
                offsets.append(offset)
                line_numbers.append(line_number)
                keys.append(stripped)
            offset += len(line)
    if not offsets:
        raise ValueError(f"JSONL file {path} holds no records (it is empty or all blank lines)")
    return offsets, line_numbers, keys


def _check_record(line: bytes, where: str) -> None:
    try:
        record = json.loads(line)
    except ValueError as e:  # JSONDecodeError, or UnicodeDecodeError for non-UTF-8 bytes
        raise ValueError(f"{where}: not valid JSON ({e})") from None
    if not isinstance(record, dict):
        raise ValueError(f"{where}: a record must be a JSON object with \"text\" or "
                         f"\"messages\", got {type(record).__name__}")
    has_text, has_messages = "text" in record, "messages" in record
    if has_text == has_messages:
        raise ValueError(f"{where}: a record needs exactly one of \"text\" or \"messages\", "
                         f"found keys {sorted(record)}")
    if has_text and not isinstance(record["text"], str):
        raise ValueError(f"{where}: \"text\" must be a string, got {type(record['text']).__name__}")
    if has_messages:
        try:
            chat.validate_messages(record["messages"])
        except chat.ChatError as e:
            raise ValueError(f"{where}: {e}") from None


def open_documents(source: str, *, split: str, eval_fraction: float,
                   extensions: Sequence[str] = DEFAULT_EXTENSIONS,
                   ) -> SourceFileDocuments | JsonlDocuments:
    """The documents of `split` in `source`: "stdlib", a directory of source files, or a .jsonl.

    Raises an error naming the path when it is missing, empty, of an unknown kind, or when the
    split selects no documents.
    """
    path = stdlib_dir() if source == STDLIB_SOURCE else Path(source)
    if path.is_dir():
        relpaths = list_source_files(path, extensions)
        chosen = split_indices([p.encode() for p in relpaths], split, eval_fraction)
        documents = SourceFileDocuments(path, [relpaths[i] for i in chosen])
        total = len(relpaths)
    elif path.is_file() and path.suffix == ".jsonl":
        offsets, line_numbers, keys = index_jsonl(path)
        chosen = split_indices(keys, split, eval_fraction)
        documents = JsonlDocuments(path, [offsets[i] for i in chosen],
                                   [line_numbers[i] for i in chosen])
        total = len(offsets)
    elif path.exists():
        raise ValueError(f"data source {path} is a file but not .jsonl: pass a directory of "
                         f"source files, a .jsonl file, or {STDLIB_SOURCE!r}")
    else:
        raise FileNotFoundError(f"data source {path} does not exist")
    if len(documents) == 0:
        raise ValueError(f"the {split!r} split of {path} is empty: eval_fraction={eval_fraction} "
                         f"of {total} documents selects none; change eval_fraction")
    return documents
