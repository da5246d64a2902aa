import pytest

from cursorbench.mini.kinds import feature
from tests.cursorbench.conftest import final_files


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_feature_removes_functions_that_hidden_tests_call(make_context, difficulty):
    ctx = make_context("recipes", 7, difficulty)
    task = feature.make(ctx)
    names = task.facts["functions"]
    assert len(names) == (2 if difficulty == "hard" else 1)
    for name in names:
        function = ctx.project.functions[name]
        assert f"def {name}(" not in task.repo[function.path]
        assert f"def {name}(" in task.solved[function.path]
        assert f"test_{name}_1" in task.hidden["hidden_tests/test_hidden.py"]
        assert function.signature in task.prompt           # L2 gives the signature
        callers = ctx.project.callers(name)
        assert bool(callers) == (difficulty == "medium") or difficulty == "hard"
    if difficulty == "hard":
        assert len({ctx.project.functions[n].path for n in names}) == 2
    assert final_files(task) == task.solved


def test_l0_prompt_names_the_function_but_not_its_signature(make_context):
    task = feature.make(make_context("recipes", 7, "easy", level="L0"))
    (name,) = task.facts["functions"]
    assert f"`{name}`" in task.prompt and f"{name}(" not in task.prompt
