"""Logit and routing parity against HF transformers' DeepseekV3 (fp32, CPU), and the HF
checkpoint round trip through c2jax.load_hf / save_hf."""
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

import c2jax
from c2jax.model import apply
from tests.model.hf_oracle import hf_config, logits_and_routing, random_model

TOKENS = np.random.RandomState(0).randint(0, 96, (2, 48))  # 48 > 32: beyond YaRN's original


def _apply(cfg, variables, tokens):
    return jax.jit(lambda v, t: apply(v, t, cfg=cfg))(variables, jnp.asarray(tokens))


def _ours(path, tokens=TOKENS):
    cfg, variables = c2jax.load_hf(path)
    logits, aux = _apply(cfg, variables, tokens)
    return cfg, variables, np.asarray(logits), aux


CASES = {
    "q_lora+yarn+groups": {},
    "no_q_lora": {"q_lora_rank": None},
    "yarn_mscale_only": {"rope_parameters": {"rope_type": "yarn", "rope_theta": 5000.0,
                                             "factor": 8.0, "original_max_position_embeddings": 16}},
    "plain_rope_no_interleave": {"rope_parameters": {"rope_type": "default",
                                                     "rope_theta": 10000.0},
                                 "rope_interleave": False},
    "softmax_free_tied_no_groups": {"n_group": 1, "topk_group": 1, "norm_topk_prob": False,
                                    "tie_word_embeddings": True, "n_shared_experts": 2},
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_logits_and_routing_match_transformers(case, tmp_path):
    model = random_model(hf_config(**CASES[case]), seed=len(case))
    ref_logits, ref_routing = logits_and_routing(model, TOKENS)
    model.save_pretrained(tmp_path)
    cfg, _, logits, aux = _ours(str(tmp_path))
    assert np.abs(logits - ref_logits).max() <= 1e-4
    ours = np.sort(np.asarray(aux["routing"]), -1)
    assert len(ref_routing) == ours.shape[0] == cfg.num_hidden_layers - cfg.first_k_dense_replace
    for layer, ref in enumerate(ref_routing):
        np.testing.assert_array_equal(ours[layer].reshape(ref.shape), ref)


def test_bias_changes_routing_so_the_parity_test_can_fail(tmp_path):
    # The bias must matter in the fixture, else a routing bug around it would pass unseen.
    model = random_model(hf_config())
    _, with_bias = logits_and_routing(model, TOKENS)
    for layer in model.model.layers[1:]:
        layer.mlp.gate.e_score_correction_bias.zero_()
    _, without_bias = logits_and_routing(model, TOKENS)
    assert any((a != b).any() for a, b in zip(with_bias, without_bias))


def test_save_hf_loads_in_transformers_with_same_logits(tmp_path):
    model = random_model(hf_config())
    ref_logits, _ = logits_and_routing(model, TOKENS)
    model.save_pretrained(tmp_path / "in")
    cfg, variables = c2jax.load_hf(str(tmp_path / "in"))
    c2jax.save_hf(str(tmp_path / "out"), cfg, variables)
    reloaded = AutoModelForCausalLM.from_pretrained(str(tmp_path / "out"),
                                                    attn_implementation="eager").eval()
    logits, _ = logits_and_routing(reloaded, TOKENS)
    np.testing.assert_allclose(logits, ref_logits, atol=1e-6)


def test_fused_expert_layout_and_sharded_files(tmp_path):
    """transformers 5's in-memory layout (`experts.gate_up_proj`), split over two files."""
    model = random_model(hf_config())
    ref_logits, _ = logits_and_routing(model, TOKENS)
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    assert any(k.endswith("experts.gate_up_proj") for k in state)
    names = sorted(state)
    halves = [names[: len(names) // 2], names[len(names) // 2:]]
    weight_map = {}
    for i, part in enumerate(halves):
        fn = f"model-{i + 1}-of-2.safetensors"
        save_file({k: state[k] for k in part}, str(tmp_path / fn))
        weight_map.update({k: fn for k in part})
    (tmp_path / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    model.config.save_pretrained(tmp_path)
    _, _, logits, _ = _ours(str(tmp_path))
    assert np.abs(logits - ref_logits).max() <= 1e-4


def test_mtp_layers_round_trip_as_extra_decoder_layers(tmp_path):
    cfg = c2jax.model.model_config(num_mtp_layers=2, vocab_size=64)
    variables = c2jax.model.init(cfg, jax.random.key(3))
    c2jax.save_hf(str(tmp_path), cfg, variables)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())["weight_map"]
    n = cfg.num_hidden_layers
    for d in range(2):
        for name in ("enorm", "hnorm", "eh_proj", "shared_head.norm", "shared_head.head",
                     "embed_tokens", "mlp.gate"):
            assert f"model.layers.{n + d}.{name}.weight" in index
    cfg2, loaded = c2jax.load_hf(str(tmp_path))
    assert cfg2.num_mtp_layers == 2
    tokens = jnp.asarray(TOKENS % 64)
    a = _apply(cfg, variables, tokens)
    b = _apply(cfg2, loaded, tokens)
    np.testing.assert_array_equal(np.asarray(a[1]["mtp_logits"]), np.asarray(b[1]["mtp_logits"]))


def test_missing_tensor_and_bad_shape_and_unknown_arch_name_the_problem(tmp_path):
    model = random_model(hf_config())
    state = {k: v.contiguous() for k, v in model.state_dict().items()}
    model.config.save_pretrained(tmp_path)
    dropped = "model.layers.1.self_attn.kv_b_proj.weight"
    save_file({k: v for k, v in state.items() if k != dropped}, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="kv_b_proj"):
        c2jax.load_hf(str(tmp_path))

    state["model.norm.weight"] = state["model.norm.weight"][:-1]
    save_file(state, str(tmp_path / "model.safetensors"))
    with pytest.raises(ValueError, match="model.norm.weight"):
        c2jax.load_hf(str(tmp_path))

    config = json.loads((tmp_path / "config.json").read_text())
    config["model_type"] = "llama"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="llama"):
        c2jax.load_hf(str(tmp_path))
    with pytest.raises(FileNotFoundError, match="config.json"):
        c2jax.load_hf(str(tmp_path / "nowhere"))


def test_cli_round_trip_through_orbax(tmp_path):
    from c2jax.checkpoint import hf
    model = random_model(hf_config())
    ref_logits, _ = logits_and_routing(model, TOKENS)
    model.save_pretrained(tmp_path / "hf")
    hf.main(["--to_orbax", str(tmp_path / "hf"), str(tmp_path / "orbax")])
    hf.main(["--to_hf", str(tmp_path / "orbax"), str(tmp_path / "hf2")])
    _, _, logits, _ = _ours(str(tmp_path / "hf2"))
    assert np.abs(logits - ref_logits).max() <= 1e-4
