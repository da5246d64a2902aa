"""Multi-head Latent Attention (DeepSeek-V2 sec. 2.1, used unchanged by V3 and Kimi K2).

Keys and values come from one low-rank latent `c_kv = RMSNorm(x W_dkv)` of `kv_lora_rank` values
plus a single rotary key `k_rope` of `qk_rope_head_dim` values shared by all heads. Training
expands the latent per head (`kv_b_proj`); decoding caches only `c_kv` and `k_rope`.

Masking is by document: token q may attend to token k iff they share a segment id and
`position[k] <= position[q]`. Because it uses positions rather than array indices, the same
mask is right for packed rows, for context-parallel shards whose sequence order was permuted
for load balance, and for a decode cache.

Context parallelism: queries stay sharded over the `context` mesh axis; the compact latents
(`c_kv`, `k_rope`) and their segment ids / positions are gathered over it, so each shard sees
every key of its rows at a cost of `kv_lora_rank + qk_rope_head_dim` values per token.

Decoding (`cache=` given): the new tokens' `c_kv` and `k_rope` are written into a latent cache
at their positions, then the queries attend over the first `cache_window` cached positions.
When few queries meet many keys, `kv_b_proj` is absorbed into the query and output sides
(DeepSeek-V2 sec. 2.1.3): q_nope W_uk scores against `c_kv` directly and the attention output
over `c_kv` is mapped through W_uv, so no per-head K/V is ever expanded from the cache.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn

from c2jax.model.config import qk_head_dim
from c2jax.model.fused_attention import MASKED as _MASKED, causal_attention, query_blocks
from c2jax.model.layers import RMSNorm, make_param, project
from c2jax.model.rope import apply_rotary, deinterleave_columns, softmax_scale
from c2jax.sharding import constrain, mesh_axis_size

_BSE = ("activation_batch", "activation_length", "activation_embed")
_BSHD = ("activation_batch", "activation_length", "activation_heads", "activation_kv")
# Gathered over `context`: the length dim is deliberately left unsharded.
_B_FULL_S = ("activation_batch", None)
_B_FULL_SD = ("activation_batch", None, "activation_kv")


def document_mask(q_segments, q_positions, k_segments, k_positions) -> jax.Array:
    """bool `[b, q, k]`: same document and key not in the query's future."""
    same_doc = q_segments[:, :, None] == k_segments[:, None, :]
    causal = k_positions[:, None, :] <= q_positions[:, :, None]
    return same_doc & causal


