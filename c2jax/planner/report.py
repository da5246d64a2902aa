"""The planner's markdown report: the workload, the ranked layouts, the best one in detail."""
from __future__ import annotations

from c2jax import flops
from c2jax.planner import comms
from c2jax.planner.layouts import OVERLAPPED

_GB = 1e9


def _gb(x: float) -> str:
    return f"{x / _GB:.1f}"


def header(workload, hardware, devices: int, model_name: str) -> str:
    c = workload.model
    counts = flops.param_counts(c)
    step_flops = flops.training_flops_per_token(c, workload.seq_len) * workload.tokens_per_step
    return "\n".join([
        f"## Plan: {model_name} ({counts['total'] / 1e9:.1f}B total, "
        f"{counts['active'] / 1e9:.1f}B active) on {devices} x {hardware.name}",
        "",
        f"- workload: {workload.kind}, {workload.microbatches} x {workload.rows} rows x "
        f"{workload.seq_len} tokens = {workload.tokens_per_step:,} tokens per step; "
        f"the model's remat `{c.remat_policy}`, compute `{c.dtype}`, recipe `{c.precision_recipe}`, "
        f"MoE dispatch `{c.moe_dispatch}`, attention "
        f"{'fused (what-if: no such kernel in c2jax yet)' if workload.fused_attention else 'as implemented (scores materialised)'}",
        f"- model FLOPs per step: {step_flops:.3e} (c2jax.flops: "
        f"{flops.training_flops_per_token(c, workload.seq_len):.3e} per token)",
        f"- {hardware.name}: {_gb(hardware.hbm_bytes)} GB HBM, "
        f"{hardware.flops(c.precision_recipe) / 1e12:.0f} TFLOP/s {c.precision_recipe}, "
        f"NVLink {_gb(hardware.nvlink_bandwidth)} GB/s, network "
        f"{_gb(hardware.network_bandwidth)} GB/s per device",
    ])


def layout_table(plans, top: int) -> str:
    lines = ["| # | layout | params+opt GB | grads GB | gathered weights GB | activations GB "
             "| logits GB | total GB | fits | compute s | exposed comm s | step s | MFU |",
             "|---:|---|---:|---:|---:|---:|---:|---:|:---:|---:|---:|---:|---:|"]
    for i, p in enumerate(plans[:top], 1):
        m, s = p.memory, p.seconds
        exposed = s["step"] - s["compute"]
        lines.append(
            f"| {i} | {p.label()} | {_gb(m.state)} | {_gb(m.gradients)} | "
            f"{_gb(m.weights_working)} | {_gb(m.activations)} | {_gb(m.logits)} | "
            f"{_gb(m.total)} | {'yes' if p.fits else 'no'} | {s['compute']:.2f} | "
            f"{exposed:.2f} | {s['step']:.2f} | {p.mfu:.0%} |")
    return "\n".join(lines)


def traffic_table(plan) -> str:
    lines = [f"Collectives of layout `{plan.label()}` (per device per step):", "",
             "| collective | GB sent | seconds | on the critical path |",
             "|---|---:|---:|:---:|"]
    for name in comms.COLLECTIVES:
        critical = "no" if name in OVERLAPPED else "yes"
        lines.append(f"| {name} | {_gb(plan.traffic[name])} | {plan.seconds[name]:.3f} | "
                     f"{critical} |")
    return "\n".join(lines)


def render(workload, hardware, devices: int, model_name: str, plans, top: int,
           own=None) -> str:
    """The whole report; `own` is the config's own mesh, planned, when it fits the devices."""
    fitting = [p for p in plans if p.fits]
    parts = [header(workload, hardware, devices, model_name), "",
             f"{len(fitting)} of {len(plans)} candidate layouts fit in "
             f"{_gb(hardware.hbm_bytes)} GB (90% usable); the best {min(top, len(plans))}:", "",
             layout_table(plans, top)]
    if own is not None:
        parts += ["", "The config's own mesh:", "", layout_table([own], 1)]
    best = fitting[0] if fitting else plans[0]
    parts += ["", traffic_table(best)]
    return "\n".join(parts) + "\n"
