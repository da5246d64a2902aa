"""The GPU benchmark's own machinery, checked on CPU (its GPU numbers are in BENCHMARKS.md)."""
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from experiments import bench_lowp_gpu as bench


def test_byte_comparison_sees_signed_zeros_and_names_the_rows():
    want = jnp.asarray([[0.0, 1.0], [-0.0, 2.0]], jnp.float32)
    got = jnp.asarray([[0.0, 1.0], [0.0, 2.0]], jnp.float32)
    assert bench.differing_bytes(got, got) == 0
    assert bench.differing_bytes(got, want) == 1            # only the sign byte of -0
    assert "1 elements, rows [1]" in bench.where_they_differ(got, want)
    codes = jnp.asarray([1, 2], jnp.uint8).view(jnp.float8_e4m3fn)
    assert bench.differing_bytes((codes,), (codes.at[0].set(0),)) == 1


def test_edge_case_tensor_holds_the_special_blocks():
    x = bench.edge_case_tensor(16, 64)
    assert np.all(x[0, :32] == 0) and np.all(np.signbit(x[1, :32]))
    assert np.max(np.abs(x[2, :32])) == 448.0 and np.max(np.abs(x[4, :32])) == 500.0
    tiny = bench.edge_case_tensor(16, 64, subnormals=True)
    assert 0 < np.max(np.abs(tiny[2, :32])) < np.finfo(np.float32).tiny
    assert np.isnan(bench.nonfinite_tensor(4, 64)).sum() == 1


def test_casts_agree_with_themselves_on_one_device():
    cpu = jax.devices("cpu")[0]
    table = bench.casts_table(cpu, cpu)
    assert table.count("| 0 of ") == 5, table


def test_without_a_gpu_it_exits_with_a_message():
    done = subprocess.run([sys.executable, "-m", "experiments.bench_lowp_gpu"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode != 0 and "needs an NVIDIA GPU" in done.stderr
