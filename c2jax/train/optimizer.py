"""AdamW with linear warmup + cosine decay, global-norm clipping and a weight-decay mask.

    tx = make_optimizer(config.optimizer, total_steps=config.train.steps,
                        decay_mask=weight_decay_mask(abstract_variables(model_cfg)["params"]))

The optimizer only ever sees `variables["params"]`; the router biases are updated outside it
(aux-loss-free balancing, c2jax/train/step.py). The learning rate is injected as a
hyperparameter, so the rate of each update is in the optimizer state (`current_learning_rate`)
and the metrics report the rate that was actually applied.
"""
from __future__ import annotations

import jax
import optax
from flax import linen as nn
from jax.sharding import PartitionSpec

#: The logical name of the leading axis `nn.scan` adds to stacked layers; not a parameter dim.
_STACK_AXIS = "layers"


def learning_rate_schedule(opt_cfg, total_steps: int) -> optax.Schedule:
    """lr(t): 0 -> peak linearly over `warmup_steps`, then cosine to `peak * min_lr_ratio` at
    `total_steps` (and constant after). A run shorter than its warmup stops on the ramp."""
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0, peak_value=opt_cfg.learning_rate, warmup_steps=opt_cfg.warmup_steps,
        decay_steps=max(total_steps, opt_cfg.warmup_steps + 1),
        end_value=opt_cfg.learning_rate * opt_cfg.min_lr_ratio)


def weight_decay_mask(boxed_params):
    """True for the leaves weight decay applies to: matrices and expert tensors.

    Decided from the logical axis names, not `ndim`: a norm scale stacked by `nn.scan` is 2-D
    (`[layers, embed]`) but still a 1-D parameter per layer, and decaying norm scales towards 0
    shrinks activations instead of regularising. boxed_params: params as returned by
    `c2jax.model.abstract_variables(cfg)["params"]` (nn.Partitioned leaves).
    """
    specs = nn.get_partition_spec(boxed_params)

    def decays(spec, leaf):
        names = tuple(spec) if spec is not None else (None,) * leaf.ndim
        return sum(1 for name in names if name != _STACK_AXIS) >= 2

    return jax.tree.map(decays, specs, nn.unbox(boxed_params),
                        is_leaf=lambda x: isinstance(x, PartitionSpec) or x is None)


def make_optimizer(opt_cfg, total_steps: int, decay_mask) -> optax.GradientTransformation:
    """clip(global norm) -> AdamW(schedule, masked decay). decay_mask: a bool tree like params."""
    adamw = optax.inject_hyperparams(optax.adamw)(
        learning_rate=learning_rate_schedule(opt_cfg, total_steps), b1=opt_cfg.b1,
        b2=opt_cfg.b2, eps=opt_cfg.eps, weight_decay=opt_cfg.weight_decay, mask=decay_mask)
    if not opt_cfg.grad_clip_norm:
        return adamw
    return optax.chain(optax.clip_by_global_norm(opt_cfg.grad_clip_norm), adamw)


def current_learning_rate(opt_state) -> jax.Array:
    """The learning rate the last update applied (float32 scalar), read from the state."""
    # `hyperparams_states` also has a "learning_rate" key (the schedule's counter): take the array.
    return optax.tree_utils.tree_get(opt_state, "learning_rate",
                                     filtering=lambda _, value: isinstance(value, jax.Array))
