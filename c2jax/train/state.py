"""The train state: everything a step reads and writes, as one pytree, and where it lives.

    TrainState(step, params, opt_state, router_bias, rng)

`params` are the float32 master weights (`model.param_dtype`); the model casts them to its
compute `dtype` inside every matmul (`c2jax.model.layers.project`), so bf16 compute never
touches the master copy. `router_bias` is the model's non-trainable `router_bias` collection,
float32, moved by the aux-loss-free rule after each step, never by the optimizer.

Sharding: the parameters follow the logical-axis rules (`c2jax.sharding`); the optimizer's
moments follow their parameters (`optax.tree_map_params`); scalars are replicated. The state is
created directly in its shards (jit with `out_shardings`), so no host holds a full copy.
"""
from __future__ import annotations

from typing import Any

import flax
import jax
import jax.numpy as jnp
import optax
from flax import linen as nn
from jax.sharding import NamedSharding, PartitionSpec

from c2jax import sharding
from c2jax.model.transformer import abstract_variables, build

#: Shape of the dummy batch the model is initialised with (any shape gives the same weights).
_INIT_TOKENS_SHAPE = (1, 8)


@flax.struct.dataclass
class TrainState:
    step: jax.Array       # int32 []: batches consumed, skipped non-finite steps included
    params: Any           # trainable weights, model.param_dtype (float32 master copy)
    opt_state: Any        # optax state of `params` (Adam moments, clipping, lr schedule count)
    router_bias: Any      # float32 aux-loss-free routing biases, `[layers, experts]` per stack
    rng: jax.Array        # uint32 key data of the run's key, saved so a resumed run draws the same
                          # numbers: a stochastic step uses fold_in(wrap_key_data(rng), step);
                          # the LM step itself draws none


def _split_seed(seed):
    """(parameter init key, the run's key): one seed gives both, independently."""
    return jax.random.split(jax.random.key(seed))


def _fresh_state(model_cfg, tx, seed, variables=None) -> TrainState:
    """The state at step 0; `variables` (from another run) replace the random init."""
    init_key, run_key = _split_seed(seed)
    if variables is None:
        variables = nn.unbox(build(model_cfg).init(
            init_key, jnp.zeros(_INIT_TOKENS_SHAPE, jnp.int32)))
    return TrainState(step=jnp.zeros((), jnp.int32), params=variables["params"],
                      opt_state=tx.init(variables["params"]),
                      router_bias=variables["router_bias"], rng=jax.random.key_data(run_key))


def abstract_state(model_cfg, tx) -> TrainState:
    """The state's shapes and dtypes (`jax.ShapeDtypeStruct` leaves), nothing allocated."""
    return jax.eval_shape(lambda: _fresh_state(model_cfg, tx, 0))


def state_shardings(model_cfg, tx, mesh, rules) -> TrainState:
    """A TrainState of NamedShardings: params by the rules, moments like their params."""
    variable_shardings = sharding.param_shardings(abstract_variables(model_cfg), mesh, rules)
    replicated = NamedSharding(mesh, PartitionSpec())
    abstract = abstract_state(model_cfg, tx)
    opt_shardings = optax.tree_map_params(
        tx, lambda _, param_sharding: param_sharding, abstract.opt_state,
        variable_shardings["params"], transform_non_params=lambda _: replicated)
    return TrainState(step=replicated, params=variable_shardings["params"],
                      opt_state=opt_shardings, router_bias=variable_shardings["router_bias"],
                      rng=replicated)


def init_state(model_cfg, tx, seed: int, shardings: TrainState, variables=None) -> TrainState:
    """The step-0 state, created in its shards. variables: optional `{"params",
    "router_bias"}` to start from (e.g. the previous stage's weights) instead of a random init;
    the optimizer state is always fresh."""
    # No active mesh here: init runs the model once on a dummy (1, 8) batch, which need not be
    # divisible by a context-parallel mesh; only the outputs' placement matters.
    # The seed is an argument, not a constant, so every seed runs the same compiled program.
    seed = jnp.uint32(seed)
    if variables is None:
        return jax.jit(lambda s: _fresh_state(model_cfg, tx, s), out_shardings=shardings)(seed)
    return jax.jit(lambda s, v: _fresh_state(model_cfg, tx, s, v),
                   out_shardings=shardings)(seed, variables)


def placed(abstract: TrainState, shardings: TrainState) -> TrainState:
    """`abstract` with each leaf's sharding attached: a restore target, or `.lower()` input."""
    return jax.tree.map(lambda a, s: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=s),
                        abstract, shardings)
