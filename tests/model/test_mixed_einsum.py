"""bf16 projections: f32 accumulation forward and backward, and every backward GEMM on bf16."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.model.layers import mixed_einsum

EQUATIONS = [
    ("bse,ef->bsf", (2, 8, 32), (32, 48)),
    ("gnh,ghf->gnf", (3, 8, 32), (3, 32, 16)),          # capacity-padded experts
    ("th,tkhf->tkf", (8, 32), (8, 2, 32, 16)),          # gathered experts
    ("bshd,hde->bse", (2, 4, 3, 16), (3, 16, 32)),       # attention output
]


@pytest.mark.parametrize("equation,x_shape,w_shape", EQUATIONS)
def test_gradients_match_f32_autodiff_within_bf16_rounding(equation, x_shape, w_shape):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal(x_shape), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal(w_shape), jnp.float32)
    out_shape = jax.eval_shape(lambda x, w: jnp.einsum(equation, x, w), x, w).shape
    t = jnp.asarray(rng.standard_normal(out_shape), jnp.float32)

    def loss(f):
        return lambda x, w: jnp.sum(f(x, w).astype(jnp.float32) * t)

    ours = jax.grad(loss(lambda x, w: mixed_einsum(equation, x, w)), argnums=(0, 1))(x, w)
    want = jax.grad(loss(lambda x, w: jnp.einsum(equation, x.astype(jnp.float32), w,
                                                 precision="highest")), argnums=(0, 1))(x, w)
    assert ours[0].dtype == jnp.bfloat16 and ours[1].dtype == jnp.float32
    for got, ref in zip(ours, want):
        got, ref = np.asarray(got, np.float32), np.asarray(ref, np.float32)
        # w is rounded to bf16 (2^-9 relative) and so is the cotangent t: a few 2^-9 per term.
        assert np.linalg.norm(got - ref) <= 2e-2 * np.linalg.norm(ref)


def test_every_dot_of_forward_and_backward_takes_bf16_operands():
    x = jnp.ones((4, 8, 32), jnp.bfloat16)
    w = jnp.ones((32, 16), jnp.float32)
    grad = jax.grad(lambda x, w: jnp.sum(mixed_einsum("bse,ef->bsf", x, w).astype(jnp.float32)
                                         ), argnums=(0, 1))
    jaxpr = jax.make_jaxpr(grad)(x, w)
    dots = [e for e in _equations(jaxpr.jaxpr) if e.primitive.name == "dot_general"]
    assert len(dots) == 3
    for eqn in dots:
        assert all(v.aval.dtype == jnp.bfloat16 for v in eqn.invars), eqn
        assert eqn.params["preferred_element_type"] == jnp.float32


def _equations(jaxpr):
    for eqn in jaxpr.eqns:
        yield eqn
        for value in eqn.params.values():
            inner = getattr(value, "jaxpr", value)
            if hasattr(inner, "eqns"):
                yield from _equations(inner)
