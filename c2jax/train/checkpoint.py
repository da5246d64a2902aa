"""Training checkpoints: an orbax CheckpointManager with async saves, keep-N, and a fallback
past corrupt checkpoints.

Layout of `WORKDIR/checkpoints/<step>/` (one directory per saved step):

    variables/    {"params", "router_bias"}: the same item a model directory holds
                  (c2jax/checkpoint/model_dir.py), so either can seed a new stage (`init_from`)
    train_state/  {"step", "opt_state", "rng"}: the rest of the TrainState
    data/         the train iterator's position, one JSON file per host (grain's handler:
                  `process_<i>-of-<n>.json`), so a resumed run sees exactly the same batches
    config/       the stage config as JSON (`metadata`)
    tokenizer/    tokenizer.json (load with `c2jax.data.tokenizer.load_tokenizer(<dir>)`)

Saves are asynchronous: `save` returns once the arrays are copied off the devices and the
files are written in the background; orbax writes into a temporary directory and renames it
when complete, so a run killed mid-save leaves the previous checkpoints intact (the temporary
directory is cleaned up by the next run).

Several processes: every process calls `save` and `restore_latest` (orbax coordinates them);
the arrays are written once, each shard by the process holding it, and restore into any mesh
and any number of processes (resharded). The data positions are per process, so a checkpoint
written by N processes resumes its data only with N processes; with another count the state
restores and `Restored.data_state` is None (the loop then starts the data iterators afresh).

Restoring walks the steps newest first. A checkpoint that cannot be read (truncated files, a
missing item) is logged with a warning, moved to `WORKDIR/checkpoints_corrupt/<step>` (kept for
inspection, out of the manager's way) and the previous one is tried. A checkpoint written with a
different model architecture is not corrupt: that is a `ConfigError`, and nothing is moved.
"""
from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path

import grain
import jax
import orbax.checkpoint as ocp
from absl import logging

from c2jax.checkpoint.model_dir import CONFIG_FILE as MODEL_DIR_CONFIG, VARIABLES_DIR
from c2jax.data.tokenizer import TOKENIZER_FILE, Tokenizer
from c2jax.train.config import ConfigError
from c2jax.train.state import TrainState

CHECKPOINTS_DIR = "checkpoints"
CORRUPT_DIR = "checkpoints_corrupt"
_TRAIN_STATE = "train_state"
_DATA = "data"
_CONFIG = "config"
_TOKENIZER = "tokenizer"


class _IteratorState:
    """The data iterator's position in the form grain's orbax handler reads and writes.

    Saving: holds the state captured when `save` was called (on the training thread, so it is
    exactly the position after the saved step). Restoring: receives the saved state, which the
    caller applies to the real iterator only once every other item restored cleanly.
    """

    def __init__(self, state: dict | None = None):
        self.state = state

    def get_state(self) -> bytes:
        return json.dumps(self.state).encode()

    def set_state(self, state: bytes) -> None:
        self.state = json.loads(state)

    def start_prefetch(self) -> None:
        """Part of grain's handler protocol; the real iterator prefetches on its own."""


@dataclasses.dataclass
class Restored:
    step: int
    state: TrainState
    data_state: dict | None   # for BatchIterator.set_state; None when the checkpoint was
                              # written by a different number of processes
    config: dict              # the stage config the checkpoint was written with (JSON form)


def _variables(state: TrainState) -> dict:
    return {"params": state.params, "router_bias": state.router_bias}


def _train_state(state: TrainState) -> dict:
    return {"step": state.step, "opt_state": state.opt_state, "rng": state.rng}


def _registry() -> ocp.handlers.DefaultCheckpointHandlerRegistry:
    registry = ocp.handlers.DefaultCheckpointHandlerRegistry()
    for item in ("variables", _TRAIN_STATE):
        registry.add(item, ocp.args.StandardSave)
        registry.add(item, ocp.args.StandardRestore)
    registry.add(_DATA, grain.checkpoint.CheckpointSave, grain.checkpoint.CheckpointHandler)
    registry.add(_DATA, grain.checkpoint.CheckpointRestore, grain.checkpoint.CheckpointHandler)
    registry.add(_CONFIG, ocp.args.JsonSave)
    registry.add(_CONFIG, ocp.args.JsonRestore)
    registry.add(_TOKENIZER, ocp.args.JsonSave, ocp.handlers.JsonCheckpointHandler(TOKENIZER_FILE))
    return registry


def config_json(config) -> dict:
    """A ConfigDict as plain JSON types (tuples become lists)."""
    return json.loads(config.to_json_best_effort())


