"""The asynchronous actor-learner loop: `train_rl(config, workdir, tasks, make_env)`.

    start    validate; load the policy (`config.init_from`); resume from WORKDIR/checkpoints
             if there is a checkpoint (learner state, staleness counts, queued and in-flight
             groups); start the actors and the scheduler
    step     take `groups_per_step` ready groups -> learner batch -> update -> publish the new
             params to every actor (in flight: running sequences switch at their next decode
             step) -> bump the version the staleness rule admits against -> metrics
    every    `checkpoint.every` steps (and at the end): an async orbax checkpoint of the learner
             state plus the rollout state (the ledger: ready groups, in-flight groups with
             their finished episodes and their live episodes' snapshots)

Synchronous RL is the same loop with `staleness.eta = 0`: the rule admits exactly one step's
groups per version, so actors generate, then wait while the learner trains.

`tasks` (a list of task objects) and `make_env` (a new environment) come from the caller, so
this module never imports the benchmark: `experiments/rl.py` resolves a cursorbench suite.
"""
from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from absl import logging
from tqdm import tqdm

from c2jax import cpu_affinity, sharding
from c2jax.model.config import num_moe_layers
from c2jax.rl import rewards as rewards_lib
from c2jax.rl.actor import ActorSpec
from c2jax.rl.config import validate
from c2jax.train.config import ConfigError
from c2jax.rl.learner import Learner, make_batch
from c2jax.rl.ledger import Group, Ledger
from c2jax.rl.losses import group_advantages
from c2jax.rl.rollout import RolloutSettings
from c2jax.rl.runtime import make_fleet
from c2jax.rl.scheduler import Scheduler
from c2jax.rl.staleness import StalenessController
from c2jax.rl.trajectory import Episode
from c2jax.train import checkpoint as ckpt_lib, optimizer, state as state_lib
from c2jax.train.checkpoint import load_trained_model
from c2jax.train.metrics import MetricsWriter
from c2jax.model.transformer import abstract_variables


@dataclasses.dataclass
class RLResult:
    version: int                  # learner steps done
    variables: dict               # the final policy {"params", "router_bias"}
    model_cfg: Any
    tokenizer: Any
    history: list[dict]           # one record per learner step
    resumed_from: int | None


def rollout_settings(config) -> RolloutSettings:
    r = config.rollout
    return RolloutSettings(max_len=config.actor.max_len, max_new_tokens=r.max_new_tokens,
                           temperature=r.temperature, top_p=r.top_p, context=r.context,
                           context_budget=r.context_budget,
                           summary_max_tokens=r.summary_max_tokens,
                           max_summaries=r.max_summaries, max_turns=r.max_turns)


def _max_steps(task) -> int:
    limits = getattr(task, "limits", None)
    return int(getattr(limits, "max_steps", 0) or 30)


class FinishedGroups:
    """Pass rate over every group that finished since the last `take()`, trained or dropped
    (`pass_rate` of a step counts only the groups it trains on, which with
    `learner.drop_uniform_groups` are the ones holding both a success and a failure).
    Scheduler threads `add`, the learner loop `take`s."""

    def __init__(self):
        self._lock = threading.Lock()
        self._episodes = self._resolved = 0

    def add(self, episodes: int, resolved: int) -> None:
        with self._lock:
            self._episodes += episodes
            self._resolved += resolved

    def take(self) -> float | None:
        """Resolved fraction of the valid episodes counted since the last call (None: none)."""
        with self._lock:
            episodes, resolved = self._episodes, self._resolved
            self._episodes = self._resolved = 0
        return resolved / episodes if episodes else None


