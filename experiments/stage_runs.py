"""Running a training entry point as a subprocess, as a user would, and reading its metrics:
shared by the experiments that chain or compare whole runs (stages_tiny, lowp_parity)."""
from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

from c2jax.train.metrics import METRICS_FILE, read_records


def run_stage(module: str, config: str, workdir: Path, *overrides: str,
              devices: int = 1) -> dict:
    """Runs one entry point to completion (printing its command first); returns
    {"seconds": wall time, "records": its metrics.jsonl records}. An existing workdir is
    resumed by the entry point itself."""
    command = [sys.executable, "-m", module, f"--config={config}", f"--workdir={workdir}",
               "--config.train.progress_bar=False", *overrides]
    env = dict(os.environ)
    if devices > 1:
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "")
                            + f" --xla_force_host_platform_device_count={devices}").strip()
    print(f"\n$ {'XLA_FLAGS=' + shlex.quote(env['XLA_FLAGS']) + ' ' if devices > 1 else ''}"
          f"{shlex.join(command)}", flush=True)
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env)
    return {"seconds": time.perf_counter() - start, "records": read_records(workdir / METRICS_FILE)}


def evals(run: dict) -> list[dict]:
    """The held-out evaluation records of a run, in step order."""
    return [r for r in run["records"] if "eval_loss" in r]
