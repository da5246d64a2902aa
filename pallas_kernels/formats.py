"""Element and scale formats of MXFP8 and NVFP4, bit-exact.

Formats (ml_dtypes semantics; OCP MX v1.0 spec section 5; NVIDIA NVFP4, arXiv 2509.25149):

| format | jnp dtype        | bits    | max  | min normal | min subnormal | NaN            |
|--------|------------------|---------|------|------------|---------------|----------------|
| E4M3   | float8_e4m3fn    | 1-4-3   | 448  | 2^-6       | 2^-9          | S.1111.111     |
| E2M1   | float4_e2m1fn    | 1-2-1   | 6    | 1          | 0.5           | none           |
| E8M0   | float8_e8m0fnu   | 0-8-0   | 2^127| 2^-127     | -             | 0xFF (no zero) |

Two families of helpers live here:

* ``*_reference`` helpers use dtype casts (``astype``), which XLA and ml_dtypes implement as
  round-to-nearest-even. They are the specification; the jnp references use them.
* the other helpers work on f32/int32 bit patterns with arithmetic only (no low-precision
  dtype, no table, no constant array), because Pallas kernels cannot capture constants and
  GPU backends cannot cast to float8_e8m0fnu / float4_e2m1fn. The Pallas kernels use these;
  tests pin them bit-for-bit against the references.

Every op here is elementwise, so it works on any shape.
"""
from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from jax import lax

E4M3 = jnp.float8_e4m3fn
E2M1 = jnp.float4_e2m1fn
E8M0 = jnp.float8_e8m0fnu

MXFP8_BLOCK = 32          # OCP MX: one E8M0 scale per 32 elements along the contraction axis
NVFP4_BLOCK = 16          # NVFP4: one E4M3 scale per 16 elements (or per 16x16 weight tile)
E8M0_NAN = 0xFF           # the only NaN encoding of E8M0
E8M0_BIAS = 127


@dataclasses.dataclass(frozen=True)
class FloatFormat:
    """A small sign-exponent-mantissa format without infinities (E4M3 or E2M1)."""
    name: str
    dtype: object
    mantissa_bits: int
    min_exponent: int       # exponent of the smallest normal number
    max_value: float
    sign_bit: int           # the bit that holds the sign in the code

    @property
    def bias(self) -> int:
        return 1 - self.min_exponent


E4M3_FORMAT = FloatFormat("e4m3", E4M3, mantissa_bits=3, min_exponent=-6, max_value=448.0,
                          sign_bit=0x80)
E2M1_FORMAT = FloatFormat("e2m1", E2M1, mantissa_bits=1, min_exponent=0, max_value=6.0,
                          sign_bit=0x8)
E4M3_MAX = E4M3_FORMAT.max_value
E2M1_MAX = E2M1_FORMAT.max_value
E4M3_EMAX = 8             # exponent of E4M3's largest binade: 448 = 1.75 * 2^8


# ----------------------------------------------------------------------------------------
# Bit views: low-precision arrays <-> uint8 codes (one code per byte).
# ----------------------------------------------------------------------------------------

def to_bits(x: jax.Array) -> jax.Array:
    """float8_* -> uint8 bit patterns; float4_e2m1fn -> uint8 holding the 4-bit code."""
    if x.dtype == E2M1:
        return lax.bitcast_convert_type(x, jnp.uint4).astype(jnp.uint8)
    if jnp.dtype(x.dtype).itemsize != 1:
        raise TypeError(f"to_bits expects a float8/float4 array, got {x.dtype}")
    return lax.bitcast_convert_type(x, jnp.uint8)


def from_bits(bits: jax.Array, dtype) -> jax.Array:
    """uint8 bit patterns -> float8_* / float4_e2m1fn (for E2M1 only the low nibble is used)."""
    bits = bits.astype(jnp.uint8)
    if jnp.dtype(dtype) == jnp.dtype(E2M1):
        return lax.bitcast_convert_type((bits & 0xF).astype(jnp.uint4), E2M1)
    return lax.bitcast_convert_type(bits, dtype)


