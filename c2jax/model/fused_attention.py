"""The attention core in a low-precision compute dtype, with a hand-written backward.

`causal_attention(q, k, value, mask_of, scale, block)` is softmax attention with bf16 (or any
low-precision) operands, float32 scores, softmax and accumulation. Queries are processed in
blocks of `block` rows, each against the keys up to its own last row only (the rest would be
masked anyway), so a causal step does ~(n+1)/2n of the full score work for n blocks.

Why not autodiff: differentiating the blocked forward makes every block's key / value
cotangent a full-length zero-padded array, and XLA sums them one `add` at a time (six full
passes per layer at 4 blocks, the slowest ops of the `small` bf16 step after the output head);
its softmax backward also takes the bf16 cotangent of the probabilities. Here the backward is
written once (FlashAttention-2's, Dao 2023, sec. 3.1.2, without the tiling):

    dP = dO V^T                 (float32)
    dS = P * (dP - rowsum(dP * P)) * scale
    dQ = dS K,  dK += dS^T Q,  dV += P^T dO    (bf16 operands, float32 accumulation)

with dK and dV accumulated in float32 over the blocks that see each key, in place.
The probabilities the forward multiplies V with (bf16, at `small`, 8 x 512 tokens: 21 MB per
layer with 4 blocks) are kept for the backward rather than recomputed; dS is formed in float32
from them and rounded to bf16 once.

Shapes: q `[b, sq, h, d]`, k `[b, sk, h, d]`, value `[b, sk, h, v]` in the compute dtype;
`mask_of(lo, hi, keys)` returns the bool `[b, hi - lo, keys]` document mask of query rows
lo..hi against the first `keys` keys. Result `[b, sq, h, v]` in the compute dtype.
"""
from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from c2jax.model.layers import transposed_in_memory

#: Additive score bias of a masked pair (finite: a fully masked row gives a uniform row, not NaN).
MASKED = -1e30


def query_blocks(sq: int, sk: int, block: int) -> list[tuple[int, int, int]]:
    """(lo, hi, keys) per query block: rows lo..hi attend to the first `keys` keys."""
    if block <= 0 or sq <= block or sk != sq:
        return [(0, sq, sk)]
    return [(lo, min(lo + block, sq), min(lo + block, sq)) for lo in range(0, sq, block)]


def _heads_first(t):
    """`[b, s, h, d]` -> `[b, h, s, d]`."""
    return t.transpose(0, 2, 1, 3)


def _forward(q, k, value, biases, scale, blocks):
    """Heads-first q/k/value; returns (out `[b, h, sq, v]`, probabilities per block), both in
    q's dtype."""
    outs, probs = [], []
    for (lo, hi, keys), bias in zip(blocks, biases):
        scores = jnp.einsum("bhqd,bhkd->bhqk", q[:, :, lo:hi], k[:, :, :keys],
                            preferred_element_type=jnp.float32)
        p = jax.nn.softmax(scores * scale + bias[:, None], axis=-1).astype(q.dtype)
        outs.append(jnp.einsum("bhqk,bhkv->bhqv", p, value[:, :, :keys],
                               preferred_element_type=jnp.float32).astype(q.dtype))
        probs.append(p)
    return jnp.concatenate(outs, axis=2) if len(outs) > 1 else outs[0], probs


@partial(jax.custom_vjp, nondiff_argnums=(4, 5))
def _core(q, k, value, biases, scale, blocks):
    return _forward(q, k, value, biases, scale, blocks)[0]


def _core_fwd(q, k, value, biases, scale, blocks):
    out, probs = _forward(q, k, value, biases, scale, blocks)
    return out, (q, k, value, probs)


def _core_bwd(scale, blocks, residuals, g):
    q, k, value, probs = residuals
    dtype = q.dtype
    g = g.astype(dtype)
    dq_blocks = []
    dk = jnp.zeros(k.shape, jnp.float32)
    dv = jnp.zeros(value.shape, jnp.float32)
    for (lo, hi, keys), p in zip(blocks, probs):
        g_i = g[:, :, lo:hi]
        dp = jnp.einsum("bhqv,bhkv->bhqk", g_i, value[:, :, :keys],
                        preferred_element_type=jnp.float32)
        p32 = p.astype(jnp.float32)
        ds = (p32 * (dp - jnp.sum(dp * p32, axis=-1, keepdims=True)) * scale).astype(dtype)
        dq_blocks.append(jnp.einsum("bhqk,bhkd->bhqd", ds, k[:, :, :keys],
                                    preferred_element_type=jnp.float32).astype(dtype))
        # [b, h, k, q] in memory: XLA:CPU's dot contracting a leading dim is 3-4x slower.
        ds_t = transposed_in_memory(ds, (0, 1, 3, 2))
        p_t = transposed_in_memory(p, (0, 1, 3, 2))
        dk_i = jnp.einsum("bhkq,bhqd->bhkd", ds_t, q[:, :, lo:hi],
                          preferred_element_type=jnp.float32)
        dv_i = jnp.einsum("bhkq,bhqv->bhkv", p_t, g_i, preferred_element_type=jnp.float32)
        dk = jax.lax.dynamic_update_slice_in_dim(dk, dk[:, :, :keys] + dk_i, 0, axis=2)
        dv = jax.lax.dynamic_update_slice_in_dim(dv, dv[:, :, :keys] + dv_i, 0, axis=2)
    dq = jnp.concatenate(dq_blocks, axis=2) if len(dq_blocks) > 1 else dq_blocks[0]
    # The biases come from integer segment ids and positions: nothing upstream to train.
    zero_biases = [jnp.zeros(p.shape[:1] + p.shape[2:], jnp.float32) for p in probs]
    return dq, dk.astype(dtype), dv.astype(value.dtype), zero_biases


_core.defvjp(_core_fwd, _core_bwd)


def causal_attention(q, k, value, mask_of, scale: float, block: int = 0) -> jax.Array:
    """Softmax attention in q's dtype with f32 scores; see the module docstring for shapes."""
    blocks = tuple(query_blocks(q.shape[1], k.shape[1], block))
    biases = [jnp.where(mask_of(lo, hi, keys), 0.0, MASKED).astype(jnp.float32)
              for lo, hi, keys in blocks]
    out = _core(_heads_first(q), _heads_first(k), _heads_first(value), biases, float(scale),
                blocks)
    return _heads_first(out)
