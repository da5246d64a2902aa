"""YaRN against plain RoPE on a model whose every prediction depends on a positional head.

    python -m experiments.yarn_ablation --workdir=runs/yarn_ablation

The stdlib stages (`experiments.stages_tiny`) cannot show what YaRN buys: a few-minute tiny
model predicts code from the last few tokens and barely looks at positions, so rotations it
never saw cost it nothing. This experiment gives the model a task it can only solve with a
sharp positional attention head: **periodic recall**. Each document is a conversation; the user
lists --period random words from a pool of single-token words, and the assistant repeats the
list cyclically (with two reserved words where the chat template puts its two tokens between
the turns), so every answer token is a copy of the token exactly `period + 2` positions back.
The loss is on the answer only (the chat loss mask): ~0 for a model that copies, ln(pool) for
one that cannot.

Why plain RoPE breaks beyond the training length: the tiny preset's 8 rotary dims turn at
frequencies 1, 1/10, 1/100 and 1/1000 rad per position, and 628 ~ 2*pi*100 positions turn the
first three by whole numbers of turns (100, 10, 1; off by 0.3, 0.03, 0.003 rad). A key ~628
positions further back than the source therefore looks almost like the source to a positional
head, except in the slowest frequency, which 256 positions of training never turned past 0.26
rad. Phase 1 never saw such keys (every distance < 256); in 2048-token rows they are
everywhere. YaRN interpolates the slow frequencies 8x, so the angles stay in the trained range.

It runs the real entry points (each a subprocess, printed first):
  1. pretrain  configs/pretrain_tiny.py (widened: RECALL_MODEL) at 256 tokens, random init;
  2. longctx   configs/longctx_tiny.py from phase 1 (YaRN x8, 2048 tokens, `context` mesh);
  2b. the same phase with plain RoPE (the ablation), same data, same steps.
The first eval of each phase-2 run is the phase-1 weights zero-shot. It prints the held-out
loss at positions < 256 and >= 256 and writes WORKDIR/yarn_ablation.json.
"""
from __future__ import annotations

import json
import math
import os
import platform
from pathlib import Path

from absl import app, flags

from c2jax.data.tokenizer import tokenizer_from_config
from configs import longctx_tiny, pretrain_tiny
from experiments.recall_corpus import single_token_words, write_recall_corpus
from experiments.stage_runs import evals, run_stage

_WORKDIR = flags.DEFINE_string("workdir", "runs/yarn_ablation", "where the runs go")
_POOL = flags.DEFINE_integer("pool", 128, "distinct single-token words lists draw from")
_PERIOD = flags.DEFINE_integer("period", 10, "words listed per conversation")
_SHORT_DOCS = flags.DEFINE_integer("short_docs", 10000, "phase-1 conversations")
_LONG_DOCS = flags.DEFINE_integer("long_docs", 1000, "phase-2 conversations")
_PRETRAIN_STEPS = flags.DEFINE_integer("pretrain_steps", 600, "phase-1 steps")
_LONGCTX_STEPS = flags.DEFINE_integer(
    "longctx_steps", 600, "phase-2 steps of each variant (configs/longctx_tiny.py has 150: "
    "too few here for either variant to recover)")
_DEVICES = flags.DEFINE_integer("longctx_devices", 2,
                                "fake CPU devices for phase 2 (all on the context axis)")
_SEED = flags.DEFINE_integer("seed", 0, "corpus seed")
_MODEL = flags.DEFINE_multi_string(
    "model", [], "FIELD=VALUE overrides of the model config, for every stage (on top of "
    "RECALL_MODEL), e.g. --model=kv_lora_rank=32")

#: The tiny preset with wider attention: the copying head's value, projected from the
#: `kv_lora_rank` latent that also makes every key, must carry which of `pool` words to copy,
#: and the tiny preset's 16-dim latent is narrow for that. (Not tried without it.)
RECALL_MODEL = {"hidden_size": 128, "q_lora_rank": 64, "kv_lora_rank": 64,
                "qk_nope_head_dim": 32, "v_head_dim": 32}

SHORT = pretrain_tiny.SEQ_LEN
LONG = longctx_tiny.SEQ_LEN
#: The eval split: a larger share than the default 2% so phase 2's eval has enough long lists.
EVAL_FRACTION = 0.05


def main(argv):
    del argv
    workdir = Path(_WORKDIR.value).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    tokenizer = tokenizer_from_config(pretrain_tiny.get_config().data.tokenizer)
    words = single_token_words(tokenizer, _POOL.value + 2)
    short_corpus, long_corpus = workdir / "recall_short.jsonl", workdir / "recall_long.jsonl"
    period = _PERIOD.value
    write_recall_corpus(short_corpus, tokenizer, words, _SHORT_DOCS.value, period, SHORT,
                        _SEED.value)
    write_recall_corpus(long_corpus, tokenizer, words, _LONG_DOCS.value, period, LONG,
                        _SEED.value + 1)
    model = {**RECALL_MODEL, **dict(o.split("=", 1) for o in _MODEL.value)}
    common = [f"--config.data.eval_fraction={EVAL_FRACTION}",
              *(f"--config.model.{k}={v}" for k, v in model.items())]
    runs = {"pretrain": run_stage(
        "experiments.pretrain", "configs/pretrain_tiny.py", workdir / "pretrain",
        f"--config.data.source={short_corpus}", f"--config.train.steps={_PRETRAIN_STEPS.value}",
        *common)}
    longctx = (f"configs/longctx_tiny.py:{workdir / 'pretrain'}",)
    phase2 = (f"--config.data.source={long_corpus}",
              f"--config.train.steps={_LONGCTX_STEPS.value}",
              f"--config.train.eval_every={max(1, _LONGCTX_STEPS.value // 6)}", *common)
    runs["yarn"] = run_stage("experiments.pretrain", *longctx, workdir / "longctx_yarn", *phase2,
                             devices=_DEVICES.value)
    runs["plain"] = run_stage("experiments.pretrain", *longctx, workdir / "longctx_plain_rope",
                              *phase2, "--config.model.rope_scaling.type=default",
                              f"--config.model.max_position_embeddings={LONG}",
                              devices=_DEVICES.value)

    print(f"\nmachine: {platform.machine()} {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}; "
          f"no copying = ln({_POOL.value}) = {math.log(_POOL.value):.2f} nats")
    first, last = evals(runs["pretrain"])[0], evals(runs["pretrain"])[-1]
    print(f"phase 1 ({last['step']} steps, {runs['pretrain']['seconds']:.0f} s): held-out "
          f"recall loss {first['eval_loss']:.3f} -> {last['eval_loss']:.3f}")
    short_key, long_key = f"eval_loss_positions_0_{SHORT}", f"eval_loss_positions_{SHORT}_{LONG}"
    print(f"\n| rope | step | loss at positions < {SHORT} | loss at positions {SHORT}-{LONG - 1} "
          f"| long - short |")
    print("|---|---:|---:|---:|---:|")
    for name in ("plain", "yarn"):
        for record in evals(runs[name]):
            print(f"| {'YaRN x8' if name == 'yarn' else 'plain RoPE'} | {record['step']} | "
                  f"{record[short_key]:.3f} | {record[long_key]:.3f} | "
                  f"{record[long_key] - record[short_key]:+.3f} |")
    summary = {name: {"seconds": run["seconds"], "evals": evals(run)} for name, run in runs.items()}
    (workdir / "yarn_ablation.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    app.run(main)
