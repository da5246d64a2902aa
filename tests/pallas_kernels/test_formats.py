"""The kernels' arithmetic encoders/decoders against dtype casts (ml_dtypes), exhaustively."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

from pallas_kernels import formats as F


def _all_codes(n):
    return jnp.arange(n, dtype=jnp.uint8)


def test_decode_every_e4m3_code_matches_ml_dtypes():
    codes = _all_codes(256)
    expected = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    got = np.asarray(jax.jit(F.decode, static_argnums=1)(codes, F.E4M3_FORMAT))
    np.testing.assert_array_equal(got, expected)          # NaN == NaN here
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    assert np.isnan(got[[0x7F, 0xFF]]).all() and np.isfinite(np.delete(got, [0x7F, 0xFF])).all()


def test_decode_every_e2m1_code_matches_ml_dtypes():
    expected = np.arange(16, dtype=np.uint8).view(ml_dtypes.float4_e2m1fn).astype(np.float32)
    got = np.asarray(jax.jit(F.decode, static_argnums=1)(_all_codes(16), F.E2M1_FORMAT))
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
    np.testing.assert_array_equal(np.abs(got[:8]), [0, 0.5, 1, 1.5, 2, 3, 4, 6])


def test_decode_every_e8m0_byte_matches_ml_dtypes():
    expected = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e8m0fnu).astype(np.float32)
    got = np.asarray(jax.jit(F.e8m0_decode)(_all_codes(256)))
    np.testing.assert_array_equal(got, expected)
    assert got[0] == 2.0 ** -127 and got[127] == 1.0 and np.isnan(got[255])


def test_bits_round_trip_for_every_code():
    for dtype, n in ((F.E4M3, 256), (F.E8M0, 256), (F.E2M1, 16)):
        codes = _all_codes(n)
        np.testing.assert_array_equal(F.to_bits(F.from_bits(codes, dtype)), codes)


def _sweep():
    """Every bf16 value in [-500, 500] (all binades, ties included: bf16 has 8 bits, so it
    holds every E4M3 midpoint), midpoints +- one f32 ulp, and random f32."""
    all_bf16 = np.arange(65536, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)
    values = all_bf16[np.isfinite(all_bf16) & (np.abs(all_bf16) <= 500)]
    e4m3 = np.arange(256, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float32)
    e4m3 = np.unique(e4m3[np.isfinite(e4m3)])
    mids = ((e4m3[1:] + e4m3[:-1]) / 2).astype(np.float32)
    near = np.concatenate([np.nextafter(mids, np.float32(np.inf)),
                           np.nextafter(mids, np.float32(-np.inf))])
    rand = np.random.default_rng(0).standard_normal(20000).astype(np.float32) * 30
    return jnp.asarray(np.concatenate([values, mids, near, rand, [0.0, -0.0]]).astype(np.float32))


@pytest.mark.parametrize("fmt", [F.E4M3_FORMAT, F.E2M1_FORMAT], ids=lambda f: f.name)
def test_rne_encode_matches_saturating_cast(fmt):
    y = _sweep()
    got = jax.jit(F.encode, static_argnums=1)(y, fmt)
    expected = F.to_bits(F.cast_reference(y, fmt))
    bad = np.flatnonzero(np.asarray(got != expected))
    assert bad.size == 0, f"{fmt.name}: {bad.size} mismatches, e.g. y={np.asarray(y)[bad[:5]]}"


def test_stochastic_encode_matches_table_reference():
    y = _sweep()
    y = jnp.asarray(np.asarray(y)[np.abs(np.asarray(y)) <= 8])

    @jax.jit
    def both(y, key):
        uniform = F.uniform_from_bits(jax.random.bits(key, y.shape, jnp.uint32))
        return (F.encode(y, F.E2M1_FORMAT, uniform),
                F.to_bits(F.e2m1_stochastic_reference(y, uniform)))

    got, expected = both(y, jax.random.key(3))
    np.testing.assert_array_equal(np.asarray(got), np.asarray(expected))


def test_stochastic_rounding_only_picks_the_two_neighbours():
    y = jnp.linspace(-6.0, 6.0, 4001, dtype=jnp.float32)

    @jax.jit
    def round_trip(y, key):
        uniform = F.uniform_from_bits(jax.random.bits(key, y.shape, jnp.uint32))
        return F.decode(F.encode(y, F.E2M1_FORMAT, uniform), F.E2M1_FORMAT)

    q = np.asarray(round_trip(y, jax.random.key(0)))
    grid = np.array(F.E2M1_GRID)
    a = np.abs(np.asarray(y))
    lo = grid[np.searchsorted(grid, a, side="right") - 1]
    hi = grid[np.minimum(np.searchsorted(grid, a, side="left"), 7)]
    assert np.all((np.abs(q) == lo) | (np.abs(q) == hi))
    on_grid = lo == a
    np.testing.assert_array_equal(np.abs(q)[on_grid], a[on_grid])   # exact values never move


def test_e8m0_rceil_equals_te_rule_and_floor_equals_ocp_rule():
    """Our division-free rceil == TE/jax: round up the f32 exponent of f32(amax / 448)."""
    rng = np.random.default_rng(1)
    boundaries = (448 * np.exp2(np.arange(-110, 110, dtype=np.float64))).astype(np.float32)
    amax = np.concatenate([
        np.exp2(rng.uniform(-110, 120, 5000)), np.exp2(np.arange(-110, 120, dtype=np.float64)),
        boundaries, np.nextafter(boundaries, np.float32(np.inf)),
        np.nextafter(boundaries, np.float32(0)), [448.0, 449.0, 500.0, 0.0]
    ]).astype(np.float32)
    rceil = np.asarray(jax.jit(F.e8m0_rceil)(jnp.asarray(amax))).astype(int)
    ratio = (amax / np.float32(448)).astype(np.float64)          # IEEE f32 division in NumPy
    with np.errstate(divide="ignore"):
        expected = np.clip(np.where(ratio > 0, np.ceil(np.log2(ratio)), -127), -127, 127) + 127
    np.testing.assert_array_equal(rceil, expected)
    floor = np.asarray(jax.jit(F.e8m0_floor)(jnp.asarray(amax))).astype(int)
    with np.errstate(divide="ignore"):
        expected = np.clip(np.where(amax > 0, np.floor(np.log2(amax.astype(np.float64))) - 8, -127),
                           -127, 127) + 127
    np.testing.assert_array_equal(floor, expected)
    special = jnp.asarray([np.nan, np.inf, -np.inf], jnp.float32)
    assert (np.asarray(F.e8m0_rceil(special)) == 0xFF).all()
    assert (np.asarray(F.e8m0_floor(special)) == 0xFF).all()


def test_uniform_from_bits_covers_zero_to_one():
    u = F.uniform_from_bits(jnp.asarray([0, 0xFFFFFFFF, 1 << 31], jnp.uint32))
    np.testing.assert_array_equal(np.asarray(u), [0.0, 1 - 2.0 ** -24, 0.5])


def test_to_bits_rejects_wide_dtypes():
    with pytest.raises(TypeError, match="float8/float4"):
        F.to_bits(jnp.zeros(3, jnp.float32))
