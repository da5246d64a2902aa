"""Stage A, phase 2 at cluster scale: extend Kimi K2 to 256k tokens (YaRN factor 64 over 4k).

    python -m experiments.pretrain --config=configs/longctx_k2.py:/runs/k2_pt \\
        --config.data.source=/data/code_long --workdir=/runs/k2_longctx

Starts from phase 1's newest checkpoint (the argument after ':'). Context parallelism splits
each 262,144-token sequence over 16 devices (attention's seq^2 work and the activations); the
expert axis keeps EP for the MoE layers. Mesh for 256 accelerators: context 16 x expert 16.
Not run here: lowered on a fake 8-device mesh in tests/train/test_entry_points.py.
"""
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import loss_config, optimizer_config, stage_config, train_config
from configs import pretrain_k2

SEQ_LEN = 262144


def model():
    cfg = pretrain_k2.model()
    cfg.max_position_embeddings = SEQ_LEN
    cfg.rope_scaling.factor = SEQ_LEN / cfg.rope_scaling.original_max_position_embeddings
    return cfg


def get_config(arg=None):
    return stage_config(
        stage="longctx",
        model=model(),
        data=data_config(source="stdlib", seq_len=SEQ_LEN, batch_size=1, read_threads=4),
        mesh=mesh_config(fsdp=1, context=16, expert=-1),
        optimizer=optimizer_config(learning_rate=1e-5, warmup_steps=50),
        loss=loss_config(mtp_weight=0.1, z_loss_weight=1e-4),
        train=train_config(steps=2000, log_every=10, eval_every=250, eval_batches=8,
                           eval_position_buckets=(4096, 32768), checkpoint_every=100,
                           keep_checkpoints=3, init_from=arg or "",
                           peak_flops_per_device=989e12))