def group_maker(config, tasks, finished: FinishedGroups | None = None
                ) -> Callable[[int, int, int, list[Episode]], Group | None]:
    """The function that turns a finished group's episodes into a `Group` (shaped rewards,
    advantages) or None when fewer than 2 episodes are valid (infra failures are dropped,
    never scored) or, with `learner.drop_uniform_groups`, when every valid episode has the
    same correctness (all pass or all fail: DAPO's dynamic sampling; the shaping terms alone
    are no signal about the task). `finished` counts every scored group's episodes."""
    reward_cfg, kind = config.rewards, config.loss.advantage

    def make(group_id: int, index: int, version: int, episodes: list[Episode]) -> Group | None:
        valid = [e for e in episodes if not e.infra_failure]
        if len(valid) < 2:
            return None
        terms = [rewards_lib.episode_terms(e.info, max_steps=_max_steps(tasks[index]),
                                           output_tokens=e.sampled_tokens) for e in valid]
        shaped = rewards_lib.shape_group(terms, reward_cfg)
        if finished is not None:
            finished.add(len(valid), sum(int(t["resolved"]) for t in terms))
        if config.learner.drop_uniform_groups and np.ptp([s["correctness"]
                                                          for s in shaped]) == 0:
            return None
        rewards = np.asarray([s["reward"] for s in shaped], np.float32)
        advantages = np.asarray(group_advantages(jnp.asarray(rewards)[None], kind)[0])
        for episode, s in zip(valid, shaped):
            episode.reward, episode.components = float(s["reward"]), dict(s)
        return Group(group_id, index, valid, [float(a) for a in advantages], version,
                     len(episodes) - len(valid))

    return make


class _Throughput:
    def __init__(self):
        self.last_time = time.monotonic()
        self.last_tokens = 0

    def rate(self, tokens: int) -> float:
        now = time.monotonic()
        rate = (tokens - self.last_tokens) / max(now - self.last_time, 1e-9)
        self.last_time, self.last_tokens = now, tokens
        return rate


def _step_metrics(groups: Sequence[Group], version: int, eta: int) -> dict[str, float]:
    """Reward, episode and staleness statistics of the groups one step trains on."""
    episodes = [e for g in groups for e in g.episodes]
    metrics: dict[str, float] = {}
    for name in ("reward", "correctness", "style", "efficiency", "length_penalty", "cost",
                 "resolved", "pass_fraction", "steps", "output_tokens"):
        values = [e.reward if name == "reward" else e.components.get(name, 0.0)
                  for e in episodes]
        metrics[f"reward/{name}" if name != "reward" else "reward/mean"] = float(np.mean(values))
    metrics["pass_rate"] = float(np.mean([e.components.get("resolved", 0.0) for e in episodes]))
    metrics["episodes/trained"] = float(len(episodes))
    metrics["episode/turns"] = float(np.mean([e.turns for e in episodes]))
    metrics["episode/sampled_tokens"] = float(np.mean([e.sampled_tokens for e in episodes]))
    metrics["episode/segments"] = float(np.mean([len(e.segments) for e in episodes]))
    metrics["episode/summaries"] = float(np.mean([e.summaries for e in episodes]))
    metrics["episode/seconds"] = float(np.mean([e.seconds for e in episodes]))
    metrics["groups/uniform_reward"] = float(np.mean(
        [np.ptp([e.reward for e in g.episodes]) == 0 for g in groups]))
    # Staleness: versions the trained tokens lag behind the params they train (this step's
    # learner starts from version `version`).
    lags = np.concatenate([version - e.versions() for e in episodes]) if episodes else []
    if len(lags):
        metrics["staleness/mean"] = float(np.mean(lags))
        metrics["staleness/max"] = float(np.max(lags))
        counts = collections.Counter(np.minimum(lags, eta + 2).tolist())
        for lag in range(eta + 3):
            label = f"ge{lag}" if lag == eta + 2 else str(lag)
            metrics[f"staleness/tokens_lag_{label}"] = counts.get(lag, 0) / len(lags)
        metrics["staleness/admitted_lag_max"] = float(max(version - g.admitted_version
                                                          for g in groups))
    return metrics


