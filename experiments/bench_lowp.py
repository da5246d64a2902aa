"""Low precision on CPU: accuracy of the MXFP8 / NVFP4 quantizers and recipes, and the cost of
the Pallas kernels in interpret mode next to their jnp references.

    python -m experiments.bench_lowp

Prints three markdown tables, each measured side by side in one run:

1. quantizer round-trip SNR (dB) vs the f32 input, on Gaussian data and on Gaussian data with
   2% outliers (x50), and the SNR of a quantized matmul vs the f32 matmul;
2. the training recipes (c2jax.precision): SNR of y, dx, dw vs f32 autodiff for one
   ``[batch*seq, embed] x [embed, mlp]`` layer, and fwd+bwd time vs plain f32 dot_general;
3. time of each op: jnp reference (jit) vs Pallas kernel (``interpret=True``), the best of
   ``--repeats`` runs after a warm-up (compile excluded; the minimum, because the shared CPU
   is noisy and contention only ever adds time).

Everything runs on the default JAX backend; on CPU the Pallas kernels are interpreted, so the
kernel timings measure the interpreter, not a GPU. For GPU numbers see bench_lowp_gpu.py.
"""
import datetime
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

import pallas_kernels as pk
from c2jax.precision import dot_general_for

_ROWS = flags.DEFINE_integer("rows", 512, "rows of the quantized tensors (tokens)")
_COLS = flags.DEFINE_integer("cols", 1024, "columns (the contraction axis)")
_REPEATS = flags.DEFINE_integer("repeats", 10, "timed runs per measurement (best reported)")


def snr_db(x, ref) -> float:
    x, ref = np.asarray(x, np.float64), np.asarray(ref, np.float64)
    return float(10 * np.log10(np.sum(ref ** 2) / np.sum((x - ref) ** 2)))


def best_seconds(fn, *args) -> float:
    jax.block_until_ready(fn(*args))                  # compile + warm up
    times = []
    for _ in range(_REPEATS.value):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def best_ratio(fn, baseline, *args) -> float:
    """best time of fn / best time of baseline, the two run alternately (drift hits both)."""
    jax.block_until_ready((fn(*args), baseline(*args)))
    times = {fn: [], baseline: []}
    for _ in range(_REPEATS.value):
        for f in (fn, baseline):
            start = time.perf_counter()
            jax.block_until_ready(f(*args))
            times[f].append(time.perf_counter() - start)
    return min(times[fn]) / min(times[baseline])


def test_tensors(rows, cols):
    rng = np.random.default_rng(0)
    gaussian = rng.standard_normal((rows, cols)).astype(np.float32)
    outliers = np.where(rng.random((rows, cols)) < 0.02, 50.0, 1.0).astype(np.float32)
    return {"gaussian": jnp.asarray(gaussian), "2% outliers x50": jnp.asarray(gaussian * outliers)}


def round_trips(key):
    """name -> function x -> dequantize(quantize(x)) along the last axis."""
    return {
        "MXFP8 rceil": lambda x: pk.dequantize_mxfp8(*pk.quantize_mxfp8(x)),
        "MXFP8 floor (OCP)": lambda x: pk.dequantize_mxfp8(
            *pk.quantize_mxfp8(x, scale_mode="floor")),
        "NVFP4 1x16 RNE": lambda x: pk.dequantize_nvfp4(*pk.quantize_nvfp4(x)),
        "NVFP4 1x16 stochastic": lambda x: pk.dequantize_nvfp4(
            *pk.quantize_nvfp4(x, rounding="stochastic", key=key)),
        "NVFP4 16x16 RNE": lambda x: pk.dequantize_nvfp4(*pk.quantize_nvfp4(x, two_d=True)),
    }


def quantized_matmul(fmt, a, b):
    """[M, K] x [N, K] -> [M, N] with both operands quantized along K."""
    if fmt == "mxfp8":
        return pk.scaled_matmul(*pk.quantize_mxfp8(a), *pk.quantize_mxfp8(b), "mxfp8")
    qa, qb = pk.quantize_nvfp4(a), pk.quantize_nvfp4(b)
    return pk.scaled_matmul(qa[0], qa[1], qb[0], qb[1], "nvfp4", a_global_scale=qa[2],
                            b_global_scale=qb[2])


