"""Device meshes, the logical-axis rules table, and helpers that place arrays on the mesh.

Every array dimension in the model has a logical name (`embed`, `heads`, `exp`, ...; activations
use `activation_*`). One flat table maps each name to mesh axes, tried in order (MaxText's
pattern, `configs/base.yml` there). A mesh axis of size 1, one already used by an earlier
dimension of the same array, or one that does not divide the dimension is skipped, so the same
table serves every layout from 1 to N devices.

Mesh axes: `data` (pure data parallel), `fsdp` (data parallel with sharded weights), `context`
(sequence sharding inside attention), `expert` (expert parallel in MoE layers; outside them it
shards the batch, so EP is decoupled from TP), `tensor` (heads / MLP width / vocab).
"""
from __future__ import annotations

import contextlib
import contextvars
import math
from typing import Iterator, Sequence

import jax
import ml_collections
import numpy as np
from flax import linen as nn
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES = ("data", "fsdp", "context", "expert", "tensor")

#: (logical name, mesh axes in priority order). Weights first, then activations.
DEFAULT_RULES = (
    # weights
    ("layers", ()),                                  # the stacked-layer axis of nn.scan
    ("vocab", ("tensor",)),
    ("embed", ("fsdp", "context", "expert")),        # FSDP: shard the model dim of every matrix
    ("heads", ("tensor",)),
    ("q_lora", ()),
    ("kv_lora", ()),
    ("head_dim", ()),
    ("mlp", ("tensor",)),
    ("exp", ("expert",)),                            # expert weights: EP on the expert axis only
    ("norm", ()),
    # activations
    ("activation_batch", ("data", "fsdp", "expert")),
    ("activation_length", ("context",)),
    ("activation_embed", ()),
    ("activation_heads", ("tensor",)),
    ("activation_mlp", ("tensor",)),
    ("activation_vocab", ("tensor",)),
    ("activation_kv", ()),
)


def mesh_config(**overrides) -> ml_collections.ConfigDict:
    """Mesh sizes (one may be -1: "all remaining devices") and the logical-axis rules."""
    c = ml_collections.ConfigDict()
    c.data = 1
    c.fsdp = -1
    c.context = 1
    c.expert = 1
    c.tensor = 1
    c.rules = tuple((name, tuple(axes)) for name, axes in DEFAULT_RULES)
    c.lock()
    c.update(overrides)
    return c


def mesh_shape(mesh_cfg, num_devices: int) -> dict[str, int]:
    """Resolves the -1 entry of the mesh config; errors name the axis and the device count."""
    sizes = {a: int(mesh_cfg[a]) for a in MESH_AXES}
    fill = [a for a, s in sizes.items() if s == -1]
    if len(fill) > 1:
        raise ValueError(f"mesh axes {fill} are all -1; at most one axis may fill the rest")
    for a, s in sizes.items():
        if s == 0 or s < -1:
            raise ValueError(f"mesh axis '{a}' = {s} is invalid: use a positive size or -1")
    known = math.prod(s for s in sizes.values() if s != -1)
    if fill:
        if num_devices % known:
            raise ValueError(f"mesh axes {sizes} need a multiple of {known} devices, "
                             f"have {num_devices}")
        sizes[fill[0]] = num_devices // known
    if math.prod(sizes.values()) != num_devices:
        raise ValueError(f"mesh {sizes} has {math.prod(sizes.values())} devices, "
                         f"but {num_devices} are available")
    return sizes


def make_mesh(mesh_cfg, devices: Sequence[jax.Device] | None = None) -> Mesh:
    """Builds the 5-axis mesh (GSPMD auto axes) over `devices` (default: all devices)."""
    devices = list(jax.devices() if devices is None else devices)
    sizes = mesh_shape(mesh_cfg, len(devices))
    grid = np.asarray(devices, dtype=object).reshape([sizes[a] for a in MESH_AXES])
    return Mesh(grid, MESH_AXES, axis_types=(AxisType.Auto,) * len(MESH_AXES))


# --------------------------------------------------------------------------------------------
# Logical names -> PartitionSpec

_ACTIVE_RULES: contextvars.ContextVar[tuple | None] = contextvars.ContextVar(
    "c2jax_logical_rules", default=None)


def _axis_sizes(mesh) -> dict[str, int]:
    return dict(zip(mesh.axis_names, mesh.axis_sizes)) if hasattr(mesh, "axis_sizes") \
        else dict(mesh.shape)


