"""The scheduler: admits groups under the staleness rule and runs their episodes on actors.

A thread asks the `StalenessController` for a group slot, picks the group's task, records the
group in the `Ledger`, and submits its `group_size` episodes to the least-loaded actors. When
the last episode of a group is back, `make_group` shapes the rewards and advantages (or drops
the group) and the group moves to the ledger's queue; the controller counts it as accepted.

Task order: group g trains on task `order[g % n]`, where every pass over the n tasks is a new
permutation drawn from (seed, pass). Episode seeds are a function of (seed, group, sample), so
a resumed run samples the same streams.
"""
from __future__ import annotations

import threading
from concurrent.futures import CancelledError
from typing import Callable, Sequence

import numpy as np
from absl import logging

from c2jax.rl.actor import EpisodeJob
from c2jax.rl.ledger import Group, Ledger
from c2jax.rl.staleness import StalenessController
from c2jax.rl.trajectory import Episode


def task_index(group_id: int, num_tasks: int, seed: int) -> int:
    """The task of group `group_id`: a fresh permutation of the tasks on every pass."""
    epoch, offset = divmod(group_id, num_tasks)
    order = np.random.RandomState((seed * 7919 + epoch) % (1 << 31)).permutation(num_tasks)
    return int(order[offset])


def episode_seed(seed: int, group_id: int, group_size: int, sample: int) -> int:
    return (seed * 1_000_003 + group_id * group_size + sample) % (1 << 31)


class Scheduler:
    """Feeds actors with groups while the staleness rule allows (module docstring)."""

    def __init__(self, actors: Sequence, controller: StalenessController, ledger: Ledger, *,
                 num_tasks: int, group_size: int, seed: int,
                 make_group: Callable[[int, int, int, list[Episode]], Group | None],
                 version: Callable[[], int]):
        self.actors, self.controller, self.ledger = list(actors), controller, ledger
        self.num_tasks, self.group_size, self.seed = num_tasks, group_size, seed
        self.make_group, self.version = make_group, version
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="c2jax-rl-scheduler",
                                        daemon=True)
        self._pending: dict[int, int] = {}        # group id -> episodes still running
        self._lock = threading.Lock()
        self.infra_failures = 0

    def start(self, resume_groups: Sequence[int] = ()) -> None:
        """Restarts the groups a checkpoint had in flight, then admits new ones."""
        for group_id in resume_groups:
            info = self.ledger.running_info(group_id)
            finished = self.ledger.finished_episodes(group_id)
            snapshots = self.ledger.resume_snapshots(group_id)
            samples = [s for s in range(self.group_size) if s not in finished]
            if not samples:
                self._complete(group_id)
                continue
            self._submit(group_id, info.task_index, samples, snapshots)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.is_set():
            group_id = self.controller.acquire(timeout=0.2, admit=self._admit)
            if group_id is None:
                continue
            self._submit(group_id, self.ledger.running_info(group_id).task_index,
                         range(self.group_size), {})

    def _admit(self, group_id: int) -> None:
        """The ledger's record of a new group, made under the controller's lock."""
        self.ledger.start(group_id, task_index(group_id, self.num_tasks, self.seed),
                          self.version())

    def _actor(self):
        return min(self.actors, key=lambda a: a.in_flight)

    def _submit(self, group_id: int, index: int, samples, snapshots: dict[int, dict]) -> None:
        samples = list(samples)
        with self._lock:
            self._pending[group_id] = len(samples)
        for sample in samples:
            job = EpisodeJob(group_id=group_id, sample=sample, task_index=index,
                             seed=episode_seed(self.seed, group_id, self.group_size, sample),
                             resume=snapshots.get(sample))
            future = self._actor().submit(job)
            future.add_done_callback(lambda f, g=group_id: self._episode_done(g, f))

    def _episode_done(self, group_id: int, future) -> None:
        try:
            episode = future.result()
        except CancelledError:        # the actor shut down before the episode started
            return
        if episode.infra_failure and self._stop.is_set():
            return                    # interrupted by the shutdown: its snapshot is what counts
        if episode.infra_failure:
            self.infra_failures += 1
            if episode.error:
                logging.warning("episode %d/%d failed: %s", group_id, episode.sample,
                                episode.error.strip().splitlines()[-1])
        self.ledger.episode_done(episode)
        with self._lock:
            self._pending[group_id] -= 1
            last = self._pending[group_id] == 0
            if last:
                del self._pending[group_id]
        if last and not self._stop.is_set():
            self._complete(group_id)

    def _complete(self, group_id: int) -> None:
        info = self.ledger.running_info(group_id)
        episodes = [e for _, e in sorted(self.ledger.finished_episodes(group_id).items())]
        group = self.make_group(group_id, info.task_index, info.admitted_version, episodes)
        self.controller.finish(accepted=group is not None,
                               record=lambda: self.ledger.group_done(group, group_id))

    def stop(self) -> None:
        """Stops admitting; groups still running stay in the ledger (a checkpoint keeps them)."""
        self._stop.set()
        self.controller.close()
        if self._thread.is_alive():
            self._thread.join()
