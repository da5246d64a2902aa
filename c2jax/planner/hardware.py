"""Accelerator presets for the capacity planner: peak FLOP/s per precision, HBM, links.

Figures are the vendors' dense (no sparsity) datasheet peaks per GPU, not measured here:
H100 SXM and H200 (NVIDIA H100/H200 datasheets: 989 TFLOP/s bf16, 1979 fp8; 80 GB HBM3 at
3.35 TB/s, 141 GB HBM3e at 4.8 TB/s), B200 (NVIDIA DGX B200 / Blackwell datasheet: 2.25
PFLOP/s bf16, 4.5 fp8, 9 fp4 dense; 180 GB HBM3e at 8 TB/s as configured in DGX/HGX B200).
NVLink is per GPU and per direction (NVLink 4: 900 GB/s bidirectional -> 450; NVLink 5: 1.8
TB/s -> 900). The scale-out network is one 400 Gb/s NIC per GPU (50 GB/s per direction), the
DGX/HGX reference design for all three. Eight GPUs share one NVLink domain (a node).
"""
from __future__ import annotations

import dataclasses

#: Model precision recipe (c2jax.precision) -> the hardware peak its matmuls run at.
RECIPE_PEAK = {"bf16": "bf16", "mxfp8": "fp8", "nvfp4": "fp4"}


@dataclasses.dataclass(frozen=True)
class Hardware:
    name: str
    peak_flops: dict          # precision ("bf16" | "fp8" | "fp4") -> dense FLOP/s per device
    hbm_bytes: float          # memory per device
    hbm_bandwidth: float      # bytes/s per device
    nvlink_bandwidth: float   # bytes/s per device per direction, inside a node
    network_bandwidth: float  # bytes/s per device per direction, between nodes
    devices_per_node: int     # devices in one NVLink domain

    def flops(self, recipe: str) -> float:
        """Peak FLOP/s of the matmuls of a precision recipe; an error if the chip lacks it."""
        precision = RECIPE_PEAK.get(recipe, recipe)
        if precision not in self.peak_flops:
            raise ValueError(f"{self.name} has no {precision} matmul peak "
                             f"(has {sorted(self.peak_flops)}): pick another recipe")
        return self.peak_flops[precision]


_GB = 1e9
PRESETS = {
    "h100": Hardware("h100", {"bf16": 989e12, "fp8": 1979e12}, 80 * _GB, 3.35e12,
                     450 * _GB, 50 * _GB, 8),
    "h200": Hardware("h200", {"bf16": 989e12, "fp8": 1979e12}, 141 * _GB, 4.8e12,
                     450 * _GB, 50 * _GB, 8),
    "b200": Hardware("b200", {"bf16": 2250e12, "fp8": 4500e12, "fp4": 9000e12}, 180 * _GB,
                     8.0e12, 900 * _GB, 50 * _GB, 8),
}


def get(name: str) -> Hardware:
    if name not in PRESETS:
        raise ValueError(f"unknown hardware {name!r}; choose one of {sorted(PRESETS)}")
    return PRESETS[name]
