"""MXFP8 quantizer: exact formats vs a NumPy oracle, edge cases, bounds, kernel == reference."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from pallas_kernels import formats as F
from pallas_kernels import mxfp8
from pallas_kernels.mxfp8 import dequantize_mxfp8, quantize_mxfp8
from tests.pallas_kernels import numpy_oracle as oracle

IMPLS = ["reference", "pallas"]


def _bits(a):
    return np.asarray(F.to_bits(a))


def _finite_e4m3_values():
    values = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    return values[np.isfinite(values)]                           # 254 codes, +-0 included


def _block(*head, fill=0.0):
    row = np.full(32, fill, np.float32)
    row[:len(head)] = head
    return row


def _mixed_input(seed=0):
    """Random blocks over many binades plus every edge case of the issue, [16, 96]."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((16, 96)).astype(np.float32) * np.exp2(rng.integers(-20, 20, (16, 1)))
    x[0, :32] = 0.0
    x[0, 32:64] = -0.0
    x[1, :32] = _block(448.0, 1.0, -3.0)
    x[1, 32:64] = _block(449.0, 1.0)
    x[1, 64:] = _block(500.0, -0.3)
    x[2, :32] = _block(np.nan, 1.0)
    x[2, 32:64] = _block(np.inf, 1.0)
    x[2, 64:] = _block(-np.inf)
    x[3, :32] = _block(448.0, 2.0 ** -8, 3 * 2.0 ** -10, 2.0 ** -10, 1.0001 * 2.0 ** -10,
                       -2.0 ** -9)
    x[3, 32:64] = _block(2.0 ** -130, -1e-40)                     # f32 subnormals
    x[3, 64:] = _block(2.0 ** 100, 2.0 ** 99)
    x[4, :32] = _block(*(2.0 ** np.arange(-2, 17)))               # powers of two
    return x


SCALES_K = (-117, -7, 0, 9, 119)       # block scales 2^k for the every-code rows
CODE_ROWS = slice(16, 16 + 424)
RANDOM_ROWS = slice(16 + 424, None)


def _every_code_blocks():
    """For each k and each of the 254 finite E4M3 values v: a block [v 2^k, 448 2^k, 0, ...],
    whose amax pins the scale to 2^k. 1270 blocks, three per row, padded to [424, 96]."""
    values = _finite_e4m3_values()
    blocks = np.zeros((len(SCALES_K), values.size, 32), np.float32)
    for i, k in enumerate(SCALES_K):
        blocks[i, :, 0] = values * np.float32(2.0 ** k)
        blocks[i, :, 1] = np.float32(448.0 * 2.0 ** k)
    blocks = np.concatenate([blocks.reshape(-1, 32), np.zeros((2, 32), np.float32)])
    return blocks.reshape(424, 96)


def _random_with_outliers():
    rng = np.random.default_rng(1)
    return (rng.standard_normal((64, 96)) * np.exp2(rng.uniform(-30, 30, (64, 1)))
            * np.where(rng.random((64, 96)) < 0.02, 50.0, 1.0)).astype(np.float32)


CASES = [("reference", "rceil"), ("reference", "floor"), ("pallas", "rceil")]


@pytest.fixture(scope="module")
def quantized():
    """Every case of this file in one [504, 96] tensor, quantized once per (impl, scale_mode):
    edge cases (rows 0-15), every E4M3 code at five scales, random data with outliers."""
    x = np.concatenate([_mixed_input(), _every_code_blocks(), _random_with_outliers()])
    out = {"x": x}
    for impl, mode in CASES:
        codes, scales = quantize_mxfp8(jnp.asarray(x), scale_mode=mode, impl=impl)
        decoded = dequantize_mxfp8(codes, scales, impl=impl)
        out[impl, mode] = (codes, scales, np.asarray(decoded))
    return out


@pytest.mark.parametrize("impl,scale_mode", CASES)
def test_matches_numpy_oracle_bit_for_bit(quantized, impl, scale_mode):
    codes, scales, decoded = quantized[impl, scale_mode]
    want_codes, want_scales = oracle.mxfp8_quantize(quantized["x"], scale_mode)
    np.testing.assert_array_equal(_bits(codes), oracle.bits(want_codes))
    np.testing.assert_array_equal(_bits(scales), want_scales)
    assert codes.dtype == jnp.float8_e4m3fn and scales.dtype == jnp.float8_e8m0fnu
    np.testing.assert_array_equal(decoded, oracle.mxfp8_dequantize(want_codes, want_scales))


