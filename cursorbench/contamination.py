"""Contamination check: how much of each task's solution already appears in a training corpus.

    python -m cursorbench.contamination --suite=mini:test --corpus=DIR [--n=8] [--threshold=0.5]

A task's solution text is the post-image of its reference diff's hunks (the fixed code with
its context lines), or its answer for an understanding task. Both it and every UTF-8 file
under the corpus directory are split into tokens (identifiers, numbers, single punctuation
marks); the task's overlap is the share of its token n-grams that occur anywhere in the
corpus. Tasks at or above the threshold are flagged: a model may have seen their solution.

The corpus is streamed file by file against the (small) set of solution n-grams, so a corpus
of any size fits in memory.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from environments.task import Task

from cursorbench import suites

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+(?:\.\d+)?|[^\sA-Za-z0-9_]")
_MAX_FILE_BYTES = 16 << 20


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text)


def ngrams(items: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(items[i:i + n]) for i in range(len(items) - n + 1)}


def solution_text(task: Task) -> str:
    """The post-image of the reference diff's hunks, else the answer, else ''."""
    if task.reference_diff:
        lines = []
        for line in task.reference_diff.splitlines():
            if line.startswith(("+++", "---", "diff ", "@@", "\\", "new file", "deleted file")):
                continue
            if line.startswith(("+", " ")):
                lines.append(line[1:])
        return "\n".join(lines)
    return task.answer or ""


def corpus_files(corpus: str | Path) -> Iterable[Path]:
    """Regular files under the corpus (hidden directories such as .git skipped)."""
    for dirpath, dirnames, filenames in os.walk(corpus):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            yield Path(dirpath) / name


def check(tasks: Sequence[Task], corpus: str | Path, *, n: int = 8,
          threshold: float = 0.5) -> dict[str, Any]:
    """Per-task overlap with the corpus, the flagged tasks and a summary."""
    if not Path(corpus).is_dir():
        raise ValueError(f"corpus {corpus} is not a directory")
    wanted = {task.id: ngrams(tokens(solution_text(task)), n) for task in tasks}
    needed = set().union(*wanted.values()) if wanted else set()
    seen: set[tuple[str, ...]] = set()
    scanned = 0
    for path in corpus_files(corpus):
        try:
            if path.stat().st_size > _MAX_FILE_BYTES:
                continue
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue  # binary or unreadable: not text a model trains on
        scanned += 1
        seen |= ngrams(tokens(text), n) & needed
    per_task = {}
    for task_id, grams in wanted.items():
        per_task[task_id] = {"ngrams": len(grams),
                             "overlap": len(grams & seen) / len(grams) if grams else None}
    measured = [v["overlap"] for v in per_task.values() if v["overlap"] is not None]
    flagged = sorted(t for t, v in per_task.items()
                     if v["overlap"] is not None and v["overlap"] >= threshold)
    return {"n": n, "threshold": threshold, "corpus": str(corpus), "files_scanned": scanned,
            "tasks": len(tasks), "tasks_measured": len(measured),
            "mean_overlap": sum(measured) / len(measured) if measured else None,
            "flagged": flagged, "per_task": per_task}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cursorbench.contamination",
                                     description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True, help="mini:SPLIT[:N], humaneval or a path")
    parser.add_argument("--corpus", required=True, help="directory of training text")
    parser.add_argument("--n", type=int, default=8, help="n-gram length in tokens (default 8)")
    parser.add_argument("--threshold", type=float, default=0.5,
                        help="flag tasks with at least this overlap (default 0.5)")
    parser.add_argument("--out", default=None, help="write the full result as JSON here")
    args = parser.parse_args(argv)
    try:
        suite = suites.resolve(args.suite)
        result = check(suite.tasks, args.corpus, n=args.n, threshold=args.threshold)
    except (ValueError, suites.SuiteError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    shown = {k: v for k, v in result.items() if k != "per_task"}
    print(json.dumps(shown, indent=1))
    return 1 if result["flagged"] else 0


if __name__ == "__main__":
    sys.exit(main())
