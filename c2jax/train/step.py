"""The jitted, sharded train step and eval step.

    train_step = make_train_step(model_cfg, loss_cfg, tx, mesh, rules, shardings)
    state, metrics = train_step(state, batch)      # batch: device_batch(numpy_batch, ...)
    eval_step = make_eval_step(model_cfg, mesh, rules, shardings)
    sums = eval_step(state.params, state.router_bias, batch)

One train step: forward + backward of `losses.training_objective`, the optimizer update of the
float32 master params, then the aux-loss-free router-bias update from this batch's expert loads
(DeepSeek-V3 sec. 2.1.2: b_i += rate * sign(mean load - load_i)). If the objective, the
gradient norm or the update is NaN/Inf, none of that is applied: params, optimizer state and
router biases are returned unchanged, `step` still advances (the batch was consumed) and
`metrics["finite"]` is 0, so the loop can count and report it.

Both steps trace under the mesh and the logical-axis rules (`sharding.activate`), so the
model's activation constraints and its context-parallel layout apply; the state keeps the
shardings of `state.state_shardings` and is donated, so a step updates it in place.
"""
from __future__ import annotations

from typing import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax
from jax.sharding import NamedSharding, PartitionSpec

from c2jax import distributed, sharding
from c2jax.data import packing
from c2jax.model.moe import update_router_bias
from c2jax.train import losses
from c2jax.train.optimizer import current_learning_rate
from c2jax.train.state import TrainState

#: How a `[batch, seq]` input is laid out: rows over the batch axes; the sequence stays whole on
#: each device, so the model's context-parallel reordering is a local gather.
_BATCH_AXES = ("activation_batch", None)


class MeshFunction:
    """A jitted function that always traces and runs under its mesh and sharding rules."""

    def __init__(self, jitted, mesh, rules):
        self._jitted, self._mesh, self._rules = jitted, mesh, rules
        self._compiled = None

    def __call__(self, *args):
        with sharding.activate(self._mesh, self._rules):
            return (self._compiled or self._jitted)(*args)

    def lower(self, *args):
        """`jax.jit(...).lower` on concrete or abstract (`ShapeDtypeStruct`) arguments."""
        with sharding.activate(self._mesh, self._rules):
            return self._jitted.lower(*args)

    def compile(self, *args) -> None:
        """Compiles ahead of time for arguments shaped like `args` (abstract is fine); later
        calls must match them. Keeps compile time out of the first step's timing."""
        self._compiled = self.lower(*args).compile()


def batch_sharding(mesh, rules, shape) -> NamedSharding:
    """Where a `[batch, seq]` input array of `shape` lives on `mesh`."""
    return NamedSharding(mesh, sharding.logical_to_spec(_BATCH_AXES, rules, mesh, shape))


def abstract_batch(global_batch: int, seq_len: int, batch_sharding_: NamedSharding) -> dict:
    """The shapes, dtypes and placement of a global batch (what `device_batch` produces)."""
    return {name: jax.ShapeDtypeStruct((global_batch, seq_len),
                                       jnp.float32 if name == "loss_mask" else jnp.int32,
                                       sharding=batch_sharding_)
            for name in packing.ROW_FEATURES}


def device_batch(batch: Mapping[str, np.ndarray], batch_sharding_: NamedSharding):
    """This process's numpy batch (`[local_batch, seq]` per key: its own rows) -> the global
    sharded jax arrays `[local_batch * processes, seq]` (`distributed.global_shape`)."""
    return {name: jax.make_array_from_process_local_data(
                batch_sharding_, np.asarray(value), distributed.global_shape(np.shape(value)))
            for name, value in batch.items()}


def _layer_names(model_cfg, router_load) -> dict[str, list[str]]:
    """Names of the rows of each expert-load leaf: decoder layer numbers, then MTP modules."""
    names = {}
    for key, subtree in router_load.items():
        (leaf,) = jax.tree.leaves(subtree)
        if key == "moe_layers":  # nn.scan stack: [moe_layers, experts], after the dense layers
            first = model_cfg.first_k_dense_replace
            names[key] = [f"layer_{first + i}" for i in range(leaf.shape[0])]
        else:                    # f"mtp_{d}_layer": one layer, [experts]
            names[key] = [key.removesuffix("_layer")]
    return names


