"""What every task kind produces (`TaskDraft`) and the pieces the kinds share.

A kind turns a `Project` into a draft: the broken starting repo, the repo after the reference
fix, hidden tests (or an answer), the prompt and the oracle trajectory. `generate.py` writes
drafts to disk in the environment's task format.
"""
from __future__ import annotations

import dataclasses
import random
from collections.abc import Iterable, Mapping
from typing import Any

from cursorbench.mini import execution, tests_writer
from cursorbench.mini.project import Project
from cursorbench.mini.trajectory import TrajectoryBuilder

DIFFICULTIES = ("easy", "medium", "hard")
#: Visible test cases kept per function (the hidden tests have them all).
VISIBLE_CASES_PER_FUNCTION = 3
HIDDEN_TESTS_DIR = "hidden_tests"


class NotApplicable(Exception):
    """This project cannot host the requested kind at this difficulty (e.g. no function that
    other modules use, for a rename): the generator draws another project."""


@dataclasses.dataclass
class TaskDraft:
    """One task before it is written.

    repo: the starting workspace; solved: the workspace after the reference fix (equal to
    repo for understanding tasks); hidden: files under hidden/ (paths relative to it).
    facts: how the task was made (mutations, functions); template: the project's template.
    """
    kind: str
    category: str
    difficulty: str
    prompt_level: str
    prompt: str
    repo: dict[str, str]
    solved: dict[str, str]
    hidden: dict[str, str]
    answer: str | None
    trajectory: TrajectoryBuilder
    facts: dict[str, Any]
    template: str = ""


@dataclasses.dataclass
class Context:
    """What a kind gets: the project, the task's RNG, the requested difficulty and prompt
    level, and the evaluator for variants of the code."""
    project: Project
    rng: random.Random
    difficulty: str
    prompt_level: str
    evaluator: execution.IsolatedEvaluator


def visible_tests(project: Project, outcomes: Mapping[str, tuple] | None = None,
                  exclude: Iterable[str] = ()) -> dict[str, str]:
    """`tests/test_<module>.py` files with cases that pass on the broken code (whose
    `outcomes` are given; None: the correct code) and on the correct code: the visible suite
    passes before and after the fix, as in a repo whose tests simply do not cover the bug."""
    skip = set(exclude)
    outcomes = project.expected if outcomes is None else outcomes
    by_module: dict[str, list[tests_writer.Case]] = {}
    for name in project.cases:
        if name in skip:
            continue
        function = project.functions[name]
        kept = [tests_writer.Case(function.module, name, args, expected[1])
                for args, expected, actual in zip(project.cases[name], project.expected[name],
                                                   outcomes[name])
                if execution.same_outcome(expected, actual)]
        by_module.setdefault(function.path, []).extend(kept[:VISIBLE_CASES_PER_FUNCTION])
    files = {}
    for path, cases in by_module.items():
        if cases:
            stem = path.rsplit("/", 1)[-1][:-3]
            files[f"tests/test_{stem}.py"] = tests_writer.render(
                f"Tests of {path}.", cases)
    return files


def hidden_test_file(project: Project, functions: Iterable[str], doc: str,
                     names: Mapping[str, str] | None = None,
                     extra_tests: tuple[str, ...] = ()) -> dict[str, str]:
    """The hidden test module: every case of `functions`, called by `names[f]` (default f)."""
    names = names or {}
    cases = [tests_writer.Case(project.functions[f].module, names.get(f, f), args, expected[1])
             for f in functions for args, expected in zip(project.cases[f], project.expected[f])]
    return {f"{HIDDEN_TESTS_DIR}/test_hidden.py": tests_writer.render(doc, cases, extra_tests)}


def changed_outcomes(project: Project, outcomes: Mapping[str, tuple]) -> dict[str, list[int]]:
    """Function -> indices of its cases whose outcome differs from the correct code."""
    changed = {}
    for name, actual in outcomes.items():
        bad = [i for i, (e, a) in enumerate(zip(project.expected[name], actual))
               if not execution.same_outcome(e, a)]
        if bad:
            changed[name] = bad
    return changed


def all_outcomes(project: Project, files: Mapping[str, str], evaluator,
                 changed_functions: Iterable[str] | None = None) -> dict[str, tuple]:
    """Outcomes of every tested function's cases on a variant of the package.

    With `changed_functions` (functions whose code the variant edits, and nothing else), only
    they and their callers run: every other function executes unchanged code, so its
    outcomes are the correct code's.
    """
    names = list(project.cases)
    if changed_functions is not None:
        affected = set(changed_functions)
        for name in list(affected):
            affected |= project.callers(name)
        names = [n for n in names if n in affected]
    outcomes = dict(project.expected)
    outcomes.update(evaluator.evaluate(
        files, {n: (project.functions[n].module, n) for n in names},
        {n: project.cases[n] for n in names}))
    return outcomes


def call_targets(project: Project, names: Mapping[str, str]) -> dict[str, tuple[str, str]]:
    """Function -> (module, name to call) for every tested function, under `names` renames."""
    return {n: (project.functions[n].module, names.get(n, n)) for n in project.cases}


def unique_block(text: str, first: int, last: int, grow: str = "down") -> tuple[int, int]:
    """Grows the 0-based line range [first, last] of `text` until its text occurs once.

    grow="down" adds following lines first (then preceding ones at the end of the file);
    grow="up" adds only preceding lines, so the block keeps ending at `last`.
    """
    lines = text.split("\n")
    while text.count("\n".join(lines[first:last + 1])) > 1:
        if grow == "down" and last + 1 < len(lines):
            last += 1
        elif first > 0:
            first -= 1
        else:
            break
    return first, last
