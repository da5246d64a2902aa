"""Validating a real-suite candidate by running its tests through the environment, 3 times each.

The candidate is written as two task directories (the untouched package, and the broken tree
with the candidate's tests, every test visible) and graded by the environment's own grader
with scripted agents:

- clean: the untouched package and its own tests, NullAgent, `runs` times;
- broken: the broken tree, NullAgent, `runs` times;
- reference: the broken tree, the environment's OracleAgent (applies reference.diff), `runs`.

A test whose status varies within any of the three groups is flaky and dropped. Target
(fail-to-pass) tests pass in every clean and reference run and fail in every broken run;
pass-to-pass tests pass in all of them. A candidate is rejected when a stable test that passes
on the untouched package fails with the reference fix (the fix is wrong), when no stable test
is a target, or when grading itself failed. (Test ids survive a refactor's rename: the tests'
own names do not change.)
"""
from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import environments
from environments import CodingEnv, SandboxConfig

from cursorbench.real.generators import Candidate
from cursorbench.taskdir import PYTEST, unified_diff, write_files

#: Budgets of one validation run (real test suites take longer than mini ones).
VALIDATION_LIMITS = {"max_steps": 5, "test_timeout_s": 300, "tool_timeout_s": 300}


@dataclasses.dataclass(frozen=True)
class Validation:
    """The verdict. Test ids are the grader's (JUnit `classname::name`)."""
    accepted: bool
    reasons: tuple[str, ...]
    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]
    flaky: tuple[str, ...]
    excluded: tuple[str, ...]      # flaky or failing on the clean tree: deselected in the task


def validate(candidate: Candidate, *, runs: int = 3,
             sandbox: str | SandboxConfig = "bwrap") -> Validation:
    with tempfile.TemporaryDirectory(prefix="c2jax-real-validate-") as tmp:
        clean = _write(Path(tmp) / "clean", candidate.baseline, sorted(candidate.tests))
        broken = _write(Path(tmp) / "broken", {**candidate.broken, **candidate.tests},
                        sorted(candidate.tests),
                        reference=unified_diff(candidate.broken, candidate.solved))
        env = CodingEnv(sandbox=sandbox)
        try:
            groups = {
                "clean": [_grade(env, clean, environments.NullAgent) for _ in range(runs)],
                "broken": [_grade(env, broken, environments.NullAgent) for _ in range(runs)],
                "reference": [_grade(env, broken, environments.OracleAgent)
                              for _ in range(runs)],
            }
        finally:
            env.close()
    failures = [why for runs_ in groups.values() for status, why in runs_ if why]
    if failures:
        return Validation(False, (f"grading failed: {failures[0]}",), (), (), (), ())
    statuses = {name: [status for status, _ in runs_] for name, runs_ in groups.items()}
    ids = sorted({t for runs_ in statuses.values() for run in runs_ for t in run})

    def outcomes(group: str, test: str) -> set[str]:
        return {run.get(test, "missing") for run in statuses[group]}

    flaky = [t for t in ids if any(len(outcomes(g, t)) > 1 for g in statuses)]
    stable = [t for t in ids if t not in flaky]
    passes = {g: {t for t in stable if outcomes(g, t) == {"passed"}} for g in statuses}
    f2p = sorted(t for t in stable if t in passes["clean"] and t in passes["reference"]
                 and "passed" not in outcomes("broken", t))
    p2p = sorted(passes["clean"] & passes["broken"] & passes["reference"])
    wrong_fix = sorted(passes["clean"] - passes["reference"])
    excluded = sorted(set(flaky) | (set(stable) - passes["clean"]))
    reasons = []
    if wrong_fix:
        reasons.append(f"the reference fix fails {len(wrong_fix)} test(s) that pass on the "
                       f"clean tree: {', '.join(wrong_fix[:5])}")
    if not f2p:
        reasons.append(f"no test fails in all {runs} broken runs and passes in every clean "
                       f"and reference run" + (f" ({len(flaky)} flaky dropped)" if flaky else ""))
    return Validation(not reasons, tuple(reasons), tuple(f2p), tuple(p2p), tuple(flaky),
                      tuple(excluded))


def _write(root: Path, files: dict[str, str], tests: list[str],
           reference: str | None = None) -> Path:
    write_files(root / "repo", files)
    if reference is not None:
        (root / "reference.diff").write_text(reference)
    spec = {"id": root.name, "prompt": "Validation run.", "category": "debug",
            "difficulty": "validation", "limits": VALIDATION_LIMITS,
            "test_command": f"{PYTEST} {' '.join(tests)}"}
    (root / "task.json").write_text(json.dumps(spec))
    return root


def _grade(env: CodingEnv, task_dir: Path, agent_class) -> tuple[dict[str, str], str | None]:
    """(test id -> status, why grading failed or None) of one episode."""
    task = environments.load_task(task_dir)
    observation, info = env.reset(options={"task": task})
    agent = agent_class()
    agent.begin(task, observation, info)
    while True:
        observation, _, terminated, truncated, info = env.step(agent.act(observation, info))
        if terminated or truncated:
            break
    if info["infra_failure"] or not info["tests_status"]:
        return {}, "; ".join(info["grading_notes"]) or "no test report"
    return info["tests_status"], None
