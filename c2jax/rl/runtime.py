"""Where actors run, behind `config.runtime.backend`: a `Fleet` of actors.

    inprocess (default)  actors are objects in the learner's process: their environments are
                         threads, and new params are handed over by reference (a copy of the
                         learner's buffers, which the next update donates)
    ray                  actors are Ray actors: on a local Ray started here (`ray.init()` with
                         `runtime.ray_num_cpus` CPUs, a bounded object store, token
                         authentication, loopback only, no usage reporting), or on an existing
                         cluster at `runtime.ray_address` (then its own settings apply; export
                         RAY_AUTH_MODE=token and the cluster's RAY_AUTH_TOKEN). New params go
                         into the object store once per version and every actor fetches them.

A fleet's actors all have `submit(job) -> Future[Episode]` and `in_flight` (what the scheduler
uses); the fleet itself publishes params, collects snapshots and tokens, and closes.
"""
from __future__ import annotations

import os
import secrets
import sys
import threading
from concurrent.futures import Future

import jax
import numpy as np

from c2jax.rl.actor import Actor, EpisodeJob


class InProcessFleet:
    def __init__(self, config, spec, variables, version: int):
        self.actors = [Actor(spec, variables, version=version,
                             num_envs=config.actor.envs_per_actor)
                       for _ in range(config.actor.num_actors)]

    def publish(self, variables, version: int) -> None:
        for actor in self.actors:
            actor.set_params(variables, version)

    def snapshots(self) -> dict:
        out = {}
        for actor in self.actors:
            out.update(actor.snapshots())
        return out

    def generated_tokens(self) -> int:
        return sum(a.generated_tokens() for a in self.actors)

    def close(self) -> None:
        for actor in self.actors:
            actor.close()


class _RayActor:
    """The driver's handle of one Ray actor, with the in-process actor's `submit`."""

    def __init__(self, handle):
        self.handle = handle
        self.in_flight = 0
        self._lock = threading.Lock()

    def submit(self, job: EpisodeJob) -> Future:
        with self._lock:
            self.in_flight += 1
        future = self.handle.run.remote(job).future()
        future.add_done_callback(self._done)
        return future

    def _done(self, _future) -> None:
        with self._lock:
            self.in_flight -= 1


def _reload_ray_settings() -> None:
    """Ray reads these settings when it is imported; when the caller imported it earlier,
    reload them the way Ray's own test utilities do (`ray._private.authentication_test_utils`)."""
    from ray._private import ray_constants
    from ray._raylet import AuthenticationTokenLoader, Config
    ray_constants.ENABLE_RAY_CLUSTER = os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] != "0"
    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


def _host(variables):
    """Numpy copies of the params (what goes into the object store)."""
    return jax.tree.map(np.asarray, jax.device_get(variables))


class RayFleet:
    def __init__(self, config, spec, variables, version: int):
        rt = config.runtime
        if not rt.ray_address:
            # Set before Ray is imported (it reads them then). A fresh random token for this
            # cluster: only processes started from here (which inherit it) can talk to it.
            os.environ.setdefault("RAY_AUTH_MODE", "token")
            os.environ.setdefault("RAY_AUTH_TOKEN", secrets.token_hex(32))
            os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
            # Ray's single-node mode: every server binds the loopback address (by default Ray
            # replaces 127.0.0.1 with the host's network address).
            os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
            if "ray" in sys.modules:
                _reload_ray_settings()
        import ray
        self._started_ray = False
        if not ray.is_initialized():
            if rt.ray_address:
                ray.init(address=rt.ray_address, log_to_driver=False)
            else:
                ray.init(num_cpus=rt.ray_num_cpus, include_dashboard=False,
                         object_store_memory=rt.ray_object_store_mb << 20,
                         log_to_driver=False)
            self._started_ray = True
        self._ray = ray
        envs = config.actor.envs_per_actor
        remote = ray.remote(Actor).options(num_cpus=rt.ray_cpus_per_actor,
                                           max_concurrency=envs + 4)
        params = ray.put(_host(variables))
        self.actors = [_RayActor(remote.remote(spec, params, version=version, num_envs=envs))
                       for _ in range(config.actor.num_actors)]
        # Construction errors (a bad spec, an environment that cannot start) surface here.
        ray.get([a.handle.generated_tokens.remote() for a in self.actors])

    def publish(self, variables, version: int) -> None:
        params = self._ray.put(_host(variables))
        self._ray.get([a.handle.set_params.remote(params, version) for a in self.actors])

    def snapshots(self) -> dict:
        out = {}
        for part in self._ray.get([a.handle.snapshots.remote() for a in self.actors]):
            out.update(part)
        return out

    def generated_tokens(self) -> int:
        return sum(self._ray.get([a.handle.generated_tokens.remote() for a in self.actors]))

    def close(self) -> None:
        ray = self._ray
        try:
            ray.get([a.handle.close.remote() for a in self.actors], timeout=120)
        finally:
            for a in self.actors:
                ray.kill(a.handle)
            if self._started_ray:
                ray.shutdown()


def make_fleet(config, spec, variables, version: int):
    """The fleet `config.runtime.backend` names."""
    if config.runtime.backend == "ray":
        return RayFleet(config, spec, variables, version)
    return InProcessFleet(config, spec, variables, version)
