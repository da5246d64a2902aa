"""CodingEnv: the gymnasium environment of the RL stage, one coding task per episode.

    env = gymnasium.make("c2jax/Coding-v0", task="path/to/task_or_suite")
    obs, info = env.reset(seed=0)            # obs["content"] is the task prompt
    obs, reward, terminated, truncated, info = env.step(
        {"tool": "read_file", "args": {"path": "calc.py"}})

Actions are tool calls (a dict, or raw model text in the `tool_format` syntax). A malformed
action or a failing tool gives an error observation (`is_error=1`) and is counted, never an
exception. The episode terminates on `finish` and is truncated by the task's step, wall-clock
or output budget; either way it is graded (`grading.py`) and the reward arrives with the last
step: 1.0 if resolved (or the pass fraction, with reward="pass_fraction").
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium

from environments import diffs, grading, spaces, tool_format
from environments.sandbox import PythonRuntime, SandboxConfig, open_sandbox
from environments.task import Task, load_tasks
from environments.tools import (DEFAULT_TOOLS, InfraError, Tool, ToolContext, ToolResult,
                                call_tool, clip_text, system_prompt)
from environments.workspace import Workspace, copy_tree, prepare_baseline

REWARD_MODES = ("resolved", "pass_fraction")


@dataclasses.dataclass
class _Episode:
    """Mutable state of the running episode."""
    task: Task
    workspace: Workspace
    baseline: Path
    started: float
    steps: int = 0
    tool_errors: int = 0
    output_chars: int = 0
    output_tokens: int | None = None
    infra_errors: list[str] = dataclasses.field(default_factory=list)
    done: bool = False


class CodingEnv(gymnasium.Env):
    """A repository, a prompt and tools; reward from hidden tests at the end of the episode.

    Args:
      task: a Task, a task directory or a suite directory; reset samples from a suite with the
        env's seeded RNG. May be left out if every reset passes options={"task": ...}.
      sandbox: "bwrap" (default), "none" (unsandboxed, warned, trusted debugging only) or a
        SandboxConfig.
      tools: the tool set (`tools.DEFAULT_TOOLS` plus your own).
      reward: "resolved" (1.0 or 0.0) or "pass_fraction" (fraction of hidden tests passed).
      workdir: where workspaces live (a fresh temporary directory under it). Default:
        /dev/shm when it exists (RAM-backed, so a reset's thousands of file operations are
        cheap; budget RAM for repo size x environments), else $TMPDIR.
    """

    metadata = {"render_modes": []}

    def __init__(self, task: Task | str | os.PathLike | None = None, *,
                 sandbox: str | SandboxConfig = "bwrap", tools: Sequence[Tool] = DEFAULT_TOOLS,
                 reward: str = "resolved", workdir: str | None = None):
        if reward not in REWARD_MODES:
            raise ValueError(f"reward must be one of {REWARD_MODES}, got {reward!r}")
        names = [t.name for t in tools]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique, got {names}")
        self._tasks = load_tasks(task) if task is not None else []
        self.sandbox_config = sandbox if isinstance(sandbox, SandboxConfig) else SandboxConfig(
            mode=sandbox)
        self.tools = {t.name: t for t in tools}
        self.reward_mode = reward
        self.action_space = spaces.AgentAction()
        self.observation_space = spaces.observation_space()
        self._workdir = workdir if workdir is not None else _default_workdir()
        self._root: Path | None = None
        self._runner = None
        self._baselines: dict[tuple[str, str], Path] = {}
        self._episode: _Episode | None = None
        self._release: weakref.finalize | None = None

    @property
    def task(self) -> Task | None:
        """The task of the current (or last) episode."""
        return self._episode.task if self._episode else None

    # ---- gymnasium API ---------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        task = self._pick_task((options or {}).get("task"))
        runner = self._ensure_runner()
        runner.use_python(PythonRuntime.from_venv(task.python) if task.python else None)
        baseline = self._baseline(task)
        ws_root, grader_dir = self._root / "ws", self._root / "grader"
        for path in (ws_root, grader_dir):
            if os.path.lexists(path):
                shutil.rmtree(path)
        copy_tree(baseline, ws_root, uid=runner.uid)
        os.mkdir(grader_dir, 0o700)
        os.chown(grader_dir, runner.uid, runner.uid)
        self._episode = _Episode(task=task, workspace=Workspace(ws_root, runner.uid),
                                 baseline=baseline, started=time.monotonic())
        obs = {"role": "user", "tool": "", "content": task.prompt, "is_error": 0}
        info = {
            "task_id": task.id, "category": task.category, "difficulty": task.difficulty,
            "limits": dataclasses.asdict(task.limits),
            "tool_schemas": [t.schema() for t in self.tools.values()],
            "system_prompt": system_prompt(list(self.tools.values())),
        }
        return obs, info

    def step(self, action: Any):
        ep = self._episode
        if ep is None or ep.done:
            raise RuntimeError("call reset() before step(): " + (
                "no episode has started" if ep is None else "the episode is over"))
        ep.steps += 1
        name, args, tokens, problem = _parse_action(action)
        if tokens is not None:
            ep.output_tokens = (ep.output_tokens or 0) + tokens
        if problem is not None:
            result = ToolResult(f"error: {problem}", is_error=True)
        else:
            ctx = ToolContext(workspace=ep.workspace, runner=self._runner, task=ep.task)
            try:
                result = call_tool(self.tools, ctx, name, args)
            except InfraError as e:
                ep.infra_errors.append(str(e))
                result = ToolResult(f"error: {e}", is_error=True)
        if result.is_error:
            ep.tool_errors += 1
        content = clip_text(result.text, ep.task.limits.max_observation_chars)
        ep.output_chars += len(content)
        terminated = result.finished
        reason = "finish" if terminated else self._truncation_reason(ep)
        truncated = reason is not None and not terminated
        obs = {"role": "tool", "tool": (name or "")[:256], "content": content,
               "is_error": int(result.is_error)}
        info: dict[str, Any] = {"steps": ep.steps, "tool_errors": ep.tool_errors}
        reward = 0.0
        if terminated or truncated:
            ep.done = True
            reward, final = self._grade(ep, reason, result.summary)
            info.update(final)
        return obs, reward, terminated, truncated, info

    def close(self):
        """Kills anything left running, returns the sandbox uid and deletes the workspaces."""
        if self._release is not None:
            self._release()
        self._release = self._runner = self._root = self._episode = None
        self._baselines.clear()

    # ---- internals -------------------------------------------------------------------------

    def _pick_task(self, requested: Task | str | os.PathLike | None) -> Task:
        candidates = load_tasks(requested) if requested is not None else self._tasks
        if not candidates:
            raise ValueError("no task: pass task= when making the environment or "
                             "options={'task': ...} to reset()")
        return candidates[int(self.np_random.integers(len(candidates)))]

    def _ensure_runner(self):
        if self._runner is None:
            self._root = Path(tempfile.mkdtemp(prefix="c2jax-env-", dir=self._workdir))
            os.mkdir(self._root / "baselines", 0o700)
            self._runner = open_sandbox(self.sandbox_config)
            # Workspaces may sit in RAM (/dev/shm) and hold a uid lease: an env that is
            # garbage-collected or alive at exit without close() still gives both back.
            self._release = weakref.finalize(self, _release_resources, self._runner, self._root)
        return self._runner

    def _baseline(self, task: Task) -> Path:
        """The task's prepared starting tree (setup run, fresh git), built once per env."""
        key = (task.id, str(task.repo_dir))
        if key not in self._baselines:
            dest = self._root / "baselines" / f"{len(self._baselines)}-{task.id}"
            try:
                prepare_baseline(task.repo_dir, task.setup, self._runner, dest,
                                 timeout_s=task.limits.test_timeout_s, task_id=task.id)
            except BaseException:
                shutil.rmtree(dest, ignore_errors=True)
                raise
            self._baselines[key] = dest
        return self._baselines[key]

    @staticmethod
    def _truncation_reason(ep: _Episode) -> str | None:
        limits = ep.task.limits
        if ep.steps >= limits.max_steps:
            return "max_steps"
        if time.monotonic() - ep.started >= limits.max_wall_s:
            return "max_wall_s"
        if ep.output_chars >= limits.max_output_chars:
            return "max_output_chars"
        return None

    def _grade(self, ep: _Episode, reason: str, summary: str) -> tuple[float, dict[str, Any]]:
        try:
            # The diff is taken before grading puts hidden tests into the workspace.
            diff = diffs.tree_diff(str(ep.baseline), str(ep.workspace.root))
            result = grading.grade(ep.task, ep.workspace, ep.baseline, self._runner,
                                   self._root / "grader", summary)
        except OSError as e:  # the host side broke (workspace gone, disk full): not the agent
            diff = ""
            result = grading.Grade.infrastructure_failure(f"grading failed on the host: {e}")
        added, removed = diffs.count_changed_lines(diff)
        self._runner.kill_processes()  # nothing of the episode may outlive it
        infra = result.infra_failure or bool(ep.infra_errors)
        notes = list(result.notes) + [f"infrastructure failure during the episode: {e}"
                                      for e in ep.infra_errors]
        reward = float(result.resolved) if self.reward_mode == "resolved" else result.pass_fraction
        return reward, {
            "termination": reason,
            "resolved": result.resolved,
            "pass_fraction": result.pass_fraction,
            "tests_status": dict(result.tests_status),
            "test_seconds": dict(result.test_seconds),
            "reward_components": {
                "steps": ep.steps, "tool_errors": ep.tool_errors,
                "output_tokens": ep.output_tokens, "output_chars": ep.output_chars,
                "diff_lines": added + removed, "diff_files": diffs.changed_files(diff),
                "tests_passed": result.tests_passed, "tests_total": result.tests_total,
                "answer_matched": result.answer_matched,
                "wall_s": time.monotonic() - ep.started,
            },
            "diff": diff,
            "infra_failure": infra,
            "grading_notes": notes,
            "test_output": result.test_output,
            "summary": summary,
        }


