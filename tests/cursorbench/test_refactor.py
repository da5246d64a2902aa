import pytest

from cursorbench.mini.draft import NotApplicable
from cursorbench.mini.kinds import refactor
from tests.cursorbench.conftest import final_files


@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_rename_touches_every_file_and_hidden_tests_use_the_new_name(make_context, difficulty):
    for seed in range(20):
        try:
            task = refactor.make(make_context("timeslots", seed, difficulty))
            break
        except NotApplicable:
            continue
    renames = task.facts["renames"]
    assert len(renames) == (2 if difficulty == "hard" else 1)
    hidden = task.hidden["hidden_tests/test_hidden.py"]
    for old, new in renames.items():
        assert not any(old in text for text in task.solved.values())
        assert sum(text.count(new) for text in task.solved.values()) >= 3   # def, import, use
        assert f"import {new}" in hidden or f", {new}" in hidden or f"{new}," in hidden
        assert f"def test_{old}_is_gone" in hidden
        assert old in task.prompt and new in task.prompt
        assert not any(old in text for path, text in task.repo.items()
                       if path.startswith("tests/"))
    assert final_files(task) == task.solved


def test_a_function_named_like_its_module_is_never_renamed(make_context):
    # recipes has `scale` in scale.py: renaming the word would break `from .scale import`.
    renamed = []
    for seed in range(15):
        for difficulty in ("easy", "medium"):
            try:
                renamed += list(refactor.make(make_context("recipes", seed, difficulty))
                                .facts["renames"])
            except NotApplicable:
                continue
    assert renamed and "scale" not in renamed