class MLAttention(nn.Module):
    """`[b, s, embed]` -> `[b, s, embed]`."""
    cfg: object

    cache_window: int = 0

    @nn.compact
    def __call__(self, x, cos, sin, segment_ids, positions, cache=None):
        """x `[b, s, embed]`; cos/sin `[b, s, rope/2]`; segment_ids/positions int `[b, s]`.

        cache: None (training), or `{"latent": [layers, b, max_len, kv_lora_rank],
        "k_rope": [layers, b, max_len, qk_rope_head_dim], "layer": int32 scalar}`; then
        positions index the cache, segment_ids are 1 for tokens and 0 for padding, keys are the
        first `cache_window` (default max_len) positions, and the result is
        (`[b, s, embed]`, the updated `{"latent", "k_rope"}`).
        """
        cfg = self.cfg
        e, h = cfg.hidden_size, cfg.num_attention_heads
        nope, rope, v_dim = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
        qk_dim = qk_head_dim(cfg)

        def rotary_columns(w, start):
            """w with the rotary part of its output in [evens, odds] order when the config's
            layout is interleaved (`rope.deinterleave_columns`), so rotation never strides."""
            return deinterleave_columns(w, start, rope) if cfg.rope_interleave else w

        # Queries, optionally through a low-rank bottleneck.
        if cfg.q_lora_rank:
            w_qa = make_param(self, "q_a_proj", (e, cfg.q_lora_rank), ("embed", "q_lora"), cfg)
            w_qb = make_param(self, "q_b_proj", (cfg.q_lora_rank, h, qk_dim),
                              ("q_lora", "heads", "head_dim"), cfg)
            q_latent = RMSNorm(cfg, cfg.q_lora_rank, name="q_a_layernorm")(
                project("bse,er->bsr", x, w_qa, cfg))
            q = project("bsr,rhd->bshd", q_latent, rotary_columns(w_qb, nope), cfg)
        else:
            w_q = make_param(self, "q_proj", (e, h, qk_dim), ("embed", "heads", "head_dim"), cfg)
            q = project("bse,ehd->bshd", x, rotary_columns(w_q, nope), cfg)
        q = constrain(q, _BSHD)
        q_nope, q_rope = q[..., :nope], apply_rotary(q[..., nope:], cos, sin, interleave=False)

        # The compact KV latent and the shared rotary key.
        w_kva = make_param(self, "kv_a_proj_with_mqa", (e, cfg.kv_lora_rank + rope),
                           ("embed", "kv_lora"), cfg)
        kv_a = project("bse,er->bsr", x, rotary_columns(w_kva, cfg.kv_lora_rank), cfg)
        kv_latent = RMSNorm(cfg, cfg.kv_lora_rank, name="kv_a_layernorm")(
            kv_a[..., :cfg.kv_lora_rank])
        k_rope = apply_rotary(kv_a[..., cfg.kv_lora_rank:], cos, sin, interleave=False)
        w_kvb = make_param(self, "kv_b_proj", (cfg.kv_lora_rank, h, nope + v_dim),
                           ("kv_lora", "heads", "head_dim"), cfg)
        w_o = make_param(self, "o_proj", (h, v_dim, e), ("heads", "head_dim", "embed"), cfg)
        if cache is not None:
            attn, new_cache = self._attend_cache(q_nope, q_rope, kv_latent, k_rope, w_kvb,
                                                 segment_ids, positions, cache)
            out = project("bshd,hde->bse", constrain(attn, _BSHD), w_o, cfg)
            return constrain(out, _BSE), new_cache

        # Context parallelism: gather the latents (not per-head K/V) over the context axis.
        kv_latent = constrain(kv_latent, _B_FULL_SD)
        k_rope = constrain(k_rope, _B_FULL_SD)
        k_segments = constrain(segment_ids, _B_FULL_S)
        k_positions = constrain(positions, _B_FULL_S)

        kv = project("bsr,rhd->bshd", kv_latent, w_kvb, cfg)
        k_nope, value = kv[..., :nope], kv[..., nope:]

        # One shared rope key per token: broadcast it to the heads and score q.k in one matmul.
        q = jnp.concatenate([q_nope, q_rope], axis=-1)
        k = jnp.concatenate([k_nope, jnp.broadcast_to(k_rope[:, :, None, :].astype(k_nope.dtype),
                                                      k_nope.shape[:3] + (rope,))], axis=-1)
        # Without context parallelism keys are in natural order, so query block i only needs
        # keys up to its own end (the rest is masked anyway): ~40% less work at 512 tokens.
        block = cfg.attention_block_size if mesh_axis_size("context") == 1 else 0
        attn = attention_core(q, k, value, segment_ids, positions, k_segments, k_positions,
                              softmax_scale(cfg), jnp.dtype(cfg.dtype), block)
        return constrain(project("bshd,hde->bse", constrain(attn, _BSHD), w_o, cfg), _BSE)

    def _attend_cache(self, q_nope, q_rope, kv_latent, k_rope, w_kvb, segment_ids, positions,
                      cache):
        """Writes this step's latents at `positions`, then attends over the cache window.

        q_nope `[b, s, h, nope]`, q_rope `[b, s, h, rope]`, kv_latent `[b, s, kv_lora]`,
        k_rope `[b, s, rope]` -> (`[b, s, h, v]`, the updated {"latent", "k_rope"}).
        """
        cfg = self.cfg
        nope, rope = cfg.qk_nope_head_dim, cfg.qk_rope_head_dim
        dtype = jnp.dtype(cfg.dtype)
        layer = cache["layer"]
        # Write before reading: each query's own key is among the keys it attends to.
        latent_stack = cache_write(cache["latent"], layer, kv_latent, positions)
        rope_stack = cache_write(cache["k_rope"], layer, k_rope, positions)
        window = self.cache_window or latent_stack.shape[2]
        keys_latent = constrain(cache_read(latent_stack, layer, window), _B_FULL_SD)
        keys_rope = constrain(cache_read(rope_stack, layer, window), _B_FULL_SD)
        b, s = positions.shape
        # Cache index == position, and every cached row holds one document.
        k_positions = jnp.broadcast_to(jnp.arange(window, dtype=positions.dtype), (b, window))
        k_segments = jnp.ones_like(k_positions)
        scale = softmax_scale(cfg)
        if absorb_kv_b(cfg, s, window):
            w_uk, w_uv = w_kvb[..., :nope], w_kvb[..., nope:]
            q_latent = project("bshn,rhn->bshr", q_nope, w_uk, cfg)          # q_nope W_uk
            mask = document_mask(segment_ids, positions, k_segments, k_positions)
            bias = jnp.where(mask, 0.0, _MASKED).astype(jnp.float32)[:, None]
            scores = (jnp.einsum("bshr,btr->bhst", q_latent, keys_latent.astype(dtype),
                                 preferred_element_type=jnp.float32)
                      + jnp.einsum("bshp,btp->bhst", q_rope, keys_rope.astype(dtype),
                                   preferred_element_type=jnp.float32))
            probs = jax.nn.softmax(scores * scale + bias, axis=-1)
            # (Output "bhsr", then transposed: XLA:CPU has no bf16 x bf16 -> f32 kernel for
            # the "bhst,btr->bshr" layout of this dot.)
            context = jnp.einsum("bhst,btr->bhsr", probs.astype(dtype), keys_latent.astype(dtype),
                                 preferred_element_type=jnp.float32).astype(dtype)
            context = context.transpose(0, 2, 1, 3)
            attn = project("bshr,rhv->bshv", context, w_uv, cfg)               # then W_uv
        else:
            kv = project("btr,rhd->bthd", keys_latent, w_kvb, cfg)
            k_nope, value = kv[..., :nope], kv[..., nope:]
            q = jnp.concatenate([q_nope, q_rope], axis=-1)
            k = jnp.concatenate([k_nope, jnp.broadcast_to(
                keys_rope[:, :, None, :].astype(k_nope.dtype), k_nope.shape[:3] + (rope,))], -1)
            attn = attention_core(q, k, value, segment_ids, positions, k_segments, k_positions,
                                  scale, dtype)
        return attn, {"latent": latent_stack, "k_rope": rope_stack}


