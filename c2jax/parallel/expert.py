"""Expert parallelism: run the MoE dispatch per shard with `jax.shard_map`.

Under a mesh, tokens are flattened and split over every non-`tensor` axis
(`data, fsdp, context, expert`), so capacities are per shard and no token moves except through
the explicit `all_to_all` over `expert` (when that axis is > 1). Expert weights enter sharded
`[experts/expert, embed, mlp/tensor]`: expert parallelism on `expert`, tensor parallelism on the
expert width, so EP and TP are independent axes; the partial sums over `tensor` are added with
one `psum` on the combined output. XLA gathers any FSDP sharding of the weights on the way in.

`jax.lax.ragged_all_to_all` would avoid capacity padding, but XLA:CPU cannot run it, so the
portable transport is the fixed-capacity `all_to_all`.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.sharding import PartitionSpec as P

from c2jax.model import dispatch as backends
from c2jax.sharding import active_mesh, activation_spec

NON_TENSOR_AXES = ("data", "fsdp", "expert", "context")


def _mesh_sizes(mesh) -> dict[str, int]:
    return dict(zip(mesh.axis_names, mesh.axis_sizes))


def _token_axes(mesh, batch_shape) -> tuple[str, ...]:
    """Mesh axes that split the flattened tokens: first those the activations of shape
    `batch_shape` = (batch, seq) are already sharded on, in flattening order (so the reshape to
    `[tokens]` moves nothing), then every other non-tensor axis (plain local slicing)."""
    sizes = _mesh_sizes(mesh)
    spec = activation_spec(("activation_batch", "activation_length"), batch_shape) or P()
    axes: list[str] = []
    for dim in spec:
        if dim is not None:
            axes.extend((dim,) if isinstance(dim, str) else dim)
    axes += [a for a in NON_TENSOR_AXES if a not in axes]
    return tuple(a for a in axes if sizes.get(a, 1) > 1)


def run_experts(x, expert_ids, weights, valid, gate, up, down, cfg, batch_shape):
    """Routes tokens through the configured backend.

    x `[tokens, embed]`, expert_ids/weights `[tokens, k]`, valid bool `[tokens]`;
    batch_shape = (batch, seq) with batch * seq = tokens.
    Returns (y `[tokens, embed]`, dropped slots int32 scalar, summed over all shards).
    """
    backend = cfg.moe_dispatch
    weights = weights * valid[:, None].astype(weights.dtype)
    if backend == "dense":
        return backends.dense(x, expert_ids, weights, gate, up, down, cfg)
    mesh = active_mesh()
    if mesh is None and expert_ids.size < gate.shape[0]:
        return backends.gathered(x, expert_ids, weights, gate, up, down, cfg)
    tokens, k = expert_ids.shape
    if (mesh is None and backend == "capacity" and cfg.capacity_tiers
            and backends.capacity_per_expert(tokens, k, gate.shape[0], cfg.capacity_factor)
            >= tokens):
        return backends.tiered(x, expert_ids, weights, valid, gate, up, down, cfg)
    if mesh is None:
        return _local(backend, cfg, None, 1, None, x, expert_ids, weights, valid, gate, up, down)

    sizes = _mesh_sizes(mesh)
    token_axes = _token_axes(mesh, batch_shape)
    shards = math.prod(sizes[a] for a in token_axes)
    expert_shards = sizes.get("expert", 1)
    tensor_shards = sizes.get("tensor", 1)
    num_experts = gate.shape[0]
    if num_experts % expert_shards:
        raise ValueError(f"n_routed_experts={num_experts} is not divisible by the mesh's expert "
                         f"axis ({expert_shards})")
    if backend == "ragged" and expert_shards > 1:
        raise ValueError("moe_dispatch='ragged' cannot run with mesh expert > 1: the ragged "
                         "exchange (ragged_all_to_all) does not exist on XLA:CPU; use "
                         "moe_dispatch='capacity' for expert parallelism")
    # Pad the token count to a multiple of the shard count; padded tokens are never routed.
    tokens = x.shape[0]
    padded = -(-tokens // shards) * shards
    if padded != tokens:
        extra = padded - tokens
        x = jnp.pad(x, ((0, extra), (0, 0)))
        expert_ids = jnp.pad(expert_ids, ((0, extra), (0, 0)))
        weights = jnp.pad(weights, ((0, extra), (0, 0)))
        valid = jnp.pad(valid, (0, extra))

    tok = P(token_axes or None)
    tok2 = P(token_axes or None, None)
    exp_axis = "expert" if expert_shards > 1 else None
    tp_axis = "tensor" if tensor_shards > 1 else None
    w_in = P(exp_axis, None, tp_axis)
    w_out = P(exp_axis, tp_axis, None)
    body = functools.partial(_local, backend, cfg, exp_axis, expert_shards, tp_axis)
    body = functools.partial(_sum_dropped, body, token_axes)
    y, dropped = jax.shard_map(
        body, mesh=mesh,
        in_specs=(tok2, tok2, tok2, tok, w_in, w_in, w_out),
        out_specs=(tok2, P()),
    )(x, expert_ids, weights, valid, gate, up, down)
    return y[:tokens], dropped


def _sum_dropped(body, token_axes, *args):
    y, dropped = body(*args)
    if token_axes:
        dropped = jax.lax.psum(dropped, token_axes)
    return y, dropped


def _local(backend, cfg, expert_axis, expert_shards, tensor_axis,
           x, expert_ids, weights, valid, gate, up, down):
    """One shard's dispatch; partial sums over the `tensor` axis are added at the end."""
    if backend == "capacity":
        y, dropped = backends.capacity(
            x, expert_ids, weights, valid, gate, up, down, cfg,
            num_experts=gate.shape[0] * expert_shards, expert_axis=expert_axis,
            expert_shards=expert_shards)
    elif backend == "ragged":
        y, dropped = backends.ragged(x, expert_ids, weights, gate, up, down, cfg)
    else:
        raise ValueError(f"unknown moe_dispatch {backend!r}")
    if tensor_axis is not None:
        y = jax.lax.psum(y, tensor_axis)
    return y, dropped
