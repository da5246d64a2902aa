"""Multi-process runs: `jax.distributed.initialize` from the config or the environment.

    config.distributed = distributed_config()    # every field empty: the environment decides
    distributed.initialize(config.distributed)   # an entry point's first jax call

Every process runs the same program; after `initialize`, `jax.devices()` lists the devices of
all processes and a mesh spans them, while each process feeds only its own rows of a batch
(`jax.make_array_from_process_local_data`). One process per host (or per GPU).

Where each setting comes from, first match wins:

    field                config          environment               launcher (jax detects it)
    num_processes        > 0             JAX_NUM_PROCESSES         SLURM_NTASKS (srun),
                                                                   OMPI_COMM_WORLD_SIZE (mpirun)
    process_id           >= 0            JAX_PROCESS_ID            SLURM_PROCID,
                                                                   OMPI_COMM_WORLD_RANK
    coordinator_address  "host:port"     JAX_COORDINATOR_ADDRESS   SLURM: first node of the step,
                                                                   port $JAX_COORDINATOR_PORT or
                                                                   from the job id; Open MPI: the
                                                                   HNP's address
    local_device_ids     (0, 1, ...)     JAX_LOCAL_DEVICE_IDS      the local rank (one GPU each)

jax 0.10 itself reads JAX_COORDINATOR_ADDRESS, JAX_LOCAL_DEVICE_IDS and the launchers'
variables (`jax._src.clusters`: Open MPI, SLURM, and Cloud TPU / GKE / Kubernetes, which c2jax
does not use: give those the values through the config or the environment). It reads neither
JAX_NUM_PROCESSES nor JAX_PROCESS_ID; this module does (the names launch scripts use).

No process count anywhere (or a count of 1) is a single-process run: nothing is initialized.
A half-given setup (a process id or coordinator without a count, a count without an id or a
coordinator outside a launcher, an id out of range) is a `ValueError` naming what is missing.

Per-process data: a batch's rows are split evenly between the processes, each process loading
its own share; `global_shape` gives the whole batch's shape from one share, and `check_split`
that a layout really gives every process rows of its own (a layout that replicates rows across
processes would silently mix their different data).

CPU: cross-process collectives on the CPU client use gloo over TCP
(`jax_cpu_collectives_implementation`, jax 0.10's default; "mpi" needs an MPI library). On a
CPU-only run (`JAX_PLATFORMS=cpu`) it is set to "gloo" explicitly unless the environment
chooses one (JAX_CPU_COLLECTIVES_IMPLEMENTATION); on GPU/TPU the flag is left alone.
"""
from __future__ import annotations

import collections
import dataclasses
import os
from typing import Mapping, Sequence

import jax
import ml_collections
import numpy as np
from absl import logging

#: The launchers whose process count is in the environment, checked in jax's order: name
#: (jax's `cluster_detection_method`), the variables jax needs to detect it, the count variable.
_LAUNCHERS = (
    ("ompi", ("OMPI_MCA_orte_hnp_uri",), "OMPI_COMM_WORLD_SIZE"),
    ("slurm", ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_NTASKS", "SLURM_PROCID",
               "SLURM_LOCALID"), "SLURM_NTASKS"),
)


def distributed_config(**overrides) -> ml_collections.ConfigDict:
    """Which processes form the run; empty fields come from the environment (module docstring)."""
    c = ml_collections.ConfigDict()
    c.coordinator_address = ""   # "host:port" of process 0's coordinator; "" = environment
    c.num_processes = 0          # processes in the run; 0 = environment (else 1 = single process)
    c.process_id = -1            # this process's index in [0, num_processes); -1 = environment
    c.local_device_ids = ()      # devices this process drives, e.g. (0,); () = environment/all
    c.initialization_timeout = 300  # seconds to wait for every process to connect
    c.lock()
    c.update(overrides)
    return c


