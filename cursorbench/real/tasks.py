"""Validated real-suite candidates as task directories, and building a suite from packages.

The task's workspace is the broken source plus the test files that hold no target test;
the files that do are hidden (copied in only to grade, as SWE-smith does), so the agent
cannot read what is checked. The test command runs every test file and deselects the
validation's excluded tests (flaky, or failing on the clean tree). The environment adds the
rest of the anti-cheat: a fresh one-commit git history, test files and conftest.py restored
before grading, skipped targets counted as failed.

Prompts are ambiguous by construction and never name tests or lines: L0 names the package,
L1 the modules involved, L2 the functions.
"""
from __future__ import annotations

import dataclasses
import json
import math
import random
import shlex
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from environments.diffs import count_changed_lines

from cursorbench.real import generators
from cursorbench.real.generators import Candidate
from cursorbench.real.source import Package
from cursorbench.real.validate import (REAL_PYTEST, Validation, clean_runs, node_id,
                                       pytest_files, validate)
from cursorbench.taskdir import unified_diff, write_files

#: The share of a build's seeds each generator gets. Ablations and moves are CursorBench-sized
#: (120-250 changed lines); mutations and renames are small, so they get half the seeds, which
#: keeps the suite's median change in that range while every kind is present.
SEED_SHARE = {"feature_ablation": 1.0, "module_move": 1.0, "combined_mutations": 0.5,
              "refactor_reversal": 0.5}
LIMITS = {"max_steps": 100, "max_wall_s": 1800, "tool_timeout_s": 120, "test_timeout_s": 300}
_CATEGORIES = {"feature_ablation": "feature", "combined_mutations": "debug",
               "refactor_reversal": "refactor", "module_move": "refactor"}


@dataclasses.dataclass(frozen=True)
class BuildReport:
    """What a build did: one manifest entry per candidate (with its validation `seconds`),
    the accepted tasks' sizes, and the mean wall seconds of a clean grading of each package."""
    manifest: list[dict[str, Any]]
    reference_lines: list[int]
    clean_run_seconds: dict[str, float] = dataclasses.field(default_factory=dict)

    def size_distribution(self) -> dict[str, float] | None:
        lines = self.reference_lines
        if not lines:
            return None
        return {"n": len(lines), "min": min(lines), "median": statistics.median(lines),
                "max": max(lines)}


def write_task(out: Path, candidate: Candidate, validation: Validation, level: str,
               python: str | None = None) -> Path:
    """Writes an accepted candidate as a task directory under `out`; returns it."""
    if not validation.accepted:
        raise ValueError(f"candidate was rejected: {'; '.join(validation.reasons)}")
    task_id = f"real-{candidate.package}-{candidate.generator}-{candidate.seed}"
    test_paths = sorted(candidate.tests)      # where node ids may point (helpers included)
    targets = {node_id(t, test_paths) for t in validation.fail_to_pass}
    hidden_files = sorted({n.split("::")[0] for n in targets if n})
    visible = {p: t for p, t in candidate.tests.items() if p not in hidden_files}
    deselect = sorted(filter(None, (node_id(t, test_paths) for t in validation.excluded)))
    command = " ".join([REAL_PYTEST, *pytest_files(test_paths)]
                       + [shlex.quote(f"--deselect={n}") for n in deselect])
    diff = unified_diff(candidate.broken, candidate.solved)
    added, removed = count_changed_lines(diff)
    root = out / task_id
    write_files(root / "repo", {**candidate.broken, **visible, **candidate.data})
    write_files(root / "hidden", {p: candidate.tests[p] for p in hidden_files})
    (root / "reference.diff").write_text(diff)
    spec = {
        "id": task_id, "prompt": prompt(candidate, level, random.Random(task_id)),
        "category": _CATEGORIES[candidate.generator],
        "difficulty": "hard" if added + removed >= 120 else "medium",
        "test_command": command, "hidden_tests": hidden_files, "limits": LIMITS,
        "suite": "real", "package": candidate.package, "kind": candidate.generator,
        "seed": candidate.seed, "prompt_level": level, "reference_lines": added + removed,
        "spec": candidate.spec, "fail_to_pass": len(validation.fail_to_pass),
        "pass_to_pass": len(validation.pass_to_pass),
    }
    if python:
        spec["python"] = str(python)
    (root / "task.json").write_text(json.dumps(spec, indent=1) + "\n")
    return root


