"""Validating a real-suite candidate by running its tests through the environment, 3 times each.

The candidate is written as two task directories (the untouched package, and the broken tree
with the candidate's tests, every test visible) and graded by the environment's own grader
with scripted agents:

- clean: the untouched package and its own tests, NullAgent, `runs` times;
- broken: the broken tree, NullAgent, `runs` times: the first run is the whole suite, the
  others rerun only the test files that hold a suspected target (a test that passes in every
  clean run and not in the first broken one), and the other files keep the first run's
  outcomes;
- reference: the broken tree, `ReferenceFixAgent` (applies reference.diff, runs no tests of its
  own), `runs` times.

A candidate with no suspected target after the first broken run is rejected there, without
running the reference fix: one grading instead of 2 x `runs`.

A test of the clean package whose status varies within any of the three groups is flaky and
dropped; one slower than `SLOW_TEST_S` or not passing in the first clean run is dropped too
(deselected in every other run: `first_run_drops`), and so is one that fails on the clean
package in a later run. (`classify` has the rules.) Target
(fail-to-pass) tests pass in every clean and reference run and fail in every broken run;
pass-to-pass tests pass in all of them. A candidate is rejected when a stable test that passes
on the untouched package fails with the reference fix (the fix is wrong), when no stable test
is a target, when the task's deselections would remove a target, or when grading itself
failed. (Test ids survive a refactor's rename: the tests'
own names do not change.)
"""
from __future__ import annotations

import dataclasses
import json
import shlex
import tempfile
from collections.abc import Sequence
from pathlib import Path

import environments
from environments import CodingEnv, SandboxConfig

from cursorbench.real.generators import Candidate
from cursorbench.taskdir import PYTEST, unified_diff, write_files

#: A test running longer than this fails (pytest-timeout, SIGALRM: the run goes on). Slow tests
#: are dropped at validation (`SLOW_TEST_S`), so only a hang gets here: a broken tree or an
#: agent's edit that loops forever costs its own tests, not the whole run's report.
PER_TEST_TIMEOUT_S = 30
#: The real suites' test command: a test file that fails to import (a moved or renamed API)
#: costs its own tests, not the whole run, and so does a test that hangs.
REAL_PYTEST = (f"{PYTEST} --continue-on-collection-errors -p pytest_timeout "
               f"--timeout={PER_TEST_TIMEOUT_S} --timeout-method=signal")
#: Validation runs read statuses and times only: without tracebacks a broken tree's run is
#: several times faster (python-dateutil with 404 failures: 47 s -> 12 s).
VALIDATION_PYTEST = f"{REAL_PYTEST} --tb=no"
#: Budgets of one validation run (real test suites take longer than mini ones).
VALIDATION_LIMITS = {"max_steps": 5, "test_timeout_s": 300, "tool_timeout_s": 300}


class ReferenceFixAgent(environments.OracleAgent):
    """The oracle without its own test run: the grading right after the fix is the check."""

    def __init__(self):
        super().__init__(run_tests=False)


@dataclasses.dataclass(frozen=True)
class Validation:
    """The verdict. Test ids are the grader's (JUnit `classname::name`)."""
    accepted: bool
    reasons: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    excluded: tuple[str, ...]      # flaky, slow or failing on the clean tree: deselected
    slow: tuple[str, ...] = ()


#: (test id -> status, grading failure or None, test id -> seconds) of each run.
Runs = list[tuple[dict[str, str], "str | None", dict[str, float]]]
#: A test slower than this in the first clean run is dropped: deselected in the validation's
#: other runs and in the task.
SLOW_TEST_S = 1.0


