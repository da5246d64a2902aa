"""Generates the mini suite: task directories in the environment's format, from a seed.

    python -m cursorbench.build --suite=mini:test --out=DIR       (or generate_suite(...))

Task i of split S with seed s draws everything (template, kind, difficulty, prompt level,
package name, constants, bug) from an RNG seeded with (S, s, i), so a suite is rebuilt
byte-identically anywhere. Splits use disjoint templates (`templates.SPLITS`) and, because
the split name is part of every task's seed, disjoint seeds.

Each task directory holds what `environments.load_task` reads (task.json, repo/, hidden/,
reference.diff) plus `oracle.json`, the oracle trajectory (see `trajectory.py`).
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import queue
import random
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from environments.diffs import count_changed_lines

from cursorbench.mini import draft, execution, project, templates
from cursorbench.mini.draft import Context, NotApplicable, TaskDraft
from cursorbench.mini.kinds import bugfix, feature, refactor, understanding
from cursorbench.mini.mutations import MUTATION_TYPES
from cursorbench.mini.prompts import PROMPT_LEVELS
from cursorbench.taskdir import PYTEST, unified_diff, write_files

#: The task mix, in proportion to how developers use an agent (the report's mix: debugging,
#: features, refactoring, understanding); task i gets KIND_CYCLE[i % len(KIND_CYCLE)].
KIND_CYCLE = ("bugfix", "feature", "bugfix", "understanding", "refactor",
              "bugfix", "feature", "bugfix", "understanding", "feature")
#: Every mini task's budgets: small projects need few steps.
LIMITS = {"max_steps": 30, "max_wall_s": 600, "tool_timeout_s": 30, "test_timeout_s": 60}
_MAX_ATTEMPTS = 30


class GenerationError(RuntimeError):
    """The generator could not make a task (a bug in a template or a kind)."""


def generator_version() -> str:
    """A hash of the generator's source: caches of suites made by other code are stale."""
    digest = hashlib.sha256()
    root = Path(__file__).parent
    for path in sorted(root.rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def task_seed(split: str, seed: int, index: int) -> int:
    """The RNG seed of one task (the split is part of it: splits never share seeds)."""
    digest = hashlib.sha256(f"mini/{split}/{seed}/{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big")


def task_id(split: str, seed: int, index: int) -> str:
    return f"mini-{split}-{seed}-{index:05d}-{KIND_CYCLE[index % len(KIND_CYCLE)]}"


def generate_suite(out_dir: str | os.PathLike, split: str, n: int, seed: int = 0, *,
                   context_budget: int | None = None, workers: int = 1,
                   progress: Callable[[int], None] | None = None) -> list[Path]:
    """Writes tasks 0..n-1 of `split` under `out_dir`; returns their directories.

    context_budget: characters of conversation after which oracle trajectories insert a
      self-summarisation turn (None: no summaries).
    workers: processes that generate in parallel (tasks are independent; the output is the
      same for any number).
    progress: called with the number of tasks just written (e.g. a tqdm bar's update).
    """
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    templates.split_templates(split)  # fails early, naming the splits, on a bad split
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    version = generator_version()
    job = (out, split, seed, context_budget, version)
    if workers <= 1:
        _generate(job, range(n), progress)
    else:
        _generate_in_processes(job, n, workers, progress)
    (out / "suite.json").write_text(json.dumps(
        {"suite": "mini", "split": split, "n": n, "seed": seed,
         "context_budget": context_budget, "generator": version}, indent=1) + "\n")
    return [out / task_id(split, seed, i) for i in range(n)]


def _generate(job: tuple, indices: range, progress: Callable[[int], None] | None) -> None:
    out, split, seed, context_budget, version = job
    split_templates = templates.split_templates(split)
    with execution.IsolatedEvaluator() as evaluator:
        for index in indices:
            rng = random.Random(task_seed(split, seed, index))
            task = _make_task(rng, split_templates, KIND_CYCLE[index % len(KIND_CYCLE)],
                              evaluator)
            name = task_id(split, seed, index)
            meta = {"suite": "mini", "split": split, "seed": seed, "index": index,
                    "generator": version}
            _write(out / name, name, task, meta, context_budget)
            if progress:
                progress(1)


def _generate_in_processes(job: tuple, n: int, workers: int,
                           progress: Callable[[int], None] | None) -> None:
    """Worker w makes tasks w, w + workers, ...; each reports every task on a queue."""
    context = multiprocessing.get_context("fork")
    messages = context.Queue()
    processes = [context.Process(target=_worker, args=(job, range(w, n, workers), messages),
                                 name=f"c2jax-mini-gen-{w}") for w in range(workers)]
    for process in processes:
        process.start()
    finished, errors = 0, []
    while finished < len(processes):
        try:
            kind, detail = messages.get(timeout=1.0)
        except queue.Empty:
            dead = [p for p in processes if p.exitcode not in (None, 0)]
            if dead:
                errors.append(f"{dead[0].name} died with exit code {dead[0].exitcode}")
                break
            continue
        if kind == "task" and progress:
            progress(1)
        elif kind == "error":
            errors.append(detail)
        finished += kind in ("done", "error")
    for process in processes:
        if errors:
            process.kill()
        process.join()
    if errors:
        raise GenerationError(f"generation failed: {errors[0]}")


def _worker(job: tuple, indices: range, messages) -> None:
    try:
        _generate(job, indices, lambda count: messages.put(("task", count)))
    except Exception:  # reported to the parent, which raises it for the user
        messages.put(("error", traceback.format_exc()))
    else:
        messages.put(("done", None))


def _make_task(rng: random.Random, split_templates: list[templates.Template], kind: str,
               evaluator: execution.IsolatedEvaluator) -> TaskDraft:
    problems = []
    for _ in range(_MAX_ATTEMPTS):
        template = rng.choice(split_templates)
        ctx = Context(project=project.instantiate(template, rng), rng=rng,
                      difficulty=rng.choice(draft.DIFFICULTIES),
                      prompt_level=rng.choice(PROMPT_LEVELS), evaluator=evaluator)
        try:
            if kind == "bugfix":
                task = bugfix.make(ctx, rng.choice(MUTATION_TYPES))
            elif kind == "feature":
                task = feature.make(ctx)
            elif kind == "refactor":
                task = refactor.make(ctx)
            else:
                task = understanding.make(ctx)
        except NotApplicable as e:
            problems.append(str(e))
            continue
        task.template = template.name
        return task
    raise GenerationError(f"no {kind} task after {_MAX_ATTEMPTS} attempts: "
                          f"{'; '.join(sorted(set(problems)))}")


def _write(root: Path, task_id: str, task: TaskDraft, meta: dict[str, Any],
           context_budget: int | None) -> Path:
    final = {path: task.trajectory.files[path] for path in task.repo}
    if final != task.solved:
        wrong = sorted(p for p in task.solved if final.get(p) != task.solved[p])
        raise GenerationError(f"{task_id}: the oracle trajectory does not reproduce the "
                              f"reference solution in {wrong}")
    diff = unified_diff(task.repo, task.solved)
    added, removed = count_changed_lines(diff)
    has_visible = any(p.startswith("tests/") for p in task.repo)
    spec: dict[str, Any] = {
        "id": task_id, "prompt": task.prompt, "category": task.category,
        "difficulty": task.difficulty, "limits": LIMITS,
        "visible_test_command": f"{PYTEST} tests" if has_visible else PYTEST,
        **meta, "kind": task.kind, "template": task.template,
        "prompt_level": task.prompt_level, "reference_lines": added + removed,
        "facts": task.facts,
    }
    if task.answer is not None:
        spec["answer"] = task.answer
    else:
        spec["test_command"] = f"{PYTEST} {draft.HIDDEN_TESTS_DIR}" + (
            " tests" if has_visible else "")
        spec["hidden_tests"] = [draft.HIDDEN_TESTS_DIR]
    write_files(root / "repo", task.repo)
    write_files(root / "hidden", task.hidden)
    if diff:
        (root / "reference.diff").write_text(diff)
    (root / "task.json").write_text(json.dumps(spec, indent=1) + "\n")
    (root / "oracle.json").write_text(json.dumps(
        {"context_budget": context_budget,
         "steps": task.trajectory.steps(context_budget)}, indent=1) + "\n")
    return root
