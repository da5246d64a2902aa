import pytest

from cursorbench.mini import draft, mutations
from cursorbench.mini.kinds import bugfix
from tests.cursorbench.conftest import final_files


@pytest.mark.parametrize("difficulty, bugs", [("easy", 1), ("medium", 1), ("hard", 2)])
def test_bugfix_draft_breaks_what_hidden_tests_check(make_context, evaluator, difficulty,
                                                      bugs):
    ctx = make_context("library", 3, difficulty)
    task = bugfix.make(ctx, "comparison")
    project = ctx.project
    assert len(task.facts["mutations"]) == bugs
    assert task.category == "debug" and task.solved != task.repo
    broken = {p: t for p, t in task.repo.items() if not p.startswith("tests/")}
    changed = draft.changed_outcomes(project, draft.all_outcomes(project, broken, evaluator))
    hidden = task.hidden["hidden_tests/test_hidden.py"]
    for name in changed:                      # every broken function is tested in hidden
        assert f"def test_{name}_1" in hidden
    for symptom in task.facts["symptom_functions"]:
        assert symptom in changed
        assert f"`{symptom}(" in task.prompt   # L2 shows the failing call
    if difficulty == "medium":
        (mutation,) = task.facts["mutations"]
        assert task.facts["symptom_functions"][0] != mutation["function"]
    assert final_files(task) == task.solved   # the oracle's edits are the reference fix
    assert "hidden_tests" not in task.prompt and "line" not in task.prompt


def test_first_bug_has_the_requested_type_when_possible(make_context):
    for kind in mutations.MUTATION_TYPES:
        task = bugfix.make(make_context("geometry", 11, "easy"), kind)
        assert task.facts["mutations"][0]["type"] == kind


def test_visible_tests_pass_on_the_broken_code(make_context, evaluator):
    from cursorbench.mini import execution

    ctx = make_context("timeslots", 5, "easy")
    task = bugfix.make(ctx, "off_by_one")
    namespace_files = {p: t for p, t in task.repo.items()}
    for path, text in task.repo.items():
        if path.startswith("tests/"):
            with execution.project_imported(namespace_files):
                code = compile(text, path, "exec")
                scope = {}
                exec(code, scope)
                tests = [v for k, v in scope.items() if k.startswith("test_")]
                assert tests
                for test in tests:
                    test()
