"""Per-device memory of one training step, from the config and a mesh layout, without devices.

    per_device_memory(workload, sizes) -> MemoryEstimate (bytes per device, by term)

**State** (exact): every variable of `abstract_variables(model)` is sharded by the same
logical-axis rules the run uses (`c2jax.sharding.logical_to_spec` on an abstract mesh of
`sizes`), so params, the two Adam moments (the parameter dtype), the float32 gradients and,
for the RL learner, the gradient accumulator of its microbatch scan are each summed over the
real per-device shard shapes, the replicated small leaves included.

**Working set** (modelled): what lives during the backward pass of one layer on top of the
state, counted in the buffers XLA's buffer assignment shows for our step
(`--xla_dump_to`, `*buffer-assignment.txt`):
- the layer's weights gathered over the FSDP axes (the dims named `embed`; still sharded on
  `tensor` / `expert`), `WEIGHT_COPIES` copies in the compute dtype plus their float32
  gradient before the reduce-scatter; the same for the embedding table and the LM head;
- activations: with `remat_policy="full"` each layer keeps its input `[tokens, embed]` for the
  backward pass and one layer at a time is recomputed; with `"none"` every layer keeps all of
  its intermediates (`layer_bytes_per_token`); either way the layer being differentiated holds
  its intermediates and their gradients (`ACTIVATION_COPIES`);
- the logits and their gradient in float32, `[tokens, vocab / tensor]` (`LOGIT_COPIES`).
The multiplicities were read off XLA:CPU's buffer assignment for the `small` preset and are
checked against `compiled.memory_analysis()` (arguments + temporaries) on 8 fake CPU devices
over several layouts in `tests/planner/test_memory.py` (within 15%). XLA:CPU computes in
float32 whatever the compute dtype, so the check runs float32 models; on GPU the bf16 working
set is half of that, which the estimate assumes.
"""
from __future__ import annotations

import dataclasses
import functools
import json
import math

import jax
import jax.numpy as jnp
import ml_collections
from flax import linen as nn
from jax.sharding import AbstractMesh

from c2jax import sharding
from c2jax.model.config import qk_head_dim
from c2jax.model.transformer import abstract_variables

#: Compute-dtype copies of a gathered layer weight alive at the peak (besides its float32
#: gradient before the reduce-scatter).
WEIGHT_COPIES = 1
#: Copies of a layer's intermediates (values and gradients) while it is differentiated.
ACTIVATION_COPIES = 1.5
#: `[tokens, embed]` vectors each remat'd layer keeps per token for its backward pass.
SAVED_VECTORS = 4
#: Without remat a layer keeps more than its forward outputs (XLA saves pre- and post-
#: activation values and the routing intermediates): its intermediates count this many times.
NO_REMAT_SAVED_COPIES = 1.7
#: float32 `[tokens, vocab]` buffers alive at the peak (the logits' gradient).
LOGIT_COPIES = 1
#: Logical dim names whose mesh axes are FSDP: gathered before the matmul, reduce-scattered after.
FSDP_DIMS = ("embed",)
#: Remat policies the planner models.
REMAT_MODELLED = ("none", "full")


@dataclasses.dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per device. `state` = params + optimizer moments; `total` is the step's peak."""
    params: float
    optimizer: float
    gradients: float
    weights_working: float
    activations: float
    logits: float

    @property
    def state(self) -> float:
        return self.params + self.optimizer

    @property
    def total(self) -> float:
        return (self.params + self.optimizer + self.gradients + self.weights_working
                + self.activations + self.logits)


def abstract_mesh(sizes: dict[str, int]) -> AbstractMesh:
    """A mesh of `sizes` (the five `c2jax.sharding.MESH_AXES`) that needs no devices."""
    return AbstractMesh(tuple(int(sizes.get(a, 1)) for a in sharding.MESH_AXES),
                        sharding.MESH_AXES)


@dataclasses.dataclass(frozen=True)
class _Leaf:
    path: str
    shape: tuple
    itemsize: int
    shard_elems: int        # elements on one device
    gathered_elems: int     # elements on one device once the FSDP dims are gathered


