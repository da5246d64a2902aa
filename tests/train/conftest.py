"""Fixtures for the training tests: a small real corpus (20 stdlib files), a 512-token BPE
trained on it, and `make_config(...)`: the tiny stage config shrunk to 64-token rows.

Compilation dominates these tests, so the session shares one persistent XLA compilation cache
(a temporary directory) between the tests and the entry-point subprocesses they start: a
program compiled once, by any of them, is loaded by the others. Reusing an executable does not
change results (it is the same program), which the resume test relies on.
"""
import os
import shutil

import jax
import pytest

from c2jax.data import corpus, tokenizer
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import optimizer_config, stage_config, train_config
from configs.models import tiny

CORPUS_FILES = ("json/__init__.py", "json/decoder.py", "json/encoder.py", "json/scanner.py",
                "json/tool.py", "shlex.py", "getopt.py", "heapq.py", "textwrap.py", "bisect.py",
                "colorsys.py", "fnmatch.py", "glob.py", "keyword.py", "numbers.py", "queue.py",
                "sched.py", "string.py", "this.py", "tabnanny.py")
VOCAB_SIZE = 512
SEQ_LEN = 64
BATCH = 8
#: bisect.py, fnmatch.py and heapq.py hash below 0.1: the held-out split.
EVAL_FRACTION = 0.1


@pytest.fixture(scope="session")
def cache_root(tmp_path_factory):
    return tmp_path_factory.mktemp("train_caches")


@pytest.fixture(scope="session", autouse=True)
def private_caches(cache_root):
    """Token/tokenizer caches in a temporary directory, and the shared compilation cache."""
    previous = os.environ.get(tokenizer.CACHE_ENV_VAR)
    os.environ[tokenizer.CACHE_ENV_VAR] = str(cache_root / "c2jax")
    jax.config.update("jax_compilation_cache_dir", str(cache_root / "xla"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", -1)
    yield
    if previous is None:
        del os.environ[tokenizer.CACHE_ENV_VAR]
    else:
        os.environ[tokenizer.CACHE_ENV_VAR] = previous


@pytest.fixture(scope="session")
def subprocess_env(cache_root):
    """Environment for entry-point subprocesses: the tests' caches, and one CPU device (what
    `python -m experiments.pretrain` gets on a laptop; 8 fake devices only slow a run down)."""
    env = dict(os.environ)
    env.update(XLA_FLAGS=os.environ["XLA_FLAGS"].replace(
                   "--xla_force_host_platform_device_count=8",
                   "--xla_force_host_platform_device_count=1"),
               JAX_COMPILATION_CACHE_DIR=str(cache_root / "xla"),
               JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
               JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1")
    return env


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpus")
    for name in CORPUS_FILES:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(corpus.stdlib_dir() / name, root / name)
    return root


@pytest.fixture(scope="session")
def tokenizer_path(corpus_dir, tmp_path_factory):
    texts = (corpus.read_source_text(corpus_dir / name) for name in CORPUS_FILES)
    return tokenizer.save_tokenizer(tokenizer.train_tokenizer(texts, VOCAB_SIZE),
                                    tmp_path_factory.mktemp("tokenizer"))


def config_overrides(corpus_dir, tokenizer_path) -> list[str]:
    """The same shrinking as `make_config`, as entry-point flags on configs/pretrain_tiny.py."""
    return [f"--config.model.vocab_size={VOCAB_SIZE}",
            f"--config.model.max_position_embeddings={SEQ_LEN}",
            f"--config.model.rope_scaling.original_max_position_embeddings={SEQ_LEN}",
            f"--config.data.source={corpus_dir}", f"--config.data.tokenizer.path={tokenizer_path}",
            f"--config.data.seq_len={SEQ_LEN}", f"--config.data.batch_size={BATCH}",
            f"--config.data.eval_fraction={EVAL_FRACTION}", "--config.optimizer.warmup_steps=2",
            "--config.train.progress_bar=False"]


@pytest.fixture(scope="session")
def make_config(corpus_dir, tokenizer_path):
    """make_config(train=dict(...), optimizer=dict(...), ...) -> a locked stage config."""

    def build(stage="pretrain", model=None, data=None, mesh=None, optimizer=None, train=None):
        return stage_config(
            stage=stage,
            model=tiny(**{"vocab_size": VOCAB_SIZE, "max_position_embeddings": SEQ_LEN,
                          "rope_scaling": {"original_max_position_embeddings": SEQ_LEN},
                          **(model or {})}),
            data=data_config(**{"source": str(corpus_dir), "seq_len": SEQ_LEN,
                                "batch_size": BATCH, "eval_fraction": EVAL_FRACTION,
                                "tokenizer": {"path": str(tokenizer_path)}, **(data or {})}),
            mesh=mesh_config(**(mesh or {"fsdp": -1})),
            optimizer=optimizer_config(**{"warmup_steps": 2, **(optimizer or {})}),
            train=train_config(**{"steps": 4, "log_every": 1, "eval_every": 0,
                                  "checkpoint_every": 2, "progress_bar": False,
                                  **(train or {})}))

    return build