@dataclasses.dataclass(frozen=True)
class Plan:
    """What `initialize` does. None fields are left for jax to detect from the launcher."""
    num_processes: int
    process_id: int | None
    coordinator_address: str | None
    local_device_ids: tuple[int, ...] | None
    launcher: str | None          # "ompi" | "slurm" | None


def _fail(field: str, value, why: str):
    raise ValueError(f"distributed config field '{field}' = {value!r} is invalid: {why}")


def validate(cfg) -> None:
    """Raises ValueError naming the first field of the section that is impossible by itself."""
    if cfg.num_processes < 0:
        _fail("num_processes", cfg.num_processes, "must be >= 0 (0 = from the environment)")
    if cfg.process_id < -1:
        _fail("process_id", cfg.process_id, "must be >= 0, or -1 (from the environment)")
    if cfg.num_processes and cfg.process_id >= cfg.num_processes:
        _fail("process_id", cfg.process_id, f"must be below num_processes={cfg.num_processes}")
    if cfg.coordinator_address:
        _check_address("coordinator_address", cfg.coordinator_address)
    ids = tuple(cfg.local_device_ids)
    if any(not isinstance(i, int) or i < 0 for i in ids) or len(set(ids)) != len(ids):
        _fail("local_device_ids", ids, "must be distinct device ordinals >= 0")
    if cfg.initialization_timeout <= 0:
        _fail("initialization_timeout", cfg.initialization_timeout, "must be positive")


def _check_address(field: str, address: str) -> None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        _fail(field, address, "must be HOST:PORT, e.g. 10.0.0.1:1234")


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    raw = environ.get(name, "")
    if not raw:
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"environment variable {name}={raw!r} is not an integer") from None


def _launcher(environ: Mapping[str, str]) -> tuple[str, int] | None:
    """(jax's name of the launcher, its process count) when run by Open MPI or SLURM."""
    for name, needed, count in _LAUNCHERS:
        if all(var in environ for var in needed):
            return name, _env_int(environ, count)
    return None


def plan(cfg, environ: Mapping[str, str] | None = None) -> Plan:
    """Resolves the section against the environment (module docstring); raises ValueError
    for a half-given setup, naming what is missing."""
    validate(cfg)
    environ = os.environ if environ is None else environ
    count = cfg.num_processes or _env_int(environ, "JAX_NUM_PROCESSES")
    process_id = cfg.process_id if cfg.process_id >= 0 else _env_int(environ, "JAX_PROCESS_ID")
    address = cfg.coordinator_address or environ.get("JAX_COORDINATOR_ADDRESS") or None
    ids = tuple(cfg.local_device_ids) or _device_ids(environ)
    if address:
        _check_address("coordinator_address (or JAX_COORDINATOR_ADDRESS)", address)
    launcher = _launcher(environ)
    if launcher and (launcher[1] or 0) > 1:
        name, launched = launcher
        if count and count != launched:
            raise ValueError(f"distributed.num_processes (or JAX_NUM_PROCESSES) = {count}, but "
                             f"the {name} launcher started {launched} processes")
        return Plan(launched, process_id, address, ids, name)
    if not count or count == 1:
        if address or process_id:
            field, value = (("coordinator_address", address) if address
                            else ("process_id", process_id))
            raise ValueError(f"distributed.{field} = {value!r} is set (config or JAX_* "
                             "environment) but the number of processes is not: set "
                             "--config.distributed.num_processes=N (or JAX_NUM_PROCESSES) on "
                             "every process")
        return Plan(1, 0, None, None, None)
    missing = [f"{field} (--config.distributed.{field} or {env})" for field, env, value in
               (("process_id", "JAX_PROCESS_ID", process_id),
                ("coordinator_address", "JAX_COORDINATOR_ADDRESS", address)) if value is None]
    if missing:
        raise ValueError(f"a run of {count} processes needs {' and '.join(missing)} on every "
                         "process (or a SLURM / Open MPI launcher that provides them)")
    if not 0 <= process_id < count:
        raise ValueError(f"process_id = {process_id} must be in [0, {count})")
    return Plan(count, process_id, address, ids, None)


