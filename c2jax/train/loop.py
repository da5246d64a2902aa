"""The training loop every stage runs: `train(config, workdir)`.

    start   validate the config; build tokenizer, mesh, optimizer, data; then, in this order,
            resume from WORKDIR/checkpoints (newest readable checkpoint), else start from
            `train.init_from` (another run's or a model directory's weights, fresh optimizer),
            else a random init. Compile the steps ahead of time.
    step    next batch -> train step -> metrics; a non-finite loss skips the update (step.py),
            is logged, and after `train.max_nonfinite_steps` in a row stops the run with
            NonFiniteLossError (no checkpoint is written during such a streak, so the newest
            checkpoint is the last good one).
    every   log_every: a metrics record; eval_every: held-out eval (also at step 0 of a new run
            and at the end); checkpoint_every: an async checkpoint (also at the end).

Determinism: a run resumed from the checkpoint at step s computes exactly the losses the
uninterrupted run computed after step s (same state, same data position, same compiled step),
which `tests/train/test_entry_points.py` checks by killing a run with SIGKILL.

Several processes (c2jax/distributed.py): every process runs `train` on its own shard of the
data (`data.batch_size` rows per step each); the mesh must split the batch rows between them
(checked before compiling), and only process 0 writes metrics.
"""
from __future__ import annotations

import contextlib
import dataclasses
import time
from pathlib import Path

import jax
import numpy as np
from absl import logging
from tqdm import tqdm

from c2jax import distributed, flops, sharding
from c2jax.data.pipeline import make_batch_iterator
from c2jax.data.tokenizer import load_tokenizer, tokenizer_from_config
from c2jax.model.transformer import abstract_variables
from c2jax.train import (checkpoint, head_positions, optimizer, state as state_lib,
                         step as step_lib)
from c2jax.train.config import ConfigError, validate
from c2jax.train.metrics import MetricsWriter


class NonFiniteLossError(RuntimeError):
    """The loss, gradient or update was NaN/Inf for `train.max_nonfinite_steps` steps in a
    row."""


@dataclasses.dataclass
class TrainResult:
    step: int                  # the last step run
    train_metrics: dict        # the last train record written
    eval_metrics: dict         # the last eval record ({} if eval is off)
    resumed_from: int | None   # the checkpoint step the run resumed from, if any


def _data_error(what: str, error: Exception) -> ConfigError:
    return ConfigError(f"[data] {what}: {error}")


def _open_train_data(config, tokenizer):
    try:
        return make_batch_iterator(config.data, tokenizer, split="train",
                                   shard_index=jax.process_index(),
                                   shard_count=jax.process_count())
    except (ValueError, OSError) as e:  # missing / empty corpus, bad JSONL line, ...
        raise _data_error("cannot open the train split", e) from None


def _load_tokenizer(config):
    try:
        tokenizer = tokenizer_from_config(config.data.tokenizer)
    except (ValueError, OSError) as e:
        raise _data_error("cannot load the tokenizer", e) from None
    if tokenizer.vocab_size > config.model.vocab_size:
        raise ConfigError(
            f"the tokenizer has {tokenizer.vocab_size} ids but model.vocab_size = "
            f"{config.model.vocab_size}: ids past the embedding table would be out of range; "
            f"set --config.model.vocab_size={tokenizer.vocab_size}")
    return tokenizer


class _Evaluator:
    """Held-out loss over the first `train.eval_batches` batches of the eval split."""

    def __init__(self, config, tokenizer, eval_step, batch_sharding):
        self._config, self._tokenizer = config, tokenizer
        self._step, self._sharding = eval_step, batch_sharding

    def __call__(self, state) -> dict[str, float]:
        totals = None
        cfg = self._config
        with make_batch_iterator(cfg.data, self._tokenizer, split="eval",
                                 shard_index=jax.process_index(),
                                 shard_count=jax.process_count()) as batches:
            for _, batch in zip(range(cfg.train.eval_batches), batches):
                sums = self._step(state.params, state.router_bias,
                                  step_lib.device_batch(batch, self._sharding))
                totals = sums if totals is None else jax.tree.map(np.add, totals, sums)
                totals = jax.device_get(totals)
        return self._summarise(totals)

    def _summarise(self, totals) -> dict[str, float]:
        def mean(total, count):
            return float(total) / max(float(count), 1.0)

        record = {"eval_loss": mean(totals["ce_sum"], totals["ce_count"]),
                  "eval_tokens": float(totals["ce_count"])}
        for k in range(1, self._config.model.num_mtp_layers + 1):
            record[f"eval_mtp_loss_{k}"] = mean(totals[f"mtp_{k}_sum"], totals[f"mtp_{k}_count"])
        edges = [0, *self._config.train.eval_position_buckets, self._config.data.seq_len]
        if len(edges) > 2:
            by_sum, by_count = totals["ce_sum_by_position"], totals["ce_count_by_position"]
            for lo, hi in zip(edges[:-1], edges[1:]):
                record[f"eval_loss_positions_{lo}_{hi}"] = mean(by_sum[lo:hi].sum(),
                                                                by_count[lo:hi].sum())
        return record


