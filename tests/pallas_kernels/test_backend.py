"""Implementation selection on this (CPU) machine."""
import pytest

from pallas_kernels import backend


def test_auto_picks_the_reference_on_cpu_and_pallas_runs_interpreted():
    assert backend.platform() == "cpu"
    assert backend.resolve_impl("auto", op="x") == "reference"
    assert backend.resolve_impl("auto", op="x", matmul=True) == "reference"
    assert backend.resolve_impl("xla", op="x", matmul=True) == "xla"
    assert backend.resolve_impl("pallas", op="x") == "pallas"
    assert backend.pallas_kwargs() == {"interpret": True}
    assert backend.gpu_compute_capability() is None and not backend.has_block_scaled_mma()


def test_bad_impl_is_a_clear_error():
    with pytest.raises(ValueError, match="impl must be one of"):
        backend.resolve_impl("triton", op="quantize_mxfp8")
    for matmul_only in ("block_scaled", "xla"):
        with pytest.raises(ValueError, match="only for scaled_matmul"):
            backend.resolve_impl(matmul_only, op="quantize_mxfp8")


def test_tiles_are_powers_of_two_within_the_budget():
    assert [backend.pow2_tile(n, 64) for n in (1, 3, 64, 100)] == [1, 2, 64, 64]
    assert backend.pow2_tile(5, 128, minimum=16) == 16
    rows, cols = backend.grid_tile(5000, 224, 32)      # MXFP8 on a [5000, 7168] tensor, CPU
    assert (rows, cols) == (512, 32) and rows * cols * 32 <= 1 << 19
    assert backend.grid_tile(3, 5, 16) == (2, 4)       # never larger than the grid