def clean_runs(baseline: dict[str, str | bytes], tests: list[str], *, runs: int = 3,
               sandbox: str | SandboxConfig = "bwrap", python: str | None = None,
               slow_s: float = SLOW_TEST_S) -> Runs:
    """The untouched package (`baseline`: its files, data included) graded `runs` times: the
    same for every candidate of a package (test ids survive renames and moves), so a build
    computes it once per package. The first run times every test; the tests it finds slow or
    failing (`first_run_drops`) are deselected in the others, since they are dropped anyway."""
    with tempfile.TemporaryDirectory(prefix="c2jax-real-clean-") as tmp:
        env = CodingEnv(sandbox=sandbox)
        try:
            graded = [_grade(env, _write(Path(tmp) / "clean", baseline, tests, python=python),
                             environments.NullAgent)]
            deselect = [n for n in (node_id(t, tests) for t in first_run_drops(graded, slow_s))
                        if n]
            rest = _write(Path(tmp) / "clean_fast", baseline, tests, python=python,
                          deselect=deselect)
            return graded + [_grade(env, rest, environments.NullAgent) for _ in range(runs - 1)]
        finally:
            env.close()


def validate(candidate: Candidate, *, runs: int = 3,
             sandbox: str | SandboxConfig = "bwrap", python: str | None = None,
             clean: Runs | None = None) -> Validation:
    """The verdict on `candidate`; `python`: the venv its tests run in (None: the project's);
    `clean`: `clean_runs` of its package, if already known."""
    tests = pytest_files(candidate.tests)
    if clean is None:
        clean = clean_runs({**candidate.baseline, **candidate.data}, tests, runs=runs,
                           sandbox=sandbox, python=python)
    slow = slow_tests(clean)
    dropped = first_run_drops(clean)
    deselect = [n for n in (node_id(t, tests) for t in dropped) if n]
    with tempfile.TemporaryDirectory(prefix="c2jax-real-validate-") as tmp:
        # A broken tree can loop forever: allow a few times the clean suite's time, not 300 s.
        clean_seconds = max((sum(s.values()) for _, _, s in clean), default=0.0)
        timeout = int(min(VALIDATION_LIMITS["test_timeout_s"], max(60, 5 * clean_seconds)))
        broken_files = {**candidate.broken, **candidate.tests, **candidate.data}
        broken = _write(Path(tmp) / "broken", broken_files, tests,
                        reference=unified_diff(candidate.broken, candidate.solved),
                        python=python, deselect=deselect, test_timeout_s=timeout)
        env = CodingEnv(sandbox=sandbox)
        groups = {"clean": clean, "broken": []}
        try:
            groups["broken"].append(_grade(env, broken, environments.NullAgent))
            first, failed, _ = groups["broken"][0]
            suspects = [] if failed else suspected_targets(clean, first)
            if suspects:
                groups["reference"] = []
                for _ in range(runs):
                    groups["reference"].append(_grade(env, broken, ReferenceFixAgent))
                    if groups["reference"][-1][1]:
                        break      # grading failed (e.g. a timeout): no need to go on
                else:
                    # Broken runs 2..n rerun only the files that hold a suspected target;
                    # the other files' outcomes on the broken tree are run 1's.
                    files = rerun_files(suspects, tests)
                    rerun = broken if files is None else _write(
                        Path(tmp) / "broken_targets", broken_files, files, python=python,
                        deselect=deselect, test_timeout_s=timeout)
                    for _ in range(runs - 1):
                        status, why, seconds = _grade(env, rerun, environments.NullAgent)
                        if files is not None:
                            status = {**{t: s for t, s in first.items()
                                         if _file_of(t, tests) not in files}, **status}
                        groups["broken"].append((status, why, seconds))
                        if why:
                            break
        finally:
            env.close()
    failures = [why for runs_ in groups.values() for _, why, _ in runs_ if why]
    if failures:
        return Validation(False, (f"grading failed: {failures[0]}",), (), (), (), ())
    statuses = {name: [status for status, _, _ in runs_] for name, runs_ in groups.items()}
    verdict = classify(statuses, dropped)
    reasons = []
    if verdict.wrong_fix:
        reasons.append(f"the reference fix fails {len(verdict.wrong_fix)} test(s) that pass on "
                       f"the clean tree: {', '.join(verdict.wrong_fix[:5])}")
    test_paths = sorted(candidate.tests)
    stuck = [t for t in verdict.excluded if node_id(t, test_paths) is None]
    if stuck:
        reasons.append(f"{len(stuck)} test(s) to drop cannot be deselected: {stuck[:3]}")
    hidden = deselected_targets(verdict.fail_to_pass, verdict.excluded, test_paths)
    if hidden:
        reasons.append(f"the task's test command would deselect {len(hidden)} target test(s), "
                       f"e.g. {hidden[0]}")
    if not verdict.fail_to_pass:
        reasons.append((f"no test fails in all {runs} broken runs and passes in every clean "
                        "and reference run" if "reference" in statuses else
                        "no test fails in the first broken run that passes in every clean run "
                        "(the reference fix was not run)")
                       + (f" ({len(verdict.flaky)} flaky dropped)" if verdict.flaky else ""))
    return Validation(not reasons, tuple(reasons), verdict.fail_to_pass, verdict.pass_to_pass,
                      verdict.flaky, verdict.excluded, tuple(slow))


