import pytest

from cursorbench import suites


def test_mini_spec_generates_once_into_the_cache(cache_dir):
    suite = suites.resolve("mini:val:5")
    assert len(suite.tasks) == 5 and suite.path.parent == cache_dir / "cursorbench"
    stamp = (suite.path / "suite.json").stat().st_mtime_ns
    again = suites.resolve("mini:val:5")
    assert again.path == suite.path and (again.path / "suite.json").stat().st_mtime_ns == stamp
    assert suites.resolve("mini:val:5", seed=1).path != suite.path
    assert not [p for p in suite.path.parent.iterdir() if p.name.startswith(".")]


def test_a_directory_or_one_task_is_a_suite(mini_suite):
    assert len(suites.resolve(str(mini_suite[0].parent)).tasks) == 10
    assert [t.id for t in suites.resolve(str(mini_suite[3])).tasks] == [mini_suite[3].name]


@pytest.mark.parametrize("spec, message", [
    ("mini:dev", "SPLIT one of train, val, test"),
    ("mini:test:many", "whole number"),
    ("mini:test:0", "at least 1"),
    ("/no/such/dir", "no such directory"),
])
def test_bad_specs_are_explained(spec, message, cache_dir):
    with pytest.raises(suites.SuiteError, match=message):
        suites.resolve(spec)


def test_invalid_task_dirs_are_named(tmp_path):
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "task.json").write_text("{}")
    with pytest.raises(suites.SuiteError, match="broken: missing field 'id'"):
        suites.resolve(str(tmp_path))


def test_categories_keep_those_tasks_in_suite_order(mini_suite):
    path = str(mini_suite[0].parent)
    everything = suites.resolve(path).tasks
    kept = suites.resolve(path, categories=["understanding", "refactor"])
    assert kept.name == f"{path}@understanding,refactor"
    assert [t.id for t in kept.tasks] == [t.id for t in everything
                                          if t.category in ("understanding", "refactor")]
    assert len(kept.tasks) == 3


@pytest.mark.parametrize("categories, message", [
    (["puzzles"], "unknown task categories puzzles; choose from debug"),
    (["understanding"], "no task of the categories understanding"),
])
def test_bad_categories_are_explained(mini_suite, categories, message):
    one_bugfix = str(mini_suite[0])
    with pytest.raises(suites.SuiteError, match=message):
        suites.resolve(one_bugfix, categories=categories)
