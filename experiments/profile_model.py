"""Where a training step's time goes: forward vs forward+backward of model ablations.

    python -m experiments.profile_model [--preset=small] [--batch=8] [--seq=512]

Jitted f32 `jax.grad` of the mean next-token NLL (no optimizer) for the preset, the preset cut
to its first dense layer, to one dense + one MoE layer, and one layer's attention core alone
(c2jax.model.attention.attention_core with causal blocks). Best of `--rounds` after a warm-up.
The difference between rows is what one MoE layer or the attention core costs; compare with
`experiments/bench_model.py`, which times the whole step against HF transformers.
"""
from __future__ import annotations

import time

import jax
import jax.numpy as jnp
from absl import app, flags

from c2jax.model import apply, init
from c2jax.model.attention import attention_core
from c2jax.model.config import qk_head_dim
from configs.models import get_config

FLAGS = flags.FLAGS
flags.DEFINE_string("preset", "small", "model preset")
flags.DEFINE_integer("batch", 8, "rows")
flags.DEFINE_integer("seq", 512, "tokens per row")
flags.DEFINE_integer("rounds", 2, "timed calls per measurement (after one warm-up)")


def best_seconds(fn, *args) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(FLAGS.rounds):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def model_row(cfg) -> tuple[float, float]:
    variables = init(cfg, jax.random.key(0))
    tokens = jax.random.randint(jax.random.key(1), (FLAGS.batch, FLAGS.seq), 0, cfg.vocab_size)

    def loss(params, tokens):
        logits, _ = apply({**variables, "params": params}, tokens, cfg=cfg)
        logp = jax.nn.log_softmax(logits.astype(jnp.float32))
        return -jnp.mean(jnp.take_along_axis(logp[:, :-1], tokens[:, 1:, None], -1))

    params = variables["params"]
    return (best_seconds(jax.jit(loss), params, tokens),
            best_seconds(jax.jit(jax.grad(loss)), params, tokens))


def attention_row(cfg) -> tuple[float, float]:
    b, s, h = FLAGS.batch, FLAGS.seq, cfg.num_attention_heads
    keys = jax.random.split(jax.random.key(2), 3)
    q = jax.random.normal(keys[0], (b, s, h, qk_head_dim(cfg)))
    k = jax.random.normal(keys[1], (b, s, h, qk_head_dim(cfg)))
    v = jax.random.normal(keys[2], (b, s, h, cfg.v_head_dim))
    segments = jnp.ones((b, s), jnp.int32)
    positions = jnp.broadcast_to(jnp.arange(s), (b, s))

    def core(q, k, v):
        return attention_core(q, k, v, segments, positions, segments, positions, 0.1,
                              jnp.float32, cfg.attention_block_size)

    loss = lambda q, k, v: jnp.sum(core(q, k, v) ** 2)
    return (best_seconds(jax.jit(core), q, k, v),
            best_seconds(jax.jit(jax.grad(loss, argnums=(0, 1, 2))), q, k, v))


def main(argv):
    del argv
    cfg = get_config(FLAGS.preset)
    dense = cfg.first_k_dense_replace
    rows = [(f"{FLAGS.preset} ({dense} dense + {cfg.num_hidden_layers - dense} MoE layers)",
             model_row(cfg))]
    for label, layers in (("1 dense layer only", 1), ("1 dense + 1 MoE layer", 2)):
        cut = get_config(FLAGS.preset)
        with cut.unlocked():
            cut.num_hidden_layers, cut.first_k_dense_replace = layers, 1
        rows.append((label, model_row(cut)))
    rows.append(("attention core alone, one layer", attention_row(cfg)))
    print(f"\n## {FLAGS.preset}, {FLAGS.batch}x{FLAGS.seq}, f32, jit\n")
    print("| model | forward s | forward+backward s |\n|---|---:|---:|")
    for label, (fwd, grad) in rows:
        print(f"| {label} | {fwd:.3f} | {grad:.3f} |")


if __name__ == "__main__":
    app.run(main)
