"""The decode state: everything the compiled steps carry from one call to the next.

A dict of device arrays, one row per slot (`[slots]` unless noted):

    cache           the latent cache (`cache.py`), slots x max_len positions
    lengths         int32  tokens of the sequence already in the cache (= position of last_token)
    last_token      int32  the newest sampled token, the next step's input
    active          bool   the slot holds a running sequence
    remaining       int32  tokens the sequence may still emit
    generated       int32  tokens emitted so far (the index of the next draw, see sampling.py)
    seed            uint32 `[slots, 2]`: key data the sequence's draws derive from
    stop_ids        int32  `[slots, max_stop_tokens]` (NO_STOP padded)
    sampling        SamplingParams, `[slots]` each
    drafts          int32  `[slots, depth]` MTP draft tokens for the next round (speculative)
    draft_logprobs  float32 `[slots, depth, vocab]` the distributions they were drawn from

Rows of free slots hold leftovers; `active` is False there and nothing they compute is kept.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding

from c2jax import sharding
from c2jax.model.config import num_moe_layers
from c2jax.sampling.cache import CACHE_AXES, init_cache
from c2jax.sampling.sampling import SamplingParams


def init_state(cfg, slots: int, max_len: int, max_stop_tokens: int, depth: int = 0) -> dict:
    """An all-free state; `depth` > 0 adds the MTP caches and draft buffers."""
    state = {
        "cache": init_cache(cfg, slots, max_len, depth),
        "lengths": jnp.zeros((slots,), jnp.int32),
        "last_token": jnp.zeros((slots,), jnp.int32),
        "active": jnp.zeros((slots,), bool),
        "remaining": jnp.zeros((slots,), jnp.int32),
        "generated": jnp.zeros((slots,), jnp.int32),
        "seed": jnp.zeros((slots, 2), jnp.uint32),
        "stop_ids": jnp.full((slots, max_stop_tokens), -1, jnp.int32),
        "sampling": SamplingParams.full(slots),
    }
    if depth:
        state["drafts"] = jnp.zeros((slots, depth), jnp.int32)
        state["draft_logprobs"] = jnp.zeros((slots, depth, cfg.vocab_size), jnp.float32)
    return state


def _axes(path, leaf) -> tuple:
    if path[0].key == "cache":
        return CACHE_AXES
    return ("activation_batch",) + (None,) * (leaf.ndim - 1)


def constrain_state(state: dict) -> dict:
    """Pins every array to its layout under the active mesh (a no-op without one), so each
    compiled step returns the state laid out exactly as it came in (no recompilation)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, a: sharding.constrain(a, _axes(path, a)), state)


def state_shardings(state: dict, mesh, rules) -> dict:
    """NamedShardings placing `state` on `mesh` the way `constrain_state` pins it."""
    return jax.tree_util.tree_map_with_path(
        lambda path, a: NamedSharding(mesh, sharding.logical_to_spec(_axes(path, a), rules, mesh,
                                                                     a.shape)), state)


def set_rows(state: dict, slots, rows: dict) -> dict:
    """state with `rows[name]` `[g, ...]` written at `slots` `[g]` for every per-slot entry
    named in rows (slot indices past the end, from padding rows, are dropped)."""
    out = dict(state)
    for name, value in rows.items():
        out[name] = jax.tree.map(lambda a, v: a.at[slots].set(v.astype(a.dtype), mode="drop"),
                                 state[name], value)
    return out


def advance(state: dict, tokens, kept, stopped) -> dict:
    """Moves every active row past its `kept` new tokens: tokens int `[slots, n]`, kept int
    `[slots]` (>= 1 for active rows), stopped bool `[slots]`."""
    active = state["active"]
    kept = jnp.where(active, kept, 0)
    last = jnp.take_along_axis(tokens, jnp.maximum(kept - 1, 0)[:, None], axis=1)[:, 0]
    return dict(state,
                lengths=state["lengths"] + kept,
                last_token=jnp.where(active, last, state["last_token"]),
                remaining=state["remaining"] - kept,
                generated=state["generated"] + kept,
                active=active & ~stopped)


def routing_of(aux: dict, cfg, batch: int, seq: int):
    """The experts each new token chose, int32 `[moe_layers, batch, seq, k]` (empty when the
    model has no MoE layers)."""
    if num_moe_layers(cfg):
        return aux["routing"]
    return jnp.zeros((0, batch, seq, cfg.num_experts_per_tok), jnp.int32)
