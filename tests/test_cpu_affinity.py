"""Pinning a whole process to cores (c2jax/cpu_affinity.py): every thread, already running or
started later, and undone exactly."""
import os
import threading

import pytest

from c2jax import cpu_affinity


@pytest.mark.parametrize("text,cores", [("", set()), ("3", {3}), ("0,2-4", {0, 2, 3, 4}),
                                        (" 1 , 1-2 ", {1, 2})])
def test_parse_cpus(text, cores):
    assert cpu_affinity.parse_cpus(text) == cores


@pytest.mark.parametrize("text", ["a", "3-1", "-2", "1-2-3"])
def test_bad_cpu_lists_are_named(text):
    with pytest.raises(ValueError, match="cpu list"):
        cpu_affinity.parse_cpus(text)


def _thread_cores() -> set[int]:
    cores = set()
    for tid in os.listdir("/proc/self/task"):
        cores |= os.sched_getaffinity(int(tid))
    return cores


def test_pin_process_pins_every_thread_and_undoes():
    everything = cpu_affinity.available_cpus()
    core = min(everything)
    started, stop = threading.Event(), threading.Event()
    worker = threading.Thread(target=lambda: (started.set(), stop.wait()))
    worker.start()              # a thread that exists before pinning, like XLA's pool
    started.wait()
    try:
        before = cpu_affinity.pin_process(frozenset({core}))
        assert before == everything
        assert _thread_cores() == {core}
        later = []
        spawned = threading.Thread(target=lambda: later.append(os.sched_getaffinity(0)))
        spawned.start()
        spawned.join()
        assert later == [{core}]                     # inherited by new threads
        assert cpu_affinity.pin_process(frozenset()) == {core}   # empty: no change
        assert _thread_cores() == {core}
    finally:
        cpu_affinity.pin_process(everything)
        stop.set()
        worker.join()
    assert _thread_cores() == everything
