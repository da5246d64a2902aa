"""Independent NumPy oracles for MXFP8 / NVFP4, written straight from the formulas of the
issue (#8) in float64 / IEEE float32 with ml_dtypes casts. Shared by the test modules.

XLA:CPU flushes f32 subnormals to zero in arithmetic (inputs and results); the oracle does
the same at the same places so that it is comparable bit for bit.
"""
import ml_dtypes
import numpy as np

F32_MIN_NORMAL = np.float32(2.0 ** -126)


def flush(x):
    """Flush f32 subnormals to signed zero, as XLA:CPU does."""
    x = np.asarray(x, np.float32)
    return np.where(np.abs(x) < F32_MIN_NORMAL, np.copysign(np.float32(0), x), x).astype(np.float32)


def bits(a):
    """Bit patterns of an ml_dtypes float8 / float4 array (one code per byte) as uint8."""
    return np.asarray(a).view(np.uint8)


def _blocks(x, block):
    x = flush(x)
    return x.reshape(x.shape[:-1] + (x.shape[-1] // block, block))


def mxfp8_quantize(x, scale_mode="rceil"):
    """x [..., K] (float32) -> (codes float8_e4m3fn [..., K], scale bytes uint8 [..., K/32])."""
    xb = _blocks(x, 32)
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        amax = np.max(np.abs(xb), axis=-1)
        finite = np.isfinite(amax)
        if scale_mode == "rceil":                 # ceil(log2(amax / 448)), exact in float64
            ratio = amax.astype(np.float64) / 448.0
            mantissa, exponent = np.frexp(ratio)
            e = np.where(mantissa == 0.5, exponent - 1, exponent)
            e = np.where(ratio == 0, -127, e)
        else:
            _, exponent = np.frexp(amax.astype(np.float64))
            e = np.where(amax == 0, -127, exponent - 1 - 8)
        e = np.clip(np.where(finite, e, 0), -127, 127)
        y = xb.astype(np.float64) / np.exp2(e.astype(np.float64))[..., None]
        y = np.where(finite[..., None], np.clip(y, -448, 448), 0.0)
    codes = y.astype(ml_dtypes.float8_e4m3fn).reshape(np.shape(x))
    scale_bytes = np.where(finite, e + 127, 255).astype(np.uint8)
    return codes, scale_bytes


def mxfp8_dequantize(codes, scale_bytes):
    c = np.asarray(codes).astype(np.float64)
    c = c.reshape(c.shape[:-1] + (c.shape[-1] // 32, 32))
    scale = np.where(scale_bytes == 255, np.nan, np.exp2(scale_bytes.astype(np.float64) - 127))
    return flush((c * scale[..., None]).reshape(np.shape(codes)))


def nvfp4_quantize(x, two_d=False):
    """x [R, K] float32, blocks along the last axis (two_d: 16x16 tiles) ->
    (codes float4_e2m1fn [R, K], block scales float8_e4m3fn [R, K/16], S_enc float32).

    s_b = e4m3(amax_b * (S_enc / 6)), q = e2m1(x * (S_enc / s_b)), decode (q s_b)(1 / S_enc):
    the issue's formulas with each division done once, in float32."""
    x = flush(x)
    rows, k = x.shape
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        amax = np.max(np.abs(x))
        s_enc = np.float32(2688.0) / np.float32(max(amax, np.float32(1e-12)))
        if not np.isfinite(amax):
            s_enc = np.float32(np.nan)
        xb = x.reshape(rows, k // 16, 16)
        amax_b = np.max(np.abs(xb), axis=-1)                              # [R, K/16]
        if two_d:
            tiles = amax_b.reshape(rows // 16, 16, k // 16).max(axis=1)
            amax_b = np.repeat(tiles, 16, axis=0)
        v = amax_b.astype(np.float32) * (s_enc / np.float32(6.0))
        scales = np.clip(v, 0, 448).astype(ml_dtypes.float8_e4m3fn)
        s_b = scales.astype(np.float32)[..., None]
        y = xb * (s_enc / s_b)
        y = np.where(s_b > 0, y, np.float32(0))
    codes = np.clip(y, -6, 6).astype(ml_dtypes.float4_e2m1fn).reshape(rows, k)
    return codes, scales, np.float32(s_enc)


def nvfp4_dequantize(codes, scales, s_enc):
    c = np.asarray(codes).astype(np.float32)
    c = c.reshape(c.shape[:-1] + (c.shape[-1] // 16, 16))
    values = (c * np.asarray(scales).astype(np.float32)[..., None]) * (np.float32(1) / s_enc)
    return flush(values.reshape(np.shape(codes)))
