"""Building blocks: parameters with logical axis names, matmuls, RMSNorm, SwiGLU, embeddings.

Every matrix multiply of the model goes through `project`, so the compute dtype and (later) the
low-precision recipe apply in one place. Logical axis names are attached to every parameter;
`c2jax.sharding` turns them into PartitionSpecs.
"""
from __future__ import annotations

import functools
from typing import Sequence

import jax
import jax.numpy as jnp
from flax import linen as nn

from c2jax.precision import dot_general_for
from c2jax.sharding import constrain


def dtype_of(name: str):
    return jnp.dtype(name)


def head_dtype(cfg):
    """The compute dtype of the output head and the norm before it: `cfg.head_dtype`, or the
    model's compute dtype when that is empty."""
    return dtype_of(cfg.head_dtype or cfg.dtype)


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
    if cfg.precision_recipe == "bf16" and dtype != jnp.float32:
        return mixed_einsum(equation, x.astype(dtype), w)
    kwargs = {}
    if cfg.precision_recipe != "bf16":
        kwargs["_dot_general"] = dot_general_for(cfg.precision_recipe)
    out = jnp.einsum(equation, x.astype(dtype), w.astype(dtype),
                     preferred_element_type=jnp.float32, **kwargs)
    return out.astype(dtype)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0, 3))
def mixed_einsum(equation: str, x: jax.Array, w: jax.Array, out_dtype=None) -> jax.Array:
    """`einsum(equation, x, w)` with x in the compute dtype (e.g. bf16) and w the float32
    master weight (or another activation): w is cast to x's dtype, products accumulate in
    float32, the result is in `out_dtype` (default x's dtype; float32 for logits).

    The backward runs its two GEMMs the same way, on the cotangent in x's dtype: dx =
    `einsum(out, w -> x)` in x's dtype and dw = `einsum(x, out -> w)` in float32. Autodiff of
    an einsum with `preferred_element_type=float32` would instead see a float32 cotangent and
    run both backward GEMMs in float32, several times slower than bf16 on CPUs and GPUs alike.
    `equation` is "x,w->out" with no index repeated within an operand and every index of x in
    w or out (true of every projection of the model).
    """
    return jnp.einsum(equation, x, w.astype(x.dtype),
                      preferred_element_type=jnp.float32).astype(out_dtype or x.dtype)


def _mixed_einsum_fwd(equation, x, w, out_dtype):
    return mixed_einsum(equation, x, w, out_dtype), (x, w)


def _mixed_einsum_bwd(equation, out_dtype, residuals, g):
    x, w = residuals
    operands, out = equation.replace(" ", "").split("->")
    x_axes, w_axes = operands.split(",")
    g = g.astype(x.dtype)
    dx = jnp.einsum(f"{out},{w_axes}->{x_axes}", g, w.astype(x.dtype),
                    preferred_element_type=jnp.float32).astype(x.dtype)
    x_moved, x_moved_axes = _contracted_last(x, x_axes, keep=w_axes, out=out)
    dw = jnp.einsum(f"{x_moved_axes},{out}->{w_axes}", x_moved, g,
                    preferred_element_type=jnp.float32).astype(w.dtype)
    return _sum_over_extra_axes(dx, x), _sum_over_extra_axes(dw, w)


def _varying_axes(x) -> frozenset:
    """The manual mesh axes x varies over inside a shard_map (empty outside one)."""
    aval = jax.typeof(x)
    manual = getattr(aval, "manual_axis_type", None)
    return frozenset(manual.varying) if manual is not None else frozenset(
        getattr(aval, "vma", ()))


def _sum_over_extra_axes(cotangent, primal):
    """Inside a shard_map a weight that is the same on every `fsdp` shard meets activations
    that differ per shard; its gradient is the sum over those shards. Autodiff inserts that
    psum itself; a custom backward has to."""
    extra = tuple(sorted(_varying_axes(cotangent) - _varying_axes(primal)))
    return jax.lax.psum(cotangent, extra) if extra else cotangent


def _contracted_last(x: jax.Array, axes: str, *, keep: str, out: str) -> tuple[jax.Array, str]:
    """On CPU, x physically transposed so the axes it shares only with `out` (the ones the
    weight gradient sums over: tokens) come last; elsewhere x unchanged. Returns (x, its axes).
    """
    summed = [a for a in axes if a in out and a not in keep]
    order = [a for a in axes if a not in summed] + summed
    if jax.default_backend() != "cpu" or order == list(axes) or len(axes) < 2:
        return x, axes
    return transposed_in_memory(x, [axes.index(a) for a in order]), "".join(order)


def transposed_in_memory(x: jax.Array, order: Sequence[int]) -> jax.Array:
    """`jnp.transpose(x, order)`, on CPU forced to be a real copy (x has >= 2 dims).

    XLA:CPU folds a transpose into the dot's dimension numbers and then runs a dot that
    contracts the leading dim of its left operand, `[k, m] x [k, n]`, 3-4x slower than the
    same product with `[m, k]` laid out in memory (measured: 233 against 967 GFLOP/s for
    `[4096, 512]^T x [4096, 1408]` in bf16). Merging the last two dims behind an optimization
    barrier makes the transpose a copy, a few percent of the GEMM's time.
    """
    x = jnp.transpose(x, order)
    if jax.default_backend() != "cpu":
        return x
    shape = x.shape
    merged = jax.lax.optimization_barrier(x.reshape(shape[:-2] + (shape[-2] * shape[-1],)))
    return merged.reshape(shape)


mixed_einsum.defvjp(_mixed_einsum_fwd, _mixed_einsum_bwd)


def logits_einsum(equation: str, x: jax.Array, w: jax.Array, cfg) -> jax.Array:
    """The output head: float32 logits from x and w in `head_dtype(cfg)` (never through a
    low-precision recipe); in bf16 its backward GEMMs take the bf16 cotangent (`mixed_einsum`)."""
    dtype = head_dtype(cfg)
    if dtype != jnp.float32:
        return mixed_einsum(equation, x.astype(dtype), w, jnp.float32)
    return jnp.einsum(equation, x.astype(dtype), w.astype(dtype),
                      preferred_element_type=jnp.float32)


class RMSNorm(nn.Module):
    """x / rms(x) * weight, normalised in float32 (`[..., dim]` -> same shape), returned in the
    compute dtype, or in `head_dtype(cfg)` for a norm that feeds the output head (`head`)."""
    cfg: object
    dim: int
    head: bool = False

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        weight = make_param(self, "weight", (self.dim,), ("norm",), self.cfg, init="ones")
        xf = x.astype(jnp.float32)
        normed = xf * jax.lax.rsqrt(jnp.mean(xf * xf, axis=-1, keepdims=True)
                                    + self.cfg.rms_norm_eps)
        out_dtype = head_dtype(self.cfg) if self.head else dtype_of(self.cfg.dtype)
        return (weight.astype(jnp.float32) * normed).astype(out_dtype)


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
        return logits_einsum("bse,ve->bsv", x, self.embedding, self.cfg)


class LMHead(nn.Module):
    """An untied output projection `[embed, vocab]` -> float32 logits `[b, s, vocab]`."""
    cfg: object

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        cfg = self.cfg
        w = make_param(self, "kernel", (cfg.hidden_size, cfg.vocab_size), ("embed", "vocab"), cfg)
        logits = logits_einsum("bse,ev->bsv", x, w, cfg)
        return constrain(logits, ("activation_batch", "activation_length", "activation_vocab"))
