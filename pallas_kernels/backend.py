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
* ``"block_scaled"`` (``scaled_matmul`` only): ``jax.nn.scaled_matmul``, which lowers to the
  cuDNN block-scaled dot on Blackwell (sm_100+). UNTESTED: no Blackwell was available.
* ``"auto"``: block_scaled for scaled_matmul on sm_100+, pallas on other NVIDIA GPUs,
  reference elsewhere (CPU, TPU).
"""
from __future__ import annotations

import jax
from jax.experimental import pallas as pl

IMPLS = ("auto", "reference", "pallas", "block_scaled")


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


def resolve_impl(impl: str, *, op: str, block_scaled_ok: bool = False) -> str:
    """Map ``impl`` (possibly "auto") to the implementation that will run."""
    if impl not in IMPLS:
        raise ValueError(f"{op}: impl must be one of {IMPLS}, got {impl!r}")
    if impl == "block_scaled" and not block_scaled_ok:
        raise ValueError(f"{op}: impl='block_scaled' exists only for scaled_matmul")
    if impl != "auto":
        return impl
    if platform() == "gpu":
        if block_scaled_ok and has_block_scaled_mma():
            return "block_scaled"
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


def grid_tile(rows: int, cols: int, cell_elements: int) -> tuple[int, int]:
    """Power-of-two (rows, cols) tile of an elementwise grid over [rows, cols] cells of
    ``cell_elements`` elements each: about 8k elements per step on a GPU (they live in
    registers), 512k when interpreted on CPU (fewer, larger steps run faster there)."""
    budget = (1 << 13) if on_gpu() else (1 << 19)
    tile_cols = pow2_tile(cols, max(1, min(32, budget // cell_elements)))
    tile_rows = pow2_tile(rows, max(1, budget // (cell_elements * tile_cols)))
    return tile_rows, tile_cols


def dequantize_call(kernel, code_bits, scale_bits, scalars, dtype, *, name, tile=None):
    """Launch a dequantize kernel over codes [rows, 1, blocks, block] and their per-block
    scales [rows, 1, blocks, 1] (uint8), plus [1, 1] f32 ``scalars``; -> values like codes."""
    rows, _, blocks, block = code_bits.shape
    tr, tb = tile or grid_tile(rows, blocks, block)
    scalar_spec = pl.BlockSpec((1, 1), lambda i, j: (0, 0))
    return pl.pallas_call(
        kernel,
        out_shape=jax.ShapeDtypeStruct(code_bits.shape, dtype),
        grid=(pl.cdiv(rows, tr), pl.cdiv(blocks, tb)),
        in_specs=[pl.BlockSpec((tr, 1, tb, block), lambda i, j: (i, 0, j, 0)),
                  pl.BlockSpec((tr, 1, tb, 1), lambda i, j: (i, 0, j, 0))]
                 + [scalar_spec] * len(scalars),
        out_specs=pl.BlockSpec((tr, 1, tb, block), lambda i, j: (i, 0, j, 0)),
        name=name,
        **pallas_kwargs(),
    )(code_bits, scale_bits, *[s.reshape(1, 1) for s in scalars])


def pow2_tile(n: int, cap: int, minimum: int = 1) -> int:
    """Largest power of two <= min(n, cap), at least ``minimum`` (Triton wants power-of-two
    block dims; a grid of cdiv(n, tile) covers the rest with a partial edge block)."""
    tile = minimum
    while tile * 2 <= min(n, cap):
        tile *= 2
    return tile