@functools.lru_cache(maxsize=8)
def _boxed_params(model_json: str):
    return abstract_variables(ml_collections.ConfigDict(json.loads(model_json)))["params"]


def leaves_on(model_cfg, rules, sizes) -> list[_Leaf]:
    """Every parameter with its per-device elements on a mesh of `sizes`, sharded by `rules`
    (the model is traced once per config, abstractly)."""
    mesh = abstract_mesh(sizes)
    boxed = _boxed_params(model_cfg.to_json())
    specs = nn.get_partition_spec(boxed)
    leaves = []
    flat_specs = jax.tree_util.tree_flatten_with_path(
        specs, is_leaf=lambda x: isinstance(x, jax.sharding.PartitionSpec) or x is None)[0]
    flat_shapes = jax.tree.leaves(nn.unbox(boxed))
    for (path, spec), leaf in zip(flat_specs, flat_shapes):
        names = tuple(spec) if spec is not None else (None,) * len(leaf.shape)
        mesh_spec = sharding.logical_to_spec(names, rules, mesh, leaf.shape)
        shard, gathered = 1, 1
        for dim, name, axes in zip(leaf.shape, names, tuple(mesh_spec) + (None,) * 8):
            split = _split(axes, sizes)
            shard *= dim // split
            gathered *= dim if name in FSDP_DIMS else dim // split
        leaves.append(_Leaf(jax.tree_util.keystr(path), tuple(leaf.shape),
                            jnp.dtype(leaf.dtype).itemsize, shard, gathered))
    return leaves


def _split(axes, sizes: dict[str, int]) -> int:
    """Ways one dim is split by its PartitionSpec entry (None, an axis name or a tuple)."""
    axes = () if axes is None else (axes,) if isinstance(axes, str) else tuple(axes)
    return math.prod(sizes.get(a, 1) for a in axes)


def expert_slots_per_token(model_cfg) -> float:
    """Expert inputs one token occupies: `capacity_factor * k` (capacity dispatch), every
    expert (dense one-hot), `k` (ragged)."""
    c = model_cfg
    return {"capacity": c.capacity_factor * c.num_experts_per_tok,
            "dense": c.n_routed_experts,
            "ragged": c.num_experts_per_tok}[c.moe_dispatch]


def _is_stacked(leaf: _Leaf) -> bool:
    return "layers" in leaf.path.split("'")[1]  # dense_layers / moe_layers (nn.scan stacks)


def _largest_layer_gathered(leaves) -> float:
    """Elements of the biggest single layer once gathered (a stack's leaves / its depth)."""
    per_stack: dict[str, float] = {}
    for leaf in leaves:
        top = leaf.path.split("'")[1]
        if _is_stacked(leaf):
            per_stack[top] = per_stack.get(top, 0.0) + leaf.gathered_elems / leaf.shape[0]
        elif top.startswith("mtp"):
            per_stack[top] = per_stack.get(top, 0.0) + leaf.gathered_elems
    return max(per_stack.values(), default=0.0)


def _table_gathered(leaves) -> float:
    """Elements of the larger of the embedding table and the LM head, gathered."""
    return max((leaf.gathered_elems for leaf in leaves
                if leaf.path.split("'")[1] in ("embed_tokens", "lm_head")), default=0)


