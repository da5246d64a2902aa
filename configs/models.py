"""Model presets: `get_config("tiny" | "small" | "moonlight_16b_a3b" | "deepseek_v3_671b" |
"kimi_k2_1t")` returns a locked model ConfigDict (fields documented in c2jax/model/config.py).

tiny      CPU tests and the miniature recipe (vocab is set to the tokenizer's by the stages).
small     CPU benchmarks; frozen so numbers stay comparable over time: 63.8M total / 25.3M
          active parameters.
moonlight_16b_a3b, deepseek_v3_671b, kimi_k2_1t
          the published architectures (their config.json values); only ever built abstractly
          (`jax.eval_shape`) on this machine.
"""
from __future__ import annotations

from c2jax.model.config import model_config

PRESETS = ("tiny", "small", "moonlight_16b_a3b", "deepseek_v3_671b", "kimi_k2_1t")


def tiny(**overrides):
    return model_config(**overrides)


def small(**overrides):
    fields = dict(
        vocab_size=8192, hidden_size=512, num_hidden_layers=8, first_k_dense_replace=1,
        intermediate_size=1408, num_attention_heads=8, q_lora_rank=256, kv_lora_rank=128,
        qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64, n_routed_experts=16,
        num_experts_per_tok=2, n_group=4, topk_group=2, n_shared_experts=1,
        moe_intermediate_size=256, max_position_embeddings=2048,
        rope_scaling=dict(original_max_position_embeddings=2048), num_mtp_layers=0,
        routed_scaling_factor=1.0)
    fields.update(overrides)
    return model_config(**fields)


def moonlight_16b_a3b(**overrides):
    """moonshotai/Moonlight-16B-A3B config.json (DeepSeek-V3 architecture, no q compression)."""
    fields = dict(
        vocab_size=163840, hidden_size=2048, num_hidden_layers=27, first_k_dense_replace=1,
        intermediate_size=11264, num_attention_heads=16, q_lora_rank=0, kv_lora_rank=512,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_routed_experts=64,
        num_experts_per_tok=6, n_group=1, topk_group=1, n_shared_experts=2,
        moe_intermediate_size=1408, routed_scaling_factor=2.446, max_position_embeddings=8192,
        rope_theta=50000.0, rope_scaling=dict(original_max_position_embeddings=8192),
        num_mtp_layers=0, dtype="bfloat16")
    fields.update(overrides)
    return model_config(**fields)


def deepseek_v3_671b(**overrides):
    """deepseek-ai/DeepSeek-V3 config.json."""
    fields = dict(
        vocab_size=129280, hidden_size=7168, num_hidden_layers=61, first_k_dense_replace=3,
        intermediate_size=18432, num_attention_heads=128, q_lora_rank=1536, kv_lora_rank=512,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_routed_experts=256,
        num_experts_per_tok=8, n_group=8, topk_group=4, n_shared_experts=1,
        moe_intermediate_size=2048, routed_scaling_factor=2.5, max_position_embeddings=163840,
        rope_theta=10000.0,
        rope_scaling=dict(type="yarn", factor=40.0, original_max_position_embeddings=4096,
                          beta_fast=32.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0),
        num_mtp_layers=1, dtype="bfloat16")
    fields.update(overrides)
    return model_config(**fields)


def kimi_k2_1t(**overrides):
    """moonshotai/Kimi-K2-Base config.json (model_type kimi_k2, DeepseekV3ForCausalLM)."""
    fields = dict(
        vocab_size=163840, hidden_size=7168, num_hidden_layers=61, first_k_dense_replace=1,
        intermediate_size=18432, num_attention_heads=64, q_lora_rank=1536, kv_lora_rank=512,
        qk_rope_head_dim=64, qk_nope_head_dim=128, v_head_dim=128, n_routed_experts=384,
        num_experts_per_tok=8, n_group=1, topk_group=1, n_shared_experts=1,
        moe_intermediate_size=2048, routed_scaling_factor=2.827, max_position_embeddings=131072,
        rope_theta=50000.0,
        rope_scaling=dict(type="yarn", factor=32.0, original_max_position_embeddings=4096,
                          beta_fast=1.0, beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0),
        num_mtp_layers=0, dtype="bfloat16")
    fields.update(overrides)
    return model_config(**fields)


def get_config(name: str = "tiny"):
    """The preset named `name` (ml-collections `config_flags` calls this with the arg)."""
    builders = {"tiny": tiny, "small": small, "moonlight_16b_a3b": moonlight_16b_a3b,
                "deepseek_v3_671b": deepseek_v3_671b, "kimi_k2_1t": kimi_k2_1t}
    if name not in builders:
        raise ValueError(f"unknown model preset {name!r}; choose one of {PRESETS}")
    return builders[name]()
