"""NVFP4: E2M1 elements in blocks of 16, an E4M3 scale per block, one f32 scale per tensor.

Encoding (NVIDIA arXiv 2509.25149 appendix, as spelled out in ThunderKittens
``kernels/gemm/nvfp4_b200/test_quantize.py``; TE ``docs/.../nvfp4.rst``), all in f32:

    S_enc = 6 * 448 / max(amax(tensor), 1e-12)      the per-tensor *encode* scale (returned)
    s_b   = e4m3_rne(amax(block) * (S_enc / 6))     the block scale, <= 448 by construction
    q     = e2m1_round(x * (S_enc / s_b))           RNE, or stochastic rounding with a key
    x^    = (q * s_b) * (1 / S_enc)                 decode

That is the issue's ``s_b = e4m3((amax_b / 6) * S_enc)``, ``q = e2m1(x * S_enc / s_b)``,
``x^ = q * s_b / S_enc`` with every division done once per tensor or per block and applied
as a multiplication, which fixes the f32 rounding: XLA:CPU compiles a division by a
broadcast value into a multiplication by a rounded reciprocal anyway, and GPU kernels do
the same (TE/ThunderKittens multiply by the block's encode scale 1 / (s_b * S_dec)).
``q * s_b`` is exact, so a decode rounds once.

* ``global_scale`` is S_enc (encode direction): decoding multiplies by 1 / S_enc. JAX's
  ``scaled_matmul`` and TE store that inverse (the decode scale ~ amax / 2688).
* A block whose s_b underflows to 0 (tiny next to the tensor's amax) gets codes +0, with no
  division by an epsilon. A tensor containing NaN or Inf gets S_enc = NaN, every block scale
  NaN and codes +0, so it dequantizes to NaN everywhere.
* ``two_d=True`` (weights): one scale per 16x16 tile of the last two dims, returned
  replicated over the tile's 16 rows, so quantizing along axis -1 or -2 gives the same codes
  and the forward and backward passes see the same quantized weight.
* Stochastic rounding rounds |y| up to the next E2M1 value with probability
  (|y| - lo) / (hi - lo), using 24 random bits per element: unbiased up to 2^-24 of a step.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import backend
from pallas_kernels import formats as F
from pallas_kernels.layout import block_layout

ROUNDINGS = ("rne", "stochastic")
AMAX_FLOOR = 1e-12       # as in the NVIDIA reference quantizer: keeps S_enc finite for zeros


def global_encode_scale(x: jax.Array) -> jax.Array:
    """S_enc = 2688 / amax(x) as an f32 scalar; NaN when x has a NaN or Inf."""
    x = x.astype(jnp.float32)
    amax = jnp.max(jnp.abs(x))
    s_enc = (F.E2M1_MAX * F.E4M3_MAX) / jnp.maximum(amax, AMAX_FLOOR)
    # Test for NaN/Inf explicitly: XLA:CPU's vectorized max reduction may drop a NaN.
    return jnp.where(jnp.all(jnp.isfinite(x)), s_enc, jnp.nan).astype(jnp.float32)


def decode_scale(global_scale: jax.Array) -> jax.Array:
    """S_dec = 1 / S_enc (f32 scalar), the factor every decode multiplies by."""
    return 1.0 / jnp.asarray(global_scale, jnp.float32).reshape(())


# ----------------------------------------------------------------------------------------
# Reference (jnp, casts and a table) on tiles [row_tiles, tile_rows, blocks, 16].
# ----------------------------------------------------------------------------------------

def _quantize_reference(tiles, s_enc, random_bits=None):
    x = tiles.astype(jnp.float32)
    amax = jnp.max(jnp.abs(x), axis=(1, 3))                          # [row_tiles, blocks]
    scales = F.cast_reference(amax * (s_enc / F.E2M1_MAX), F.E4M3_FORMAT)
    # The barrier keeps the f32 -> E4M3 -> f32 round trip: XLA:GPU's excess-precision
    # simplification otherwise drops it and divides by the unrounded scale (on an H200 that
    # changed 407,019 of 524,288 codes, exactly the count this reproduces on CPU).
    s_b = lax.optimization_barrier(scales).astype(jnp.float32)
    block_encode = (s_enc / s_b)[:, None, :, None]                  # inf for a 0 scale
    y = jnp.where(s_b[:, None, :, None] > 0, x * block_encode, 0.0)  # NaN/0 scale -> code +0
    if random_bits is None:
        codes = F.cast_reference(y, F.E2M1_FORMAT)
    else:
        codes = F.e2m1_stochastic_reference(y, F.uniform_from_bits(random_bits))
    return codes, scales


def _dequantize_reference(code_tiles, scale_tiles, s_dec):
    return (code_tiles.astype(jnp.float32) * scale_tiles.astype(jnp.float32)) * s_dec


# ----------------------------------------------------------------------------------------
# Pallas kernels.
# ----------------------------------------------------------------------------------------

def _quantize_kernel(x_ref, s_enc_ref, s_enc_over_6_ref, *refs, stochastic):
    if stochastic:
        bits_ref, codes_ref, scales_ref = refs
    else:
        (codes_ref, scales_ref), bits_ref = refs, None
    # S_enc / 6 is divided outside: in here [1, 1] / 6 would be a division by a broadcast
    # constant, which XLA rewrites into a multiplication by a rounded 1/6.
    s_enc, s_enc_over_6 = s_enc_ref[...], s_enc_over_6_ref[...]      # [1, 1] each
    x = x_ref[...].astype(jnp.float32)                               # [tr, rows, tb, 16]
    amax = jnp.max(jnp.max(jnp.abs(x), axis=3), axis=1)              # [tr, tb]
    scaled_amax = amax * s_enc_over_6
    scale_bits = jnp.where(jnp.isnan(scaled_amax), 0x7F,
                           F.encode(scaled_amax, F.E4M3_FORMAT)).astype(jnp.uint8)
    s_b = F.decode(scale_bits, F.E4M3_FORMAT)
    block_encode = backend.divide(s_enc, s_b)[:, None, :, None]     # inf for a 0 scale
    y = jnp.where(s_b[:, None, :, None] > 0, x * block_encode, 0.0)
    uniform = None if bits_ref is None else F.uniform_from_bits(bits_ref[...])
    codes_ref[...] = F.encode(y, F.E2M1_FORMAT, uniform)
    scales_ref[...] = scale_bits


def _quantize_pallas(tiles, s_enc, random_bits=None, *, tile=None):
    """-> (code nibbles uint8 like tiles, E4M3 scale bytes [row_tiles, blocks])."""
    row_tiles, tile_rows, blocks, block = tiles.shape
    tr, tb = tile or backend.grid_tile(row_tiles, blocks, tile_rows * block)
    tiles = backend.pad_to_tiles(tiles, {0: tr, 2: tb})
    tile_spec = pl.BlockSpec((tr, tile_rows, tb, block), lambda i, j: (i, 0, j, 0))
    scalar_spec = pl.BlockSpec((1, 1), lambda i, j: (0, 0))
    in_specs = [tile_spec, scalar_spec, scalar_spec]
    args = [tiles, s_enc.reshape(1, 1), (s_enc / F.E2M1_MAX).reshape(1, 1)]
    if random_bits is not None:
        in_specs.append(tile_spec)
        args.append(backend.pad_to_tiles(random_bits, {0: tr, 2: tb}))
    codes, scales = pl.pallas_call(
        functools.partial(_quantize_kernel, stochastic=random_bits is not None),
        out_shape=(jax.ShapeDtypeStruct(tiles.shape, jnp.uint8),
                   jax.ShapeDtypeStruct((tiles.shape[0], tiles.shape[2]), jnp.uint8)),
        grid=(tiles.shape[0] // tr, tiles.shape[2] // tb),
        in_specs=in_specs,
        out_specs=(tile_spec, pl.BlockSpec((tr, tb), lambda i, j: (i, j))),
        name="quantize_nvfp4",
        **backend.pallas_kwargs(),
    )(*args)
    return codes[:row_tiles, :, :blocks], scales[:row_tiles, :blocks]


def _dequantize_kernel(codes_ref, scales_ref, s_dec_ref, out_ref):
    values = F.decode(codes_ref[...], F.E2M1_FORMAT) * F.decode(scales_ref[...], F.E4M3_FORMAT)
    out_ref[...] = (values * s_dec_ref[...][:, :, None, None]).astype(out_ref.dtype)


def _dequantize_pallas(code_bits, scale_bits, s_dec, dtype, *, tile=None):
    """code_bits [rows, 1, blocks, 16], scale_bits [rows, 1, blocks, 1] (uint8) -> dtype."""
    return backend.dequantize_call(_dequantize_kernel, code_bits, scale_bits, (s_dec,), dtype,
                                   name="dequantize_nvfp4", tile=tile)


# ----------------------------------------------------------------------------------------
# Public API.
# ----------------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("axis", "two_d", "rounding", "impl"))
def quantize_nvfp4(x: jax.Array, axis: int = -1, two_d: bool = False, rounding: str = "rne",
                   key: jax.Array | None = None, *, impl: str = "auto"
                   ) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Quantize ``x`` to NVFP4 in 1x16 blocks along ``axis`` (or 16x16 tiles with two_d).

    Returns ``(codes, block_scales, global_scale)``: codes float4_e2m1fn with x's shape,
    block_scales float8_e4m3fn with ``x.shape[axis] // 16`` along axis, global_scale the f32
    scalar S_enc. ``rounding="stochastic"`` needs ``key`` (a jax.random key).
    """
    if rounding not in ROUNDINGS:
        raise ValueError(f"quantize_nvfp4: rounding must be one of {ROUNDINGS}, got {rounding!r}")
    if rounding == "stochastic" and key is None:
        raise ValueError("quantize_nvfp4: rounding='stochastic' needs a jax.random key (key=...)")
    layout = block_layout(x.shape, axis, F.NVFP4_BLOCK, two_d=two_d, op="quantize_nvfp4")
    tiles = layout.to_tiles(x)
    s_enc = global_encode_scale(x)
    random_bits = None
    if rounding == "stochastic":
        random_bits = layout.to_tiles(jax.random.bits(key, x.shape, jnp.uint32))
    if backend.resolve_impl(impl, op="quantize_nvfp4") == "reference":
        codes, scales = _quantize_reference(tiles, s_enc, random_bits)
    else:
        code_bits, scale_bits = _quantize_pallas(tiles, s_enc, random_bits)
        codes, scales = F.from_bits(code_bits, F.E2M1), F.from_bits(scale_bits, F.E4M3)
    return layout.from_tiles(codes), layout.scales_from_tiles(scales), s_enc