class _Throughput:
    """Speed over the steps since the last metrics record (compile time is not in it: the
    steps are compiled before the loop)."""

    def __init__(self, tokens_per_step: int, flops_per_token: float, peak_flops: float):
        self._tokens_per_step, self._flops_per_token = tokens_per_step, flops_per_token
        self._peak_flops = peak_flops
        self._steps, self._seconds, self._data_seconds = 0, 0.0, 0.0

    def add(self, step_seconds: float, data_seconds: float) -> None:
        self._steps += 1
        self._seconds += step_seconds
        self._data_seconds += data_seconds

    def take(self) -> dict[str, float]:
        """`tokens_per_sec`, `step_time_sec`, `data_time_sec`, `mfu`; then starts a new window."""
        tokens_per_sec = self._steps * self._tokens_per_step / self._seconds
        record = {"tokens_per_sec": tokens_per_sec,
                  "step_time_sec": self._seconds / self._steps,
                  "data_time_sec": self._data_seconds / self._steps,
                  "mfu": flops.mfu(tokens_per_sec, self._flops_per_token, self._peak_flops)}
        self._steps, self._seconds, self._data_seconds = 0, 0.0, 0.0
        return record


def _nonfinite_message(step: int, in_a_row: int, checkpointer) -> str:
    good = checkpointer.steps()
    last_good = (f"step {good[-1]} in {checkpointer.directory}" if good
                 else "none (no checkpoint was written yet)")
    return (f"stopping at step {step}: the loss (or its gradient or update) was NaN/Inf for "
            f"{in_a_row} steps in a row (train.max_nonfinite_steps); each of those updates was "
            f"skipped. The last good checkpoint is {last_good}. Lower optimizer.learning_rate "
            "or check the data, then rerun with the same --workdir to resume from it.")


def _start_state(config, workdir, tokenizer, steps: Steps, checkpointer, train_data):
    """(state, resumed_from step or None): resume, else init_from, else a random init."""
    abstract, tx, shardings = steps.abstract_state, steps.tx, steps.shardings
    restored = checkpointer.restore_latest(abstract, config.model)
    if restored is not None:
        if restored.data_state is not None:   # None: saved by another number of processes
            train_data.set_state(restored.data_state)
        logging.info("resuming %s from the checkpoint at step %d", workdir, restored.step)
        return restored.state, restored.step
    if config.train.init_from:
        target = {"params": abstract.params, "router_bias": abstract.router_bias}
        variables, source = checkpoint.load_variables(config.train.init_from, target)
        saved_tokenizer = checkpoint.saved_tokenizer_dir(source)
        if saved_tokenizer and load_tokenizer(saved_tokenizer).fingerprint() != \
                tokenizer.fingerprint():
            raise ConfigError(
                f"train.init_from = {config.train.init_from!r} was trained with a different "
                f"tokenizer than data.tokenizer gives; set "
                f"--config.data.tokenizer.path={saved_tokenizer}")
        logging.info("starting from the weights in %s", source)
        return state_lib.init_state(config.model, tx, config.train.seed, shardings,
                                    variables), None
    return state_lib.init_state(config.model, tx, config.train.seed, shardings), None


