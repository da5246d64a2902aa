"""Training recipes (c2jax.precision): plumbing pinned by identity quantizers against plain
autodiff, each GEMM pinned against an explicit quantize + scaled_matmul, accuracy vs f32."""
import functools

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pallas_kernels as pk
from c2jax.precision import dot_general_for

DENSE = (((1,), (0,)), ((), ()))          # x [M, K] @ w [K, N]


def _integers(seed, shape, dtype=jnp.float32):
    """Small integers: every product and partial sum is exact in f32/bf16, in any order."""
    return jnp.asarray(np.random.default_rng(seed).integers(-4, 5, shape), dtype)


def _normal(seed, shape, scale=1.0, dtype=jnp.float32):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype)


def _snr_db(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((x - ref) ** 2))


def test_bf16_recipe_is_plain_dot_general():
    assert dot_general_for("bf16") is lax.dot_general


@pytest.mark.parametrize("spec,lhs_shape,rhs_shape", [
    ("bsd,df->bsf", (2, 5, 40), (40, 24)),              # Dense on [batch, seq, embed]; padded
    ("ecd,edf->ecf", (3, 7, 32), (3, 32, 20)),          # experts as a batch dim
    ("bshd,hdf->bsf", (2, 3, 4, 8), (4, 8, 10)),        # two contracting dims (out-proj)
    ("bd,fd->bf", (9, 33), (17, 33)),                   # weight stored [N, K]
])
def test_identity_quantizers_give_exactly_plain_autodiff(spec, lhs_shape, rhs_shape):
    x, w = _integers(0, lhs_shape), _integers(1, rhs_shape)
    out_shape = jax.eval_shape(lambda x, w: jnp.einsum(spec, x, w), x, w).shape
    cotangent = _integers(2, out_shape)
    identity = dot_general_for("identity")

    def loss(x, w, dot_general):
        return jnp.sum(cotangent * jnp.einsum(spec, x, w, _dot_general=dot_general))

    got = jax.jit(jax.value_and_grad(lambda x, w: loss(x, w, identity), argnums=(0, 1)))(x, w)
    want = jax.jit(jax.value_and_grad(lambda x, w: loss(x, w, lax.dot_general),
                                      argnums=(0, 1)))(x, w)
    for g, v in zip(jax.tree.leaves(got), jax.tree.leaves(want)):
        assert g.shape == v.shape and g.dtype == v.dtype
        np.testing.assert_array_equal(np.asarray(g), np.asarray(v))


def test_identity_in_flax_dense_with_bf16_matches_plain_dense():
    x = _integers(1, (4, 6, 48), jnp.bfloat16)
    plain = nn.Dense(16, dtype=jnp.bfloat16)
    params = {"params": {"kernel": _integers(2, (48, 16)), "bias": _integers(3, (16,))}}
    quantized = nn.Dense(16, dtype=jnp.bfloat16, dot_general=dot_general_for("identity"))

    def grads(module):
        return jax.jit(jax.grad(lambda p, x: jnp.sum(module.apply(p, x).astype(jnp.float32) ** 2),
                                argnums=(0, 1)))(params, x)

    for g, v in zip(jax.tree.leaves(grads(quantized)), jax.tree.leaves(grads(plain))):
        assert g.dtype == v.dtype
        np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(v, np.float32))


@pytest.fixture(scope="module")
def dense_problem():
    """x [M=64, K=128], w [K, N=96], cotangent [M, N]: every size a multiple of 32."""
    return _normal(3, (64, 128)), _normal(4, (128, 96), 0.1), _normal(5, (64, 96))


def _vjp(dot_general, x, w, g):
    out, pullback = jax.vjp(lambda x, w: dot_general(x, w, DENSE), x, w)
    return (out,) + pullback(g)


