"""The compiled steps of plain decoding: prefill new sequences into slots, and decode.

Both take the params as an argument (never captured), so a new params pytree of the same
shapes runs through the same executable: that is what makes in-flight weight swaps free. Both
donate the state, so the cache is updated in place. Shapes are fixed per call site by the
engine's buckets (rows and prompt length for prefill, the attention window for decode), and the
model config is a static (hashable) argument, so the compiled executables are shared by every
engine with the same config.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

from c2jax.model.transformer import apply
from c2jax.sampling.cache import init_cache, insert_rows, main_cache
from c2jax.sampling.sampling import sample
from c2jax.sampling.speculative import draft_tokens
from c2jax.sampling.state import advance, constrain_state, routing_of, set_rows
from c2jax.sampling.stopping import truncate_at_stops


@functools.partial(jax.jit, static_argnames=("cfg",), donate_argnames=("state",))
def prefill(variables, state, tokens, prompt_lengths, slots, rows, *, cfg):
    """Starts g new sequences: one pass over their prompts, the first token drawn.

    tokens int32 `[g, s]` (prompts, zero padded), prompt_lengths int32 `[g]`, slots int32 `[g]`
    (a slot index >= slots marks a padding row), rows: the new sequences' `seed` `[g, 2]`,
    `sampling`, `stop_ids` `[g, m]` and `remaining` (= max_new_tokens) `[g]`.
    Returns (state, (token `[g]`, logprob `[g]`, routing `[moe_layers, g, s, k]` of every prompt
    position, stopped `[g]`)).
    """
    g, s = tokens.shape
    depth = state["drafts"].shape[1] if "drafts" in state else 0
    positions = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (g, s))
    segment_ids = (positions < prompt_lengths[:, None]).astype(jnp.int32)
    # A fresh cache just long enough for the prompts; copied into the slots at the end.
    fresh = init_cache(cfg, g, s, depth)
    last = prompt_lengths - 1
    logits, aux = apply(variables, tokens, segment_ids, positions, cfg=cfg,
                        cache=main_cache(fresh), logits_at=last[:, None])
    first = jnp.zeros((g,), jnp.int32)
    token, logprob = sample(logits[:, 0], rows["sampling"], rows["seed"], first)
    kept, stopped = truncate_at_stops(token[:, None], jnp.ones((g,), jnp.int32),
                                      rows["stop_ids"], rows["remaining"])
    new_rows = dict(rows, lengths=prompt_lengths, last_token=token, active=~stopped,
                    remaining=rows["remaining"] - kept, generated=kept)
    cache_rows = dict(fresh, **aux["cache"])
    if depth:
        # ahead[i] = the token after position i: the prompt shifted by one, then the first
        # sampled token at the last prompt position.
        ahead = jnp.concatenate([tokens[:, 1:], jnp.zeros((g, 1 + depth), tokens.dtype)], axis=1)
        ahead = ahead.at[jnp.arange(g), last].set(token)
        mtp = {name: entry for name, entry in fresh.items() if name.startswith("mtp_")}
        drafts, dists, mtp = draft_tokens(variables, aux["hidden"], ahead, segment_ids,
                                          positions, mtp, last, rows["sampling"], rows["seed"],
                                          kept, cfg=cfg, window=s)
        cache_rows.update(mtp)
        new_rows.update(drafts=drafts, draft_logprobs=dists)
    state = set_rows(state, slots, new_rows)
    state["cache"] = insert_rows(state["cache"], cache_rows, slots)
    return constrain_state(state), (token, logprob, routing_of(aux, cfg, g, s), stopped)


@functools.partial(jax.jit, static_argnames=("cfg", "steps", "window"), donate_argnames=("state",))
def decode_steps(variables, state, keep, *, cfg, steps: int, window: int):
    """`steps` decode steps for every slot, attending over the first `window` cache positions.
    keep bool `[slots]` retires slots first (a stop string the host found).

    Returns (state, outputs) with outputs stacked over steps: tokens int32 `[steps, slots]`,
    logprobs `[steps, slots]`, routing int32 `[steps, moe_layers, slots, k]`, emitted bool
    `[steps, slots]`, and the final `active` `[slots]`.
    """
    def one_step(state, _):
        active = state["active"]
        b = active.shape[0]
        logits, aux = apply(variables, state["last_token"][:, None],
                            active[:, None].astype(jnp.int32), state["lengths"][:, None],
                            cfg=cfg, cache=main_cache(state["cache"]), cache_window=window)
        token, logprob = sample(logits[:, 0], state["sampling"], state["seed"],
                                state["generated"])
        kept, stopped = truncate_at_stops(token[:, None], jnp.ones((b,), jnp.int32),
                                          state["stop_ids"], state["remaining"])
        cache = dict(state["cache"], **aux["cache"])
        new = advance(dict(state, cache=cache), token[:, None], kept, stopped)
        routing = routing_of(aux, cfg, b, 1)[:, :, 0]
        return constrain_state(new), (token, logprob, routing, active)

    state = dict(state, active=state["active"] & keep)
    state, (tokens, logprobs, routing, emitted) = jax.lax.scan(one_step, state, None,
                                                               length=steps)
    return state, (tokens, logprobs, routing, emitted, state["active"])
