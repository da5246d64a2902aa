"""Capacity planner: will a config fit, on which mesh, and how fast, without the hardware.

    python -m experiments.plan --config=configs/rl_k2.py --hardware=b200 --devices=2048
    python -m experiments.plan --config=configs/longctx_k2.py --hardware=h200 --devices=256 \\
        --output=plan.md

For the config's model (an RL config has none, its policy comes from `init_from`: `--model`
names the preset, default Kimi K2) it prints per-device memory (params + Adam moments,
gradients, gathered weights, activations, logits), FLOPs per step, the bytes of every
collective, and an estimated step time, for every mesh layout of `--devices` the model can be
split over, ranked: those that fit in HBM first, fastest first. The config's own mesh is
planned too when it resolves on that many devices. Any config field can be overridden as usual
(`--config.learner.microbatch_rows=8`). The memory model is checked against XLA's compiled
memory analysis in tests/planner/; docs/scaling.md has the method and its limits.
"""
from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

from absl import app, flags
from ml_collections import config_flags

from c2jax import sharding
from c2jax.planner import hardware as hardware_lib
from c2jax.planner import layouts, memory, report, workload as workload_lib
from configs import models
from experiments.cli import parse_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "a stage or RL config file")
_HARDWARE = flags.DEFINE_enum("hardware", "b200", sorted(hardware_lib.PRESETS),
                              "accelerator preset")
_DEVICES = flags.DEFINE_integer("devices", 256, "accelerators of the learner")
_MODEL = flags.DEFINE_string("model", "", "model preset (configs/models.py) to plan instead "
                             "of the config's; needed for an RL config (default kimi_k2_1t)")
_REMAT = flags.DEFINE_list("remat", ["none", "full"], "remat policies to plan each layout "
                           "with (the planner models none and full)")
_FUSED = flags.DEFINE_bool("fused_attention", False, "what-if: plan as if attention were a "
                           "fused (flash) kernel that never materialises its scores; c2jax "
                           "has no such kernel yet, the default plans the code as it is")
_TOP = flags.DEFINE_integer("top", 10, "layouts shown")
_EFFICIENCY = flags.DEFINE_float("matmul_efficiency", layouts.DEFAULT_MATMUL_EFFICIENCY,
                                 "achieved fraction of the matmul peak")
_OUTPUT = flags.DEFINE_string("output", "", "also write the report (markdown) here")
flags.mark_flags_as_required(["config"])


def _model(config):
    """(model config, its name) from --model, the config, or Kimi K2 for an RL config."""
    name = _MODEL.value or ("" if "model" in config else "kimi_k2_1t")
    model = models.get_config(name) if name else config.model
    return model, name or "the config's model"


def main(argv):
    del argv
    config = _CONFIG.value
    hw = hardware_lib.get(_HARDWARE.value)
    devices = _DEVICES.value
    if devices < 1:
        sys.exit(f"error: --devices={devices} must be >= 1")
    model, name = _model(config)
    processes = max(1, devices // hw.devices_per_node)
    workload = dataclasses.replace(workload_lib.from_config(config, processes, model=model),
                                   fused_attention=_FUSED.value)
    bad = [p for p in _REMAT.value if p not in memory.REMAT_MODELLED]
    if bad:
        sys.exit(f"error: --remat {bad}: the planner models {memory.REMAT_MODELLED}")
    plans = layouts.rank_layouts(workload, hw, devices, remat_policies=tuple(_REMAT.value),
                                 matmul_efficiency=_EFFICIENCY.value)
    if not plans:
        sys.exit(f"error: no mesh of {devices} devices can split {name} "
                 "(see c2jax.sharding.validate_layout)")
    try:
        own_sizes = sharding.mesh_shape(config.mesh, devices)
        sharding.validate_layout(model, own_sizes)
        own = layouts.plan_layout(workload, own_sizes, hw, matmul_efficiency=_EFFICIENCY.value)
    except ValueError:  # the config's mesh does not resolve on --devices: plan the others only
        own = None
    text = report.render(workload, hw, devices, name, plans, _TOP.value, own)
    print(text)
    if _OUTPUT.value:
        Path(_OUTPUT.value).write_text(text)


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
