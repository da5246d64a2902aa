"""One process of the multi-process learner test (tests/train/test_multiprocess.py), and the
pieces the test's one-process reference shares with it.

    python -m tests.train.multiprocess_worker --out=DIR --num_processes=2 \\
        [--process_id=I --coordinator=127.0.0.1:PORT]   # else $JAX_PROCESS_ID, ...

Joins the run (`c2jax.distributed`), then, on the mesh over every process's devices
(fsdp = all): restores the step-0 state the test saved from one process (DIR/from_one, via
`c2jax.train.checkpoint.Checkpointer`), runs `TRAIN_STEPS` pretraining steps on its own rows
of `global_batch()`, checkpoints the state into DIR/from_two, then runs one RL learner step on
its own episodes of `episodes()`. Writes DIR/process_<I>.json (the losses and gradient norms
of every step, and what the run saw) and, from process 0, DIR/state.npz: the whole state
after pretraining, gathered from every process.
"""
from __future__ import annotations

import argparse
import contextlib
import json
import time
from pathlib import Path

import numpy as np

from c2jax import distributed
from c2jax.data.config import data_config
from c2jax.distributed import distributed_config
from c2jax.model.config import num_moe_layers
from c2jax.rl.trajectory import Episode, Segment
from c2jax.sharding import mesh_config
from c2jax.train.config import optimizer_config, stage_config, train_config
from configs.models import tiny

VOCAB, SEQ, ROWS = 320, 32, 8     # the global pretraining batch is [ROWS, SEQ]
TRAIN_STEPS = 2
ADVANTAGES = (1.0, -0.5, 0.25, -0.75)   # one per episode of `episodes()`
#: Which episodes each of 2 processes trains on: uneven, so the processes must agree on the
#: number of microbatches and on the normaliser.
EPISODES_OF_PROCESS = ((0, 1, 2), (3,))
MICROBATCH_ROWS = 2               # per process; the one-process reference uses 4
FROM_ONE, FROM_TWO = "from_one", "from_two"   # workdirs of the 1- and 2-process checkpoints


def config(batch_size: int, mesh=None, distributed=None):
    """The stage config: a one-layer tiny MoE (capacity for every token, so no layout drops
    one), `batch_size` rows per process."""
    return stage_config(
        stage="pretrain",
        model=tiny(vocab_size=VOCAB, max_position_embeddings=SEQ, capacity_factor=4.0,
                   num_hidden_layers=1, first_k_dense_replace=0, num_mtp_layers=0,
                   rope_scaling={"original_max_position_embeddings": SEQ}),
        data=data_config(seq_len=SEQ, batch_size=batch_size),
        mesh=mesh or mesh_config(fsdp=-1),
        optimizer=optimizer_config(warmup_steps=1),
        train=train_config(steps=10, progress_bar=False),
        distributed=distributed_config(**(distributed or {})))


def global_batch() -> dict[str, np.ndarray]:
    """A fixed packed batch `[ROWS, SEQ]`: two documents per row, positions restarting."""
    rng = np.random.RandomState(0)
    tokens = rng.randint(1, VOCAB, (ROWS, SEQ + 1)).astype(np.int32)
    segment_ids = np.where(np.arange(SEQ) < 11, 1, 2).astype(np.int32)[None].repeat(ROWS, 0)
    positions = np.where(segment_ids == 1, np.arange(SEQ), np.arange(SEQ) - 11).astype(np.int32)
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:],
            "loss_mask": np.ones((ROWS, SEQ), np.float32), "segment_ids": segment_ids,
            "positions": positions}


def episodes(model_cfg) -> list[Episode]:
    """Four one-segment episodes of 20-30 tokens: a 6-token prompt (no loss), then sampled
    tokens with behaviour log-probs near the initial policy's (so no sequence is masked),
    version 0, and replayed experts at every position."""
    rng = np.random.RandomState(1)
    layers, k = num_moe_layers(model_cfg), model_cfg.num_experts_per_tok
    out = []
    for i, n in enumerate((20, 30, 24, 27)):
        mask = (np.arange(n) >= 6).astype(np.int8)
        experts = np.argsort(rng.rand(n, layers, model_cfg.n_routed_experts), axis=-1)[..., :k]
        behaviour = rng.uniform(-0.3, 0.3, n) - np.log(VOCAB)
        segment = Segment(tokens=rng.randint(1, VOCAB, n).astype(np.int32), loss_mask=mask,
                          logprobs=np.where(mask, behaviour, 0).astype(np.float32),
                          versions=np.where(mask, 0, -1).astype(np.int32),
                          routing=experts.astype(np.int16))
        out.append(Episode(task_id=f"t{i}", group_id=0, sample=i, segments=[segment], info={},
                           actions=[]))
    return out


def learner_batch(model_cfg, which, microbatch_rows: int) -> dict[str, np.ndarray]:
    """`make_batch` of the episodes with indices `which`."""
    from c2jax.rl.learner import make_batch
    chosen = episodes(model_cfg)
    return make_batch([chosen[i] for i in which], [ADVANTAGES[i] for i in which], seq_len=SEQ,
                      microbatch_rows=microbatch_rows, moe_layers=num_moe_layers(model_cfg),
                      k=model_cfg.num_experts_per_tok)


