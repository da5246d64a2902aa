"""Builds random HF transformers DeepseekV3 models: the oracle the parity tests compare with."""
from __future__ import annotations

import numpy as np
import torch
from transformers import DeepseekV3Config, DeepseekV3ForCausalLM

YARN = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
        "original_max_position_embeddings": 32, "beta_fast": 32.0, "beta_slow": 1.0,
        "mscale": 0.707, "mscale_all_dim": 0.707}


def hf_config(**overrides) -> DeepseekV3Config:
    """A tiny DeepSeek-V3 with group-limited routing (4 groups, top 2) and YaRN on."""
    fields = dict(
        vocab_size=96, hidden_size=48, intermediate_size=80, moe_intermediate_size=24,
        num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=4, n_shared_experts=1,
        n_routed_experts=8, routed_scaling_factor=2.5, kv_lora_rank=16, q_lora_rank=24,
        qk_rope_head_dim=8, v_head_dim=12, qk_nope_head_dim=16, n_group=4, topk_group=2,
        num_experts_per_tok=2, first_k_dense_replace=1, norm_topk_prob=True,
        max_position_embeddings=128, rope_interleave=True, rope_parameters=dict(YARN),
        num_mtp_layers=0, tie_word_embeddings=False)
    fields.update(overrides)
    return DeepseekV3Config(**fields, attn_implementation="eager")


def random_model(config: DeepseekV3Config, seed: int = 0) -> DeepseekV3ForCausalLM:
    """An fp32 model whose router is sharp enough for routing to matter and whose
    e_score_correction_bias is non-zero (HF initialises it to zero, which hides bias bugs)."""
    torch.manual_seed(seed)
    model = DeepseekV3ForCausalLM(config).eval().float()
    with torch.no_grad():
        for layer in model.model.layers[config.first_k_dense_replace:]:
            layer.mlp.gate.weight.normal_(0.0, 0.3)
            layer.mlp.gate.e_score_correction_bias.normal_(0.0, 0.05)
    return model


def logits_and_routing(model, tokens: np.ndarray):
    """float32 logits `[b, s, vocab]` and per MoE layer the sorted top-k ids `[b*s, k]`."""
    captured = []
    hooks = [layer.mlp.gate.register_forward_hook(
        lambda mod, inp, out: captured.append(np.sort(out[2].numpy(), -1)))
        for layer in model.model.layers[model.config.first_k_dense_replace:]]
    with torch.no_grad():
        logits = model(torch.as_tensor(tokens)).logits.float().numpy()
    for h in hooks:
        h.remove()
    return logits, captured
