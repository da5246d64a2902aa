"""Refactor tasks: rename a function that other modules use, everywhere.

The hidden tests import the new name, exercise the callers in other modules (which break
until their imports follow) and check that the old name is gone.

- easy: one rename with at most three uses;
- medium: one rename with more uses;
- hard: two renames.
"""
from __future__ import annotations

import re

from cursorbench.mini import draft, prompts
from cursorbench.mini.draft import Context, NotApplicable, TaskDraft
from cursorbench.mini.project import Function, Project
from cursorbench.mini.trajectory import TrajectoryBuilder

_EASY_MAX_USES = 3


def make(ctx: Context) -> TaskDraft:
    project, rng = ctx.project, ctx.rng
    candidates = _candidates(project)
    if ctx.difficulty == "hard":
        if len(candidates) < 2:
            raise NotApplicable("a hard rename needs two functions used across modules")
        chosen = rng.sample(candidates, 2)
    else:
        fits = [c for c in candidates
                if (c[2] <= _EASY_MAX_USES) == (ctx.difficulty == "easy")]
        if not fits:
            raise NotApplicable(f"no rename fits a {ctx.difficulty} refactor")
        chosen = [rng.choice(fits)]
    renames = [(f, new) for f, new, _ in chosen]

    repo = {**project.files,
            **draft.visible_tests(project, exclude=[f.name for f, _ in renames])}
    for function, new in renames:
        for text in repo.values():
            if text.count(function.name) != _count_word(text, function.name) or new in text:
                raise NotApplicable(f"renaming {function.name} is not a whole-word rename")
    solved = dict(repo)
    for function, new in renames:
        solved = {path: re.sub(rf"\b{function.name}\b", new, text)
                  for path, text in solved.items()}

    # The renamed package must behave as before under the new names (a rename that also
    # hit a module of the same name would not import).
    names = {f.name: new for f, new in renames}
    outcomes = ctx.evaluator.evaluate(solved, draft.call_targets(project, names),
                                      project.cases)
    if draft.changed_outcomes(project, outcomes):
        raise NotApplicable("the renamed package does not behave like the original")

    prompt = prompts.refactor(ctx.prompt_level, rng, project.template.subsystem,
                              [(f.name, new, f.path) for f, new in renames])
    exercised = sorted({f.name for f, _ in renames}
                       | {c for f, _ in renames for c in project.callers(f.name)
                          if c in project.cases})
    gone = tuple(f"def test_{f.name}_is_gone():\n    import {f.module}\n\n"
                 f"    assert not hasattr({f.module}, {f.name!r})\n" for f, _ in renames)
    hidden = draft.hidden_test_file(project, exercised, "Hidden tests: the renamed API.",
                                    names=names, extra_tests=gone)
    trajectory = _oracle(prompt, repo, renames)
    facts = {"renames": {f.name: new for f, new in renames}}
    return TaskDraft(kind="refactor", category="refactor", difficulty=ctx.difficulty,
                     prompt_level=ctx.prompt_level, prompt=prompt, repo=repo, solved=solved,
                     hidden=hidden, answer=None, trajectory=trajectory, facts=facts)


def _candidates(project: Project) -> list[tuple[Function, str, int]]:
    """(function, new name, uses) for template renames of functions other modules use."""
    found = []
    for old, new in sorted(project.template.renames.items()):
        function = project.functions.get(old)
        modules = {p.rsplit("/", 1)[-1][:-3] for p in project.module_paths()}
        if function is None or old in modules:  # `from .scale import scale`: not a rename
            continue
        others = [p for p in project.module_paths()
                  if p != function.path and _count_word(project.files[p], old)]
        if others:
            uses = sum(_count_word(text, old) for text in project.files.values())
            found.append((function, new, uses))
    return found


def _count_word(text: str, word: str) -> int:
    return len(re.findall(rf"\b{re.escape(word)}\b", text))


def _oracle(prompt: str, repo: dict[str, str],
            renames: list[tuple[Function, str]]) -> TrajectoryBuilder:
    builder = TrajectoryBuilder(prompt, repo)
    builder.list_dir("Let me look at the project layout first.")
    for function, new in renames:
        old = function.name
        builder.grep(f"Let me find every use of `{old}`.", rf"\b{old}\b", rf"\b{old}\b")
        for path in sorted(builder.files):
            count = _count_word(builder.files[path], old)
            if count:
                builder.edit(f"Renaming `{old}` to `{new}` in `{path}`.", path, old, new,
                             note=f"renamed `{old}` to `{new}`", replace_all=count > 1)
    builder.run_tests("Let me run the tests.")
    done = " and ".join(f"`{f.name}` to `{new}`" for f, new in renames)
    builder.finish("Every use is renamed and the tests pass.",
                   f"Renamed {done} everywhere.")
    return builder