def expert_load_metrics(model_cfg, router_load) -> dict[str, jax.Array]:
    """`expert_load_max_over_mean/<layer>`: the busiest expert's tokens over the mean per
    expert, for every MoE layer (1.0 = perfectly balanced; k * experts / k = every token in
    one expert). router_load: `aux["router_load"]` of the model."""
    metrics = {}
    for key, rows in _layer_names(model_cfg, router_load).items():
        (load,) = jax.tree.leaves(router_load[key])
        load = load.reshape(len(rows), -1)                                   # [layers, experts]
        ratio = jnp.max(load, axis=-1) / jnp.maximum(jnp.mean(load, axis=-1), 1e-9)
        for i, row in enumerate(rows):
            metrics[f"expert_load_max_over_mean/{row}"] = ratio[i]
    return metrics


def make_train_step(model_cfg, loss_cfg, tx: optax.GradientTransformation, mesh, rules,
                    shardings: TrainState) -> MeshFunction:
    """(state, batch) -> (state, metrics): see the module docstring. Metrics are float32
    scalars: loss terms (`losses.training_objective`), `grad_norm` (before clipping), `lr`,
    `finite`, `dropped_fraction`, `expert_load_max_over_mean/<layer>`."""

    def train_step(state: TrainState, batch):
        def objective(params):
            return losses.training_objective(params, state.router_bias, batch, model_cfg,
                                             loss_cfg)

        (value, (metrics, aux)), grads = jax.value_and_grad(objective, has_aux=True)(
            state.params)
        grad_norm = optax.tree.norm(grads)
        updates, opt_state = tx.update(grads, state.opt_state, state.params)
        # The update is checked too: a finite loss can still produce an overflowing step
        # (e.g. a runaway learning rate), and applying it would poison every later step.
        # (Checked per element: the norm of a large but finite update can overflow.)
        update_finite = jax.tree.reduce(jnp.logical_and, jax.tree.map(
            lambda u: jnp.all(jnp.isfinite(u)), updates))
        finite = jnp.isfinite(value) & jnp.isfinite(grad_norm) & update_finite
        params = optax.apply_updates(state.params, updates)
        router_bias = state.router_bias
        if "router_load" in aux:
            router_bias = update_router_bias(router_bias, aux["router_load"],
                                             model_cfg.router_bias_update_rate)
            metrics.update(expert_load_metrics(model_cfg, aux["router_load"]))
            metrics["dropped_fraction"] = aux["dropped_fraction"]

        def if_finite(new, old):
            return jax.tree.map(lambda n, o: jnp.where(finite, n, o), new, old)

        new_state = TrainState(step=state.step + 1,
                               params=if_finite(params, state.params),
                               opt_state=if_finite(opt_state, state.opt_state),
                               router_bias=if_finite(router_bias, state.router_bias),
                               rng=state.rng)
        metrics.update(grad_norm=grad_norm, lr=current_learning_rate(opt_state),
                       finite=finite.astype(jnp.float32))
        return new_state, {k: jnp.asarray(v, jnp.float32) for k, v in metrics.items()}

    # The batch keeps the sharding it was placed with (`device_batch`); None = take it as is.
    replicated = NamedSharding(mesh, PartitionSpec())
    jitted = jax.jit(train_step, in_shardings=(shardings, None),
                     out_shardings=(shardings, replicated), donate_argnums=0)
    return MeshFunction(jitted, mesh, rules)


def make_eval_step(model_cfg, mesh, rules, shardings: TrainState) -> MeshFunction:
    """(params, router_bias, batch) -> sums over the batch, float32:
    `ce_sum`, `ce_count`, `z_sum`, `mtp_<k>_sum`, `mtp_<k>_count`, and `ce_sum_by_position`,
    `ce_count_by_position` `[seq]` indexed by the token's position in its document, so the
    loop can report the loss at short and long positions."""

    def eval_step(params, router_bias, batch):
        terms, ce, _ = losses.forward_losses(params, router_bias, batch, model_cfg)
        sums = {}
        for name, (total, count) in terms.items():
            sums[f"{name}_sum"], sums[f"{name}_count"] = total, count
        seq = batch["tokens"].shape[1]
        positions = batch["positions"].reshape(-1)
        mask = batch["loss_mask"].reshape(-1).astype(jnp.float32)
        sums["ce_sum_by_position"] = jnp.zeros(seq, jnp.float32).at[positions].add(
            ce.reshape(-1) * mask)
        sums["ce_count_by_position"] = jnp.zeros(seq, jnp.float32).at[positions].add(mask)
        return sums

    replicated = NamedSharding(mesh, PartitionSpec())
    jitted = jax.jit(eval_step, in_shardings=(shardings.params, shardings.router_bias, None),
                     out_shardings=replicated)
    return MeshFunction(jitted, mesh, rules)

