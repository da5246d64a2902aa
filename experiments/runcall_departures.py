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
task) or the copy of each task's expression (induction). A last row gives the copy alone: of
the attempts whose command was exact up to the expression, the share that copied it too
(resolved, or departing only after it), averaged over the tasks every directory reaches, so
policies are compared on the same questions. The tables it prints are in
BENCHMARKS.md ("Dynamic sampling, the learner's temperature ...").
"""
from __future__ import annotations

import argparse
import collections
import json
from pathlib import Path

from cursorbench import runcall, suites
from cursorbench.harness import read_jsonl
from environments.tool_format import END_TOOL_CALL, TOOL_CALL, tool_call_body

OUTCOMES = ("resolved", "no expression", "departs in the fixed command",
            "departs in the expression", "departs after the expression",
            "command exact, later turn wrong")


def departure(expression: str | None, first_action: str) -> str:
    """Where `first_action` (the model's text of its first turn) first differs from the runcall
    agent's call for `expression` (None: a question it cannot answer); one of OUTCOMES[1:]."""
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


#: Outcomes of attempts whose command was exact up to the expression, and of those, the ones
#: that also copied the expression.
REACHED = OUTCOMES[:1] + OUTCOMES[3:]
COPIED = OUTCOMES[:1] + OUTCOMES[4:]


def outcomes(eval_dir: Path, suite: str) -> dict[str, list[str]]:
    """Every attempt's outcome in `eval_dir`, by task id (understanding tasks of `suite`)."""
    tasks = {t.id: t for t in suites.resolve(suite, categories=("understanding",)).tasks}
    resolved = {(r["task_id"], r["attempt"]): r["resolved"]
                for r in read_jsonl(eval_dir / "results.jsonl")}
    by_task = collections.defaultdict(list)
    for t in read_jsonl(eval_dir / "trajectories.jsonl"):
        if t["task_id"] not in tasks:
            raise SystemExit(f"error: {eval_dir} holds task {t['task_id']}, which is not an "
                             f"understanding task of --suite={suite}")
        if resolved.get((t["task_id"], t["attempt"])):
            by_task[t["task_id"]].append("resolved")
            continue
        first = t["steps"][0]["action"]["text"] if t["steps"] else ""
        expression = runcall.expression_of(tasks[t["task_id"]].prompt)
        by_task[t["task_id"]].append(departure(expression, first))
    return dict(by_task)


def copy_rate(by_task: dict[str, list[str]], task_ids) -> float:
    """Mean over `task_ids` of the share of attempts that copied the expression, among those
    whose command was exact up to it."""
    rates = []
    for task_id in task_ids:
        reached = [o for o in by_task[task_id] if o in REACHED]
        rates.append(sum(o in COPIED for o in reached) / len(reached))
    return sum(rates) / max(len(rates), 1)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval", required=True, type=Path, action="append",
                        help="an evaluation directory (repeat to compare several)")
    parser.add_argument("--suite", required=True, help="the suite it evaluated, e.g. mini:test")
    args = parser.parse_args(argv)
    runs = [outcomes(d, args.suite) for d in args.eval]
    counts = [collections.Counter(o for attempts in run.values() for o in attempts)
              for run in runs]
    print("| outcome | " + " | ".join(str(d) for d in args.eval) + " |")
    print("|---|" + "---:|" * len(counts))
    for outcome in OUTCOMES:
        cells = [f"{c[outcome]} ({c[outcome] / max(sum(c.values()), 1):.1%})" for c in counts]
        print(f"| {outcome} | " + " | ".join(cells) + " |")
    # The copy itself, on the same tasks in every directory: those where some attempt had the
    # command exact up to the expression in each.
    common = [t for t in runs[0] if all(any(o in REACHED for o in run.get(t, ()))
                                        for run in runs)]
    cells = [f"{copy_rate(run, common):.1%}" for run in runs]
    print(f"| expression copied, given the command up to it (mean over the {len(common)} tasks "
          "that reach it in every directory) | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
