"""Run an agent on a suite: `python -m cursorbench.run --suite=mini:test --agent=oracle --k=8
--workers=2 --out=DIR`.

Writes DIR/results.jsonl (one record per attempt, as attempts finish), DIR/trajectories.jsonl
and DIR/summary.json; rerunning the same command resumes where it stopped. See
docs/cursorbench.md for the suites, the agents and the metrics.
"""
from __future__ import annotations

import argparse
import json
import sys

from tqdm import tqdm

from cursorbench import agents, harness, suites
from cursorbench.humaneval import HumanEvalUnavailable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cursorbench.run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True,
                        help="mini:train|val|test[:N], humaneval, or a directory of tasks")
    parser.add_argument("--agent", required=True,
                        help="oracle, null, model:CKPT or python:package.module:factory")
    parser.add_argument("--out", required=True, help="output directory (resumed if it exists)")
    parser.add_argument("--k", type=int, default=1, help="attempts per task (default 1)")
    parser.add_argument("--workers", type=int, default=2,
                        help="environments run at once (default 2)")
    parser.add_argument("--seed", type=int, default=0, help="seed of a generated suite")
    parser.add_argument("--context-budget", type=int, default=None,
                        help="mini suite: characters after which oracle trajectories "
                             "summarise themselves")
    parser.add_argument("--sandbox", choices=("bwrap", "none"), default="bwrap",
                        help="'none' runs agent code unsandboxed: trusted debugging only")
    parser.add_argument("--temperature", type=float, default=None,
                        help="model agents: sampling temperature (default 0 = greedy when "
                             "--k=1, else 1.0 so attempts differ)")
    parser.add_argument("--max-new-tokens", type=int, default=256,
                        help="model agents: tokens per assistant turn (default 256)")
    parser.add_argument("--max-len", type=int, default=2048,
                        help="model agents: context length of the sampler (default 2048)")
    parser.add_argument("--category", default="",
                        help="run only tasks of these categories, comma-separated (debug, "
                             "feature, refactor, understanding); --limit counts after it")
    parser.add_argument("--limit", type=int, default=None,
                        help="run only the first LIMIT tasks of the suite")
    args = parser.parse_args(argv)
    try:
        temperature = args.temperature if args.temperature is not None else (
            0.0 if args.k == 1 else 1.0)
        factory = agents.make_agent_factory(
            args.agent, temperature=temperature, max_new_tokens=args.max_new_tokens,
            max_len=args.max_len, slots=max(args.workers, 1))
        with tqdm(desc=f"building {args.suite}", unit="task", leave=False) as bar:
            suite = suites.resolve(args.suite, seed=args.seed,
                                   context_budget=args.context_budget, progress=bar.update,
                                   categories=[c for c in args.category.split(",") if c])
        tasks = suite.tasks[:args.limit] if args.limit else suite.tasks
        summary = harness.run(tasks, factory, args.out, k=args.k, workers=args.workers,
                              suite=suite.name, agent=args.agent, sandbox=args.sandbox)
    except (agents.AgentSpecError, suites.SuiteError, harness.RunDirError,
            HumanEvalUnavailable) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    shown = {key: summary[key] for key in ("n_tasks", "mean@1", "mean@1_ci95", "best_of_k",
                                           "infra_failure_rate")}
    shown["pass@k"] = summary["pass@k"]
    print(json.dumps(shown, indent=1))
    print(f"wrote {args.out}/summary.json")
    return 0


if __name__ == "__main__":
    sys.exit(main())
