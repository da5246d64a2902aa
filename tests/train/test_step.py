"""The sharded train step on 8 fake devices: it learns, moves the router biases by the
aux-loss-free rule, skips non-finite updates, and context parallelism changes nothing."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax import sharding
from c2jax.model.transformer import abstract_variables
from c2jax.train import losses, state as state_lib, step as step_lib
from c2jax.train.loop import build_steps
from tests.train.conftest import BATCH, SEQ_LEN


def _packed_batch(vocab_size, seed=0):
    """[BATCH, SEQ_LEN] rows of 2-3 documents each, positions restarting per document."""
    rng = np.random.RandomState(seed)
    tokens = rng.randint(1, vocab_size, (BATCH, SEQ_LEN + 1)).astype(np.int32)
    segment_ids = np.ones((BATCH, SEQ_LEN), np.int32)
    segment_ids[:, 20:] = 2
    segment_ids[::2, 45:] = 3
    positions = np.zeros_like(segment_ids)
    for b in range(BATCH):
        for s in range(1, SEQ_LEN):
            same = segment_ids[b, s] == segment_ids[b, s - 1]
            positions[b, s] = positions[b, s - 1] + 1 if same else 0
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:],
            "loss_mask": np.ones((BATCH, SEQ_LEN), np.float32), "segment_ids": segment_ids,
            "positions": positions}


@pytest.fixture(scope="module")
def setup(make_config):
    config = make_config()   # the loop tests' config: the same compiled train step
    mesh = sharding.make_mesh(config.mesh)
    steps = build_steps(config, mesh)
    return config, steps


def _fresh(config, steps):
    return state_lib.init_state(config.model, steps.tx, 0, steps.shardings)


def test_steps_learn_and_move_router_biases(setup):
    config, steps = setup
    state = _fresh(config, steps)
    batch = step_lib.device_batch(_packed_batch(config.model.vocab_size), steps.batch_sharding)
    rate = config.model.router_bias_update_rate
    losses_seen = []
    for i in range(6):
        bias_before = jax.device_get(state.router_bias)
        state, metrics = steps.train_step(state, batch)
        losses_seen.append(float(metrics["loss"]))
        assert float(metrics["finite"]) == 1.0 and int(state.step) == i + 1
        moved = [np.abs(after - before) for after, before in
                 zip(jax.tree.leaves(jax.device_get(state.router_bias)),
                     jax.tree.leaves(bias_before))]
        # b_i += rate * sign(mean load - load_i): every expert moves by rate or (at the mean) 0.
        for delta in moved:
            np.testing.assert_allclose(delta[delta > 0], rate, rtol=1e-4)
        assert sum(int((d > 0).sum()) for d in moved) > 0
    assert losses_seen[-1] < losses_seen[0] - 0.5, losses_seen   # overfits the fixed batch
    for name in ("grad_norm", "lr", "mtp_loss_1", "dropped_fraction",
                 "expert_load_max_over_mean/layer_1", "expert_load_max_over_mean/mtp_0"):
        assert np.isfinite(float(metrics[name])), name


def test_nonfinite_loss_skips_the_update(setup):
    config, steps = setup
    state = _fresh(config, steps)
    params = dict(state.params)
    params["norm"] = jax.tree.map(lambda w: w * jnp.nan, params["norm"])  # every logit NaN
    poisoned = state.replace(params=params)
    before = jax.device_get(poisoned)
    batch = step_lib.device_batch(_packed_batch(config.model.vocab_size), steps.batch_sharding)
    after, metrics = steps.train_step(poisoned, batch)
    assert float(metrics["finite"]) == 0.0 and not np.isfinite(float(metrics["loss"]))
    assert int(after.step) == 1                                   # the batch was consumed
    after = jax.device_get(after)
    for name in ("params", "opt_state", "router_bias", "rng"):
        for a, b in zip(jax.tree.leaves(getattr(after, name)), jax.tree.leaves(getattr(before,
                                                                                        name))):
            np.testing.assert_array_equal(a, b, err_msg=name)   # NaN == NaN here


def test_context_parallel_loss_and_gradients_equal_no_context(setup):
    config, steps = setup
    variables = jax.device_get(_fresh(config, steps))
    batch = _packed_batch(config.model.vocab_size, seed=1)
    boxed = abstract_variables(config.model)

    def objective(params, router_bias, b):
        return losses.training_objective(params, router_bias, b, config.model, config.loss)[0]

    results = {}
    for name, layout in (("no CP", {"fsdp": 8}), ("CP", {"fsdp": 2, "context": 4})):
        mesh_cfg = sharding.mesh_config(**layout)
        mesh = sharding.make_mesh(mesh_cfg)
        placement = sharding.param_shardings(boxed, mesh, mesh_cfg.rules)
        grad_fn = step_lib.MeshFunction(jax.jit(jax.value_and_grad(objective)), mesh,
                                        mesh_cfg.rules)
        batch_sharding = step_lib.batch_sharding(mesh, mesh_cfg.rules, (BATCH, SEQ_LEN))
        loss, grads = grad_fn(jax.device_put(variables.params, placement["params"]),
                              jax.device_put(variables.router_bias, placement["router_bias"]),
                              step_lib.device_batch(batch, batch_sharding))
        results[name] = (float(loss), jax.device_get(grads))
    (ref_loss, ref_grads), (cp_loss, cp_grads) = results["no CP"], results["CP"]
    assert cp_loss == pytest.approx(ref_loss, rel=1e-5)
    for (path, g), r in zip(jax.tree_util.tree_leaves_with_path(cp_grads),
                            jax.tree.leaves(ref_grads)):
        err = float(np.linalg.norm(g - r) / (np.linalg.norm(r) + 1e-30))
        assert err <= 1e-5, (jax.tree_util.keystr(path), err)
