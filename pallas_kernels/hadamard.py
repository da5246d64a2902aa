"""Random Hadamard transform in 16x16 tiles (NVFP4 recipe, arXiv 2509.25149; TE nvfp4 docs).

Along ``axis``, every run of 16 elements v becomes ``v @ R`` with ``R = diag(sign) H16 / 4``:
H16 the Sylvester Hadamard matrix (entries +-1, H H^T = 16 I) and ``sign`` a random +-1
vector shared by all layers for the whole run. R is orthogonal, so for a contraction over
``axis`` the transform cancels: ``(A R)(B R)^T = A B^T``. It spreads an outlier over its 16
neighbours before the wgrad operands are quantized to NVFP4, whose block scales (computed
after the rotation) then fit the data better.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

from pallas_kernels import backend
from pallas_kernels.layout import block_layout

HADAMARD_SIZE = 16


def hadamard_matrix(n: int = HADAMARD_SIZE) -> jax.Array:
    """Sylvester Hadamard matrix [n, n] (n a power of two) with entries +-1, as f32."""
    h = jnp.ones((1, 1), jnp.float32)
    while h.shape[0] < n:
        h = jnp.block([[h, h], [h, -h]])
    if h.shape[0] != n:
        raise ValueError(f"hadamard_matrix: n must be a power of two, got {n}")
    return h


def hadamard_sign(key: jax.Array) -> jax.Array:
    """A random +-1 sign vector [16] (f32) for ``random_hadamard_transform``."""
    return jnp.where(jax.random.bernoulli(key, 0.5, (HADAMARD_SIZE,)), 1.0, -1.0)


def check_sign(sign: jax.Array) -> jax.Array:
    sign = jnp.asarray(sign, jnp.float32)
    if sign.shape != (HADAMARD_SIZE,):
        raise ValueError(f"random_hadamard_transform: sign must have shape (16,), got {sign.shape}")
    return sign


def rotation_matrix(sign: jax.Array) -> jax.Array:
    """R = diag(sign) H16 / 4 (entries +-1/4): the transform as a matrix, for tests and docs."""
    return check_sign(sign)[:, None] * hadamard_matrix() * 0.25


def _fwht(rows: jax.Array) -> jax.Array:
    """rows [n, 16] f32 -> rows @ H16, by four butterfly stages (x_i + x_i+h, x_i - x_i+h).

    Written with reshape, transpose, a split of the last axis into halves and a concatenation
    of [..., 1] pieces: the ops Pallas' Triton lowering accepts. The reference and the kernel
    run this same function, so every output is the same sequence of f32 additions in both:
    bit-identical whatever the tiling.
    """
    n = rows.shape[0]
    for half in (8, 4, 2, 1):
        pairs = rows.reshape(n, HADAMARD_SIZE // (2 * half), 2, half).transpose(0, 1, 3, 2)
        a, b = jnp.split(pairs, 2, axis=-1)                              # [n, groups, half, 1]
        rows = jnp.concatenate([a + b, a - b], axis=-1).transpose(0, 1, 3, 2)
        rows = rows.reshape(n, HADAMARD_SIZE)
    return rows


def _rht_reference(rows, sign):
    return _fwht(rows.astype(jnp.float32) * sign[None, :]) * 0.25


def _rht_kernel(x_ref, sign_ref, out_ref):
    out_ref[...] = _fwht(x_ref[...].astype(jnp.float32) * sign_ref[...]) * 0.25


def _rht_pallas(rows, sign, *, tile_rows=None):
    n = rows.shape[0]
    tr = tile_rows or backend.grid_tile(n, 1, HADAMARD_SIZE)[0]
    rows = backend.pad_to_tiles(rows, {0: tr})
    return pl.pallas_call(
        _rht_kernel,
        out_shape=jax.ShapeDtypeStruct(rows.shape, jnp.float32),
        grid=(rows.shape[0] // tr,),
        in_specs=[pl.BlockSpec((tr, HADAMARD_SIZE), lambda i: (i, 0)),
                  pl.BlockSpec((1, HADAMARD_SIZE), lambda i: (0, 0))],
        out_specs=pl.BlockSpec((tr, HADAMARD_SIZE), lambda i: (i, 0)),
        name="random_hadamard_transform",
        **backend.pallas_kwargs(),
    )(rows, sign.reshape(1, HADAMARD_SIZE))[:n]


@functools.partial(jax.jit, static_argnames=("axis", "impl"))
def random_hadamard_transform(x: jax.Array, sign: jax.Array, axis: int = -1, *,
                              impl: str = "auto") -> jax.Array:
    """Rotate ``x`` in 16-element tiles along ``axis``; returns f32 with x's shape.

    ``x.shape[axis]`` must be a multiple of 16. ``sign`` is a +-1 vector of shape (16,)
    (``hadamard_sign(key)``).
    """
    sign = check_sign(sign)
    layout = block_layout(x.shape, axis, HADAMARD_SIZE, op="random_hadamard_transform")
    rows = layout.to_tiles(x).reshape(-1, HADAMARD_SIZE)
    if backend.resolve_impl(impl, op="random_hadamard_transform") == "reference":
        out = _rht_reference(rows, sign)
    else:
        out = _rht_pallas(rows, sign)
    return layout.from_tiles(out)
