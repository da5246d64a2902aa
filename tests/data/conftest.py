"""Fixtures for the data tests: a few real stdlib files and a small BPE trained on them."""
import os

import pytest

from c2jax.data import corpus, tokenizer

#: Stdlib files (relative to the stdlib dir) with non-ASCII text (shlex.py, getopt.py, heapq.py)
#: and plain code; small enough that a 512-token BPE trains in well under a second.
SAMPLE_FILES = ("shlex.py", "getopt.py", "heapq.py", "json/decoder.py", "json/encoder.py")
SMALL_VOCAB = 512


@pytest.fixture(scope="session")
def sample_files():
    return [corpus.stdlib_dir() / name for name in SAMPLE_FILES]


@pytest.fixture(scope="session")
def small_tokenizer(sample_files):
    return tokenizer.train_tokenizer((corpus.read_source_text(p) for p in sample_files),
                                     SMALL_VOCAB)


@pytest.fixture(scope="session", autouse=True)
def private_cache_dir(tmp_path_factory):
    """Token and tokenizer caches of the tests go to a temporary directory, not the repo's."""
    previous = os.environ.get(tokenizer.CACHE_ENV_VAR)
    os.environ[tokenizer.CACHE_ENV_VAR] = str(tmp_path_factory.mktemp("c2jax_cache"))
    yield
    if previous is None:
        del os.environ[tokenizer.CACHE_ENV_VAR]
    else:
        os.environ[tokenizer.CACHE_ENV_VAR] = previous
