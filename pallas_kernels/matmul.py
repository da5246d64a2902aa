"""Block-scaled matmuls with f32 accumulation: ``out[m, n] = sum_k a[m, k] * b[n, k]``.

Both operands are quantized along their contraction axis K, stored "TN" like
``jax.nn.scaled_matmul``: ``a_codes [M, K]``, ``b_codes [N, K]``, scales ``[M, K // block]``
and ``[N, K // block]``. The grouped variant adds a leading ``[groups, ...]`` axis (MoE
experts, capacity-padded: ``[experts, capacity, embed] x [experts, mlp, embed]``).

* ``fmt="mxfp8"``: float8_e4m3fn codes, float8_e8m0fnu scales, block 32.
* ``fmt="nvfp4"``: float4_e2m1fn codes, float8_e4m3fn scales, block 16, plus each operand's
  f32 global *encode* scale S_enc; the epilogue multiplies by both 1 / S_enc, as the NVFP4
  GEMM applies the per-tensor scales after the block-scaled MMA.

Numerics: each operand is decoded exactly (E4M3 x E8M0, E2M1 x E4M3 products fit in f32 and
in bf16), products are exact in f32, and partial sums accumulate in f32 over K tiles of
``block_k`` elements in order. The reference and the interpreted Pallas kernel use the same
K tiling and (on CPU) one M x N tile, so on CPU they agree bit for bit; with other tiles, or
against a single f32 matmul of the dequantized operands, they differ only by f32 summation
order (~1e-7 relative).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import backend
from pallas_kernels import formats as F
from pallas_kernels.nvfp4 import decode_scale

# fmt -> (code dtype, code format, scale dtype, block size)
FORMATS = {
    "mxfp8": (F.E4M3, F.E4M3_FORMAT, F.E8M0, F.MXFP8_BLOCK),
    "nvfp4": (F.E2M1, F.E2M1_FORMAT, F.E4M3, F.NVFP4_BLOCK),
}


def _default_block_k(k: int, block: int) -> int:
    for candidate in (128, 64, 32, 16):
        if candidate >= block and k % candidate == 0:
            return candidate
    return block


def _validate(a_codes, a_scales, b_codes, b_scales, fmt, a_global_scale, b_global_scale,
              block_k, op):
    if fmt not in FORMATS:
        raise ValueError(f"{op}: fmt must be one of {tuple(FORMATS)}, got {fmt!r}")
    code_dtype, _, scale_dtype, block = FORMATS[fmt]
    for name, array, dtype in (("a_codes", a_codes, code_dtype), ("b_codes", b_codes, code_dtype),
                               ("a_scales", a_scales, scale_dtype),
                               ("b_scales", b_scales, scale_dtype)):
        if array.dtype != dtype or array.ndim != 3:
            raise TypeError(f"{op}: {fmt} needs {name} as 3-D {jnp.dtype(dtype).name} "
                            f"[groups, rows, ...]; got {array.dtype}{tuple(array.shape)}")
    groups, _, k = a_codes.shape
    if b_codes.shape[0] != groups or b_codes.shape[2] != k:
        raise ValueError(f"{op}: a_codes {tuple(a_codes.shape)} and b_codes "
                         f"{tuple(b_codes.shape)} must agree on groups and on K (the last axis; "
                         f"b is stored [N, K])")
    if k % block:
        raise ValueError(f"{op}: the contraction dim K={k} is not a multiple of the {fmt} block "
                         f"size {block}; zero-pad K on both operands before quantizing")
    for name, scales, codes in (("a_scales", a_scales, a_codes), ("b_scales", b_scales, b_codes)):
        expected = codes.shape[:2] + (k // block,)
        if tuple(scales.shape) != expected:
            raise ValueError(f"{op}: {name} has shape {tuple(scales.shape)}, expected {expected}")
    if fmt == "nvfp4":
        if a_global_scale is None or b_global_scale is None:
            raise ValueError(f"{op}: nvfp4 needs a_global_scale and b_global_scale (the S_enc "
                             f"returned by quantize_nvfp4)")
        for name, scale in (("a_global_scale", a_global_scale), ("b_global_scale", b_global_scale)):
            if jnp.size(scale) != 1:
                raise ValueError(f"{op}: {name} must be a scalar, got shape {jnp.shape(scale)}")
    elif a_global_scale is not None or b_global_scale is not None:
        raise ValueError(f"{op}: mxfp8 has no global scales; pass a_global_scale=None")
    block_k = block_k or _default_block_k(k, block)
    if block_k % block or k % block_k:
        raise ValueError(
            f"{op}: block_k={block_k} must be a multiple of {block} that divides K={k}")
    return block, block_k


# ----------------------------------------------------------------------------------------
# Reference: dequantize with casts, accumulate per K tile in f32.
# ----------------------------------------------------------------------------------------

def _dequantize_reference(codes, scales, block):
    return codes.astype(jnp.float32) * jnp.repeat(scales.astype(jnp.float32), block, axis=-1)


def _matmul_reference(a_codes, a_scales, b_codes, b_scales, global_scales, block, block_k):
    a = _dequantize_reference(a_codes, a_scales, block)
    b = _dequantize_reference(b_codes, b_scales, block)
    groups, m, k = a.shape

    def accumulate(step, acc):
        a_tile = lax.dynamic_slice_in_dim(a, step * block_k, block_k, axis=2)
        b_tile = lax.dynamic_slice_in_dim(b, step * block_k, block_k, axis=2)
        return acc + jnp.einsum("gmk,gnk->gmn", a_tile, b_tile, precision=lax.Precision.HIGHEST,
                                preferred_element_type=jnp.float32)

    acc = lax.fori_loop(0, k // block_k, accumulate,
                        jnp.zeros((groups, m, b.shape[1]), jnp.float32))
    if global_scales is not None:
        acc = (acc * global_scales[0]) * global_scales[1]
    return acc


# ----------------------------------------------------------------------------------------
# Pallas kernel: grid over (group, M tile, N tile); K loop inside with an f32 accumulator.
# ----------------------------------------------------------------------------------------

def _decode_tile(codes, scales, code_format, scale_dtype, block, dtype):
    """codes [rows, bk] uint8, scales [rows, bk // block] uint8 -> values [rows, bk]."""
    rows, bk = codes.shape
    values = F.decode(codes, code_format).reshape(rows, bk // block, block)
    if scale_dtype == F.E8M0:
        scale = F.e8m0_decode(scales)
    else:
        scale = F.decode(scales, F.E4M3_FORMAT)
    # Exact in f32 and in bf16 (<= 6 significant bits, f32 exponent range).
    return (values * scale[:, :, None]).reshape(rows, bk).astype(dtype)


def _matmul_kernel(a_ref, as_ref, b_ref, bs_ref, *refs, code_format, scale_dtype, block,
                   block_k, num_k_steps, has_global, dot_dtype):
    if has_global:
        a_gs_ref, b_gs_ref, out_ref = refs
    else:
        (out_ref,) = refs
    scale_cols = block_k // block

    def accumulate(step, acc):
        a = _decode_tile(a_ref[:, pl.ds(step * block_k, block_k)],
                         as_ref[:, pl.ds(step * scale_cols, scale_cols)],
                         code_format, scale_dtype, block, dot_dtype)
        b = _decode_tile(b_ref[:, pl.ds(step * block_k, block_k)],
                         bs_ref[:, pl.ds(step * scale_cols, scale_cols)],
                         code_format, scale_dtype, block, dot_dtype)
        precision = lax.Precision.HIGHEST if dot_dtype == jnp.float32 else None
        return acc + lax.dot_general(a, b, (((1,), (1,)), ((), ())), precision=precision,
                                     preferred_element_type=jnp.float32)

    acc = lax.fori_loop(0, num_k_steps, accumulate, jnp.zeros(out_ref.shape, jnp.float32))
    if has_global:
        acc = (acc * a_gs_ref[...]) * b_gs_ref[...]
    out_ref[...] = acc.astype(out_ref.dtype)


def _matmul_pallas(a_codes, a_scales, b_codes, b_scales, global_scales, fmt, block, block_k,
                   out_dtype, *, tile=None):
    _, code_format, scale_dtype, _ = FORMATS[fmt]
    groups, m, k = a_codes.shape
    n = b_codes.shape[1]
    if tile is None and backend.on_gpu():
        tile = (backend.pow2_tile(m, 128, minimum=16), backend.pow2_tile(n, 128, minimum=16))
    # Interpreted on CPU, one tile spans all of M and N: XLA:CPU's f32 dot rounds the same
    # [M, block_k] x [N, block_k] product the same way in the kernel and in the reference,
    # which makes the two bit-identical. Smaller tiles change only the f32 summation order.
    bm, bn = tile or (m, n)
    a_codes, a_scales = (backend.pad_to_tiles(x, {1: bm}) for x in (a_codes, a_scales))
    b_codes, b_scales = (backend.pad_to_tiles(x, {1: bn}) for x in (b_codes, b_scales))
    has_global = global_scales is not None
    kernel = functools.partial(
        _matmul_kernel, code_format=code_format, scale_dtype=scale_dtype, block=block,
        block_k=block_k, num_k_steps=k // block_k, has_global=has_global,
        # On GPU the exactly-decoded tiles go to the tensor cores as bf16; on CPU stay f32 so
        # the interpreted kernel matches the reference bit for bit.
        dot_dtype=jnp.bfloat16 if backend.on_gpu() else jnp.float32)
    in_specs = [pl.BlockSpec((None, bm, k), lambda g, i, j: (g, i, 0)),
                pl.BlockSpec((None, bm, k // block), lambda g, i, j: (g, i, 0)),
                pl.BlockSpec((None, bn, k), lambda g, i, j: (g, j, 0)),
                pl.BlockSpec((None, bn, k // block), lambda g, i, j: (g, j, 0))]
    args = [F.to_bits(a_codes), F.to_bits(a_scales), F.to_bits(b_codes), F.to_bits(b_scales)]
    if has_global:
        in_specs += [pl.BlockSpec((1, 1), lambda g, i, j: (0, 0))] * 2
        args += [global_scales[0].reshape(1, 1), global_scales[1].reshape(1, 1)]
    out = pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct((groups, a_codes.shape[1], b_codes.shape[1]), out_dtype),
        grid=(groups, a_codes.shape[1] // bm, b_codes.shape[1] // bn),
        in_specs=in_specs,
        out_specs=pl.BlockSpec((None, bm, bn), lambda g, i, j: (g, i, j)),
        name=f"scaled_matmul_{fmt}",
        **backend.pallas_kwargs(),
    )(*args)
    return out[:, :m, :n]


def _matmul_xla(a_codes, a_scales, b_codes, b_scales, global_scales, block):
    """Decode both operands to bf16 with XLA ops (exact: a code has at most 4 significant bits,
    a block scale at most 4, so their product fits bf16's 8), then XLA's bf16 GEMM with f32
    accumulation; the NVFP4 global decode scales go on in f32 afterwards."""
    decode = lambda codes, scales: _dequantize_reference(codes, scales, block).astype(
        jnp.bfloat16)
    out = jnp.einsum("gmk,gnk->gmn", decode(a_codes, a_scales), decode(b_codes, b_scales),
                     preferred_element_type=jnp.float32)
    if global_scales is not None:
        out = (out * global_scales[0]) * global_scales[1]
    return out


def _matmul_block_scaled(a_codes, a_scales, b_codes, b_scales, global_scales):
    """Blackwell: cuDNN block-scaled dot through jax.nn.scaled_matmul. UNTESTED (no sm_100)."""
    out = jax.nn.scaled_matmul(a_codes, b_codes, a_scales, b_scales,
                               preferred_element_type=jnp.float32)
    if global_scales is not None:
        out = (out * global_scales[0]) * global_scales[1]
    return out


# ----------------------------------------------------------------------------------------
# Public API.
# ----------------------------------------------------------------------------------------

@functools.partial(jax.jit, static_argnames=("fmt", "out_dtype", "block_k", "impl"))
def grouped_scaled_matmul(a_codes, a_scales, b_codes, b_scales, fmt: str, *,
                          a_global_scale=None, b_global_scale=None, out_dtype=jnp.float32,
                          block_k: int | None = None, impl: str = "auto") -> jax.Array:
    """``[G, M, K] x [G, N, K] -> [G, M, N]``, one block-scaled matmul per group.

    ``block_k`` is the K tile of the f32 accumulation (default 128, or the largest of
    64/32/16 that divides K).
    """
    op = "grouped_scaled_matmul"
    block, block_k = _validate(a_codes, a_scales, b_codes, b_scales, fmt, a_global_scale,
                               b_global_scale, block_k, op)
    global_scales = None      # the decode scales 1 / S_enc of a and b
    if fmt == "nvfp4":
        global_scales = (decode_scale(a_global_scale), decode_scale(b_global_scale))
    resolved = backend.resolve_impl(impl, op=op, matmul=True)
    if resolved == "reference":
        out = _matmul_reference(a_codes, a_scales, b_codes, b_scales, global_scales, block,
                                block_k)
    elif resolved == "pallas":
        out = _matmul_pallas(a_codes, a_scales, b_codes, b_scales, global_scales, fmt, block,
                             block_k, jnp.float32)
    elif resolved == "xla":
        out = _matmul_xla(a_codes, a_scales, b_codes, b_scales, global_scales, block)
    else:
        out = _matmul_block_scaled(a_codes, a_scales, b_codes, b_scales, global_scales)
    return out.astype(out_dtype)


def scaled_matmul(a_codes, a_scales, b_codes, b_scales, fmt: str, *, a_global_scale=None,
                  b_global_scale=None, out_dtype=jnp.float32, block_k: int | None = None,
                  impl: str = "auto") -> jax.Array:
    """``[M, K] x [N, K] -> [M, N]`` (contraction over both last axes; see the module doc)."""
    for name, array in (("a_codes", a_codes), ("a_scales", a_scales), ("b_codes", b_codes),
                        ("b_scales", b_scales)):
        if array.ndim != 2:
            raise ValueError(f"scaled_matmul: {name} must be 2-D, got shape {tuple(array.shape)}; "
                             f"use grouped_scaled_matmul for [groups, ...] operands")
    out = grouped_scaled_matmul(a_codes[None], a_scales[None], b_codes[None], b_scales[None],
                                fmt, a_global_scale=a_global_scale,
                                b_global_scale=b_global_scale, out_dtype=out_dtype,
                                block_k=block_k, impl=impl)
    return out[0]