def require_one_process() -> None:
    """Raises ConfigError under several jax processes: the loop is one controller (its actors,
    scheduler and ledger live in one process). The learner step itself runs on several
    (`Learner` with a mesh, each process passing its own rows); feeding it from per-process
    actor fleets is not built yet."""
    if jax.process_count() > 1:
        raise ConfigError(
            f"the RL loop runs in one process, and this run has {jax.process_count()} "
            "(distributed.num_processes or the environment): its actors, scheduler and "
            "rollout ledger are single-controller. Run it as one process (use "
            "learner.devices for the learner's share of that host's devices)")


def _actor_cpus(runtime, unpinned: frozenset) -> frozenset:
    """The cores Ray actors pin themselves to: `runtime.actor_cpus`, else those the learner had
    before pinning (a local Ray's processes would otherwise inherit `learner_cpus`); none on an
    existing cluster, whose nodes are not this host."""
    cpus = cpu_affinity.parse_cpus(runtime.actor_cpus)
    return cpus or (frozenset() if runtime.ray_address else unpinned)


def train_rl(config, workdir: str | Path, *, tasks: Sequence, make_env: Callable[[], Any],
             on_step: Callable[[int, dict], None] | None = None) -> RLResult:
    """Runs (or resumes) RL in `workdir`; see the module docstring. One process only
    (`require_one_process`)."""
    validate(config)
    require_one_process()
    workdir = Path(workdir).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    if not config.init_from:
        raise ValueError("config field 'init_from' is empty: give the policy to start from (a "
                         "training workdir, a checkpoint step directory or a model directory)")
    model_cfg, variables, tokenizer = load_trained_model(config.init_from)
    if tokenizer is None:
        raise ValueError(f"init_from={config.init_from!r} has no tokenizer.json")
    if not tasks:
        raise ValueError("no tasks to train on")
    devices = jax.devices()[:config.learner.devices or None]
    mesh_cfg = config.mesh
    try:
        mesh = sharding.make_mesh(mesh_cfg, devices)
        sharding.validate_layout(model_cfg, sharding.mesh_shape(mesh_cfg, len(devices)))
    except ValueError as e:
        raise ConfigError(f"[mesh] {e} (the learner has {len(devices)} devices: "
                          "learner.devices)") from None
    tx = optimizer.make_optimizer(
        config.optimizer, config.learner.steps * config.learner.updates_per_batch,
        optimizer.weight_decay_mask(abstract_variables(model_cfg)["params"]))
    shardings = state_lib.state_shardings(model_cfg, tx, mesh, mesh_cfg.rules)
    checkpointer = ckpt_lib.Checkpointer(workdir, keep=config.checkpoint.keep)
    with contextlib.ExitStack() as cleanup:
        cleanup.callback(checkpointer.close)
        cleanup.callback(checkpointer.wait)
        # The learner's cores (runtime.learner_cpus), given back when the run ends.
        unpinned = cpu_affinity.pin_process(cpu_affinity.parse_cpus(config.runtime.learner_cpus))
        cleanup.callback(cpu_affinity.pin_process, unpinned)
        abstract = state_lib.placed(state_lib.abstract_state(model_cfg, tx), shardings)
        restored = checkpointer.restore_latest(abstract, model_cfg)
        ledger = Ledger()
        if restored is not None:
            state, rl_state = restored.state, restored.data_state
            version = rl_state["controller"]["version"]
            resume_groups = ledger.restore(rl_state["ledger"])
            logging.info("resuming RL in %s at version %d (%d groups queued, %d in flight)",
                         workdir, version, ledger.depth, len(resume_groups))
        else:
            state = state_lib.init_state(model_cfg, tx, config.seed, shardings, variables)
            rl_state, version, resume_groups = None, 0, []
        reference = variables if config.loss.kl_coef else None
        controller = StalenessController(
            config.staleness.eta, config.learner.groups_per_step,
            config.staleness.max_running_groups, version=version,
            accepted=(rl_state["controller"]["accepted"] if rl_state else 0),
            next_group=(rl_state["controller"]["next_group"] if rl_state else 0))
        controller.resume_running(len(resume_groups))
        spec = ActorSpec(model_cfg=model_cfg.to_dict(), tokenizer=tokenizer, tasks=list(tasks),
                         make_env=make_env, rollout=rollout_settings(config),
                         slots=config.actor.slots, steps_per_call=config.actor.steps_per_call,
                         dtype=config.actor.dtype, head_dtype=config.actor.head_dtype,
                         cpus=_actor_cpus(config.runtime, unpinned))
        published = _publish_copy(state)
        finished = FinishedGroups()
        fleet = make_fleet(config, spec, published, version)
        cleanup.callback(fleet.close)
        scheduler = Scheduler(fleet.actors, controller, ledger, num_tasks=len(tasks),
                              group_size=config.learner.group_size, seed=config.seed,
                              make_group=group_maker(config, tasks, finished),
                              version=lambda: controller.version)
        cleanup.callback(scheduler.stop)
        learner = Learner(model_cfg, config.loss, tx, replay=config.learner.routing_replay,
                          updates_per_batch=config.learner.updates_per_batch,
                          reference=reference, mesh=mesh, rules=mesh_cfg.rules,
                          temperature=config.rollout.temperature)
        recent = {version: published} if config.learner.matched_kl else None
        history = _run(config, workdir, tokenizer, state, version, learner, fleet, scheduler,
                       ledger, controller, checkpointer, resume_groups, on_step, recent,
                       finished)
        state, version, records = history
        final = {"params": state.params, "router_bias": state.router_bias}
        return RLResult(version, jax.device_get(final), model_cfg, tokenizer, records,
                        restored.step if restored is not None else None)


