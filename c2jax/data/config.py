"""The data config: every knob of the input pipeline with its default, and its validation.

Stage configs (`configs/pretrain_tiny.py`, `configs/sft_tiny.py`, ...) set `config.data =
data_config(seq_len=..., source=...)`; `c2jax.data.pipeline.make_batch_iterator` reads it.
"""
from __future__ import annotations

import ml_collections
from ml_collections import config_dict


def data_config(**overrides) -> ml_collections.ConfigDict:
    """Returns the default data config with `overrides` applied; the result is locked."""
    c = ml_collections.ConfigDict()
    c.source = "stdlib"              # "stdlib" | a directory of source files | a .jsonl file
    c.extensions = (".py",)          # file suffixes read from a directory source
    c.eval_fraction = 0.02           # share of documents (by hash of their key) held out for eval
    c.seq_len = 256                  # tokens per packed row
    c.batch_size = 8                 # rows per batch on each host (global batch = this x hosts)
    c.seed = 0                       # document shuffle seed (each epoch is reshuffled from it)
    c.shuffle = True                 # shuffle documents in the train split (eval is never shuffled)
    c.num_epochs = config_dict.placeholder(int)  # passes over the train split; None = forever
    c.cache_tokens = True            # encode each document once, reuse from cache_dir()/tokens
    c.read_threads = 1               # grain threads producing documents (0 = inline)
    c.prefetch_batches = 2           # batches prepared ahead in a background thread (0 = off)
    # Share of training documents that are synthetic copy documents (c2jax/data/copy_task.py):
    # a block of random ids given twice, which teaches in-context copying; 0 = off; eval never.
    c.copy_fraction = 0.0
    c.copy_block = (16, 120)         # (min, max) ids per copy block; 2 * max + 2 <= seq_len
    c.tokenizer = ml_collections.ConfigDict()
    c.tokenizer.path = ""            # a tokenizer.json (or a directory with one); "" = default
    c.tokenizer.vocab_size = 8192    # vocabulary of the default stdlib-trained BPE
    # Locked before the overrides so a misspelt field is a KeyError naming it, not a new field.
    c.lock()
    c.update(overrides)
    return c


def _fail(field: str, value, why: str):
    raise ValueError(f"data config field '{field}' = {value!r} is invalid: {why}")


def validate(cfg: ml_collections.ConfigDict) -> None:
    """Raises ValueError naming the first field of `cfg` the pipeline cannot run with."""
    for field in ("seq_len", "batch_size"):
        if int(cfg[field]) <= 0:
            _fail(field, cfg[field], "must be positive")
    for field in ("read_threads", "prefetch_batches", "seed"):
        if int(cfg[field]) < 0:
            _fail(field, cfg[field], "must be >= 0")
    if not 0.0 <= cfg.eval_fraction < 1.0:
        _fail("eval_fraction", cfg.eval_fraction, "must be in [0, 1)")
    if cfg.num_epochs is not None and cfg.num_epochs <= 0:
        _fail("num_epochs", cfg.num_epochs, "must be positive, or None to repeat forever")
    if not 0.0 <= cfg.copy_fraction < 1.0:
        _fail("copy_fraction", cfg.copy_fraction, "must be in [0, 1)")
    if cfg.copy_fraction:
        low, high = (int(x) for x in cfg.copy_block)
        if not 1 <= low <= high:
            _fail("copy_block", cfg.copy_block, "must be (min, max) with 1 <= min <= max")
        if 2 * high + 2 > cfg.seq_len:
            _fail("copy_block", cfg.copy_block, f"a copy document of 2 * {high} + 2 tokens must "
                  f"fit a row of seq_len={cfg.seq_len}, so the repeat sees its source")
    if not cfg.source:
        _fail("source", cfg.source, "name a directory, a .jsonl file or 'stdlib'")
    if not cfg.extensions or isinstance(cfg.extensions, str):
        _fail("extensions", cfg.extensions, "must be a non-empty tuple of suffixes like ('.py',)")
