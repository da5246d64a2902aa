"""Benchmark metrics: unbiased pass@k, mean@1 with a bootstrap CI, and the run summary.

Definitions (n attempts of a task, c of them resolved, infra failures left out of n):

- pass@k: the unbiased estimator of Chen et al. 2021, 1 - C(n-c, k) / C(n, k), averaged over
  tasks with n >= k; computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i), which never forms the huge
  binomials.
- mean@1: the mean over tasks of c/n (= pass@1); its 95% CI is a percentile bootstrap over
  tasks.
- mean@K: the accuracy of attempt j over tasks, averaged over j = 0..K-1, with the standard
  deviation over j (how much one run of the benchmark moves).
- best_of_k: the share of tasks with at least one resolved attempt (oracle best-of-K), with
  the same bootstrap CI over tasks.
- infra_failure_rate: infra-failed attempts / all attempts; they are excluded from the scores
  (a sandbox crash is not the agent's zero) and reported instead.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

#: Per-attempt fields the summary breaks accuracy down by.
BREAKDOWNS = ("category", "prompt_level", "difficulty", "kind")
_BOOTSTRAP_SAMPLES = 2000


def pass_at_k(n: int, c: int, k: int) -> float:
    """Probability that at least one of k attempts drawn from n (c correct) is correct."""
    if not 0 <= c <= n or k < 1 or k > n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def bootstrap_ci(values: Sequence[float], *, level: float = 0.95,
                 samples: int = _BOOTSTRAP_SAMPLES, seed: int = 0) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean (resampling the values with replacement)."""
    if not values:
        return (float("nan"), float("nan"))
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, len(data), size=(samples, len(data)))].mean(axis=1)
    tail = (1.0 - level) / 2
    return float(np.quantile(means, tail)), float(np.quantile(means, 1.0 - tail))


def latest_records(records: Iterable[Mapping[str, Any]], k: int) -> list[Mapping[str, Any]]:
    """The last record of each (task, attempt) with attempt < k (reruns append, later wins)."""
    latest: dict[tuple[str, int], Mapping[str, Any]] = {}
    for record in records:
        if record["attempt"] < k:
            latest[(record["task_id"], record["attempt"])] = record
    return [latest[key] for key in sorted(latest)]


def summarize(records: Iterable[Mapping[str, Any]], k: int) -> dict[str, Any]:
    """The run's summary.json from its per-attempt records (see `harness.attempt_record`)."""
    records = latest_records(records, k)
    scored = [r for r in records if not r["infra_failure"]]
    summary: dict[str, Any] = {"k": k, "n_attempts": len(records)}
    summary.update(_scores(scored, k))
    summary["n_tasks_total"] = len({r["task_id"] for r in records})
    summary["infra_failures"] = len(records) - len(scored)
    summary["infra_failure_rate"] = (len(records) - len(scored)) / len(records) if records else 0.0
    summary["cost"] = _costs(scored)
    summary["breakdowns"] = {
        field: {str(value): _scores(group, k, with_ci=False)
                for value, group in sorted(_group(scored, field).items(),
                                           key=lambda item: str(item[0]))}
        for field in BREAKDOWNS if any(r.get(field) is not None for r in scored)}
    return summary


def _scores(records: Sequence[Mapping[str, Any]], k: int, with_ci: bool = True
            ) -> dict[str, Any]:
    per_task: dict[str, list[bool]] = defaultdict(list)
    for r in records:
        per_task[r["task_id"]].append(bool(r["resolved"]))
    rates = [sum(v) / len(v) for v in per_task.values()]
    out: dict[str, Any] = {"n_tasks": len(per_task)}
    out["mean@1"] = statistics.fmean(rates) if rates else None
    if with_ci:
        low, high = bootstrap_ci(rates)
        out["mean@1_ci95"] = [low, high] if rates else None
    out["pass@k"] = {}
    for j in range(1, k + 1):
        eligible = [(len(v), sum(v)) for v in per_task.values() if len(v) >= j]
        out["pass@k"][str(j)] = (statistics.fmean(pass_at_k(n, c, j) for n, c in eligible)
                                 if eligible else None)
    solved = [float(any(v)) for v in per_task.values()]
    out["best_of_k"] = statistics.fmean(solved) if solved else None
    if with_ci:
        low, high = bootstrap_ci(solved)
        out["best_of_k_ci95"] = [low, high] if solved else None
    by_attempt: dict[int, list[bool]] = defaultdict(list)
    for r in records:
        by_attempt[r["attempt"]].append(bool(r["resolved"]))
    accuracies = [statistics.fmean(v) for _, v in sorted(by_attempt.items())]
    out["mean@K"] = statistics.fmean(accuracies) if accuracies else None
    out["mean@K_std"] = statistics.pstdev(accuracies) if len(accuracies) > 1 else 0.0
    return out


def _costs(records: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Steps, tokens and changed lines per attempt (means and medians)."""
    def stats(values: list[float]) -> dict[str, float] | None:
        if not values:
            return None
        return {"mean": statistics.fmean(values), "median": statistics.median(values)}

    tokens = [r["output_tokens"] for r in records if r.get("output_tokens") is not None]
    resolved = [r for r in records if r["resolved"]]
    return {
        "steps": stats([r["steps"] for r in records]),
        "output_tokens": stats(tokens),
        "action_chars": stats([r["action_chars"] for r in records]),
        "diff_lines": stats([r["diff_lines"] for r in records]),
        "diff_lines_resolved": stats([r["diff_lines"] for r in resolved]),
        "reference_lines": stats([r["reference_lines"] for r in records
                                  if r.get("reference_lines") is not None]),
        "elapsed_s": stats([r["elapsed_s"] for r in records]),
    }


def _group(records: Sequence[Mapping[str, Any]], field: str) -> dict[Any, list]:
    groups: dict[Any, list] = defaultdict(list)
    for r in records:
        if r.get(field) is not None:
            groups[r[field]].append(r)
    return groups
