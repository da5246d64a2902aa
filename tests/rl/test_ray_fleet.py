"""The Ray fleet on an existing cluster (started with `ray start --head`, token auth, loopback),
and an actor killed mid-run: Ray restarts it, its in-flight episodes run again with the newest
params, and every group trains with all its episodes, once."""
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from c2jax.rl import loop
from c2jax.rl.loop import GROUPS_FILE, train_rl
from c2jax.rl.runtime import make_fleet
from tests.rl.test_ray import ray_processes
from tests.rl.toy_config import get_config
from tests.rl.toy_envs import DigitsEnv, toy_tasks

ray = pytest.importorskip("ray")
# Ray tests look for Ray processes machine-wide: under xdist they share one worker.
pytestmark = pytest.mark.xdist_group("ray")
RAY = str(Path(sys.executable).parent / "ray")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def cluster(monkeypatch):
    """A 2-CPU Ray head on 127.0.0.1 with a fresh auth token; its address."""
    env = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(32),
           "RAY_USAGE_STATS_ENABLED": "0", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0"}
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    port = _free_port()
    started = subprocess.run(
        [RAY, "start", "--head", f"--port={port}", "--node-ip-address=127.0.0.1",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"],
        capture_output=True, text=True, timeout=180)
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([RAY, "stop", "--force"], capture_output=True, timeout=180)


def _actor_pids() -> set[int]:
    out = subprocess.run(["pgrep", "-f", "ray::_BoardActor"], capture_output=True, text=True).stdout
    return {int(pid) for pid in out.split()}


def _kill_a_busy_actor(fleet) -> int:
    """SIGKILLs (a crash, not a clean exit) an actor of `fleet` that has episodes running, once
    the scheduler has given one some (it admits new groups on its own thread); its pid."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        for actor in fleet.actors:
            if actor.in_flight:
                pid = ray.get(actor.handle.__ray_call__.remote(lambda _self: os.getpid()))
                if actor.in_flight:
                    os.kill(pid, signal.SIGKILL)
                    return pid
        time.sleep(0.01)
    raise AssertionError("no actor had episodes running within 120 s")


def test_killed_actor_is_restarted_and_its_episodes_rescheduled(tmp_path, policy_dir, cluster,
                                                                 monkeypatch):
    config = get_config()
    with config.unlocked():
        config.init_from = str(policy_dir)
        config.runtime.backend = "ray"
        config.runtime.ray_address = cluster
        config.actor.num_actors = 2
        config.actor.envs_per_actor = 4
        config.learner.steps = 4
    seen = {}

    def keep_fleet(*args, **kwargs):
        seen["fleet"] = make_fleet(*args, **kwargs)
        return seen["fleet"]

    monkeypatch.setattr(loop, "make_fleet", keep_fleet)

    def kill_one_actor(step, record):
        # `in_flight` counts an episode until its result reaches the driver, and Ray resends
        # tasks it had not yet delivered: a kill can hit an actor with nothing to rerun. Kill
        # again (another busy actor) at the next steps until an episode was rescheduled.
        if step == 1 or (step < config.learner.steps and seen["fleet"].restarts == 0):
            seen.setdefault("before", _actor_pids())
            seen.setdefault("killed", []).append(_kill_a_busy_actor(seen["fleet"]))
        if step == config.learner.steps:
            seen["after"] = _actor_pids()

    result = train_rl(config, tmp_path / "rl", tasks=toy_tasks(8), make_env=DigitsEnv,
                      on_step=kill_one_actor)
    assert result.version == config.learner.steps
    assert len(seen["before"]) == 2 and seen["killed"][0] in seen["before"]
    assert not set(seen["killed"]) & seen["after"]
    assert len(seen["after"]) == 2                                   # Ray restarted them
    last = result.history[-1]
    assert seen["fleet"].restarts >= 1            # one had episodes running (closed fleet's
    #                                               count: errors may arrive after the record)
    assert last["episodes/infra_failures_total"] == 0                # none lost
    per_step = config.learner.groups_per_step * config.learner.group_size
    assert all(r["episodes/trained"] == per_step for r in result.history)
    trained_groups = [g for r in result.history for g in r["group_ids"]]
    assert len(trained_groups) == len(set(trained_groups))           # none counted twice
    # No episode, rerun ones included, sampled with params older than its group's admission
    # (a restarted actor gets the newest params, not the ones the fleet was created with).
    lines = [json.loads(line) for line in (tmp_path / "rl" / GROUPS_FILE).read_text().splitlines()]
    assert len(lines) == len(trained_groups)
    assert all(v >= g["admitted_version"] for g in lines
               for v in g["first_token_versions"] if v is not None)
    assert max(g["admitted_version"] for g in lines) >= 2      # groups admitted after the kill
    assert not ray.is_initialized()
    assert ray_processes()                                           # the cluster is not ours
