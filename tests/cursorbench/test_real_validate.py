"""Validation runs the real grader (bwrap sandbox, pytest) 3 times per group."""
import dataclasses
import json

import environments
from environments import CodingEnv

from cursorbench.real import generators, validate


def test_a_good_candidate_is_accepted_with_its_targets(local_package):
    candidate = generators.generate(local_package, "combined_mutations", 1)
    verdict = validate.validate(candidate)
    assert verdict.accepted, verdict.reasons
    assert verdict.fail_to_pass and not verdict.flaky
    assert set(verdict.fail_to_pass).isdisjoint(verdict.pass_to_pass)
    assert len(verdict.fail_to_pass) + len(verdict.pass_to_pass) == 10   # the fixture reader too


def test_broken_reruns_run_only_the_suspected_targets_files(local_package, monkeypatch):
    candidate = generators.generate(local_package, "refactor_reversal", 0)  # breaks 1 file
    clean = validate.clean_runs({**candidate.baseline, **candidate.data},
                                validate.pytest_files(candidate.tests))
    graded = []                # (agent, the test files its command names) of every grading
    real_grade = validate._grade

    def spy(env, task_dir, agent_class):
        command = json.loads((task_dir / "task.json").read_text())["test_command"]
        graded.append((agent_class.__name__,
                       [w for w in command.split() if w.startswith("tests/")]))
        return real_grade(env, task_dir, agent_class)

    monkeypatch.setattr(validate, "_grade", spy)
    verdict = validate.validate(candidate, clean=clean)
    assert verdict.accepted, verdict.reasons
    everything = validate.pytest_files(candidate.tests)
    target_files = sorted({t.split("::")[0].replace(".", "/") + ".py"
                           for t in verdict.fail_to_pass})
    assert graded == [("NullAgent", everything)] + [("ReferenceFixAgent", everything)] * 3 + [
        ("NullAgent", target_files)] * 2
    assert target_files != everything
    # The same verdict as when every broken run is the whole suite.
    monkeypatch.setattr(validate, "rerun_files", lambda ids, paths: None)
    assert validate.validate(candidate, clean=clean) == verdict


def test_a_candidate_that_breaks_nothing_is_rejected_after_one_run(local_package,
                                                                   monkeypatch):
    candidate = generators.generate(local_package, "combined_mutations", 1)
    candidate = dataclasses.replace(candidate, broken=dict(candidate.solved))
    agents = []
    real_grade = validate._grade
    monkeypatch.setattr(validate, "_grade", lambda env, task_dir, agent_class: (
        agents.append(agent_class.__name__), real_grade(env, task_dir, agent_class))[1])
    verdict = validate.validate(candidate)
    assert not verdict.accepted and "the reference fix was not run" in verdict.reasons[0]
    assert agents == ["NullAgent"] * 4           # 3 clean runs, 1 broken run


def test_suspected_targets_pass_in_every_clean_run_and_not_in_the_broken_one():
    run = lambda status: (status, None, {})  # noqa: E731
    clean = [run({"t.a::x": "passed", "t.a::y": "passed", "t.b::z": "passed"}),
             run({"t.a::x": "passed", "t.a::y": "failed", "t.b::z": "passed"})]
    # y is not stable on the clean tree; z did not run on the broken one (an import error).
    assert validate.suspected_targets(clean, {"t.a::x": "failed", "t.a::y": "failed",
                                              "t.b": "failed"}) == ["t.a::x", "t.b::z"]
    paths = ["t/a.py", "t/b.py"]
    assert validate.rerun_files(["t.a::x", "t.b::z"], paths) == paths
    assert validate.rerun_files(["t.a::x", "u.c::w"], paths) is None


def test_a_flaky_task_is_rejected(local_package):
    # Its only possible target passes, fails or skips at random in each run.
    flaky_test = ("import os\nimport pytest\n\n\ndef test_coin():\n"
                  "    roll = os.urandom(1)[0] % 3\n    if roll == 2:\n"
                  "        pytest.skip('sometimes')\n    assert roll == 0\n\n\n"
                  "def test_steady():\n    pass\n")
    candidate = dataclasses.replace(
        generators.generate(local_package, "combined_mutations", 1),
        broken=dict(local_package.sources), tests={"tests/test_coin.py": flaky_test},
        baseline={**local_package.sources, "tests/test_coin.py": flaky_test})
    verdict = validate.validate(candidate)
    assert not verdict.accepted and "no test fails" in verdict.reasons[0]
    # Flaky when the first clean run passed it and a later run did not; dropped unseen when
    # the first run did not pass it; kept (not a target) in the rare runs where it always passed.
    assert verdict.excluded in ((), ("tests.test_coin::test_coin",))
    assert verdict.flaky in ((), ("tests.test_coin::test_coin",))
    assert not verdict.fail_to_pass
    assert ("1 flaky dropped" in verdict.reasons[0]) == bool(verdict.flaky)


