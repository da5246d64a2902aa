"""Rotary position embeddings with YaRN context extension, in DeepSeek-V3's rotary layout.

Frequencies follow YaRN (Peng et al. 2023, arXiv:2309.00071, eq. 18-23): dimensions that rotate
more than `beta_fast` times over the original context keep their frequency (extrapolate), those
rotating fewer than `beta_slow` times are divided by `factor` (interpolate), and a linear ramp
blends the band in between. Two temperature corrections come with it:
  * cos/sin are multiplied by `attention_factor` = m(s, mscale) / m(s, mscale_all_dim)
    (or m(s, 1) when either is unset), with m(s, a) = 0.1 * a * ln(s) + 1;
  * the softmax scale is multiplied by m(s, mscale_all_dim)^2 (DeepSeek-V3's `mscale_all_dim`).
These are the definitions of the official DeepSeek-V3 code and of HF `transformers`.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

from c2jax.model.config import qk_head_dim


def _yarn_mscale(scale: float, mscale: float = 1.0) -> float:
    if scale <= 1.0:
        return 1.0
    return 0.1 * mscale * math.log(scale) + 1.0


def inverse_frequencies(cfg) -> tuple[np.ndarray, float]:
    """Returns (inv_freq `[rope_dim // 2]` float32, attention_factor) for the config's rope."""
    dim, base = cfg.qk_rope_head_dim, float(cfg.rope_theta)
    exponents = np.arange(0, dim, 2, dtype=np.float32) / dim
    pos_freqs = (base ** exponents).astype(np.float32)
    inv_extrapolation = (1.0 / pos_freqs).astype(np.float32)
    rs = cfg.rope_scaling
    if rs.type == "default":
        return inv_extrapolation, 1.0
    factor = float(rs.factor)
    inv_interpolation = (1.0 / (factor * pos_freqs)).astype(np.float32)
    original_len = rs.original_max_position_embeddings

    def correction_dim(num_rotations: float) -> float:
        # The dimension whose wavelength fits `num_rotations` times into the original context.
        return (dim * math.log(original_len / (num_rotations * 2 * math.pi))) / (2 * math.log(base))

    low, high = correction_dim(rs.beta_fast), correction_dim(rs.beta_slow)
    if rs.truncate:
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001  # avoid a zero-width ramp
    ramp = np.clip((np.arange(dim // 2, dtype=np.float32) - low) / (high - low), 0.0, 1.0)
    extrapolation_weight = (1.0 - ramp).astype(np.float32)
    inv_freq = (inv_interpolation * (1.0 - extrapolation_weight)
                + inv_extrapolation * extrapolation_weight).astype(np.float32)
    if rs.mscale and rs.mscale_all_dim:
        attention_factor = _yarn_mscale(factor, rs.mscale) / _yarn_mscale(factor, rs.mscale_all_dim)
    else:
        attention_factor = _yarn_mscale(factor)
    return inv_freq, float(attention_factor)


def softmax_scale(cfg) -> float:
    """1/sqrt(qk_head_dim), times DeepSeek's YaRN correction m(s, mscale_all_dim)^2."""
    scale = qk_head_dim(cfg) ** -0.5
    rs = cfg.rope_scaling
    if rs.type == "yarn" and rs.mscale_all_dim:
        m = _yarn_mscale(float(rs.factor), float(rs.mscale_all_dim))
        scale *= m * m
    return scale


def rotary_angles(cfg, positions: jnp.ndarray) -> tuple[jnp.ndarray, jnp.ndarray]:
    """cos and sin of every rotation angle, float32 `[batch, seq, rope_dim // 2]`.

    `positions`: int `[batch, seq]`, the index of each token inside its document.
    """
    inv_freq, attention_factor = inverse_frequencies(cfg)
    angles = positions.astype(jnp.float32)[..., None] * jnp.asarray(inv_freq)
    return jnp.cos(angles) * attention_factor, jnp.sin(angles) * attention_factor


def deinterleave_columns(w: jax.Array, start: int, rope_dim: int) -> jax.Array:
    """`w` with its last-axis columns start..start+rope_dim reordered evens first, then odds.

    A projection through the reordered weight yields the rotary part already split into the
    (x[2i], x[2i+1]) pairs of DeepSeek's interleaved layout, [evens, odds], so the rotation
    runs in the "rotate_half" layout on contiguous halves: the same values as
    `apply_rotary(..., interleave=True)` on the original projection, without strided slices of
    the activations (whose backward is an interior-padded scatter per layer). The weight is
    small and permuting it costs one copy of it.
    """
    rotary = w[..., start:start + rope_dim]
    pairs = rotary.reshape(rotary.shape[:-1] + (rope_dim // 2, 2))
    split = jnp.swapaxes(pairs, -1, -2).reshape(rotary.shape)
    return jnp.concatenate([w[..., :start], split, w[..., start + rope_dim:]], axis=-1)


def apply_rotary(x: jnp.ndarray, cos: jnp.ndarray, sin: jnp.ndarray,
                 interleave: bool) -> jnp.ndarray:
    """Rotates the last dim of `x` `[batch, seq, (heads,) rope_dim]` by the given angles.

    With `interleave`, pairs (x[2i], x[2i+1]) rotate by angle i (DeepSeek's stored layout) and the
    result is written de-interleaved, [rotated evens, rotated odds], as HF does; without it, pairs
    are (x[i], x[i + d/2]) (the "rotate_half" layout). Either way q and k get the same map, so
    q.k is the rotary dot product.
    """
    if x.ndim == cos.ndim + 1:  # a heads axis sits between seq and rope_dim
        cos, sin = cos[..., None, :], sin[..., None, :]
    if interleave:
        x1, x2 = x[..., 0::2], x[..., 1::2]
    else:
        half = x.shape[-1] // 2
        x1, x2 = x[..., :half], x[..., half:]
    x1f, x2f = x1.astype(jnp.float32), x2.astype(jnp.float32)
    out = jnp.concatenate([x1f * cos - x2f * sin, x2f * cos + x1f * sin], axis=-1)
    return out.astype(x.dtype)
