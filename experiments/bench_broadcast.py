"""Benchmarks the Ray weight broadcast (issue #9): how long a new policy version takes to reach
every actor, against the size of the params, measured side by side in one run.

    python -m experiments.bench_broadcast                       # defaults used for BENCHMARKS.md
    python -m experiments.bench_broadcast --sizes_mb=1,64 --actors=4 --repeats=3

Each row publishes a float32 params tree of the given size the way `RayFleet.publish` does:
`ray.put` of the host copy on the driver, then every actor's `set_params` call (the object
reference is resolved in the actor's process, then `jax.device_put`, as `Engine.set_params`
does) and the driver waits for all of them. Columns:

    put ms        `ray.put` on the driver (serialise into the object store)
    publish ms    put plus every actor holding the params on its jax device (median of repeats)
    GB/s          params bytes x actors / publish time
    x memcpy      publish time / one in-process copy of the same tree on the driver (`np.copy`
                  of every leaf): how many host copies the broadcast costs
    s / K2 bf16   publish time scaled linearly to configs/models.py's kimi_k2_1t in bf16
                  (1.03e12 params, 2.05 TB),
                  for this machine's single node; across nodes the network bandwidth bounds it
    zero-copy     share of the bytes an actor's jax array aliases in the object store (jax on
                  CPU does not copy aligned read-only host arrays; on a GPU `device_put` is a
                  host-to-device copy that this CPU figure leaves out)

A local Ray is started with `ray_setup.init_ray` (loopback only, token auth); on one node the
object store is shared memory, so an actor reads the params without a network copy.
"""
from __future__ import annotations

import datetime
import os
import platform
import statistics
import sys
import time

import numpy as np
from absl import app, flags

from c2jax.flops import param_counts
from c2jax.ray_setup import init_ray
from configs import models

_SIZES = flags.DEFINE_list("sizes_mb", ["1", "8", "64", "256", "512"], "params sizes (MiB)")
_ACTORS = flags.DEFINE_integer("actors", 2, "Ray actors receiving the params")
_REPEATS = flags.DEFINE_integer("repeats", 5, "publishes per size (the median is reported)")
_LEAVES = flags.DEFINE_integer("leaves", 16, "arrays in the params tree")
_CPUS = flags.DEFINE_integer("num_cpus", 2, "CPUs of the local Ray")

K2_BF16_BYTES = 2 * param_counts(models.kimi_k2_1t())["total"]     # 1.03e12 params x 2 B


class Receiver:
    """What an RL actor does with published params: hold them on its jax device."""

    def __init__(self):
        import jax
        self._jax = jax
        self.params, self.version = None, -1

    def set_params(self, params: dict, version: int) -> tuple[int, int]:
        """(bytes placed, bytes that alias the object store's buffer instead of copying it:
        jax on CPU does not copy 64-byte-aligned read-only host arrays)."""
        jax = self._jax
        placed = jax.device_put(params)
        jax.block_until_ready(placed)
        self.params, self.version = placed, version
        aliased = sum(int(v.nbytes) for k, v in params.items()
                      if placed[k].unsafe_buffer_pointer() == v.ctypes.data)
        return sum(int(x.nbytes) for x in jax.tree.leaves(placed)), aliased


def make_params(size_mb: int, leaves: int) -> dict[str, np.ndarray]:
    """A float32 tree of `leaves` arrays, `size_mb` MiB in all, `{name: [n]}`."""
    n = (size_mb << 20) // 4 // leaves
    rng = np.random.default_rng(size_mb)
    return {f"w{i:02d}": rng.standard_normal(n, dtype=np.float32) for i in range(leaves)}


def time_memcpy(params: dict, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        copies = {k: np.copy(v) for k, v in params.items()}
        times.append(time.perf_counter() - start)
        del copies
    return statistics.median(times)


def time_publish(ray, receivers, params: dict, version: int) -> tuple[float, float, float]:
    """(put seconds, publish seconds, fraction of the bytes the actors aliased) of one version
    to every receiver."""
    start = time.perf_counter()
    ref = ray.put(params)
    put = time.perf_counter() - start
    received = ray.get([r.set_params.remote(ref, version) for r in receivers])
    publish = time.perf_counter() - start
    nbytes = sum(v.nbytes for v in params.values())
    if any(got != nbytes for got, _ in received):
        raise RuntimeError(f"the actors placed {received} bytes, expected {nbytes}")
    del ref
    return put, publish, sum(a for _, a in received) / (nbytes * len(received))


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return (f"{os.cpu_count()} vCPU {cpu}, {mem_gib:.0f} GiB RAM, Linux {platform.release()}, "
            f"Python {platform.python_version()}")


def main(argv: list[str]) -> None:
    del argv
    sizes = [int(s) for s in _SIZES.value]
    largest = max(sizes) << 20
    # One version in the store at a time, plus headroom for the one being replaced.
    ray, started = init_ray(num_cpus=_CPUS.value, object_store_mb=max(256, 3 * largest >> 20))
    ray_version = ray.__version__
    try:
        remote = ray.remote(Receiver).options(num_cpus=0)
        receivers = [remote.remote() for _ in range(_ACTORS.value)]
        ray.get([r.set_params.remote({}, -1) for r in receivers])     # started and imported
        rows, version = [], 0
        for size in sizes:
            params = make_params(size, _LEAVES.value)
            nbytes = sum(v.nbytes for v in params.values())
            time_publish(ray, receivers, params, version)                 # warm-up
            puts, publishes, aliased = [], [], []
            for _ in range(_REPEATS.value):
                version += 1
                put, publish, alias = time_publish(ray, receivers, params, version)
                puts.append(put)
                publishes.append(publish)
                aliased.append(alias)
            memcpy = time_memcpy(params, _REPEATS.value)
            publish = statistics.median(publishes)
            rows.append((nbytes, statistics.median(puts), publish, memcpy, min(aliased)))
            print(f"{size} MiB: publish {publish * 1e3:.1f} ms", file=sys.stderr)
            del params
    finally:
        if started:
            ray.shutdown()

    print(f"date: {datetime.date.today().isoformat()}")
    print(f"machine: {machine()}, ray {ray_version}")
    print(f"command: python -m experiments.bench_broadcast {' '.join(sys.argv[1:])}".rstrip())
    print(f"actors: {_ACTORS.value}, repeats: {_REPEATS.value}, leaves: {_LEAVES.value}")
    print()
    print("| params MiB | put ms | publish ms | GB/s | x memcpy | s / K2 bf16 | zero-copy |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for nbytes, put, publish, memcpy, aliased in rows:
        rate = nbytes * _ACTORS.value / publish / 1e9
        print(f"| {nbytes / 2**20:.0f} | {put * 1e3:.1f} | {publish * 1e3:.1f} | {rate:.2f} "
              f"| {publish / memcpy:.1f} | {publish / nbytes * K2_BF16_BYTES:.0f} "
              f"| {aliased:.0%} |")


if __name__ == "__main__":
    app.run(main)