@functools.partial(jax.jit, static_argnames=("axis", "dtype", "impl"))
def dequantize_nvfp4(codes: jax.Array, block_scales: jax.Array, global_scale: jax.Array,
                     axis: int = -1, dtype=jnp.float32, *, impl: str = "auto") -> jax.Array:
    """``(code * block_scale) * (1 / global_scale)`` blockwise along ``axis``, as ``dtype``."""
    layout = block_layout(codes.shape, axis, F.NVFP4_BLOCK, op="dequantize_nvfp4")
    if tuple(block_scales.shape) != layout.scale_shape:
        raise ValueError(f"dequantize_nvfp4: block_scales have shape {tuple(block_scales.shape)}, "
                         f"expected {layout.scale_shape} for codes of shape {tuple(codes.shape)}, "
                         f"axis {axis}")
    if codes.dtype != F.E2M1 or block_scales.dtype != F.E4M3:
        raise TypeError(f"dequantize_nvfp4: expected float4_e2m1fn codes and float8_e4m3fn "
                        f"scales, got {codes.dtype} and {block_scales.dtype}")
    s_dec = decode_scale(global_scale)
    code_tiles, scale_tiles = layout.to_tiles(codes), layout.scales_to_tiles(block_scales)
    if backend.resolve_impl(impl, op="dequantize_nvfp4") == "reference":
        values = _dequantize_reference(code_tiles, scale_tiles, s_dec).astype(dtype)
    else:
        values = _dequantize_pallas(F.to_bits(code_tiles), F.to_bits(scale_tiles), s_dec, dtype)
    return layout.from_tiles(values)
