"""EnvPool: many CodingEnv episodes at once, for RL actors and the benchmark harness.

Each of the `num_envs` environments has its own sandbox uid and workspace and is driven by one
worker thread (episodes spend their time waiting on sandboxed subprocesses, so threads are
enough). Two ways in:

- `run_episodes(tasks, agent_factory)`: whole episodes with scripted or model agents, under an
  optional deadline for the batch;
- `reset(tasks)` / `step(actions)`: lock-step batches, for an actor that decodes the actions of
  all live episodes together and then steps them together.
"""
from __future__ import annotations

import dataclasses
import queue
import time
import traceback
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from environments.agents import Agent
from environments.env import CodingEnv
from environments.task import Task


@dataclasses.dataclass(frozen=True)
class EpisodeResult:
    """One episode's outcome. `info` is the last step's info (reward_components, diff, ...).

    infra_failure: the score is meaningless (sandbox failure, harness error, deadline passed);
      `error` says why. Trainers drop these rollouts instead of scoring them zero.
    """
    task_id: str
    reward: float
    resolved: bool
    pass_fraction: float
    steps: int
    terminated: bool
    truncated: bool
    infra_failure: bool
    error: str | None
    elapsed_s: float
    info: dict[str, Any]


class EnvPool:
    """`num_envs` CodingEnvs (same constructor arguments) stepped concurrently."""

    def __init__(self, num_envs: int, **env_kwargs: Any):
        if num_envs < 1:
            raise ValueError(f"num_envs must be at least 1, got {num_envs}")
        self.envs = [CodingEnv(**env_kwargs) for _ in range(num_envs)]
        self._executor = ThreadPoolExecutor(num_envs, thread_name_prefix="c2jax-env")

    def __len__(self) -> int:
        return len(self.envs)

    def run_episodes(self, tasks: Sequence[Task | str], agent_factory: Callable[[], Agent], *,
                     seeds: Sequence[int | None] | None = None,
                     timeout_s: float | None = None) -> list[EpisodeResult]:
        """Runs one episode per task (in order of the returned list) with a fresh agent each.

        `timeout_s` bounds the whole batch: once it passes, running episodes stop at their next
        step and unstarted ones are skipped, all reported as infra failures. A step itself is
        bounded by the task's tool and test timeouts; an agent that never returns is not.
        """
        seeds = list(seeds) if seeds is not None else [None] * len(tasks)
        if len(seeds) != len(tasks):
            raise ValueError(f"got {len(seeds)} seeds for {len(tasks)} tasks")
        deadline = time.monotonic() + timeout_s if timeout_s is not None else float("inf")
        jobs: queue.SimpleQueue = queue.SimpleQueue()
        for i, job in enumerate(zip(tasks, seeds)):
            jobs.put((i, *job))
        results: list[EpisodeResult | None] = [None] * len(tasks)

        def worker(env: CodingEnv) -> None:
            while True:
                try:
                    i, task, seed = jobs.get_nowait()
                except queue.Empty:
                    return
                results[i] = _run_one(env, task, seed, agent_factory, deadline)

        futures = [self._executor.submit(worker, env) for env in self.envs]
        for future in futures:
            future.result()
        return results

    def reset(self, tasks: Sequence[Task | str], seeds: Sequence[int | None] | None = None
              ) -> list[tuple[dict, dict]]:
        """Resets env i with tasks[i] (len(tasks) <= num_envs), all at once."""
        if len(tasks) > len(self.envs):
            raise ValueError(f"{len(tasks)} tasks for {len(self.envs)} environments")
        seeds = list(seeds) if seeds is not None else [None] * len(tasks)
        return list(self._executor.map(
            lambda args: args[0].reset(seed=args[2], options={"task": args[1]}),
            zip(self.envs, tasks, seeds)))

    def step(self, actions: Sequence[Any | None]) -> list[tuple | None]:
        """Steps env i with actions[i]; None skips an env (its entry in the result is None)."""
        if len(actions) > len(self.envs):
            raise ValueError(f"{len(actions)} actions for {len(self.envs)} environments")
        return list(self._executor.map(
            lambda args: None if args[1] is None else args[0].step(args[1]),
            zip(self.envs, actions)))

    def close(self) -> None:
        self._executor.shutdown(wait=True)
        for env in self.envs:
            env.close()

    def __enter__(self) -> EnvPool:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _run_one(env: CodingEnv, task: Task | str, seed: int | None,
             agent_factory: Callable[[], Agent], deadline: float) -> EpisodeResult:
    started = time.monotonic()
    task_id = task.id if isinstance(task, Task) else str(task)
    steps = 0

    def failed(error: str) -> EpisodeResult:
        return EpisodeResult(task_id=task_id, reward=0.0, resolved=False, pass_fraction=0.0,
                             steps=steps, terminated=False, truncated=False, infra_failure=True,
                             error=error, elapsed_s=time.monotonic() - started, info={})

    if time.monotonic() >= deadline:
        return failed("not started: the pool's deadline had passed")
    try:
        obs, info = env.reset(seed=seed, options={"task": task})
        task_id = env.task.id
        agent = agent_factory()
        agent.begin(env.task, obs, info)
        while True:
            if time.monotonic() >= deadline:
                return failed(f"stopped after {steps} steps: the pool's deadline passed")
            obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
            steps += 1
            if terminated or truncated:
                break
    except Exception:  # one broken episode must not take the batch down; report it instead
        return failed(traceback.format_exc(limit=5))
    return EpisodeResult(
        task_id=task_id, reward=reward, resolved=info["resolved"],
        pass_fraction=info["pass_fraction"], steps=steps, terminated=terminated,
        truncated=truncated, infra_failure=info["infra_failure"], error=None,
        elapsed_s=time.monotonic() - started, info=info)
