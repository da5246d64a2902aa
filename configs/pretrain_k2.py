"""Stage A, phase 1 at cluster scale: continued pretraining of Kimi K2 (1T MoE) at 32k tokens.

    python -m experiments.pretrain --config=configs/pretrain_k2.py \\
        --config.train.init_from=/ckpt/kimi-k2-base-orbax --config.data.source=/data/code \\
        --config.data.tokenizer.path=/ckpt/kimi-k2-base/tokenizer.json --workdir=/runs/k2_pt

The recipe of the Composer 2 report (phase 1: 32k sequences on a code-dominated mix), starting
from the base model's weights (`python -m c2jax.checkpoint.hf --to_orbax` makes the model
directory `init_from` reads). Not run here: `tests/train/test_entry_points.py` builds and lowers
its sharded train step on a fake 8-device mesh. The mesh below is for 256 accelerators
(fsdp 4 x expert 64: every device holds 6 of the 384 experts); sizes multiply to the device
count, and `--config.mesh.*` overrides them.
"""
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import loss_config, optimizer_config, stage_config, train_config
from configs.models import kimi_k2_1t

SEQ_LEN = 32768


def model():
    # Rematerialise each layer's activations (a 32k x 7168 residual per sequence per layer does
    # not fit otherwise); capacity dispatch is the expert-parallel transport (sharding.md).
    return kimi_k2_1t(remat_policy="full", moe_dispatch="capacity", capacity_factor=1.25)


def get_config(arg=None):
    del arg
    return stage_config(
        stage="pretrain",
        model=model(),
        data=data_config(source="stdlib", seq_len=SEQ_LEN, batch_size=1, read_threads=4),
        mesh=mesh_config(fsdp=-1, expert=64),
        optimizer=optimizer_config(learning_rate=2e-5, warmup_steps=200, min_lr_ratio=0.1,
                                   weight_decay=0.1),
        loss=loss_config(mtp_weight=0.1, z_loss_weight=1e-4),
        train=train_config(steps=20000, log_every=10, eval_every=500, eval_batches=32,
                           checkpoint_every=250, keep_checkpoints=3,
                           peak_flops_per_device=989e12))  # H100 dense bf16
