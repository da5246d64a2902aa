"""Stage A, phase 3 in miniature: SFT on JSONL conversations, loss on assistant tokens only.

    python -m experiments.sft --config=configs/sft_tiny.py:runs/longctx_tiny \\
        --config.data.source=conversations.jsonl --workdir=runs/sft_tiny

The argument after ':' is the long-context phase's workdir (`train.init_from`). The data is a
JSONL file of `{"messages": [...]}` records in the chat format of c2jax/data/chat.py; the chat
template's mask puts the loss on what the assistant says (and its tool calls) only.
`experiments/stages_tiny.py` writes such a file from the stdlib (docstring -> implementation);
the RL stage will feed oracle agent trajectories.
"""
from c2jax.data.config import data_config
from c2jax.sharding import mesh_config
from c2jax.train.config import optimizer_config, stage_config, train_config
from configs import longctx_tiny, pretrain_tiny


def get_config(arg=None):
    return stage_config(
        stage="sft",
        model=longctx_tiny.model(),
        data=data_config(source="", seq_len=512, batch_size=8, eval_fraction=0.05,
                         tokenizer=dict(vocab_size=pretrain_tiny.VOCAB_SIZE)),
        mesh=mesh_config(fsdp=-1),
        optimizer=optimizer_config(learning_rate=5e-4, warmup_steps=10, weight_decay=0.0),
        # The head runs at the trained (assistant) positions only, ~1/4 of each row here:
        # 6,328 against 4,031 tokens/s at 2048 tokens, same losses (BENCHMARKS.md, "RL").
        train=train_config(steps=150, log_every=10, eval_every=75, eval_batches=16,
                           checkpoint_every=75, init_from=arg or "", head_fraction=0.35))
