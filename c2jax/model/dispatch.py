"""MoE dispatch backends: send each token to its k experts, run them, and combine.

All three take the same arguments and return the same thing; `c2jax.parallel.expert` picks one
and, under a mesh, runs `capacity` / `ragged` per shard inside `shard_map`.

  dense     every expert runs on every token, a one-hot weight matrix combines them. Dropless,
            O(experts) compute: the numerical reference, only for small models and tests.
  capacity  tokens are copied into per-expert buffers of fixed capacity C (GShard, Lepikhin et
            al. 2020); slots past C are dropped and counted. Fixed shapes make it the fast path
            on CPU and the transport for expert parallelism (an `all_to_all` of the buffers).
  ragged    tokens are sorted by expert and run through `jax.lax.ragged_dot` (dropless). The
            GPU/TPU path; ~18x slower than a dense matmul on XLA:CPU (machine_facts.md).

A fourth path, `gathered`, is not a config choice: with fewer routed slots than experts
(tokens * k < experts: decoding a few sequences), each slot gathers its expert's matrices, so
only the chosen experts' weights are read. It is exact (dropless) and `run_experts` takes it
automatically outside a mesh, whatever the backend but `dense`.

Shapes: x `[tokens, embed]`, expert_ids / weights `[tokens, k]`, valid bool `[tokens]`
(padding tokens are not routed), expert weights gate/up `[experts, embed, mlp]`, down
`[experts, mlp, embed]`.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from flax import linen as nn

from c2jax.model.layers import project


def expert_ffn(tokens, gate, up, down, cfg):
    """SwiGLU of each expert on its own tokens: `[experts, n, embed]` -> `[experts, n, embed]`."""
    g = project("gnh,ghf->gnf", tokens, gate, cfg)
    u = project("gnh,ghf->gnf", tokens, up, cfg)
    return project("gnf,gfh->gnh", nn.silu(g) * u, down, cfg)


def combine_weights(expert_ids, weights, num_experts):
    """float32 `[tokens, experts]`: each token's routing weight on every expert (0 if unused)."""
    onehot = jax.nn.one_hot(expert_ids, num_experts, dtype=jnp.float32)
    return jnp.einsum("tke,tk->te", onehot, weights.astype(jnp.float32))


def weighted_sum(per_slot, weights, axis: int):
    """Each token's k expert outputs combined by its routing weights, in float32.

    per_slot `[k, tokens, embed]` (axis=0) or `[tokens, k, embed]` (axis=1), weights
    `[tokens, k]` -> `[tokens, embed]`. k multiply-adds, not an einsum or a reduction: XLA:CPU
    lowers the einsum to a batched dot with a contraction of size k (a matrix-vector product
    per token; ~5 ms per MoE layer forward and as much backward at `small` 8 x 512), and a sum
    over the k axis to a YNNPACK reduction fused with the gather (~22 ms), while the add chain
    is one elementwise loop fusion.
    """
    w = weights.astype(jnp.float32)
    y = None
    for choice in range(weights.shape[1]):        # k is small: an unrolled chain of adds
        term = jnp.take(per_slot, choice, axis=axis).astype(jnp.float32) * w[:, choice, None]
        y = term if y is None else y + term
    return y


def dense(x, expert_ids, weights, gate, up, down, cfg):
    """Reference: all experts on all tokens, in float32 whatever the compute dtype (it is the
    numerical reference, and XLA:CPU cannot run the bf16 x bf16 -> f32 batched dot that its
    bf16 layout turns into). Returns (y `[tokens, embed]`, dropped=0)."""
    num_experts = gate.shape[0]
    f32 = jnp.float32
    x32 = x.astype(f32)
    g = jnp.einsum("th,ehf->etf", x32, gate.astype(f32))
    u = jnp.einsum("th,ehf->etf", x32, up.astype(f32))
    per_expert = jnp.einsum("etf,efh->eth", nn.silu(g) * u, down.astype(f32))
    combine = combine_weights(expert_ids, weights, num_experts)
    y = jnp.einsum("eth,te->th", per_expert, combine)
    return y.astype(x.dtype), jnp.zeros((), jnp.int32)


def capacity_per_expert(num_tokens: int, k: int, num_experts: int, factor: float) -> int:
    """Slots per expert per shard: ceil(factor * tokens * k / experts), at most `tokens` (a
    token picks an expert at most once, so more slots can never be used)."""
    return max(1, min(num_tokens, math.ceil(factor * num_tokens * k / num_experts)))


