"""The model config: every architecture field with its default, and its validation.

Field names follow Hugging Face's `DeepseekV3Config` where one exists, so a researcher can read
a `config.json` next to ours. Presets (tiny, small, moonlight, DeepSeek-V3, Kimi K2) live in
`configs/models.py`; they start from `model_config()` and override fields.
"""
from __future__ import annotations

import ml_collections

DISPATCH_BACKENDS = ("dense", "capacity", "ragged")
SCORING_FUNCS = ("sigmoid", "softmax")
ROPE_TYPES = ("default", "yarn")
REMAT_POLICIES = ("none", "full", "dots", "dots_no_batch")
PRECISION_RECIPES = ("bf16", "mxfp8", "nvfp4")
DTYPES = ("float32", "bfloat16", "float16")


def model_config(**overrides) -> ml_collections.ConfigDict:
    """Returns the default (tiny) model config with `overrides` applied; the result is locked."""
    c = ml_collections.ConfigDict()
    # --- sizes -------------------------------------------------------------------------------
    c.vocab_size = 256               # tokens in the vocabulary (input embedding and LM head rows)
    c.hidden_size = 64               # residual stream width `embed`
    c.num_hidden_layers = 2          # decoder layers, dense ones first (MTP layers not included)
    c.first_k_dense_replace = 1      # the first k layers use a dense SwiGLU MLP instead of MoE
    c.intermediate_size = 128        # hidden width of the dense SwiGLU MLP
    c.tie_word_embeddings = False    # LM head shares the input embedding matrix
    c.rms_norm_eps = 1e-6
    c.initializer_range = 0.02       # std of the normal init of every matrix
    # --- Multi-head Latent Attention (DeepSeek-V2 sec. 2.1) ----------------------------------
    c.num_attention_heads = 4
    c.q_lora_rank = 32               # query compression rank; 0 = plain query projection (V2-Lite)
    c.kv_lora_rank = 16              # KV latent width (what the decode cache stores, with the rope key)
    c.qk_nope_head_dim = 16          # per-head query/key dims without position encoding
    c.qk_rope_head_dim = 8           # decoupled RoPE key dims, one key shared by all heads
    c.v_head_dim = 16                # per-head value dims
    c.max_position_embeddings = 512  # longest sequence the model is configured for
    c.attention_block_size = 128     # causal query blocks skip later keys (0 = one block)
    # --- RoPE / YaRN (YaRN paper, arXiv:2309.00071; DeepSeek-V3 config.json) -----------------
    c.rope_theta = 10000.0
    c.rope_interleave = True         # rotate pairs (2i, 2i+1) as DeepSeek's weights expect
    c.rope_scaling = ml_collections.ConfigDict()
    c.rope_scaling.type = "default"  # "default" (plain RoPE) or "yarn"
    c.rope_scaling.factor = 1.0      # context extension factor s
    c.rope_scaling.original_max_position_embeddings = 512  # pretraining length YaRN extends
    c.rope_scaling.beta_fast = 32.0  # YaRN ramp: dims rotating more than beta_fast times extrapolate
    c.rope_scaling.beta_slow = 1.0   # YaRN ramp: dims rotating fewer than beta_slow times interpolate
    c.rope_scaling.mscale = 1.0      # cos/sin scale numerator: 0.1*mscale*ln(s)+1
    c.rope_scaling.mscale_all_dim = 0.0  # softmax scale gets (0.1*mscale_all_dim*ln(s)+1)^2; 0 = off
    c.rope_scaling.truncate = True   # floor/ceil the YaRN correction range (DeepSeek, HF default)
    # --- Mixture of Experts (DeepSeek-V3 sec. 2.1.2) -----------------------------------------
    c.n_routed_experts = 8
    c.num_experts_per_tok = 2        # top-k routed experts per token
    c.n_group = 2                    # expert groups for group-limited routing (1 = no grouping)
    c.topk_group = 1                 # groups a token may route into
    c.n_shared_experts = 1           # always-on experts, one SwiGLU of width n*moe_intermediate_size
    c.moe_intermediate_size = 32     # hidden width of one expert
    c.scoring_func = "sigmoid"       # router affinity: "sigmoid" (V3) or "softmax" (V2)
    c.norm_topk_prob = True          # renormalise the k selected weights to sum to 1
    c.routed_scaling_factor = 1.0    # multiplies the routed output (2.5 in V3, 2.827 in K2)
    c.router_bias_update_rate = 1e-3  # aux-loss-free balancing: bias += rate*sign(mean_load-load)
    c.seq_aux_loss_alpha = 0.0       # weight of the sequence-wise balance loss (V3 eq. 17-20); 0 = off
    c.moe_dispatch = "capacity"      # "dense" (one-hot, dropless reference) | "capacity" | "ragged"
    c.capacity_factor = 2.0          # capacity = ceil(factor * tokens * k / experts) per shard
    c.capacity_tiers = True          # dropless capacity (>= tokens, as when sampling) runs at the
                                     # smallest of mean-load x 1, 2, 4.. that fits (lax.switch)
    # --- Multi-Token Prediction (DeepSeek-V3 sec. 2.2) ---------------------------------------
    c.num_mtp_layers = 1             # MTP depth D; module k predicts token i+k+1
    # --- numerics and compilation ------------------------------------------------------------
    c.dtype = "float32"              # activation/compute dtype
    c.param_dtype = "float32"        # master weight dtype
    # Compute dtype of the output head and the final norms before it ("" = `dtype`). "float32"
    # under a bf16 `dtype` keeps the logits a sampler draws from in full precision: the RL
    # actor's default, the fix MiniMax-M1 (arXiv 2506.13585) reports for the gap between
    # training and inference token probabilities.
    c.head_dtype = ""
    c.remat_policy = "none"          # "none" | "full" | "dots" (save matmul outputs) | "dots_no_batch"
    # Layers per iteration of the scanned layer stacks (0 = unroll them completely). Unrolled,
    # XLA keeps each layer's residuals apart instead of stacking them in a loop carry: on a
    # CPU the `small` step went from 4.4 to 3.7 s; compiles take longer with many layers.
    c.scan_unroll = 1
    # Low-precision recipe of every dense and expert matmul: "bf16" (plain, in `dtype`),
    # "mxfp8" or "nvfp4" (quantized fprop/dgrad/wgrad, see docs/low_precision.md).
    c.precision_recipe = "bf16"
    # Locked before the overrides, so a misspelt field raises instead of becoming a new one.
    c.lock()
    c.update(overrides)
    return c


