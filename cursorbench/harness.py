"""The benchmark harness: every task K times, results written as attempts finish.

`run(tasks, agent_factory, out_dir, k=..., workers=...)` runs attempt 0..K-1 of every task on
`workers` environments (one CodingEnv and one thread each: an episode waits on sandboxed
subprocesses, so threads suffice) and appends to

- `OUT/results.jsonl`: one record per attempt (`attempt_record`), written when it finishes;
- `OUT/trajectories.jsonl`: the same attempt's steps (action, observation, error flag), the
  agent's `messages` if it keeps them, and the final diff, test statuses and grading notes;

then writes `OUT/summary.json` (`metrics.summarize`). A rerun skips attempts that have a
record, except infra failures, which are retried (their score meant nothing); a line cut off
by a crash is dropped. `OUT/run.json` pins the suite and agent: rerunning a directory with
another one is refused instead of mixing results.
"""
from __future__ import annotations

import dataclasses
import json
import os
import queue
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from environments import CodingEnv, SandboxConfig
from environments.task import Task

from cursorbench import metrics

RESULTS = "results.jsonl"
TRAJECTORIES = "trajectories.jsonl"
SUMMARY = "summary.json"
RUN = "run.json"


class RunDirError(ValueError):
    """The output directory holds another run (a different suite or agent)."""


@dataclasses.dataclass
class _Attempt:
    task: Task
    attempt: int


