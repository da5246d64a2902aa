"""Low precision on one NVIDIA GPU: quantizer bandwidth and block-scaled matmul throughput.

    python -m experiments.bench_lowp_gpu                 # defaults: 8192^3 matmuls, 8192^2 tensors
    python -m experiments.bench_lowp_gpu --size=4096 --repeats=20

Self-contained (jax + pallas_kernels). Prints two markdown tables, measured side by side:

1. Quantizers, in GB/s of (input read + codes and scales written), next to a plain device
   copy of the same bf16 tensor (read + write) as the bandwidth ceiling: quantize_mxfp8 and
   quantize_nvfp4 as XLA-fused jnp (``impl="reference"``) and as Pallas Triton kernels.
2. Matmuls ``[M, K] x [N, K] -> [M, N]`` in TFLOP/s (2 M N K flops), against bf16:
   * bf16 x bf16 -> f32 (cuBLAS through XLA), the baseline;
   * fp8 e4m3 x e4m3 with one scale per tensor (XLA's FP8 GEMM; the ceiling for FP8 on Hopper);
   * MXFP8 blockwise-scaled (1x32 E8M0 scales) as the Pallas Triton kernel of
     ``pallas_kernels.scaled_matmul`` (fp8 tiles decoded exactly to bf16 in SRAM, bf16 MMA,
     f32 accumulation);
   * the same blockwise-scaled product as XLA ops (dequantize to bf16, then the bf16 GEMM);
   * on Blackwell (sm_100) only: MXFP8 and NVFP4 through ``jax.nn.scaled_matmul`` (cuDNN
     block-scaled MMA, ``impl="block_scaled"``). Hopper (H100/H200) has FP8 tensor cores but no
     block-scaled MX instructions, so those rows are skipped there.

Every product is checked against the f32 reference before it is timed (relative error in
the table). A row whose kernel fails to compile reports the error instead of a number: the
Pallas GPU kernels and the Blackwell path were written without access to a GPU.

On a machine without a GPU the script exits with a message.
"""
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

import pallas_kernels as pk
from pallas_kernels import backend

_SIZE = flags.DEFINE_integer("size", 8192, "M = N = K of the matmuls; the quantized tensors are "
                             "[size, size]")
_REPEATS = flags.DEFINE_integer("repeats", 10, "timed runs per row (median reported)")


def median_seconds(fn, *args) -> float:
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(_REPEATS.value):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def relative_error(got, want) -> float:
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    return float(np.linalg.norm(got - want) / np.linalg.norm(want))


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
    lines = ["| op | ms | GB/s | vs copy |", "|---|---:|---:|---:|"]
    copy_gbs = None
    reference = None
    for name, moved, fn in quantizer_rows(x):
        try:
            out = fn(x)
            if "mxfp8" in name:       # the kernel must reproduce the reference bit for bit
                if reference is None or "reference" in name:
                    reference = out
                else:
                    same = all(np.array_equal(np.asarray(pk.formats.to_bits(a)),
                                              np.asarray(pk.formats.to_bits(b)))
                               for a, b in zip(out, reference))
                    name += "" if same else " (NOT bit-identical to the reference)"
            seconds = median_seconds(fn, x)
        except Exception as error:  # pylint: disable=broad-except
            lines.append(f"| {name} | failed: {type(error).__name__}: {str(error)[:120]} | | |")
            continue
        gbs = moved / seconds / 1e9
        copy_gbs = copy_gbs or gbs
        lines.append(f"| {name} | {seconds * 1e3:.3f} | {gbs:.0f} | {gbs / copy_gbs:.2f} |")
    return "\n".join(lines)


