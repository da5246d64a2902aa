"""The learner as 2 jax processes on one machine (gloo CPU collectives over 127.0.0.1) equals
the learner as 1 process, and checkpoints move between 1 and 2 processes, resharded.

One pair of worker processes (tests/train/multiprocess_worker.py, 2 fake CPU devices each, a
4-device global mesh; process 0 joins through the config, process 1 through the JAX_*
environment variables) does everything: restore the step-0 state this process saved, 2
pretraining steps on its half of a fixed batch, an orbax checkpoint, 1 RL learner step on its
own episodes (3 and 1: the processes must agree on the microbatches and the normaliser).
Meanwhile this process computes the same on one process over 4 of its 8 devices, then
restores the 2-process checkpoint onto a mesh of all 8 with another layout.
"""
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import jax
import numpy as np
import pytest

from c2jax import sharding
from c2jax.train import state as state_lib
from c2jax.train.loop import build_steps
from tests.train import multiprocess_worker as worker

REPO = Path(__file__).resolve().parents[2]
PROCESSES = 2
RTOL = 1e-5
# One xdist worker runs the whole module, so the module fixture's worker pair runs once.
pytestmark = pytest.mark.xdist_group("multiprocess")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_workers(out: Path) -> list[subprocess.Popen]:
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("JAX_")}
    env.update(JAX_PLATFORMS="cpu", XLA_FLAGS="--xla_force_host_platform_device_count=2 "
                                              "--xla_backend_optimization_level=0")
    by_flags = dict(env, JAX_COORDINATOR_BIND_ADDRESS=f"127.0.0.1:{port}")
    by_environment = dict(env, JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{port}", JAX_PROCESS_ID="1")
    command = [sys.executable, "-m", "tests.train.multiprocess_worker", f"--out={out}",
               f"--num_processes={PROCESSES}"]
    return [subprocess.Popen(command + ["--process_id=0", f"--coordinator=127.0.0.1:{port}"],
                             cwd=REPO, env=by_flags, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True),
            subprocess.Popen(command, cwd=REPO, env=by_environment, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)]


def _finish(workers: list[subprocess.Popen]) -> None:
    outputs = []
    try:
        for process in workers:
            outputs.append(process.communicate(timeout=240)[0])
    finally:
        for process in workers:
            if process.poll() is None:
                process.kill()
                process.wait()
    for i, (process, output) in enumerate(zip(workers, outputs)):
        assert process.returncode == 0, f"worker {i} failed:\n{output[-4000:]}"


def _initial_state(out: Path):
    """(cfg, mesh, steps, state): the step-0 state on 4 of this process's devices, also
    saved as a 1-process checkpoint for the workers to start from."""
    cfg = worker.config(batch_size=worker.ROWS)
    mesh = sharding.make_mesh(cfg.mesh, jax.devices()[:4])
    steps = build_steps(cfg, mesh)
    state = state_lib.init_state(cfg.model, steps.tx, 0, steps.shardings)
    with worker.checkpointer(out / worker.FROM_ONE) as one:
        one.save(state, data_state={"process": 0}, config=cfg, tokenizer=worker.tokenizer())
    return cfg, mesh, steps, state


def _one_process_reference(out: Path):
    """What the workers compute, on one process: (train records, RL metrics, the state after
    pretraining as numpy)."""
    cfg, mesh, steps, state = _initial_state(out)
    state, records = worker.pretrain(steps, state, slice(None))
    after_pretraining = worker.flat_state(jax.device_get(state))
    batch = worker.learner_batch(cfg.model, range(len(worker.ADVANTAGES)),
                                 worker.MICROBATCH_ROWS * PROCESSES)
    return records, worker.rl_step(cfg, mesh, steps, state, batch), after_pretraining


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    out = tmp_path_factory.mktemp("multiprocess")
    workers = _start_workers(out)
    try:
        reference = _one_process_reference(out)
    finally:
        _finish(workers)
    results = [json.loads((out / f"process_{i}.json").read_text()) for i in range(PROCESSES)]
    return out, results, reference


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= RTOL * abs(b)


def test_two_processes_form_one_four_device_mesh(runs):
    _, results, _ = runs
    for result in results:
        assert (result["process_count"], result["device_count"], result["local_devices"]) == \
            (2, 4, 2)
        # The 1-process checkpoint restored (resharded); its data position is per process.
        assert result["restored_step"] == 0 and result["restored_data"] is None
        # A layout that replicates the batch over the processes is refused, naming the fix.
        assert "are not split between the 2 processes" in result["replicated_batch_error"]
        assert "the RL loop runs in one process" in result["rl_loop_error"]


def test_pretraining_steps_equal_one_process(runs):
    _, results, (reference, _, _) = runs
    for result in results:
        for step, (got, want) in enumerate(zip(result["records"], reference)):
            for key in ("loss", "grad_norm"):
                assert _close(got[key], want[key]), (step, key, got[key], want[key])
    assert reference[1]["loss"] != reference[0]["loss"]       # the first step changed the state


def test_rl_learner_step_equals_one_process(runs):
    _, results, (_, reference, _) = runs
    assert reference["grad_norm"] > 0 and reference["loss"] != 0
    for result in results:
        rl = result["rl"]
        assert rl["trained_tokens"] == reference["trained_tokens"] == 77   # 14 + 24 + 18 + 21
        for key in ("loss", "grad_norm", "entropy"):
            assert _close(rl[key], reference[key]), (key, rl[key], reference[key])


def test_two_process_checkpoint_restores_on_one_process_resharded(runs):
    out, _, (_, _, one_process_state) = runs
    saved = dict(np.load(out / "state.npz"))
    step_dir = out / worker.FROM_TWO / "checkpoints" / str(worker.TRAIN_STEPS)
    assert sorted(p.name for p in (step_dir / "data").glob("*.json")) == [
        "process_0-of-2.json", "process_1-of-2.json"]

    cfg = worker.config(batch_size=worker.ROWS,
                        mesh=sharding.mesh_config(fsdp=2, expert=2, tensor=2))
    steps = build_steps(cfg, sharding.make_mesh(cfg.mesh))           # all 8 devices
    with worker.checkpointer(out / worker.FROM_TWO) as two:
        restored = two.restore_latest(steps.abstract_state, cfg.model)
    assert restored.step == worker.TRAIN_STEPS
    assert restored.data_state is None          # per-process data positions: 2 != 1 process
    experts = restored.state.params["moe_layers"]["layer"]["mlp"]["experts"]["up_proj"]
    assert experts.sharding.spec == steps.shardings.params["moe_layers"]["layer"]["mlp"][
        "experts"]["up_proj"].spec
    assert {"expert", "tensor"} <= set(jax.tree.leaves(tuple(experts.sharding.spec)))
    got = worker.flat_state(jax.device_get(restored.state))
    assert got.keys() == saved.keys()
    for key in saved:
        np.testing.assert_array_equal(got[key], saved[key], err_msg=key)    # exactly
        np.testing.assert_allclose(got[key], one_process_state[key], rtol=1e-4, atol=1e-6,
                                   err_msg=key)