def accuracy_table(tensors):
    lines = ["| quantizer | " + " | ".join(f"SNR {name} (dB)" for name in tensors) + " |",
             "|---|" + "---:|" * len(tensors)]
    for name, fn in round_trips(jax.random.key(0)).items():
        fn = jax.jit(fn)
        lines.append(f"| {name} | " + " | ".join(f"{snr_db(fn(x), x):.1f}"
                                                 for x in tensors.values()) + " |")
    rng = np.random.default_rng(1)
    b = jnp.asarray(rng.standard_normal((256, tensors["gaussian"].shape[1])), jnp.float32)
    for fmt in ("mxfp8", "nvfp4"):
        fn = jax.jit(lambda a, b, fmt=fmt: quantized_matmul(fmt, a, b))
        cells = [f"{snr_db(fn(a, b), np.asarray(a, np.float64) @ np.asarray(b, np.float64).T):.1f}"
                 for a in tensors.values()]
        lines.append(f"| matmul {fmt} x {fmt} (vs f32 matmul) | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def recipe_table(rows, cols):
    rng = np.random.default_rng(2)
    x = jnp.asarray(rng.standard_normal((rows, cols)), jnp.float32)
    w = jnp.asarray(rng.standard_normal((cols, 512)) / np.sqrt(cols), jnp.float32)
    g = jnp.asarray(rng.standard_normal((rows, 512)), jnp.float32)
    dims = (((1,), (0,)), ((), ()))

    def step(recipe, **kwargs):
        def run(x, w, g, key):
            dot_general = dot_general_for(recipe, key, **kwargs)
            y, pullback = jax.vjp(lambda x, w: dot_general(x, w, dims), x, w)
            return (y,) + pullback(g)
        return jax.jit(run)

    key = jax.random.key(3)
    exact_fn = step("bf16")
    exact = exact_fn(x, w, g, key)
    base_seconds = best_seconds(exact_fn, x, w, g, key)
    lines = ["| recipe | SNR y (dB) | SNR dx (dB) | SNR dw (dB) | fwd+bwd time / f32 |",
             "|---|---:|---:|---:|---:|"]
    for label, recipe, kwargs in (
            ("mxfp8", "mxfp8", {}),
            ("nvfp4 (SR + RHT, the recipe)", "nvfp4", {}),
            ("nvfp4 without stochastic rounding", "nvfp4", dict(stochastic_rounding=False)),
            ("nvfp4 without Hadamard", "nvfp4", dict(hadamard=False)),
            ("identity quantizers (plumbing only)", "identity", {})):
        fn = step(recipe, **kwargs)
        got = fn(x, w, g, key)
        ratio = best_ratio(fn, exact_fn, x, w, g, key)
        lines.append(f"| {label} | " + " | ".join(f"{snr_db(a, b):.1f}" if recipe != "identity"
                                                  else "exact" for a, b in zip(got, exact))
                     + f" | {ratio:.1f}x |")
    return "\n".join(lines) + f"\n\n(f32 dot_general fwd+bwd, best of {_REPEATS.value}: " \
        f"{base_seconds * 1e3:.2f} ms)"


def timing_table(x):
    rows, cols = x.shape
    qx = pk.quantize_mxfp8(x)
    nx = pk.quantize_nvfp4(x)
    b = x[:256]
    qb, nb = pk.quantize_mxfp8(b), pk.quantize_nvfp4(b)
    sign = pk.hadamard_sign(jax.random.key(0))
    ops = {
        f"quantize_mxfp8 [{rows}, {cols}]": lambda impl: lambda: pk.quantize_mxfp8(x, impl=impl),
        f"dequantize_mxfp8 [{rows}, {cols}]":
            lambda impl: lambda: pk.dequantize_mxfp8(*qx, impl=impl),
        f"quantize_nvfp4 [{rows}, {cols}]": lambda impl: lambda: pk.quantize_nvfp4(x, impl=impl),
        f"dequantize_nvfp4 [{rows}, {cols}]":
            lambda impl: lambda: pk.dequantize_nvfp4(*nx, impl=impl),
        f"random_hadamard_transform [{rows}, {cols}]":
            lambda impl: lambda: pk.random_hadamard_transform(x, sign, impl=impl),
        f"pack_fp4 [{rows}, {cols}]": lambda impl: lambda: pk.pack_fp4(nx[0], impl=impl),
        f"scaled_matmul mxfp8 [{rows}, {cols}] x [256, {cols}]":
            lambda impl: lambda: pk.scaled_matmul(*qx, *qb, "mxfp8", impl=impl),
        f"scaled_matmul nvfp4 [{rows}, {cols}] x [256, {cols}]":
            lambda impl: lambda: pk.scaled_matmul(nx[0], nx[1], nb[0], nb[1], "nvfp4",
                                                  a_global_scale=nx[2], b_global_scale=nb[2],
                                                  impl=impl),
    }
    lines = ["| op | jnp reference (ms) | Pallas interpret (ms) | interpret / reference | "
             "bit-identical |", "|---|---:|---:|---:|:---:|"]
    for name, make in ops.items():
        reference, kernel = make("reference"), make("pallas")
        same = all(np.array_equal(np.asarray(pk_bits(a)), np.asarray(pk_bits(b)))
                   for a, b in zip(jax.tree.leaves(reference()), jax.tree.leaves(kernel())))
        t_ref, t_kernel = best_seconds(reference), best_seconds(kernel)
        lines.append(f"| {name} | {t_ref * 1e3:.2f} | {t_kernel * 1e3:.2f} | "
                     f"{t_kernel / t_ref:.1f}x | {'yes' if same else 'NO'} |")
    return "\n".join(lines)


def pk_bits(a):
    """Comparable view: bit patterns for low-precision arrays, the array otherwise."""
    if a.dtype in (pk.E4M3, pk.E8M0, pk.E2M1):
        return pk.formats.to_bits(a)
    return a


def main(argv):
    del argv
    rows, cols = _ROWS.value, _COLS.value
    machine = platform.processor() or platform.machine()
    print(f"# bench_lowp — {datetime.date.today()}, {machine}, jax {jax.__version__} on "
          f"{jax.default_backend()}, tensors [{rows}, {cols}]\n")
    tensors = test_tensors(rows, cols)
    print("## Quantizer accuracy\n")
    print(accuracy_table(tensors) + "\n")
    print(f"## Recipes: one [{rows}, {cols}] x [{cols}, 512] layer\n")
    print(recipe_table(rows, cols) + "\n")
    print("## Kernels: jnp reference vs Pallas interpret\n")
    print(timing_table(tensors["gaussian"]))


if __name__ == "__main__":
    app.run(main)
