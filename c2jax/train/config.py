"""The stage config: one ConfigDict that fully describes a training run, and its validation.

    config.stage       "pretrain" | "longctx" | "sft"  (what the run is; the loop is the same)
    config.model       c2jax.model.config.model_config()    architecture
    config.data        c2jax.data.config.data_config()      corpus, tokenizer, seq_len, batch
    config.mesh        c2jax.sharding.mesh_config()         device mesh sizes and rules
    config.optimizer   optimizer_config()                   AdamW, warmup + cosine, clipping
    config.loss        loss_config()                        MTP and z-loss weights
    config.train       train_config()                       steps, eval, checkpoints, NaN policy
    config.distributed c2jax.distributed.distributed_config()  the processes of a multi-process
                                                            run (all empty: the environment's)

Stage files in `configs/` (`pretrain_tiny.py`, `longctx_k2.py`, ...) build one with
`stage_config(...)`. Every section is locked, so a misspelt field is an error naming it.
`validate(config, num_devices)` checks what no single section can: that the sequence fits the
rope range, that the mesh divides the model and the sequence, that the schedule makes sense.
"""
from __future__ import annotations

import os

import ml_collections

from c2jax import sharding
from c2jax.distributed import distributed_config, validate as validate_distributed
from c2jax.data.config import data_config, validate as validate_data
from c2jax.model.config import model_config, rope_limit, validate as validate_model

STAGES = ("pretrain", "longctx", "sft")


class ConfigError(ValueError):
    """A stage config the run cannot start with; the message names the field and the fix."""


def optimizer_config(**overrides) -> ml_collections.ConfigDict:
    """AdamW with linear warmup then cosine decay, and global-norm gradient clipping."""
    c = ml_collections.ConfigDict()
    c.learning_rate = 3e-3       # peak learning rate, reached at the end of warmup
    c.warmup_steps = 20          # linear warmup from 0 over this many updates
    c.min_lr_ratio = 0.1         # the cosine decays to learning_rate * min_lr_ratio at train.steps
    c.b1 = 0.9                   # Adam first-moment decay
    c.b2 = 0.95                  # Adam second-moment decay (0.95: DeepSeek-V3, most LLM recipes)
    c.eps = 1e-8
    c.weight_decay = 0.1         # decoupled decay, matrices only (norm scales are never decayed)
    c.grad_clip_norm = 1.0       # clip the global gradient norm to this; 0 = no clipping
    c.lock()
    c.update(overrides)
    return c


def loss_config(**overrides) -> ml_collections.ConfigDict:
    """Weights of the terms of the training objective (see c2jax/train/losses.py)."""
    c = ml_collections.ConfigDict()
    c.mtp_weight = 0.3           # lambda of DeepSeek-V3 eq. 25: lambda/D * sum of MTP losses
    c.z_loss_weight = 0.0        # weight of mean(logsumexp(logits)^2) (PaLM); 0 = off
    c.lock()
    c.update(overrides)
    return c


def train_config(**overrides) -> ml_collections.ConfigDict:
    """The loop: length, logging, held-out eval, checkpoints, non-finite-loss policy."""
    c = ml_collections.ConfigDict()
    c.steps = 200                # optimizer steps in the run (the cosine ends here)
    c.seed = 0                   # parameter init and the run's RNG stream
    c.log_every = 10             # write a metrics record every this many steps
    c.eval_every = 100           # held-out eval every this many steps (and at the end); 0 = never
    c.eval_batches = 8           # batches of the eval split per eval (fewer if the split is short)
    c.eval_position_buckets = ()  # e.g. (256,): also report eval loss at positions <256 and >=256
    c.checkpoint_every = 100     # save every this many steps (and at the end)
    c.keep_checkpoints = 3       # newest checkpoints kept on disk
    c.async_checkpointing = True  # write checkpoints in the background while training continues
    c.max_nonfinite_steps = 5    # stop after this many consecutive NaN/Inf losses (each skipped)
    c.init_from = ""             # start a fresh run from these weights: a training workdir
                                 # (its latest checkpoint) or a model directory (checkpoint/hf.py)
    # > 0: the LM head runs only at the positions a loss is taken at, this fraction of each row
    # (c2jax/train/head_positions.py; SFT trains on ~1/4 of its tokens). A batch with a row
    # that needs more runs the full-width step (compiled when first needed). 0 = every position.
    c.head_fraction = 0.0
    c.peak_flops_per_device = 3.3e11  # for MFU; default: the dev CPU's f32 matmul peak (2 cores)
    c.progress_bar = True
    c.lock()
    c.update(overrides)
    return c


