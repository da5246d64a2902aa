import json
import random

import environments
import pytest

from cursorbench.mini import generate, templates


def _tree(root):
    return {p.relative_to(root).as_posix(): p.read_bytes()
            for p in sorted(root.rglob("*")) if p.is_file()}


def test_suite_is_deterministic_from_its_seed(tmp_path, mini_suite):
    again = generate.generate_suite(tmp_path / "again", "test", 10)
    assert [p.name for p in again] == [p.name for p in mini_suite]
    for a, b in zip(mini_suite, again):
        assert _tree(a) == _tree(b)
    other = generate.generate_suite(tmp_path / "other", "test", 3, seed=1)
    assert _tree(other[0] / "repo") != _tree(mini_suite[0] / "repo")


def test_parallel_generation_writes_the_same_tasks(tmp_path, mini_suite):
    parallel = generate.generate_suite(tmp_path / "par", "test", 10, workers=2)
    for a, b in zip(mini_suite, parallel):
        assert _tree(a) == _tree(b)


def test_tasks_load_and_carry_their_metadata(mini_suite):
    tasks = [environments.load_task(p) for p in mini_suite]
    kinds = [t.extra["kind"] for t in tasks]
    assert kinds == [generate.KIND_CYCLE[i] for i in range(10)]
    for task in tasks:
        assert task.extra["template"] in templates.SPLITS["test"]
        assert task.extra["prompt_level"] in ("L0", "L1", "L2")
        assert task.difficulty in ("easy", "medium", "hard")
        if task.category == "understanding":
            assert task.answer and task.test_command is None and task.reference_diff is None
        else:
            assert task.reference_diff and task.hidden_tests == ("hidden_tests",)
            assert "hidden_tests" in task.test_command
            assert not (task.repo_dir / "hidden_tests").exists()
        oracle = json.loads((task.path / "oracle.json").read_text())
        assert oracle["steps"][-1]["tool"] == "finish"


def test_splits_use_disjoint_templates_and_seeds():
    seeds = {split: {generate.task_seed(split, 0, i) for i in range(500)}
             for split in templates.SPLITS}
    assert not (seeds["train"] & seeds["test"]) and not (seeds["val"] & seeds["test"])


def test_mix_covers_every_kind_level_and_difficulty(tmp_path):
    paths = generate.generate_suite(tmp_path, "val", 60)
    specs = [json.loads((p / "task.json").read_text()) for p in paths]
    assert {s["kind"] for s in specs} == {"bugfix", "feature", "refactor", "understanding"}
    assert {s["prompt_level"] for s in specs} == {"L0", "L1", "L2"}
    assert {s["difficulty"] for s in specs} == {"easy", "medium", "hard"}
    assert {s["template"] for s in specs} <= set(templates.SPLITS["val"])
    mutated = {m["type"] for s in specs for m in s["facts"].get("mutations", [])}
    assert len(mutated) >= 4


def test_context_budget_adds_summary_turns(tmp_path):
    (path,) = generate.generate_suite(tmp_path, "test", 1, context_budget=1500)
    steps = json.loads((path / "oracle.json").read_text())["steps"]
    summaries = [s["summary"] for s in steps if "summary" in s]
    assert summaries
    assert all(line.split(":")[0] in ("Task", "Files read", "Files changed", "Findings",
                                      "Next", "- " + line[2:].split(":")[0])
               or line.startswith("- ") for s in summaries for line in s.splitlines())


def test_bad_arguments_are_explained(tmp_path):
    with pytest.raises(ValueError, match="train, val, test"):
        generate.generate_suite(tmp_path, "dev", 1)
    with pytest.raises(ValueError, match="at least 1"):
        generate.generate_suite(tmp_path, "test", 0)


def test_task_seed_depends_on_all_three_parts():
    assert len({generate.task_seed(s, seed, i) for s in ("train", "test")
                for seed in (0, 1) for i in (0, 1)}) == 8
    assert random.Random(generate.task_seed("test", 0, 0)).random() == \
        random.Random(generate.task_seed("test", 0, 0)).random()
