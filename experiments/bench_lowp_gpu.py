"""Low precision on one NVIDIA GPU: kernel checks, quantizer bandwidth, block-scaled matmuls,
the training recipes on one layer and on the model.

    python -m experiments.bench_lowp_gpu                  # every section, ~5 min on an H200
    python -m experiments.bench_lowp_gpu --sections=kernels,matmul --size=4096
    python -m experiments.bench_lowp_gpu --out=/tmp/lowp_gpu.md   # also write the tables

Self-contained (jax, pallas_kernels, c2jax for the last two sections). Prints markdown tables,
each measured side by side in one run:

0. ``casts``: XLA's conversions between f32 and E4M3 / E2M1 / E8M0 on the GPU against the
   host CPU (ml_dtypes semantics) over a sweep of values: what the jnp references rest on.
1. ``kernels``: every Pallas kernel compiled for the GPU (Triton) against the jnp reference,
   both on the GPU (XLA) and on the host CPU. Quantizers, dequantizers, the Hadamard transform
   and FP4 packing must match byte for byte; the matmuls and the recipes' gradients differ
   only by f32 summation order (relative error reported). Inputs cover what the CPU tests pin:
   log-uniform magnitudes over 2^-40..2^40, zero blocks, block maxima of 448, 449, 500 and
   powers of two, negative zeros, and a NaN/Inf tensor; f32 subnormal inputs are a case of
   their own (GPUs flush them to zero). A mismatch lists how many elements differ and where.
2. ``bandwidth``: quantizers in GB/s of (input read + codes and scales written), next to a
   plain device copy of the same bf16 tensor (read + write): the bandwidth ceiling.
3. ``matmul``: ``[M, K] x [N, K]`` in TFLOP/s (2 M N K flops), against bf16: cuBLAS bf16; XLA's
   FP8 GEMM with one scale per tensor (the Hopper FP8 ceiling); MXFP8 and NVFP4 block-scaled
   products as the Pallas kernel (codes decoded exactly to bf16 in registers, bf16 MMA, f32
   accumulation) and as ``impl="xla"`` (decode to bf16 with XLA ops, then the bf16 GEMM: the
   ``auto`` choice on GPUs without block-scaled MMA); on sm_100
   only, MXFP8/NVFP4 through ``jax.nn.scaled_matmul`` (cuDNN block-scaled MMA). Hopper has
   FP8 tensor cores but no block-scaled MX instructions, so those rows are skipped there.
4. ``recipe``: one linear layer, forward + backward (3 GEMMs), with ``c2jax.precision``'s
   bf16 / mxfp8 / nvfp4 recipes (``auto``: Pallas quantizers, XLA GEMMs; and all-Pallas):
   time against bf16, and SNR of y, dx, dw against f32.
5. ``model``: training steps (forward, loss with MTP, backward, AdamW) of the ``small`` preset in
   bf16 compute with ``precision_recipe`` = bf16 / mxfp8 / nvfp4: tokens/s and MFU against the
   bf16 matmul rate (section 3's, or measured on the spot).

A row whose kernel fails to compile reports the error instead of a number, and the run goes
on. ``--budget_s`` bounds the run: sections that would start after it are listed as skipped.
On a machine without a GPU the script exits with a message.
"""
from __future__ import annotations

import math
import statistics
import sys
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

import pallas_kernels as pk
from pallas_kernels import backend
from pallas_kernels import formats as F

SECTIONS = ("casts", "kernels", "bandwidth", "matmul", "recipe", "model")
_SIZE = flags.DEFINE_integer("size", 8192, "M = N = K of the matmuls; the quantized tensors of "
                             "the bandwidth table are [size, size]")
_REPEATS = flags.DEFINE_integer("repeats", 10, "timed runs per row (median reported)")
_SECTIONS = flags.DEFINE_list("sections", list(SECTIONS),
                              f"which of {SECTIONS} to run, in this order")
_BUDGET = flags.DEFINE_float("budget_s", 540.0, "no section starts after this many seconds")
_OUT = flags.DEFINE_string("out", None, "also write the report (markdown) here")


# ----------------------------------------------------------------------------------------
# Timing and comparison helpers.
# ----------------------------------------------------------------------------------------

def median_seconds(fn, *args, repeats: int | None = None) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats or _REPEATS.value):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def relative_error(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-300))