# ----------------------------------------------------------------------------------------
# Portable arithmetic (kernel side). Inputs f32, outputs f32 / int32 / uint8.
# ----------------------------------------------------------------------------------------

def pow2(e: jax.Array) -> jax.Array:
    """2.0**e as f32 for integer e in [-126, 127], built from the exponent bits (exact)."""
    e = jnp.asarray(e, jnp.int32)
    return lax.bitcast_convert_type((e + 127) << 23, jnp.float32)


def f32_exponent(a: jax.Array) -> jax.Array:
    """floor(log2(a)) for a normal f32 a >= 0; -127 for zero and f32 subnormals."""
    bits = lax.bitcast_convert_type(a, jnp.int32)
    return ((bits >> 23) & 0xFF) - 127


def _round_magnitude(a, fmt: FloatFormat, uniform=None):
    """Round a (f32, 0 <= a <= fmt.max_value, not NaN) onto fmt's grid.

    Returns (code, value): the 7-bit (E4M3) or 3-bit (E2M1) magnitude code as int32 and the
    rounded value as f32. With ``uniform`` (f32 in [0, 1), same shape), rounds up with
    probability (a - lo) / (hi - lo) (stochastic rounding); else round-to-nearest-even.

    Scaling a by the power of two 2^-q (q = exponent of the grid spacing at a) puts the grid on
    the integers, so floor() gives the lower neighbour and t - floor(t) the exact fraction.
    """
    m = fmt.mantissa_bits
    exponent = jnp.maximum(f32_exponent(a), fmt.min_exponent)
    quantum = exponent - m                       # the grid spacing at a is 2^quantum
    t = a * pow2(-quantum)                       # exact; t in [0, 2^(m+1)]
    low = jnp.floor(t)
    frac = t - low                               # exact: t < 2^24
    if uniform is None:
        odd = (low - 2.0 * jnp.floor(0.5 * low)) == 1.0
        up = (frac > 0.5) | ((frac == 0.5) & odd)
    else:
        up = uniform < frac
    r = low + up.astype(jnp.float32)             # integer in [0, 2^(m+1)]
    code = (exponent - fmt.min_exponent) * (1 << m) + r.astype(jnp.int32)
    return code, r * pow2(quantum)


def encode(y: jax.Array, fmt: FloatFormat, uniform=None) -> jax.Array:
    """f32 -> uint8 code of fmt: clip to +-max, then RNE (or stochastic with ``uniform``).

    The sign is kept for zero results (-0.1 in E2M1 gives the -0 code), as a cast does.
    NaN inputs give garbage codes: callers mask NaN blocks explicitly.
    """
    bits = lax.bitcast_convert_type(y, jnp.uint32)
    negative = (bits >> 31) == 1
    a = jnp.minimum(jnp.abs(y), fmt.max_value)
    code, _ = _round_magnitude(a, fmt, uniform)
    code = jnp.where(negative, code | fmt.sign_bit, code)
    return code.astype(jnp.uint8)


def decode(code: jax.Array, fmt: FloatFormat) -> jax.Array:
    """uint8 code of fmt -> f32 value (E4M3 0x7F/0xFF -> NaN)."""
    c = code.astype(jnp.int32)
    m = fmt.mantissa_bits
    magnitude = c & (fmt.sign_bit - 1)
    exp_field = magnitude >> m
    mantissa = magnitude & ((1 << m) - 1)
    # Subnormals (exp_field 0) have spacing 2^(min_exponent - m), like the lowest binade.
    significand = jnp.where(exp_field == 0, mantissa, mantissa + (1 << m)).astype(jnp.float32)
    exponent = jnp.maximum(exp_field, 1) - fmt.bias - m
    value = significand * pow2(exponent)
    if fmt.name == "e4m3":
        value = jnp.where(magnitude == 0x7F, jnp.nan, value)
    # The sign goes on as a bit, not by negation: Pallas' Triton backend lowers `-x` as
    # `0 - x`, which turns -(+0.0) into +0.0 (on an H200 every -0 code decoded to +0).
    sign = ((c & fmt.sign_bit) != 0).astype(jnp.uint32) << 31
    return lax.bitcast_convert_type(lax.bitcast_convert_type(value, jnp.uint32) | sign,
                                    jnp.float32)


