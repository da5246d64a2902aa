"""Byte-level BPE tokenizer (HF `tokenizers`): train, cache, save next to checkpoints, load.

The special tokens of `environments.tool_format.SPECIAL_TOKENS` are reserved first, so
`<|pad|>` is id 0 and each special token is one id. Byte-level means any text (any language,
any bytes decoded with replacement) encodes without an unknown token.

Special tokens and plain text: `Tokenizer.encode` treats text as text. A document or a tool
output that contains the literal string "<|end|>" is encoded as the bytes '<', '|', 'end', ...,
never as the special id, so data cannot forge turn boundaries (prompt injection through tool
output, or this repository's own sources in a corpus). Special ids are emitted only on purpose,
by `c2jax.data.chat` via `Tokenizer.token_id`. `decode` renders special ids as their strings.

Caching: `cached_tokenizer` keys a trained tokenizer by the corpus fingerprint (file paths,
sizes, mtimes), the vocabulary size, the special tokens and the `tokenizers` version, and stores it
under `cache_dir()` (`$C2JAX_CACHE_DIR`, default `<repo>/.cache`), so tests and runs train once.
"""
from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import tokenizers
from absl import logging
from tokenizers import decoders, models, pre_tokenizers, trainers

from c2jax.data import corpus
from environments.tool_format import SPECIAL_TOKENS

TOKENIZER_FILE = "tokenizer.json"
CACHE_ENV_VAR = "C2JAX_CACHE_DIR"
#: 256 byte symbols plus the reserved special tokens: the smallest useful vocabulary.
MIN_VOCAB_SIZE = 256 + len(SPECIAL_TOKENS)
_REPO_ROOT = Path(__file__).resolve().parents[2]