def run(tasks: Sequence[Task], agent_factory: Callable[[int], Any], out_dir: str | Path, *,
        k: int = 1, workers: int = 1, suite: str = "", agent: str = "",
        sandbox: str | SandboxConfig = "bwrap", progress: bool = True) -> dict[str, Any]:
    """Runs the missing attempts and returns the summary (also written to OUT/summary.json)."""
    if k < 1 or workers < 1:
        raise ValueError(f"k and workers must be at least 1, got k={k}, workers={workers}")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    _pin_run(out, suite, agent)
    done = {(r["task_id"], r["attempt"]) for r in read_jsonl(out / RESULTS)
            if not r["infra_failure"]}
    for name in (RESULTS, TRAJECTORIES):
        _drop_partial_line(out / name)
    jobs = [_Attempt(task, a) for a in range(k) for task in tasks
            if (task.id, a) not in done]
    pending: queue.SimpleQueue = queue.SimpleQueue()
    for job in jobs:
        pending.put(job)
    lock = threading.Lock()
    bar = tqdm(total=len(jobs), desc=f"{agent or 'agent'} on {suite or 'suite'}", unit="ep",
               disable=not progress or not jobs, dynamic_ncols=True)
    tally = {"resolved": 0, "finished": 0, "infra": 0}

    def worker() -> None:
        env = CodingEnv(sandbox=sandbox)
        try:
            while True:
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
                record, trace = run_attempt(env, job.task, job.attempt, agent_factory)
                with lock:
                    _append(out / TRAJECTORIES, trace)
                    _append(out / RESULTS, record)  # the record marks the attempt done
                    tally["finished"] += 1
                    tally["resolved"] += record["resolved"]
                    tally["infra"] += record["infra_failure"]
                    bar.set_postfix(resolved=f"{tally['resolved']}/{tally['finished']}",
                                    infra=tally["infra"], refresh=False)
                    bar.update(1)
        finally:
            env.close()

    threads = [threading.Thread(target=worker, name=f"cursorbench-{i}", daemon=True)
               for i in range(min(workers, max(len(jobs), 1)))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    bar.close()
    task_ids = {t.id for t in tasks}
    records = [r for r in read_jsonl(out / RESULTS) if r["task_id"] in task_ids]
    summary = {"suite": suite, "agent": agent, **metrics.summarize(records, k)}
    (out / SUMMARY).write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def run_attempt(env: CodingEnv, task: Task, attempt: int,
                agent_factory: Callable[[int], Any]) -> tuple[dict, dict]:
    """One episode: (the attempt's record, its trajectory). Never raises: a harness or agent
    exception becomes an infra failure with the traceback as its error."""
    started = time.monotonic()
    steps: list[dict[str, Any]] = []
    final: dict[str, Any] = {}
    agent = None
    error = None
    try:
        observation, info = env.reset(seed=attempt, options={"task": task})
        agent = agent_factory(attempt)
        if hasattr(agent, "run"):
            agent.run(_RecordingEnv(env, steps, final), task, observation, info)
            if not final:
                raise RuntimeError("the agent's run() returned before the episode ended")
        else:
            agent.begin(task, observation, info)
            recorder = _RecordingEnv(env, steps, final)
            while not final:
                observation, *_, info = recorder.step(agent.act(observation, info))
    except Exception:  # one broken episode must not take the run down; it is reported
        error = traceback.format_exc(limit=8)
    info = final.get("info", {})
    components = info.get("reward_components", {})
    infra = error is not None or bool(info.get("infra_failure"))
    record = attempt_record(task, attempt)
    record.update({
        "resolved": bool(info.get("resolved")) and not infra,
        "reward": final.get("reward", 0.0),
        "pass_fraction": info.get("pass_fraction", 0.0),
        "infra_failure": infra,
        "error": error,
        "termination": info.get("termination"),
        "steps": len(steps),
        "tool_errors": components.get("tool_errors", 0),
        "output_tokens": components.get("output_tokens"),
        "action_chars": sum(s["action_chars"] for s in steps),
        "diff_lines": components.get("diff_lines", 0),
        "diff_files": components.get("diff_files", 0),
        "tests_passed": components.get("tests_passed", 0),
        "tests_total": components.get("tests_total", 0),
        "elapsed_s": round(time.monotonic() - started, 3),
    })
    trace = {"task_id": task.id, "attempt": attempt,
             "steps": [{k: v for k, v in s.items() if k != "action_chars"} for s in steps],
             "messages": getattr(agent, "messages", None),
             "termination": info.get("termination"), "tests_status": info.get("tests_status"),
             "grading_notes": info.get("grading_notes"), "diff": info.get("diff"),
             "summary": info.get("summary"), "error": error}
    return record, trace


def attempt_record(task: Task, attempt: int) -> dict[str, Any]:
    """The fields of a result record that describe the task (the rest describe the episode).

    Task fields the generators add (kind, prompt_level, reference_lines, ...) come from
    task.json's extra fields when present.
    """
    extra = task.extra
    return {"task_id": task.id, "attempt": attempt, "category": task.category,
            "difficulty": task.difficulty, "kind": extra.get("kind"),
            "prompt_level": extra.get("prompt_level"), "suite": extra.get("suite"),
            "reference_lines": extra.get("reference_lines")}


class _RecordingEnv:
    """Passes steps to the env and records them; what `run(env)` agents get as `env`."""

    def __init__(self, env: CodingEnv, steps: list, final: dict):
        self.env, self.steps, self.final = env, steps, final

    def step(self, action: Any):
        if self.final:
            raise RuntimeError("step() after the episode ended")
        observation, reward, terminated, truncated, info = self.env.step(action)
        self.steps.append({"action": action, "observation": observation["content"],
                           "is_error": observation["is_error"],
                           "action_chars": len(action) if isinstance(action, str)
                           else len(json.dumps(action, ensure_ascii=False))})
        if terminated or truncated:
            self.final.update(reward=reward, info=info)
        return observation, reward, terminated, truncated, info


def _pin_run(out: Path, suite: str, agent: str) -> None:
    path = out / RUN
    if path.exists():
        pinned = json.loads(path.read_text())
        if (pinned.get("suite"), pinned.get("agent")) != (suite, agent):
            raise RunDirError(
                f"{out} holds a run of agent {pinned.get('agent')!r} on suite "
                f"{pinned.get('suite')!r}; rerun that, or pass another --out for agent "
                f"{agent!r} on suite {suite!r}")
        return
    path.write_text(json.dumps({"suite": suite, "agent": agent,
                                "started": time.strftime("%Y-%m-%dT%H:%M:%S")}) + "\n")


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every complete line of a JSONL file (a line cut off by a crash is skipped)."""
    if not path.exists():
        return []
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.endswith("\n"):
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
    return records


def _drop_partial_line(path: Path) -> None:
    """Truncates a JSONL file after its last newline, so appends start on a fresh line."""
    if not path.exists():
        return
    with open(path, "rb+") as f:
        data = f.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            f.truncate(end)


def _append(path: Path, record: dict[str, Any]) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())
