"""The train state is created in its shards: parameters by the logical-axis rules, Adam's
moments exactly like their parameters, scalars replicated; and one seed gives one state."""
import jax
import numpy as np
from jax.sharding import PartitionSpec

from c2jax import sharding
from c2jax.train import state as state_lib
from c2jax.train.loop import build_steps


def test_state_shardings_follow_the_rules(make_config):
    config = make_config(mesh={"fsdp": 2, "expert": 4})
    shardings = build_steps(config, sharding.make_mesh(config.mesh)).shardings
    experts = shardings.params["moe_layers"]["layer"]["mlp"]["experts"]["gate_proj"]
    assert experts.spec[1] == "expert"                          # [layers, exp, embed, mlp]
    assert shardings.step.spec == PartitionSpec() and shardings.rng.spec == PartitionSpec()
    mu = shardings.opt_state[1].inner_state[0].mu              # clip, then adamw's moments
    nu = shardings.opt_state[1].inner_state[0].nu
    assert jax.tree.leaves(mu) == jax.tree.leaves(shardings.params)
    assert jax.tree.leaves(nu) == jax.tree.leaves(shardings.params)


def test_state_is_created_in_its_shards_from_the_seed(make_config):
    config = make_config()
    steps = build_steps(config, sharding.make_mesh(config.mesh))
    state = state_lib.init_state(config.model, steps.tx, 0, steps.shardings)
    for array, want in zip(jax.tree.leaves(state), jax.tree.leaves(steps.shardings)):
        assert array.sharding == want
    assert int(state.step) == 0 and state.rng.dtype == np.uint32

    again = state_lib.init_state(config.model, steps.tx, 0, steps.shardings)
    other_seed = state_lib.init_state(config.model, steps.tx, 1, steps.shardings)
    for a, b, c in zip(jax.tree.leaves(state.params), jax.tree.leaves(again.params),
                       jax.tree.leaves(other_seed.params)):
        np.testing.assert_array_equal(a, b)
    assert any(not np.array_equal(a, c) for a, c in zip(jax.tree.leaves(state.params),
                                                         jax.tree.leaves(other_seed.params)))
