"""Two FP4 codes per byte along the last axis: element 2i in the low nibble, 2i+1 in the high
nibble (the "fp4x2" layout of TE / ThunderKittens / NeMo ``quantize_nvfp4``).

JAX has no packed fp4 dtype; quantizers return one float4_e2m1fn per byte, and these
functions convert to and from the packed uint8 storage format.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax import lax
from jax.experimental import pallas as pl

from pallas_kernels import backend
from pallas_kernels import formats as F


def _nibble_shifts(ndim: int) -> jax.Array:
    """[1, ..., 1, 2] uint8 holding (0, 4), built from iota (kernels cannot capture constants)."""
    return lax.broadcasted_iota(jnp.uint8, (1,) * (ndim - 1) + (2,), ndim - 1) * 4


def _pack_reference(pairs):
    """pairs [..., 2] uint8 nibbles -> [...] uint8."""
    return pairs[..., 0] | (pairs[..., 1] << 4)


def _unpack_reference(packed):
    return jnp.stack([packed & 0xF, packed >> 4], axis=-1)


def _pack_kernel(pairs_ref, out_ref):
    pairs = pairs_ref[...]                                       # [tr, tk, 2]
    out_ref[...] = jnp.sum(pairs << _nibble_shifts(3), axis=-1).astype(jnp.uint8)


def _unpack_kernel(packed_ref, out_ref):
    packed = packed_ref[...][:, :, None]                          # [tr, tk, 1]
    out_ref[...] = (packed >> _nibble_shifts(3)) & 0xF


def _grid_call(kernel, arg, out_shape, *, in_block_tail, out_block_tail, name, tile=None):
    rows, cols = arg.shape[:2]
    tr, tk = tile or backend.grid_tile(rows, cols, 2)
    arg = backend.pad_to_tiles(arg, {0: tr, 1: tk})
    out_shape = jax.ShapeDtypeStruct(arg.shape[:2] + out_shape.shape[2:], out_shape.dtype)
    spec = lambda tail: pl.BlockSpec((tr, tk) + tail, lambda i, j: (i, j) + (0,) * len(tail))
    return pl.pallas_call(
        kernel, out_shape=out_shape, grid=(arg.shape[0] // tr, arg.shape[1] // tk),
        in_specs=[spec(in_block_tail)], out_specs=spec(out_block_tail), name=name,
        **backend.pallas_kwargs())(arg)[:rows, :cols]


@functools.partial(jax.jit, static_argnames=("impl",))
def pack_fp4(codes: jax.Array, *, impl: str = "auto") -> jax.Array:
    """float4_e2m1fn [..., K] (K even) -> uint8 [..., K // 2]."""
    if codes.dtype != F.E2M1:
        raise TypeError(f"pack_fp4: expected float4_e2m1fn codes, got {codes.dtype}")
    if codes.ndim == 0 or codes.shape[-1] % 2:
        raise ValueError(f"pack_fp4: the last dimension must be even, got shape {codes.shape}")
    lead, k = codes.shape[:-1], codes.shape[-1]
    pairs = F.to_bits(codes).reshape(-1, k // 2, 2)
    if backend.resolve_impl(impl, op="pack_fp4") == "reference":
        packed = _pack_reference(pairs)
    else:
        packed = _grid_call(_pack_kernel, pairs,
                            jax.ShapeDtypeStruct(pairs.shape[:2], jnp.uint8),
                            in_block_tail=(2,), out_block_tail=(), name="pack_fp4")
    return packed.reshape(lead + (k // 2,))


@functools.partial(jax.jit, static_argnames=("impl",))
def unpack_fp4(packed: jax.Array, *, impl: str = "auto") -> jax.Array:
    """uint8 [..., K // 2] -> float4_e2m1fn [..., K]."""
    if packed.dtype != jnp.uint8 or packed.ndim == 0:
        raise TypeError(f"unpack_fp4: expected a uint8 array, got {packed.dtype}{packed.shape}")
    lead, half = packed.shape[:-1], packed.shape[-1]
    flat = packed.reshape(-1, half)
    if backend.resolve_impl(impl, op="unpack_fp4") == "reference":
        pairs = _unpack_reference(flat)
    else:
        pairs = _grid_call(_unpack_kernel, flat,
                           jax.ShapeDtypeStruct(flat.shape + (2,), jnp.uint8),
                           in_block_tail=(), out_block_tail=(2,), name="unpack_fp4")
    return F.from_bits(pairs.reshape(lead + (2 * half,)), F.E2M1)
