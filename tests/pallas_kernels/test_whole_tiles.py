"""Every pallas_call gets arrays that its blocks tile exactly.

Pallas' Triton backend does not mask a block that hangs over the end of an array: it reads and
writes past it (on an H200 this corrupted grouped matmuls and made mxfp8 training NaN). The
kernels therefore pad to whole tiles. Here every pallas_call is intercepted and its operands'
shapes are checked against its BlockSpecs, on shapes and tiles chosen to leave partial edges.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import pallas as pl

import pallas_kernels as pk
from pallas_kernels import hadamard, matmul, mxfp8, nvfp4, packing


@pytest.fixture
def checked_calls(monkeypatch):
    """Replaces pl.pallas_call with one that checks block divisibility; returns the calls."""
    original, calls = pl.pallas_call, []

    def checking_pallas_call(kernel, *, out_shape, grid, in_specs, out_specs, **kwargs):
        def run(*args):
            outs = out_shape if isinstance(out_shape, (tuple, list)) else (out_shape,)
            specs = list(in_specs) + list(out_specs if isinstance(out_specs, (tuple, list))
                                          else (out_specs,))
            for array, spec in zip(list(args) + list(outs), specs):
                for size, block in zip(array.shape, spec.block_shape):
                    if block is not None:
                        assert size % block == 0, (kwargs.get("name"), array.shape,
                                                   spec.block_shape)
            for axis, steps in enumerate(grid):
                assert steps >= 1
            calls.append(kwargs.get("name"))
            return original(kernel, out_shape=out_shape, grid=grid, in_specs=in_specs,
                            out_specs=out_specs, **kwargs)(*args)
        return run

    monkeypatch.setattr(pl, "pallas_call", checking_pallas_call)
    return calls


def test_partial_tiles_are_padded_and_results_are_unchanged(checked_calls):
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((35, 224)) * 3, jnp.float32)    # 35 rows of 7 blocks
    tiles = x.reshape(35, 1, 7, 32)
    want = mxfp8._quantize_reference(tiles, "rceil")
    codes, scales = mxfp8._quantize_pallas(tiles, "rceil", tile=(8, 4))
    np.testing.assert_array_equal(np.asarray(codes), np.asarray(pk.formats.to_bits(want[0])))
    np.testing.assert_array_equal(np.asarray(scales), np.asarray(pk.formats.to_bits(want[1])))
    values = mxfp8._dequantize_pallas(codes, scales[:, None, :, None], jnp.float32, tile=(16, 4))
    np.testing.assert_array_equal(
        np.asarray(values), np.asarray(mxfp8._dequantize_reference(want[0], want[1][:, None, :,
                                                                                      None])))

    nv_tiles = x.reshape(35, 1, 14, 16)
    s_enc = nvfp4.global_encode_scale(x)
    bits = jax.random.bits(jax.random.key(1), nv_tiles.shape, jnp.uint32)
    for random_bits in (None, bits):
        want = nvfp4._quantize_reference(nv_tiles, s_enc, random_bits)
        got = nvfp4._quantize_pallas(nv_tiles, s_enc, random_bits, tile=(16, 4))
        np.testing.assert_array_equal(np.asarray(got[0]), np.asarray(pk.formats.to_bits(want[0])))
        np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(pk.formats.to_bits(want[1])))

    rows = x.reshape(-1, 16)[:70]
    sign = pk.hadamard_sign(jax.random.key(2))
    np.testing.assert_array_equal(np.asarray(hadamard._rht_pallas(rows, sign, tile_rows=32)),
                                  np.asarray(hadamard._rht_reference(rows, sign)))

    pairs = jnp.asarray(rng.integers(0, 16, (9, 5, 2)), jnp.uint8)
    packed = packing._grid_call(packing._pack_kernel, pairs,
                                jax.ShapeDtypeStruct((9, 5), jnp.uint8), in_block_tail=(2,),
                                out_block_tail=(), name="pack_fp4", tile=(4, 4))
    np.testing.assert_array_equal(np.asarray(packed), np.asarray(packing._pack_reference(pairs)))

    a, b = (jnp.asarray(rng.standard_normal(s), jnp.float32) for s in ((2, 40, 64), (2, 24, 64)))
    qa, qb = pk.quantize_mxfp8(a), pk.quantize_mxfp8(b)
    out = matmul._matmul_pallas(*qa, *qb, None, "mxfp8", 32, 32, jnp.float32, tile=(32, 16))
    want = matmul._matmul_reference(*qa, *qb, None, 32, 32)
    assert out.shape == (2, 40, 24)
    np.testing.assert_allclose(np.asarray(out), np.asarray(want), rtol=1e-6, atol=1e-6)
    assert set(checked_calls) == {"quantize_mxfp8", "dequantize_mxfp8", "quantize_nvfp4",
                                  "random_hadamard_transform", "pack_fp4", "scaled_matmul_mxfp8"}


def test_the_public_ops_with_odd_shapes_only_launch_whole_tiles(checked_calls, monkeypatch):
    # The GPU tile budget (8k elements per step) on CPU: the tiles a GPU would use.
    monkeypatch.setattr(pk.backend, "on_gpu", lambda: True)
    monkeypatch.setattr(pk.backend, "pallas_kwargs", lambda: {"interpret": True})
    monkeypatch.setattr(pk.backend, "divide", lambda x, y: x / y)   # no PTX on a CPU
    rng = np.random.default_rng(3)
    x = jnp.asarray(rng.standard_normal((3, 40, 1408)), jnp.float32)    # 44 MX blocks per row
    codes, scales = pk.quantize_mxfp8(x, impl="pallas")
    want = pk.quantize_mxfp8(x, impl="reference")
    np.testing.assert_array_equal(np.asarray(pk.formats.to_bits(codes)),
                                  np.asarray(pk.formats.to_bits(want[0])))
    nv = pk.quantize_nvfp4(x[:, :32], two_d=True, impl="pallas")
    nv_want = pk.quantize_nvfp4(x[:, :32], two_d=True, impl="reference")
    np.testing.assert_array_equal(np.asarray(pk.formats.to_bits(nv[0])),
                                  np.asarray(pk.formats.to_bits(nv_want[0])))
    w = jnp.asarray(rng.standard_normal((3, 72, 1408)), jnp.float32)
    qw = pk.quantize_mxfp8(w, impl="reference")
    got = pk.grouped_scaled_matmul(codes, scales, *qw, "mxfp8", impl="pallas")
    ref = pk.grouped_scaled_matmul(want[0], want[1], *qw, "mxfp8", impl="reference")
    np.testing.assert_allclose(np.asarray(got), np.asarray(ref), rtol=2e-3, atol=1e-2)
    assert {"quantize_mxfp8", "quantize_nvfp4", "scaled_matmul_mxfp8"} <= set(checked_calls)
