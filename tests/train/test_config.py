"""Stage configs: the shipped ones validate, and a config that cannot work is refused with a
message naming the field and the fix, before anything is built."""
import importlib

import pytest

from c2jax.train.config import ConfigError, train_config, validate


@pytest.mark.parametrize("name", ["pretrain_tiny", "longctx_tiny", "sft_tiny"])
def test_tiny_stage_configs_validate_on_8_devices(name):
    config = importlib.import_module(f"configs.{name}").get_config()
    if config.stage == "sft":
        with config.unlocked():
            config.data.source = "conversations.jsonl"
    validate(config, num_devices=8)


def test_long_context_config_extends_phase_one_with_yarn():
    from configs import longctx_tiny, pretrain_tiny
    phase1, phase2 = pretrain_tiny.get_config(), longctx_tiny.get_config("runs/pt")
    assert phase2.data.seq_len == 8 * phase1.data.seq_len
    rs = phase2.model.rope_scaling
    assert (rs.type, rs.factor, rs.original_max_position_embeddings) == ("yarn", 8.0, 256)
    assert phase2.train.init_from == "runs/pt"
    assert phase2.mesh.context == -1


def test_misspelt_field_names_the_field():
    with pytest.raises(KeyError, match='Did you mean "steps"'):
        train_config(stpes=3)


@pytest.mark.parametrize("section, overrides, pattern", [
    ("data", {"seq_len": 128}, r"data.seq_len = 128 is beyond the model's rope range .*"
                               r"rope_scaling.type='yarn', factor=2"),
    ("optimizer", {"warmup_steps": 50}, r"'optimizer.warmup_steps' = 50 .* train.steps=4"),
    ("train", {"eval_position_buckets": (80,)}, r"eval_position_buckets"),
    ("train", {"init_from": "/no/such/run"}, r"'train.init_from' = '/no/such/run'.*no such"),
    ("model", {"num_experts_per_tok": 9}, r"\[model\] model config field 'num_experts_per_tok'"),
])
def test_bad_fields_are_named(make_config, section, overrides, pattern):
    config = make_config(**{section: overrides})
    with pytest.raises(ConfigError, match=pattern):
        validate(config, num_devices=8)


def test_yarn_range_and_context_divisibility(make_config):
    config = make_config(model={"rope_scaling": {"type": "yarn", "factor": 2.0,
                                                 "original_max_position_embeddings": 32}},
                         data={"seq_len": 96})
    with pytest.raises(ConfigError, match=r"YaRN range .* = 64.*factor to at least 3"):
        validate(config, num_devices=8)
    config = make_config(mesh={"fsdp": 1, "context": 8}, data={"seq_len": 40},
                         model={"max_position_embeddings": 40})
    with pytest.raises(ConfigError, match=r"seq_len must be divisible by 16"):
        validate(config, num_devices=8)
    config = make_config(mesh={"fsdp": 3})
    with pytest.raises(ConfigError, match=r"\[mesh\]"):
        validate(config, num_devices=8)


def test_sft_needs_conversations(make_config):
    with pytest.raises(ConfigError, match=r"SFT trains on conversations.*FILE.jsonl"):
        validate(make_config(stage="sft"), num_devices=8)