def model_differences(saved_model: dict, model_cfg) -> list[str]:
    """'field: saved X, now Y' for every model field that differs (an empty list: same model)."""
    now = config_json(model_cfg)
    flat_saved, flat_now = _flatten(saved_model), _flatten(now)
    return [f"{k}: saved {flat_saved.get(k)!r}, now {flat_now.get(k)!r}"
            for k in sorted(set(flat_saved) | set(flat_now))
            if flat_saved.get(k) != flat_now.get(k)]


def _flatten(tree: dict, prefix: str = "") -> dict:
    flat = {}
    for key, value in tree.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


class Checkpointer:
    """Saves and restores TrainState + data position + config + tokenizer under `workdir`."""

    def __init__(self, workdir: str | Path, *, keep: int, async_save: bool = True):
        self.workdir = Path(workdir).absolute()
        self.directory = self.workdir / CHECKPOINTS_DIR
        options = ocp.CheckpointManagerOptions(
            max_to_keep=keep, enable_async_checkpointing=async_save, create=True,
            cleanup_tmp_directories=True)
        self._manager = ocp.CheckpointManager(self.directory, options=options,
                                              handler_registry=_registry())

    def steps(self) -> list[int]:
        """Steps with a complete checkpoint on disk, oldest first."""
        return sorted(self._manager.all_steps())

    def step_dir(self, step: int) -> Path:
        return self.directory / str(step)

    def save(self, state: TrainState, *, data_state: dict, config, tokenizer: Tokenizer) -> None:
        """Starts saving `state` at its step (returns before the files are written when async).

        data_state: the train iterator's `get_state()` after this step's batch.
        """
        step = int(jax.device_get(state.step))
        self._manager.save(step, args=ocp.args.Composite(
            variables=ocp.args.StandardSave(_variables(state)),
            train_state=ocp.args.StandardSave(_train_state(state)),
            data=grain.checkpoint.CheckpointSave(_IteratorState(data_state)),
            config=ocp.args.JsonSave(config_json(config)),
            tokenizer=ocp.args.JsonSave(json.loads(tokenizer.hf.to_str()))))

    def restore_latest(self, abstract: TrainState, model_cfg) -> Restored | None:
        """The newest checkpoint that restores cleanly, into `abstract`'s shapes and shardings
        (a TrainState of `jax.ShapeDtypeStruct` with `sharding`); None if there is none.

        Corrupt checkpoints are moved aside with a warning (module docstring). Raises
        ConfigError if the newest readable checkpoint has a different model architecture.
        """
        for step in reversed(self.steps()):
            try:
                saved_config = self._manager.restore(step, args=ocp.args.Composite(
                    config=ocp.args.JsonRestore()))[_CONFIG]
            except Exception as e:  # orbax and tensorstore raise many types for a bad read
                self._quarantine(step, e)
                continue
            differences = model_differences(saved_config.get("model", {}), model_cfg)
            if differences:
                raise ConfigError(
                    f"the checkpoint at step {step} in {self.directory} was trained with a "
                    f"different model ({'; '.join(differences)}); resume with the original "
                    "model config, or use a new --workdir (with train.init_from to start from "
                    "these weights)")
            iterator_state = _IteratorState()
            items = {"variables": ocp.args.StandardRestore(_variables(abstract)),
                     _TRAIN_STATE: ocp.args.StandardRestore(_train_state(abstract))}
            writers = self._saved_process_count(step)
            if writers in (None, jax.process_count()):   # None: no data files, a corrupt save
                items[_DATA] = grain.checkpoint.CheckpointRestore(iterator_state)
            else:
                logging.warning("the checkpoint at step %d was written by %s processes and this "
                                "run has %d: its state restores (resharded), its per-process "
                                "data positions do not, so the data starts afresh", step,
                                writers, jax.process_count())
            try:
                restored = self._manager.restore(step, args=ocp.args.Composite(**items))
            except Exception as e:
                self._quarantine(step, e)
                continue
            variables, rest = restored["variables"], restored[_TRAIN_STATE]
            state = TrainState(step=rest["step"], params=variables["params"],
                               opt_state=rest["opt_state"],
                               router_bias=variables["router_bias"], rng=rest["rng"])
            return Restored(step=step, state=state, data_state=iterator_state.state,
                            config=saved_config)
        return None

    def _saved_process_count(self, step: int) -> int | None:
        """How many processes wrote the checkpoint at `step` (from its data files' names,
        `process_<i>-of-<n>.json`); None if it has none."""
        names = [p.name for p in (self.step_dir(step) / _DATA).glob("process_*-of-*.json")]
        counts = {int(name.rsplit("-of-", 1)[1].removesuffix(".json")) for name in names}
        return counts.pop() if len(counts) == 1 else None

    def _quarantine(self, step: int, error: Exception) -> None:
        target = self.workdir / CORRUPT_DIR / str(step)
        suffix = 1
        while target.exists():
            target = self.workdir / CORRUPT_DIR / f"{step}.{suffix}"
            suffix += 1
        logging.warning("checkpoint at step %d (%s) cannot be restored: %s: %s. Moving it to %s "
                        "and falling back to the previous checkpoint.", step,
                        self.step_dir(step), type(error).__name__, str(error)[:500], target)
        if jax.process_index() == 0:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(self.step_dir(step)), str(target))
        self._manager.reload()

    def wait(self) -> None:
        """Blocks until every started save is on disk."""
        self._manager.wait_until_finished()

    def close(self) -> None:
        self._manager.close()


