"""c2jax: the Composer 2 recipe in JAX. Public entry points:

    cfg, params = c2jax.load_hf(path)           # HF DeepSeek-V3 / Kimi-K2 checkpoint
    logits = c2jax.forward(cfg, params, tokens)  # float32 [batch, seq, vocab]
    c2jax.save_hf(path, cfg, params)
    gens = c2jax.generate(cfg, params, prompts, max_new_tokens=64, temperature=0.7)

`params` is the model's variable tree {"params": weights, "router_bias": MoE biases}.
"""
from c2jax import model
from c2jax.checkpoint.hf import load_hf, save_hf
from c2jax.sampling import generate


def forward(cfg, params, tokens):
    """Main-head logits, float32 `[batch, seq, vocab]`, for int tokens `[batch, seq]` (jitted)."""
    import jax
    import jax.numpy as jnp
    run = jax.jit(lambda p, t: model.apply(p, t, cfg=cfg)[0].astype(jnp.float32))
    return run(params, jnp.asarray(tokens))


__all__ = ["forward", "generate", "load_hf", "model", "save_hf"]