@pytest.mark.parametrize("impl", IMPLS)
def test_every_e4m3_code_round_trips_at_many_scales(quantized, impl):
    codes, scales, decoded = quantized[impl, "rceil"]
    n = len(SCALES_K) * 254
    block_codes = _bits(codes)[CODE_ROWS].reshape(-1, 32)[:n].reshape(len(SCALES_K), 254, 32)
    block_scales = _bits(scales)[CODE_ROWS].reshape(-1)[:n].reshape(len(SCALES_K), 254)
    expected_codes = _finite_e4m3_values().astype(ml_dtypes.float8_e4m3fn).view(np.uint8)
    for i, k in enumerate(SCALES_K):
        np.testing.assert_array_equal(block_codes[i, :, 0], expected_codes)
        assert (block_scales[i] == k + 127).all()
    x = quantized["x"][CODE_ROWS]
    np.testing.assert_array_equal(decoded[CODE_ROWS], x)
    np.testing.assert_array_equal(np.signbit(decoded[CODE_ROWS]), np.signbit(x))


def test_every_scale_byte_decodes_like_ml_dtypes():
    scale_bytes = np.arange(256, dtype=np.uint8)
    codes = jnp.ones((256, 32), jnp.float8_e4m3fn)
    scales = F.from_bits(jnp.asarray(scale_bytes)[:, None], jnp.float8_e8m0fnu)
    decoded = np.asarray(dequantize_mxfp8(codes, scales, impl="pallas"))[:, 0]
    expected = oracle.flush(scale_bytes.view(ml_dtypes.float8_e8m0fnu).astype(np.float32))
    np.testing.assert_array_equal(decoded, expected)    # byte 0 (2^-127) flushes to 0 on CPU


def test_hand_computed_edge_cases(quantized):
    for mode, expected in (
        ("rceil", {(1, 0): (127, 448.0), (1, 1): (128, 448.0), (1, 2): (128, 512.0)}),
        ("floor", {(1, 0): (127, 448.0), (1, 1): (127, 448.0), (1, 2): (127, 448.0)})):
        _, scales, decoded = quantized["reference", mode]
        for (row, block), (byte, first) in expected.items():
            assert _bits(scales)[row, block] == byte, (mode, row, block)
            assert decoded[row, 32 * block] == first, (mode, row, block)
    codes, scales, d = quantized["reference", "rceil"]
    s, c = _bits(scales), _bits(codes)
    # zero block: scale byte 0 (2^-127), zero codes; -0 keeps its sign
    assert s[0, 0] == 0 and (c[0, :32] == 0).all()
    assert s[0, 1] == 0 and (c[0, 32:64] == 0x80).all() and np.signbit(d[0, 32:64]).all()
    # NaN / +-Inf blocks: NaN scale byte, zero codes, NaN decode; the rest of the row intact
    assert (s[2] == 0xFF).all() and (c[2] == 0).all() and np.isnan(d[2]).all()
    assert np.isfinite(d[1]).all()
    # E4M3 subnormals at scale 2^0: 2^-8 -> 2 units of 2^-9; 1.5 units ties to even (2);
    # 0.5 unit ties to 0; just above half a unit rounds up; negative keeps its sign
    np.testing.assert_array_equal(d[3, :6], [448.0, 2.0 ** -8, 2.0 ** -8, 0.0, 2.0 ** -9,
                                             -2.0 ** -9])
    # f32 subnormal inputs are flushed by XLA:CPU: scale byte 0 and zero codes
    assert s[3, 1] == 0 and (d[3, 32:64] == 0).all()
    # powers of two: amax 2^16 -> e = 8 in both modes; 2^-1..2^16 span E4M3's 2^-9..2^8 exactly,
    # 2^-2 is half of the smallest subnormal step and ties to 0
    assert s[4, 0] == 8 + 127
    np.testing.assert_array_equal(d[4, :19], np.concatenate([[0.0], 2.0 ** np.arange(-1, 17)]))