def e8m0_decode(byte: jax.Array) -> jax.Array:
    """E8M0 byte -> f32 2^(byte-127); byte 0 -> 2^-127 (an f32 subnormal); 0xFF -> NaN."""
    b = byte.astype(jnp.int32)
    value = lax.bitcast_convert_type(jnp.where(b == 0, 0x00400000, b << 23), jnp.float32)
    return jnp.where(b == E8M0_NAN, jnp.nan, value)


def e8m0_rceil(amax: jax.Array) -> jax.Array:
    """E8M0 scale byte for E4M3 blocks, round-up rule: e = ceil(log2(amax / 448)), clamped.

    Exact and division-free: with amax = m * 2^E (m in [1, 2)) and 448 = 1.75 * 2^8,
    e = E - 8 + (m > 1.75). For every f32 amax this equals TE's / jax's rule of rounding up the
    f32 exponent of f32(amax / 448) (``cast_to_e8m0_with_rounding_up``; tests compare the two):
    no f32 amax lies close enough to 1.75 * 2^E for the quotient to round onto a power of two.
    (XLA:CPU compiles a division by a broadcast as a multiplication by the reciprocal, so we
    avoid dividing.) 0 for amax <= 448 * 2^-127 (a zero block too), 0xFF for NaN/Inf.
    """
    bits = lax.bitcast_convert_type(amax, jnp.int32)
    exponent = ((bits >> 23) & 0xFF) - 127
    round_up = (bits & 0x7FFFFF) > 0x600000                 # mantissa of 1.75
    e = jnp.clip(exponent - E4M3_EMAX + round_up.astype(jnp.int32), -E8M0_BIAS, E8M0_BIAS)
    return jnp.where(jnp.isfinite(amax), e + E8M0_BIAS, E8M0_NAN).astype(jnp.uint8)


def e8m0_floor(amax: jax.Array) -> jax.Array:
    """E8M0 scale byte for E4M3 blocks, OCP v1.0 rule: e = floor(log2(amax)) - 8, >= -127."""
    e = jnp.maximum(f32_exponent(amax) - E4M3_EMAX, -E8M0_BIAS)
    return jnp.where(jnp.isfinite(amax), e + E8M0_BIAS, E8M0_NAN).astype(jnp.uint8)


def uniform_from_bits(random_bits: jax.Array) -> jax.Array:
    """uint32 random bits -> f32 uniform on the 2^-24 grid of [0, 1)."""
    return (random_bits >> 8).astype(jnp.float32) * (2.0 ** -24)


# ----------------------------------------------------------------------------------------
# Reference side: casts (the specification) and the E2M1 grid as a table.
# ----------------------------------------------------------------------------------------

E2M1_GRID = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


def cast_reference(y: jax.Array, fmt: FloatFormat) -> jax.Array:
    """Saturating RNE cast: clip first (E4M3 has no Inf; an out-of-range cast gives NaN)."""
    return jnp.clip(y, -fmt.max_value, fmt.max_value).astype(fmt.dtype)


def e2m1_stochastic_reference(y: jax.Array, uniform: jax.Array) -> jax.Array:
    """Stochastic rounding onto E2M1 from its table of values: find the neighbours lo <= |y| <= hi
    on the grid, round up with probability (|y| - lo) / (hi - lo)."""
    a = jnp.minimum(jnp.abs(y), E2M1_MAX)
    lo, hi = jnp.zeros_like(a), jnp.zeros_like(a)
    for below, above in zip(E2M1_GRID[:-1], E2M1_GRID[1:]):
        lo = jnp.where(a >= below, below, lo)
        hi = jnp.where(a > below, above, hi)
    frac = (a - lo) / jnp.where(hi > lo, hi - lo, 1.0)
    magnitude = jnp.where(uniform < frac, hi, lo)
    return jnp.where(jnp.signbit(y), -magnitude, magnitude).astype(E2M1)
