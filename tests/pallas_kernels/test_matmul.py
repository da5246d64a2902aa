"""Block-scaled matmuls: vs dequantize-then-f32-matmul, vs f32 (SNR), kernel == reference."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import matmul
from pallas_kernels.matmul import grouped_scaled_matmul, scaled_matmul
from pallas_kernels.mxfp8 import dequantize_mxfp8, quantize_mxfp8
from pallas_kernels.nvfp4 import dequantize_nvfp4, quantize_nvfp4


def _quantized(fmt, x):
    """-> (codes, scales, global scale or None, dequantized f32)."""
    if fmt == "mxfp8":
        codes, scales = quantize_mxfp8(x)
        return codes, scales, None, dequantize_mxfp8(codes, scales)
    codes, scales, s_enc = quantize_nvfp4(x)
    return codes, scales, s_enc, dequantize_nvfp4(codes, scales, s_enc)


@pytest.fixture(scope="module", params=["mxfp8", "nvfp4"])
def problem(request):
    """groups=2, M=24, N=40 (not powers of two), K=256 (two K tiles of 128), quantized once."""
    fmt = request.param
    rng = np.random.default_rng(0)
    a = jnp.asarray(rng.standard_normal((2, 24, 256)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((2, 40, 256)) * 0.1, jnp.float32)
    qa, qb = _quantized(fmt, a), _quantized(fmt, b)
    kwargs = dict(a_global_scale=qa[2], b_global_scale=qb[2])
    ref = grouped_scaled_matmul(qa[0], qa[1], qb[0], qb[1], fmt, impl="reference", **kwargs)
    return fmt, a, b, qa, qb, kwargs, ref


def _max_rel(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return np.max(np.abs(x - ref)) / np.max(np.abs(ref))


def _snr_db(x, ref):
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((x - ref) ** 2))


def test_matches_dequantize_then_f32_matmul_and_pallas_is_bit_identical(problem):
    fmt, _, _, qa, qb, kwargs, ref = problem
    dequantized = jnp.einsum("gmk,gnk->gmn", qa[3], qb[3], precision="highest")
    assert ref.dtype == jnp.float32 and ref.shape == (2, 24, 40)
    assert _max_rel(ref, dequantized) <= 1e-5
    got = grouped_scaled_matmul(qa[0], qa[1], qb[0], qb[1], fmt, impl="pallas", **kwargs)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))
    # the 2-D entry point is the one-group case
    single = scaled_matmul(qa[0][1], qa[1][1], qb[0][1], qb[1][1], fmt, **kwargs)
    np.testing.assert_array_equal(np.asarray(single), np.asarray(ref[1]))


def test_pallas_with_small_tiles_and_partial_edges_matches_reference(problem):
    fmt, _, _, qa, qb, kwargs, ref = problem
    global_scales = None
    if fmt == "nvfp4":
        global_scales = tuple(1.0 / jnp.float32(kwargs[name])
                              for name in ("a_global_scale", "b_global_scale"))
    block = 32 if fmt == "mxfp8" else 16
    # 16 x 16 output tiles over M=24, N=40 (partial edges), K in four steps of 64
    got = jax.jit(lambda *ops: matmul._matmul_pallas(*ops, global_scales, fmt, block, 64,
                                                     jnp.float32, tile=(16, 16)))(
        qa[0], qa[1], qb[0], qb[1])
    assert _max_rel(got, ref) <= 1e-6


def test_xla_path_decodes_exactly_to_bf16_and_matches_reference(problem):
    # The sm_90 path: XLA decode to bf16 (exact) + bf16 GEMM with f32 accumulation.
    fmt, _, _, qa, qb, kwargs, ref = problem
    got = grouped_scaled_matmul(qa[0], qa[1], qb[0], qb[1], fmt, impl="xla", **kwargs)
    assert got.dtype == jnp.float32
    assert _max_rel(got, ref) <= 1e-6


def test_snr_against_f32_matmul(problem):
    fmt, a, b, _, _, _, ref = problem
    exact = np.einsum("gmk,gnk->gmn", np.asarray(a, np.float64), np.asarray(b, np.float64))
    assert _snr_db(ref, exact) >= {"mxfp8": 25.0, "nvfp4": 15.0}[fmt]


def test_out_dtype(problem):
    fmt, _, _, qa, qb, kwargs, ref = problem
    out = grouped_scaled_matmul(qa[0], qa[1], qb[0], qb[1], fmt, out_dtype=jnp.bfloat16, **kwargs)
    assert out.dtype == jnp.bfloat16
    np.testing.assert_array_equal(np.asarray(out), np.asarray(ref.astype(jnp.bfloat16)))


def test_bad_arguments_give_clear_errors():
    qa = qb = (jnp.zeros((32, 64), jnp.float4_e2m1fn), jnp.ones((32, 4), jnp.float8_e4m3fn))
    ma = mb = (jnp.zeros((32, 64), jnp.float8_e4m3fn), jnp.ones((32, 2), jnp.float8_e8m0fnu))
    with pytest.raises(ValueError, match="needs a_global_scale"):
        scaled_matmul(qa[0], qa[1], qb[0], qb[1], "nvfp4")
    with pytest.raises(ValueError, match="mxfp8 has no global scales"):
        scaled_matmul(ma[0], ma[1], mb[0], mb[1], "mxfp8", a_global_scale=1.0, b_global_scale=1.0)
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        scaled_matmul(qa[0], qa[1], qb[0], qb[1], "mxfp8")
    with pytest.raises(ValueError, match="fmt must be one of"):
        scaled_matmul(ma[0], ma[1], mb[0], mb[1], "fp8")
    with pytest.raises(ValueError, match="must agree on groups and on K"):
        scaled_matmul(ma[0], ma[1], mb[0][:, :32], mb[1][:, :1], "mxfp8")
    with pytest.raises(ValueError, match="must agree on groups"):
        grouped_scaled_matmul(ma[0][None], ma[1][None], jnp.stack([mb[0]] * 2),
                              jnp.stack([mb[1]] * 2), "mxfp8")
    with pytest.raises(ValueError, match="K=48 is not a multiple of the mxfp8 block size 32"):
        codes = jnp.zeros((4, 48), jnp.float8_e4m3fn)
        scales = jnp.ones((4, 1), jnp.float8_e8m0fnu)
        scaled_matmul(codes, scales, codes, scales, "mxfp8")
    with pytest.raises(ValueError, match="block_k=48"):
        scaled_matmul(ma[0], ma[1], mb[0], mb[1], "mxfp8", block_k=48)
    with pytest.raises(ValueError, match="a_scales has shape"):
        scaled_matmul(ma[0], ma[1][:8], mb[0], mb[1], "mxfp8")
    with pytest.raises(ValueError, match="must be 2-D"):
        scaled_matmul(ma[0][None], ma[1][None], mb[0][None], mb[1][None], "mxfp8")
