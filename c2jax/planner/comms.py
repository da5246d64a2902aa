"""Bytes each device sends per optimizer step, per collective, for a mesh layout.

Ring algorithms over an axis of n devices move, per device: all-gather and reduce-scatter
(n-1)/n of the full tensor, all-reduce 2(n-1)/n, all-to-all (n-1)/n of the local buffer. What
each collective carries in our step (see docs/sharding.md):

- `fsdp_all_gather`: the weights, over the axes that shard their `embed` dim (fsdp, and
  context / expert where the rules put them), in the compute dtype, before the forward and
  again for the backward (remat or not, XLA re-gathers), per microbatch;
- `fsdp_reduce_scatter`: the float32 gradients back to their shards, per microbatch;
- `dp_all_reduce`: the gradients' all-reduce over the `data` axis, once per step;
- `tp_all_reduce`: the partial sums of the attention output and the MLP output over `tensor`,
  `[tokens, embed]` each, in the forward, its recompute (remat "full") and the backward;
- `ep_all_to_all`: the capacity buffers `[slots * tokens, embed]` to the experts' devices and
  back, forward, recompute and backward;
- `cp_all_gather`: the MLA latents `[tokens, kv_lora_rank + qk_rope_head_dim]` over `context`
  (forward, recompute) and their gradients' reduce-scatter (backward).
Small collectives (loss sums, router loads, norms) are left out.
"""
from __future__ import annotations

import jax.numpy as jnp

from c2jax.planner import memory

COLLECTIVES = ("fsdp_all_gather", "fsdp_reduce_scatter", "dp_all_reduce", "tp_all_reduce",
               "ep_all_to_all", "cp_all_gather")
#: The mesh axis whose links each collective runs over (FSDP: the innermost FSDP axis used).
COLLECTIVE_AXIS = {"dp_all_reduce": "data", "tp_all_reduce": "tensor",
                   "ep_all_to_all": "expert", "cp_all_gather": "context"}


def _ring(n: int) -> float:
    return (n - 1) / n if n > 1 else 0.0


def bytes_per_step(workload, sizes: dict[str, int]) -> dict[str, float]:
    """Bytes sent per device per optimizer step, by collective (`COLLECTIVES`)."""
    c = workload.model
    act = jnp.dtype(c.dtype).itemsize
    grad = jnp.dtype(c.param_dtype).itemsize
    leaves = memory.leaves_on(c, workload.rules, sizes)
    micro = workload.microbatches
    gather = sum((leaf.gathered_elems - leaf.shard_elems) for leaf in leaves)
    shards = sum(leaf.shard_elems for leaf in leaves)
    passes = 2  # forward, backward
    rows, positions = memory.local_tokens(workload.rows, workload.seq_len, sizes, workload.rules)
    tokens = rows * positions
    layers = c.num_hidden_layers + c.num_mtp_layers
    moe_layers = c.num_hidden_layers - c.first_k_dense_replace + c.num_mtp_layers
    recompute = 1 if c.remat_policy == "full" else 0
    t, e, cp, d = (sizes.get(a, 1) for a in ("tensor", "expert", "context", "data"))
    # Dense one-hot dispatch computes every expert where the token is: nothing is sent.
    slots = 0 if c.moe_dispatch == "dense" else memory.expert_slots_per_token(c)
    latent = c.kv_lora_rank + c.qk_rope_head_dim
    return {
        "fsdp_all_gather": micro * passes * gather * act,
        "fsdp_reduce_scatter": micro * gather * grad,
        "dp_all_reduce": 2 * _ring(d) * shards * grad,
        "tp_all_reduce": micro * (2 + recompute) * layers * 2 * 2 * _ring(t)
                         * tokens * c.hidden_size * act,
        "ep_all_to_all": micro * (2 + recompute) * moe_layers * 2 * _ring(e)
                         * slots * tokens * c.hidden_size * act,
        "cp_all_gather": micro * (2 + recompute) * layers * (cp - 1)
                         * tokens * latent * act,
    }
