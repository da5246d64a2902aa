"""RoPE / YaRN against HF transformers' implementation (the DeepSeek-V3 definitions)."""
import numpy as np
import pytest
import torch
from transformers.models.deepseek_v3 import modeling_deepseek_v3 as hf_ds
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

from c2jax.model import model_config
from c2jax.model.rope import (apply_rotary, deinterleave_columns, inverse_frequencies,
                              rotary_angles, softmax_scale)
from tests.model.hf_oracle import hf_config

YARNS = [
    dict(factor=4.0, original_max_position_embeddings=32, beta_fast=32.0, beta_slow=1.0,
         mscale=0.707, mscale_all_dim=0.707),
    dict(factor=40.0, original_max_position_embeddings=4096, beta_fast=32.0, beta_slow=1.0,
         mscale=1.0, mscale_all_dim=1.0),                     # DeepSeek-V3
    dict(factor=32.0, original_max_position_embeddings=4096, beta_fast=1.0, beta_slow=1.0,
         mscale=1.0, mscale_all_dim=1.0),                     # Kimi K2 (beta_fast = beta_slow)
    dict(factor=8.0, original_max_position_embeddings=256, beta_fast=32.0, beta_slow=1.0),
]


def _pair(rope: dict, rope_dim=64, theta=10000.0):
    hf = hf_config(qk_rope_head_dim=rope_dim,
                   rope_parameters={"rope_type": "yarn", "rope_theta": theta, **rope})
    ours = model_config(qk_rope_head_dim=rope_dim, rope_theta=theta,
                        rope_scaling=dict(type="yarn", mscale=rope.get("mscale", 0.0),
                                          mscale_all_dim=rope.get("mscale_all_dim", 0.0),
                                          **{k: v for k, v in rope.items()
                                             if k not in ("mscale", "mscale_all_dim")}))
    return hf, ours


@pytest.mark.parametrize("rope", YARNS)
def test_yarn_frequencies_and_scales_match_hf(rope):
    hf, ours = _pair(rope)
    ref_inv, ref_factor = ROPE_INIT_FUNCTIONS["yarn"](hf)
    inv, factor = inverse_frequencies(ours)
    np.testing.assert_allclose(inv, ref_inv.numpy(), rtol=1e-6)
    assert factor == pytest.approx(ref_factor, rel=1e-7)
    ref_scale = hf_ds.yarn_apply_mscale(hf.rope_parameters, hf.qk_head_dim ** -0.5)
    assert softmax_scale(ours) == pytest.approx(ref_scale, rel=1e-7)


def test_yarn_really_changes_low_frequencies():
    _, ours = _pair(YARNS[1])
    inv, _ = inverse_frequencies(ours)
    plain, _ = inverse_frequencies(model_config(qk_rope_head_dim=64))
    assert inv[0] == pytest.approx(plain[0])            # fastest dim extrapolates
    assert inv[-1] == pytest.approx(plain[-1] / 40.0)   # slowest dim interpolates by the factor


@pytest.mark.parametrize("interleave", [True, False])
def test_rotation_matches_hf(interleave):
    rng = np.random.RandomState(0)
    q = rng.randn(2, 5, 3, 8).astype(np.float32)           # [b, s, h, rope]
    k = rng.randn(2, 5, 8).astype(np.float32)              # [b, s, rope] shared key
    positions = rng.randint(0, 100, (2, 5))
    cfg = model_config(qk_rope_head_dim=8)
    cos, sin = rotary_angles(cfg, positions)
    ours_q = np.asarray(apply_rotary(q, cos, sin, interleave))
    ours_k = np.asarray(apply_rotary(k, cos, sin, interleave))
    full_cos = torch.tensor(np.concatenate([cos, cos], -1))
    full_sin = torch.tensor(np.concatenate([sin, sin], -1))
    fn = hf_ds.apply_rotary_pos_emb_interleave if interleave else hf_ds.apply_rotary_pos_emb
    ref_q, ref_k = fn(torch.tensor(q).transpose(1, 2), torch.tensor(k)[:, None], full_cos,
                      full_sin)
    np.testing.assert_allclose(ours_q, ref_q.transpose(1, 2).numpy(), atol=1e-6)
    np.testing.assert_allclose(ours_k, ref_k[:, 0].numpy(), atol=1e-6)


def test_deinterleaved_weight_columns_give_the_interleaved_rotation():
    """Projecting through the reordered weight and rotating contiguous halves equals the
    interleaved rotation of the original projection (the attention layer's fast path)."""
    rng = np.random.RandomState(1)
    nope, rope, extra = 4, 8, 3
    x = rng.randn(2, 5, 6).astype(np.float32)                      # [b, s, in]
    w = rng.randn(6, nope + rope + extra).astype(np.float32)       # [in, nope | rope | extra]
    cos, sin = rotary_angles(model_config(qk_rope_head_dim=rope), rng.randint(0, 50, (2, 5)))
    plain = x @ w
    reference = apply_rotary(plain[..., nope:nope + rope], cos, sin, interleave=True)
    reordered = np.asarray(x @ np.asarray(deinterleave_columns(w, nope, rope)))
    fast = apply_rotary(reordered[..., nope:nope + rope], cos, sin, interleave=False)
    np.testing.assert_array_equal(np.asarray(fast), np.asarray(reference))
    np.testing.assert_array_equal(reordered[..., :nope], plain[..., :nope])
    np.testing.assert_array_equal(reordered[..., nope + rope:], plain[..., nope + rope:])
