"""Rollout-level checkpointing: `python -m experiments.rl` killed with SIGKILL and restarted
loses no trajectory, trains none twice, and keeps its staleness accounting."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from c2jax.rl.loop import GROUPS_FILE
from c2jax.train.checkpoint import CHECKPOINTS_DIR

REPO = Path(__file__).resolve().parents[2]


def command(workdir, policy_dir, steps):
    return [sys.executable, "-m", "experiments.rl", "--config=tests/rl/toy_config.py",
            f"--workdir={workdir}", f"--config.init_from={policy_dir}",
            f"--config.learner.steps={steps}"]


def consumed(workdir):
    path = workdir / GROUPS_FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def final_rollout_state(workdir):
    steps = sorted(int(p.name) for p in (workdir / CHECKPOINTS_DIR).iterdir() if p.name.isdigit())
    data = workdir / CHECKPOINTS_DIR / str(steps[-1]) / "data" / "process_0-of-1.json"
    return steps[-1], json.loads(data.read_text())


def test_sigkill_then_restart_loses_and_repeats_nothing(tmp_path, policy_dir):
    workdir, steps = tmp_path / "rl", 12
    # One CPU device, compiled at the suite's optimisation level (tests/conftest.py).
    env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_backend_optimization_level=0")
    proc = subprocess.Popen(command(workdir, policy_dir, steps), cwd=REPO, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 240
    # Kill it mid-run: after a checkpoint (every 3 steps) and a few steps past it.
    while time.monotonic() < deadline and proc.poll() is None:
        if len({r["step"] for r in consumed(workdir)}) >= 7:
            break
        time.sleep(0.2)
    assert proc.poll() is None, proc.stderr.read().decode()[-3000:]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    killed_history = consumed(workdir)
    assert max(r["step"] for r in killed_history) >= 7

    done = subprocess.run(command(workdir, policy_dir, steps), cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    history = consumed(workdir)
    # Steps after the checkpoint the killed run resumed from were dropped and rerun once.
    assert sorted({r["step"] for r in history}) == list(range(1, steps + 1))
    ids = [r["group_id"] for r in history]
    assert len(ids) == len(set(ids)) == steps * 4          # no group trained twice
    # Accounting: every admitted group is consumed, queued or in flight in the last
    # checkpoint, or was dropped; none is missing.
    last, state = final_rollout_state(workdir)
    assert last == steps
    ledger, controller = state["ledger"], state["controller"]
    queued = [g["group_id"] for g in ledger["ready"]]
    running = [g["group_id"] for g in ledger["running"]]
    accounted = set(ids) | set(queued) | set(running)
    assert len(accounted) == len(ids) + len(queued) + len(running)
    assert len(accounted) + ledger["dropped_groups"] == controller["next_group"]
    assert controller["version"] == steps and ledger["consumed"] == steps * 4
    # The staleness bound still held after the restart: what was generated ahead of the
    # learner never exceeded (eta + 1) groups per step's worth.
    eta, batch = 1, 4
    assert controller["accepted"] + len(running) <= (eta + steps + 1) * batch
