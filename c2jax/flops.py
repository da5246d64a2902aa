"""Parameter and FLOP accounting for the model config, and MFU.

Counts are analytic, from the config alone, so they work for 1T-parameter configs that are
never built; `tests/test_flops.py` checks them against the real variable tree of small ones.

FLOPs follow MaxText's method (`calculate_tflops_training_per_device`): a matmul with N weights
costs 2N FLOPs per token forward and 4N backward (6N per trained token), counted over the
*active* weights only (top-k routed experts, not all of them); causal attention adds
QK^T and AV over the visible prefix, on average half the sequence.
"""
from __future__ import annotations

from c2jax.model.config import num_moe_layers, qk_head_dim


def _attention_params(cfg) -> int:
    e, h = cfg.hidden_size, cfg.num_attention_heads
    qk = qk_head_dim(cfg)
    if cfg.q_lora_rank:
        q = e * cfg.q_lora_rank + cfg.q_lora_rank + cfg.q_lora_rank * h * qk
    else:
        q = e * h * qk
    kv = (e * (cfg.kv_lora_rank + cfg.qk_rope_head_dim) + cfg.kv_lora_rank
          + cfg.kv_lora_rank * h * (cfg.qk_nope_head_dim + cfg.v_head_dim))
    return q + kv + h * cfg.v_head_dim * e


def _swiglu(e: int, width: int) -> int:
    return 3 * e * width


def _layer_params(cfg, moe: bool, active: bool) -> int:
    e = cfg.hidden_size
    norms = 2 * e
    if not moe:
        return norms + _attention_params(cfg) + _swiglu(e, cfg.intermediate_size)
    experts = cfg.num_experts_per_tok if active else cfg.n_routed_experts
    ffn = (experts + cfg.n_shared_experts) * _swiglu(e, cfg.moe_intermediate_size)
    router = e * cfg.n_routed_experts
    return norms + _attention_params(cfg) + ffn + router


def param_counts(cfg) -> dict[str, int]:
    """Parameter counts of the main model (MTP modules excluded, as in DeepSeek-V3's "671B"):
    `total` (every weight), `active` (the weights one token touches: its top-k routed experts
    and not the others; the input embedding table included), `active_matmul` (the same without
    the input embedding, a lookup rather than a matmul: what 6N FLOPs counts), `mtp` (the MTP
    modules), `embedding` (input table), `lm_head`, and `router_bias` (not trainable, not in
    total). Published "activated" counts are rounded and sit between the two active counts."""
    e, v = cfg.hidden_size, cfg.vocab_size
    k_dense, n_moe = cfg.first_k_dense_replace, num_moe_layers(cfg)
    embedding = v * e
    lm_head = 0 if cfg.tie_word_embeddings else v * e
    shared = embedding + lm_head + e  # + final norm
    total = (shared + k_dense * _layer_params(cfg, False, False)
             + n_moe * _layer_params(cfg, True, False))
    active = (shared + k_dense * _layer_params(cfg, False, True)
              + n_moe * _layer_params(cfg, True, True))
    mtp_per_module = 2 * e * e + 3 * e + _layer_params(cfg, True, False)  # eh_proj, 3 norms
    return {
        "total": total,
        "active": active,
        "active_matmul": active - embedding,
        "mtp": cfg.num_mtp_layers * mtp_per_module,
        "embedding": embedding,
        "lm_head": lm_head,
        "router_bias": (n_moe + cfg.num_mtp_layers) * cfg.n_routed_experts,
    }


def matmul_params_per_token(cfg, include_mtp: bool = True) -> int:
    """Weights one token multiplies through (active experts only; the embedding lookup is not
    a matmul, a tied embedding used as the head is)."""
    counts = param_counts(cfg)
    matmul = counts["active_matmul"]
    if cfg.tie_word_embeddings:
        matmul += counts["embedding"]
    if include_mtp and cfg.num_mtp_layers:
        mtp_active = (2 * cfg.hidden_size * cfg.hidden_size
                      + _layer_params(cfg, True, True)) + cfg.vocab_size * cfg.hidden_size
        matmul += cfg.num_mtp_layers * mtp_active
    return matmul


def attention_flops_per_token(cfg, seq_len: int, include_mtp: bool = True) -> float:
    """Forward FLOPs of QK^T and AV per token, causal (average context seq_len / 2)."""
    h = cfg.num_attention_heads
    per_layer = 2 * h * (qk_head_dim(cfg) + cfg.v_head_dim) * (seq_len / 2)
    layers = cfg.num_hidden_layers + (cfg.num_mtp_layers if include_mtp else 0)
    return per_layer * layers


def training_flops_per_token(cfg, seq_len: int, include_mtp: bool = True) -> float:
    """Forward + backward FLOPs per trained token: 6 N_active + 3 x causal attention."""
    return (6 * matmul_params_per_token(cfg, include_mtp)
            + 3 * attention_flops_per_token(cfg, seq_len, include_mtp))


def forward_flops_per_token(cfg, seq_len: int, include_mtp: bool = False) -> float:
    """Forward FLOPs per token (inference: MTP off by default)."""
    return (2 * matmul_params_per_token(cfg, include_mtp)
            + attention_flops_per_token(cfg, seq_len, include_mtp))


def mfu(tokens_per_second: float, flops_per_token: float, peak_flops: float) -> float:
    """Model FLOPs utilisation: achieved model FLOP/s over the hardware peak."""
    return tokens_per_second * flops_per_token / peak_flops