def prompt(candidate: Candidate, level: str, rng: random.Random) -> str:
    spec, package = candidate.spec, candidate.package
    modules = ", ".join(f"`{m}`" for m in spec.get("modules", []))
    if candidate.generator == "feature_ablation":
        return {"L0": f"Parts of {package} seem unfinished; make it work.",
                "L1": f"Some functionality in {modules} was never finished. Please complete it.",
                "L2": "These are not implemented yet: " + ", ".join(
                    f"`{e}`" for e in spec["entities"]) + ". Implement them."}[level]
    if candidate.generator == "combined_mutations":
        functions = sorted({m["function"] for m in spec["mutations"]})
        paths = sorted({m["path"] for m in spec["mutations"]})
        return {"L0": rng.choice([f"{package} misbehaves in several places. Please fix it.",
                                  f"Users report wrong results all over {package}."]),
                "L1": "Several things are broken in " + ", ".join(f"`{p}`" for p in paths)
                      + ". Please fix them.",
                "L2": "These return wrong results: " + ", ".join(f"`{f}`" for f in functions)
                      + ". Please fix them."}[level]
    if candidate.generator == "module_move":
        move = spec["moves"]
        names = ", ".join(f"`{f}`" for f in move["functions"])
        return {"L0": f"`{move['from']}` is too big: {names} belong in a module of their own, "
                      f"`{move['to']}`.",
                "L1": f"Move {names} from `{move['from']}` into a new module `{move['to']}`; "
                      "everything that uses them must keep working.",
                "L2": f"Create `{move['to']}` and move {names} there from `{move['from']}` "
                      f"(with the imports they need); keep `{move['from']}` re-exporting them "
                      "so existing imports still work."}[level]
    (old, new), = spec["renames"].items()
    return {"L0": f"`{old}` should be called `{new}`.",
            "L1": f"Rename `{old}` to `{new}` everywhere in {package}.",
            "L2": f"Rename the function `{old}` to `{new}` and update {modules} and every other "
                  "use; the old name should no longer exist."}[level]


def build(packages: Sequence[Package], out: str | Path, *, seeds: Sequence[int] = (0,),
          runs: int = 3, sandbox="bwrap", pythons: Mapping[str, str] | None = None,
          generators_: Sequence[str] = generators.GENERATORS, workers: int = 1,
          progress: Callable[[dict[str, Any]], None] | None = None) -> BuildReport:
    """Generates, validates and writes tasks for every package x generator x seed (each
    generator takes its `SEED_SHARE` of the seeds, the first ones).

    pythons: {package name: the venv its tests run in} (default: the project's interpreter).
    workers: candidates validated at once (each runs its own sandboxes).
    """
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    pythons = dict(pythons or {})
    seeds = list(seeds)
    jobs = [(package, generator, seed) for package in packages for generator in generators_
            for seed in seeds[:math.ceil(len(seeds) * SEED_SHARE.get(generator, 1.0))]]

    def clean_of(package: Package):
        started = time.monotonic()
        runs_ = clean_runs({**package.files, **package.data}, pytest_files(package.tests),
                           runs=runs, sandbox=sandbox, python=pythons.get(package.name))
        return runs_, (time.monotonic() - started) / runs

    def run(job) -> dict[str, Any]:
        package, generator, seed = job
        started = time.monotonic()
        entry: dict[str, Any] = {"package": package.name, "generator": generator, "seed": seed}
        candidate = generators.generate(package, generator, seed)
        if candidate is None:
            entry.update(accepted=False, reasons=["nothing to generate"],
                         seconds=round(time.monotonic() - started, 1))
            return entry
        python = pythons.get(package.name)
        verdict = validate(candidate, runs=runs, sandbox=sandbox, python=python,
                           clean=clean[package.name][0])
        entry.update(accepted=verdict.accepted, reasons=list(verdict.reasons),
                     spec=candidate.spec)
        if verdict.accepted:
            level = random.Random(f"{package.name}/{generator}/{seed}").choice(
                ("L0", "L1", "L2"))
            path = write_task(out, candidate, verdict, level, python=python)
            entry["task"] = path.name
            entry["reference_lines"] = json.loads((path / "task.json").read_text()
                                                  )["reference_lines"]
        entry["seconds"] = round(time.monotonic() - started, 1)
        return entry

    with ThreadPoolExecutor(max(1, workers)) as pool:
        # Each package's clean grading first (all at once), then the candidates of the
        # packages with the slowest suites first: the longest jobs do not end up alone at the
        # end of the build while the other workers idle.
        clean = dict(zip([p.name for p in packages], pool.map(clean_of, packages)))
        order = sorted(range(len(jobs)), key=lambda i: -clean[jobs[i][0].name][1])
        results = {}
        for i, entry in zip(order, pool.map(run, [jobs[i] for i in order])):
            results[i] = entry
            if progress:
                progress(entry)
    manifest = [results[i] for i in range(len(jobs))]
    (out / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return BuildReport(manifest, [e["reference_lines"] for e in manifest if e.get("task")],
                       {name: round(seconds, 1) for name, (_, seconds) in clean.items()})
