"""Stage A, phase 2 in miniature: extend the phase-1 model 8x (256 -> 2048 tokens) with YaRN.

    python -m experiments.pretrain --config=configs/longctx_tiny.py:runs/pretrain_tiny \\
        --workdir=runs/longctx_tiny

The argument after ':' is phase 1's workdir (its newest checkpoint seeds the weights; the
optimizer starts fresh); it sets `train.init_from`. The mesh puts every device on the
`context` axis, so with several devices (e.g. XLA_FLAGS=--xla_force_host_platform_device_count=2
on CPU) the run is context-parallel; on one device it is the same computation unsharded.
Eval reports the held-out loss at positions below and beyond the phase-1 length separately.
The ablation without YaRN: `--config.model.rope_scaling.type=default
--config.model.max_position_embeddings=2048`.
"""
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import optimizer_config, stage_config, train_config
from configs import pretrain_tiny

FACTOR = 8
SEQ_LEN = pretrain_tiny.SEQ_LEN * FACTOR


def model():
    """Phase 1's architecture with YaRN over FACTOR x its length (same weights, new rope)."""
    cfg = pretrain_tiny.model()
    cfg.max_position_embeddings = SEQ_LEN
    cfg.rope_scaling.update(dict(type="yarn", factor=float(FACTOR),
                                 original_max_position_embeddings=pretrain_tiny.SEQ_LEN))
    return cfg


def get_config(arg=None):
    return stage_config(
        stage="longctx",
        model=model(),
        data=data_config(seq_len=SEQ_LEN, batch_size=1,
                         tokenizer=dict(vocab_size=pretrain_tiny.VOCAB_SIZE)),
        mesh=mesh_config(fsdp=1, context=-1),
        optimizer=optimizer_config(learning_rate=3e-4, warmup_steps=10),
        train=train_config(steps=150, log_every=10, eval_every=75, eval_batches=16,
                           eval_position_buckets=(pretrain_tiny.SEQ_LEN,), checkpoint_every=75,
                           init_from=arg or ""))
