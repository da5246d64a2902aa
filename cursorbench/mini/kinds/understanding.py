"""Understanding tasks: a question about the code, answered through `finish`.

The environment grades the finish summary: it must contain the answer, the exact Python
repr of a value.

- easy: the value of a module constant, asked by what it means (L0/L1) or by name (L2);
- medium: what a call of a self-contained function returns;
- hard: what a call returns when the function depends on another module.
"""
from __future__ import annotations

import shlex

from cursorbench.mini import draft, prompts
from cursorbench.mini.draft import Context, NotApplicable, TaskDraft
from cursorbench.mini.trajectory import TrajectoryBuilder

#: Longer answers make poor questions (and long calls make poor prompts).
_MAX_ANSWER_CHARS = 40
_MAX_CALL_CHARS = 120


def make(ctx: Context) -> TaskDraft:
    project = ctx.project
    repo = {**project.files, **draft.visible_tests(project)}
    if ctx.difficulty == "easy":
        prompt, answer, builder, facts = _constant(ctx, repo)
    else:
        prompt, answer, builder, facts = _call(ctx, repo)
    return TaskDraft(kind="understanding", category="understanding",
                     difficulty=ctx.difficulty, prompt_level=ctx.prompt_level, prompt=prompt,
                     repo=repo, solved=dict(repo), hidden={}, answer=answer,
                     trajectory=builder, facts=facts)


def _constant(ctx: Context, repo: dict[str, str]):
    project, rng = ctx.project, ctx.rng
    names = sorted(project.template.constants)
    if not names:
        raise NotApplicable(f"template {project.template.name} describes no constants")
    name = rng.choice(names)
    path, value = project.constants[name]
    answer = repr(value)
    prompt = prompts.constant_question(ctx.prompt_level, rng, project.template.subsystem, name,
                                       path, project.template.constants[name])
    builder = TrajectoryBuilder(prompt, repo)
    builder.list_dir("Let me look at the project layout first.")
    if ctx.prompt_level == "L2":
        builder.read_file(f"The question names `{path}`; let me read it.", path)
    else:
        for module in project.module_paths():
            builder.read_file(f"Looking for {project.template.constants[name]} in `{module}`.",
                              module)
            if module == path:
                break
    builder.finish(f"`{name}` in `{path}` holds the value.",
                   f"It is {answer} (`{name}` in {path}).")
    return prompt, answer, builder, {"constant": name}


def _call(ctx: Context, repo: dict[str, str]):
    project, rng = ctx.project, ctx.rng
    hard = ctx.difficulty == "hard"
    pool = []
    for name in sorted(project.cases):
        function = project.functions[name]
        elsewhere = {project.functions[c].path for c in function.calls} - {function.path}
        if (bool(elsewhere) if hard else not function.calls):
            for args, (_, value) in zip(project.cases[name], project.expected[name]):
                if (len(repr(value)) <= _MAX_ANSWER_CHARS
                        and len(prompts.call_text(name, args)) <= _MAX_CALL_CHARS):
                    pool.append((name, args, value))
    if not pool:
        raise NotApplicable(f"no function fits a {ctx.difficulty} question")
    name, args, value = rng.choice(pool)
    function = project.functions[name]
    answer = repr(value)
    call = prompts.call_text(name, args)
    prompt = prompts.call_question(ctx.prompt_level, rng, name, function.module, args)
    builder = TrajectoryBuilder(prompt, repo)
    builder.list_dir("Let me look at the project layout first.")
    builder.read_file(f"`{name}` is defined in `{function.path}`; let me read it.",
                      function.path)
    for callee in sorted(function.calls):
        path = project.functions[callee].path
        if path != function.path:
            builder.read_file(f"It calls `{callee}` from `{path}`; let me read that too.", path)
            break
    code = f"from {function.module} import {name}; print(repr({call}))"
    builder.run_terminal("Rather than work it out by hand, I'll run the call.",
                         f"python -c {shlex.quote(code)}", answer + "\n")
    builder.finish("That is the answer.", f"`{call}` returns {answer}.")
    return prompt, answer, builder, {"function": name}
