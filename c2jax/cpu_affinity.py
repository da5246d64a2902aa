"""Pinning a whole process to a set of CPU cores (Linux), e.g. the RL learner to some cores and
its Ray actors to the others, so that on one host they behave like separate devices.

    cpus = parse_cpus("0-3,8")       # {0, 1, 2, 3, 8}
    previous = pin_process(cpus)     # every thread of this process, and what it starts later
    pin_process(previous)            # undo

`os.sched_setaffinity(0, ...)` pins only the calling thread; XLA:CPU's worker threads already
exist when a run starts, so `pin_process` pins every thread in /proc/self/task. Threads and
subprocesses (sandboxes) started afterwards inherit their parent thread's set.
"""
from __future__ import annotations

import os


def parse_cpus(spec: str) -> frozenset[int]:
    """'0,2-3' -> {0, 2, 3}; '' -> the empty set (no pinning). Raises ValueError on bad text."""
    cpus: set[int] = set()
    for part in filter(None, (p.strip() for p in spec.split(","))):
        low, _, high = part.partition("-")
        try:
            first, last = int(low), int(high or low)
        except ValueError:
            raise ValueError(f"cpu list {spec!r}: {part!r} is not a core id or a range like "
                             "'2-5'") from None
        if first < 0 or last < first:
            raise ValueError(f"cpu list {spec!r}: {part!r} is not a valid range")
        cpus.update(range(first, last + 1))
    return frozenset(cpus)


def available_cpus() -> frozenset[int]:
    """The cores the calling thread may run on now."""
    return frozenset(os.sched_getaffinity(0))


def check_cpus(field: str, cpus: frozenset[int]) -> None:
    """Raises ValueError naming `field` when `cpus` holds a core this process cannot use."""
    if not hasattr(os, "sched_setaffinity"):
        raise ValueError(f"{field}: CPU pinning needs Linux (os.sched_setaffinity)")
    missing = sorted(cpus - available_cpus())
    if missing:
        raise ValueError(f"{field}: cores {missing} are not available to this process "
                         f"(available: {sorted(available_cpus())})")


def pin_process(cpus: frozenset[int]) -> frozenset[int]:
    """Restricts every thread of this process to `cpus` (empty: no change). Returns the set the
    calling thread had before, to undo it with."""
    before = available_cpus()
    if not cpus:
        return before
    # Not checked against `before`: a process may widen its set again within its cpuset.
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:      # the thread ended meanwhile
            pass
        except OSError as e:
            raise ValueError(f"cannot pin this process to cores {sorted(cpus)}: {e}") from None
    return before
