"""Building blocks: parameters with logical axis names, matmuls, RMSNorm, SwiGLU, embeddings.

Every matrix multiply of the model goes through `project`, so the compute dtype and (later) the
low-precision recipe apply in one place. Logical axis names are attached to every parameter;
`c2jax.sharding` turns them into PartitionSpecs.
"""
from __future__ import annotations

from typing import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from c2jax.precision import dot_general_for
from c2jax.sharding import constrain


def dtype_of(name: str):
    return jnp.dtype(name)


def make_param(module: nn.Module, name: str, shape: Sequence[int], names: Sequence[str | None],
               cfg, init: str = "normal") -> jax.Array:
    """Declares a parameter of `shape` whose dims carry the logical `names`."""
    if init == "normal":
        initializer = nn.initializers.normal(stddev=cfg.initializer_range)
    elif init == "ones":
        initializer = nn.initializers.ones_init()
    else:
        raise ValueError(f"unknown initializer {init!r}")
    return module.param(name, nn.with_logical_partitioning(initializer, tuple(names)),
                        tuple(shape), dtype_of(cfg.param_dtype))


def project(equation: str, x: jax.Array, w: jax.Array, cfg) -> jax.Array:
    """`einsum(equation, x, w)` (activation first, weight second) in the compute dtype with
    float32 accumulation, through the low-precision recipe `cfg.precision_recipe`.

    "bf16" is plain XLA in `cfg.dtype`; "mxfp8" / "nvfp4" quantize both operands in the
    forward and the gradients in the backward (c2jax/precision.py, docs/low_precision.md).
    Embeddings, the LM head, the router, norms and the attention core do not come through
    here, so they stay in high precision.
    """
    dtype = dtype_of(cfg.dtype)
    kwargs = {}
    if cfg.precision_recipe != "bf16":
        kwargs["_dot_general"] = dot_general_for(cfg.precision_recipe)
    out = jnp.einsum(equation, x.astype(dtype), w.astype(dtype),
                     preferred_element_type=jnp.float32, **kwargs)
    return out.astype(dtype)


class RMSNorm(nn.Module):
    """x / rms(x) * weight, normalised in float32 (`[..., dim]` -> same shape)."""
    cfg: object
    dim: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        weight = make_param(self, "weight", (self.dim,), ("norm",), self.cfg, init="ones")
        xf = x.astype(jnp.float32)
        normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True)
                                    + self.cfg.rms_norm_eps)
        return (weight.astype(jnp.float32) * normed).astype(dtype_of(self.cfg.dtype))


class SwiGLU(nn.Module):
    """down(silu(gate(x)) * up(x)): the dense MLP and the shared experts, `[b, s, embed]`."""
    cfg: object
    width: int

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.cfg
        e = cfg.hidden_size
        gate = make_param(self, "gate_proj", (e, self.width), ("embed", "mlp"), cfg)
        up = make_param(self, "up_proj", (e, self.width), ("embed", "mlp"), cfg)
        down = make_param(self, "down_proj", (self.width, e), ("mlp", "embed"), cfg)
        names = ("activation_batch", "activation_length", "activation_mlp")
        g = constrain(project("bse,ef->bsf", x, gate, cfg), names)
        u = constrain(project("bse,ef->bsf", x, up, cfg), names)
        return project("bsf,fe->bse", nn.silu(g) * u, down, cfg)


class Embedding(nn.Module):
    """Token embedding `[vocab, embed]`; `attend` uses it as a tied LM head."""
    cfg: object

    def setup(self):
        self.embedding = make_param(self, "embedding", (self.cfg.vocab_size, self.cfg.hidden_size),
                                    ("vocab", "embed"), self.cfg)

    def __call__(self, tokens: jax.Array) -> jax.Array:
        """int `[b, s]` -> `[b, s, embed]` in the compute dtype."""
        # Gather the FSDP-sharded model dim first (as FSDP does for every weight), so the row
        # lookup partitions by tokens instead of replicating the table.
        table = constrain(self.embedding, ("vocab", None))
        out = jnp.take(table, tokens, axis=0).astype(dtype_of(self.cfg.dtype))
        return constrain(out, ("activation_batch", "activation_length", "activation_embed"))

    def attend(self, x: jax.Array) -> jax.Array:
        """`[b, s, embed]` -> float32 logits `[b, s, vocab]`."""
        dtype = dtype_of(self.cfg.dtype)
        return jnp.einsum("bse,ve->bsv", x.astype(dtype), self.embedding.astype(dtype),
                          preferred_element_type=jnp.float32)


class LMHead(nn.Module):
    """An untied output projection `[embed, vocab]` -> float32 logits `[b, s, vocab]`."""
    cfg: object

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.cfg
        w = make_param(self, "kernel", (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"), cfg)
        dtype = dtype_of(cfg.dtype)
        logits = jnp.einsum("bse,ev->bsv", x.astype(dtype), w.astype(dtype),
                            preferred_element_type=jnp.float32)
        return constrain(logits, ("activation_batch", "activation_length", "activation_vocab"))