@dataclasses.dataclass
class Steps:
    """What a run compiles, built from the config without allocating anything."""
    tx: object                     # the optax optimizer
    shardings: state_lib.TrainState     # where every leaf of the state lives
    abstract_state: state_lib.TrainState  # ShapeDtypeStructs with shardings
    batch_sharding: object         # NamedSharding of a [global_batch, seq] input
    abstract_batch: dict           # ShapeDtypeStructs of one global batch
    train_step: step_lib.MeshFunction
    eval_step: step_lib.MeshFunction
    head_width: int = 0            # head positions per row (`train.head_fraction`); 0 = all
    head_train_step: step_lib.MeshFunction | None = None   # the train step on such batches

    def head_batch(self) -> dict:
        """`abstract_batch` plus the head position arrays `[global_batch, head_width]`."""
        rows = self.abstract_batch["tokens"].shape[0]
        return {**self.abstract_batch, **{
            name: jax.ShapeDtypeStruct((rows, self.head_width),
                                       np.int32 if name == "head_positions" else np.float32,
                                       sharding=self.batch_sharding)
            for name in head_positions.KEYS}}


def build_steps(config, mesh) -> Steps:
    """The optimizer, state layout and the (uncompiled) train and eval steps of `config` on
    `mesh`. `steps.train_step.lower(steps.abstract_state, steps.abstract_batch)` checks a
    cluster config on a fake mesh without materialising a parameter."""
    model_cfg, rules = config.model, config.mesh.rules
    tx = optimizer.make_optimizer(
        config.optimizer, config.train.steps,
        optimizer.weight_decay_mask(abstract_variables(model_cfg)["params"]))
    shardings = state_lib.state_shardings(model_cfg, tx, mesh, rules)
    global_batch = config.data.batch_size * jax.process_count()
    batch_sharding = step_lib.batch_sharding(mesh, rules, (global_batch, config.data.seq_len))
    head_width = (head_positions.width(config.data.seq_len, config.train.head_fraction)
                  if config.train.head_fraction else 0)
    return Steps(
        tx=tx, shardings=shardings,
        abstract_state=state_lib.placed(state_lib.abstract_state(model_cfg, tx), shardings),
        batch_sharding=batch_sharding,
        abstract_batch=step_lib.abstract_batch(global_batch, config.data.seq_len,
                                               batch_sharding),
        train_step=step_lib.make_train_step(model_cfg, config.loss, tx, mesh, rules,
                                            shardings),
        eval_step=step_lib.make_eval_step(model_cfg, mesh, rules, shardings),
        head_width=head_width,
        head_train_step=(step_lib.make_train_step(model_cfg, config.loss, tx, mesh, rules,
                                                  shardings) if head_width else None))


def _train_step(steps: Steps, model_cfg, state, batch):
    """One step on this process's numpy batch: on the head positions when configured and
    every process's rows fit them, else full width. Metrics gain `head_full_width` (1.0 when
    the step ran full width although head positions were configured)."""
    if not steps.head_width:
        return steps.train_step(state, step_lib.device_batch(batch, steps.batch_sharding))
    heads = head_positions.head_positions(batch["loss_mask"], model_cfg.num_mtp_layers,
                                          steps.head_width)
    fits = distributed.all_processes_agree(heads is not None)
    if fits:
        batch = {**batch, **dict(zip(head_positions.KEYS, heads))}
    step = steps.head_train_step if fits else steps.train_step
    state, metrics = step(state, step_lib.device_batch(batch, steps.batch_sharding))
    return state, {**metrics, "head_full_width": np.float32(not fits)}


def train(config, workdir: str | Path) -> TrainResult:
    """Runs (or resumes) the stage described by `config` in `workdir`; see module docstring.

    Raises ConfigError for a config or input that cannot work (before anything is compiled),
    NonFiniteLossError when the loss stays NaN/Inf.
    """
    workdir = Path(workdir).absolute()
    validate(config, jax.device_count())
    tokenizer = _load_tokenizer(config)
    if config.stage != "pretrain" and not config.train.init_from:
        logging.warning("stage %r has no train.init_from: it starts from random weights, not "
                        "from the previous stage", config.stage)
    with contextlib.ExitStack() as cleanup:
        # Data errors surface here, before any tracing or compiling.
        train_data = cleanup.enter_context(_open_train_data(config, tokenizer))
        steps = build_steps(config, sharding.make_mesh(config.mesh))
        try:
            distributed.check_split(steps.batch_sharding, steps.abstract_batch["tokens"].shape)
        except ValueError as e:
            raise ConfigError(f"[mesh] {e}") from None
        checkpointer = checkpoint.Checkpointer(workdir, keep=config.train.keep_checkpoints,
                                               async_save=config.train.async_checkpointing)
        cleanup.callback(checkpointer.close)
        cleanup.callback(checkpointer.wait)   # runs first: pending saves finish, then close
        state, resumed_from = _start_state(config, workdir, tokenizer, steps, checkpointer,
                                           train_data)
        return _run(config, workdir, tokenizer, steps, train_data, checkpointer, state,
                    resumed_from)