def snr_db(got, want) -> float:
    error = relative_error(got, want)
    return float("inf") if error == 0 else -20 * math.log10(error)


def as_bytes(x) -> np.ndarray:
    """The bytes of an array (low-precision codes as their bit patterns)."""
    x = jnp.asarray(x)
    if x.dtype in (F.E2M1, F.E4M3, F.E8M0):
        x = F.to_bits(x)
    return np.ascontiguousarray(np.asarray(x)).view(np.uint8).ravel()


def differing_bytes(got, want) -> int:
    """Bytes that differ between two pytrees of arrays of the same structure."""
    pairs = zip(jax.tree.leaves(got), jax.tree.leaves(want))
    return sum(int(np.count_nonzero(as_bytes(a) != as_bytes(b))) for a, b in pairs)


def where_they_differ(got, want, examples: int = 2) -> str:
    """Per output: how many elements differ, in which rows (axis 0), and a few values."""
    notes = []
    for i, (a, b) in enumerate(zip(jax.tree.leaves(got), jax.tree.leaves(want))):
        a, b = jnp.asarray(a), jnp.asarray(b)
        shape = a.shape
        per_element = lambda x: as_bytes(x).reshape(int(np.prod(shape)), -1)
        bad = np.flatnonzero(np.any(per_element(a) != per_element(b), axis=1))
        if not bad.size:
            continue
        rows = sorted({int(r) for r in np.unravel_index(bad, shape)[0]}) if shape else []
        show = lambda x: np.asarray(x.astype(jnp.float32) if x.dtype != jnp.uint8 else x
                                    ).ravel()[bad[:examples]].tolist()
        notes.append(f"output {i}: {bad.size} elements, rows {rows[:6]}"
                     f"{'...' if len(rows) > 6 else ''}, e.g. {show(a)} vs {show(b)}")
    return "; ".join(notes)


def error_cell(error: Exception) -> str:
    return f"failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"


# ----------------------------------------------------------------------------------------
# 1. Kernels against the references (GPU and CPU).
# ----------------------------------------------------------------------------------------

