"""Generation under a mesh equals single-device generation (8 fake CPU devices)."""
import jax
import numpy as np
import pytest

from c2jax import sharding
from c2jax.sampling import Engine

from tests.sampling.conftest import small_config

REQUESTS = [dict(prompt=[1, 2, 3], max_new_tokens=6),
            dict(prompt=[9, 8, 7, 6, 5], max_new_tokens=5, temperature=0.9, seed=3),
            dict(prompt=[4] * 9, max_new_tokens=6, temperature=1.0, top_k=10, seed=4),
            dict(prompt=[100], max_new_tokens=4),
            dict(prompt=[17, 71], max_new_tokens=6, temperature=0.7, seed=5)]


@pytest.mark.parametrize("layout,speculative", [(dict(fsdp=1, tensor=2, expert=4), False),
                                                (dict(fsdp=2, tensor=4, expert=1), True)],
                         ids=["ep4_tp2_plain", "fsdp2_tp4_speculative"])
def test_sharded_generation_equals_single_device(cfg, variables, layout, speculative):
    assert jax.device_count() == 8
    config = small_config(slots=4, speculative=speculative)
    single = Engine(cfg, variables, config=config).generate(REQUESTS)
    mesh_cfg = sharding.mesh_config(**layout)
    engine = Engine(cfg, variables, config=config, mesh=sharding.make_mesh(mesh_cfg),
                    rules=mesh_cfg.rules)
    sharded = engine.generate(REQUESTS)
    for a, b in zip(single, sharded):
        assert a.tokens == b.tokens
        np.testing.assert_allclose(a.logprobs, b.logprobs, atol=1e-5)
        np.testing.assert_array_equal(a.routing, b.routing)
    # The cache really is split: its slot axis over the mesh axes that carry the batch.
    latent = engine._state["cache"]["moe_layers"]["latent"]
    assert len(latent.sharding.device_set) == 8
    batch_ways = layout["fsdp"] * layout["expert"]
    assert latent.addressable_shards[0].data.shape[1] == config.slots // batch_ways
