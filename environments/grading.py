"""Grades a finished episode: hidden tests in a fresh sandbox, defended against tampering.

Before the test command runs:
- visible tests, conftest.py and test configuration files are restored from the baseline;
  conftest.py and configuration files the agent added anywhere, and modules it added at the
  root that would shadow pytest, are removed;
- the hidden tests are copied in, and every restored or hidden path is mounted read-only over
  itself in the grading sandbox, so code under test can neither edit nor rename them.

The result comes from a JUnit XML report written outside the workspace, never from the
printed log (an agent can print "PASSED"), and it must agree with the exit code (as in
SWE-bench's anti-spoofing check). Only "passed" counts: skipped, xfailed, failed and errored
tests all count as failed, and a command that reports no tests scores zero. A question's
answer must appear in the finish summary as a whole literal (`answer_in`).
"""
from __future__ import annotations

import dataclasses
import math
import os
import re
import stat
import xml.etree.ElementTree as ElementTree
from pathlib import Path, PurePosixPath

from environments.sandbox import WORKSPACE
from environments.task import Task
from environments.workspace import Workspace

# Files that change how pytest collects or runs tests (pytest reads configuration from the
# tests' common directory upwards, conftest.py from every directory on the way).
_TEST_CONFIG_FILES = ("conftest.py", "pytest.ini", "tox.ini", "setup.cfg", "pyproject.toml")
# `python -m pytest` puts the working directory first on sys.path, so these would replace pytest
# (or run code at interpreter start-up) if the agent created them.
_SHADOWING_NAMES = ("pytest.py", "pytest", "_pytest", "pluggy", "py.py", "sitecustomize.py",
                    "usercustomize.py")
_REPORT_NAME = "junit.xml"
_MAX_REPORT_BYTES = 32 << 20
_GRADER_MOUNT = "/grader"


@dataclasses.dataclass(frozen=True)
class Grade:
    """The outcome of grading.

    pass_fraction: passed / reported tests (an answer check counts as one more test).
    tests_status: test id -> passed | failed | error | skipped | xfailed.
    test_seconds: test id -> seconds it took (the report's `time`; what finds slow tests).
    infra_failure: the sandbox failed while grading; the score means nothing.
    notes: human-readable reasons when something was off (missing report, mismatch, timeout).
    """
    pass_fraction: float
    resolved: bool
    tests_status: dict[str, str]
    tests_passed: int
    tests_total: int
    answer_matched: bool | None
    infra_failure: bool
    notes: tuple[str, ...]
    test_output: str
    test_seconds: dict[str, float] = dataclasses.field(default_factory=dict)  # JUnit's times

    @classmethod
    def infrastructure_failure(cls, note: str) -> Grade:
        """The grade of an episode that could not be graded at all."""
        return cls(pass_fraction=0.0, resolved=False, tests_status={}, tests_passed=0,
                   tests_total=0, answer_matched=None, infra_failure=True, notes=(note,),
                   test_output="")


def is_test_path(rel: str) -> bool:
    """Visible-test files: test_*.py, *_test.py, conftest.py, or anything under tests/ or test/."""
    parts = PurePosixPath(rel).parts
    name = parts[-1]
    return (name == "conftest.py" or (name.startswith("test_") and name.endswith(".py"))
            or name.endswith("_test.py") or any(p in ("tests", "test") for p in parts[:-1]))


def answer_in(answer: str, summary: str) -> bool:
    """Whether `summary` states `answer` (a Python repr) as a whole literal: not as part of a
    longer one, so the answer `2` is in "It is 2." but not in "It is 20", "2.5", "-2" or "x2".
    (A plain substring test lets a policy that writes any number containing the digit pass.)"""
    pattern = r"(?<![\w.\-])" + re.escape(answer.strip()) + r"(?!\w|\.\d)"
    return re.search(pattern, summary) is not None


def grade(task: Task, workspace: Workspace, baseline: Path, runner, grader_dir: Path,
          summary: str) -> Grade:
    """Scores the workspace. `grader_dir` is a host directory outside the workspace, writable
    by the sandbox uid, that receives the JUnit report."""
    notes: list[str] = []
    answer_matched = None
    if task.answer is not None:
        answer_matched = answer_in(task.answer, summary)
        if not answer_matched:
            notes.append("the finish summary does not contain the expected answer")
    status: dict[str, str] = {}
    seconds: dict[str, float] = {}
    trusted, output, infra = True, "", False
    if task.test_command is not None:
        protected = _prepare_for_grading(task, workspace, baseline)
        status, trusted, output, infra = _run_tests(task, workspace, runner, grader_dir,
                                                    protected, notes, seconds)
    passed = sum(1 for s in status.values() if s == "passed") if trusted else 0
    total = len(status)
    checks = total + (answer_matched is not None)
    score = passed + bool(answer_matched)
    fraction = score / checks if checks and not infra else 0.0
    resolved = bool(checks) and score == checks and trusted and not infra
    return Grade(pass_fraction=fraction, resolved=resolved, tests_status=status,
                 tests_passed=passed, tests_total=total, answer_matched=answer_matched,
                 infra_failure=infra, notes=tuple(notes), test_output=output,
                 test_seconds=seconds)


