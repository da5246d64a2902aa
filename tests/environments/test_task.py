"""Task loading and validation (environments/task.py)."""
import json

import pytest

from environments.task import TaskError, TaskLimits, load_suite, load_task, load_tasks
from tests.environments.conftest import FIXTURE_TASKS


def test_loads_fixture_task_with_all_fields():
    task = load_task(FIXTURE_TASKS / "debug-mean")
    assert task.id == "debug-mean"
    assert task.category == "debug" and task.difficulty == "easy"
    assert task.setup == ("python -c \"open('VERSION', 'w').write('1.0\\n')\"",)
    assert task.hidden_tests == ("hidden_tests",)
    assert (task.hidden_dir / "hidden_tests" / "test_mean.py").is_file()
    assert task.test_command.startswith("python -m pytest")
    assert task.visible_test_command == "python -m pytest -q -p no:cacheprovider"
    assert task.limits == TaskLimits(max_steps=20, tool_timeout_s=30, test_timeout_s=60)
    assert task.reference_diff.startswith("diff --git a/stats/core.py")
    assert task.answer is None and task.extra == {}


def test_answer_task_needs_no_test_command():
    task = load_task(FIXTURE_TASKS / "understand-port")
    assert task.answer == "8137" and task.test_command is None and task.hidden_dir is None


def test_names_every_problem(write_task):
    root = write_task("bad", {"a.py": ""}, category="chores", difficulty=True,
                      hidden_tests=["../escape", "missing_dir"], setup="make",
                      limits={"max_step": 3, "tool_timeout_s": -1, "max_steps": 2.5})
    spec = json.loads((root / "task.json").read_text())
    del spec["prompt"]
    (root / "task.json").write_text(json.dumps(spec))
    with pytest.raises(TaskError) as err:
        load_task(root)
    problems = "\n".join(err.value.problems)
    for expected in ("missing field 'prompt'", "category 'chores'", "'difficulty' must be",
                     "'setup' must be a list", "missing field 'test_command'",
                     "'../escape' must be a relative path", "'missing_dir' does not exist",
                     "unknown limit 'max_step'", "'tool_timeout_s' must be a positive",
                     "'max_steps' must be a whole number",
                     "hidden_tests are given but there is no test_command"):
        assert expected in problems
    assert len(err.value.problems) == 11
    assert str(root) in str(err.value)


@pytest.mark.parametrize("content, message", [
    (None, "task.json is missing"),
    ("{not json", "not valid JSON"),
    ("[1, 2]", "must hold a JSON object"),
])
def test_unreadable_task_json(tmp_path, content, message):
    (tmp_path / "repo").mkdir()
    if content is not None:
        (tmp_path / "task.json").write_text(content)
    with pytest.raises(TaskError, match=message):
        load_task(tmp_path)


def test_missing_repo_and_bad_id(write_task):
    root = write_task("ok", {}, test_command="true")
    (root / "repo").rmdir()
    spec = json.loads((root / "task.json").read_text())
    (root / "task.json").write_text(json.dumps({**spec, "id": "has space"}))
    with pytest.raises(TaskError) as err:
        load_task(root)
    assert any("repo/ is missing" in p for p in err.value.problems)
    assert any("'has space' may only use" in p for p in err.value.problems)


def test_unknown_top_level_fields_are_kept(write_task):
    root = write_task("grows", {"a.py": "x = 1\n"}, test_command="true", prompt_level="L1")
    assert load_task(root).extra == {"prompt_level": "L1"}


def test_suite_loads_sorted_and_names_broken_tasks(write_task, tmp_path):
    suite = load_suite(FIXTURE_TASKS)
    assert [t.id for t in suite] == ["debug-mean", "feature-slugify", "understand-port"]
    write_task("one", {"a.py": ""}, test_command="true")
    dup = write_task("two", {"a.py": ""}, test_command="true")
    spec = json.loads((dup / "task.json").read_text())
    (dup / "task.json").write_text(json.dumps({**spec, "id": "one"}))
    write_task("three", {"a.py": ""})  # no test_command and no answer
    with pytest.raises(TaskError) as err:
        load_suite(tmp_path / "tasks")
    problems = "\n".join(err.value.problems)
    assert "three: missing field 'test_command'" in problems
    assert "task id 'one' is used by both one and two" in problems


def test_load_tasks_accepts_task_dir_suite_or_task():
    task = load_task(FIXTURE_TASKS / "feature-slugify")
    assert load_tasks(task) == [task]
    assert [t.id for t in load_tasks(FIXTURE_TASKS / "feature-slugify")] == ["feature-slugify"]
    assert len(load_tasks(FIXTURE_TASKS)) == 3
