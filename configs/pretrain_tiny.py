"""Stage A, phase 1 in miniature: pretrain the tiny K2-style MoE on the Python stdlib at 256 tokens.

    python -m experiments.pretrain --config=configs/pretrain_tiny.py --workdir=runs/pretrain_tiny

A few minutes on 2 CPU cores (numbers: BENCHMARKS.md, "Training stages"). Override any field
on the command line, e.g. `--config.train.steps=50`. The cluster sibling is pretrain_k2.py.
"""
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import optimizer_config, stage_config, train_config
from configs.models import tiny

#: Phase 1 sequence length; the long-context phase (longctx_tiny.py) extends it 8x with YaRN.
SEQ_LEN = 256
VOCAB_SIZE = 8192  # the default stdlib BPE


def model():
    """The tiny preset sized to the tokenizer, with plain RoPE over exactly SEQ_LEN positions
    (so the long-context phase really has to extend it)."""
    return tiny(vocab_size=VOCAB_SIZE, max_position_embeddings=SEQ_LEN,
                rope_scaling=dict(original_max_position_embeddings=SEQ_LEN))


def get_config(arg=None):
    del arg
    return stage_config(
        stage="pretrain",
        model=model(),
        data=data_config(seq_len=SEQ_LEN, batch_size=8,
                         tokenizer=dict(vocab_size=VOCAB_SIZE)),
        mesh=mesh_config(fsdp=-1),
        optimizer=optimizer_config(learning_rate=3e-3, warmup_steps=30),
        train=train_config(steps=600, log_every=10, eval_every=200, eval_batches=16,
                           checkpoint_every=200))
