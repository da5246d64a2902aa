import ast

import pytest

from cursorbench.mini.kinds import understanding


def test_constant_question_answer_is_the_value_in_the_code(make_context):
    ctx = make_context("library", 2, "easy", level="L2")
    task = understanding.make(ctx)
    name = task.facts["constant"]
    path, value = ctx.project.constants[name]
    assert task.answer == repr(value) and f"{name} = {task.answer}" in task.repo[path]
    assert name in task.prompt and task.hidden == {} and task.solved == task.repo
    assert task.trajectory.steps()[-1]["args"]["summary"].count(task.answer) >= 1


@pytest.mark.parametrize("difficulty", ["medium", "hard"])
def test_call_question_answer_is_what_the_call_returns(make_context, difficulty):
    ctx = make_context("geometry", 4, difficulty)
    task = understanding.make(ctx)
    function = ctx.project.functions[task.facts["function"]]
    other_modules = {ctx.project.functions[c].path for c in function.calls} - {function.path}
    assert bool(other_modules) == (difficulty == "hard")
    steps = task.trajectory.steps()
    (terminal,) = [s for s in steps if s["tool"] == "run_terminal"]
    assert function.name in terminal["args"]["cmd"]
    ast.literal_eval(task.answer)                        # a Python repr
    assert task.answer in steps[-1]["args"]["summary"]