def _publish_copy(state) -> dict:
    """The params actors sample with: a copy, since the learner's buffers are donated."""
    return {"params": jax.tree.map(jnp.copy, state.params),
            "router_bias": jax.tree.map(jnp.copy, state.router_bias)}


def _rl_state(controller, ledger, fleet) -> dict:
    """Controller counters and ledger read together (staleness module docstring). The
    actors' live snapshots come first, outside the lock: a group admitted after them is
    stored with no live episodes and simply starts again on resume."""
    live = fleet.snapshots()
    counters, rollouts = controller.state(also=lambda: ledger.snapshot(live))
    return {"controller": counters, "ledger": rollouts}


def _run(config, workdir, tokenizer, state, version, learner, fleet, scheduler, ledger,
         controller, checkpointer, resume_groups, on_step, recent, finished):
    """The learner loop. `recent` (None: off) maps the last `staleness.eta` + 2 policy
    versions (trained tokens lag at most eta + 1) to their published params, for the
    version-matched mismatch KL. `finished` tallies every group's episodes, dropped ones
    included."""
    lc = config.learner
    moe_layers = num_moe_layers(learner.cfg)
    writer = MetricsWriter(workdir, version)
    _truncate_groups(workdir, version)
    records = []
    scheduler.start(resume_groups)
    actor_rate = _Throughput()
    bar = tqdm(total=lc.steps, initial=version, desc="rl", unit="step",
               disable=not config.progress_bar, dynamic_ncols=True)
    try:
        while version < lc.steps:
            wait_start = time.monotonic()
            groups = ledger.take(lc.groups_per_step)
            if groups is None:
                raise RuntimeError("the rollout ledger closed before the learner had its batch")
            waited = time.monotonic() - wait_start
            groups.sort(key=lambda g: g.group_id)    # batch order independent of finish order
            episodes = [e for g in groups for e in g.episodes]
            advantages = [a for g in groups for a in g.advantages]
            batch = make_batch(episodes, advantages, seq_len=config.actor.max_len,
                               microbatch_rows=lc.microbatch_rows, moe_layers=moe_layers,
                               k=learner.cfg.num_experts_per_tok)
            metrics = _step_metrics(groups, version, config.staleness.eta)
            if recent is not None:
                metrics.update({f"learner/{k}": v for k, v in
                                learner.matched_mismatch_kl(recent, batch).items()})
            update_start = time.monotonic()
            state, learner_metrics = learner.update(state, batch)
            updated = time.monotonic()
            version += 1
            published = _publish_copy(state)
            fleet.publish(published, version)
            controller.set_version(version)
            if recent is not None:
                recent[version] = published
                for old in [v for v in recent if v < version - config.staleness.eta - 1]:
                    del recent[old]
            sync = time.monotonic() - updated
            step_seconds = time.monotonic() - wait_start
            metrics.update({f"learner/{k}": v for k, v in learner_metrics.items()})
            metrics.update({
                "learner/idle_fraction": waited / max(step_seconds, 1e-9),
                "learner/tokens_per_sec": learner_metrics["trained_tokens"]
                / max(updated - update_start, 1e-9),
                "learner/step_seconds": step_seconds,
                "learner/update_seconds": updated - update_start,
                "actor/tokens_per_sec": actor_rate.rate(fleet.generated_tokens()),
                "weight_sync/seconds": sync,
                "queue/depth": float(ledger.depth),
                "queue/running_groups": float(ledger.running_groups),
                "groups/dropped_total": float(ledger.dropped_groups),
                "episodes/infra_failures_total": float(scheduler.infra_failures),
                "episodes/rescheduled_total": float(fleet.restarts),
                "groups/consumed_total": float(ledger.consumed),
            })
            finished_rate = finished.take()
            if finished_rate is not None:           # None: no group finished since the last step
                metrics["pass_rate/finished_groups"] = finished_rate
            record = {"step": version, **metrics,
                      "group_ids": [g.group_id for g in groups]}
            records.append(record)
            _append_groups(workdir, version, groups)
            if version % config.log_every == 0 or version == lc.steps:
                writer.write(version, metrics)
            bar.update(1)
            bar.set_postfix(reward=f"{metrics['reward/mean']:.3f}",
                            pass_rate=f"{metrics['pass_rate']:.2f}")
            if on_step is not None:
                on_step(version, record)
            if version % config.checkpoint.every == 0 or version == lc.steps:
                if version == lc.steps:
                    scheduler.stop()
                checkpointer.save(state, data_state=_rl_state(controller, ledger, fleet),
                                  config=_saved_config(config, learner.cfg),
                                  tokenizer=tokenizer)
    finally:
        bar.close()
        writer.close()
    return state, version, records


