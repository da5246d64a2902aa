"""The MLA latent KV cache.

Per layer and token MLA needs only the normalised KV latent `c_kv` (`kv_lora_rank` values) and
the one rotary key `k_rope` shared by all heads (`qk_rope_head_dim` values); per-head keys and
values are functions of them (`kv_b_proj`). So that is all the cache holds: for DeepSeek-V3,
512 + 64 = 576 values per token and layer instead of 128 heads x (192 + 128) = 40,960.

Layout: one entry per layer stack of the model, like its variables::

    {"dense_layers": {"latent": [dense_layers, slots, max_len, kv_lora_rank],
                      "k_rope": [dense_layers, slots, max_len, qk_rope_head_dim]},
     "moe_layers":   {... [moe_layers, slots, max_len, ...]},
     "mtp_0_layer":  {... [1, slots, max_len, ...]}, ...}       # MTP draft modules, if used

Index `[layer, slot, p]` holds the token at position p of the sequence in `slot`. Nothing marks
which positions are valid: the attention mask admits keys at positions <= the query's, and a
sequence writes every position before it reads it, so stale values past a sequence's length
(an earlier occupant of the slot, rejected draft tokens, prompt padding) are never read.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.sharding import NamedSharding

from c2jax import sharding
from c2jax.model.config import num_moe_layers

#: Logical axes of every cache array: batch sharded like activations, latent dims replicated
#: (the latent is shared by all heads, so tensor parallelism cannot split it).
CACHE_AXES = ("layers", "activation_batch", None, "activation_kv")


def stack_sizes(cfg, mtp_depth: int = 0) -> dict[str, int]:
    """Layers per cache entry: the model's stacks, then `mtp_depth` single-layer MTP modules."""
    sizes = {"dense_layers": cfg.first_k_dense_replace, "moe_layers": num_moe_layers(cfg)}
    sizes.update({f"mtp_{d}_layer": 1 for d in range(mtp_depth)})
    return {name: n for name, n in sizes.items() if n}


def init_cache(cfg, slots: int, max_len: int, mtp_depth: int = 0) -> dict:
    """A zero cache for `slots` sequences of up to `max_len` tokens, in the compute dtype."""
    dtype = jnp.dtype(cfg.dtype)
    return {name: {"latent": jnp.zeros((n, slots, max_len, cfg.kv_lora_rank), dtype),
                   "k_rope": jnp.zeros((n, slots, max_len, cfg.qk_rope_head_dim), dtype)}
            for name, n in stack_sizes(cfg, mtp_depth).items()}


def bytes_per_token(cfg, mtp_depth: int = 0) -> int:
    """Cache bytes one token occupies over all layers."""
    layers = sum(stack_sizes(cfg, mtp_depth).values())
    return layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * jnp.dtype(cfg.dtype).itemsize


def main_cache(cache: dict) -> dict:
    """The entries the main model reads (`apply(..., cache=)`)."""
    return {name: entry for name, entry in cache.items() if not name.startswith("mtp_")}


def insert_rows(cache: dict, rows: dict, slots):
    """Writes freshly prefilled rows into slots: rows `[layers, g, w, d]` (a cache over the
    first w positions of g sequences) go to `[:, slots, :w]`; a slot index >= the slot count
    (a padding row) is dropped."""
    def one(big, small):
        w = small.shape[2]
        return big.at[:, slots, :w].set(small.astype(big.dtype), mode="drop")
    return jax.tree.map(one, cache, {name: rows[name] for name in cache})


def constrain_cache(cache: dict) -> dict:
    """Pins the cache to its layout under the active mesh (a no-op without one)."""
    return jax.tree.map(lambda a: sharding.constrain(a, CACHE_AXES), cache)


def cache_shardings(cache: dict, mesh, rules) -> dict:
    """NamedShardings of every cache array on `mesh`."""
    return jax.tree.map(lambda a: NamedSharding(mesh, sharding.logical_to_spec(
        CACHE_AXES, rules, mesh, a.shape)), cache)