def edge_case_tensor(rows: int, cols: int, seed: int = 0, subnormals: bool = False
                     ) -> np.ndarray:
    """f32 [rows, cols] (cols a multiple of 32): log-uniform magnitudes over 2^-40..2^40 with
    random signs, then rows of special blocks at the first 32 columns: zeros (with negative
    zeros), maxima 448 / 449 / 500 / a power of two; with `subnormals`, rows 2 and 3 hold f32
    subnormals instead."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((rows, cols)) * np.exp2(rng.uniform(-40, 40, (rows, 1)))
    x = x.astype(np.float32)
    tiny = [rng.standard_normal(32) * 1e-40, np.full(32, 1e-45)] if subnormals else []
    special = [np.zeros(32), -np.zeros(32)] + tiny
    for peak in (448.0, 449.0, 500.0, 1024.0):
        block = rng.uniform(-1, 1, 32) * peak / 2
        block[rng.integers(32)] = peak
        special.append(block)
    for i, block in enumerate(special[:rows]):
        x[i, :32] = np.asarray(block, np.float32)
    return x


def nonfinite_tensor(rows: int, cols: int, seed: int = 1) -> np.ndarray:
    """f32 [rows, cols] with a NaN in block 0 of row 0 and an Inf in block 1 of row 1."""
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    x[0, 3], x[1, 40] = np.nan, np.inf
    return x


def kernel_cases(rows: int = 512, cols: int = 1024):
    """(name, fn(impl, *args), args, exact) for every kernel; args are host numpy arrays."""
    x = edge_case_tensor(rows, cols)
    xb = x.astype(jnp.bfloat16)
    subnormal = edge_case_tensor(rows, cols, subnormals=True)
    nan = nonfinite_tensor(rows, cols)
    key = jax.random.key(7)
    sign = np.asarray(pk.hadamard_sign(jax.random.key(3)))
    with jax.default_device(jax.devices("cpu")[0]):     # inputs of the decoders: the spec's
        mx_codes, mx_scales = (np.asarray(a) for a in pk.quantize_mxfp8(x, impl="reference"))
        nv_codes, nv_scales, nv_global = (np.asarray(a)
                                          for a in pk.quantize_nvfp4(x, impl="reference"))
    rng = np.random.default_rng(2)
    a = rng.standard_normal((rows, 2 * cols)).astype(np.float32)
    b = rng.standard_normal((rows * 3 // 4, 2 * cols)).astype(np.float32)
    ga = rng.standard_normal((4, rows // 2, cols)).astype(np.float32)
    gb = rng.standard_normal((4, rows * 3 // 8, cols)).astype(np.float32)
    mm, gmm = f"[{rows},{2 * cols}]x[{rows * 3 // 4},{2 * cols}]", \
        f"4x[{rows // 2},{cols}]x[{rows * 3 // 8},{cols}]"

    def mx_matmul(impl, a, b):
        qa, qb = pk.quantize_mxfp8(a, impl=impl), pk.quantize_mxfp8(b, impl=impl)
        return pk.scaled_matmul(*qa, *qb, "mxfp8", impl=impl)

    def nv_matmul(impl, a, b):
        qa, qb = pk.quantize_nvfp4(a, impl=impl), pk.quantize_nvfp4(b, impl=impl)
        return pk.scaled_matmul(qa[0], qa[1], qb[0], qb[1], "nvfp4", a_global_scale=qa[2],
                                b_global_scale=qb[2], impl=impl)

    def grouped(fmt):
        def run(impl, a, b):
            quantize = pk.quantize_mxfp8 if fmt == "mxfp8" else pk.quantize_nvfp4
            qa, qb = quantize(a, impl=impl), quantize(b, impl=impl)
            extra = {} if fmt == "mxfp8" else dict(a_global_scale=qa[2], b_global_scale=qb[2])
            return pk.grouped_scaled_matmul(qa[0], qa[1], qb[0], qb[1], fmt, impl=impl, **extra)
        return run

    return [
        ("quantize_mxfp8 rceil, f32", lambda i, x: pk.quantize_mxfp8(x, impl=i), (x,), True),
        ("quantize_mxfp8 rceil, bf16", lambda i, x: pk.quantize_mxfp8(x, impl=i), (xb,), True),
        ("quantize_mxfp8 floor, axis 0",
         lambda i, x: pk.quantize_mxfp8(x, axis=0, scale_mode="floor", impl=i), (x,), True),
        ("quantize_mxfp8, NaN/Inf blocks", lambda i, x: pk.quantize_mxfp8(x, impl=i), (nan,),
         True),
        ("quantize_mxfp8, f32 subnormal rows 2-3", lambda i, x: pk.quantize_mxfp8(x, impl=i),
         (subnormal,), True),
        ("dequantize_mxfp8 -> f32",
         lambda i, q, s: pk.dequantize_mxfp8(q, s, impl=i), (mx_codes, mx_scales), True),
        ("dequantize_mxfp8 -> bf16",
         lambda i, q, s: pk.dequantize_mxfp8(q, s, dtype=jnp.bfloat16, impl=i),
         (mx_codes, mx_scales), True),
        ("quantize_nvfp4 1x16 RNE", lambda i, x: pk.quantize_nvfp4(x, impl=i), (x,), True),
        ("quantize_nvfp4 16x16 RNE", lambda i, x: pk.quantize_nvfp4(x, two_d=True, impl=i),
         (x,), True),
        ("quantize_nvfp4 stochastic",
         lambda i, x: pk.quantize_nvfp4(x, rounding="stochastic", key=key, impl=i), (xb,), True),
        ("quantize_nvfp4, NaN/Inf tensor", lambda i, x: pk.quantize_nvfp4(x, impl=i), (nan,),
         True),
        ("quantize_nvfp4, f32 subnormal rows 2-3", lambda i, x: pk.quantize_nvfp4(x, impl=i),
         (subnormal,), True),
        ("dequantize_nvfp4 -> f32", lambda i, q, s, g: pk.dequantize_nvfp4(q, s, g, impl=i),
         (nv_codes, nv_scales, nv_global), True),
        ("random_hadamard_transform, axis 0",
         lambda i, x, s: pk.random_hadamard_transform(x, s, axis=0, impl=i), (x, sign), True),
        ("pack_fp4", lambda i, q: pk.pack_fp4(q, impl=i), (nv_codes,), True),
        ("unpack_fp4", lambda i, p: pk.unpack_fp4(p, impl=i),
         (np.asarray(pk.pack_fp4(nv_codes, impl="reference")),), True),
        (f"scaled_matmul mxfp8 {mm}", mx_matmul, (a, b), False),
        (f"scaled_matmul nvfp4 {mm}", nv_matmul, (a, b), False),
        (f"scaled_matmul mxfp8 {mm}, impl='xla'",
         lambda i, a, b: mx_matmul("reference", a, b) if i == "reference" else
         pk.scaled_matmul(*pk.quantize_mxfp8(a), *pk.quantize_mxfp8(b), "mxfp8", impl="xla"),
         (a, b), False),
        (f"grouped_scaled_matmul mxfp8 {gmm}", grouped("mxfp8"), (ga, gb), False),
        (f"grouped_scaled_matmul nvfp4 {gmm}", grouped("nvfp4"), (ga, gb), False),
    ]


def cast_values() -> np.ndarray:
    """f32 values around every E4M3 / E2M1 / E8M0 grid point and its midpoints, both signs,
    f32 subnormals and zeros: where a conversion's rounding shows."""
    grid = np.unique(np.concatenate([
        np.asarray(jnp.arange(256, dtype=jnp.uint8).view(F.E4M3).astype(jnp.float32)),
        np.asarray([0.0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32)]))
    grid = grid[np.isfinite(grid)]
    mids = (grid[1:] + grid[:-1]) / 2
    base = np.concatenate([grid, mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf),
                           np.exp2(np.arange(-149, 128, dtype=np.float64)).astype(np.float32),
                           [1e-45, 1e-40, 3e-39, 1e-38, 500.0, 449.0, 6.5, 7.0]])
    values = np.concatenate([base, -base]).astype(np.float32)
    return values


