"""The MLA latent cache: decoding through it equals the training forward (c2jax/sampling/cache.py,
the cache path of c2jax/model/attention.py and transformer.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.model import apply, apply_mtp, init, model_config
from c2jax.model.attention import absorb_kv_b
from c2jax.model.transformer import unstack_layers
from c2jax.sampling.cache import bytes_per_token, init_cache, main_cache
from c2jax.sampling.engine import inference_config

from tests.sampling.conftest import reference_logits

PROMPT = [3, 17, 99, 4, 250, 8, 8, 61, 12, 5]
MAX_LEN = 32


def test_cache_holds_latents_not_per_head_keys_and_values(cfg):
    cache = init_cache(cfg, slots=2, max_len=MAX_LEN, mtp_depth=1)
    assert set(cache) == {"dense_layers", "moe_layers", "mtp_0_layer"}
    for entry in cache.values():
        assert entry["latent"].shape[1:] == (2, MAX_LEN, cfg.kv_lora_rank)
        assert entry["k_rope"].shape[1:] == (2, MAX_LEN, cfg.qk_rope_head_dim)
    layers = cfg.num_hidden_layers
    assert bytes_per_token(cfg) == layers * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) * 4
    per_head_kv = layers * cfg.num_attention_heads * (
        cfg.qk_nope_head_dim + cfg.qk_rope_head_dim + cfg.v_head_dim) * 4
    assert bytes_per_token(cfg) * 6 < per_head_kv


@pytest.mark.parametrize("overrides,per_layer", [
    ({}, False), ({"num_hidden_layers": 4}, True), ({"kv_lora_rank": 48, "q_lora_rank": 0}, False),
    ({"dtype": "bfloat16"}, False)],
    ids=["tiny", "three_moe_layers_per_layer_weights", "wide_latent_no_q_lora", "bf16"])
def test_prefill_then_decode_equals_the_training_forward(overrides, per_layer):
    cfg = model_config(**overrides)
    frozen = inference_config(cfg)
    variables = init(cfg, jax.random.key(2))
    # The reference is the training forward over the stacked weights; decoding may read the
    # sampler's per-layer layout (`unstack_layers`) instead.
    decode_variables = unstack_layers(variables) if per_layer else variables
    prefix = 6
    # tiny: both the prefill and the decode step absorb kv_b_proj; the wide latent makes the
    # prefill expand per-head K/V instead, so both attention paths are compared.
    assert absorb_kv_b(cfg, 1, MAX_LEN)
    if "kv_lora_rank" in overrides:
        assert not absorb_kv_b(cfg, prefix, prefix)
    expected, expected_routing = reference_logits(cfg, variables, PROMPT)

    run = jax.jit(lambda v, t, p, c: apply(v, t, jnp.ones_like(t), p, cfg=frozen, cache=c,
                                           cache_window=MAX_LEN if t.shape[1] == 1 else 0))
    cache = main_cache(init_cache(cfg, 1, MAX_LEN))
    # Prefill into a cache of exactly the prefix length (as the engine does), then copy it in.
    small = main_cache(init_cache(cfg, 1, prefix))
    tokens = jnp.asarray([PROMPT[:prefix]], jnp.int32)
    logits, aux = jax.jit(lambda v, t, c: apply(v, t, cfg=frozen, cache=c))(decode_variables,
                                                                             tokens, small)
    got, routing = [np.asarray(logits[0])], [np.asarray(aux["routing"][:, 0])]
    cache = jax.tree.map(lambda big, part: big.at[:, :, :prefix].set(part), cache, aux["cache"])
    for position in range(prefix, len(PROMPT)):
        token = jnp.asarray([[PROMPT[position]]], jnp.int32)
        logits, aux = run(decode_variables, token, jnp.asarray([[position]], jnp.int32), cache)
        cache = aux["cache"]
        got.append(np.asarray(logits[0]))
        routing.append(np.asarray(aux["routing"][:, 0]))
    got = np.concatenate(got)
    if cfg.dtype == "bfloat16":   # two bf16 computations in different orders: ~1% apart
        scale = np.abs(expected).max()
        np.testing.assert_allclose(got, expected, atol=0.03 * scale)
        assert np.mean(np.argmax(got, -1) == np.argmax(expected, -1)) >= 0.8
        return
    np.testing.assert_allclose(got, expected, atol=1e-4, rtol=1e-4)
    np.testing.assert_array_equal(np.concatenate(routing, axis=1), expected_routing)
    if per_layer:   # every stacked leaf became one leaf per layer, nothing else changed
        stacked = jax.tree.leaves(variables)
        assert sum(a.size for a in jax.tree.leaves(decode_variables)) == sum(
            a.size for a in stacked)
        assert "moe_layers" not in decode_variables["params"]
        assert {"dense_layers_0", "moe_layers_0", "moe_layers_1", "moe_layers_2"} <= set(
            decode_variables["params"])
        assert set(decode_variables["router_bias"]) == {"moe_layers_0", "moe_layers_1",
                                                        "moe_layers_2", "mtp_0_layer"}


def test_mtp_draft_step_equals_the_training_forward_mtp_logits(cfg, variables):
    frozen = inference_config(cfg)
    tokens = jnp.asarray([PROMPT], jnp.int32)
    n = len(PROMPT)
    _, train_aux = jax.jit(lambda v, t: apply(v, t, cfg=frozen))(variables, tokens)
    cache = init_cache(cfg, 1, n, mtp_depth=1)
    _, aux = jax.jit(lambda v, t, c: apply(v, t, cfg=frozen, cache=c))(variables, tokens,
                                                                        main_cache(cache))
    # MTP module 0 at position i reads h_i and t_{i+1}: defined for i < n - 1.
    positions = jnp.arange(n)[None]
    next_tokens = jnp.concatenate([tokens[:, 1:], jnp.zeros((1, 1), jnp.int32)], axis=1)
    logits_at = jnp.arange(n - 1)[None]
    logits, _, new_cache, _ = jax.jit(lambda v, h, t, c: apply_mtp(
        v, h, t, jnp.ones_like(t), positions, cfg=frozen, depth=0, cache=c,
        logits_at=logits_at))(variables, aux["hidden"], next_tokens, cache["mtp_0_layer"])
    np.testing.assert_allclose(np.asarray(logits[0]),
                               np.asarray(train_aux["mtp_logits"][0, 0, :n - 1]),
                               atol=1e-4, rtol=1e-4)
    assert float(jnp.abs(new_cache["latent"]).sum()) > 0   # the draft wrote its own cache