def layer_bytes_per_token(model_cfg, seq_len: int, tensor: int, context: int,
                          moe: bool, fused_attention: bool = False) -> float:
    """Bytes of one layer's forward intermediates per local token, compute dtype (scores and
    router affinities float32). Attention scores: causal query blocks of
    `attention_block_size` see on average half the keys (all of them, gathered, under context
    parallelism); MoE: `capacity_factor * k` slots per token (capacity dispatch), `experts`
    (dense one-hot), `k` (ragged), each with the expert input, three hidden-width buffers and
    the output. `fused_attention`: plan as if attention never materialised its scores."""
    c = model_cfg
    act = jnp.dtype(c.dtype).itemsize
    h = max(1, c.num_attention_heads // tensor)
    qk = qk_head_dim(c)
    attention = act * (2 * c.hidden_size + c.q_lora_rank + 2 * h * qk
                       + c.kv_lora_rank + c.qk_rope_head_dim
                       + h * (c.qk_nope_head_dim + c.v_head_dim) + 2 * h * c.v_head_dim)
    if context > 1 or not c.attention_block_size:
        keys = seq_len
    else:
        keys = seq_len / 2 + c.attention_block_size / 2
    # Scores and probabilities, float32; a fused (flash) kernel keeps only the softmax
    # statistics (c2jax has no such kernel yet: `fused_attention` plans as if it had).
    attention += 4 * 2 * h * (1 if fused_attention else keys)
    if not moe:
        return attention + act * (3 * c.intermediate_size / tensor + c.hidden_size)
    slots = expert_slots_per_token(c)
    m = c.moe_intermediate_size / tensor
    routed = slots * act * (2 * c.hidden_size + 3 * m)
    shared = act * 3 * c.n_shared_experts * m
    router = 4 * 3 * c.n_routed_experts
    return attention + routed + shared + router + act * c.hidden_size


def local_tokens(rows: int, seq_len: int, sizes: dict[str, int], rules) -> tuple[int, int]:
    """(rows, positions) of a `[rows, seq]` batch on one device, by the run's batch rules."""
    mesh = abstract_mesh(sizes)
    spec = sharding.logical_to_spec(("activation_batch", "activation_length"), rules, mesh,
                                    (rows, seq_len))
    out = []
    for dim, axes in zip((rows, seq_len), tuple(spec) + (None, None)):
        out.append(dim // _split(axes, sizes))
    return out[0], out[1]


def per_device_memory(workload, sizes: dict[str, int]) -> MemoryEstimate:
    """The estimate for `workload` (c2jax.planner.workload.Workload) on a mesh of `sizes`."""
    c, rules = workload.model, workload.rules
    if c.remat_policy not in REMAT_MODELLED:
        raise ValueError(f"the planner models remat_policy in {REMAT_MODELLED}, "
                         f"not {c.remat_policy!r}")
    leaves = leaves_on(c, rules, sizes)
    params = sum(leaf.shard_elems * leaf.itemsize for leaf in leaves)
    param_item = jnp.dtype(c.param_dtype).itemsize
    act = jnp.dtype(c.dtype).itemsize
    gradients = params * (2 if workload.accumulates_gradients else 1)
    weights_working = (_largest_layer_gathered(leaves) * (WEIGHT_COPIES * act + param_item)
                       + _table_gathered(leaves) * param_item)

    rows, positions = local_tokens(workload.rows, workload.seq_len, sizes, rules)
    tokens = rows * positions
    tensor, context = sizes.get("tensor", 1), sizes.get("context", 1)
    dense_layer, moe_layer = (
        layer_bytes_per_token(c, workload.seq_len, tensor, context, moe=moe,
                              fused_attention=workload.fused_attention) for moe in (False, True))
    n_dense = c.first_k_dense_replace
    n_moe = c.num_hidden_layers - n_dense
    working = ACTIVATION_COPIES * (moe_layer if n_moe or c.num_mtp_layers else dense_layer)
    if c.remat_policy == "full":
        saved = (n_dense + n_moe) * SAVED_VECTORS * act * c.hidden_size
    else:
        saved = NO_REMAT_SAVED_COPIES * (n_dense * dense_layer + n_moe * moe_layer)
    # MTP modules sit outside the remat'd layer stacks: they keep all their intermediates.
    saved += NO_REMAT_SAVED_COPIES * c.num_mtp_layers * moe_layer
    activations = tokens * (saved + working)
    vocab_local = c.vocab_size / (tensor if c.vocab_size % tensor == 0 else 1)
    logits = tokens * LOGIT_COPIES * 4 * vocab_local * (1 + c.num_mtp_layers)
    return MemoryEstimate(params=params, optimizer=2 * params,
                          gradients=gradients, weights_working=weights_working,
                          activations=activations, logits=logits)
