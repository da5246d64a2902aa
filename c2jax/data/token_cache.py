"""Encode a corpus once: token ids and loss masks of every document, cached on disk.

Byte-level BPE encodes only ~0.2 M tokens/s per core here (the stdlib takes ~45 s), while
packing pre-encoded ids runs at ~2 M tokens/s; tokenising on the fly would make the input
pipeline, not the model, the bottleneck of a tiny CPU run. So the first run encodes the
documents of a split in order and stores them, concatenated, under
`cache_dir()/tokens/<key>/`:

    ids.npy        int32  [total_tokens]   every document's ids, one after another
    loss_mask.npy  uint8  [total_tokens]   the matching per-token loss mask
    offsets.npy    int64  [documents + 1]  document i is [offsets[i], offsets[i + 1])

Later runs memory-map them. The key hashes the documents' fingerprint (paths, sizes, mtimes),
the tokenizer's fingerprint, and the encoding of two probe documents, so any change to the
corpus, the tokenizer, the BOS/EOS framing or the chat template selects a new entry.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import tqdm

from c2jax.data.tokenizer import cache_dir

EncodeFn = Callable[[Mapping[str, Any]], Mapping[str, np.ndarray]]
#: Encoded by every cache user to detect changes in how documents become ids.
_PROBE_DOCUMENTS = (
    {"text": "def probe(x):\n    return x  # <|end|> é\n"},
    {"messages": [{"role": "user", "content": "probe"},
                  {"role": "assistant", "content": "ok", "tool_call": {"tool": "t", "args": {}}}]},
)
_FILES = ("ids.npy", "loss_mask.npy", "offsets.npy")


class EncodedDocuments:
    """Random-access source: document `i` is `{"ids": int32 [n], "loss_mask": uint8 [n]}`."""

    def __init__(self, directory: str | os.PathLike):
        self.directory = Path(directory)
        self.ids, self.loss_mask, self.offsets = (
            np.load(self.directory / name, mmap_mode="r") for name in _FILES)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, index: int) -> dict[str, np.ndarray]:
        start, stop = self.offsets[index], self.offsets[index + 1]
        return {"ids": self.ids[start:stop], "loss_mask": self.loss_mask[start:stop]}

    @property
    def num_tokens(self) -> int:
        return int(self.offsets[-1])

    def __repr__(self) -> str:
        return f"EncodedDocuments({str(self.directory)!r}, {len(self)} documents)"


def cache_key(documents_fingerprint: str, tokenizer_fingerprint: str, encode: EncodeFn) -> str:
    """The cache entry name for these documents encoded by `encode` with this tokenizer."""
    key = hashlib.sha256()
    key.update(f"{documents_fingerprint}\0{tokenizer_fingerprint}\0".encode())
    for probe in _PROBE_DOCUMENTS:
        encoded = encode(probe)
        key.update(np.asarray(encoded["ids"], np.int32).tobytes())
        key.update(np.asarray(encoded["loss_mask"], np.uint8).tobytes())
    return key.hexdigest()[:24]


def encode_once(documents, encode: EncodeFn, *, documents_fingerprint: str,
                tokenizer_fingerprint: str) -> EncodedDocuments:
    """`documents` (random access) encoded by `encode`, from the cache or encoded now and cached."""
    entry = cache_dir() / "tokens" / cache_key(documents_fingerprint, tokenizer_fingerprint, encode)
    if not all((entry / name).is_file() for name in _FILES):
        _build(documents, encode, entry)
    return EncodedDocuments(entry)


def _build(documents, encode: EncodeFn, entry: Path) -> None:
    ids, masks, offsets = [], [], [0]
    for i in tqdm.trange(len(documents), desc=f"encoding {documents!r} (once; cached)",
                         unit="doc", leave=False):
        encoded = encode(documents[i])
        ids.append(np.asarray(encoded["ids"], np.int32))
        masks.append(np.asarray(encoded["loss_mask"], np.uint8))
        offsets.append(offsets[-1] + len(ids[-1]))
    entry.parent.mkdir(parents=True, exist_ok=True)
    # Written in a scratch directory and renamed into place, so a concurrent reader or writer
    # (another test process, another host on a shared disk) never sees a partial entry.
    scratch = Path(tempfile.mkdtemp(dir=entry.parent, prefix=f".{entry.name}-"))
    np.save(scratch / "ids.npy", np.concatenate(ids))
    np.save(scratch / "loss_mask.npy", np.concatenate(masks))
    np.save(scratch / "offsets.npy", np.asarray(offsets, np.int64))
    (scratch / "documents.json").write_text(json.dumps({"source": repr(documents),
                                                        "documents": len(documents)}))
    try:
        os.replace(scratch, entry)
    except OSError:  # another process finished the same entry first; theirs is identical
        shutil.rmtree(scratch, ignore_errors=True)