def logical_to_spec(names: Sequence[str | None], rules, mesh,
                    shape: Sequence[int] | None = None) -> PartitionSpec:
    """Maps logical dim names to a PartitionSpec on `mesh` using `rules`.

    Mesh axes of size 1, already used by an earlier dim, or not dividing the dim are skipped,
    so small arrays simply stay replicated.
    """
    table: dict[str, tuple[str, ...]] = {}
    for name, axes in rules:
        table.setdefault(name, tuple(axes) if not isinstance(axes, str) else (axes,))
    sizes = _axis_sizes(mesh)
    used: set[str] = set()
    out = []
    for i, name in enumerate(names):
        if name is None:
            out.append(None)
            continue
        if name not in table:
            raise ValueError(f"logical axis '{name}' has no entry in the sharding rules; "
                             f"known names: {sorted(table)}")
        chosen, prod = [], 1
        for axis in table[name]:
            size = sizes.get(axis, 1)
            if size == 1 or axis in used:
                continue
            if shape is not None and shape[i] % (prod * size):
                continue
            chosen.append(axis)
            prod *= size
        used.update(chosen)
        out.append(None if not chosen else chosen[0] if len(chosen) == 1 else tuple(chosen))
    return PartitionSpec(*out)


@contextlib.contextmanager
def activate(mesh: Mesh, rules) -> Iterator[Mesh]:
    """Makes `mesh` the active mesh and `rules` the active rules for activation constraints."""
    token = _ACTIVE_RULES.set(tuple((n, tuple(a)) for n, a in rules))
    try:
        with jax.set_mesh(mesh):
            yield mesh
    finally:
        _ACTIVE_RULES.reset(token)


def active_mesh():
    """The abstract mesh set by `activate` (or jax.set_mesh), or None when there is none."""
    mesh = jax.sharding.get_abstract_mesh()
    if mesh is None or mesh.empty:
        return None
    return mesh


def activation_spec(names: Sequence[str | None], shape: Sequence[int]) -> PartitionSpec | None:
    """The PartitionSpec the active rules give an array of `shape`; None without a mesh."""
    mesh, rules = active_mesh(), _ACTIVE_RULES.get()
    if mesh is None or rules is None:
        return None
    return logical_to_spec(names, rules, mesh, shape)


def constrain(x: jax.Array, names: Sequence[str | None]) -> jax.Array:
    """Sharding constraint by logical names; a no-op without an active mesh and rules."""
    spec = activation_spec(names, x.shape)
    return x if spec is None else jax.lax.with_sharding_constraint(x, spec)


def mesh_axis_size(name: str) -> int:
    """Size of a mesh axis in the active mesh (1 without a mesh)."""
    mesh = active_mesh()
    return 1 if mesh is None else _axis_sizes(mesh).get(name, 1)


# --------------------------------------------------------------------------------------------
# Parameters

def logical_specs(boxed_tree):
    """PartitionSpecs of logical names for a tree of `nn.Partitioned` boxes (from eval_shape)."""
    return nn.get_partition_spec(boxed_tree)


def param_shardings(boxed_abstract, mesh: Mesh, rules):
    """NamedShardings for every leaf of an abstract (eval_shape'd, boxed) variable tree."""
    specs = logical_specs(boxed_abstract)
    shapes = nn.unbox(boxed_abstract)

    def one(spec, leaf):
        names = tuple(spec) if spec is not None else (None,) * len(leaf.shape)
        return NamedSharding(mesh, logical_to_spec(names, rules, mesh, leaf.shape))

    return jax.tree.map(one, specs, shapes,
                        is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)


def validate_layout(model_cfg, mesh_sizes: dict[str, int]) -> None:
    """Raises ValueError naming the model field that the mesh cannot split evenly."""
    tensor, expert = mesh_sizes.get("tensor", 1), mesh_sizes.get("expert", 1)
    checks = [("num_attention_heads", tensor, "tensor"),
              ("intermediate_size", tensor, "tensor")]
    if model_cfg.n_routed_experts:
        checks += [("n_routed_experts", expert, "expert"),
                   ("moe_intermediate_size", tensor, "tensor")]
    for field, size, axis in checks:
        if model_cfg[field] % size:
            raise ValueError(f"model config field '{field}' = {model_cfg[field]} is not divisible "
                             f"by the mesh's {axis} axis ({size})")