class Tokenizer:
    """A HF `tokenizers.Tokenizer` with this project's encode policy (see module docstring)."""

    def __init__(self, hf_tokenizer: tokenizers.Tokenizer):
        self.hf = hf_tokenizer
        # Not stored in tokenizer.json, so it is set on every load: literal special-token
        # strings in text are encoded as ordinary text.
        self.hf.encode_special_tokens = True

    def __reduce__(self):
        # Grain worker processes receive the tokenizer by pickling; rebuilding through
        # __init__ keeps the encode policy, which HF's own pickling would drop.
        return _tokenizer_from_json, (self.hf.to_str(),)

    @property
    def vocab_size(self) -> int:
        """Number of ids, special tokens included (the embedding table needs this many rows)."""
        return self.hf.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`, no special tokens added or recognised."""
        return self.hf.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Sequence[int]) -> str:
        """Text of `ids`; special ids appear as their strings (e.g. "<|end|>")."""
        return self.hf.decode(list(ids), skip_special_tokens=False)

    def token_id(self, token: str) -> int:
        """Id of one vocabulary entry (used for special tokens); KeyError naming it if absent."""
        token_id = self.hf.token_to_id(token)
        if token_id is None:
            raise KeyError(f"token {token!r} is not in this tokenizer's vocabulary; the chat "
                           f"template needs all of {SPECIAL_TOKENS} (train with "
                           "c2jax.data.tokenizer.train_tokenizer, or add them as special tokens)")
        return token_id

    @property
    def pad_id(self) -> int:
        """Id of `<|pad|>`: 0 for tokenizers trained here (packed rows pad with 0 regardless)."""
        return self.token_id(SPECIAL_TOKENS[0])

    def fingerprint(self) -> str:
        """Hex digest of the serialised tokenizer: equal fingerprints encode identically."""
        return hashlib.sha256(self.hf.to_str().encode()).hexdigest()


def _tokenizer_from_json(serialised: str) -> Tokenizer:
    return Tokenizer(tokenizers.Tokenizer.from_str(serialised))


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    """Trains a byte-level BPE with `vocab_size` ids (special tokens first, `<|pad|>` = 0)."""
    if vocab_size < MIN_VOCAB_SIZE:
        raise ValueError(f"vocab_size={vocab_size} is too small: a byte-level BPE needs 256 byte "
                         f"tokens plus {len(SPECIAL_TOKENS)} special tokens, so at least "
                         f"{MIN_VOCAB_SIZE}")
    seen = {"texts": 0, "chars": 0}

    def counted(texts: Iterable[str]):
        for text in texts:
            seen["texts"] += 1
            seen["chars"] += len(text)
            yield text

    hf = tokenizers.Tokenizer(models.BPE())
    hf.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    hf.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIAL_TOKENS),
        # All 256 byte symbols are in the vocabulary even if the corpus lacks some bytes.
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    hf.train_from_iterator(counted(texts), trainer=trainer)
    if seen["chars"] == 0:
        raise ValueError(f"cannot train a tokenizer on an empty corpus ({seen['texts']} texts, "
                         "0 characters)")
    return Tokenizer(hf)


def save_tokenizer(tokenizer: Tokenizer, directory: str | os.PathLike) -> Path:
    """Writes `directory/tokenizer.json` (e.g. a checkpoint directory) and returns its path."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / TOKENIZER_FILE
    # Write-then-rename so a reader (or a concurrent writer) never sees a half-written file.
    with tempfile.NamedTemporaryFile("w", dir=directory, suffix=".tmp", delete=False) as f:
        f.write(tokenizer.hf.to_str())
    os.replace(f.name, path)
    return path


def load_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """Loads any HF `tokenizer.json`, given the file or a directory holding one."""
    path = Path(path)
    if path.is_dir():
        path = path / TOKENIZER_FILE
    if not path.is_file():
        raise FileNotFoundError(f"no tokenizer at {path}: pass a tokenizer.json file or a "
                                f"directory (e.g. a checkpoint) that holds {TOKENIZER_FILE}")
    try:
        return Tokenizer(tokenizers.Tokenizer.from_file(str(path)))
    except Exception as e:  # tokenizers raises a bare Exception for malformed JSON
        raise ValueError(f"{path} is not a valid HF tokenizer.json: {e}") from None


def cache_dir() -> Path:
    """Where trained tokenizers are cached: `$C2JAX_CACHE_DIR`, else `<repo>/.cache`."""
    return Path(os.environ.get(CACHE_ENV_VAR) or _REPO_ROOT / ".cache")


def cached_tokenizer(root: str | os.PathLike, vocab_size: int,
                     extensions: Sequence[str] = corpus.DEFAULT_EXTENSIONS) -> Tokenizer:
    """A tokenizer trained on the source files under `root`, trained once and then cached."""
    root = Path(root)
    relpaths = corpus.list_source_files(root, extensions)
    key = hashlib.sha256()
    for part in (tokenizers.__version__, str(vocab_size), *SPECIAL_TOKENS,
                 corpus.SourceFileDocuments(root, relpaths).fingerprint()):
        key.update(part.encode() + b"\0")
    entry = cache_dir() / "tokenizers" / f"{root.name}-v{vocab_size}-{key.hexdigest()[:16]}"
    if (entry / TOKENIZER_FILE).is_file():
        return load_tokenizer(entry)
    logging.info("training a %d-token BPE on %d files under %s (cached in %s)",
                 vocab_size, len(relpaths), root, entry)
    tokenizer = train_tokenizer((corpus.read_source_text(root / p) for p in relpaths), vocab_size)
    save_tokenizer(tokenizer, entry)
    return tokenizer


def default_tokenizer(vocab_size: int = 8192) -> Tokenizer:
    """The project's default: a BPE trained (once, cached) on this interpreter's stdlib sources."""
    return cached_tokenizer(corpus.stdlib_dir(), vocab_size)


def tokenizer_from_config(cfg) -> Tokenizer:
    """`cfg.path` (a tokenizer.json or a directory holding one) if set, else `default_tokenizer`.

    `cfg` is the `tokenizer` block of `c2jax.data.config.data_config()`.
    """
    if cfg.path:
        return load_tokenizer(cfg.path)
    return default_tokenizer(cfg.vocab_size)
