"""Where a policy's answers to value questions leave the runcall pattern.

    python -m experiments.runcall_departures --eval=runs/rl_runcall/eval_before \
        --suite=mini:test

A policy trained on the scripted `runcall` agent's episodes (cursorbench/runcall.py) should
answer a value question with that agent's command, then a finish. For every attempt of an
evaluation directory (the harness's `trajectories.jsonl` and `results.jsonl`, e.g. an
`experiments.rl` run's `eval_before`), this compares the first tool call with the agent's
call for the task, character by character, and counts where the first difference falls:

    resolved                          the attempt passed
    no expression                     the question names no call (a constant by its meaning):
                                      the pattern cannot answer it
    departs in the fixed command      before the expression: the part every answer shares
    departs in the expression         the copy of the call the question names
    departs after the expression      the command's closing part
    command exact, later turn wrong   the command ran as written; the finish did not copy it

The split says what is left to learn: the shared command (one behaviour, the same in every
task) or the copy of each task's expression (induction). The tables it prints are in
BENCHMARKS.md ("Dynamic sampling, the learner's temperature ...").
"""
from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from environments.tool_format import END_TOOL_CALL, TOOL_CALL, tool_call_body

OUTCOMES = ("resolved", "no expression", "departs in the fixed command",
            "departs in the expression", "departs after the expression",
            "command exact, later turn wrong")


def departure(expression: str | None, first_action: str) -> str:
    """Where `first_action` (the model's text of its first turn) first differs from the runcall
    agent's call for `expression` (None: a question it cannot answer); one of OUTCOMES[1:]."""
    from cursorbench import runcall
    if expression is None:
        return "no expression"
    want = tool_call_body("run_terminal", {"cmd": runcall.command_for(expression)})
    got = first_action.split(TOOL_CALL, 1)[-1].split(END_TOOL_CALL, 1)[0]
    if got == want:
        return "command exact, later turn wrong"
    same = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want),
                                                                             len(got)))
    escaped = json.dumps(expression, ensure_ascii=False)[1:-1]    # as it stands in the JSON
    start = want.index(" `" + escaped) + 2
    end = start + len(escaped)
    if same < start:
        return "departs in the fixed command"
    return "departs in the expression" if same < end else "departs after the expression"


def count(eval_dir: Path, suite: str) -> collections.Counter:
    """Outcome counts over every attempt in `eval_dir` on the understanding tasks of `suite`."""
    from cursorbench import runcall, suites
    from cursorbench.harness import read_jsonl
    tasks = {t.id: t for t in suites.resolve(suite, categories=("understanding",)).tasks}
    resolved = {(r["task_id"], r["attempt"]): r["resolved"]
                for r in read_jsonl(eval_dir / "results.jsonl")}
    outcomes = collections.Counter()
    for t in read_jsonl(eval_dir / "trajectories.jsonl"):
        if t["task_id"] not in tasks:
            raise SystemExit(f"error: {eval_dir} holds task {t['task_id']}, which is not an "
                             f"understanding task of --suite={suite}")
        if resolved.get((t["task_id"], t["attempt"])):
            outcomes["resolved"] += 1
            continue
        first = t["steps"][0]["action"]["text"] if t["steps"] else ""
        outcomes[departure(runcall.expression_of(tasks[t["task_id"]].prompt), first)] += 1
    return outcomes


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval", required=True, type=Path, action="append",
                        help="an evaluation directory (repeat to compare several)")
    parser.add_argument("--suite", required=True, help="the suite it evaluated, e.g. mini:test")
    args = parser.parse_args(argv)
    counts = [count(d, args.suite) for d in args.eval]
    print("| outcome | " + " | ".join(str(d) for d in args.eval) + " |")
    print("|---|" + "---:|" * len(counts))
    for outcome in OUTCOMES:
        cells = [f"{c[outcome]} ({c[outcome] / max(sum(c.values()), 1):.1%})" for c in counts]
        print(f"| {outcome} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