def _run(config, workdir, tokenizer, steps: Steps, train_data, checkpointer, state,
         resumed_from) -> TrainResult:
    model_cfg, train_cfg = config.model, config.train
    start = int(jax.device_get(state.step))
    compile_start = time.perf_counter()
    if steps.head_width:     # the full-width step compiles only if a batch ever needs it
        steps.head_train_step.compile(steps.abstract_state, steps.head_batch())
    else:
        steps.train_step.compile(steps.abstract_state, steps.abstract_batch)
    evaluate = None
    if train_cfg.eval_every:
        steps.eval_step.compile(steps.abstract_state.params, steps.abstract_state.router_bias,
                                steps.abstract_batch)
        evaluate = _Evaluator(config, tokenizer, steps.eval_step, steps.batch_sharding)
    logging.info("compiled the train%s step in %.1f s", " and eval" if evaluate else "",
                 time.perf_counter() - compile_start)

    writer = MetricsWriter(workdir, start)
    throughput = _Throughput(
        tokens_per_step=int(np.prod(steps.abstract_batch["tokens"].shape)),
        flops_per_token=flops.training_flops_per_token(model_cfg, config.data.seq_len),
        peak_flops=train_cfg.peak_flops_per_device * jax.device_count())
    train_record, eval_record = {}, {}
    if evaluate and start == 0:
        eval_record = evaluate(state)
        writer.write(0, eval_record)
    nonfinite_in_a_row = 0
    bar = tqdm(total=train_cfg.steps, initial=start, desc=config.stage, unit="step",
               disable=not train_cfg.progress_bar, dynamic_ncols=True)
    try:
        for step in range(start + 1, train_cfg.steps + 1):
            step_start = time.perf_counter()
            batch = next(train_data)
            data_seconds = time.perf_counter() - step_start
            state, metrics = _train_step(steps, model_cfg, state, batch)
            metrics = {k: float(v) for k, v in jax.device_get(metrics).items()}
            throughput.add(time.perf_counter() - step_start, data_seconds)
            bar.update(1)

            finite = metrics["finite"] == 1.0
            nonfinite_in_a_row = 0 if finite else nonfinite_in_a_row + 1
            if not finite:
                logging.warning("step %d: non-finite loss, gradient or update (loss=%s, "
                                "grad_norm=%s); the update was skipped (%d in a row)", step,
                                metrics["loss"], metrics["grad_norm"], nonfinite_in_a_row)
            last = step == train_cfg.steps
            if step % train_cfg.log_every == 0 or last or not finite:
                train_record = {**metrics, **throughput.take()}
                writer.write(step, train_record)
                bar.set_postfix(loss=f"{metrics['loss']:.3f}",
                                tok_s=f"{train_record['tokens_per_sec']:,.0f}")
            if nonfinite_in_a_row >= train_cfg.max_nonfinite_steps:
                checkpointer.wait()
                raise NonFiniteLossError(_nonfinite_message(step, nonfinite_in_a_row,
                                                            checkpointer))
            if evaluate and (step % train_cfg.eval_every == 0 or last):
                eval_record = evaluate(state)
                writer.write(step, eval_record)
                logging.info("step %d: %s", step, eval_record)
            if finite and (step % train_cfg.checkpoint_every == 0 or last):
                checkpointer.save(state, data_state=train_data.get_state(), config=config,
                                  tokenizer=tokenizer)
    finally:
        bar.close()
        writer.close()
    return TrainResult(step=train_cfg.steps, train_metrics=train_record,
                       eval_metrics=eval_record, resumed_from=resumed_from)
