"""Stage A, phase 3 at cluster scale: SFT of the long-context K2 on targeted coding tasks.

    python -m experiments.sft --config=configs/sft_k2.py:/runs/k2_longctx \\
        --config.data.source=/data/sft/coding_tasks.jsonl --workdir=/runs/k2_sft

JSONL conversations (`{"messages": [...]}`, chat format of c2jax/data/chat.py), loss on the
assistant's tokens only. 64k-token rows pack several agent sessions. Mesh for 256
accelerators: fsdp 4 x expert 64. Lowered on a fake 8-device mesh in the tests, not run here.
"""
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import loss_config, optimizer_config, stage_config, train_config
from configs import longctx_k2

SEQ_LEN = 65536


def get_config(arg=None):
    return stage_config(
        stage="sft",
        model=longctx_k2.model(),
        data=data_config(source="", seq_len=SEQ_LEN, batch_size=1, eval_fraction=0.02),
        mesh=mesh_config(fsdp=-1, expert=64),
        optimizer=optimizer_config(learning_rate=5e-6, warmup_steps=20, weight_decay=0.0),
        loss=loss_config(mtp_weight=0.1),
        train=train_config(steps=1000, log_every=10, eval_every=100, eval_batches=16,
                           checkpoint_every=100, keep_checkpoints=3, init_from=arg or "",
                           peak_flops_per_device=989e12))