def _release_resources(runner, root: Path) -> None:
    runner.close()
    shutil.rmtree(root, ignore_errors=True)


def _default_workdir() -> str | None:
    shm = "/dev/shm"
    return shm if os.path.isdir(shm) and os.access(shm, os.W_OK) else None


def _parse_action(action: Any) -> tuple[str | None, dict, int | None, str | None]:
    """(tool, args, output_tokens, problem): problem is a message for the agent, or None."""
    tokens = None
    if isinstance(action, dict):
        tokens = action.get("output_tokens")
        if tokens is not None and (not isinstance(tokens, int) or isinstance(tokens, bool)
                                   or tokens < 0):
            return None, {}, None, "output_tokens must be a non-negative integer"
        keys = set(action) - {"output_tokens"}
        if keys == {"text"}:
            action = action["text"]
        elif keys in ({"tool", "args"}, {"tool"}):
            name, args = action["tool"], action.get("args", {})
            if not isinstance(name, str) or not isinstance(args, dict):
                return None, {}, tokens, ("a tool call needs a string 'tool' and an object "
                                          "'args'")
            return name, args, tokens, None
        else:
            return None, {}, tokens, (f"an action dict has keys 'tool' and 'args' (or 'text'), "
                                      f"got {sorted(keys)}")
    if not isinstance(action, str):
        return None, {}, tokens, (f"an action is a dict {{'tool': ..., 'args': {{...}}}} or model "
                                  f"text with a tool call, got {type(action).__name__}")
    try:
        name, args = tool_format.parse_tool_call(action)
    except tool_format.ToolCallError as e:
        return None, {}, tokens, str(e)
    return name, args, tokens, None
