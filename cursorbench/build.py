"""Build a suite's task directories: `python -m cursorbench.build --suite=mini:train:5000`.

Without --out the suite goes to the cache that `cursorbench.run` reads (and is reused there);
with --out it is written to that directory, e.g. to inspect tasks or ship a frozen copy. The
path is printed either way.
"""
from __future__ import annotations

import argparse
import sys
import time

from tqdm import tqdm

from cursorbench import suites
from cursorbench.humaneval import HumanEvalUnavailable, build_suite
from cursorbench.mini import generate


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cursorbench.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", required=True, help="mini:train|val|test[:N] or humaneval")
    parser.add_argument("--out", default=None, help="write here instead of the cache")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--context-budget", type=int, default=None,
                        help="mini: characters after which oracle trajectories summarise")
    parser.add_argument("--workers", type=int, default=1, help="generator processes")
    args = parser.parse_args(argv)
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


if __name__ == "__main__":
    sys.exit(main())