def test_error_bounds_on_random_data(quantized):
    x = quantized["x"][RANDOM_ROWS].astype(np.float64)
    _, scales, decoded = quantized["reference", "rceil"]
    e = (_bits(scales)[RANDOM_ROWS].astype(np.float64) - 127).repeat(32, axis=1)
    err = np.abs(decoded[RANDOM_ROWS] - x)
    # RCEIL never saturates: the half-ULP bound of E4M3 holds for every element
    assert np.all(err <= np.maximum(2.0 ** -4 * np.abs(x), np.exp2(e - 10)))
    amax = np.abs(x).reshape(-1, 3, 32).max(-1).repeat(32, axis=1)
    assert np.all(err <= 2.0 ** -4 * amax)
    snr = 10 * np.log10(np.sum(x ** 2) / np.sum(err ** 2))
    assert snr >= 25, snr
    # FLOOR clips block maxima in (448, 512) * 2^e, so only the bound with clipping holds
    _, scales, decoded = quantized["reference", "floor"]
    e = (_bits(scales)[RANDOM_ROWS].astype(np.float64) - 127).repeat(32, axis=1)
    clip = np.maximum(np.abs(x) - 448 * np.exp2(e), 0)
    assert clip.max() > 0                                        # some block did clip
    bound = np.maximum(2.0 ** -4 * np.abs(x), np.exp2(e - 10)) + clip
    assert np.all(np.abs(decoded[RANDOM_ROWS] - x) <= bound)


def test_pallas_kernel_bit_identical_with_partial_edge_tiles():
    x = jnp.asarray(_mixed_input(seed=2))                 # [16, 96]: 3 blocks per row

    @jax.jit
    def both(x):
        tiles = x.reshape(16, 1, 3, 32)
        ref_codes, ref_scales = mxfp8._quantize_reference(tiles, "floor")
        # 16 rows in steps of 8 rows x 2 blocks: several grid steps, a partial edge block
        codes, scales = mxfp8._quantize_pallas(tiles, "floor", tile=(8, 2))
        scale_tiles = scales[:, None, :, None]
        ref_out = mxfp8._dequantize_reference(ref_codes, ref_scales[:, None, :, None])
        out = mxfp8._dequantize_pallas(codes, scale_tiles, jnp.float32, tile=(4, 2))
        return (F.to_bits(ref_codes), F.to_bits(ref_scales), ref_out), (codes, scales, out)

    for ref, got in zip(*both(x)):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


def test_axis_selects_the_block_direction():
    axis = 1
    x = jnp.asarray(np.random.default_rng(0).standard_normal((32, 64, 32)), jnp.bfloat16)
    codes, scales = quantize_mxfp8(x, axis=axis)
    moved_codes, moved_scales = quantize_mxfp8(jnp.moveaxis(x, axis, -1))
    np.testing.assert_array_equal(_bits(codes), _bits(jnp.moveaxis(moved_codes, -1, axis)))
    np.testing.assert_array_equal(_bits(scales), _bits(jnp.moveaxis(moved_scales, -1, axis)))
    assert scales.shape[axis] == x.shape[axis] // 32
    out = dequantize_mxfp8(codes, scales, axis=axis, dtype=jnp.bfloat16)
    assert out.dtype == jnp.bfloat16 and out.shape == x.shape


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match=r"size 48.*not a multiple of the block size 32.*Pad"):
        quantize_mxfp8(jnp.zeros((4, 48)))
    with pytest.raises(ValueError, match="scale_mode"):
        quantize_mxfp8(jnp.zeros((4, 32)), scale_mode="nearest")
    with pytest.raises(ValueError, match="impl"):
        quantize_mxfp8(jnp.zeros((4, 32)), impl="cuda")
    codes, scales = quantize_mxfp8(jnp.zeros((4, 64)))
    with pytest.raises(ValueError, match="scales have shape"):
        dequantize_mxfp8(codes, scales[:, :1])
    with pytest.raises(TypeError, match="float8_e4m3fn"):
        dequantize_mxfp8(codes.astype(jnp.float32), scales)