def pretrain(steps, state, rows: slice):
    """(state, records): `TRAIN_STEPS` train steps on `rows` of `global_batch()`; records hold
    each step's `loss` and `grad_norm`."""
    from c2jax.train import step as step_lib
    batch = step_lib.device_batch({k: v[rows] for k, v in global_batch().items()},
                                  steps.batch_sharding)
    records = []
    for _ in range(TRAIN_STEPS):
        state, metrics = steps.train_step(state, batch)
        records.append({k: float(metrics[k]) for k in ("loss", "grad_norm")})
    return state, records


def rl_step(cfg, mesh, steps, state, batch) -> dict[str, float]:
    """One RL learner update of `state` (the pretraining optimizer) on `batch`."""
    from c2jax.rl.learner import Learner
    from c2jax.rl.losses import loss_config
    learner = Learner(cfg.model, loss_config(), steps.tx, replay=True, mesh=mesh,
                      rules=cfg.mesh.rules)
    _, metrics = learner.update(state, batch)
    return {k: metrics[k] for k in ("loss", "grad_norm", "trained_tokens", "entropy")}


def tokenizer():
    """A small BPE for the checkpoint's tokenizer item."""
    from c2jax.data.tokenizer import train_tokenizer
    return train_tokenizer(["def add(x, y):\n    return x + y\n" * 20], 280)


def flat_state(state) -> dict[str, np.ndarray]:
    """Every leaf of a fully addressable state as numpy, keyed by its path."""
    import jax
    return {jax.tree_util.keystr(path): np.asarray(leaf)
            for path, leaf in jax.tree_util.tree_flatten_with_path(state)[0]}


@contextlib.contextmanager
def checkpointer(workdir: Path):
    """A `Checkpointer` of `workdir`; on exit, its saves are on disk and it is closed."""
    from c2jax.train.checkpoint import Checkpointer
    manager = Checkpointer(workdir, keep=1)
    try:
        yield manager
    finally:
        manager.wait()
        manager.close()


def _wait_for_checkpoint(workdir: Path, timeout: float = 120.0) -> None:
    """Until the test's process has committed its step-0 checkpoint (orbax renames the
    finished directory into place)."""
    deadline = time.monotonic() + timeout
    while not (workdir / "checkpoints" / "0").is_dir():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no checkpoint appeared in {workdir}")
        time.sleep(0.1)


def _error(call) -> str:
    """The message of the ValueError `call` raises ("" if it raises none)."""
    try:
        call()
    except ValueError as e:
        return str(e)
    return ""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--num_processes", type=int, required=True)
    parser.add_argument("--process_id", type=int, default=-1, help="-1: $JAX_PROCESS_ID")
    parser.add_argument("--coordinator", default="", help="'': $JAX_COORDINATOR_ADDRESS")
    args = parser.parse_args()
    cfg = config(batch_size=ROWS // args.num_processes, distributed=dict(
        coordinator_address=args.coordinator, num_processes=args.num_processes,
        process_id=args.process_id))
    distributed.initialize(cfg.distributed)
    distributed.initialize(cfg.distributed)       # the same setup again: nothing happens

    import jax
    from jax.experimental import multihost_utils
    from jax.sharding import NamedSharding, PartitionSpec

    from c2jax import sharding
    from c2jax.rl.loop import require_one_process
    from c2jax.train.config import validate
    from c2jax.train.loop import build_steps

    validate(cfg, jax.device_count())
    mesh = sharding.make_mesh(cfg.mesh)
    steps = build_steps(cfg, mesh)
    _wait_for_checkpoint(args.out / FROM_ONE)
    with checkpointer(args.out / FROM_ONE) as one:
        start = one.restore_latest(steps.abstract_state, cfg.model)
    share, index = ROWS // jax.process_count(), jax.process_index()
    state, records = pretrain(steps, start.state, slice(index * share, (index + 1) * share))
    with checkpointer(args.out / FROM_TWO) as two:
        two.save(state, data_state={"process": index}, config=cfg, tokenizer=tokenizer())
        gathered = multihost_utils.process_allgather(state, tiled=True)
        if index == 0:
            np.savez(args.out / "state.npz", **flat_state(gathered))
        rl = rl_step(cfg, mesh, steps, state, learner_batch(
            cfg.model, EPISODES_OF_PROCESS[index], MICROBATCH_ROWS))
    (args.out / f"process_{index}.json").write_text(json.dumps({
        "records": records, "rl": rl, "process_count": jax.process_count(),
        "device_count": jax.device_count(), "local_devices": jax.local_device_count(),
        "restored_step": start.step, "restored_data": start.data_state,
        "replicated_batch_error": _error(lambda: distributed.check_split(
            NamedSharding(mesh, PartitionSpec()), (ROWS, SEQ))),
        "rl_loop_error": _error(require_one_process)}))


if __name__ == "__main__":
    main()