def _device_ids(environ: Mapping[str, str]) -> tuple[int, ...] | None:
    raw = environ.get("JAX_LOCAL_DEVICE_IDS", "")
    return tuple(int(i) for i in raw.split(",")) if raw else None


def _cpu_collectives() -> None:
    """gloo for the CPU client's cross-process collectives on CPU-only runs (docstring)."""
    if jax.config.jax_platforms == "cpu" and \
            "JAX_CPU_COLLECTIVES_IMPLEMENTATION" not in os.environ:
        jax.config.update("jax_cpu_collectives_implementation", "gloo")


#: The setup `initialize` joined (None until it has).
_initialized: Plan | None = None


def initialize(cfg, environ: Mapping[str, str] | None = None) -> Plan:
    """Joins the processes of the run (module docstring); a no-op for a single process.

    Must run before anything touches a jax device (jax raises RuntimeError otherwise). A
    second call with the same resolved setup does nothing; a different one is a RuntimeError.
    """
    global _initialized
    resolved = plan(cfg, environ)
    if resolved.num_processes == 1:
        return resolved
    if jax.distributed.is_initialized():
        if _initialized != resolved:
            raise RuntimeError(f"jax.distributed is already initialized "
                               f"({_initialized or 'outside c2jax.distributed'}); cannot "
                               f"initialize it again as {resolved}")
        return resolved
    _cpu_collectives()
    jax.distributed.initialize(
        coordinator_address=resolved.coordinator_address,
        num_processes=resolved.num_processes,
        process_id=resolved.process_id,
        local_device_ids=list(resolved.local_device_ids) if resolved.local_device_ids else None,
        cluster_detection_method=resolved.launcher or "deactivate",
        initialization_timeout=cfg.initialization_timeout)
    _initialized = resolved
    logging.info("process %d of %d (coordinator %s): %d local devices of %d",
                 jax.process_index(), jax.process_count(),
                 resolved.coordinator_address or resolved.launcher, jax.local_device_count(),
                 jax.device_count())
    return resolved


def global_shape(local_shape: Sequence[int], axis: int = 0) -> tuple[int, ...]:
    """The shape of a batch split evenly between the processes along `axis`, from the shape of
    one process's share (`[rows / processes, ...]` -> `[rows, ...]`)."""
    shape = list(local_shape)
    shape[axis] *= jax.process_count()
    return tuple(shape)


def all_processes_agree(flag: bool) -> bool:
    """True when `flag` is true on every process (a collective: every process must call it at
    the same point); one process: `flag`."""
    if jax.process_count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils
    return bool(multihost_utils.process_allgather(np.asarray(bool(flag))).all())


def check_split(sharding, shape: Sequence[int], axis: int = 0, what: str = "batch") -> None:
    """Raises ValueError unless `sharding` gives every process its own equal share of the
    `shape[axis]` rows of an array of `shape`: what per-process data loading needs."""
    count = jax.process_count()
    rows = collections.defaultdict(set)
    for device, index in sharding.devices_indices_map(tuple(shape)).items():
        rows[device.process_index].update(range(*index[axis].indices(shape[axis])))
    share = shape[axis] // count
    if shape[axis] % count or any(len(r) != share for r in rows.values()) or \
            len(set().union(*rows.values())) != shape[axis]:
        held = "; ".join(f"process {p}: {len(r)} rows" for p, r in sorted(rows.items()))
        raise ValueError(
            f"the {shape[axis]} rows of the {what} are not split between the {count} processes "
            f"({held}; each must hold {shape[axis] / count:g} of its own): shard the batch over "
            f"mesh axes that span the processes (the batch axes data, fsdp, expert; e.g. "
            f"--config.mesh.fsdp=-1) with rows divisible by their size")
