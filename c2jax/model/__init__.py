"""The DeepSeek-V3 / Kimi-K2 MoE decoder as functions over a plain variable tree."""
from c2jax.model.config import model_config, validate
from c2jax.model.moe import update_router_bias
from c2jax.model.transformer import (Transformer, abstract_variables, apply, apply_mtp, build,
                                     init, init_sharded)

__all__ = ["Transformer", "abstract_variables", "apply", "apply_mtp", "build", "init",
           "model_config", "init_sharded", "update_router_bias", "validate"]
