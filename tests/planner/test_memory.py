"""The planner's per-device memory against XLA's compiled memory analysis of our real train step
on 8 fake CPU devices, and its state bytes against the compiled step's arguments.

The model shape here was not among those the multiplicities in c2jax/planner/memory.py were
read from (the `small` preset), and the layouts cover FSDP, context, expert and tensor
parallelism, remat on and off, and an MTP module.
"""
import pytest

from c2jax import sharding
from c2jax.data.config import data_config
from c2jax.planner import memory, workload
from c2jax.train.config import stage_config, train_config
from c2jax.train.loop import build_steps
from configs.models import small

MODEL = dict(vocab_size=4096, hidden_size=256, num_hidden_layers=4, intermediate_size=512,
             num_attention_heads=4, q_lora_rank=128, kv_lora_rank=64, qk_rope_head_dim=16,
             qk_nope_head_dim=32, v_head_dim=32, moe_intermediate_size=128)

CASES = {
    "fsdp4_context2_remat": (dict(fsdp=4, context=2), dict(remat_policy="full"), 512),
    "fsdp2_expert4_no_remat": (dict(fsdp=2, expert=4), dict(remat_policy="none"), 256),
    "expert2_tensor2_mtp_remat": (dict(fsdp=2, expert=2, tensor=2),
                                  dict(remat_policy="full", num_mtp_layers=1), 256),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_estimate_is_within_15_percent_of_xla(name):
    mesh, model_overrides, seq_len = CASES[name]
    config = stage_config(stage="pretrain", model=small(**MODEL, **model_overrides),
                          data=data_config(seq_len=seq_len, batch_size=8),
                          mesh=sharding.mesh_config(**mesh), train=train_config(steps=10))
    steps = build_steps(config, sharding.make_mesh(config.mesh))
    compiled = steps.train_step.lower(steps.abstract_state, steps.abstract_batch).compile()
    analysis = compiled.memory_analysis()
    xla_total = analysis.argument_size_in_bytes + analysis.temp_size_in_bytes

    estimate = memory.per_device_memory(workload.from_config(config, num_processes=1),
                                        sharding.mesh_shape(config.mesh, 8))
    # The state is exact: the step's arguments are the state (plus a [8, seq] batch shard).
    assert estimate.state == pytest.approx(analysis.argument_size_in_bytes, rel=2e-3)
    assert estimate.total == pytest.approx(xla_total, rel=0.15), (
        f"estimate {estimate} vs XLA arguments {analysis.argument_size_in_bytes} + "
        f"temporaries {analysis.temp_size_in_bytes}")
