"""Agents the harness can run, and how a command-line spec names one.

An agent is either

- a step agent, the environment's interface (`environments.Agent`): `begin(task, observation,
  info)` once, then `act(observation, info) -> action` until the episode ends; or
- an episode agent: `run(env, task, observation, info)` drives `env.step` itself until the
  episode ends (for policies that batch or manage their own context).

Either may expose `messages`, the conversation it had (`c2jax.data.chat` format); the harness
stores it with the trajectory. The harness builds one agent per attempt with
`factory(seed)`, so sampling agents can vary their draws across attempts.

Specs: `oracle`, `null`, `runcall` (cursorbench/runcall.py: runs the expression a value
question names), `model:CKPT` (the policy agent of `c2jax.rl.agent`, the RL actor's
episode loop, loaded lazily so this package itself never imports JAX; CKPT is a training
workdir, a checkpoint step directory or a model directory), or
`python:package.module:factory` for any other policy.
"""
from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from typing import Any

import environments
from environments.task import Task

from cursorbench.mini import trajectory
from cursorbench.runcall import RunCallAgent

AgentFactory = Callable[[int], Any]


class AgentSpecError(ValueError):
    """A --agent value that names no usable agent; the message says what is available."""


class OracleAgent:
    """Solves a task the way its author did.

    Tasks with an `oracle.json` (the mini suite) replay its tool calls, so every oracle run
    also checks the trajectories SFT trains on; other tasks fall back to the environment's
    oracle (`reference.diff` through apply_patch, or the answer). `messages` holds the
    conversation, summary turns included, ready for `c2jax.data.chat`.
    """

    def __init__(self):
        self.messages: list[dict[str, Any]] = []
        self._steps: list[dict[str, Any]] = []
        self._fallback: environments.OracleAgent | None = None

    def begin(self, task: Task, observation: dict[str, Any], info: dict[str, Any]) -> None:
        self.messages = [{"role": "system", "content": info["system_prompt"]},
                         {"role": "user", "content": observation["content"]}]
        path = task.path / "oracle.json" if task.path else None
        if path is not None and path.exists():
            self._steps = list(json.loads(path.read_text())["steps"])
            self._fallback = None
        else:
            self._fallback = environments.OracleAgent()
            self._fallback.begin(task, observation, info)

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        if observation["role"] == "tool":
            self.messages.append({"role": "tool", "content": observation["content"]})
        if self._fallback is not None:
            action = self._fallback.act(observation, info)
            self.messages.append({"role": "assistant", "content": "", "tool_call": action})
            return action
        while self._steps and trajectory.is_summary(self._steps[0]):
            self.messages.append({"role": "summary", "content": self._steps.pop(0)["summary"]})
        if not self._steps:
            raise RuntimeError("the oracle trajectory ended without a finish call")
        step = self._steps.pop(0)
        action = trajectory.action_of(step)
        self.messages.append({"role": "assistant", "content": step.get("thought", "") + "\n",
                              "tool_call": action})
        return action


def make_agent_factory(spec: str, **model_options) -> AgentFactory:
    """The factory a --agent spec names; AgentSpecError (for people) when there is none.

    model_options: keywords of `c2jax.rl.agent.model_agent_factory` (temperature,
    max_new_tokens, max_len, slots) for `model:CKPT`; ignored by the other agents."""
    if spec == "oracle":
        return lambda seed: OracleAgent()
    if spec == "null":
        return lambda seed: environments.NullAgent()
    if spec == "runcall":
        return lambda seed: RunCallAgent()
    if spec.startswith("model:"):
        checkpoint = spec[len("model:"):]
        if not checkpoint:
            raise AgentSpecError(f"--agent={spec}: expected model:CKPT (a training workdir, a "
                                 "checkpoint step directory or a model directory)")
        try:
            agent_module = importlib.import_module("c2jax.rl.agent")
        except ImportError as e:
            raise AgentSpecError(f"--agent={spec} needs the c2jax package ({e})") from None
        try:
            return agent_module.model_agent_factory(checkpoint, **model_options)
        except (FileNotFoundError, ValueError) as e:
            raise AgentSpecError(f"--agent={spec}: {e}") from None
    if spec.startswith("python:"):
        target = spec[len("python:"):]
        module_name, _, attr = target.partition(":")
        if not module_name or not attr:
            raise AgentSpecError(f"--agent={spec}: expected python:package.module:factory")
        try:
            factory = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise AgentSpecError(f"--agent={spec}: cannot load {target} ({e})") from None
        if not callable(factory):
            raise AgentSpecError(f"--agent={spec}: {target} is not callable")
        return factory
    raise AgentSpecError(f"unknown --agent={spec!r}; choose oracle, null, runcall, model:CKPT or "
                         "python:package.module:factory")
