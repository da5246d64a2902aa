"""Training-step throughput of c2jax vs HF transformers, measured side by side in one run.

    python -m experiments.bench_model [--presets=tiny,small] [--rounds=5]

For each preset, the same weights (exported with `c2jax.save_hf`, loaded with
`AutoModelForCausalLM.from_pretrained`) and the same batch run one training step (forward,
next-token cross-entropy, backward, AdamW) in:
  * HF transformers DeepseekV3ForCausalLM, torch CPU, eager attention, in float32 (the
    issue's reference: "vs HF" divides by it) and under torch's CPU bf16 autocast;
  * c2jax in float32 and in bfloat16 compute (float32 master weights, `layers.mixed_einsum`),
    jitted, with the `capacity` dispatch at `--capacity_factor` (its measured dropped fraction
    is printed: HF is dropless) and the dropless `dense` reference for the tiny preset, and
    `model.scan_unroll = --scan_unroll` (default 0: the layer stacks unrolled).
Steps alternate between the contenders (round-robin) so machine noise hits them alike. The
machine's matmul peak is measured in the same run (jit 2048^3, float32 and bf16 -> f32), and
MFU = model FLOPs per step (c2jax.flops: 6 N_active + attention) / step time / that peak.
"""
from __future__ import annotations

import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
import torch
from absl import app, flags
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

import c2jax
from c2jax.flops import training_flops_per_token
from c2jax.model import apply, init
from configs.models import get_config

FLAGS = flags.FLAGS
flags.DEFINE_list("presets", ["tiny", "small"], "model presets to measure")
flags.DEFINE_integer("rounds", 5, "timed steps per contender (after one warm-up step)")
flags.DEFINE_float("capacity_factor", 1.25, "capacity factor of the c2jax capacity dispatch")
flags.DEFINE_integer("threads", 2, "torch intra-op threads (XLA:CPU uses every core)")
flags.DEFINE_integer("scan_unroll", 0, "c2jax model.scan_unroll (0: the layer stacks unrolled)")

BATCH = {"tiny": (8, 256), "small": (8, 512)}


def matmul_peak(dtype, n: int = 2048, reps: int = 5) -> float:
    """Best-of-`reps` FLOP/s of a jitted n^3 matmul (bf16 inputs accumulate in f32)."""
    a = jnp.asarray(np.random.RandomState(0).randn(n, n), dtype)
    f = jax.jit(lambda x, y: jnp.dot(x, y, preferred_element_type=jnp.float32))
    jax.block_until_ready(f(a, a))
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        jax.block_until_ready(f(a, a))
        best = min(best, time.perf_counter() - t0)
    return 2 * n ** 3 / best


def c2jax_step(cfg, variables, tokens):
    """A jitted (params, opt_state) -> (params, opt_state, loss, dropped) training step."""
    opt = optax.adamw(1e-4)
    router_bias = variables["router_bias"]

    def step(params, opt_state, tokens):
        def loss_fn(p):
            logits, aux = apply({"params": p, "router_bias": router_bias}, tokens[:, :-1],
                                cfg=cfg)
            ce = optax.softmax_cross_entropy_with_integer_labels(logits, tokens[:, 1:])
            return ce.mean(), aux.get("dropped_fraction", jnp.zeros(()))
        (loss, dropped), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss, dropped

    jitted = jax.jit(step, donate_argnums=(0, 1))
    state = {"params": jax.tree.map(jnp.array, variables["params"])}
    state["opt"] = opt.init(state["params"])
    tokens = jnp.asarray(tokens)

    def run():
        state["params"], state["opt"], loss, dropped = jitted(state["params"], state["opt"],
                                                              tokens)
        jax.block_until_ready(loss)
        return float(loss), float(dropped)
    run.lowered = lambda: jitted.lower(state["params"], state["opt"], tokens)  # for profiling
    return run


def hf_step(path: str, tokens, autocast_bf16: bool = False):
    """HF's training step in float32, or with torch's CPU bf16 autocast (bf16 matmuls,
    float32 master weights: the same recipe as c2jax's bf16 compute)."""
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="eager").float()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.as_tensor(tokens)

    def run():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast_bf16):
            logits = model(ids[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                 ids[:, 1:].reshape(-1))
        loss.backward()
        opt.step()
        return float(loss), 0.0
    return run


def measure(preset: str, rounds: int, capacity_factor: float):
    batch, seq = BATCH.get(preset, (8, 256))
    base = get_config(preset)
    with base.unlocked():
        base.num_mtp_layers = 0   # transformers has no MTP module: same work on both sides
    tokens = np.random.RandomState(0).randint(0, base.vocab_size, (batch, seq + 1))
    variables = init(base, jax.random.key(0))
    contenders = {}
    with tempfile.TemporaryDirectory() as tmp:
        c2jax.save_hf(tmp, base, variables)
        contenders["HF transformers f32"] = ("float32", hf_step(tmp, tokens))
        contenders["HF transformers bf16 autocast"] = ("bfloat16",
                                                       hf_step(tmp, tokens, autocast_bf16=True))
    variants = [("float32", "capacity"), ("bfloat16", "capacity")]
    if preset == "tiny":
        variants.append(("float32", "dense"))
    for dtype, dispatch in variants:
        cfg = get_config(preset)
        with cfg.unlocked():
            cfg.num_mtp_layers = 0
            cfg.dtype = dtype
            cfg.moe_dispatch = dispatch
            cfg.capacity_factor = capacity_factor
            cfg.scan_unroll = FLAGS.scan_unroll
        name = f"c2jax {'f32' if dtype == 'float32' else 'bf16'} {dispatch}"
        if dispatch == "capacity":
            name += f" cf={capacity_factor:g}"
        contenders[name] = (dtype, c2jax_step(cfg, variables, tokens))
    times = {name: [] for name in contenders}
    dropped = {}
    for name, (_, run) in contenders.items():   # warm-up (compiles)
        run()
    for _ in range(rounds):
        for name, (_, run) in contenders.items():
            t0 = time.perf_counter()
            _, dropped[name] = run()
            times[name].append(time.perf_counter() - t0)
    flops = training_flops_per_token(base, seq, include_mtp=False) * batch * seq
    return {name: (contenders[name][0], float(np.median(t)), dropped[name])
            for name, t in times.items()}, flops, batch * seq


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.threads)
    hf_logging.set_verbosity_error()
    peaks = {"float32": matmul_peak(jnp.float32), "bfloat16": matmul_peak(jnp.bfloat16)}
    print(f"matmul peak (jit 2048^3): f32 {peaks['float32'] / 1e9:.0f} GFLOP/s, "
          f"bf16->f32 {peaks['bfloat16'] / 1e9:.0f} GFLOP/s")
    print("| preset | batch x seq | contender | step s | tokens/s | vs HF | MFU | dropped |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for preset in FLAGS.presets:
        results, flops, tokens = measure(preset, FLAGS.rounds, FLAGS.capacity_factor)
        hf_time = results["HF transformers f32"][1]
        b, s = BATCH.get(preset, (8, 256))
        for name, (dtype, step_s, dropped) in results.items():
            print(f"| {preset} | {b}x{s} | {name} | {step_s:.3f} | {tokens / step_s:,.0f} | "
                  f"{hf_time / step_s:.2f}x | {flops / step_s / peaks[dtype]:.1%} | "
                  f"{dropped:.1%} |")


if __name__ == "__main__":
    app.run(main)
