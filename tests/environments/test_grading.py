"""Grading rules (environments/grading.py), driven through real episodes."""
import pytest

from environments.grading import answer_in, is_test_path
from environments.task import load_task

PYTEST = "python -m pytest -q -p no:cacheprovider"
HIDDEN = {"hidden_tests/test_h.py": (
    "import pytest\n\n\ndef test_passes():\n    assert True\n\n\n"
    "@pytest.mark.skip(reason='a skipped target counts as failed')\n"
    "def test_skipped():\n    assert True\n")}


def finish(env, summary=""):
    return env.step({"tool": "finish", "args": {"summary": summary}})


def graded(make_env, write_task, summary="", reward="resolved", **task_fields):
    task = load_task(write_task("g", {"m.py": "x = 1\n"}, **task_fields))
    env = make_env(task, reward=reward)
    env.reset(seed=0)
    return finish(env, summary)


def test_skipped_target_tests_count_as_failed(make_env, write_task):
    _, reward, _, _, info = graded(make_env, write_task, reward="pass_fraction", hidden=HIDDEN,
                                   test_command=f"{PYTEST} hidden_tests",
                                   hidden_tests=["hidden_tests"])
    assert info["tests_status"] == {"hidden_tests.test_h::test_passes": "passed",
                                    "hidden_tests.test_h::test_skipped": "skipped"}
    assert set(info["test_seconds"]) == set(info["tests_status"])
    assert all(0 <= t < 60 for t in info["test_seconds"].values())
    assert reward == info["pass_fraction"] == 0.5 and not info["resolved"]


def test_report_contradicting_the_exit_code_is_rejected(make_env, write_task):
    hidden = {"hidden_tests/test_h.py": "def test_passes():\n    assert True\n"}
    _, reward, _, _, info = graded(make_env, write_task, reward="pass_fraction", hidden=hidden,
                                   test_command=f"{PYTEST} hidden_tests; exit 1",
                                   hidden_tests=["hidden_tests"])
    assert info["tests_status"] == {"hidden_tests.test_h::test_passes": "passed"}
    assert reward == 0.0 and not info["resolved"]
    assert any("report rejected" in note for note in info["grading_notes"])


def test_a_command_without_a_report_scores_zero(make_env, write_task):
    _, reward, _, _, info = graded(make_env, write_task, reward="pass_fraction",
                                   test_command="echo '1 passed'")
    assert reward == 0.0 and info["tests_status"] == {}
    assert any("reported no tests" in note for note in info["grading_notes"])


def test_grading_timeout_scores_zero_but_is_not_an_infra_failure(make_env, write_task):
    _, reward, _, _, info = graded(make_env, write_task, test_command="sleep 30",
                                   limits={"test_timeout_s": 0.5})
    assert reward == 0.0 and not info["infra_failure"]
    assert any("timed out after 0.5 s" in note for note in info["grading_notes"])


def test_answer_and_tests_combine(make_env, write_task):
    hidden = {"hidden_tests/test_h.py": "def test_fails():\n    assert False\n"}
    _, reward, _, _, info = graded(make_env, write_task, summary="It is 42.",
                                   reward="pass_fraction", hidden=hidden, answer="42",
                                   test_command=f"{PYTEST} hidden_tests",
                                   hidden_tests=["hidden_tests"])
    assert info["reward_components"]["answer_matched"] is True
    assert reward == 0.5 and not info["resolved"]


def test_symlinked_visible_tests_are_restored_and_graded(make_env, write_task):
    root = write_task("links", {"m.py": "x = 1\n", "tests/real_test.py": "def test_x():\n"
                                "    assert True\n"},
                      test_command=f"{PYTEST} tests")
    (root / "repo" / "tests" / "test_linked.py").symlink_to("real_test.py")
    env = make_env(load_task(root))
    env.reset(seed=0)
    env.step({"tool": "run_terminal", "args": {"cmd": "rm tests/test_linked.py"}})
    *_, info = finish(env)
    assert not info["infra_failure"] and info["resolved"]
    assert set(info["tests_status"]) == {"tests.real_test::test_x", "tests.test_linked::test_x"}


@pytest.mark.parametrize("path, expected", [
    ("tests/helpers.py", True), ("pkg/test/data.json", True), ("test_x.py", True),
    ("pkg/x_test.py", True), ("conftest.py", True), ("pkg/testing.py", False),
    ("latest.py", False), ("attest_x.py", False),
])
def test_which_files_count_as_visible_tests(path, expected):
    assert is_test_path(path) is expected


def test_the_test_run_gets_its_timeout_as_cpu_limit(make_env, write_task):
    # A suite may need more CPU than a tool command may spin (SMALL_LIMITS.cpu_s is 2 s).
    hidden = {"hidden_tests/test_h.py": (
        "import resource\n\n\ndef test_cpu_limit():\n"
        "    assert resource.getrlimit(resource.RLIMIT_CPU) == (7, 7)\n")}
    _, reward, _, _, info = graded(make_env, write_task, hidden=hidden,
                                   test_command=f"{PYTEST} hidden_tests",
                                   hidden_tests=["hidden_tests"], limits={"test_timeout_s": 6.5})
    assert info["tests_status"] == {"hidden_tests.test_h::test_cpu_limit": "passed"}
    assert reward == 1.0


@pytest.mark.parametrize("answer, summary, stated", [
    ("2", "It is 2 (`MIN_WORD_LENGTH` in textstats/tokens.py).", True),
    ("2", "It is 2.", True),
    ("2", "It is 20.", False),
    ("2", "It is 2.5.", False),
    ("2", "It is -2.", False),
    ("2", "MIN_WORD_LENGTH2", False),
    ("-3", "`f(1)` returns -3.", True),
    ("0.02", "It is 0.02 (`YEARLY_RATE`).", True),
    ("'ab'", "It returns 'ab'.", True),
    ("[1, 2]", "`g()` returns [1, 2]", True),
    ("True", "It returns Trueish", False),
])
def test_an_answer_counts_only_as_a_whole_literal(answer, summary, stated):
    assert answer_in(answer, summary) is stated
