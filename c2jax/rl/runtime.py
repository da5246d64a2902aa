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
                         A dead actor is restarted by Ray (`runtime.ray_max_restarts`) and its
                         in-flight episodes are run again on it (`_RayActor`).

A fleet's actors all have `submit(job) -> Future[Episode]` and `in_flight` (what the scheduler
uses); the fleet itself publishes params, collects snapshots and tokens, and closes.
"""
from __future__ import annotations

import threading
from concurrent.futures import Future, ThreadPoolExecutor

import jax
import numpy as np
from absl import logging

from c2jax import cpu_affinity
from c2jax.ray_setup import init_ray
from c2jax.rl.actor import Actor, EpisodeJob
from c2jax.rl.trajectory import Episode


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

    restarts = 0   # threads do not die: no episode is ever rescheduled

    def close(self) -> None:
        for actor in self.actors:
            actor.close()


class _RayActor:
    """The driver's handle of one Ray actor, with the in-process actor's `submit`.

    Ray restarts a dead actor process (`max_restarts`); its episodes that were in flight come
    back here as actor errors, and each is run again, from its job (the same seed and resume
    snapshot), once the restarted actor has the fleet's newest params. The future the
    scheduler holds resolves exactly once, so nothing is lost or counted twice.
    """

    def __init__(self, handle, fleet: "RayFleet"):
        self.handle, self._fleet = handle, fleet
        self.in_flight = 0
        self.restarts = 0              # episodes rescheduled after this actor died
        self.needs_sync = False        # a publish missed it (it was restarting)
        self._lock = threading.Lock()
        self._tokens_before = self._tokens_seen = 0   # its count restarts with the process

    def submit(self, job: EpisodeJob) -> Future:
        outer: Future = Future()
        with self._lock:       # counts until the episode is done, reruns included
            self.in_flight += 1
        outer.add_done_callback(self._finished)
        if self.needs_sync:    # it missed a publish while restarting: params first
            self._reschedule(job, outer, 0)
        else:
            self._launch(job, outer, attempt=0)
        return outer

    def total_tokens(self, count: int) -> int:
        """Tokens generated over all lives of this actor, given its current process's count."""
        if count < self._tokens_seen:
            self._tokens_before += self._tokens_seen
        self._tokens_seen = count
        return self._tokens_before + count

    def _finished(self, _outer: Future) -> None:
        with self._lock:
            self.in_flight -= 1

    def _launch(self, job: EpisodeJob, outer: Future, attempt: int) -> None:
        inner = self.handle.run.remote(job).future()
        inner.add_done_callback(lambda f: self._done(job, outer, attempt, f))

    def _done(self, job: EpisodeJob, outer: Future, attempt: int, inner: Future) -> None:
        if inner.cancelled():
            outer.cancel()
            return
        error = inner.exception()
        if error is None:
            outer.set_result(inner.result())
        elif (isinstance(error, self._fleet.actor_errors) and not self._fleet.closing
              and attempt < self._fleet.max_episode_retries):
            with self._lock:
                self.restarts += 1
            logging.warning("actor died (%s); rescheduling episode %d/%d (attempt %d)",
                            type(error).__name__, job.group_id, job.sample, attempt + 1)
            self._reschedule(job, outer, attempt + 1)
        else:
            outer.set_result(_failed(job, error))

    def _reschedule(self, job: EpisodeJob, outer: Future, attempt: int) -> None:
        # Not on Ray's callback thread: waiting for the restart would block its results.
        try:
            self._fleet.rescheduler.submit(self._sync_and_launch, job, outer, attempt)
        except RuntimeError as e:      # the fleet closed in between
            outer.set_result(_failed(job, e))

    def _sync_and_launch(self, job: EpisodeJob, outer: Future, attempt: int) -> None:
        try:
            self._fleet.sync_params(self)     # waits until Ray has restarted the actor
        except Exception as e:  # noqa: BLE001 - the actor cannot come back: fail the episode
            outer.set_result(_failed(job, e))
            return
        self._launch(job, outer, attempt)


class _ParamsBoard:
    """A Ray actor holding the newest published params (their object ref, in a list so Ray
    does not resolve it) and version: what a restarted actor starts from."""

    def __init__(self, params: list, version: int):
        self._latest = (params, version)

    def set(self, params: list, version: int) -> None:
        self._latest = (params, version)

    def latest(self) -> tuple[list, int]:
        return self._latest


class _BoardActor(Actor):
    """An `Actor` that takes its starting params from the board, so one Ray restarts after a
    crash samples with the newest version, not the version the fleet was created with. Its
    process runs on `spec.cpus` (`runtime.actor_cpus`) when they are given."""

    def __init__(self, spec, board, *, num_envs: int):
        import ray
        cpu_affinity.pin_process(spec.cpus)     # before its sampler compiles or runs
        (params,), version = ray.get(board.latest.remote())
        super().__init__(spec, ray.get(params), version=version, num_envs=num_envs)


