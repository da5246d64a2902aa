"""The on-disk task format and its validation.

A task is a directory::

    TASK_DIR/
      task.json       id, prompt, category, difficulty, setup, test_command, hidden_tests,
                      answer, limits (see `load_task`; unknown top-level fields are kept in
                      `Task.extra` so the format can grow)
      repo/           the starting workspace
      hidden/         files the agent never sees; copied into the workspace only to grade
      reference.diff  optional: the reference solution, a unified diff against repo/

A directory whose subdirectories are task directories is a suite (`load_suite`).
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any

CATEGORIES = ("debug", "feature", "refactor", "understanding")
#: Longest prompt accepted: it is the first observation, and observations have a bounded space.
MAX_PROMPT_CHARS = 200_000
_TASK_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_DEFAULT_VISIBLE_TEST_COMMAND = "python -m pytest -q -p no:cacheprovider"


class TaskError(ValueError):
    """A task (or suite) is invalid; `problems` lists every problem found, not just the first."""

    def __init__(self, where: str, problems: list[str]):
        self.where = where
        self.problems = problems
        lines = "\n".join(f"  - {p}" for p in problems)
        super().__init__(f"invalid task {where}:\n{lines}")


@dataclasses.dataclass(frozen=True)
class TaskLimits:
    """Episode budgets. Hitting a step, wall or output limit truncates the episode (still graded).

    max_output_chars: total characters of tool output the agent may receive in an episode.
    max_observation_chars: one observation; longer outputs keep their head and tail.
    test_timeout_s: the grading test run.
    """
    max_steps: int = 50
    max_wall_s: float = 1800.0
    tool_timeout_s: float = 120.0
    max_output_chars: int = 500_000
    max_observation_chars: int = 10_000
    test_timeout_s: float = 600.0


_INT_LIMITS = {"max_steps", "max_output_chars", "max_observation_chars"}


@dataclasses.dataclass(frozen=True)
class Task:
    """A validated task. Paths are absolute; `hidden_tests` are relative to `hidden_dir`.

    test_command: run in the workspace at /workspace to grade (None for answer-only tasks).
    visible_test_command: what the `run_tests` tool runs (the visible tests only).
    answer: for understanding tasks, an exact string the finish summary must contain.
    python: a virtual environment whose interpreter the task's commands get (bound read-only
      into the sandbox, e.g. a package's own test dependencies); None = the environment's.
    """
    id: str
    prompt: str
    category: str
    difficulty: str | float
    repo_dir: Path
    hidden_dir: Path | None
    setup: tuple[str, ...] = ()
    test_command: str | None = None
    visible_test_command: str = _DEFAULT_VISIBLE_TEST_COMMAND
    hidden_tests: tuple[str, ...] = ()
    answer: str | None = None
    limits: TaskLimits = TaskLimits()
    reference_diff: str | None = None
    path: Path | None = None
    extra: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    python: Path | None = None


def load_task(path: str | Path) -> Task:
    """Reads and validates the task directory at `path`; raises TaskError listing all problems."""
    root = Path(path).resolve()
    problems: list[str] = []
    if not root.is_dir():
        raise TaskError(str(root), ["not a directory"])
    spec_path = root / "task.json"
    try:
        spec = json.loads(spec_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TaskError(str(root), ["task.json is missing"]) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise TaskError(str(root), [f"task.json is not valid JSON: {e}"]) from None
    if not isinstance(spec, dict):
        raise TaskError(str(root), ["task.json must hold a JSON object"])

    def field(name: str, kinds: tuple[type, ...], required: bool, what: str) -> Any:
        if name not in spec:
            if required:
                problems.append(f"missing field {name!r} ({what})")
            return None
        value = spec[name]
        if not isinstance(value, kinds) or isinstance(value, bool):
            problems.append(f"field {name!r} must be {what}, got {type(value).__name__}")
            return None
        return value

    task_id = field("id", (str,), True, "a string")
    if task_id is not None and not _TASK_ID.match(task_id):
        problems.append(f"id {task_id!r} may only use letters, digits, '.', '_' and '-' "
                        "(at most 128, starting with a letter or digit)")
    prompt = field("prompt", (str,), True, "a non-empty string")
    if prompt is not None and not prompt.strip():
        problems.append("prompt is empty")
    if prompt is not None and len(prompt) > MAX_PROMPT_CHARS:
        problems.append(f"prompt has {len(prompt)} characters; the limit is {MAX_PROMPT_CHARS}")
    category = field("category", (str,), True, f"one of {', '.join(CATEGORIES)}")
    if category is not None and category not in CATEGORIES:
        problems.append(f"category {category!r} is not one of {', '.join(CATEGORIES)}")
    difficulty = field("difficulty", (str, int, float), True, "a string or a number")
    setup = _string_list(spec, "setup", problems)
    answer = field("answer", (str,), False, "a string")
    test_command = field("test_command", (str,), answer is None,
                         "a shell command, required unless the task has an answer")
    if test_command is not None and not test_command.strip():
        problems.append("test_command is empty")
    visible = field("visible_test_command", (str,), False, "a shell command")
    hidden_tests = _string_list(spec, "hidden_tests", problems)
    limits = _limits(spec.get("limits", {}), problems)
    python = field("python", (str,), False, "the path of a virtual environment")
    if python is not None and not (Path(python).is_absolute()
                                   and (Path(python) / "pyvenv.cfg").is_file()):
        problems.append(f"python {python!r} is not the absolute path of a virtual environment "
                        "(a directory with pyvenv.cfg): build it first")

    repo_dir = root / "repo"
    if not repo_dir.is_dir():
        problems.append("repo/ is missing: it holds the starting workspace")
    hidden_dir = root / "hidden"
    for rel in hidden_tests:
        if not _is_plain_relative(rel):
            problems.append(f"hidden_tests entry {rel!r} must be a relative path without '..'")
        elif not (hidden_dir / rel).exists():
            problems.append(f"hidden_tests entry {rel!r} does not exist under hidden/")
    if hidden_tests and test_command is None:
        problems.append("hidden_tests are given but there is no test_command to run them")
    reference_diff = None
    diff_path = root / "reference.diff"
    if diff_path.exists():
        try:
            reference_diff = diff_path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            problems.append("reference.diff is not UTF-8 text")

    if problems:
        raise TaskError(str(root), problems)
    known = {"id", "prompt", "category", "difficulty", "setup", "test_command",
             "visible_test_command", "hidden_tests", "answer", "limits", "python"}
    return Task(
        id=task_id, prompt=prompt, category=category, difficulty=difficulty,
        repo_dir=repo_dir, hidden_dir=hidden_dir if hidden_dir.is_dir() else None,
        setup=tuple(setup), test_command=test_command,
        visible_test_command=visible or _DEFAULT_VISIBLE_TEST_COMMAND,
        hidden_tests=tuple(hidden_tests), answer=answer, limits=limits,
        reference_diff=reference_diff, path=root,
        extra={k: v for k, v in spec.items() if k not in known},
        python=Path(python) if python is not None else None)


def load_suite(path: str | Path) -> list[Task]:
    """Loads every task directory under `path` (sorted by id); names every invalid task."""
    root = Path(path).resolve()
    if not root.is_dir():
        raise TaskError(str(root), ["suite is not a directory"])
    tasks, problems = [], []
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        try:
            tasks.append(load_task(child))
        except TaskError as e:
            problems += [f"{child.name}: {p}" for p in e.problems]
    if not tasks and not problems:
        problems.append("no task directories (each needs a task.json)")
    seen: dict[str, str] = {}
    for task in tasks:
        if task.id in seen:
            problems.append(f"task id {task.id!r} is used by both {seen[task.id]} and "
                            f"{task.path.name}")
        seen[task.id] = task.path.name
    if problems:
        raise TaskError(str(root), problems)
    return sorted(tasks, key=lambda t: t.id)


def load_tasks(source: str | Path | Task) -> list[Task]:
    """A Task, a task directory or a suite directory, as a list of tasks."""
    if isinstance(source, Task):
        return [source]
    if (Path(source) / "task.json").exists():
        return [load_task(source)]
    return load_suite(source)


def _string_list(spec: dict, name: str, problems: list[str]) -> list[str]:
    value = spec.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        problems.append(f"field {name!r} must be a list of strings")
        return []
    return value


def _limits(value: Any, problems: list[str]) -> TaskLimits:
    if not isinstance(value, dict):
        problems.append("field 'limits' must be an object")
        return TaskLimits()
    names = {f.name for f in dataclasses.fields(TaskLimits)}
    good = {}
    for key, v in value.items():
        if key not in names:
            problems.append(f"unknown limit {key!r}; known limits: {', '.join(sorted(names))}")
        elif isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
            problems.append(f"limit {key!r} must be a positive number, got {v!r}")
        elif key in _INT_LIMITS and not isinstance(v, int):
            problems.append(f"limit {key!r} must be a whole number, got {v!r}")
        else:
            good[key] = v
    return TaskLimits(**good)


def _is_plain_relative(path: str) -> bool:
    pure = PurePosixPath(path)
    return bool(path) and not pure.is_absolute() and ".." not in pure.parts
