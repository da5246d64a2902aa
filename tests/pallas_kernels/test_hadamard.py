"""Random Hadamard transform: the matrix, orthogonality, cancellation in a matmul,
kernel == reference."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from pallas_kernels import hadamard
from pallas_kernels.hadamard import hadamard_sign, random_hadamard_transform

SIGN = hadamard_sign(jax.random.key(0))


def _normal(seed, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), jnp.float32)


def test_hadamard_matrix_and_rotation_are_orthogonal():
    h = np.asarray(hadamard.hadamard_matrix())
    np.testing.assert_array_equal(h @ h.T, 16 * np.eye(16))
    assert set(np.unique(h)) == {-1.0, 1.0} and set(np.unique(np.asarray(SIGN))) == {-1.0, 1.0}
    r = np.asarray(hadamard.rotation_matrix(SIGN))
    np.testing.assert_array_equal(r @ r.T, np.eye(16))           # entries +-1/4: exact


@pytest.mark.parametrize("axis", [0, -1])
def test_transform_is_the_tiled_rotation_and_preserves_norms(axis):
    x = _normal(1, (48, 32))
    y = random_hadamard_transform(x, SIGN, axis=axis, impl="reference")
    moved = np.moveaxis(np.asarray(x, np.float64), axis, -1)
    r = np.asarray(hadamard.rotation_matrix(SIGN), np.float64)
    dense = (moved.reshape(moved.shape[0], -1, 16) @ r).reshape(moved.shape)
    np.testing.assert_allclose(np.asarray(y), np.moveaxis(dense, -1, axis), rtol=0, atol=1e-6)
    norms = lambda a: np.linalg.norm(np.moveaxis(np.asarray(a, np.float64), axis, -1)
                                     .reshape(-1, 16), axis=-1)
    np.testing.assert_allclose(norms(y), norms(x), rtol=1e-6)


def test_transform_cancels_in_a_contraction():
    a, b = _normal(2, (24, 64)), _normal(3, (40, 64))
    ra, rb = (random_hadamard_transform(m, SIGN) for m in (a, b))
    np.testing.assert_allclose(np.asarray(ra @ rb.T), np.asarray(a @ b.T), rtol=1e-5, atol=1e-4)


def test_pallas_kernel_is_bit_identical_to_reference():
    x = _normal(4, (3, 48, 40)).astype(jnp.bfloat16)            # 360 rows of 16: 256 per step
    x = x.at[0, 0, 0].set(-0.0).at[1, :16, 2].set(1e4)
    ref = random_hadamard_transform(x, SIGN, axis=-2, impl="reference")
    got = random_hadamard_transform(x, SIGN, axis=-2, impl="pallas")
    assert got.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(got), np.asarray(ref))


def test_bad_arguments_give_clear_errors():
    with pytest.raises(ValueError, match="multiple of the block size 16"):
        random_hadamard_transform(jnp.zeros((4, 24)), SIGN)
    with pytest.raises(ValueError, match=r"sign must have shape \(16,\)"):
        random_hadamard_transform(jnp.zeros((4, 32)), jnp.ones(8))
