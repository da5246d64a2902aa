"""The Ray runtime (c2jax/rl/runtime.py): a local Ray with 2 actor processes trains, with
bounded resources and token authentication, loopback only, the learner and the actors pinned to
different cores, and stops cleanly."""
import fcntl
import functools
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from c2jax.rl import runtime
from c2jax.rl.actor import ActorSpec, EpisodeJob
from c2jax.rl.loop import rollout_settings, train_rl
from tests.rl.toy_config import get_config
from tests.rl.toy_envs import DigitsEnv, GatedDigitsEnv, toy_tasks

ray = pytest.importorskip("ray")
# Ray tests look for Ray processes machine-wide: under xdist they share one worker.
pytestmark = pytest.mark.xdist_group("ray")


def ray_processes() -> list[str]:
    out = subprocess.run(["pgrep", "-a", "-f", "ray/core/src/ray"], capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if line.strip()]


def _actor_pids() -> list[int]:
    out = subprocess.run(["pgrep", "-f", "ray::_BoardActor"], capture_output=True, text=True)
    return [int(pid) for pid in out.stdout.split()]


def _thread_cores(pid: int) -> set[int]:
    """The union of the cores the threads of process `pid` may run on."""
    cores = set()
    for tid in os.listdir(f"/proc/{pid}/task"):
        cores |= os.sched_getaffinity(int(tid))
    return cores


def test_ray_fleet_trains_and_shuts_down_cleanly(tmp_path, policy_dir, monkeypatch):
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    assert not ray_processes()
    cores = sorted(os.sched_getaffinity(0))
    assert len(cores) >= 2, "this test pins the learner and the actors to different cores"
    config = get_config()
    with config.unlocked():
        config.init_from = str(policy_dir)
        config.runtime.backend = "ray"
        config.runtime.learner_cpus = str(cores[0])
        config.runtime.actor_cpus = str(cores[1])
        config.actor.num_actors = 2
        config.actor.envs_per_actor = 4
        config.learner.steps = 3
    seen = {}

    def inspect(step, record):
        if step == 1:     # while the cluster runs: where each process's threads may run
            seen["learner_cores"] = _thread_cores(os.getpid())
            seen["actor_cores"] = [_thread_cores(pid) for pid in _actor_pids()]
        if step == 1:     # ... its size, its auth, who may connect
            seen["cpus"] = ray.cluster_resources().get("CPU")
            seen["actors"] = len([a for a in ray.util.list_named_actors(all_namespaces=True)])
            seen["auth"] = os.environ.get("RAY_AUTH_MODE")
            address = ray.get_runtime_context().gcs_address
            seen["address"] = address
            intruder = subprocess.run(
                [sys.executable, "-c", f"import ray; ray.init(address={address!r})"],
                capture_output=True, text=True, timeout=120,
                env={k: v for k, v in os.environ.items() if k != "RAY_AUTH_TOKEN"})
            seen["intruder"] = intruder.returncode, intruder.stderr[-2000:]

    result = train_rl(config, tmp_path / "rl", tasks=toy_tasks(8), make_env=DigitsEnv,
                      on_step=inspect)
    assert result.version == 3 and all(r["learner/finite"] == 1 for r in result.history)
    assert seen["cpus"] == config.runtime.ray_num_cpus            # bounded
    assert seen["auth"] == "token" and seen["address"].startswith("127.0.0.1:")
    code, stderr = seen["intruder"]
    assert code != 0 and "Authentication" in stderr, stderr     # no token, no entry
    assert not ray.is_initialized() and not ray_processes()       # stopped cleanly
    assert seen["learner_cores"] == {cores[0]}                    # every thread pinned
    assert len(seen["actor_cores"]) == 2 and all(c == {cores[1]} for c in seen["actor_cores"])
    assert sorted(os.sched_getaffinity(0)) == cores               # given back at the end
    assert runtime.RayFleet is not None


def test_ray_publish_does_not_wait_for_busy_actors(tmp_path, policy, tokenizer, monkeypatch):
    """New params reach an actor whose environment threads are all busy and that has more
    episodes queued: the driver's calls run on their own threads (the `control` concurrency
    group). Without them, `publish` waits until the queued episodes have run."""
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"):
        monkeypatch.delenv(name, raising=False)
    cfg, variables = policy
    config = get_config()
    with config.unlocked():
        config.runtime.backend = "ray"
        config.actor.num_actors = 1
        config.actor.envs_per_actor = 2
    tasks = toy_tasks(4)
    spec = ActorSpec(model_cfg=cfg.to_dict(), tokenizer=tokenizer, tasks=tasks,
                     make_env=functools.partial(GatedDigitsEnv, str(tmp_path / "gate")),
                     rollout=rollout_settings(config), slots=config.actor.slots,
                     steps_per_call=config.actor.steps_per_call)
    (tmp_path / "gate").write_text("")
    fleet = runtime.RayFleet(config, spec, variables, version=0)
    try:
        with open(tmp_path / "gate") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)        # every episode now waits in reset
            (actor,) = fleet.actors
            episodes = [actor.submit(EpisodeJob(group_id=0, sample=i, task_index=i, seed=i))
                        for i in range(len(tasks))]     # 2 running, 2 queued behind them
            with ThreadPoolExecutor(1) as pool:
                published = pool.submit(fleet.publish, variables, 1)
                try:
                    published.result(timeout=120)
                finally:
                    fcntl.flock(gate, fcntl.LOCK_UN)  # let the episodes go, pass or fail
        done = [e.result(timeout=300) for e in episodes]
    finally:
        fleet.close()
    assert not any(e.infra_failure for e in done), [e.error for e in done]
    # Every episode reset after the publish, so all its tokens come from version 1.
    assert all(e.sampled_tokens and set(e.versions().tolist()) == {1} for e in done)