@functools.partial(jax.jit, static_argnames=("recipe", "stochastic_rounding"))
def _recipe_vjp(x, w, g, key, recipe, stochastic_rounding=True):
    """(y, dx, dw) of x @ w under ``recipe``: one compiled function shared by the tests."""
    return _vjp(dot_general_for(recipe, key, stochastic_rounding=stochastic_rounding), x, w, g)


def test_mxfp8_gemms_are_the_documented_quantized_gemms(dense_problem):
    x, w, g = dense_problem
    y, dx, dw = _recipe_vjp(x, w, g, jax.random.key(0), "mxfp8")

    def gemm(a, b):                     # a [R, C] x b [S, C], both quantized along C
        return pk.scaled_matmul(*pk.quantize_mxfp8(a), *pk.quantize_mxfp8(b), "mxfp8")

    @jax.jit
    def explicit(x, w, g):
        return gemm(x, w.T), gemm(g, w), gemm(g.T, x.T).T    # fprop: K; dgrad: N; wgrad: M

    for got, want in zip((y, dx, dw), explicit(x, w, g)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


def test_nvfp4_gemms_are_the_documented_quantized_gemms(dense_problem):
    x, w, g = dense_problem
    key = jax.random.key(11)
    y, dx, dw = _recipe_vjp(x, w, g, key, "nvfp4")
    call_key = jax.random.fold_in(key, 0)             # the first call of the returned function
    sign = pk.hadamard_sign(jax.random.key(0))

    def gemm(a, b, **b_kwargs):
        qa, qb = pk.quantize_nvfp4(a[0], **a[1]), pk.quantize_nvfp4(b, **b_kwargs)
        return pk.scaled_matmul(qa[0], qa[1], qb[0], qb[1], "nvfp4", a_global_scale=qa[2],
                                b_global_scale=qb[2])

    @jax.jit
    def explicit(x, w, g, call_key):
        dgrad_grad = dict(rounding="stochastic", key=jax.random.fold_in(call_key, 0))
        wgrad_grad = dict(rounding="stochastic", key=jax.random.fold_in(call_key, 1))
        rotate = lambda m: pk.random_hadamard_transform(m, sign)
        return (gemm((x, {}), w.T, two_d=True),                       # fprop: 16x16 weight tiles
                gemm((g, dgrad_grad), w, two_d=True),                 # dgrad: same weight codes
                gemm((rotate(g.T), wgrad_grad), rotate(x.T)).T)       # wgrad: RHT along tokens

    for got, want in zip((y, dx, dw), explicit(x, w, g, call_key)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.parametrize("recipe,min_fwd,min_grad", [("mxfp8", 25.0, 25.0),
                                                     ("nvfp4", 15.0, 13.0)])
def test_snr_against_f32_autodiff(dense_problem, recipe, min_fwd, min_grad):
    x, w, g = dense_problem
    got = _recipe_vjp(x, w, g, jax.random.key(5), recipe)
    want = jax.jit(lambda x, w, g: _vjp(
        lambda *a, **k: lax.dot_general(*a, **k, precision=lax.Precision.HIGHEST), x, w, g))(
            x, w, g)
    assert _snr_db(got[0], want[0]) >= min_fwd
    assert _snr_db(got[1], want[1]) >= min_grad   # nvfp4: stochastic rounding costs ~1.5 dB
    assert _snr_db(got[2], want[2]) >= min_grad


def test_stochastic_rounding_key_handling(dense_problem):
    x, w, g = dense_problem
    y1, dx1, dw1 = _recipe_vjp(x, w, g, jax.random.key(1), "nvfp4")
    y2, dx2, dw2 = _recipe_vjp(x, w, g, jax.random.key(2), "nvfp4")
    np.testing.assert_array_equal(np.asarray(y1), np.asarray(y2))         # fprop is RNE
    assert not np.array_equal(np.asarray(dx1), np.asarray(dx2))           # gradients use the key
    assert not np.array_equal(np.asarray(dw1), np.asarray(dw2))
    # without stochastic rounding the key does not matter
    rne1 = _recipe_vjp(x, w, g, jax.random.key(1), "nvfp4", stochastic_rounding=False)
    rne2 = _recipe_vjp(x, w, g, jax.random.key(2), "nvfp4", stochastic_rounding=False)
    for a, b in zip(rne1, rne2):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    # successive calls of one returned function are numbered: two calls != twice the first
    @jax.jit
    def twice(x, key):
        dot_general = dot_general_for("nvfp4", key)
        return jax.grad(lambda x: jnp.sum((dot_general(x, w, DENSE) + dot_general(x, w, DENSE))
                                          * g))(x)

    assert not np.array_equal(np.asarray(twice(x, jax.random.key(1))), 2 * np.asarray(dx1))


def test_weight_as_lhs_mirrors_weight_as_rhs(dense_problem):
    x, w, g = dense_problem
    key = jax.random.key(6)
    y, dx, dw = _recipe_vjp(x, w, g, key, "nvfp4")             # weight as rhs: x @ w

    @jax.jit
    def weight_as_lhs(w_t, x, g, key):                          # w^T [N, K] . x [M, K]
        dot_general = dot_general_for("nvfp4", key, weight_operand="lhs")
        out, pullback = jax.vjp(lambda wt, x: dot_general(wt, x, (((1,), (1,)), ((), ()))), w_t, x)
        return (out,) + pullback(g.T)

    y_t, dw_t, dx_lhs = weight_as_lhs(w.T, x, g, key)
    np.testing.assert_allclose(np.asarray(y_t), np.asarray(y).T, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(np.asarray(dw_t), np.asarray(dw).T)  # the same three GEMMs
    np.testing.assert_array_equal(np.asarray(dx_lhs), np.asarray(dx))


def test_odd_shapes_are_zero_padded_and_dtypes_kept():
    x = _normal(9, (3, 5, 40), dtype=jnp.bfloat16)       # 15 tokens, K = 40
    w = _normal(10, (40, 24), dtype=jnp.bfloat16)        # N = 24
    dot_general = dot_general_for("mxfp8")
    forward = lambda x, w: jnp.einsum("bsd,df->bsf", x, w, _dot_general=dot_general)

    @jax.jit
    def run(x, w):
        x_padded = jnp.pad(x.reshape(15, 40).astype(jnp.float32), ((0, 17), (0, 24)))
        w_padded = jnp.pad(w.T.astype(jnp.float32), ((0, 8), (0, 24)))
        want = pk.scaled_matmul(*pk.quantize_mxfp8(x_padded), *pk.quantize_mxfp8(w_padded), "mxfp8")
        return forward(x, w), want

    y, want = run(x, w)
    assert y.dtype == jnp.bfloat16 and y.shape == (3, 5, 24)
    np.testing.assert_array_equal(np.asarray(y.reshape(15, 24)),
                                  np.asarray(want[:15, :24].astype(jnp.bfloat16)))
    dx, dw = jax.eval_shape(jax.grad(lambda x, w: jnp.sum(forward(x, w).astype(jnp.float32)),
                                     argnums=(0, 1)), x, w)
    assert (dx.dtype, dx.shape) == (jnp.bfloat16, x.shape)
    assert (dw.dtype, dw.shape) == (jnp.bfloat16, w.shape)


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="recipe must be one of"):
        dot_general_for("fp8")
    with pytest.raises(ValueError, match="weight_operand"):
        dot_general_for("mxfp8", weight_operand="both")
    dot_general = dot_general_for("mxfp8")
    x = jnp.ones((4, 32))
    with pytest.raises(NotImplementedError, match="out_sharding"):
        dot_general(x, x, (((1,), (1,)), ((), ())), out_sharding=object())
    with pytest.raises(TypeError, match="must be floating"):
        dot_general(x.astype(jnp.int32), x, (((1,), (1,)), ((), ())))
    with pytest.raises(TypeError):
        dot_general(x, jnp.ones((4, 16)), (((1,), (1,)), ((), ())))   # lax's own shape error
