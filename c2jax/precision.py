"""Low-precision training recipes as a drop-in ``dot_general``: bf16 | mxfp8 | nvfp4.

``dot_general_for(recipe, key)`` returns a function with ``jax.lax.dot_general``'s signature
``(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None)``. Hand it to
every dense and expert matmul::

    dg = dot_general_for(cfg.precision.recipe, key=jax.random.fold_in(step_key, layer))
    nn.Dense(features, dot_general=dg)                      # Flax: y = x @ kernel
    jnp.einsum("ecd,edf->ecf", x, w_experts, _dot_general=dg)   # activation first, weight second

Keep embeddings, the LM head, the router, norms and the attention core (QK^T, softmax, PV)
on plain ``jax.lax.dot_general`` (``dot_general_for("bf16")``), as do DeepSeek-V3 and NVIDIA.

For a quantized recipe, one call is three quantized GEMMs (TransformerEngine's
fprop / dgrad / wgrad), all with f32 accumulation. With ``lhs`` the activation ``X [.., K]``
and ``rhs`` the weight ``W``, contraction over K, output ``Y [.., N]``:

| GEMM                  | operands (quantized along) | mxfp8: E4M3, 1x32 | nvfp4: E2M1, 1x16       |
|-----------------------|----------------------------|-------------------|-------------------------|
| fprop ``Y = X W``     | X, W along K               | RNE               | X RNE; W 16x16 tiles RNE|
| dgrad ``dX = dY W^T`` | dY, W along N              | RNE               | dY stochastic; W 16x16  |
|                       |                            |                   | (the codes of fprop)    |
| wgrad ``dW = X^T dY`` | X, dY along the tokens M   | RNE               | both Hadamard-rotated;  |
|                       |                            |                   | X RNE; dY stochastic    |

Each backward operand is re-quantized from the high-precision original along its new
contraction axis (a rowwise and a columnwise MXFP8 copy differ and cannot be derived from
each other); so ``lhs`` and ``rhs`` are kept as residuals in their input dtype. MXFP8 uses
E4M3 for gradients too (E5M2 gradients diverged in NVIDIA-NeMo/Megatron-Bridge PR #638).
NVFP4 follows arXiv 2509.25149: stochastic rounding for gradients only, a 16x16 random
Hadamard transform on the wgrad inputs (one sign vector for all layers and steps), 2-D
weight tiles so fprop and dgrad see the same quantized weight.

Shapes: any ``dimension_numbers`` (batch dims included: expert einsums). Operands are
flattened to ``[batch, rows, contraction]``; a rows or contraction size that is not a multiple
of the block (32 for mxfp8, 16 for nvfp4) is zero-padded, which changes neither block scales
nor the result. The NVFP4 global scale is one per operand tensor (over all batch/experts).

Stochastic-rounding key: the returned function numbers its calls 0, 1, 2... in trace order
and uses ``fold_in(key, call_number)``; the dgrad and wgrad gradients then use
``fold_in(., 0)`` and ``fold_in(., 1)``. Pass a key that changes every step and layer (e.g.
``fold_in(fold_in(seed_key, step), layer)``, or ``self.make_rng("lowp")`` inside a Flax
module); with ``key=None`` a fixed key ``jax.random.key(0)`` is used, so the rounding noise
repeats from step to step. Only nvfp4 with stochastic rounding reads the key.

``recipe="identity"`` runs the same machinery (canonical layout, padding, three GEMMs in the
backward) with identity quantizers: its gradients equal plain autodiff exactly, which is how
the tests pin the plumbing. On CPU all quantized recipes compute exactly what the Pallas
kernels compute (``impl="auto"`` picks the jnp references there; the kernels are
bit-identical to them).
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
import math

import jax
import jax.numpy as jnp
from jax import lax

import pallas_kernels as pk

RECIPES = ("bf16", "mxfp8", "nvfp4", "identity")
BLOCK_SIZE = {"mxfp8": pk.MXFP8_BLOCK, "nvfp4": pk.NVFP4_BLOCK, "identity": pk.MXFP8_BLOCK}


@dataclasses.dataclass(frozen=True)
class Recipe:
    """The static part of a quantized dot_general (hashable: it is a custom_vjp static arg)."""
    name: str                          # "mxfp8" | "nvfp4" | "identity"
    impl: str = "auto"                 # pallas_kernels impl: "auto" | "reference" | "pallas"
    weight_operand: str = "rhs"        # which operand is the weight (nvfp4: 16x16 tiles)
    stochastic_rounding: bool = True   # nvfp4: stochastic rounding of gradients
    hadamard: bool = True              # nvfp4: random Hadamard transform on wgrad inputs
    hadamard_sign: tuple = ()          # nvfp4: the shared +-1 sign vector (16 floats)

    @property
    def block(self) -> int:
        return BLOCK_SIZE[self.name]


def dot_general_for(recipe: str, key: jax.Array | None = None, *, impl: str = "auto",
                    weight_operand: str = "rhs", stochastic_rounding: bool = True,
                    hadamard: bool = True, hadamard_seed: int = 0):
    """A ``jax.lax.dot_general`` replacement for ``recipe`` (see the module docstring).

    Args:
      recipe: "bf16" (returns ``jax.lax.dot_general`` itself), "mxfp8", "nvfp4", or "identity".
      key: jax.random key for nvfp4 stochastic rounding; vary it per step and per layer.
      impl: pallas_kernels implementation ("auto": jnp references on CPU; on a GPU the Pallas
        quantizers with XLA bf16 GEMMs, or cuDNN block-scaled GEMMs on Blackwell).
      weight_operand: "rhs" (Flax Dense, ``einsum(x, w)``) or "lhs"; nvfp4 quantizes the
        weight in 16x16 tiles and its gradient's GEMM gets the Hadamard transform.
      stochastic_rounding, hadamard, hadamard_seed: nvfp4 ablation knobs (TE's
        ``disable_stochastic_rounding`` / ``disable_rht``).
    """
    if recipe not in RECIPES:
        raise ValueError(f"precision recipe must be one of {RECIPES}, got {recipe!r}")
    if weight_operand not in ("lhs", "rhs"):
        raise ValueError(f"weight_operand must be 'lhs' or 'rhs', got {weight_operand!r}")
    if recipe == "bf16":
        return lax.dot_general
    sign = ()
    if recipe == "nvfp4" and hadamard:
        with jax.ensure_compile_time_eval():      # a constant, even inside a jit trace
            sign = tuple(float(s) for s in pk.hadamard_sign(jax.random.key(hadamard_seed)))
    static = Recipe(recipe, impl, weight_operand, stochastic_rounding, hadamard, sign)
    uses_key = recipe == "nvfp4" and stochastic_rounding
    base_key = jax.random.key(0) if key is None else key
    call_numbers = itertools.count()

    def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None,
                    out_sharding=None):
        del precision  # the quantized GEMMs accumulate in f32 whatever the requested precision
        if out_sharding is not None:
            raise NotImplementedError(
                f"dot_general_for({recipe!r}) does not take out_sharding; constrain the result "
                f"with jax.lax.with_sharding_constraint instead")
        for name, operand in (("lhs", lhs), ("rhs", rhs)):
            if not jnp.issubdtype(operand.dtype, jnp.floating):
                raise TypeError(f"dot_general_for({recipe!r}): {name} must be floating, got "
                                f"{operand.dtype}")
        out_dtype = jnp.dtype(preferred_element_type or jnp.result_type(lhs.dtype, rhs.dtype))
        call_number = next(call_numbers)
        call_key = jax.random.fold_in(base_key, call_number) if uses_key else None
        dimension_numbers = _normalize_dimension_numbers(dimension_numbers, lhs.ndim, rhs.ndim)
        return _quantized_dot_general(lhs, rhs, call_key, dimension_numbers, static, out_dtype)

    return dot_general


# ----------------------------------------------------------------------------------------
# Canonical layout: lhs -> [B, M, K], rhs -> [B, N, K], out [B, M, N].
# ----------------------------------------------------------------------------------------

def _normalize_dimension_numbers(dimension_numbers, lhs_ndim, rhs_ndim):
    (lc, rc), (lb, rb) = dimension_numbers
    norm = lambda dims, ndim: tuple(int(d) % ndim for d in dims)
    return ((norm(lc, lhs_ndim), norm(rc, rhs_ndim)), (norm(lb, lhs_ndim), norm(rb, rhs_ndim)))


@dataclasses.dataclass(frozen=True)
class _Canonical:
    lhs_perm: tuple
    rhs_perm: tuple
    batch_shape: tuple
    lhs_free_shape: tuple
    rhs_free_shape: tuple
    contract_shape: tuple          # in lhs order
    rhs_contract_shape: tuple      # in rhs order (same sizes, paired with lhs)

    @property
    def sizes(self):
        return tuple(math.prod(s) for s in (self.batch_shape, self.lhs_free_shape,
                                             self.rhs_free_shape, self.contract_shape))

    @property
    def out_shape(self):
        return self.batch_shape + self.lhs_free_shape + self.rhs_free_shape

    def lhs_to(self, lhs):
        b, m, _, k = self.sizes
        return jnp.transpose(lhs, self.lhs_perm).reshape(b, m, k)

    def rhs_to(self, rhs):
        b, _, n, k = self.sizes
        return jnp.transpose(rhs, self.rhs_perm).reshape(b, n, k)

    def lhs_from(self, d):
        d = d.reshape(self.batch_shape + self.lhs_free_shape + self.contract_shape)
        return jnp.transpose(d, _inverse(self.lhs_perm))

    def rhs_from(self, d):
        d = d.reshape(self.batch_shape + self.rhs_free_shape + self.rhs_contract_shape)
        return jnp.transpose(d, _inverse(self.rhs_perm))


def _inverse(perm):
    inverse = [0] * len(perm)
    for i, p in enumerate(perm):
        inverse[p] = i
    return tuple(inverse)


def _canonical(lhs_shape, rhs_shape, dimension_numbers) -> _Canonical:
    (lc, rc), (lb, rb) = dimension_numbers
    lhs_free = tuple(d for d in range(len(lhs_shape)) if d not in lc + lb)
    rhs_free = tuple(d for d in range(len(rhs_shape)) if d not in rc + rb)
    pick = lambda shape, dims: tuple(shape[d] for d in dims)
    return _Canonical(
        lhs_perm=lb + lhs_free + lc, rhs_perm=rb + rhs_free + rc,
        batch_shape=pick(lhs_shape, lb), lhs_free_shape=pick(lhs_shape, lhs_free),
        rhs_free_shape=pick(rhs_shape, rhs_free), contract_shape=pick(lhs_shape, lc),
        rhs_contract_shape=pick(rhs_shape, rc))


def _pad_to(x, axis_multiples):
    """Zero-pad x [B, R, C] so R and C are multiples of the given sizes."""
    pads = [(0, 0)] + [(0, -size % multiple) for size, multiple in zip(x.shape[1:], axis_multiples)]
    if all(p == (0, 0) for p in pads):
        return x
    return jnp.pad(x, pads)


# ----------------------------------------------------------------------------------------
# One quantized GEMM: a [B, R, C] x b [B, S, C] -> [B, R, S], contraction over C.
# ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class _Operand:
    """How one GEMM operand is quantized along its contraction (last) axis."""
    two_d: bool = False                  # nvfp4 16x16 weight tiles
    stochastic_key: jax.Array | None = None
    hadamard: bool = False


def _quantize(x, operand: _Operand, recipe: Recipe):
    if recipe.name == "mxfp8":
        codes, scales = pk.quantize_mxfp8(x, axis=-1, impl=recipe.impl)
        return codes, scales, None
    if operand.hadamard:
        sign = jnp.asarray(recipe.hadamard_sign, jnp.float32)
        x = pk.random_hadamard_transform(x, sign, axis=-1, impl=recipe.impl)
    rounding = "rne" if operand.stochastic_key is None else "stochastic"
    return pk.quantize_nvfp4(x, axis=-1, two_d=operand.two_d, rounding=rounding,
                             key=operand.stochastic_key, impl=recipe.impl)


def _gemm(a, b, a_operand: _Operand, b_operand: _Operand, recipe: Recipe):
    """f32 result of a [B, R, C] x b [B, S, C] with both operands quantized along C."""
    block = recipe.block
    rows, cols = a.shape[1], b.shape[1]
    a = _pad_to(a.astype(jnp.float32), (block, block))
    b = _pad_to(b.astype(jnp.float32), (block, block))
    if recipe.name == "identity":
        out = jnp.einsum("brc,bsc->brs", a, b, precision=lax.Precision.HIGHEST,
                         preferred_element_type=jnp.float32)
    else:
        a_codes, a_scales, a_global = _quantize(a, a_operand, recipe)
        b_codes, b_scales, b_global = _quantize(b, b_operand, recipe)
        out = pk.grouped_scaled_matmul(a_codes, a_scales, b_codes, b_scales, recipe.name,
                                       a_global_scale=a_global, b_global_scale=b_global,
                                       impl=recipe.impl)
    return out[:, :rows, :cols]


# ----------------------------------------------------------------------------------------
# The custom_vjp.
# ----------------------------------------------------------------------------------------

def _roles(recipe: Recipe, key):
    """Quantization of every GEMM operand: (fprop lhs, rhs), (dgrad g, w), (wgrad g, x)."""
    nvfp4 = recipe.name == "nvfp4"
    weight = _Operand(two_d=nvfp4)
    activation = _Operand()
    sr = nvfp4 and recipe.stochastic_rounding
    rht = nvfp4 and recipe.hadamard
    dgrad_grad = _Operand(stochastic_key=jax.random.fold_in(key, 0) if sr else None)
    wgrad_grad = _Operand(stochastic_key=jax.random.fold_in(key, 1) if sr else None, hadamard=rht)
    wgrad_activation = _Operand(hadamard=rht)
    return weight, activation, dgrad_grad, wgrad_grad, wgrad_activation


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5))
def _quantized_dot_general(lhs, rhs, key, dimension_numbers, recipe, out_dtype):
    out, _ = _forward(lhs, rhs, key, dimension_numbers, recipe, out_dtype)
    return out


def _forward(lhs, rhs, key, dimension_numbers, recipe, out_dtype):
    # Let lax check the shapes and produce its own error message for a bad call.
    jax.eval_shape(functools.partial(lax.dot_general, dimension_numbers=dimension_numbers),
                   lhs, rhs)
    canon = _canonical(lhs.shape, rhs.shape, dimension_numbers)
    weight, activation, *_ = _roles(recipe, key)
    lhs_role, rhs_role = (activation, weight) if recipe.weight_operand == "rhs" else (weight,
                                                                                      activation)
    out = _gemm(canon.lhs_to(lhs), canon.rhs_to(rhs), lhs_role, rhs_role, recipe)
    return out.reshape(canon.out_shape).astype(out_dtype), (lhs, rhs, key)


def _forward_rule(lhs, rhs, key, dimension_numbers, recipe, out_dtype):
    return _forward(lhs, rhs, key, dimension_numbers, recipe, out_dtype)


def _backward_rule(dimension_numbers, recipe, out_dtype, residuals, g):
    lhs, rhs, key = residuals
    canon = _canonical(lhs.shape, rhs.shape, dimension_numbers)
    b, m, n, _ = canon.sizes
    x, w = canon.lhs_to(lhs), canon.rhs_to(rhs)                  # [B, M, K], [B, N, K]
    g = g.reshape(b, m, n)                                       # [B, M, N]
    g_t = jnp.swapaxes(g, 1, 2)                                  # [B, N, M]
    weight, activation, dgrad_grad, wgrad_grad, wgrad_activation = _roles(recipe, key)
    if recipe.weight_operand == "rhs":
        # dX = dY W^T: contraction over N.  dW = dY^T X: contraction over the rows M (tokens).
        d_lhs = _gemm(g, jnp.swapaxes(w, 1, 2), dgrad_grad, weight, recipe)
        d_rhs = _gemm(g_t, jnp.swapaxes(x, 1, 2), wgrad_grad, wgrad_activation, recipe)
    else:
        # The weight is lhs: its gradient contracts over the rows N of rhs.
        d_lhs = _gemm(g, jnp.swapaxes(w, 1, 2), wgrad_grad, wgrad_activation, recipe)
        d_rhs = _gemm(g_t, jnp.swapaxes(x, 1, 2), dgrad_grad, weight, recipe)
    return (canon.lhs_from(d_lhs).astype(lhs.dtype), canon.rhs_from(d_rhs).astype(rhs.dtype),
            None)


_quantized_dot_general.defvjp(_forward_rule, _backward_rule)