def _step_dirs_newest_first(path: Path) -> list[Path]:
    """The checkpoint step directories of a training workdir, newest first ([] if none)."""
    checkpoints = path / CHECKPOINTS_DIR
    if not checkpoints.is_dir():
        return []
    return sorted((p for p in checkpoints.iterdir() if p.name.isdigit()),
                  key=lambda p: int(p.name), reverse=True)


def load_variables(path: str | Path, abstract_variables: dict) -> tuple[dict, Path]:
    """`{"params", "router_bias"}` from a training workdir (its newest readable checkpoint)
    or from a model directory, into `abstract_variables`' shapes and shardings.

    Returns (variables, the directory they came from). The optimizer state, data position and
    step of the source are not read: this starts a new stage from another run's weights.
    """
    path = Path(path).absolute()
    if (path / MODEL_DIR_CONFIG).exists():
        source = path / VARIABLES_DIR
        with ocp.StandardCheckpointer() as checkpointer:
            return checkpointer.restore(source, abstract_variables), path
    step_dirs = _step_dirs_newest_first(path)
    if not step_dirs:
        raise ConfigError(f"train.init_from = {str(path)!r} holds no checkpoints: give a training "
                          f"workdir (with {CHECKPOINTS_DIR}/<step>/) or a model directory (with "
                          f"{MODEL_DIR_CONFIG})")
    for source in step_dirs:
        try:
            with ocp.StandardCheckpointer() as checkpointer:
                return checkpointer.restore(source / "variables", abstract_variables), source
        except Exception as e:  # a corrupt newest checkpoint: use the one before it
            logging.warning("init_from: checkpoint %s cannot be read (%s: %s); trying the "
                            "previous one", source, type(e).__name__, str(e)[:300])
    raise ConfigError(f"train.init_from = {str(path)!r}: none of its checkpoints "
                      f"{[int(p.name) for p in step_dirs]} can be read")


def saved_tokenizer_dir(checkpoint_dir: Path) -> Path | None:
    """The directory holding tokenizer.json inside a step directory, if it has one."""
    candidate = Path(checkpoint_dir) / _TOKENIZER
    return candidate if (candidate / TOKENIZER_FILE).is_file() else None



def load_trained_model(path: str | Path):
    """(model cfg, variables, tokenizer or None) for inference from a training workdir (its
    newest readable checkpoint), one of its step directories, or a model directory (whose
    tokenizer, if any, is `tokenizer.json` beside `model_config.json`)."""
    from c2jax.checkpoint.model_dir import config_from_json, load_model
    from c2jax.data.tokenizer import load_tokenizer

    path = Path(path).absolute()
    if (path / MODEL_DIR_CONFIG).exists():
        cfg, variables = load_model(str(path))
        return cfg, variables, (load_tokenizer(path) if (path / TOKENIZER_FILE).exists()
                                else None)
    if (path / _CONFIG / "metadata").exists():      # a step directory
        step_dirs = [path]
    else:
        step_dirs = _step_dirs_newest_first(path)
    if not step_dirs:
        raise FileNotFoundError(f"{path} is neither a training workdir (with {CHECKPOINTS_DIR}/"
                                f"<step>/), a checkpoint step directory, nor a model directory "
                                f"(with {MODEL_DIR_CONFIG})")
    from flax import linen as nn

    from c2jax.model.transformer import abstract_variables
    for step_dir in step_dirs:
        try:
            saved = json.loads((step_dir / _CONFIG / "metadata").read_text())
            cfg = config_from_json(json.dumps(saved["model"]))
            target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                                  nn.unbox(abstract_variables(cfg)))
            with ocp.StandardCheckpointer() as checkpointer:
                variables = checkpointer.restore(step_dir / "variables", target)
        except Exception as e:  # a corrupt newest checkpoint: use the one before it
            logging.warning("checkpoint %s cannot be read (%s: %s); trying the previous one",
                            step_dir, type(e).__name__, str(e)[:300])
            continue
        tokenizer_dir = saved_tokenizer_dir(step_dir)
        return cfg, variables, (load_tokenizer(tokenizer_dir) if tokenizer_dir else None)
    raise FileNotFoundError(f"none of the checkpoints in {path} can be read")
