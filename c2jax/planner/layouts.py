"""Plans one mesh layout (memory, FLOPs, traffic, step time) and ranks every layout that fits.

    plan = plan_layout(workload, sizes, hardware)        # LayoutPlan
    plans = rank_layouts(workload, hardware, devices)    # fitting layouts, fastest first

**Step time** (an estimate, never measured here): compute = the device's model FLOPs / (peak
of the precision recipe x `matmul_efficiency`); each collective's bytes / the bandwidth of the
links its axis spans. Devices fill the mesh in `c2jax.sharding.MESH_AXES` order with `tensor`
innermost, so an axis whose group (its size x the sizes of the axes inside it) fits in one node
runs over NVLink, otherwise over the network. FSDP gathers / reduce-scatters and the data-
parallel all-reduce overlap with compute (they depend only on weights: XLA's scheduler and
MaxText's layouts hide them); tensor, expert and context collectives sit on the critical path
and add to it. step = max(compute, overlappable traffic) + critical-path traffic.
"""
from __future__ import annotations

import dataclasses
import itertools

from c2jax import flops, sharding
from c2jax.planner import comms, memory
from c2jax.planner.hardware import Hardware

#: Achieved fraction of the matmul peak assumed for compute time (MFU of well-tuned MoE
#: training runs is 0.3-0.5 of the *dense* peak; the matmuls themselves run nearer 0.6-0.7).
DEFAULT_MATMUL_EFFICIENCY = 0.6
#: Share of HBM a plan may use (the rest: XLA's fragmentation, the runtime, NCCL buffers).
DEFAULT_HBM_FRACTION = 0.9
OVERLAPPED = ("fsdp_all_gather", "fsdp_reduce_scatter", "dp_all_reduce")


@dataclasses.dataclass(frozen=True)
class LayoutPlan:
    sizes: dict                   # mesh axis -> size
    memory: memory.MemoryEstimate  # bytes per device
    fits: bool
    flops_per_device: float       # model FLOPs per step on one device (replicated work counted)
    traffic: dict                 # collective -> bytes sent per device per step
    seconds: dict                 # "compute", each collective, "step"
    peak_flops: float             # the device's FLOP/s at the model's precision recipe
    remat_policy: str

    @property
    def mfu(self) -> float:
        """Model FLOPs utilisation the estimated step time implies."""
        return self.flops_per_device / (self.step_seconds * self.peak_flops)

    @property
    def step_seconds(self) -> float:
        return self.seconds["step"]

    def label(self) -> str:
        mesh = " ".join(f"{a}={self.sizes[a]}" for a in sharding.MESH_AXES
                        if self.sizes[a] > 1) or "1 device"
        return f"{mesh}, remat {self.remat_policy}"


def link_bandwidth(sizes: dict, axis: str, hardware: Hardware) -> float:
    """Bytes/s per device per direction of the links an axis's collectives use."""
    inner = 1
    for a in reversed(sharding.MESH_AXES):
        inner *= sizes[a]
        if a == axis:
            break
    return hardware.nvlink_bandwidth if inner <= hardware.devices_per_node \
        else hardware.network_bandwidth


def _fsdp_axis(sizes: dict) -> str:
    """The innermost axis that shards weights' `embed` dims (its links bound the gathers)."""
    for a in ("expert", "context", "fsdp"):
        if sizes[a] > 1:
            return a
    return "fsdp"


def flops_per_device(workload, sizes: dict) -> float:
    """Training FLOPs one device runs per step: its local tokens' share of the model, split
    over `tensor` (experts are balanced over `expert` as tokens are over the batch axes)."""
    c = workload.model
    rows, positions = memory.local_tokens(workload.rows, workload.seq_len, sizes, workload.rules)
    per_token = flops.training_flops_per_token(c, workload.seq_len)
    if workload.proximal_forward:
        per_token += flops.forward_flops_per_token(c, workload.seq_len, include_mtp=True)
    return per_token * rows * positions * workload.microbatches / sizes["tensor"]


def plan_layout(workload, sizes: dict, hardware: Hardware, *,
                matmul_efficiency: float = DEFAULT_MATMUL_EFFICIENCY,
                hbm_fraction: float = DEFAULT_HBM_FRACTION) -> LayoutPlan:
    sizes = {a: int(sizes.get(a, 1)) for a in sharding.MESH_AXES}
    mem = memory.per_device_memory(workload, sizes)
    traffic = comms.bytes_per_step(workload, sizes)
    device_flops = flops_per_device(workload, sizes)
    peak = hardware.flops(workload.model.precision_recipe)
    seconds = {"compute": device_flops / (peak * matmul_efficiency)}
    for name, sent in traffic.items():
        axis = comms.COLLECTIVE_AXIS.get(name) or _fsdp_axis(sizes)
        seconds[name] = sent / link_bandwidth(sizes, axis, hardware) if sent else 0.0
    overlapped = sum(seconds[n] for n in OVERLAPPED)
    exposed = sum(seconds[n] for n in comms.COLLECTIVES if n not in OVERLAPPED)
    seconds["step"] = max(seconds["compute"], overlapped) + exposed
    return LayoutPlan(sizes=sizes, memory=mem, fits=mem.total <= hbm_fraction
                      * hardware.hbm_bytes, flops_per_device=device_flops, traffic=traffic,
                      seconds=seconds, peak_flops=peak,
                      remat_policy=workload.model.remat_policy)


def _powers_of_two_dividing(n: int, limit: int) -> list[int]:
    out, p = [], 1
    while p <= limit and n % p == 0:
        out.append(p)
        p *= 2
    return out


def candidate_layouts(workload, devices: int, max_tensor: int = 8) -> list[dict]:
    """Meshes of `devices` the model can run on: tensor <= one node, dividing heads and MLP
    widths; expert dividing the routed experts; context splitting the sequence into 2 x context
    chunks; the rest split between data and fsdp."""
    c = workload.model
    layouts = []
    for tensor, expert, context in itertools.product(
            _powers_of_two_dividing(devices, max_tensor),
            _powers_of_two_dividing(devices, max(1, c.n_routed_experts)),
            _powers_of_two_dividing(devices, devices)):
        inner = tensor * expert * context
        if devices % inner or (context > 1 and workload.seq_len % (2 * context)):
            continue
        try:
            sharding.validate_layout(c, {"tensor": tensor, "expert": expert})
        except ValueError:
            continue
        rest = devices // inner
        for data in _powers_of_two_dividing(rest, rest):
            layouts.append({"data": data, "fsdp": rest // data, "context": context,
                            "expert": expert, "tensor": tensor})
    return layouts


def with_remat(workload, policy: str):
    """The workload with the model's `remat_policy` replaced."""
    model = workload.model.copy_and_resolve_references()
    with model.unlocked():
        model.remat_policy = policy
    return dataclasses.replace(workload, model=model)


def rank_layouts(workload, hardware: Hardware, devices: int,
                 remat_policies: tuple = (), **kwargs) -> list[LayoutPlan]:
    """Every candidate layout planned, for each of `remat_policies` (default: the model's);
    those that fit in HBM first, fastest step first, then the ones that do not fit, smallest
    memory first."""
    variants = [with_remat(workload, p) for p in remat_policies] or [workload]
    plans = [plan_layout(w, sizes, hardware, **kwargs)
             for w in variants for sizes in candidate_layouts(w, devices)]
    return sorted(plans, key=lambda p: (not p.fits, p.step_seconds if p.fits
                                        else p.memory.total))
