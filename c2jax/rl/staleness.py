"""Bounded staleness, enforced when a group of episodes is admitted (AReaL's capacity rule).

With a learner that consumes `groups_per_step` (B) groups per step and is at version v (v steps
done), an actor may start a new group only while

    accepted + running < (eta + v + 1) * B      and      running < max_running

where `accepted` counts groups finished and handed to the learner and `running` those in
flight (AReaL, arXiv 2505.24298; `areal/infra/staleness_manager.py`). At most (eta + 1) * B
groups are ever generated ahead of the learner, so in aggregate a group trains at most eta
versions after the version it was admitted under. Groups finish out of order, so one very
slow group can exceed that and is still trained (as in AReaL and SkyRL); the learner logs the
per-token version lag, so it shows. eta = 0 is synchronous RL: B groups per version, generate,
then train.

A group that fails (infra) releases its slot without counting as accepted. After a resume the
controller restarts from the checkpoint's counts (`state()` / `from_state`), so the bound
holds across restarts (AReaL's `on_version_recovered` problem: a naive restart admits a
burst).

The counters must agree with the rollout ledger a checkpoint stores next to them: every id
below `next_group` is consumed, queued, in flight or dropped there. So the ledger transitions
that go with an admission or a finish run under this controller's lock (`acquire(admit=...)`,
`finish(record=...)`), and a checkpoint reads both under it (`state(also=...)`). Otherwise a
checkpoint taken between `acquire` and the ledger's `start` stores an id no group has, and
the restarted run never generates it.
"""
from __future__ import annotations

import threading
from typing import Any, Callable


class StalenessController:
    """Thread-safe admission of groups under the capacity rule (module docstring)."""

    def __init__(self, eta: int, groups_per_step: int, max_running: int, *, version: int = 0,
                 accepted: int = 0, next_group: int = 0):
        if eta < 0 or groups_per_step < 1 or max_running < 1:
            raise ValueError(f"staleness needs eta >= 0, groups_per_step >= 1, max_running >= 1 "
                             f"(got {eta}, {groups_per_step}, {max_running})")
        self.eta, self.groups_per_step, self.max_running = eta, groups_per_step, max_running
        self._cond = threading.Condition()
        self.version = version
        self.accepted = accepted
        self.running = 0
        self.next_group = next_group          # the id the next admitted group gets
        self._closed = False

    def capacity(self) -> int:
        """Groups that may start now."""
        with self._cond:
            return self._capacity()

    def _capacity(self) -> int:
        by_staleness = ((self.eta + self.version + 1) * self.groups_per_step
                        - self.accepted - self.running)
        return max(0, min(self.max_running - self.running, by_staleness))

    def acquire(self, timeout: float | None = None,
                admit: Callable[[int], None] | None = None) -> int | None:
        """Blocks until a group may start; returns its id (None when closed or timed out).
        `admit(group_id)` (the ledger's record of the start) runs under the lock, so a
        concurrent `state(also=...)` sees the id and the record together or neither."""
        with self._cond:
            if not self._cond.wait_for(lambda: self._closed or self._capacity() > 0, timeout):
                return None
            if self._closed:
                return None
            group_id = self.next_group
            if admit is not None:
                admit(group_id)
            self.running += 1
            self.next_group += 1
            return group_id

    def resume_running(self, count: int) -> None:
        """Counts `count` in-flight groups restored from a checkpoint as running."""
        with self._cond:
            self.running += count

    def finish(self, accepted: bool, record: Callable[[], None] | None = None) -> None:
        """A running group ended: accepted (handed to the learner) or failed (dropped).
        `record()` (the ledger's move of the group) runs under the lock, as in `acquire`."""
        with self._cond:
            if record is not None:
                record()
            self.running -= 1
            self.accepted += int(accepted)
            self._cond.notify_all()

    def set_version(self, version: int) -> None:
        """The learner finished step `version` (and its params are published)."""
        with self._cond:
            self.version = version
            self._cond.notify_all()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    def state(self, also: Callable[[], Any] | None = None) -> dict | tuple[dict, Any]:
        """The counters a checkpoint stores; with `also`, `(counters, also())` read under one
        lock, so no group is admitted or finished between the two."""
        with self._cond:
            counters = {"version": self.version, "accepted": self.accepted,
                        "next_group": self.next_group}
            return counters if also is None else (counters, also())