def matmul_rows(a, b):
    """(name, function of (a, b) f32 [M, K], [N, K] prepared outside the timing) rows."""
    mx_a, mx_b = pk.quantize_mxfp8(a), pk.quantize_mxfp8(b)
    nv_a, nv_b = pk.quantize_nvfp4(a), pk.quantize_nvfp4(b)
    a16, b16 = a.astype(jnp.bfloat16), b.astype(jnp.bfloat16)
    scale_a, scale_b = jnp.max(jnp.abs(a)) / 448.0, jnp.max(jnp.abs(b)) / 448.0
    a8 = (a / scale_a).astype(jnp.float8_e4m3fn)
    b8 = (b / scale_b).astype(jnp.float8_e4m3fn)
    tn = (((1,), (1,)), ((), ()))

    def bf16(a16, b16):
        return jax.lax.dot_general(a16, b16, tn, preferred_element_type=jnp.float32)

    def fp8_tensorwise(a8, b8, scale_a, scale_b):
        out = jax.lax.dot_general(a8, b8, tn, preferred_element_type=jnp.float32)
        return out * (scale_a * scale_b)

    def mxfp8_pallas(a, b):
        return pk.scaled_matmul(*a, *b, "mxfp8", impl="pallas")

    def mxfp8_xla(a, b):
        deq = lambda q: pk.dequantize_mxfp8(*q, dtype=jnp.bfloat16, impl="reference")
        return jax.lax.dot_general(deq(a), deq(b), tn, preferred_element_type=jnp.float32)

    rows = [
        ("bf16 x bf16 -> f32 (XLA / cuBLAS)", jax.jit(bf16), (a16, b16)),
        ("fp8 e4m3, per-tensor scale (XLA FP8 GEMM)", jax.jit(fp8_tensorwise),
         (a8, b8, scale_a, scale_b)),
        ("MXFP8 1x32 blockwise, Pallas Triton kernel", jax.jit(mxfp8_pallas), (mx_a, mx_b)),
        ("MXFP8 1x32 blockwise, XLA dequantize + bf16 GEMM", jax.jit(mxfp8_xla), (mx_a, mx_b)),
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


def matmul_table(a, b) -> str:
    m, k = a.shape
    n = b.shape[0]
    flops = 2 * m * n * k
    exact = jax.jit(lambda a, b: jax.lax.dot_general(
        a, b, (((1,), (1,)), ((), ())), precision=jax.lax.Precision.HIGHEST))(a, b)
    lines = [f"| [{m}, {k}] x [{n}, {k}] | ms | TFLOP/s | vs bf16 | rel. error vs f32 |",
             "|---|---:|---:|---:|---:|"]
    base = None
    for name, fn, args in matmul_rows(a, b):
        try:
            error = relative_error(fn(*args), exact)
            seconds = median_seconds(fn, *args)
        except Exception as err:  # pylint: disable=broad-except
            lines.append(f"| {name} | failed: {type(err).__name__}: {str(err)[:120]} | | | |")
            continue
        tflops = flops / seconds / 1e12
        base = base or tflops
        lines.append(f"| {name} | {seconds * 1e3:.3f} | {tflops:.0f} | {tflops / base:.2f} | "
                     f"{error:.2e} |")
    if not backend.has_block_scaled_mma():
        lines.append("\n(no sm_100: the Blackwell block-scaled rows are skipped)")
    return "\n".join(lines)


def main(argv):
    del argv
    if jax.default_backend() != "gpu":
        sys.exit(f"bench_lowp_gpu needs an NVIDIA GPU; the default JAX backend here is "
                 f"{jax.default_backend()!r}. For CPU numbers run "
                 f"`python -m experiments.bench_lowp`.")
    device = jax.devices()[0]
    print(f"# bench_lowp_gpu — {device.device_kind}, compute capability "
          f"{backend.gpu_compute_capability()}, jax {jax.__version__}\n")
    size = _SIZE.value
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.standard_normal((size, size)), jnp.bfloat16)
    print(f"## Quantizers on a [{size}, {size}] bf16 tensor\n")
    print(bandwidth_table(x) + "\n")
    a = jnp.asarray(rng.standard_normal((size, size)), jnp.float32)
    b = jnp.asarray(rng.standard_normal((size, size)), jnp.float32)
    print("## Matmuls\n")
    print(matmul_table(a, b))


if __name__ == "__main__":
    app.run(main)