def _fail(field: str, value, why: str):
    raise ValueError(f"model config field '{field}' = {value!r} is invalid: {why}")


def validate(cfg: ml_collections.ConfigDict) -> None:
    """Raises ValueError naming the first field that makes `cfg` an impossible architecture."""
    positive = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size",
                            "num_attention_heads", "kv_lora_rank", "qk_rope_head_dim", "v_head_dim",
                            "max_position_embeddings")
    for f in positive:
        if int(cfg[f]) <= 0:
            _fail(f, cfg[f], "must be positive")
    for f in ("q_lora_rank", "qk_nope_head_dim", "num_mtp_layers", "n_shared_experts",
              "attention_block_size", "scan_unroll"):
        if int(cfg[f]) < 0:
            _fail(f, cfg[f], "must be >= 0")
    if cfg.qk_rope_head_dim % 2:
        _fail("qk_rope_head_dim", cfg.qk_rope_head_dim, "RoPE rotates pairs, so it must be even")
    if not 0 <= cfg.first_k_dense_replace <= cfg.num_hidden_layers:
        _fail("first_k_dense_replace", cfg.first_k_dense_replace,
                    f"must be in [0, num_hidden_layers={cfg.num_hidden_layers}]")
    has_moe = cfg.first_k_dense_replace < cfg.num_hidden_layers or cfg.num_mtp_layers > 0
    if has_moe:
        if cfg.n_routed_experts <= 0:
            _fail("n_routed_experts", cfg.n_routed_experts, "MoE layers need at least one expert")
        if cfg.moe_intermediate_size <= 0:
            _fail("moe_intermediate_size", cfg.moe_intermediate_size, "must be positive")
        if not 0 < cfg.num_experts_per_tok <= cfg.n_routed_experts:
            _fail("num_experts_per_tok", cfg.num_experts_per_tok,
                        f"must be in [1, n_routed_experts={cfg.n_routed_experts}]")
        if cfg.n_group <= 0 or cfg.n_routed_experts % cfg.n_group:
            _fail("n_group", cfg.n_group,
                        f"must be positive and divide n_routed_experts={cfg.n_routed_experts}")
        if not 0 < cfg.topk_group <= cfg.n_group:
            _fail("topk_group", cfg.topk_group, f"must be in [1, n_group={cfg.n_group}]")
        per_group = cfg.n_routed_experts // cfg.n_group
        if cfg.n_group > 1 and per_group < 2:
            _fail("n_group", cfg.n_group, "group scores sum the top-2 experts of a group, so every "
                        "group needs at least 2 experts")
        if cfg.topk_group * per_group < cfg.num_experts_per_tok:
            _fail("topk_group", cfg.topk_group,
                        f"the {cfg.topk_group} selected groups hold {cfg.topk_group * per_group} experts, "
                        f"fewer than num_experts_per_tok={cfg.num_experts_per_tok}")
        if cfg.scoring_func not in SCORING_FUNCS:
            _fail("scoring_func", cfg.scoring_func, f"choose one of {SCORING_FUNCS}")
        if cfg.moe_dispatch not in DISPATCH_BACKENDS:
            _fail("moe_dispatch", cfg.moe_dispatch, f"choose one of {DISPATCH_BACKENDS}")
        if cfg.capacity_factor <= 0:
            _fail("capacity_factor", cfg.capacity_factor, "must be positive")
    rs = cfg.rope_scaling
    if rs.type not in ROPE_TYPES:
        _fail("rope_scaling.type", rs.type, f"choose one of {ROPE_TYPES}")
    if rs.type == "yarn":
        if rs.factor < 1.0:
            _fail("rope_scaling.factor", rs.factor, "YaRN extends context, so factor must be >= 1")
        if rs.original_max_position_embeddings <= 0:
            _fail("rope_scaling.original_max_position_embeddings",
                        rs.original_max_position_embeddings, "must be positive")
    if cfg.head_dtype and cfg.head_dtype not in DTYPES:
        _fail("head_dtype", cfg.head_dtype, f"choose '' (the compute dtype) or one of {DTYPES}")
    for f, allowed in (("dtype", DTYPES), ("param_dtype", DTYPES),
                                          ("remat_policy", REMAT_POLICIES),
                     ("precision_recipe", PRECISION_RECIPES)):
        if cfg[f] not in allowed:
            _fail(f, cfg[f], f"choose one of {allowed}")


def rope_limit(cfg: ml_collections.ConfigDict) -> int:
    """The longest sequence the rope setting is meant for (scaled length under YaRN)."""
    rs = cfg.rope_scaling
    if rs.type == "yarn":
        return int(rs.original_max_position_embeddings * rs.factor)
    return int(cfg.max_position_embeddings)


def qk_head_dim(cfg) -> int:
    """Per-head query/key width: the non-rotary part plus the rotary part."""
    return cfg.qk_nope_head_dim + cfg.qk_rope_head_dim


def num_moe_layers(cfg) -> int:
    return cfg.num_hidden_layers - cfg.first_k_dense_replace
