"""Compare runs side by side: `python -m cursorbench.report DIR [DIR2 ...] --out=REPORT_DIR`.

Reads each run's summary.json and results.jsonl (written by `cursorbench.run`) and writes
REPORT_DIR/report.md (a table of the headline numbers, then accuracy by category, prompt level
and difficulty) and four PNG plots: pass@k curves, accuracy by category, accuracy by prompt
level, and accuracy against tokens spent per attempt (the agent's reported output tokens, or
its action characters / 4 when it reports none, labelled as an estimate).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")  # files only: no display on servers and CI
import matplotlib.pyplot as plt  # noqa: E402

from cursorbench import harness  # noqa: E402

#: Characters per token when an agent reports no token counts (a rough BPE average).
CHARS_PER_TOKEN = 4


def load_run(path: str | Path) -> dict[str, Any]:
    """A run directory's summary and records; ValueError naming what is missing."""
    root = Path(path)
    summary_path = root / harness.SUMMARY
    if not summary_path.exists():
        raise ValueError(f"{root} has no {harness.SUMMARY}: run python -m cursorbench.run "
                         f"--out={root} first")
    summary = json.loads(summary_path.read_text())
    records = [r for r in harness.read_jsonl(root / harness.RESULTS)
               if r["attempt"] < summary["k"]]
    name = f"{summary.get('agent') or root.name} @ {summary.get('suite') or '?'}"
    return {"name": name, "dir": str(root), "summary": summary, "records": records}


def markdown(runs: list[dict[str, Any]]) -> str:
    """The report's markdown: headline table, then one table per breakdown."""
    lines = ["# CursorBench report", "",
             "| run | tasks | mean@1 [95% CI] | pass@1 | pass@K (K) | best-of-K | mean@K ± std "
             "| infra | steps | tokens/attempt |",
             "|---|---:|---|---:|---:|---:|---|---:|---:|---:|"]
    for run in runs:
        s = run["summary"]
        k = str(s["k"])
        ci = s.get("mean@1_ci95")
        ci_text = f" [{_pct(ci[0])}, {_pct(ci[1])}]" if ci else ""
        tokens, estimated = _tokens_per_attempt(run["records"])
        steps = (s["cost"]["steps"] or {}).get("mean")
        lines.append(
            f"| {run['name']} | {s['n_tasks']} | {_pct(s['mean@1'])}{ci_text} "
            f"| {_pct(s['pass@k'].get('1'))} | {_pct(s['pass@k'].get(k))} ({k}) "
            f"| {_pct(s['best_of_k'])} | {_pct(s['mean@K'])} ± {_pct(s['mean@K_std'])} "
            f"| {_pct(s['infra_failure_rate'])} | {_num(steps)} "
            f"| {_num(tokens)}{' (est.)' if estimated else ''} |")
    fields = sorted({f for run in runs for f in run["summary"].get("breakdowns", {})})
    for field in fields:
        values = sorted({v for run in runs
                         for v in run["summary"]["breakdowns"].get(field, {})})
        lines += ["", f"## mean@1 by {field.replace('_', ' ')}", "",
                  "| run | " + " | ".join(values) + " |",
                  "|---|" + "---:|" * len(values)]
        for run in runs:
            groups = run["summary"]["breakdowns"].get(field, {})
            cells = [f"{_pct(groups[v]['mean@1'])} (n={groups[v]['n_tasks']})" if v in groups
                     else "-" for v in values]
            lines.append(f"| {run['name']} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def plot_pass_at_k(runs: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    for run in runs:
        curve = {int(k): v for k, v in run["summary"]["pass@k"].items() if v is not None}
        ks = sorted(curve)
        ax.plot(ks, [curve[k] for k in ks], marker="o", label=run["name"])
    ax.set(xlabel="k (attempts)", ylabel="pass@k", ylim=(-0.02, 1.02), title="pass@k")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_breakdown(runs: list[dict[str, Any]], field: str, path: Path) -> None:
    values = sorted({v for run in runs for v in run["summary"]["breakdowns"].get(field, {})})
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(values) * max(len(runs), 1)), 4))
    width = 0.8 / max(len(runs), 1)
    for i, run in enumerate(runs):
        groups = run["summary"]["breakdowns"].get(field, {})
        heights = [groups[v]["mean@1"] if v in groups else 0.0 for v in values]
        ax.bar([j + i * width for j in range(len(values))], heights, width, label=run["name"])
    ax.set_xticks([j + width * (len(runs) - 1) / 2 for j in range(len(values))], values)
    ax.set(ylabel="mean@1", ylim=(0, 1.05), title=f"accuracy by {field.replace('_', ' ')}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_accuracy_vs_tokens(runs: list[dict[str, Any]], path: Path) -> None:
    fig, ax = plt.subplots(figsize=(6, 4))
    any_estimated = False
    for run in runs:
        tokens, estimated = _tokens_per_attempt(run["records"])
        any_estimated |= estimated
        if tokens is not None and run["summary"]["mean@1"] is not None:
            ax.scatter([tokens], [run["summary"]["mean@1"]], s=40)
            ax.annotate(run["name"], (tokens, run["summary"]["mean@1"]), fontsize=8,
                        xytext=(4, 4), textcoords="offset points")
    label = "tokens per attempt" + (" (estimated: action chars / 4)" if any_estimated else "")
    ax.set(xlabel=label, ylabel="mean@1", ylim=(-0.02, 1.05), title="accuracy vs tokens")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def write_report(run_dirs: list[str], out_dir: str | Path) -> Path:
    """Writes report.md and the plots; returns the markdown's path."""
    runs = [load_run(d) for d in run_dirs]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plot_pass_at_k(runs, out / "pass_at_k.png")
    plot_breakdown(runs, "category", out / "accuracy_by_category.png")
    plot_breakdown(runs, "prompt_level", out / "accuracy_by_level.png")
    plot_accuracy_vs_tokens(runs, out / "accuracy_vs_tokens.png")
    text = markdown(runs) + "\n" + "\n".join(
        f"![{name}]({name}.png)" for name in ("pass_at_k", "accuracy_by_category",
                                              "accuracy_by_level", "accuracy_vs_tokens")) + "\n"
    (out / "report.md").write_text(text)
    return out / "report.md"


def _tokens_per_attempt(records: list[dict[str, Any]]) -> tuple[float | None, bool]:
    """(mean tokens per scored attempt, whether estimated from characters)."""
    scored = [r for r in records if not r["infra_failure"]]
    if not scored:
        return None, False
    reported = [r["output_tokens"] for r in scored if r.get("output_tokens") is not None]
    if len(reported) == len(scored):
        return statistics.fmean(reported), False
    return statistics.fmean(r["action_chars"] for r in scored) / CHARS_PER_TOKEN, True


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.1f}%"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cursorbench.report", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="run directories written by cursorbench.run")
    parser.add_argument("--out", default="cursorbench-report",
                        help="where report.md and the plots go (default ./cursorbench-report)")
    args = parser.parse_args(argv)
    try:
        path = write_report(args.runs, args.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(path.read_text())
    print(f"wrote {path} and plots beside it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
