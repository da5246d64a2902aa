"""Scripted agents for tests and demos, and the interface every agent implements.

An agent sees what a policy sees: `begin` once per episode with the task, the first observation
and the reset info; then `act` with each observation until the episode ends.
"""
from __future__ import annotations

from typing import Any, Protocol

from environments.task import Task


class Agent(Protocol):
    def begin(self, task: Task, observation: dict[str, Any], info: dict[str, Any]) -> None: ...

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, Any] | str: ...


class NullAgent:
    """Does nothing and finishes at once: the floor every task must score 0 on."""

    def begin(self, task: Task, observation: dict[str, Any], info: dict[str, Any]) -> None:
        pass

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        return {"tool": "finish", "args": {"summary": ""}}


class OracleAgent:
    """Solves a task with its reference solution through the tools, as an agent would.

    Applies `reference.diff` with apply_patch, runs the visible tests (unless `run_tests` is
    False: a validator that grades right after the fix has no use for them), and finishes with
    the task's answer (for understanding tasks) as the summary. A task it cannot solve (no diff
    and no answer) is a broken task, so `begin` raises.
    """

    def __init__(self, run_tests: bool = True):
        self._plan: list[dict[str, Any]] = []
        self._run_tests = run_tests

    def begin(self, task: Task, observation: dict[str, Any], info: dict[str, Any]) -> None:
        if task.reference_diff is None and task.answer is None:
            raise ValueError(f"task {task.id} has neither reference.diff nor an answer: the "
                             "oracle has nothing to submit")
        self._plan = []
        if task.reference_diff:
            self._plan.append({"tool": "apply_patch", "args": {"diff": task.reference_diff}})
            if self._run_tests:
                self._plan.append({"tool": "run_tests", "args": {}})
        self._plan.append({"tool": "finish", "args": {
            "summary": task.answer if task.answer is not None else "Applied the reference fix."}})

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        if not self._plan:
            raise RuntimeError("OracleAgent.act called after it finished; call begin() first")
        return self._plan.pop(0)