@dataclasses.dataclass(frozen=True)
class Classified:
    """Test ids sorted by their outcomes over the clean / broken / reference runs."""
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    excluded: tuple[str, ...]      # what the task's test command deselects
    wrong_fix: tuple[str, ...]     # pass on the clean tree, not with the reference fix


def classify(statuses: dict[str, list[dict[str, str]]], dropped: Sequence[str] = ()
             ) -> Classified:
    """Sorts the test ids of `statuses` ({"clean" | "broken" | "reference": one {test id:
    status} per run}; without reference runs nothing is a target or a wrong fix). `dropped`
    (`first_run_drops`) are excluded unseen: the later runs deselected them.

    Only tests of the clean package can be dropped: an id that exists only in broken or
    reference runs is a collection error of the broken tree (a module-level JUnit entry, e.g.
    a file whose imports the ablation broke). Dropping it would deselect its whole file, and
    with it the targets in that file, which is exactly the breakage the task is about.
    """
    statuses = {"broken": [], "reference": [], **statuses}
    ids = sorted({t for runs_ in statuses.values() for run in runs_ for t in run} - set(dropped))
    clean_ids = {t for run in statuses["clean"] for t in run}

    def outcomes(group: str, test: str) -> set[str]:
        return {run.get(test, "missing") for run in statuses[group]}

    flaky = [t for t in ids if t in clean_ids and any(len(outcomes(g, t)) > 1 for g in statuses)]
    stable = [t for t in ids if t not in flaky]
    passes = {g: {t for t in stable if outcomes(g, t) == {"passed"}} for g in statuses}
    f2p = sorted(t for t in stable if t in passes["clean"] and t in passes["reference"]
                 and "passed" not in outcomes("broken", t))
    p2p = sorted(passes["clean"] & passes["broken"] & passes["reference"])
    wrong_fix = sorted(passes["clean"] - passes["reference"]) if statuses["reference"] else []
    failing_on_clean = {t for t in stable if t in clean_ids} - passes["clean"]
    excluded = sorted(set(flaky) | set(dropped) | failing_on_clean)
    return Classified(tuple(f2p), tuple(p2p), tuple(flaky), tuple(excluded), tuple(wrong_fix))


def suspected_targets(clean: Runs, broken: dict[str, str]) -> list[str]:
    """Tests that pass in every clean run and do not pass in one broken run (`broken`: test id
    -> status; a test it lacks did not run, e.g. its file failed to import): the only ones
    that can become targets."""
    passing = set.intersection(*({t for t, s in status.items() if s == "passed"}
                                 for status, _, _ in clean)) if clean else set()
    return sorted(t for t in passing if broken.get(t) != "passed")


def rerun_files(test_ids: Sequence[str], test_paths: Sequence[str]) -> list[str] | None:
    """The test files that hold `test_ids`, or None when one of them maps to no file (then
    only a full run covers it)."""
    files = {_file_of(t, test_paths) for t in test_ids}
    return None if None in files else sorted(files)