def stage_config(*, stage: str, model=None, data=None, mesh=None, optimizer=None, loss=None,
                 train=None, distributed=None) -> ml_collections.ConfigDict:
    """A stage config from its sections (each defaults to its section's defaults); locked."""
    c = ml_collections.ConfigDict()
    c.stage = stage
    c.model = model if model is not None else model_config()
    c.data = data if data is not None else data_config()
    c.mesh = mesh if mesh is not None else sharding.mesh_config()
    c.optimizer = optimizer if optimizer is not None else optimizer_config()
    c.loss = loss if loss is not None else loss_config()
    c.train = train if train is not None else train_config()
    c.distributed = distributed if distributed is not None else distributed_config()
    c.lock()
    return c


def _fail(field: str, value, why: str):
    raise ConfigError(f"config field '{field}' = {value!r} is invalid: {why}")


def _check_sections(config) -> None:
    if config.stage not in STAGES:
        _fail("stage", config.stage, f"choose one of {STAGES}")
    if config.stage == "sft" and not str(config.data.source).endswith(".jsonl"):
        _fail("data.source", config.data.source, "SFT trains on conversations: pass a JSONL "
              "file of {\"messages\": [...]} records, --config.data.source=FILE.jsonl")
    for section, check in (("model", validate_model), ("data", validate_data),
                           ("distributed", validate_distributed)):
        try:
            check(config[section])
        except ValueError as e:
            raise ConfigError(f"[{section}] {e}") from None
    opt, train = config.optimizer, config.train
    if opt.learning_rate <= 0:
        _fail("optimizer.learning_rate", opt.learning_rate, "must be positive")
    if not 0 <= opt.warmup_steps < train.steps:
        _fail("optimizer.warmup_steps", opt.warmup_steps,
              f"must be in [0, train.steps={train.steps})")
    if not 0.0 <= opt.min_lr_ratio <= 1.0:
        _fail("optimizer.min_lr_ratio", opt.min_lr_ratio, "must be in [0, 1]")
    for field in ("weight_decay", "grad_clip_norm"):
        if opt[field] < 0:
            _fail(f"optimizer.{field}", opt[field], "must be >= 0")
    for field in ("mtp_weight", "z_loss_weight"):
        if config.loss[field] < 0:
            _fail(f"loss.{field}", config.loss[field], "must be >= 0")
    for field in ("steps", "log_every", "checkpoint_every", "keep_checkpoints",
                  "max_nonfinite_steps", "eval_batches"):
        if train[field] <= 0:
            _fail(f"train.{field}", train[field], "must be positive")
    if train.eval_every < 0:
        _fail("train.eval_every", train.eval_every, "must be >= 0 (0 = never)")
    buckets = tuple(train.eval_position_buckets)
    if list(buckets) != sorted(set(buckets)) or any(
            not 0 < b < config.data.seq_len for b in buckets):
        _fail("train.eval_position_buckets", buckets,
              f"must be increasing positions in (0, data.seq_len={config.data.seq_len})")
    if not 0.0 <= train.head_fraction <= 1.0:
        _fail("train.head_fraction", train.head_fraction, "must be in [0, 1] (0 = every position)")
    if train.init_from and not os.path.exists(train.init_from):
        _fail("train.init_from", train.init_from, "no such directory")


def _check_rope_range(config) -> None:
    model, seq_len = config.model, config.data.seq_len
    limit = rope_limit(model)
    if seq_len <= limit:
        return
    if model.rope_scaling.type == "yarn":
        rs = model.rope_scaling
        raise ConfigError(
            f"data.seq_len = {seq_len} is beyond the model's YaRN range "
            f"(rope_scaling.original_max_position_embeddings {rs.original_max_position_embeddings} "
            f"x factor {rs.factor} = {limit}): raise model.rope_scaling.factor to at least "
            f"{seq_len / rs.original_max_position_embeddings:g}")
    raise ConfigError(
        f"data.seq_len = {seq_len} is beyond the model's rope range "
        f"(model.max_position_embeddings = {model.max_position_embeddings}, no rope scaling): "
        f"positions past {limit} were never trained. Extend the context with YaRN "
        f"(model.rope_scaling.type='yarn', factor={seq_len / limit:g}, "
        f"original_max_position_embeddings={limit}), as configs/longctx_tiny.py does, or raise "
        "model.max_position_embeddings to train plain RoPE at that length")


def _check_mesh(config, num_devices: int) -> None:
    try:
        sizes = sharding.mesh_shape(config.mesh, num_devices)
        sharding.validate_layout(config.model, sizes)
    except ValueError as e:
        raise ConfigError(f"[mesh] {e}") from None
    context = sizes["context"]
    if context > 1 and config.data.seq_len % (2 * context):
        _fail("data.seq_len", config.data.seq_len,
              f"context parallelism over {context} devices cuts the sequence into {2 * context} "
              f"load-balanced chunks, so seq_len must be divisible by {2 * context}")


def validate(config, num_devices: int) -> None:
    """Raises ConfigError naming the first field that stops `config` running on `num_devices`."""
    _check_sections(config)
    _check_rope_range(config)
    _check_mesh(config, num_devices)
