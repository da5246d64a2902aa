"""MXFP8: E4M3 elements in blocks of 32 along one axis, one E8M0 (power-of-two) scale each.

Scale rules (exponent e, stored byte e + 127):

* ``"rceil"`` (default; NVIDIA arXiv 2506.08027, cuBLAS, TransformerEngine, jax.nn):
  ``e = ceil(log2(amax / 448))`` clamped to [-127, 127], computed exactly (it equals TE's
  round-up of the f32 quotient for every f32 amax); no element saturates.
* ``"floor"`` (OCP MX v1.0 section 6.3): ``e = floor(log2(amax)) - 8``; block maxima in
  (448, 512) * 2^e are clipped to 448.

Elements are ``e4m3_rne(clip(x / 2^e, -448, 448))`` (signed zeros kept). A block of zeros gets
scale byte 0 (2^-127) and zero codes. A block containing NaN or Inf gets the NaN scale byte
0xFF and zero codes, so it dequantizes to NaN. Decode: ``code * 2^(byte - 127)``, exact.

XLA:CPU flushes f32 subnormals (|x| < 2^-126) to zero in arithmetic, so such inputs
quantize as zeros and decoded values below 2^-126 (e.g. anything times the scale 2^-127)
come back as zeros on CPU.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels import backend
from pallas_kernels import formats as F
from pallas_kernels.layout import block_layout

SCALE_MODES = ("rceil", "floor")


def _check_scale_mode(scale_mode: str) -> None:
    if scale_mode not in SCALE_MODES:
        raise ValueError(f"scale_mode must be one of {SCALE_MODES}, got {scale_mode!r}")


# ----------------------------------------------------------------------------------------
# Reference (jnp, casts) on tiles [row_tiles, 1, blocks, 32].
# ----------------------------------------------------------------------------------------

def _scale_exponent_reference(amax, scale_mode):
    """Block exponent e (int32, clamped to [-127, 127]) from frexp: amax = m * 2^p, m in [.5, 1).

    rceil: ceil(log2(amax / 448)) = p - 9 + (m > 0.875), since 448 = 0.875 * 2^9 (exact; no
    division, which XLA would turn into a multiplication by a rounded reciprocal).
    floor: floor(log2(amax)) - 8 = p - 9.
    """
    mantissa, exponent = jnp.frexp(amax)
    e = exponent - 1 - F.E4M3_EMAX
    if scale_mode == "rceil":
        e = e + (mantissa > 0.875).astype(e.dtype)
    e = jnp.where(amax == 0, -F.E8M0_BIAS, e)
    return jnp.clip(e, -F.E8M0_BIAS, F.E8M0_BIAS).astype(jnp.int32)


def _quantize_reference(tiles, scale_mode):
    x = tiles.astype(jnp.float32)
    amax = jnp.max(jnp.abs(x), axis=(1, 3))                      # [row_tiles, blocks]
    # Test for NaN/Inf explicitly: XLA:CPU's vectorized max reduction may drop a NaN.
    nan_block = jnp.any(~jnp.isfinite(x), axis=(1, 3))
    e = _scale_exponent_reference(amax, scale_mode)
    scale_bits = jnp.where(nan_block, F.E8M0_NAN, e + F.E8M0_BIAS).astype(jnp.uint8)
    y = x * jnp.ldexp(jnp.float32(1.0), -e)[:, None, :, None]   # exact power-of-two scaling
    y = jnp.where(nan_block[:, None, :, None], 0.0, y)
    return F.cast_reference(y, F.E4M3_FORMAT), F.from_bits(scale_bits, F.E8M0)


def _dequantize_reference(code_tiles, scale_tiles):
    return code_tiles.astype(jnp.float32) * scale_tiles.astype(jnp.float32)


# ----------------------------------------------------------------------------------------
# Pallas kernels (portable arithmetic from formats.py; codes/scales as uint8).
# ----------------------------------------------------------------------------------------

def _quantize_kernel(x_ref, codes_ref, scales_ref, *, scale_mode):
    x = x_ref[...].astype(jnp.float32)                           # [tr, 1, tb, 32]
    amax = jnp.max(jnp.max(jnp.abs(x), axis=3), axis=1)          # [tr, tb]
    nonfinite = jnp.where(jnp.isfinite(x), 0.0, 1.0)             # a max reduction may drop NaN
    nan_block = jnp.max(jnp.max(nonfinite, axis=3), axis=1) > 0
    scale_bits = F.e8m0_rceil(amax) if scale_mode == "rceil" else F.e8m0_floor(amax)
    scale_bits = jnp.where(nan_block, F.E8M0_NAN, scale_bits).astype(jnp.uint8)
    nan_block = nan_block[:, None, :, None]
    e = scale_bits.astype(jnp.int32) - F.E8M0_BIAS
    y = x * F.pow2(-e)[:, None, :, None]
    y = jnp.where(nan_block, 0.0, y)
    codes_ref[...] = F.encode(y, F.E4M3_FORMAT)
    scales_ref[...] = scale_bits


def _quantize_pallas(tiles, scale_mode, *, tile=None):
    """tiles [row_tiles, 1, blocks, 32] -> (codes uint8 like tiles, scales [row_tiles, blocks]).

    ``tile=(rows, blocks)`` per grid step; default ``backend.grid_tile``.
    """
    row_tiles, tile_rows, blocks, block = tiles.shape
    tr, tb = tile or backend.grid_tile(row_tiles, blocks, tile_rows * block)
    tiles = backend.pad_to_tiles(tiles, {0: tr, 2: tb})
    codes, scales = pl.pallas_call(
        functools.partial(_quantize_kernel, scale_mode=scale_mode),
        out_shape=(jax.ShapeDtypeStruct(tiles.shape, jnp.uint8),
                   jax.ShapeDtypeStruct((tiles.shape[0], tiles.shape[2]), jnp.uint8)),
        grid=(tiles.shape[0] // tr, tiles.shape[2] // tb),
        in_specs=[pl.BlockSpec((tr, tile_rows, tb, block), lambda i, j: (i, 0, j, 0))],
        out_specs=(pl.BlockSpec((tr, tile_rows, tb, block), lambda i, j: (i, 0, j, 0)),
                   pl.BlockSpec((tr, tb), lambda i, j: (i, j))),
        name="quantize_mxfp8",
        **backend.pallas_kwargs(),
    )(tiles)
    return codes[:row_tiles, :, :blocks], scales[:row_tiles, :blocks]


def _dequantize_kernel(codes_ref, scales_ref, out_ref):
    values = F.decode(codes_ref[...], F.E4M3_FORMAT)             # [tr, 1, tb, 32]
    out_ref[...] = (values * F.e8m0_decode(scales_ref[...])).astype(out_ref.dtype)


def _dequantize_pallas(code_bits, scale_bits, dtype, *, tile=None):
    """code_bits [rows, 1, blocks, 32], scale_bits [rows, 1, blocks, 1] (uint8) -> dtype."""
    return backend.dequantize_call(_dequantize_kernel, code_bits, scale_bits, (), dtype,
                                   name="dequantize_mxfp8", tile=tile)


# ----------------------------------------------------------------------------------------
# Public API.
# ----------------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("axis", "scale_mode", "impl"))
def quantize_mxfp8(x: jax.Array, axis: int = -1, scale_mode: str = "rceil", *,
                   impl: str = "auto") -> tuple[jax.Array, jax.Array]:
    """Quantize ``x`` (any float dtype) to MXFP8 in 1x32 blocks along ``axis``.

    Returns ``(codes, scales)``: codes float8_e4m3fn with x's shape; scales float8_e8m0fnu
    with x's shape except ``x.shape[axis] // 32`` along axis. ``x.shape[axis]`` must be a
    multiple of 32 (zero-pad it; zeros change no scale).
    """
    _check_scale_mode(scale_mode)
    layout = block_layout(x.shape, axis, F.MXFP8_BLOCK, op="quantize_mxfp8")
    tiles = layout.to_tiles(x)
    if backend.resolve_impl(impl, op="quantize_mxfp8") == "reference":
        codes, scales = _quantize_reference(tiles, scale_mode)
    else:
        code_bits, scale_bits = _quantize_pallas(tiles, scale_mode)
        codes, scales = F.from_bits(code_bits, F.E4M3), F.from_bits(scale_bits, F.E8M0)
    return layout.from_tiles(codes), layout.scales_from_tiles(scales)


@functools.partial(jax.jit, static_argnames=("axis", "dtype", "impl"))
def dequantize_mxfp8(codes: jax.Array, scales: jax.Array, axis: int = -1,
                     dtype=jnp.float32, *, impl: str = "auto") -> jax.Array:
    """``codes * 2^(scale - 127)`` blockwise along ``axis``, returned as ``dtype``."""
    layout = block_layout(codes.shape, axis, F.MXFP8_BLOCK, op="dequantize_mxfp8")
    if tuple(scales.shape) != layout.scale_shape:
        raise ValueError(
            f"dequantize_mxfp8: scales have shape {tuple(scales.shape)}, expected "
            f"{layout.scale_shape} for codes of shape {tuple(codes.shape)}, axis {axis}")
    if codes.dtype != F.E4M3 or scales.dtype != F.E8M0:
        raise TypeError(f"dequantize_mxfp8: expected float8_e4m3fn codes and float8_e8m0fnu "
                        f"scales, got {codes.dtype} and {scales.dtype}")
    code_tiles, scale_tiles = layout.to_tiles(codes), layout.scales_to_tiles(scales)
    if backend.resolve_impl(impl, op="dequantize_mxfp8") == "reference":
        values = _dequantize_reference(code_tiles, scale_tiles).astype(dtype)
    else:
        values = _dequantize_pallas(F.to_bits(code_tiles), F.to_bits(scale_tiles), dtype)
    return layout.from_tiles(values)