def _prepare_for_grading(task: Task, workspace: Workspace, baseline: Path) -> list[str]:
    """Restores and inserts every path the grade depends on; returns them (to mount read-only)."""
    baseline_files = set()
    for dirpath, dirnames, filenames in os.walk(baseline):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            baseline_files.add(os.path.relpath(os.path.join(dirpath, name), baseline))
    protected = sorted(rel for rel in baseline_files
                       if is_test_path(rel) or os.path.basename(rel) in _TEST_CONFIG_FILES)
    for rel in protected:
        workspace.replace_with(rel, baseline / rel)
    for rel in workspace.find_named(frozenset(_TEST_CONFIG_FILES)):
        if rel not in baseline_files:
            workspace.remove(rel)
    for name in _SHADOWING_NAMES:  # only the working directory is on sys.path
        if name not in baseline_files and not (baseline / name).is_dir():
            workspace.remove(name)
    for rel in task.hidden_tests:
        workspace.replace_with(rel, task.hidden_dir / rel)
    return protected + list(task.hidden_tests)


def _run_tests(task: Task, workspace: Workspace, runner, grader_dir: Path, protected: list[str],
               notes: list[str], seconds: dict[str, float]
               ) -> tuple[dict[str, str], bool, str, bool]:
    """Runs the test command; returns (status, report trusted, output tail, infra failure) and
    fills `seconds` with each test's time."""
    report = grader_dir / _REPORT_NAME
    if os.path.lexists(report):
        os.unlink(report)
    isolated = runner.isolated
    report_in_run = f"{_GRADER_MOUNT}/{_REPORT_NAME}" if isolated else str(report)
    env = {"PYTEST_ADDOPTS": f"--junitxml={report_in_run}", "C2JAX_JUNIT_XML": report_in_run}
    mounts = {}
    if isolated:
        # Symlinks cannot be mounted over; they point at restored files or outside (where the
        # sandbox cannot write anyway).
        mounts = {"binds": [(str(grader_dir), _GRADER_MOUNT)],
                  "ro_binds": [(str(workspace.root / rel), f"{WORKSPACE}/{rel}")
                               for rel in protected if not os.path.islink(workspace.root / rel)]}
    # The run's wall-clock timeout bounds it; the per-process CPU limit that stops a spinning
    # tool command would otherwise kill a test suite that needs more CPU time than that.
    result = runner.run(task.test_command, workspace=str(workspace.root),
                        timeout_s=task.limits.test_timeout_s, env=env,
                        cpu_s=math.ceil(task.limits.test_timeout_s), **mounts)
    output = result.output[-20_000:]
    if result.infra_error:
        notes.append(f"infrastructure failure while grading: {result.infra_error}")
        return {}, False, output, True
    if result.timed_out:
        notes.append(f"the test command timed out after {task.limits.test_timeout_s:g} s")
    elif result.output_capped:
        notes.append(f"the test command printed over {result.output_bytes} bytes and was killed")
    status = _read_report(report, notes, seconds)
    # The report and the exit code must agree, or the report is not trusted: code under test
    # runs inside pytest and could write a report of its own.
    trusted = bool(status)
    all_passed = all(s == "passed" for s in status.values())
    if status and all_passed and result.exit_code != 0:
        trusted = False
        shown = "none (killed)" if result.exit_code is None else result.exit_code
        notes.append(f"exit code {shown} contradicts a report where every test passed: "
                     "report rejected")
    elif status and not all_passed and result.exit_code == 0:
        notes.append("exit code 0 although the report shows tests that did not pass")
    if not status:
        notes.append(f"the test command (exit code {result.exit_code}) reported no tests")
    return status, trusted, output, False


def _read_report(report: Path, notes: list[str], seconds: dict[str, float]) -> dict[str, str]:
    """test id -> status from a JUnit XML report (pytest's xunit2 layout); the tests' times
    go into `seconds`."""
    try:
        fd = os.open(report, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}  # missing (or a symlink the code under test planted)
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            notes.append("the test report is not a regular file")
            return {}
        data = f.read(_MAX_REPORT_BYTES + 1)
    if len(data) > _MAX_REPORT_BYTES:
        notes.append("the test report is too large to trust")
        return {}
    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as e:
        notes.append(f"the test report is not valid XML ({e})")
        return {}
    status: dict[str, str] = {}
    for case in root.iter("testcase"):
        test_id = "::".join(p for p in (case.get("classname", ""), case.get("name", "")) if p)
        outcome = "passed"
        for child in case:
            if child.tag == "failure":
                outcome = "failed"
            elif child.tag == "error":
                outcome = "error"
            elif child.tag == "skipped":
                outcome = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
        try:
            seconds[test_id] = seconds.get(test_id, 0.0) + float(case.get("time", 0) or 0)
        except ValueError:
            pass
        # A test id seen twice (a teardown error after a pass) keeps its worst outcome.
        if status.get(test_id, "passed") == "passed":
            status[test_id] = outcome
    return status
