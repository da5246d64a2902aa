"""Capacity planning without the hardware: per-device memory, FLOPs, collective traffic and
step time of a config on a mesh layout, and a ranking of the layouts that fit.

    from c2jax import planner
    workload = planner.workload.from_config(config, num_processes=256, model=model_cfg)
    plans = planner.layouts.rank_layouts(workload, planner.hardware.get("b200"), devices=2048)

`experiments/plan.py` is the command; docs/scaling.md explains the model and its checks.
"""
from c2jax.planner import comms, hardware, layouts, memory, report, workload

__all__ = ["comms", "hardware", "layouts", "memory", "report", "workload"]