def capacity(x, expert_ids, weights, valid, gate, up, down, cfg, *, num_experts: int,
             expert_axis: str | None = None, expert_shards: int = 1, cap: int = 0):
    """Capacity-buffer dispatch. Returns (y `[tokens, embed]`, dropped slot count).

    Slots are filled choice-major (every token's first choice before any second choice), so
    under pressure the lowest-ranked choices drop first. With `expert_axis`, the local buffers
    `[experts, C, embed]` are exchanged with an `all_to_all` so each shard runs only its
    `experts / expert_shards` experts (the weights passed in are that local slice). `cap`
    overrides the capacity the config gives.
    """
    tokens, k = expert_ids.shape
    embed = x.shape[-1]
    cap = cap or capacity_per_expert(tokens, k, num_experts, cfg.capacity_factor)
    slot_expert = expert_ids.T.reshape(-1)                     # [k*tokens], choice-major
    slot_valid = jnp.tile(valid, k)
    slot_token = jnp.tile(jnp.arange(tokens, dtype=jnp.int32), k)
    onehot = jax.nn.one_hot(slot_expert, num_experts, dtype=jnp.int32) * slot_valid[:, None]
    slot_rank = jnp.take_along_axis(jnp.cumsum(onehot, axis=0), slot_expert[:, None], 1)[:, 0] - 1
    keep = slot_valid & (slot_rank < cap)
    trash = num_experts * cap                                  # index of a zero row
    slot_buffer = jnp.where(keep, slot_expert * cap + slot_rank, trash)
    buffer_token = jnp.full((trash + 1,), tokens, jnp.int32).at[slot_buffer].set(slot_token)
    x_padded = jnp.concatenate([x, jnp.zeros((1, embed), x.dtype)], axis=0)
    buffers = x_padded[buffer_token[:trash]].reshape(num_experts, cap, embed)

    if expert_axis is None:
        out = expert_ffn(buffers, gate, up, down, cfg)
    else:
        local = num_experts // expert_shards
        sent = buffers.reshape(expert_shards, local, cap, embed)
        # [source shard, local experts, C, embed] after the exchange.
        received = jax.lax.all_to_all(sent, expert_axis, 0, 0, tiled=True)
        received = received.transpose(1, 0, 2, 3).reshape(local, expert_shards * cap, embed)
        done = expert_ffn(received, gate, up, down, cfg)
        done = done.reshape(local, expert_shards, cap, embed).transpose(1, 0, 2, 3)
        out = jax.lax.all_to_all(done, expert_axis, 0, 0, tiled=True)
    out = jnp.concatenate([out.reshape(trash, embed), jnp.zeros((1, embed), out.dtype)], axis=0)
    y = weighted_sum(out[slot_buffer].reshape(k, tokens, embed), weights, axis=0)
    dropped = jnp.sum(slot_valid & ~keep, dtype=jnp.int32)
    return y.astype(x.dtype), dropped


def capacity_tiers(tokens: int, k: int, num_experts: int) -> list[int]:
    """Capacities a dropless `tiered` dispatch picks from: the mean load times 1, 2, 4, ...,
    ending with `tokens` (no expert can receive more)."""
    tiers, cap = [], max(1, math.ceil(tokens * k / num_experts))
    while cap < tokens:
        tiers.append(cap)
        cap *= 2
    return tiers + [tokens]


def tiered(x, expert_ids, weights, valid, gate, up, down, cfg):
    """Dropless capacity dispatch at the smallest capacity tier that holds the busiest expert.
    Returns (y, dropped=0).

    Dropless capacity is `tokens` slots per expert, `experts / k` times the routed work; at
    decode sizes the busiest expert usually holds a few times the mean load. The tiers
    (`capacity_tiers`) are compiled as branches of one `lax.switch` and only the chosen one
    runs, so results equal the full-capacity dispatch's with a fraction of its expert GEMMs.
    """
    tokens, k = expert_ids.shape
    num_experts = gate.shape[0]
    tiers = capacity_tiers(tokens, k, num_experts)
    onehot = jax.nn.one_hot(expert_ids, num_experts, dtype=jnp.int32) * valid[:, None, None]
    busiest = jnp.max(jnp.sum(onehot, axis=(0, 1)))
    tier = jnp.sum(busiest > jnp.asarray(tiers[:-1], jnp.int32))
    branches = [functools.partial(capacity, cfg=cfg, num_experts=num_experts, cap=cap)
                for cap in tiers]
    return jax.lax.switch(tier, [lambda args, f=f: f(*args) for f in branches],
                          (x, expert_ids, weights, valid, gate, up, down))


def gathered(x, expert_ids, weights, gate, up, down, cfg):
    """Each (token, choice) runs its own expert's gathered matrices. Returns (y, dropped=0).
    Work and weight reads are O(tokens * k) experts, so it wins when that is below `experts`."""
    g = project("th,tkhf->tkf", x, gate[expert_ids], cfg)
    u = project("th,tkhf->tkf", x, up[expert_ids], cfg)
    per_slot = project("tkf,tkfh->tkh", nn.silu(g) * u, down[expert_ids], cfg)
    y = weighted_sum(per_slot, weights, axis=1)
    return y.astype(x.dtype), jnp.zeros((), jnp.int32)


def ragged(x, expert_ids, weights, gate, up, down, cfg):
    """Sort-by-expert dispatch through `jax.lax.ragged_dot`. Returns (y, dropped=0)."""
    tokens, k = expert_ids.shape
    num_experts = gate.shape[0]
    dtype = jnp.dtype(cfg.dtype)
    flat_expert = expert_ids.reshape(-1)                       # [tokens*k], token-major
    order = jnp.argsort(flat_expert, stable=True)
    sorted_x = x[order // k].astype(dtype)
    group_sizes = jnp.bincount(flat_expert, length=num_experts).astype(jnp.int32)

    def grouped(lhs, rhs):
        return jax.lax.ragged_dot(lhs, rhs.astype(dtype), group_sizes,
                                  preferred_element_type=jnp.float32).astype(dtype)

    h = nn.silu(grouped(sorted_x, gate)) * grouped(sorted_x, up)
    out_sorted = grouped(h, down)
    out = jnp.zeros_like(out_sorted).at[order].set(out_sorted)
    y = weighted_sum(out.reshape(tokens, k, -1), weights, axis=1)
    return y.astype(x.dtype), jnp.zeros((), jnp.int32)
