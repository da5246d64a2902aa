"""The learning-rate schedule's values, the weight-decay mask, and clipping."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import linen as nn

from c2jax.model.config import model_config
from c2jax.model.transformer import abstract_variables
from c2jax.train.config import optimizer_config
from c2jax.train.optimizer import (current_learning_rate, learning_rate_schedule,
                                   make_optimizer, weight_decay_mask)

PEAK, WARMUP, TOTAL, MIN_RATIO = 1e-2, 10, 110, 0.1


def expected_lr(t):
    """Linear warmup from 0, then cosine from PEAK to PEAK * MIN_RATIO over the rest."""
    if t < WARMUP:
        return PEAK * t / WARMUP
    progress = min((t - WARMUP) / (TOTAL - WARMUP), 1.0)
    end = PEAK * MIN_RATIO
    return end + (PEAK - end) * 0.5 * (1 + math.cos(math.pi * progress))


def test_schedule_values():
    schedule = learning_rate_schedule(
        optimizer_config(learning_rate=PEAK, warmup_steps=WARMUP, min_lr_ratio=MIN_RATIO), TOTAL)
    for t in (0, 1, 5, 10, 11, 35, 60, 85, 109, 110, 200):
        assert float(schedule(t)) == pytest.approx(expected_lr(t), rel=1e-5, abs=1e-9), t
    assert float(schedule(0)) == 0.0
    assert float(schedule(WARMUP)) == pytest.approx(PEAK)
    assert float(schedule(60)) == pytest.approx(PEAK * (1 + MIN_RATIO) / 2)  # half-way: midpoint
    assert float(schedule(TOTAL)) == pytest.approx(PEAK * MIN_RATIO)


def test_a_run_shorter_than_its_warmup_stays_on_the_ramp():
    schedule = learning_rate_schedule(optimizer_config(learning_rate=PEAK, warmup_steps=4), 2)
    assert [float(schedule(t)) for t in range(3)] == pytest.approx([0.0, PEAK / 4, PEAK / 2])


def _params_and_mask():
    boxed = abstract_variables(model_config(num_mtp_layers=1))["params"]
    params = jax.tree.map(lambda s: np.ones(s.shape, s.dtype), nn.unbox(boxed))
    return params, weight_decay_mask(boxed)


def test_weight_decay_mask_spares_norms_and_decays_matrices():
    params, mask = _params_and_mask()
    flat = {jax.tree_util.keystr(p): m for p, m in jax.tree_util.tree_leaves_with_path(mask)}
    norms = [k for k in flat if "norm" in k]
    # Every RMSNorm scale, including the scanned ones that are 2-D [layers, dim].
    assert norms and not any(flat[k] for k in norms)
    assert any(params_leaf.ndim == 2 for p, params_leaf in jax.tree_util.tree_leaves_with_path(
        params) if "norm" in jax.tree_util.keystr(p))
    matrices = [k for k in flat if "proj" in k or "embed_tokens" in k or "lm_head" in k]
    assert matrices and all(flat[k] for k in matrices)

    # Behaviour, not just the mask: with zero gradients only the decayed leaves move.
    tx = make_optimizer(optimizer_config(learning_rate=0.1, warmup_steps=0, weight_decay=0.5),
                        total_steps=10, decay_mask=mask)
    grads = jax.tree.map(np.zeros_like, params)
    updates, _ = jax.jit(tx.update)(grads, jax.jit(tx.init)(params), params)
    for path, update in jax.tree_util.tree_leaves_with_path(updates):
        key = jax.tree_util.keystr(path)
        moved = float(jnp.max(jnp.abs(update)))
        if flat[key]:
            assert moved == pytest.approx(0.1 * 0.5), key      # lr * weight_decay * param (1)
        else:
            assert moved == 0.0, key


def test_clipping_and_reported_learning_rate():
    params = {"w": jnp.ones((4, 4))}
    cfg = optimizer_config(learning_rate=1.0, warmup_steps=2, grad_clip_norm=1.0, b1=0.9,
                           weight_decay=0.0)
    tx = make_optimizer(cfg, total_steps=10, decay_mask={"w": True})
    state = tx.init(params)
    big = {"w": jnp.full((4, 4), 100.0)}                 # global norm 400
    seen = []
    for step in range(3):
        _, state = tx.update(big, state, params)
        seen.append(float(current_learning_rate(state)))
        if step == 0:
            # Adam's first moment after one update is (1 - b1) * the gradient it saw: clipped.
            mu = optax.tree_utils.tree_get(state, "mu")
            assert float(optax.tree.norm(mu)) == pytest.approx(0.1 * 1.0, rel=1e-5)
    assert seen == pytest.approx([0.0, 0.5, 1.0])        # the rate each update applied
