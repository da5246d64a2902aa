"""Supervised fine-tuning on JSONL conversations, loss on assistant turns: config -> loop.

    python -m experiments.sft --config=configs/sft_tiny.py:runs/longctx_tiny \\
        --config.data.source=conversations.jsonl --workdir=runs/sft_tiny

Same loop, flags and outputs as experiments/pretrain.py; the chat template's loss mask is what
makes it SFT (c2jax/data/chat.py).
"""
from absl import app

from experiments.cli import parse_flags
from experiments.pretrain import stage_main

if __name__ == "__main__":
    app.run(stage_main(("sft",)), flags_parser=parse_flags)
