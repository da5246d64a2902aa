"""Speculative decoding with the MTP modules as the draft model (DeepSeek-V3 sec. 2.2 / 5.4.3).

A round, for a slot whose cache holds L tokens, with its newest token t_L and the drafts
d_1..d_D drawn from the MTP distributions q_1..q_D:

1. verify: one main-model pass over [t_L, d_1, ..., d_D] at positions L..L+D gives the target
   distributions p_0..p_D (p_j predicts position L+j+1) and writes their latents.
2. accept (Leviathan et al. 2023, Chen et al. 2023): d_j is kept with probability
   min(1, p_{j-1}(d_j) / q_j(d_j)), up to the first rejection; the next token is drawn from
   norm(max(0, p_a - q_a)) after a rejection at a, or from p_D when every draft was kept. Each
   emitted token is then distributed exactly as under plain sampling from p. At temperature 0,
   p and q are point masses, so the round emits exactly the greedy tokens.
3. draft: MTP module m reads (h^{m-1}_i, t_{i+m+1}) at positions L..L+D (h^{-1} = the main
   model's hidden states from step 1; true tokens where known, this round's drafts beyond) and
   writes its own latent cache; its output at the last kept position gives q_{m+1} and draws
   the next round's d_{m+1}.

A round emits 1..D+1 tokens for one main-model pass plus D single-layer MTP passes. Drafts and
q are whatever the MTP modules produced, so stale draft caches or params swapped between rounds
cost acceptance, never correctness.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from c2jax.model.transformer import apply, apply_mtp
from c2jax.sampling.cache import main_cache
from c2jax.sampling.sampling import draw, sampling_logprobs, token_key, uniforms
from c2jax.sampling.state import advance, constrain_state, routing_of
from c2jax.sampling.stopping import truncate_at_stops

# Draw streams (see sampling.token_key): one per kind of draw, so none share a key.
CORRECTION_STREAM = 0
ACCEPT_STREAM = 1
DRAFT_STREAM = 2


def accept_drafts(target_logprobs, draft_logprobs, drafts, accept_uniforms, correction_uniforms):
    """The speculative-sampling rule.

    target_logprobs float32 `[b, D+1, vocab]` (p_0..p_D), draft_logprobs `[b, D, vocab]`
    (q_1..q_D), drafts int `[b, D]`, accept_uniforms `[b, D]`, correction_uniforms `[b]`.
    Returns (tokens int32 `[b, D+1]`: the kept drafts then the drawn token, zeros after;
    count int32 `[b]` in 1..D+1; logprobs float32 `[b, D+1]`: each token's log p).
    """
    b, depth = drafts.shape
    p_draft = jnp.take_along_axis(target_logprobs[:, :depth], drafts[..., None], axis=-1)[..., 0]
    q_draft = jnp.take_along_axis(draft_logprobs, drafts[..., None], axis=-1)[..., 0]
    kept = accept_uniforms < jnp.exp(p_draft - q_draft)         # u < min(1, p/q), as u < 1
    accepted = jnp.sum(jnp.cumprod(kept.astype(jnp.int32), axis=1), axis=1)         # [b]
    p_next = jnp.take_along_axis(target_logprobs, accepted[:, None, None], axis=1)[:, 0]
    # After the last draft there is no q: the "residual" is p itself (q = 0).
    q_padded = jnp.concatenate(
        [draft_logprobs, jnp.full((b, 1, draft_logprobs.shape[-1]), -jnp.inf)], axis=1)
    q_next = jnp.take_along_axis(q_padded, accepted[:, None, None], axis=1)[:, 0]
    residual = jnp.maximum(jnp.exp(p_next) - jnp.exp(q_next), 0.0)
    mass = jnp.sum(residual, axis=-1, keepdims=True)
    # Mass 0 only when p == q up to rounding, where a rejection cannot happen; p is then exact.
    residual_logprobs = jnp.where(mass > 0, jnp.log(residual / jnp.where(mass > 0, mass, 1.0)),
                                  p_next)
    correction = draw(residual_logprobs, correction_uniforms)
    index = jnp.arange(depth + 1)
    padded_drafts = jnp.concatenate([drafts, jnp.zeros((b, 1), drafts.dtype)], axis=1)
    tokens = jnp.where(index < accepted[:, None], padded_drafts,
                       jnp.where(index == accepted[:, None], correction[:, None], 0))
    logprobs = jnp.take_along_axis(target_logprobs, tokens[..., None], axis=-1)[..., 0]
    return tokens.astype(jnp.int32), (accepted + 1).astype(jnp.int32), logprobs


def draft_tokens(variables, hidden, ahead, segment_ids, positions, cache, last, sampling, seed,
                 token_index, *, cfg, window: int):
    """Runs the MTP modules over s positions and draws one draft per module.

    hidden `[b, s, embed]`: the main model's last hidden states there; ahead int `[b, s + D]`:
    ahead[i] is the token after position i (the true one where known); cache: the
    {"mtp_m_layer"} entries; last int `[b]`: the position index (into s) whose next tokens
    are drafted; token_index int `[b]`: the index of the first drafted token (for keys).
    Returns (drafts int32 `[b, D]`, their distributions float32 `[b, D, vocab]`, the cache).
    """
    b, s = segment_ids.shape
    rows = jnp.arange(b)
    drafts, dists, new_cache = [], [], {}
    for m in range(len(cache)):
        name = f"mtp_{m}_layer"
        logits, hidden, new_cache[name], _ = apply_mtp(
            variables, hidden, ahead[:, m:m + s], segment_ids, positions, cfg=cfg, depth=m,
            cache=cache[name], logits_at=last[:, None], cache_window=window)
        dist = sampling_logprobs(logits[:, 0], sampling)
        draft = draw(dist, uniforms(token_key(seed, token_index + m, DRAFT_STREAM)))
        # Module m+1 at the last position reads the token after this draft's position.
        ahead = ahead.at[rows, last + 1 + m].set(draft)
        drafts.append(draft)
        dists.append(dist)
    return jnp.stack(drafts, axis=1), jnp.stack(dists, axis=1), new_cache


@functools.partial(jax.jit, static_argnames=("cfg", "steps", "window"), donate_argnames=("state",))
def speculative_steps(variables, state, keep, *, cfg, steps: int, window: int):
    """`steps` speculative rounds for every slot. keep bool `[slots]` retires slots first.

    Returns (state, outputs) with outputs stacked over rounds: tokens int32
    `[steps, slots, D+1]`, logprobs `[steps, slots, D+1]`, routing int32
    `[steps, moe_layers, slots, D+1, k]`, emitted bool `[steps, slots, D+1]` (which tokens
    count), and the final `active` `[slots]`.
    """
    depth = state["drafts"].shape[1]
    offsets = jnp.arange(depth + 1, dtype=jnp.int32)
    mtp_names = [f"mtp_{m}_layer" for m in range(depth)]

    def one_round(state, _):
        active = state["active"]
        b = active.shape[0]
        inputs = jnp.concatenate([state["last_token"][:, None], state["drafts"]], axis=1)
        positions = state["lengths"][:, None] + offsets
        segment_ids = jnp.broadcast_to(active[:, None], inputs.shape).astype(jnp.int32)
        logits, aux = apply(variables, inputs, segment_ids, positions, cfg=cfg,
                            cache=main_cache(state["cache"]), cache_window=window)
        target = sampling_logprobs(logits, state["sampling"])
        generated, seed = state["generated"], state["seed"]
        accept_u = jnp.stack([uniforms(token_key(seed, generated + j, ACCEPT_STREAM))
                              for j in range(depth)], axis=1)
        # `generated` grows every round, so (generated, stream) never repeats for a sequence.
        correction_u = uniforms(token_key(seed, generated, CORRECTION_STREAM))
        tokens, count, logprobs = accept_drafts(target, state["draft_logprobs"], state["drafts"],
                                                accept_u, correction_u)
        kept, stopped = truncate_at_stops(tokens, count, state["stop_ids"], state["remaining"])
        kept = jnp.where(active, kept, 0)
        emitted = offsets[None, :] < kept[:, None]
        cache = dict(state["cache"], **aux["cache"])
        new = advance(dict(state, cache=cache), tokens, kept, stopped)
        ahead = jnp.concatenate([jnp.where(emitted, tokens, 0),
                                 jnp.zeros((b, depth), jnp.int32)], axis=1)
        drafts, dists, mtp_cache = draft_tokens(
            variables, aux["hidden"], ahead, emitted.astype(jnp.int32), positions,
            {name: cache[name] for name in mtp_names}, jnp.maximum(kept - 1, 0),
            state["sampling"], seed, new["generated"], cfg=cfg, window=window)
        new = dict(new, drafts=drafts, draft_logprobs=dists, cache=dict(cache, **mtp_cache))
        routing = routing_of(aux, cfg, b, depth + 1)
        return constrain_state(new), (tokens, logprobs, routing, emitted)

    state = dict(state, active=state["active"] & keep)
    state, (tokens, logprobs, routing, emitted) = jax.lax.scan(one_round, state, None,
                                                               length=steps)
    return state, (tokens, logprobs, routing, emitted, state["active"])
