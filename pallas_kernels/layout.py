"""Block layouts: any tensor + a block axis  <->  the 4-D tile view the quantizers work on.

A quantizer sees ``x`` as ``[row_tiles, tile_rows, blocks, block]``:

* 1-D blocks (MXFP8, NVFP4 activations/gradients): ``tile_rows == 1``; each scale covers
  ``block`` consecutive elements along ``axis``.
* 2-D blocks (NVFP4 weights): ``tile_rows == block == 16``; each scale covers a 16x16 tile
  of the last two dims. It is returned replicated over the tile's 16 rows, so a 2-D
  quantized tensor has the same scale layout as a 1-D one and dequantizes the same way.

``axis`` is moved last and the other dims are flattened to rows, so blocks never cross a
row (and 16-row tiles never cross a leading batch/expert index, because the other of the
last two dims is a multiple of 16).
"""
from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp


@dataclasses.dataclass(frozen=True)
class BlockLayout:
    shape: tuple          # the tensor's shape
    axis: int             # normalized block axis
    block: int            # elements per scale along axis
    tile_rows: int        # 1 (1-D blocks) or block (2-D tiles)

    @property
    def moved_shape(self) -> tuple:
        """``shape`` with ``axis`` moved last."""
        rest = self.shape[:self.axis] + self.shape[self.axis + 1:]
        return rest + (self.shape[self.axis],)

    @property
    def rows(self) -> int:
        return math.prod(self.moved_shape[:-1])

    @property
    def blocks(self) -> int:
        return self.shape[self.axis] // self.block

    @property
    def scale_shape(self) -> tuple:
        return self.shape[:self.axis] + (self.blocks,) + self.shape[self.axis + 1:]

    def to_tiles(self, x: jax.Array) -> jax.Array:
        """[*shape] -> [rows / tile_rows, tile_rows, blocks, block]."""
        x = jnp.moveaxis(x, self.axis, -1)
        return x.reshape(self.rows // self.tile_rows, self.tile_rows, self.blocks, self.block)

    def from_tiles(self, t: jax.Array) -> jax.Array:
        """Inverse of ``to_tiles``."""
        return jnp.moveaxis(t.reshape(self.moved_shape), -1, self.axis)

    def scales_to_tiles(self, s: jax.Array) -> jax.Array:
        """[*scale_shape] -> [rows, 1, blocks, 1] (per-row layout, broadcasts against tiles)."""
        s = jnp.moveaxis(s, self.axis, -1)
        return s.reshape(self.rows, 1, self.blocks, 1)

    def scales_from_tiles(self, s: jax.Array) -> jax.Array:
        """[rows / tile_rows, blocks] -> [*scale_shape], replicated over each tile's rows."""
        s = jnp.repeat(s, self.tile_rows, axis=0)
        return jnp.moveaxis(s.reshape(self.moved_shape[:-1] + (self.blocks,)), -1, self.axis)


def block_layout(shape, axis: int, block: int, *, two_d: bool = False,
                 op: str = "quantize") -> BlockLayout:
    """Validate shape/axis and build the layout; errors say what to change."""
    shape = tuple(int(d) for d in shape)
    ndim = len(shape)
    if ndim == 0:
        raise ValueError(f"{op}: expected an array with at least one dimension, got a scalar")
    if not -ndim <= axis < ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for shape {shape}")
    axis %= ndim
    if shape[axis] % block:
        padded = -(-shape[axis] // block) * block
        raise ValueError(
            f"{op}: dimension {axis} (size {shape[axis]}) of shape {shape} is not a multiple of "
            f"the block size {block}. Pad it with zeros to {padded} (zeros change neither block "
            f"scales nor a matmul result), or use c2jax.precision, which pads for you.")
    tile_rows = 1
    if two_d:
        if ndim < 2 or axis < ndim - 2:
            raise ValueError(
                f"{op}: 2-D blocks tile the last two dims, so axis must be -1 or -2 of an array "
                f"with ndim >= 2; got axis {axis} for shape {shape}")
        other = ndim - 1 if axis == ndim - 2 else ndim - 2
        if shape[other] % block:
            raise ValueError(
                f"{op}: 2-D {block}x{block} blocks need dimension {other} (size {shape[other]}) of "
                f"shape {shape} to be a multiple of {block}; pad it with zeros")
        tile_rows = block
    return BlockLayout(shape, axis, block, tile_rows)
