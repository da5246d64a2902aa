"""The bf16 attention core's hand-written backward against autodiff of plain f32 attention."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.model.attention import document_mask
from c2jax.model.fused_attention import causal_attention, query_blocks


def _inputs(b=2, s=48, h=3, d=8, v=5, seed=0):
    keys = jax.random.split(jax.random.key(seed), 4)
    q = jax.random.normal(keys[0], (b, s, h, d)).astype(jnp.bfloat16)
    k = jax.random.normal(keys[1], (b, s, h, d)).astype(jnp.bfloat16)
    value = jax.random.normal(keys[2], (b, s, h, v)).astype(jnp.bfloat16)
    # Two packed documents in row 0 (boundary at 20), one in row 1.
    segments = jnp.stack([jnp.where(jnp.arange(s) < 20, 1, 2), jnp.ones(s, jnp.int32)])
    positions = jnp.stack([jnp.where(jnp.arange(s) < 20, jnp.arange(s), jnp.arange(s) - 20),
                           jnp.arange(s)])
    cotangent = jax.random.normal(keys[3], (b, s, h, v))
    return q, k, value, segments.astype(jnp.int32), positions.astype(jnp.int32), cotangent


def _reference(q, k, value, segments, positions, scale):
    """Unblocked f32 attention (the same bf16 values, upcast), differentiated by autodiff."""
    mask = document_mask(segments, positions, segments, positions)
    scores = jnp.einsum("bqhd,bkhd->bhqk", q, k) * scale
    probs = jax.nn.softmax(jnp.where(mask[:, None], scores, -1e30), axis=-1)
    return jnp.einsum("bhqk,bkhv->bqhv", probs, value)


def _ours(q, k, value, segments, positions, scale, block):
    def mask_of(lo, hi, keys):
        return document_mask(segments[:, lo:hi], positions[:, lo:hi], segments[:, :keys],
                             positions[:, :keys])
    return causal_attention(q, k, value, mask_of, scale, block).astype(jnp.float32)


@pytest.mark.parametrize("block", [0, 16, 20])
def test_matches_autodiff_of_f32_attention(block):
    q, k, value, segments, positions, g = _inputs()
    scale = 0.35
    f32 = lambda t: t.astype(jnp.float32)

    def loss(fn, *qkv):
        return jnp.sum(fn(*qkv) * g)

    ours, our_grads = jax.value_and_grad(
        lambda *qkv: loss(lambda *t: _ours(*t, segments, positions, scale, block), *qkv),
        argnums=(0, 1, 2))(q, k, value)
    ref, ref_grads = jax.value_and_grad(
        lambda *qkv: loss(lambda *t: _reference(*t, segments, positions, scale), *qkv),
        argnums=(0, 1, 2))(f32(q), f32(k), f32(value))
    # bf16 rounding of probabilities, outputs and gradients: ~3 significant digits.
    np.testing.assert_allclose(ours, ref, rtol=2e-2)
    for name, ours_g, ref_g in zip("q k value".split(), our_grads, ref_grads):
        assert ours_g.dtype == jnp.bfloat16, name
        err = jnp.linalg.norm(f32(ours_g) - ref_g) / jnp.linalg.norm(ref_g)
        assert err < 1e-2, (name, float(err))


@pytest.mark.parametrize("block", [0, 16])
def test_in_float32_the_hand_written_backward_is_autodiffs(block):
    # No rounding anywhere: what is left is the formula (dS, the row dots, the dK/dV sums).
    q, k, value, segments, positions, g = (t.astype(jnp.float32) if t.dtype == jnp.bfloat16
                                           else t for t in _inputs(seed=2))
    ours = jax.grad(lambda *qkv: jnp.sum(_ours(*qkv, segments, positions, 0.4, block) * g),
                    argnums=(0, 1, 2))(q, k, value)
    ref = jax.grad(lambda *qkv: jnp.sum(_reference(*qkv, segments, positions, 0.4) * g),
                   argnums=(0, 1, 2))(q, k, value)
    for a, b in zip(ours, ref):
        assert a.dtype == jnp.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_blocking_does_not_change_the_result():
    q, k, value, segments, positions, g = _inputs(seed=1)

    def grads(block):
        return jax.grad(lambda *qkv: jnp.sum(_ours(*qkv, segments, positions, 0.5, block) * g),
                        argnums=(0, 1, 2))(q, k, value)

    unblocked, blocked = grads(0), grads(12)
    for a, b in zip(unblocked, blocked):
        np.testing.assert_allclose(a.astype(jnp.float32), b.astype(jnp.float32), atol=2e-2,
                                   rtol=2e-2)


def test_query_blocks():
    assert query_blocks(10, 10, 4) == [(0, 4, 4), (4, 8, 8), (8, 10, 10)]
    assert query_blocks(10, 10, 0) == [(0, 10, 10)]
    assert query_blocks(4, 12, 2) == [(0, 4, 12)]       # keys not in query order: one block
