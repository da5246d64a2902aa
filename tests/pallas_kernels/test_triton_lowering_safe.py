"""Kernel bodies avoid what Pallas' Triton backend lowers differently from XLA.

`lax.neg` becomes `0 - x` under Triton, which maps -(+0.0) to +0.0: on an H200 every negative
zero code decoded to +0.0 while the reference kept -0.0. The kernels put signs on as bits, and
this test walks every kernel body (the jaxpr inside each pallas_call) to keep it that way
(integer negation is exact and allowed).
"""
import jax
import jax.numpy as jnp
import numpy as np

import pallas_kernels as pk



def _sub_jaxprs(value):
    if hasattr(value, "eqns"):
        yield value
    elif hasattr(value, "jaxpr") and hasattr(value.jaxpr, "eqns"):
        yield value.jaxpr
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _sub_jaxprs(item)


def _primitives(jaxpr, inside_kernel=False):
    """(primitive name, is its first operand floating, inside a pallas_call body) for every
    equation, recursively."""
    for eqn in jaxpr.eqns:
        dtype = getattr(getattr(eqn.invars[0], "aval", None), "dtype", None) if eqn.invars \
            else None
        floating = dtype is not None and jnp.issubdtype(dtype, jnp.floating)
        yield eqn.primitive.name, floating, inside_kernel
        for value in eqn.params.values():
            for sub in _sub_jaxprs(value):
                yield from _primitives(sub, inside_kernel or eqn.primitive.name == "pallas_call")


def test_no_kernel_body_negates():
    x = jnp.asarray(np.random.default_rng(0).standard_normal((32, 64)), jnp.float32)
    mx = pk.quantize_mxfp8(x, impl="reference")
    nv = pk.quantize_nvfp4(x, impl="reference")
    sign = pk.hadamard_sign(jax.random.key(0))
    ops = {
        "quantize_mxfp8": lambda: pk.quantize_mxfp8(x, impl="pallas"),
        "dequantize_mxfp8": lambda: pk.dequantize_mxfp8(*mx, impl="pallas"),
        "quantize_nvfp4 (stochastic)": lambda: pk.quantize_nvfp4(
            x, rounding="stochastic", key=jax.random.key(1), impl="pallas"),
        "dequantize_nvfp4": lambda: pk.dequantize_nvfp4(*nv, impl="pallas"),
        "random_hadamard_transform": lambda: pk.random_hadamard_transform(x, sign,
                                                                          impl="pallas"),
        "pack/unpack": lambda: pk.unpack_fp4(pk.pack_fp4(nv[0], impl="pallas"), impl="pallas"),
        "scaled_matmul nvfp4": lambda: pk.scaled_matmul(
            nv[0], nv[1], nv[0], nv[1], "nvfp4", a_global_scale=nv[2], b_global_scale=nv[2],
            impl="pallas"),
    }
    for name, op in ops.items():
        found = list(_primitives(jax.make_jaxpr(op)().jaxpr))
        assert any(in_kernel for *_, in_kernel in found), f"{name}: no pallas_call body"
        float_negations = [p for p, floating, in_kernel in found
                           if in_kernel and floating and p == "neg"]
        assert not float_negations, f"{name}: a kernel negates a float"


def test_decode_keeps_negative_zero_and_matches_the_cast():
    codes = jnp.arange(256, dtype=jnp.uint8)
    got = pk.formats.decode(codes, pk.formats.E4M3_FORMAT)
    want = pk.formats.from_bits(codes, pk.E4M3).astype(jnp.float32)
    finite = np.isfinite(np.asarray(want))
    np.testing.assert_array_equal(np.asarray(got)[finite].view(np.uint32),
                                  np.asarray(want)[finite].view(np.uint32))
    assert np.signbit(np.asarray(got)[0x80]) and np.asarray(got)[0x80] == 0
