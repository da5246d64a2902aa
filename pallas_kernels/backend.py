"""Which implementation runs where.

Every op takes ``impl``:

* ``"reference"``: the pure-jnp reference (XLA on any device). The oracle for tests, and the
  fast path on CPU.
* ``"pallas"``: the Pallas kernel. On CPU it runs with ``interpret=True`` (bit-identical to
  the reference; slow). On an NVIDIA GPU it is compiled by the Pallas Triton backend: these
  kernels use the generic blocked ``pallas_call`` style (refs, BlockSpecs, f32/int arithmetic,
  2-D dots), which is what Triton lowers. jax 0.10 would otherwise default GPU Pallas calls to
  Mosaic GPU, which expects warpgroup-level kernels (``plgpu``), so we pass Triton compiler
  params explicitly. The GPU compile is UNTESTED: no GPU was available when this was written.
* ``"xla"`` (``scaled_matmul`` only): decode both operands to bf16 with XLA ops (exact: every
  code times its block scale fits bf16) and run XLA's bf16 GEMM with f32 accumulation. On an
  H200 this ran at 0.99x of the plain bf16 GEMM, against 0.06x for the Pallas Triton kernel
  (BENCHMARKS.md, "Low precision on an H200"); Hopper has no block-scaled MMA.
* ``"block_scaled"`` (``scaled_matmul`` only): ``jax.nn.scaled_matmul``, which lowers to the
  cuDNN block-scaled dot on Blackwell (sm_100+). UNTESTED: no Blackwell was available.
* ``"auto"``: for scaled_matmul block_scaled on sm_100+ and xla on other NVIDIA GPUs; for the
  other ops pallas on NVIDIA GPUs; reference elsewhere (CPU, TPU).

Pallas' Triton backend neither masks nor bounds-checks a partial edge block: a block that
hangs over the end of an array reads and writes past it (seen on the H200 as corrupted and
NaN outputs). Every kernel here therefore runs on whole tiles only: `pad_to_tiles` zero-pads
the tiled axes up to a multiple of the tile and the caller slices the result back.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental import pallas as pl

IMPLS = ("auto", "reference", "pallas", "xla", "block_scaled")
MATMUL_ONLY_IMPLS = ("xla", "block_scaled")


def platform() -> str:
    return jax.default_backend()


def gpu_compute_capability() -> tuple[int, int] | None:
    """(major, minor) of the first GPU, or None when the default backend is not a CUDA GPU."""
    if platform() != "gpu":
        return None
    capability = getattr(jax.devices()[0], "compute_capability", None)
    if not capability:
        return None
    major, minor = str(capability).split(".")[:2]
    return int(major), int(minor)


def has_block_scaled_mma() -> bool:
    """True on Blackwell datacenter GPUs (sm_100 / sm_103): MXFP8/NVFP4 tensor-core MMA."""
    capability = gpu_compute_capability()
    return capability is not None and capability[0] == 10


def resolve_impl(impl: str, *, op: str, matmul: bool = False) -> str:
    """Map ``impl`` (possibly "auto") to the implementation that will run; ``matmul``: the op
    is a scaled matmul, which also has the "xla" and "block_scaled" paths."""
    if impl not in IMPLS:
        raise ValueError(f"{op}: impl must be one of {IMPLS}, got {impl!r}")
    if impl in MATMUL_ONLY_IMPLS and not matmul:
        raise ValueError(f"{op}: impl={impl!r} exists only for scaled_matmul")
    if impl != "auto":
        return impl
    if platform() == "gpu":
        if matmul:
            return "block_scaled" if has_block_scaled_mma() else "xla"
        return "pallas"
    return "reference"


def pallas_kwargs() -> dict:
    """Keyword arguments for ``pl.pallas_call`` on the current backend."""
    if platform() == "gpu":
        from jax.experimental.pallas import triton as pltriton
        return {"compiler_params": pltriton.CompilerParams(num_warps=4, num_stages=2)}
    if platform() == "cpu":
        return {"interpret": True}
    raise NotImplementedError(
        f"Pallas kernels here target CPU (interpret) and NVIDIA GPUs (Triton); on "
        f"{platform()!r} use impl='reference'")


def on_gpu() -> bool:
    return platform() == "gpu"


def divide(x: jax.Array, y: jax.Array) -> jax.Array:
    """Correctly rounded f32 ``x / y`` inside a kernel (shapes broadcast).

    Triton lowers an f32 ``/`` to PTX ``div.full.f32``, which may be 2 ulp off; XLA's GPU
    division (the reference) is IEEE ``div.rn.f32``, and so is every CPU division. On a GPU this
    emits ``div.rn.f32`` itself, so a kernel that divides stays bit-identical to its reference.
    """
    x, y = jnp.broadcast_arrays(x.astype(jnp.float32), y.astype(jnp.float32))
    if not on_gpu():
        return x / y
    from jax.experimental.pallas import triton as pltriton
    (quotient,) = pltriton.elementwise_inline_asm(
        "div.rn.f32 $0, $1, $2;", args=[x, y], constraints="=r,r,r", pack=1,
        result_shape_dtypes=[jax.ShapeDtypeStruct(x.shape, jnp.float32)])
    return quotient


def grid_tile(rows: int, cols: int, cell_elements: int) -> tuple[int, int]:
    """Power-of-two (rows, cols) tile of an elementwise grid over [rows, cols] cells of
    ``cell_elements`` elements each: about 8k elements per step on a GPU (they live in
    registers), 512k when interpreted on CPU (fewer, larger steps run faster there)."""
    budget = (1 << 13) if on_gpu() else (1 << 19)
    tile_cols = pow2_tile(cols, max(1, min(32, budget // cell_elements)))
    tile_rows = pow2_tile(rows, max(1, budget // (cell_elements * tile_cols)))
    return tile_rows, tile_cols


def pad_to_tiles(x: jax.Array, tiles: dict[int, int]) -> jax.Array:
    """x zero-padded so that each axis in ``tiles`` is a multiple of its tile size."""
    pads = [(0, 0)] * x.ndim
    for axis, tile in tiles.items():
        pads[axis] = (0, -x.shape[axis] % tile)
    return jnp.pad(x, pads) if any(high for _, high in pads) else x


def dequantize_call(kernel, code_bits, scale_bits, scalars, dtype, *, name, tile=None):
    """Launch a dequantize kernel over codes [rows, 1, blocks, block] and their per-block
    scales [rows, 1, blocks, 1] (uint8), plus [1, 1] f32 ``scalars``; -> values like codes."""
    rows, _, blocks, block = code_bits.shape
    tr, tb = tile or grid_tile(rows, blocks, block)
    code_bits, scale_bits = (pad_to_tiles(x, {0: tr, 2: tb}) for x in (code_bits, scale_bits))
    scalar_spec = pl.BlockSpec((1, 1), lambda i, j: (0, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(code_bits.shape, dtype),
        grid=(code_bits.shape[0] // tr, code_bits.shape[2] // tb),
        in_specs=[pl.BlockSpec((tr, 1, tb, block), lambda i, j: (i, 0, j, 0)),
                  pl.BlockSpec((tr, 1, tb, 1), lambda i, j: (i, 0, j, 0))]
                 + [scalar_spec] * len(scalars),
        out_specs=pl.BlockSpec((tr, 1, tb, block), lambda i, j: (i, 0, j, 0)),
        name=name,
        **pallas_kwargs(),
    )(code_bits, scale_bits, *[s.reshape(1, 1) for s in scalars])[:rows, :, :blocks]


def pow2_tile(n: int, cap: int, minimum: int = 1) -> int:
    """Largest power of two <= min(n, cap), at least ``minimum`` (Triton wants power-of-two
    block dims; a grid of cdiv(n, tile) covers the rest with a partial edge block)."""
    tile = minimum
    while tile * 2 <= min(n, cap):
        tile *= 2
    return tile