def casts_table(device, reference_device) -> str:
    values = cast_values()
    lines = [f"XLA conversions on {device.device_kind} against the host CPU over "
             f"{values.size} f32 values (grid points, midpoints and their f32 neighbours, "
             f"powers of two 2^-149..2^127, f32 subnormals):\n",
             "| conversion | elements that differ | e.g. input -> GPU vs CPU |", "|---|---:|---|"]
    conversions = [("f32 -> float8_e4m3fn (clipped to +-448)",
                    lambda v: jnp.clip(v, -448, 448).astype(F.E4M3)),
                   ("f32 -> float4_e2m1fn (clipped to +-6)",
                    lambda v: jnp.clip(v, -6, 6).astype(F.E2M1)),
                   ("f32 -> float8_e8m0fnu (positive inputs)",
                    lambda v: jnp.abs(v).astype(F.E8M0)),
                   ("float8_e4m3fn codes -> f32",
                    lambda v: F.from_bits(jnp.arange(256, dtype=jnp.uint8), F.E4M3).astype(
                        jnp.float32) + 0 * v[0]),
                   ("float8_e8m0fnu codes -> f32",
                    lambda v: F.from_bits(jnp.arange(256, dtype=jnp.uint8), F.E8M0).astype(
                        jnp.float32) + 0 * v[0])]
    for name, fn in conversions:
        try:
            got = jax.jit(fn)(jax.device_put(values, device))
            want = jax.jit(fn)(jax.device_put(values, reference_device))
            a, b = as_bytes(got).reshape(got.size, -1), as_bytes(want).reshape(want.size, -1)
            bad = np.flatnonzero(np.any(a != b, axis=1))
            source = values if got.size == values.size else np.arange(256)
            eg = ", ".join(f"{source[i]:.4g} -> {float(np.asarray(got, np.float32)[i]):.4g} vs "
                           f"{float(np.asarray(want, np.float32)[i]):.4g}" for i in bad[:3])
            lines.append(f"| {name} | {bad.size} of {got.size} | {eg} |")
        except Exception as error:  # pylint: disable=broad-except
            lines.append(f"| {name} | {error_cell(error)} | |")
    return "\n".join(lines)


def recipe_gradients(recipe: str, impl: str, x, w):
    """(y, dx, dw) of ``sum(y * t)`` through ``c2jax.precision``'s recipe, y = x @ w."""
    from c2jax import precision
    dg = precision.dot_general_for(recipe, key=jax.random.key(5), impl=impl)
    target = jnp.cos(jnp.arange(x.shape[0] * w.shape[1], dtype=jnp.float32)).reshape(
        x.shape[0], w.shape[1])

    def loss(x, w):
        y = dg(x, w, (((1,), (0,)), ((), ())))
        return jnp.sum(y * target), y

    (_, y), (dx, dw) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(x, w)
    return y, dx, dw


