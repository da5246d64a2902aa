"""Build a suite's task directories: `python -m cursorbench.build --suite=mini:train:5000`.

Without --out the suite goes to the cache that `cursorbench.run` reads (and is reused there);
with --out it is written to that directory, e.g. to inspect tasks or ship a frozen copy. The
path is printed either way.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tqdm import tqdm

from cursorbench import suites
from cursorbench.humaneval import HumanEvalUnavailable, build_suite
from cursorbench.mini import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cursorbench.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True,
                        help="mini:train|val|test[:N], humaneval or real")
    parser.add_argument("--out", default=None, help="write here instead of the cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context-budget", type=int, default=None,
                        help="mini: characters after which oracle trajectories summarise")
    parser.add_argument("--workers", type=int, default=None,
                        help="generator processes (mini; default 1) or candidates validated "
                             "at once (real; default 2)")
    parser.add_argument("--packages", default=None,
                        help="real: comma-separated PyPI names (default: every pinned one)")
    parser.add_argument("--seeds", type=int, default=None,
                        help="real: seeds per generator (default 3; small kinds get half)")
    args = parser.parse_args(argv)
    if args.suite == "real":
        return _build_real(args)
    args.workers = args.workers or 1
    started = time.monotonic()
    try:
        with tqdm(desc=f"building {args.suite}", unit="task") as bar:
            if args.out is None:
                path = suites.resolve(args.suite, seed=args.seed,
                                      context_budget=args.context_budget,
                                      workers=args.workers, progress=bar.update).path
            elif args.suite.startswith("mini:"):
                split, n = suites.parse_mini(args.suite)
                generate.generate_suite(args.out, split, n, args.seed,
                                        context_budget=args.context_budget,
                                        workers=args.workers, progress=bar.update)
                path = args.out
            elif args.suite == "humaneval":
                build_suite(args.out)
                path = args.out
            else:
                raise suites.SuiteError(f"--suite={args.suite}: only generated suites "
                                        "(mini:..., humaneval) are built")
    except (suites.SuiteError, HumanEvalUnavailable, generate.GenerationError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"{args.suite}: {path} ({time.monotonic() - started:.1f} s)")
    return 0


def _build_real(args) -> int:
    from cursorbench.real import packages, suite
    started = time.monotonic()
    try:
        specs = packages.by_name(args.packages.split(",")) if args.packages else None
        seeds = suite.DEFAULT_SEEDS if args.seeds is None else args.seeds
        with tqdm(desc="validating real candidates", unit="candidate") as bar:
            def progress(entry):
                bar.update(1)
                bar.set_postfix_str(f"{entry['package']} {entry['generator']} "
                                    f"{'accepted' if entry['accepted'] else 'rejected'}")
            if args.out is None:
                path = suites.build_real(specs, seeds, workers=args.workers or 2,
                                         progress=progress)
            else:
                suite.build_suite(args.out, specs=specs, seeds=seeds,
                                  workers=args.workers or 2, progress=progress,
                                  cache=suites.cache_root() / "real-packages")
                path = args.out
    except (ValueError, packages.PackageError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = (Path(path) / "build_report.json").read_text()
    print(report)
    print(f"real: {path} ({time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
