"""Multi-Token Prediction modules (DeepSeek-V3 report sec. 2.2, eq. 21-25).

Module k (k = 1..D) sees, at position i, the previous depth's hidden state h^{k-1}_i (the main
model's last layer output for k = 1) and the embedding of token t_{i+k}:
    h'_i = W_k [RMSNorm(Emb(t_{i+k})); RMSNorm(h^{k-1}_i)]      (`eh_proj`, `enorm`, `hnorm`)
    h^k_i = TransformerBlock_k(h'_i)
    logits^k_i = Head(RMSNorm(h^k_i))                          predicts t_{i+k+1}
Embedding and output head are shared with the main model. The concatenation order (embedding
first) is the one of the official DeepSeek-V3 weights (`model.layers.61.eh_proj`).
With packed rows, t_{i+k} is taken only from the same document; elsewhere the pad token (id 0)
is fed and the loss must mask that position (see `mtp_targets`).
"""
from __future__ import annotations

import jax.numpy as jnp
from flax import linen as nn

from c2jax.model.layers import RMSNorm, make_param, project


def shift_within_segment(values, segment_ids, shift: int, fill: int = 0):
    """`values[:, i + shift]` where position i + shift is in the same document, else `fill`.

    values, segment_ids int `[b, s]` -> (shifted `[b, s]`, bool `[b, s]` where it was valid).
    """
    s = values.shape[1]
    if shift >= s:
        return jnp.full_like(values, fill), jnp.zeros(values.shape, bool)
    ahead = jnp.pad(values[:, shift:], ((0, 0), (0, shift)), constant_values=fill)
    ahead_seg = jnp.pad(segment_ids[:, shift:], ((0, 0), (0, shift)), constant_values=0)
    ok = (ahead_seg == segment_ids) & (segment_ids != 0)
    return jnp.where(ok, ahead, fill), ok


def mtp_targets(tokens, segment_ids, depth: int):
    """Targets of MTP module `depth` (1-based): t_{i+depth+1}, and their loss mask `[b, s]`."""
    return shift_within_segment(tokens, segment_ids, depth + 1)


class MTPCombine(nn.Module):
    """h'_i = eh_proj([enorm(emb_next); hnorm(h_prev)]): `[b, s, embed]` x2 -> `[b, s, embed]`."""
    cfg: object

    @nn.compact
    def __call__(self, emb_next, h_prev):
        cfg = self.cfg
        e = cfg.hidden_size
        joined = jnp.concatenate([RMSNorm(cfg, e, name="enorm")(emb_next),
                                  RMSNorm(cfg, e, name="hnorm")(h_prev)], axis=-1)
        w = make_param(self, "eh_proj", (2 * e, e), (None, "embed"), cfg)
        return project("bsf,fe->bse", joined, w, cfg)