def _saved_config(config, model_cfg) -> ml_collections.ConfigDict:
    """What a checkpoint records as its config: the model (checked on resume) and the run."""
    return ml_collections.ConfigDict({"model": model_cfg, "rl": config})


GROUPS_FILE = "groups.jsonl"


def _truncate_groups(workdir: Path, version: int) -> None:
    """Drops audit lines of steps after `version` (a killed run wrote them; they rerun)."""
    path = workdir / GROUPS_FILE
    if not path.exists():
        return
    kept = [line for line in path.read_text().splitlines()
            if line.strip() and json.loads(line)["step"] <= version]
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    tmp.replace(path)


def _append_groups(workdir: Path, version: int, groups: Sequence[Group]) -> None:
    """One line per consumed group (id, task, the version it was admitted at, the version each
    episode started sampling with, rewards): the audit trail that no trajectory is
    lost or trained twice across restarts."""
    with open(workdir / GROUPS_FILE, "a") as f:
        for g in groups:
            f.write(json.dumps({"step": version, "group_id": g.group_id,
                                "task_index": g.task_index,
                                "admitted_version": g.admitted_version,
                                "first_token_versions": [_first_version(e) for e in g.episodes],
                                "rewards": [e.reward for e in g.episodes]}) + "\n")


def _first_version(episode) -> int | None:
    """The policy version of an episode's first sampled token (None: it sampled none)."""
    versions = episode.versions()
    return int(versions[0]) if len(versions) else None
