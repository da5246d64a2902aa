"""Bugfix tasks: one mutation (two when hard) that hidden tests notice.

- easy: the bug is in the function whose output is wrong;
- medium: the wrong output shows in a function that calls the buggy one (the prompt points at
  the caller, the fix is elsewhere);
- hard: two bugs in two functions, each noticed on its own.

A mutation is kept only if some test case of the correct code gives another outcome with it
(evaluated in the isolated child: a slip can loop or eat memory). The hidden tests are every
case of every function whose outcome changed; the visible tests pass on the broken code.
"""
from __future__ import annotations

from cursorbench.mini import draft, mutations, prompts
from cursorbench.mini.draft import Context, NotApplicable, TaskDraft
from cursorbench.mini.execution import EvaluationFailed
from cursorbench.mini.project import Function
from cursorbench.mini.trajectory import TrajectoryBuilder

#: Mutations evaluated per type before trying the next type.
_TRIES_PER_TYPE = 12
_EXPLANATIONS = {
    "operator": "uses the wrong arithmetic operator",
    "comparison": "uses the wrong comparison",
    "constant": "uses the wrong constant",
    "off_by_one": "is off by one",
    "swapped_args": "passes the arguments in the wrong order",
    "wrong_variable": "uses the wrong variable",
}


def make(ctx: Context, mutation_type: str) -> TaskDraft:
    """A bugfix draft whose first bug is of `mutation_type` where the project allows it."""
    project, rng = ctx.project, ctx.rng
    broken = dict(project.files)
    bugs: list[tuple[mutations.Mutation, str]] = []   # (mutation, symptom function)
    for i in range(2 if ctx.difficulty == "hard" else 1):
        used = {m.function for m, _ in bugs}
        mutation, symptom = _find_bug(ctx, mutation_type if i == 0 else None, used)
        broken[mutation.path] = mutations.apply(broken[mutation.path], mutation)
        bugs.append((mutation, symptom))
    outcomes = draft.all_outcomes(project, broken, ctx.evaluator,
                                  changed_functions=[m.function for m, _ in bugs])
    changed = draft.changed_outcomes(project, outcomes)

    if any(symptom not in changed for _, symptom in bugs):
        raise NotApplicable("the two bugs mask each other")
    symptoms = []
    for mutation, symptom in bugs:
        function = project.functions[symptom]
        index = min(changed[symptom],
                    key=lambda j: len(prompts.call_text(symptom, project.cases[symptom][j])))
        symptoms.append((symptom, function.path, project.cases[symptom][index],
                         project.expected[symptom][index][1], outcomes[symptom][index]))
    prompt = prompts.bugfix(ctx.prompt_level, rng, project.template.subsystem, symptoms)

    repo = {**broken, **draft.visible_tests(project, outcomes)}
    solved = {**repo, **project.files}
    hidden = draft.hidden_test_file(project, sorted(changed),
                                    "Hidden tests: the behaviour the fix must restore.")
    trajectory = _oracle(ctx, prompt, repo, bugs)
    facts = {"mutations": [{"type": m.kind, "function": m.function, "path": m.path,
                            "line": m.line} for m, _ in bugs],
             "symptom_functions": [s for _, s in bugs]}
    return TaskDraft(kind="bugfix", category="debug", difficulty=ctx.difficulty,
                     prompt_level=ctx.prompt_level, prompt=prompt, repo=repo, solved=solved,
                     hidden=hidden, answer=None, trajectory=trajectory, facts=facts)


def _find_bug(ctx: Context, mutation_type: str | None, used: set[str]
              ) -> tuple[mutations.Mutation, str]:
    """A mutation noticed by some case, and the function the prompt will point at."""
    project, rng = ctx.project, ctx.rng
    others = [t for t in mutations.MUTATION_TYPES if t != mutation_type]
    rng.shuffle(others)
    types = ([mutation_type] if mutation_type else []) + others
    functions = [f for f in project.functions.values() if f.name not in used]
    for kind in types:
        candidates = [m for f in functions
                      for m in mutations.find_mutations(f.path, project.files[f.path], f.name,
                                                        kind)]
        rng.shuffle(candidates)
        for mutation in candidates[:_TRIES_PER_TYPE]:
            files = dict(project.files)
            files[mutation.path] = mutations.apply(files[mutation.path], mutation)
            try:
                compile(files[mutation.path], mutation.path, "exec")
                outcomes = draft.all_outcomes(project, files, ctx.evaluator,
                                              changed_functions=[mutation.function])
            except (SyntaxError, EvaluationFailed):
                continue
            symptom = _symptom(ctx, mutation, draft.changed_outcomes(project, outcomes))
            if symptom is not None:
                return mutation, symptom
    raise NotApplicable(f"no {ctx.difficulty} bug found in {project.template.name}")


def _symptom(ctx: Context, mutation: mutations.Mutation, changed: dict) -> str | None:
    """Which function's wrong output the task shows, or None if none fits the difficulty."""
    if ctx.difficulty != "medium":
        return mutation.function if mutation.function in changed else None
    callers = ctx.project.callers(mutation.function) & changed.keys()
    if not callers:
        return None
    # Prefer a caller in another file: the prompt then points away from the fix.
    elsewhere = sorted(c for c in callers
                       if ctx.project.functions[c].path != mutation.path)
    return ctx.rng.choice(elsewhere or sorted(callers))


def _oracle(ctx: Context, prompt: str, repo: dict[str, str],
            bugs: list[tuple[mutations.Mutation, str]]) -> TrajectoryBuilder:
    project = ctx.project
    builder = TrajectoryBuilder(prompt, repo)
    builder.list_dir("Let me look at the project layout first.")
    read: set[str] = set()

    def read_file(thought: str, path: str) -> None:
        if path not in read:
            builder.read_file(thought, path)
            read.add(path)

    bug_paths = {m.path for m, _ in bugs}
    if ctx.prompt_level == "L0":
        for path in project.module_paths():
            if bug_paths <= read:
                break
            read_file(f"Reading `{path}` ({project.module_doc(path).rstrip('.').lower()}).",
                      path)
    else:
        for mutation, symptom in bugs:
            caller: Function = project.functions[symptom]
            read_file(f"The problem shows in `{symptom}`; let me read `{caller.path}`.",
                      caller.path)
            read_file(f"`{symptom}` relies on `{mutation.function}` from `{mutation.path}`; "
                      "let me read that too.", mutation.path)
    for mutation, _ in sorted(bugs, key=lambda b: (b[0].path, b[0].line)):
        text = builder.files[mutation.path]
        index = mutation.line - 1
        first, last = draft.unique_block(text, index, index)
        lines = text.split("\n")
        good = project.files[mutation.path].split("\n")[index]
        old = "\n".join(lines[first:last + 1])
        new = "\n".join(good if i == index else lines[i] for i in range(first, last + 1))
        builder.edit(f"In `{mutation.function}`, `{lines[index].strip()}` "
                     f"{_EXPLANATIONS[mutation.kind]}: it should be `{good.strip()}`.",
                     mutation.path, old, new,
                     note=f"fixed `{mutation.function}`, which {_EXPLANATIONS[mutation.kind]}")
    builder.run_tests("Let me run the tests to make sure nothing else broke.")
    fixed = "; ".join(f"`{m.function}` in {m.path} {_EXPLANATIONS[m.kind]}" for m, _ in bugs)
    builder.finish("The fix is in and the tests pass.", f"Fixed the bug: {fixed}.")
    return builder
