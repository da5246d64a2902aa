"""An RL actor: one sampler engine and a set of environments running episodes.

    actor = Actor(ActorSpec(...), variables, version=0)
    future = actor.submit(EpisodeJob(group_id=3, sample=1, task_index=17, seed=...))
    actor.set_params(new_variables, version=4)   # in flight: running turns switch at the
                                                 # next decode step, tokens record the version
    actor.snapshots()                            # live episodes at their last turn boundary

Each environment is driven by one thread; all of them share the actor's `GenerationServer`,
so the turns of every running episode decode in one continuous batch. The same class runs
in-process (threads in the learner's process) or as a Ray actor (`c2jax/rl/runtime.py`):
everything it needs is in the `ActorSpec`, which is plain data.
"""
from __future__ import annotations

import dataclasses
import queue
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Callable

import ml_collections

from c2jax.data.chat import ChatTemplate
from c2jax.rl.rollout import RolloutSettings, run_episode
from c2jax.rl.trajectory import Episode
from c2jax.sampling import Engine, GenerationServer, sampler_config


@dataclasses.dataclass(frozen=True)
class EpisodeJob:
    group_id: int
    sample: int
    task_index: int
    seed: int
    resume: dict | None = None      # a turn-boundary snapshot to continue from


@dataclasses.dataclass
class ActorSpec:
    """What an actor is built from (picklable, for Ray)."""
    model_cfg: dict                 # the model config as a dict (ConfigDict.to_dict())
    tokenizer: Any                  # c2jax.data.tokenizer.Tokenizer (pickles as its JSON)
    tasks: list                     # environments.Task objects (or what make_env's envs take)
    make_env: Callable[[], Any]     # a new environment (CodingEnv-like reset/step)
    rollout: RolloutSettings
    slots: int
    steps_per_call: int
    dtype: str = "float32"          # the actor's compute dtype
    head_dtype: str = "float32"     # its output head's ("" = dtype)
    cpus: frozenset = frozenset()   # cores a Ray actor's process pins itself to (empty: all)


class Actor:
    """Runs `EpisodeJob`s on `len(envs)` environment threads over one sampler."""

    def __init__(self, spec: ActorSpec, variables, *, version: int, num_envs: int):
        cfg = ml_collections.ConfigDict(spec.model_cfg)
        cfg.dtype, cfg.head_dtype = spec.dtype, spec.head_dtype
        self.tokenizer = spec.tokenizer
        self.spec = spec
        engine = Engine(cfg, variables, tokenizer=self.tokenizer, version=version,
                        config=sampler_config(slots=spec.slots, max_len=spec.rollout.max_len,
                                              steps_per_call=spec.steps_per_call))
        self.server = GenerationServer(engine)
        self.template = ChatTemplate(self.tokenizer)
        self._envs: queue.SimpleQueue = queue.SimpleQueue()
        self._all_envs = [spec.make_env() for _ in range(num_envs)]
        for env in self._all_envs:
            self._envs.put(env)
        self._pool = ThreadPoolExecutor(num_envs, thread_name_prefix="c2jax-actor-env")
        self._lock = threading.Lock()
        self._live: dict[tuple[int, int], dict] = {}
        self.in_flight = 0

    def submit(self, job: EpisodeJob) -> Future:
        """Queues an episode; the future resolves to its `Episode` (never an exception:
        failures are infra_failure episodes)."""
        with self._lock:
            self.in_flight += 1
        return self._pool.submit(self._run, job)

    def run(self, job: EpisodeJob) -> Episode:
        """Runs an episode on the calling thread (the Ray runtime calls this; it blocks until
        an environment is free)."""
        with self._lock:
            self.in_flight += 1
        return self._run(job)

    def _run(self, job: EpisodeJob) -> Episode:
        env = self._envs.get()
        key = (job.group_id, job.sample)

        def boundary(snapshot: dict) -> None:
            with self._lock:
                self._live[key] = snapshot

        try:
            if job.resume is not None:
                boundary(job.resume)
            return run_episode(env, self.server, self.template, self.spec.tasks[job.task_index],
                               seed=job.seed, group_id=job.group_id, sample=job.sample,
                               settings=self.spec.rollout, resume=job.resume,
                               on_boundary=boundary)
        finally:
            with self._lock:
                self._live.pop(key, None)
                self.in_flight -= 1
            self._envs.put(env)

    def set_params(self, variables, version: int) -> None:
        self.server.set_params(variables, version)

    def snapshots(self) -> dict[tuple[int, int], dict]:
        """{(group_id, sample): snapshot} of the episodes running now."""
        with self._lock:
            return dict(self._live)

    def generated_tokens(self) -> int:
        """Tokens sampled so far (for actor tokens/s)."""
        return self.server.engine.generated_tokens

    def close(self) -> None:
        """Stops at once: queued episodes are cancelled, running ones fail at their next turn
        (the sampler is closed first), then the environments are closed."""
        self.server.close()
        self._pool.shutdown(wait=True, cancel_futures=True)
        for env in self._all_envs:
            env.close()
