"""The rollout ledger: every group from admission to consumption, in one place.

    running   groups admitted and not finished, with their finished episodes (the live
              episodes' turn-boundary snapshots come from the actors at checkpoint time)
    ready     finished groups waiting for the learner, oldest first (the bounded queue)

All transitions hold one lock, so `snapshot()` sees each group exactly once: in flight or
ready or already consumed, never in two places and never lost between them. That is what a
checkpoint stores (rollout-level checkpointing), and what `restore` rebuilds after a crash:
ready groups go straight back to the queue, running ones are resumed by the actors (finished
episodes kept, live ones replayed through their action log, unstarted ones started).
"""
from __future__ import annotations

import collections
import dataclasses
import threading
import time
from typing import Any

from c2jax.rl.trajectory import Episode


@dataclasses.dataclass
class Group:
    """`group_size` attempts at one task."""
    group_id: int
    task_index: int
    episodes: list[Episode]                          # shaped and with advantages when ready
    advantages: list[float] = dataclasses.field(default_factory=list)
    admitted_version: int = 0
    dropped_episodes: int = 0                        # infra failures left out

    def to_json(self) -> dict[str, Any]:
        return {"group_id": self.group_id, "task_index": self.task_index,
                "episodes": [e.to_json() for e in self.episodes],
                "advantages": list(self.advantages),
                "admitted_version": self.admitted_version,
                "dropped_episodes": self.dropped_episodes}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Group:
        return cls(d["group_id"], d["task_index"], [Episode.from_json(e) for e in d["episodes"]],
                   list(d["advantages"]), d["admitted_version"], d["dropped_episodes"])


@dataclasses.dataclass
class _Running:
    task_index: int
    admitted_version: int
    finished: dict[int, Episode] = dataclasses.field(default_factory=dict)
    resume: dict[int, dict] = dataclasses.field(default_factory=dict)   # sample -> snapshot


class Ledger:
    """Thread-safe record of running and ready groups (module docstring)."""

    def __init__(self):
        self._cond = threading.Condition()
        self._running: dict[int, _Running] = {}
        self._ready: collections.deque[Group] = collections.deque()
        self.consumed = 0                 # groups handed to the learner
        self.dropped_groups = 0           # groups with too few valid episodes
        self._closed = False

    # ---- actors
    def start(self, group_id: int, task_index: int, version: int) -> None:
        with self._cond:
            self._running[group_id] = _Running(task_index, version)

    def running_info(self, group_id: int) -> _Running:
        with self._cond:
            return self._running[group_id]

    def episode_done(self, episode: Episode) -> None:
        with self._cond:
            running = self._running[episode.group_id]
            running.resume.pop(episode.sample, None)
            running.finished[episode.sample] = episode

    def finished_episodes(self, group_id: int) -> dict[int, Episode]:
        with self._cond:
            return dict(self._running[group_id].finished)

    def group_done(self, group: Group | None, group_id: int) -> None:
        """Moves a running group to the queue (None: dropped, too few valid episodes)."""
        with self._cond:
            self._running.pop(group_id)
            if group is None:
                self.dropped_groups += 1
            else:
                self._ready.append(group)
            self._cond.notify_all()

    # ---- learner
    def take(self, count: int, timeout: float | None = None) -> list[Group] | None:
        """The `count` oldest ready groups, blocking until there are that many (None on
        close or timeout)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while len(self._ready) < count and not self._closed:
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            if len(self._ready) < count:
                return None
            groups = [self._ready.popleft() for _ in range(count)]
            self.consumed += count
            return groups

    @property
    def depth(self) -> int:
        with self._cond:
            return len(self._ready)

    @property
    def running_groups(self) -> int:
        with self._cond:
            return len(self._running)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # ---- checkpoints
    def snapshot(self, live: dict[tuple[int, int], dict]) -> dict[str, Any]:
        """Everything needed to continue, JSON-ready: ready groups, and running ones with their
        finished episodes and the snapshots in `live` ({(group_id, sample): snapshot}, from
        the actors) of the others. A live snapshot of an episode that has finished meanwhile
        is ignored, so every episode is stored once."""
        with self._cond:
            running = []
            for group_id, r in self._running.items():
                snaps = dict(r.resume)       # restored and not yet restarted
                snaps.update({s: snap for (g, s), snap in live.items() if g == group_id})
                running.append({"group_id": group_id, "task_index": r.task_index,
                                "admitted_version": r.admitted_version,
                                "finished": [e.to_json() for e in r.finished.values()],
                                "live": {str(s): snap for s, snap in snaps.items()
                                         if s not in r.finished}})
            return {"ready": [g.to_json() for g in self._ready], "running": running,
                    "consumed": self.consumed, "dropped_groups": self.dropped_groups}

    def resume_snapshots(self, group_id: int) -> dict[int, dict]:
        """Restored snapshots of a running group's live episodes, by sample."""
        with self._cond:
            return dict(self._running[group_id].resume)

    def restore(self, state: dict[str, Any]) -> list[int]:
        """Rebuilds from `snapshot()`; returns the ids of the groups still to be resumed."""
        with self._cond:
            self._ready.extend(Group.from_json(g) for g in state["ready"])
            self.consumed = state["consumed"]
            self.dropped_groups = state["dropped_groups"]
            for r in state["running"]:
                running = _Running(r["task_index"], r["admitted_version"])
                for e in r["finished"]:
                    episode = Episode.from_json(e)
                    running.finished[episode.sample] = episode
                running.resume = {int(s): snap for s, snap in r["live"].items()}
                self._running[r["group_id"]] = running
            return [r["group_id"] for r in state["running"]]
