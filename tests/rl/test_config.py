"""RL configs: the shipped ones validate, mistakes are named (c2jax/rl/config.py)."""
import pytest

from c2jax import sharding
from c2jax.rl.config import rl_config, validate
from c2jax.train.config import ConfigError
from configs import rl_k2, rl_tiny
from configs.models import kimi_k2_1t


def test_shipped_configs_validate_and_k2_fits_its_mesh():
    validate(rl_tiny.get_config())
    induction = rl_tiny.get_config("induction")
    validate(induction)
    assert induction.warm_start.induction_steps > 0 and induction.warm_start.copy_fraction > 0
    assert rl_tiny.get_config().warm_start.induction_steps == 0
    understanding = rl_tiny.get_config("understanding")
    validate(understanding)
    assert (understanding.warm_start.induction_steps, understanding.warm_start.sft_categories,
            understanding.tasks.categories, understanding.eval.categories) == (
        induction.warm_start.induction_steps, ("understanding",), ("understanding",),
        ("understanding",))
    runcall = rl_tiny.get_config("runcall")
    validate(runcall)
    assert (runcall.warm_start.sft_agent, runcall.warm_start.sft_categories,
            runcall.eval.categories) == ("runcall", ("understanding",), ("understanding",))
    with pytest.raises(ValueError, match="induction"):
        rl_tiny.get_config("inductoin")
    k2 = rl_k2.get_config()
    validate(k2)
    sizes = sharding.mesh_shape(k2.mesh, k2.learner.devices)
    sharding.validate_layout(kimi_k2_1t(), sizes)
    assert sizes["expert"] == 64 and k2.runtime.backend == "ray"
    assert k2.rollout.context_budget < k2.actor.max_len


@pytest.mark.parametrize("section,field,value,message", [
    ("learner", "group_size", 1, "at least 2 attempts"),
    ("staleness", "eta", -1, "synchronous"),
    ("rollout", "context", "forget", "summarise"),
    ("rollout", "temperature", 0.0, "greedy"),
    ("rollout", "top_p", 0.9, "nucleus"),
    ("rollout", "context_budget", 99999, "actor.max_len"),
    ("actor", "dtype", "int8", "float32"),
    ("runtime", "backend", "mpi", "inprocess"),
    ("runtime", "ray_max_restarts", -1, ">= 0"),
    ("runtime", "learner_cpus", "0-x", "not a core id"),
    ("runtime", "learner_cpus", "100000", "not available"),
    ("runtime", "actor_cpus", "0", "needs runtime.backend='ray'"),
    ("loss", "kind", "dpo", "ppo"),
    ("tasks", "categories", ("understanding", "puzzles"), "task categories from"),
    ("eval", "categories", ("bugfix",), "task categories from"),
    ("warm_start", "sft_categories", ("tests",), "task categories from"),
    ("warm_start", "sft_agent", "gpt", "choose one of"),
])
def test_bad_values_name_the_field(section, field, value, message):
    config = rl_config()
    config[section][field] = value
    with pytest.raises(ConfigError, match=message):
        validate(config)


def test_a_typo_is_an_error():
    with pytest.raises(AttributeError):
        rl_config().learner.stpes = 3
    with pytest.raises(KeyError):
        rl_config(learner=dict(stpes=3))


def test_a_bad_warm_start_model_is_named_before_anything_runs():
    config = rl_config()
    config.warm_start.model.qk_rope_head_dim = 7
    with pytest.raises(ConfigError, match=r"\[warm_start.model\].*qk_rope_head_dim.*even"):
        validate(config)
    config.init_from = "runs/some_policy"      # the warm start is not built: not checked
    validate(config)


def test_the_warm_start_routing_is_configurable_and_checked():
    config = rl_config()
    config.warm_start.model.update(n_routed_experts=32, num_experts_per_tok=4, n_group=4,
                                   topk_group=2)
    validate(config)
    config.warm_start.model.topk_group = 5
    with pytest.raises(ConfigError, match=r"\[warm_start.model\].*topk_group.*n_group=4"):
        validate(config)