def _file_of(test_id: str, test_paths: Sequence[str]) -> str | None:
    node = node_id(test_id, test_paths)
    return node.split("::")[0] if node else None


def deselected_targets(targets: Sequence[str], excluded: Sequence[str],
                       test_paths: Sequence[str]) -> list[str]:
    """Targets that a `--deselect` of an excluded id would also remove (pytest deselects by
    node-id prefix: a file's id deselects every test in it)."""
    dropped = [n for n in (node_id(t, test_paths) for t in excluded) if n]
    return [t for t in targets
            if any((node_id(t, test_paths) or "") == d
                   or (node_id(t, test_paths) or "").startswith(d + "::") for d in dropped)]


def first_run_drops(clean: Runs, slow_s: float = SLOW_TEST_S) -> list[str]:
    """Tests the first clean run already drops: slow ones (`slow_tests`) and those that did not
    pass (each fails on the clean tree or is flaky: excluded either way). Every later run
    deselects them: a failure's report is what makes a run slow."""
    status, _, _ = clean[0] if clean else ({}, None, {})
    return sorted(set(slow_tests(clean, slow_s)) | {t for t, s in status.items() if s != "passed"})


def slow_tests(clean: Runs, limit: float = SLOW_TEST_S) -> list[str]:
    """Tests slower than `limit` seconds in the first clean run (the only one that runs them:
    `clean_runs` deselects them in the others)."""
    _, _, seconds = clean[0] if clean else ({}, None, {})
    return sorted(t for t, value in seconds.items() if value > limit)


def node_id(test_id: str, test_paths: Sequence[str]) -> str | None:
    """The pytest node id of a JUnit id (`tests.test_x.TestC::test_y` ->
    `tests/test_x.py::TestC::test_y`), or None if no test file matches."""
    classname, _, name = test_id.rpartition("::")
    if not classname:          # a module-level entry (its collection error): the whole file
        classname, name = test_id, ""
    parts = classname.split(".")
    for cut in range(len(parts), 0, -1):
        path = "/".join(parts[:cut]) + ".py"
        if path in test_paths:
            return "::".join([path, *parts[cut:], *([name] if name else [])])
    return None


def pytest_files(paths: Sequence[str]) -> list[str]:
    """The files pytest collects tests from (`test_*.py`, `*_test.py`): what a test command
    names. Helpers and conftest.py under tests/ are imported by them, not collected."""
    return sorted(p for p in paths if p.rsplit("/", 1)[-1].startswith("test_")
                  or p.endswith("_test.py"))


def _write(root: Path, files: dict[str, str | bytes], tests: list[str],
           reference: str | None = None, python: str | None = None,
           deselect: Sequence[str] = (), test_timeout_s: float | None = None) -> Path:
    write_files(root / "repo", files)
    if reference is not None:
        (root / "reference.diff").write_text(reference)
    limits = dict(VALIDATION_LIMITS)
    if test_timeout_s is not None:
        limits["test_timeout_s"] = test_timeout_s
    spec = {"id": root.name, "prompt": "Validation run.", "category": "debug",
            "difficulty": "validation", "limits": limits,
            "test_command": " ".join([VALIDATION_PYTEST, *tests]
                                     + [shlex.quote(f"--deselect={n}") for n in deselect])}
    if python:
        spec["python"] = str(python)
    (root / "task.json").write_text(json.dumps(spec))
    return root


def _grade(env: CodingEnv, task_dir: Path, agent_class
           ) -> tuple[dict[str, str], str | None, dict[str, float]]:
    """(test id -> status, why grading failed or None, test id -> seconds) of one episode."""
    task = environments.load_task(task_dir)
    observation, info = env.reset(options={"task": task})
    agent = agent_class()
    agent.begin(task, observation, info)
    while True:
        observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
        if terminated or truncated:
            break
    if info["infra_failure"] or not info["tests_status"]:
        return {}, "; ".join(info["grading_notes"]) or "no test report", {}
    return info["tests_status"], None, info["test_seconds"]
