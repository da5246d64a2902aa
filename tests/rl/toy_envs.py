"""Small environments with the CodingEnv interface (reset / step, the same observation and
info dicts), fast enough for RL tests: no sandbox, rewards computed from the action text."""
from __future__ import annotations

import dataclasses
import fcntl


@dataclasses.dataclass(frozen=True)
class ToyLimits:
    max_steps: int


@dataclasses.dataclass(frozen=True)
class ToyTask:
    id: str
    prompt: str
    limits: ToyLimits


def toy_tasks(count: int, max_steps: int = 1) -> list[ToyTask]:
    return [ToyTask(f"toy-{i}", f"Task {i}: write digits.", ToyLimits(max_steps))
            for i in range(count)]


class DigitsEnv:
    """Each turn's text is scored by its share of digit characters; the episode lasts
    `task.limits.max_steps` turns, or ends at a `finish` call, and its pass fraction is the
    mean share (resolved when above one half). Tool answers are "ok <step>"."""

    system_prompt = "You are a test policy."

    def reset(self, *, seed=None, options=None):
        self.task = options["task"]
        self.shares: list[float] = []
        self.tokens = 0
        return ({"role": "user", "tool": "", "content": self.task.prompt, "is_error": 0},
                {"system_prompt": self.system_prompt})

    def step(self, action):
        text = action.get("text", "") if isinstance(action, dict) else str(action)
        self.tokens += int(action.get("output_tokens", 0)) if isinstance(action, dict) else 0
        self.shares.append(sum(c.isdigit() for c in text) / max(len(text), 1))
        finished = isinstance(action, dict) and action.get("tool") == "finish"
        done = finished or len(self.shares) >= self.task.limits.max_steps
        obs = {"role": "tool", "tool": "", "content": f"ok {len(self.shares)}", "is_error": 0}
        info = {}
        if done:
            share = sum(self.shares) / len(self.shares)
            info = {"pass_fraction": share, "resolved": share > 0.5, "termination": "finish",
                    "reward_components": {"steps": len(self.shares), "tool_errors": 0,
                                          "output_tokens": self.tokens}}
        return obs, 0.0, done, False, info

    def close(self):
        pass


class GatedDigitsEnv(DigitsEnv):
    """A DigitsEnv whose `reset` waits for a shared lock on the file `gate`: while a test holds
    an exclusive lock on it, every episode stays in flight (no sleeps, no timing)."""

    def __init__(self, gate: str):
        self.gate = gate

    def reset(self, *, seed=None, options=None):
        with open(self.gate) as f:
            fcntl.flock(f, fcntl.LOCK_SH)
        return super().reset(seed=seed, options=options)


def digits_source(tasks_cfg):
    """A `tasks.suite = "python:tests.rl.toy_envs:digits_source"` task source."""
    del tasks_cfg
    return toy_tasks(8, max_steps=1), DigitsEnv
