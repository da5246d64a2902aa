"""Feature tasks: functions the hidden tests exercise are missing and must be written.

- easy: one function nothing else calls;
- medium: one function other functions call (they fail until it exists);
- hard: two functions, in different modules.

The prompt describes the functions loosely (L0 names them, L1 adds a paraphrase of the
docstring, L2 the signature, docstring and an example); the reference fix restores them.
"""
from __future__ import annotations

from cursorbench.mini import draft, prompts
from cursorbench.mini.draft import Context, NotApplicable, TaskDraft
from cursorbench.mini.project import Function, Project
from cursorbench.mini.trajectory import TrajectoryBuilder


def make(ctx: Context) -> TaskDraft:
    project, rng = ctx.project, ctx.rng
    targets = _pick(ctx)
    broken = dict(project.files)
    inserts = []   # (function, removed lines, where they were), one per module
    for function in targets:
        broken[function.path], block, at = _cut(broken[function.path], function)
        inserts.append((function, block, at))

    wanted = []
    for function in targets:
        index = min(range(len(project.cases[function.name])),
                    key=lambda j: len(repr(project.cases[function.name][j])))
        wanted.append((function.name, function.path, function.signature, function.doc,
                       project.cases[function.name][index],
                       project.expected[function.name][index][1]))
    prompt = prompts.feature(ctx.prompt_level, rng, project.template.subsystem, wanted)

    outcomes = draft.all_outcomes(project, broken, ctx.evaluator)
    repo = {**broken, **draft.visible_tests(project, outcomes)}
    solved = {**repo, **project.files}
    exercised = sorted({f.name for f in targets}
                       | {c for f in targets for c in project.callers(f.name)
                          if c in project.cases})
    hidden = draft.hidden_test_file(project, exercised,
                                    "Hidden tests: the behaviour the new functions provide.")
    trajectory = _oracle(project, prompt, repo, inserts)
    facts = {"functions": [f.name for f in targets]}
    return TaskDraft(kind="feature", category="feature", difficulty=ctx.difficulty,
                     prompt_level=ctx.prompt_level, prompt=prompt, repo=repo, solved=solved,
                     hidden=hidden, answer=None, trajectory=trajectory, facts=facts)


def _pick(ctx: Context) -> list[Function]:
    project, rng = ctx.project, ctx.rng
    tested = [f for f in project.functions.values() if f.name in project.cases]
    if ctx.difficulty == "easy":
        pool = [f for f in tested if not project.callers(f.name)]
    elif ctx.difficulty == "medium":
        pool = [f for f in tested if project.callers(f.name)]
    else:
        paths = sorted({f.path for f in tested})
        if len(paths) < 2:
            raise NotApplicable("a hard feature needs functions in two modules")
        first, second = rng.sample(paths, 2)
        return [rng.choice([f for f in tested if f.path == path]) for path in (first, second)]
    if not pool:
        raise NotApplicable(f"no function fits a {ctx.difficulty} feature")
    return [rng.choice(pool)]


def _cut(text: str, function: Function) -> tuple[str, list[str], int]:
    """The text without the function, the removed lines (the function and the blank lines
    after it, or before it when it is the last thing in the file) and the 0-based line where
    they were."""
    lines = text.split("\n")
    start, end = function.start - 1, function.end   # [start, end) in 0-based lines
    after = end
    while after < len(lines) and not lines[after].strip():
        after += 1
    if after < len(lines):
        block_range = (start, after)
    else:
        before = start
        while before > 0 and not lines[before - 1].strip():
            before -= 1
        block_range = (before, end)
    block = lines[block_range[0]:block_range[1]]
    return "\n".join(lines[:block_range[0]] + lines[block_range[1]:]), block, block_range[0]


def _oracle(project: Project, prompt: str, repo: dict[str, str],
            inserts: list[tuple[Function, list[str], int]]) -> TrajectoryBuilder:
    builder = TrajectoryBuilder(prompt, repo)
    builder.list_dir("Let me look at the project layout first.")
    read: set[str] = set()
    for function, _, _ in inserts:
        if function.path not in read:
            builder.read_file(f"`{function.name}` belongs in `{function.path}`; let me read "
                              "it.", function.path)
            read.add(function.path)
        for caller in sorted(project.callers(function.name)):
            path = project.functions[caller].path
            if path not in read:
                builder.read_file(f"`{caller}` uses `{function.name}`; let me see how in "
                                  f"`{path}`.", path)
                read.add(path)
    for function, block, at in inserts:
        text = builder.files[function.path]
        lines = text.split("\n")
        block_text = "\n".join(block)
        # Insert before the line that followed the removed block or, when the function was
        # the last thing in the file, after the text before it.
        if at < len(lines) and lines[at].strip():
            first, last = draft.unique_block(text, at, at)
            old = "\n".join(lines[first:last + 1])
            new = block_text + "\n" + old
        else:
            first, last = draft.unique_block(text, at - 1, at - 1, grow="up")
            old = "\n".join(lines[first:last + 1])
            new = old + "\n" + block_text
        builder.edit(f"`{function.name}` is missing; I'll add it "
                     f"({' '.join(function.doc.split()).rstrip('.').lower()}).",
                     function.path, old, new, note=f"added `{function.name}`")
    builder.run_tests("Let me run the tests.")
    added = " and ".join(f"`{f.signature}` to {f.path}" for f, _, _ in inserts)
    builder.finish("The new code is in and the tests pass.", f"Added {added}.")
    return builder