def kernels_table(device, reference_device, rows: int = 512, cols: int = 1024) -> str:
    """The kernel on `device` against the jnp reference on `device` and on
    `reference_device`: differing bytes (exact ops) or relative error."""
    lines = [f"Pallas kernels on {device.device_kind} against the jnp reference, on the same "
             f"device (XLA) and on the host CPU:\n",
             "| op | vs reference on GPU | vs reference on CPU |", "|---|---|---|"]
    cases = kernel_cases(rows, cols)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((rows // 2, cols // 2)).astype(np.float32)
    w = (rng.standard_normal((cols // 2, rows * 3 // 4)) / 20).astype(np.float32)
    for recipe in ("mxfp8", "nvfp4"):
        cases.append((f"recipe {recipe}: y, dx, dw of one layer",
                      lambda impl, x, w, r=recipe: recipe_gradients(r, impl, x, w), (x, w),
                      False))

    def compare(got, want, exact: bool) -> str:
        if exact:
            bad = differing_bytes(got, want)
            total = sum(as_bytes(a).size for a in jax.tree.leaves(want))
            return "identical" if bad == 0 else (f"**{bad} of {total} bytes differ**: "
                                                 + where_they_differ(got, want))
        worst = max(relative_error(g, w) for g, w in zip(jax.tree.leaves(got),
                                                         jax.tree.leaves(want)))
        return f"rel. error {worst:.1e}"

    for name, fn, args, exact in cases:
        try:
            on_device = [jax.device_put(a, device) for a in args]
            kernel = jax.jit(lambda *a, fn=fn: fn("pallas", *a))(*on_device)
            cells = []
            for where in (device, reference_device):
                here = [jax.device_put(a, where) for a in args]
                want = jax.jit(lambda *a, fn=fn: fn("reference", *a))(*here)
                cells.append(compare(kernel, want, exact))
        except Exception as error:  # pylint: disable=broad-except
            cells = [error_cell(error), ""]
        lines.append(f"| {name} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# 2. Quantizer bandwidth.
# ----------------------------------------------------------------------------------------

def quantizer_rows(x):
    """(name, bytes moved, function) for the bandwidth table; x is bf16 [n, n]."""
    n = x.size
    mx_bytes = 2 * n + n + n // 32                  # read bf16, write E4M3 codes + E8M0 scales
    nv_bytes = 2 * n + 2 * n + n + n // 16          # + the global-amax read; E2M1 codes unpacked
    return [
        ("device copy (bf16 negate)", 4 * n, jax.jit(lambda x: -x)),
        ("quantize_mxfp8, XLA (jnp reference)", mx_bytes,
         jax.jit(lambda x: pk.quantize_mxfp8(x, impl="reference"))),
        ("quantize_mxfp8, Pallas Triton", mx_bytes,
         jax.jit(lambda x: pk.quantize_mxfp8(x, impl="pallas"))),
        ("quantize_nvfp4, XLA (jnp reference)", nv_bytes,
         jax.jit(lambda x: pk.quantize_nvfp4(x, impl="reference"))),
        ("quantize_nvfp4, Pallas Triton", nv_bytes,
         jax.jit(lambda x: pk.quantize_nvfp4(x, impl="pallas"))),
    ]


def bandwidth_table(x) -> str:
    lines = [f"Quantizers on a {list(x.shape)} bf16 tensor:\n",
             "| op | ms | GB/s | vs copy |", "|---|---:|---:|---:|"]
    copy_gbs = None
    for name, moved, fn in quantizer_rows(x):
        try:
            seconds = median_seconds(fn, x)
        except Exception as error:  # pylint: disable=broad-except
            lines.append(f"| {name} | {error_cell(error)} | | |")
            continue
        gbs = moved / seconds / 1e9
        copy_gbs = copy_gbs or gbs
        lines.append(f"| {name} | {seconds * 1e3:.3f} | {gbs:.0f} | {gbs / copy_gbs:.2f} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# 3. Matmuls.
# ----------------------------------------------------------------------------------------

TN = (((1,), (1,)), ((), ()))


def matmul_rows(a, b):
    """(name, function, args) rows; a [M, K], b [N, K] f32, quantized outside the timing."""
    mx_a, mx_b = pk.quantize_mxfp8(a), pk.quantize_mxfp8(b)
    nv_a, nv_b = pk.quantize_nvfp4(a), pk.quantize_nvfp4(b)
    a16, b16 = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    scale_a, scale_b = jnp.max(jnp.abs(a)) / 448.0, jnp.max(jnp.abs(b)) / 448.0
    a8 = (a / scale_a).astype(jnp.float8_e4m3fn)
    b8 = (b / scale_b).astype(jnp.float8_e4m3fn)

    def bf16(a16, b16):
        return jax.lax.dot_general(a16, b16, TN, preferred_element_type=jnp.float32)

    def fp8_tensorwise(a8, b8, scale_a, scale_b):
        out = jax.lax.dot_general(a8, b8, TN, preferred_element_type=jnp.float32)
        return out * (scale_a * scale_b)

    def mxfp8_pallas(a, b):
        return pk.scaled_matmul(*a, *b, "mxfp8", impl="pallas")

    def mxfp8_xla(a, b):
        return pk.scaled_matmul(*a, *b, "mxfp8", impl="xla")

    def nvfp4(impl):
        return lambda a, b: pk.scaled_matmul(a[0], a[1], b[0], b[1], "nvfp4",
                                             a_global_scale=a[2], b_global_scale=b[2], impl=impl)

    rows = [
        ("bf16 x bf16 -> f32 (XLA / cuBLAS)", jax.jit(bf16), (a16, b16)),
        ("fp8 e4m3, per-tensor scale (XLA FP8 GEMM)", jax.jit(fp8_tensorwise),
         (a8, b8, scale_a, scale_b)),
        ("MXFP8 1x32 blockwise, Pallas Triton kernel", jax.jit(mxfp8_pallas), (mx_a, mx_b)),
        ("MXFP8 1x32 blockwise, impl='xla' (decode to bf16 + bf16 GEMM)", jax.jit(mxfp8_xla),
         (mx_a, mx_b)),
        ("NVFP4 1x16 blockwise, Pallas Triton kernel", jax.jit(nvfp4("pallas")), (nv_a, nv_b)),
        ("NVFP4 1x16 blockwise, impl='xla' (decode to bf16 + bf16 GEMM)", jax.jit(nvfp4("xla")),
         (nv_a, nv_b)),
    ]
    if backend.has_block_scaled_mma():
        def block_scaled(fmt, qa, qb):
            kwargs = {}
            if fmt == "nvfp4":
                kwargs = dict(a_global_scale=qa[2], b_global_scale=qb[2])
            return pk.scaled_matmul(qa[0], qa[1], qb[0], qb[1], fmt, impl="block_scaled",
                                    **kwargs)
        rows += [
            ("MXFP8 block-scaled MMA (jax.nn.scaled_matmul, sm_100)",
             jax.jit(lambda a, b: block_scaled("mxfp8", a, b)), (mx_a, mx_b)),
            ("NVFP4 block-scaled MMA (jax.nn.scaled_matmul, sm_100)",
             jax.jit(lambda a, b: block_scaled("nvfp4", a, b)), (nv_a, nv_b)),
        ]
    return rows


def matmul_table(a, b) -> tuple[str, float | None]:
    """The table, and the bf16 row's FLOP/s (the model section's MFU denominator)."""
    m, k = a.shape
    n = b.shape[0]
    flops = 2 * m * n * k
    exact = jax.jit(lambda a, b: jax.lax.dot_general(
        a, b, TN, precision=jax.lax.Precision.HIGHEST))(a, b)
    lines = [f"| [{m}, {k}] x [{n}, {k}] | ms | TFLOP/s | vs bf16 | rel. error vs f32 |",
             "|---|---:|---:|---:|---:|"]
    base = None
    try:
        rows = matmul_rows(a, b)
    except Exception as error:  # pylint: disable=broad-except
        return f"quantizing the operands failed: {error_cell(error)}", None
    for name, fn, args in rows:
        try:
            error = relative_error(fn(*args), exact)
            seconds = median_seconds(fn, *args)
        except Exception as err:  # pylint: disable=broad-except
            lines.append(f"| {name} | {error_cell(err)} | | | |")
            continue
        tflops = flops / seconds / 1e12
        base = base or tflops
        lines.append(f"| {name} | {seconds * 1e3:.3f} | {tflops:.0f} | {tflops / base:.2f} | "
                     f"{error:.2e} |")
    if not backend.has_block_scaled_mma():
        lines.append("\n(no sm_100: the Blackwell block-scaled rows are skipped)")
    return "\n".join(lines), (base * 1e12 if base else None)


# ----------------------------------------------------------------------------------------
# 4. The recipes on one layer.
# ----------------------------------------------------------------------------------------

def recipe_table(tokens: int = 16384, d_in: int = 4096, d_out: int = 4096) -> str:
    rng = np.random.default_rng(6)
    x = jnp.asarray(rng.standard_normal((tokens, d_in)), jnp.bfloat16)
    w = jnp.asarray(rng.standard_normal((d_in, d_out)) / math.sqrt(d_in), jnp.float32)
    exact = jax.jit(lambda x, w: recipe_gradients("identity", "reference", x, w))(
        x.astype(jnp.float32), w)

    def bf16_layer(x, w):
        target = jnp.cos(jnp.arange(tokens * d_out, dtype=jnp.float32)).reshape(tokens, d_out)

        def loss(x, w):
            # A bf16 output, as a Flax Dense in bf16 computes it: the cotangent is then bf16
            # too and all three GEMMs run in bf16 (an f32 output would make the backward f32).
            y = jax.lax.dot_general(x, w.astype(jnp.bfloat16), (((1,), (0,)), ((), ())))
            return jnp.sum(y.astype(jnp.float32) * target), y
        (_, y), (dx, dw) = jax.value_and_grad(loss, argnums=(0, 1), has_aux=True)(x, w)
        return y, dx, dw

    flops = 3 * 2 * tokens * d_in * d_out
    lines = [f"One layer X [{tokens}, {d_in}] bf16 x W [{d_in}, {d_out}] f32 master, forward + "
             f"backward ({flops / 1e12:.2f} TFLOP); SNR of y, dx, dw against f32 autodiff:\n",
             "| recipe | ms | TFLOP/s | time vs bf16 | SNR y (dB) | SNR dx (dB) | SNR dw (dB) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    rows = [("bf16 (plain dot_general, bf16 operands)", jax.jit(bf16_layer))]
    for recipe, impl, what in (("mxfp8", "auto", "Pallas quantizers, XLA bf16 GEMMs"),
                               ("nvfp4", "auto", "Pallas quantizers, XLA bf16 GEMMs"),
                               ("mxfp8", "pallas", "all Pallas"),
                               ("mxfp8", "reference", "jnp references, XLA-fused")):
        rows.append((f"{recipe}, impl={impl} ({what})",
                     jax.jit(lambda x, w, r=recipe, i=impl: recipe_gradients(r, i, x, w))))
    base = None
    for name, fn in rows:
        try:
            got = fn(x, w)
            snrs = [snr_db(g, e) for g, e in zip(got, exact)]
            seconds = median_seconds(fn, x, w)
        except Exception as error:  # pylint: disable=broad-except
            lines.append(f"| {name} | {error_cell(error)} | | | | | |")
            continue
        base = base or seconds
        lines.append(f"| {name} | {seconds * 1e3:.2f} | {flops / seconds / 1e12:.0f} | "
                     f"{seconds / base:.2f}x | " + " | ".join(f"{s:.1f}" for s in snrs) + " |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------
# 5. The model's training step per recipe.
# ----------------------------------------------------------------------------------------

def model_table(peak_flops: float | None, preset: str = "small", batch: int = 32,
                seq: int = 1024, steps: int = 10) -> str:
    import optax
    from c2jax.flops import training_flops_per_token
    from c2jax.model import init
    from c2jax.train import losses
    from c2jax.train.config import loss_config
    from configs import models

    if peak_flops is None:
        a = jnp.ones((8192, 8192), jnp.bfloat16)
        dot = jax.jit(lambda a: jnp.dot(a, a, preferred_element_type=jnp.float32))
        peak_flops = 2 * 8192 ** 3 / median_seconds(dot, a, repeats=5)
    rng = np.random.default_rng(8)
    vocab = getattr(models, preset)().vocab_size
    tokens = jnp.asarray(rng.integers(0, vocab, (batch, seq + 1)), jnp.int32)
    batch_arrays = {
        "tokens": tokens[:, :-1], "targets": tokens[:, 1:],
        "segment_ids": jnp.ones((batch, seq), jnp.int32),
        "positions": jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch, seq)),
        "loss_mask": jnp.ones((batch, seq), jnp.float32)}
    lines = [f"`{preset}` preset, batch {batch} x {seq}, bf16 compute / f32 master weights, "
             f"capacity dispatch, median of {steps} steps after one warm-up:\n",
             "| precision_recipe | step ms | tokens/s | vs bf16 | MFU vs measured bf16 peak | "
             "loss after the steps |", "|---|---:|---:|---:|---:|---:|"]
    base = None
    for recipe in ("bf16", "mxfp8", "nvfp4"):
        try:
            cfg = getattr(models, preset)(dtype="bfloat16", precision_recipe=recipe,
                                          max_position_embeddings=seq)
            variables = init(cfg, jax.random.key(0))
            opt = optax.adamw(3e-4)
            loss_cfg = loss_config()

            def step(params, opt_state, router_bias, batch_arrays, cfg=cfg, opt=opt):
                grads, (metrics, _) = jax.grad(
                    lambda p: losses.training_objective(p, router_bias, batch_arrays, cfg,
                                                        loss_cfg), has_aux=True)(params)
                updates, opt_state = opt.update(grads, opt_state, params)
                return optax.apply_updates(params, updates), opt_state, metrics["loss"]

            jitted = jax.jit(step, donate_argnums=(0, 1))
            params, opt_state = variables["params"], opt.init(variables["params"])
            params, opt_state, loss = jitted(params, opt_state, variables["router_bias"],
                                             batch_arrays)
            jax.block_until_ready(loss)
            times = []
            for _ in range(steps):
                start = time.perf_counter()
                params, opt_state, loss = jitted(params, opt_state, variables["router_bias"],
                                                 batch_arrays)
                jax.block_until_ready(loss)
                times.append(time.perf_counter() - start)
            seconds = statistics.median(times)
        except Exception as error:  # pylint: disable=broad-except
            lines.append(f"| {recipe} | {error_cell(error)} | | | | |")
            continue
        base = base or seconds
        tokens_per_s = batch * seq / seconds
        mfu = (f"{100 * training_flops_per_token(cfg, seq) * tokens_per_s / peak_flops:.1f}%"
               if peak_flops else "n/a")
        lines.append(f"| {recipe} | {seconds * 1e3:.1f} | {tokens_per_s:,.0f} | "
                     f"{base / seconds:.2f}x | {mfu} | {float(loss):.3f} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------

def main(argv):
    del argv
    unknown = set(_SECTIONS.value) - set(SECTIONS)
    if unknown:
        sys.exit(f"unknown sections {sorted(unknown)}; choose from {SECTIONS}")
    if jax.default_backend() != "gpu":
        sys.exit(f"bench_lowp_gpu needs an NVIDIA GPU; the default JAX backend here is "
                 f"{jax.default_backend()!r}. For CPU numbers run "
                 f"`python -m experiments.bench_lowp`.")
    start = time.perf_counter()
    device, cpu = jax.devices()[0], jax.devices("cpu")[0]
    report = [f"# bench_lowp_gpu: {device.device_kind}, compute capability "
              f"{backend.gpu_compute_capability()}, jax {jax.__version__}\n"]

    def emit(text: str) -> None:
        print(text + "\n", flush=True)
        report.append(text + "\n")
        if _OUT.value:
            Path(_OUT.value).write_text("\n".join(report))

    emit(report.pop())
    size = _SIZE.value
    rng = np.random.default_rng(0)
    peak = None
    for section in _SECTIONS.value:
        elapsed = time.perf_counter() - start
        if elapsed > _BUDGET.value:
            emit(f"## {section}\n\nskipped: {elapsed:.0f} s elapsed, over --budget_s")
            continue
        section_start = time.perf_counter()
        if section == "casts":
            body = casts_table(device, cpu)
        elif section == "kernels":
            body = kernels_table(device, cpu)
        elif section == "bandwidth":
            body = bandwidth_table(jnp.asarray(rng.standard_normal((size, size)), jnp.bfloat16))
        elif section == "matmul":
            a = jnp.asarray(rng.standard_normal((size, size)), jnp.float32)
            b = jnp.asarray(rng.standard_normal((size, size)), jnp.float32)
            body, peak = matmul_table(a, b)
        elif section == "recipe":
            body = recipe_table()
        else:
            body = model_table(peak)
        emit(f"## {section} ({time.perf_counter() - section_start:.0f} s)\n\n{body}")


if __name__ == "__main__":
    app.run(main)