def cache_write(stack, layer, values, positions):
    """stack `[layers, b, max_len, d]` with values `[b, s, d]` written at `[layer, row,
    positions[row]]`; positions past max_len are dropped (never written)."""
    rows = jnp.arange(values.shape[0])[:, None]
    return stack.at[layer, rows, positions].set(values.astype(stack.dtype), mode="drop")


def cache_read(stack, layer, window: int):
    """The first `window` positions of one layer: stack `[layers, b, max_len, d]` ->
    `[b, window, d]`."""
    _, b, _, d = stack.shape
    return jax.lax.dynamic_slice(stack, (layer, 0, 0, 0), (1, b, window, d))[0]


def absorb_kv_b(cfg, queries: int, keys: int) -> bool:
    """Whether absorbing `kv_b_proj` costs fewer FLOPs than expanding the cached latents.

    Per head, absorbed: queries*kv_lora*(nope+v) + queries*keys*(2*kv_lora + rope);
    expanded: keys*kv_lora*(nope+v) + queries*keys*(nope + rope + v). Decoding (one query,
    many keys) always absorbs; a long prefill into an empty cache expands, as training does.
    """
    r, n, p, v = cfg.kv_lora_rank, cfg.qk_nope_head_dim, cfg.qk_rope_head_dim, cfg.v_head_dim
    absorbed = queries * r * (n + v) + queries * keys * (2 * r + p)
    expanded = keys * r * (n + v) + queries * keys * (n + p + v)
    return absorbed <= expanded


def attention_core(q, k, value, q_segments, q_positions, k_segments, k_positions, scale, dtype,
                   causal_block: int = 0):
    """Softmax attention under the document mask.

    q `[b, sq, h, d]`, k `[b, sk, h, d]`, value `[b, sk, h, v]`, segments / positions int
    `[b, sq]` and `[b, sk]` -> `[b, sq, h, v]` in `dtype`. With `causal_block` > 0 the keys must
    be in the same natural order as the queries (sq == sk); query rows are then processed in
    blocks of that size, each against the keys up to its own last row only. Below float32 the
    core runs with bf16 operands, f32 scores and a hand-written backward
    (`fused_attention.causal_attention`).
    """
    def mask_of(lo, hi, keys):
        return document_mask(q_segments[:, lo:hi], q_positions[:, lo:hi], k_segments[:, :keys],
                             k_positions[:, :keys])

    if jnp.dtype(dtype) != jnp.float32:
        return causal_attention(q.astype(dtype), k.astype(dtype), value.astype(dtype), mask_of,
                                scale, causal_block)
    outs = []
    for lo, hi, keys in query_blocks(q.shape[1], k.shape[1], causal_block):
        bias = jnp.where(mask_of(lo, hi, keys), 0.0, _MASKED)[:, None]      # [b, 1, q, k]
        scores = jnp.einsum("bqhd,bkhd->bhqk", q[:, lo:hi], k[:, :keys].astype(q.dtype),
                            preferred_element_type=jnp.float32)
        probs = jax.nn.softmax(scores * scale + bias, axis=-1)
        outs.append(jnp.einsum("bhqk,bkhv->bqhv", probs, value[:, :keys].astype(dtype),
                               preferred_element_type=jnp.float32))
    return jnp.concatenate(outs, axis=1) if len(outs) > 1 else outs[0]
