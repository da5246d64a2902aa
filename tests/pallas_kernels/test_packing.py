"""FP4 packing: two codes per byte, even element in the low nibble; kernel == reference."""
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import formats as F
from pallas_kernels.packing import pack_fp4, unpack_fp4


@pytest.mark.parametrize("impl", ["reference", "pallas"])
def test_every_pair_of_codes_round_trips(impl):
    low, high = np.meshgrid(np.arange(16, dtype=np.uint8), np.arange(16, dtype=np.uint8),
                            indexing="ij")
    pairs = np.stack([low.ravel(), high.ravel()], axis=-1).reshape(4, 128)   # 256 pairs
    codes = F.from_bits(jnp.asarray(pairs), F.E2M1)
    packed = pack_fp4(codes, impl=impl)
    assert packed.dtype == jnp.uint8 and packed.shape == (4, 64)
    np.testing.assert_array_equal(np.asarray(packed).ravel(),
                                  (low.ravel() | (high.ravel() << 4)).astype(np.uint8))
    unpacked = unpack_fp4(packed, impl=impl)
    assert unpacked.dtype == jnp.float4_e2m1fn
    np.testing.assert_array_equal(np.asarray(F.to_bits(unpacked)), pairs)


def test_even_element_goes_to_the_low_nibble():
    codes = jnp.asarray([[0.5, -6.0, 1.0, 0.0]], jnp.float4_e2m1fn)   # codes 1, 15, 2, 0
    np.testing.assert_array_equal(np.asarray(pack_fp4(codes)), [[0xF1, 0x02]])


def test_leading_dims_are_kept():
    codes = F.from_bits(jnp.arange(2 * 3 * 8, dtype=jnp.uint8).reshape(2, 3, 8) % 16, F.E2M1)
    packed = pack_fp4(codes, impl="pallas")
    assert packed.shape == (2, 3, 4)
    np.testing.assert_array_equal(np.asarray(F.to_bits(unpack_fp4(packed))),
                                  np.asarray(F.to_bits(codes)))


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="last dimension must be even"):
        pack_fp4(jnp.zeros((2, 3), jnp.float4_e2m1fn))
    with pytest.raises(TypeError, match="float4_e2m1fn"):
        pack_fp4(jnp.zeros((2, 4), jnp.float32))
    with pytest.raises(TypeError, match="uint8"):
        unpack_fp4(jnp.zeros((2, 4), jnp.int32))
