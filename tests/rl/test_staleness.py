"""The admission rule (c2jax/rl/staleness.py) and the ledger's accounting (ledger.py)."""
import threading

import numpy as np

from c2jax.rl.ledger import Group, Ledger
from c2jax.rl.staleness import StalenessController
from c2jax.rl.trajectory import Episode, Segment


def test_capacity_rule_bounds_generation_ahead_of_the_learner():
    eta, batch = 2, 3
    c = StalenessController(eta, batch, max_running=100)
    admitted = [c.acquire(timeout=0) for _ in range((eta + 1) * batch)]
    assert admitted == list(range((eta + 1) * batch))
    assert c.acquire(timeout=0) is None                     # (eta + v + 1) * B reached
    for _ in range(batch):
        c.finish(accepted=True)
    assert c.acquire(timeout=0) is None                     # finishing frees nothing...
    c.set_version(1)
    assert [c.acquire(timeout=0) for _ in range(batch)] == [9, 10, 11]   # ...a new version does
    c.finish(accepted=False)                                # a failed group frees its slot
    assert c.acquire(timeout=0) == 12


def test_synchronous_mode_admits_one_step_at_a_time():
    c = StalenessController(0, 2, max_running=8)
    assert [c.acquire(timeout=0) for _ in range(3)] == [0, 1, None]
    c.finish(True), c.finish(True)
    assert c.acquire(timeout=0) is None
    c.set_version(1)
    assert c.acquire(timeout=0) == 2


def test_running_cap_and_blocking_acquire():
    c = StalenessController(10, 4, max_running=2)
    assert [c.acquire(timeout=0) for _ in range(3)] == [0, 1, None]
    got = []
    waiter = threading.Thread(target=lambda: got.append(c.acquire(timeout=5)))
    waiter.start()
    c.finish(True)
    waiter.join()
    assert got == [2]
    c.close()
    assert c.acquire(timeout=1) is None


def test_the_bound_holds_after_a_resume():
    """Restarted from a checkpoint's counts, the controller admits exactly what the
    uninterrupted one would have (no burst)."""
    eta, batch = 1, 2
    live = StalenessController(eta, batch, max_running=50)
    for _ in range(4):
        live.acquire(timeout=0)
    for _ in range(3):
        live.finish(True)
    live.set_version(1)
    state, running = live.state(), live.running
    restored = StalenessController(eta, batch, max_running=50, **state)
    restored.resume_running(running)
    assert restored.capacity() == live.capacity() == (eta + 1 + 1) * batch - 3 - 1
    assert restored.acquire(timeout=0) == live.acquire(timeout=0) == 4


def test_a_checkpoint_never_sees_an_admitted_id_without_its_group():
    """`state(also=...)` waits while an admission is between taking its id and the ledger's
    record of it, so the checkpoint's `next_group` always matches the ledger (the SIGKILL
    resume test once caught 57 ids and 56 groups)."""
    c, ledger = StalenessController(10, 4, max_running=8), Ledger()
    seen = []

    def admit(group_id):
        reader = threading.Thread(target=lambda: seen.append(
            c.state(also=lambda: ledger.snapshot({}))))
        reader.start()
        reader.join(timeout=0.05)
        assert reader.is_alive()                     # blocked until the admission is whole
        seen.append(reader)
        ledger.start(group_id, task_index=group_id, version=0)

    assert c.acquire(timeout=0, admit=admit) == 0
    seen.pop(0).join()
    counters, rollouts = seen[0]
    assert counters["next_group"] == 1 and [r["group_id"] for r in rollouts["running"]] == [0]

    c.finish(True, record=lambda: ledger.group_done(
        Group(0, 0, [_episode(0, 0)], [0.0]), 0))
    counters, rollouts = c.state(also=lambda: ledger.snapshot({}))
    assert counters["accepted"] == 1 and [g["group_id"] for g in rollouts["ready"]] == [0]
    assert rollouts["running"] == []


def _episode(group_id, sample):
    seg = Segment(np.arange(5, dtype=np.int32), np.array([0, 0, 1, 1, 1], np.int8),
                  np.full(5, -0.5, np.float32), np.zeros(5, np.int32),
                  np.zeros((5, 1, 2), np.int16))
    return Episode("t", group_id, sample, [seg], {}, [{"text": "x"}])


def test_ledger_snapshot_puts_every_group_in_exactly_one_place():
    ledger = Ledger()
    for g in range(4):
        ledger.start(g, task_index=g, version=0)
    for g in (0, 1):
        for s in range(2):
            ledger.episode_done(_episode(g, s))
        ledger.group_done(Group(g, g, [_episode(g, 0), _episode(g, 1)], [0.5, -0.5]), g)
    ledger.episode_done(_episode(2, 0))
    assert [g.group_id for g in ledger.take(1)] == [0]
    live = {(2, 1): {"turns": 1}, (3, 0): {"turns": 2}, (1, 0): {"stale": True}}
    snap = ledger.snapshot(live)
    assert [g["group_id"] for g in snap["ready"]] == [1]
    running = {r["group_id"]: r for r in snap["running"]}
    assert set(running) == {2, 3} and snap["consumed"] == 1
    assert [e["sample"] for e in running[2]["finished"]] == [0]
    assert running[2]["live"] == {"1": {"turns": 1}} and running[3]["live"] == {"0": {"turns": 2}}

    restored = Ledger()
    assert sorted(restored.restore(snap)) == [2, 3]
    assert restored.consumed == 1 and restored.depth == 1
    assert restored.resume_snapshots(3) == {0: {"turns": 2}}
    assert list(restored.finished_episodes(2)) == [0]
    (group,) = restored.take(1)
    assert group.group_id == 1 and group.episodes[0].segments[0].tokens.tolist() == list(range(5))