#: Threads of each Ray actor reserved for the driver's calls (params, counters, snapshots,
#: close), so they never queue behind episodes: the driver submits more `run` calls than an
#: actor has environments, and those wait in the actor's default group.
_CONTROL = "control"


def _control(method):
    """An actor method call on the control threads."""
    return method.options(concurrency_group=_CONTROL)


def _idempotent(method):
    """A control call Ray may make again while the actor restarts (safe for reads and for
    setting params); its result raises only once the actor is dead for good."""
    return method.options(max_task_retries=-1, concurrency_group=_CONTROL)


def _failed(job: EpisodeJob, error: BaseException) -> Episode:
    """The infra-failure episode of a job its actor could not run (as `Actor.submit`
    promises: failures are episodes, never exceptions)."""
    return Episode(task_id=f"task_index={job.task_index}", group_id=job.group_id,
                   sample=job.sample, segments=[], info={}, actions=[], infra_failure=True,
                   error=f"{type(error).__name__}: {error}")


def _host(variables):
    """Numpy copies of the params (what goes into the object store)."""
    return jax.tree.map(np.asarray, jax.device_get(variables))


class RayFleet:
    def __init__(self, config, spec, variables, version: int):
        rt = config.runtime
        ray, self._started_ray = init_ray(rt.ray_address, num_cpus=rt.ray_num_cpus,
                                          object_store_mb=rt.ray_object_store_mb)
        self._ray = ray
        envs = config.actor.envs_per_actor
        self.closing = False
        self.max_episode_retries = rt.ray_max_restarts
        self.actor_errors = ray.exceptions.RayActorError   # died, or restarting
        self.rescheduler = ThreadPoolExecutor(1, thread_name_prefix="c2jax-ray-reschedule")
        remote = ray.remote(concurrency_groups={_CONTROL: 2})(_BoardActor).options(
            num_cpus=rt.ray_cpus_per_actor,
            max_concurrency=envs, max_restarts=rt.ray_max_restarts, max_task_retries=0)
        self._params_lock = threading.Lock()
        self._latest = (ray.put(_host(variables)), version)
        self._board = ray.remote(_ParamsBoard).options(num_cpus=0).remote(
            [self._latest[0]], version)
        self._spec = ray.put(spec)        # held here, so a restart can always read it
        self.actors = [_RayActor(remote.remote(self._spec, self._board, num_envs=envs), self)
                       for _ in range(config.actor.num_actors)]
        # Construction errors (a bad spec, an environment that cannot start) surface here.
        ray.get([_control(a.handle.generated_tokens).remote() for a in self.actors])

    def publish(self, variables, version: int) -> None:
        """New params to every actor, in flight. The board is updated first, so an actor Ray
        restarts from now on starts with them; one that is restarting right now is marked, and
        its next episodes give it the params first (on the rescheduler thread, once it is back),
        so no episode admitted at `version` samples with older params."""
        ray = self._ray
        params = ray.put(_host(variables))
        with self._params_lock:
            self._latest = (params, version)
        ray.get(self._board.set.remote([params], version))
        calls = [(a, _control(a.handle.set_params).remote(params, version))
                 for a in self.actors]
        for actor, call in calls:
            try:
                ray.get(call)
            except self.actor_errors:
                actor.needs_sync = True     # its next episodes wait for sync_params

    def sync_params(self, actor: _RayActor) -> None:
        """Gives a (restarted) actor the newest params; blocks until it is back. Setting
        params is idempotent, so Ray may retry the call while the actor restarts; it raises
        only once the actor is dead for good (no restarts left)."""
        with self._params_lock:
            params, version = self._latest
        self._ray.get(_idempotent(actor.handle.set_params).remote(params, version))
        with self._params_lock:
            if self._latest[1] == version:
                actor.needs_sync = False

    @property
    def restarts(self) -> int:
        """Episodes rescheduled because their actor died."""
        return sum(a.restarts for a in self.actors)

    def snapshots(self) -> dict:
        out = {}
        for part in self._ray.get([_idempotent(a.handle.snapshots).remote()
                                   for a in self.actors]):
            out.update(part)
        return out

    def generated_tokens(self) -> int:
        counts = self._ray.get([_idempotent(a.handle.generated_tokens).remote()
                                for a in self.actors])
        return sum(a.total_tokens(n) for a, n in zip(self.actors, counts))

    def close(self) -> None:
        ray = self._ray
        self.closing = True
        self.rescheduler.shutdown(wait=True)
        try:
            ray.get([_control(a.handle.close).remote() for a in self.actors], timeout=120)
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