def test_a_test_that_varies_within_a_group_is_flaky():
    clean = {"t.a::x": "passed", "t.a::coin": "passed"}
    statuses = {"clean": [clean, clean, {**clean, "t.a::coin": "failed"}],
                "broken": [{"t.a::x": "failed", "t.a::coin": "passed"}] * 3,
                "reference": [clean] * 3}
    verdict = validate.classify(statuses)
    assert verdict.flaky == ("t.a::coin",) and verdict.fail_to_pass == ("t.a::x",)


def test_a_task_whose_reference_fix_fails_is_rejected(local_package):
    candidate = generators.generate(local_package, "feature_ablation", 0)
    # A "fix" that restores the functions but slips a bug into dot().
    wrong = dict(candidate.solved)
    wrong["geomkit/vectors.py"] = wrong["geomkit/vectors.py"].replace(
        "a[0] * b[0] + a[1] * b[1]", "a[0] * b[0] - a[1] * b[1]")
    verdict = validate.validate(dataclasses.replace(candidate, solved=wrong))
    assert not verdict.accepted
    assert "the reference fix fails" in verdict.reasons[0]
    assert "tests.test_vectors::test_dot" in verdict.reasons[0]


def test_slow_tests_are_the_ones_slow_in_the_first_clean_run():
    run = lambda seconds: ({t: "passed" for t in seconds}, None, seconds)  # noqa: E731
    clean = [run({"t.a::x": 0.1, "t.a::slow": 3.0}), run({"t.a::x": 2.0})]
    assert validate.slow_tests(clean) == ["t.a::slow"]   # x, slow later, is timed by run 1
    assert validate.slow_tests(clean, limit=10) == []


def test_the_clean_runs_after_the_first_skip_its_slow_and_failing_tests():
    tests = {"tests/test_s.py": "import time\n\n\ndef test_slow():\n"
                                "    end = time.monotonic() + 0.5\n"
                                "    while time.monotonic() < end:\n        pass\n\n\n"
                                "def test_fast():\n    pass\n\n\n"
                                "def test_fails():\n    assert False\n"}
    runs = validate.clean_runs({"m.py": "", **tests}, sorted(tests), slow_s=0.3)
    assert [sorted(status) for status, _, _ in runs] == [
        ["tests.test_s::test_fails", "tests.test_s::test_fast", "tests.test_s::test_slow"],
        ["tests.test_s::test_fast"], ["tests.test_s::test_fast"]]
    assert validate.slow_tests(runs, 0.3) == ["tests.test_s::test_slow"]
    assert validate.first_run_drops(runs, 0.3) == ["tests.test_s::test_fails",
                                                   "tests.test_s::test_slow"]
    verdict = validate.classify({"clean": [s for s, _, _ in runs]},
                                validate.first_run_drops(runs, 0.3))
    assert verdict.excluded == ("tests.test_s::test_fails", "tests.test_s::test_slow")
    assert not verdict.flaky


def test_a_hanging_test_fails_alone_and_the_run_reports_the_rest(tmp_path):
    # The real test command's per-test limit (pytest-timeout), lowered to 1 s for the test.
    tests = {"tests/test_h.py": "import time\n\n\ndef test_hangs():\n    while True:\n"
                                "        time.sleep(0.05)\n\n\ndef test_ok():\n    pass\n"}
    root = validate._write(tmp_path / "hang", {"m.py": "", **tests}, sorted(tests))
    spec = json.loads((root / "task.json").read_text())
    assert spec["test_command"].startswith(validate.REAL_PYTEST)
    spec["test_command"] += " --timeout=1"
    (root / "task.json").write_text(json.dumps(spec))
    env = CodingEnv(sandbox="bwrap")
    try:
        status, why, _ = validate._grade(env, root, environments.NullAgent)
    finally:
        env.close()
    assert why is None
    assert status == {"tests.test_h::test_hangs": "failed", "tests.test_h::test_ok": "passed"}


def test_a_collection_error_of_the_broken_tree_is_not_dropped():
    # toolz, seed 1: the ablation broke an import, so every broken run reports a module-level
    # entry per file. Dropping those ids deselected whole files, and the oracle ran no test.
    clean = {"tests.test_a::test_x": "passed", "tests.test_a::test_y": "passed",
             "tests.test_b::test_z": "failed"}
    broken = {"tests.test_a": "failed", "tests.test_b": "failed"}
    statuses = {"clean": [clean] * 3, "broken": [broken] * 3, "reference": [clean] * 3}
    verdict = validate.classify(statuses)
    assert verdict.fail_to_pass == ("tests.test_a::test_x", "tests.test_a::test_y")
    assert verdict.excluded == ("tests.test_b::test_z",)       # fails on the clean package
    # A module entry that varies between broken runs is not "flaky" either.
    statuses["broken"] = [broken, {}, broken]
    assert validate.classify(statuses).excluded == ("tests.test_b::test_z",)


def test_a_deselection_that_would_remove_a_target_is_caught():
    paths = ["tests/test_a.py", "tests/test_b.py"]
    targets = ["tests.test_a::test_x", "tests.test_b::test_y"]
    assert validate.deselected_targets(targets, ["tests.test_a"], paths) == [
        "tests.test_a::test_x"]
    assert validate.deselected_targets(targets, ["tests.test_a::test_x2"], paths) == []
