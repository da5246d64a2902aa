"""Ablation sweeps: every point of a sweep spec runs the spec's entry point with its overrides.

    python -m experiments.sweep --config=configs/sweeps/rl_replay_eta.py \\
        --workdir=runs/sweeps/rl_replay_eta [--backend=ray]

Each point runs as `python -m ENTRY --config=BASE --workdir=WORKDIR/POINT --config.a.b=v ...`
(one after another, or as Ray tasks with `--backend=ray`). Rerunning skips the points that
finished and reruns the others (entries resume from their workdir). Results:
WORKDIR/results.csv, results.md and results.png. The spec format: `c2jax.sweep.sweep_spec`
and docs/scaling.md. A bad spec exits with a one-line message before any point runs; failed
points are listed at the end and make the exit status non-zero.
"""
from __future__ import annotations

import sys
from pathlib import Path

from absl import app, flags
from ml_collections import config_flags

from experiments.cli import parse_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "sweep spec file, e.g. "
                                          "configs/sweeps/rl_replay_eta.py")
_WORKDIR = flags.DEFINE_string("workdir", None, "directory of the points and the results; an "
                               "existing one is resumed")
_BACKEND = flags.DEFINE_enum("backend", None, ["local", "ray"], "where points run; default: "
                             "the spec's `backend`")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from c2jax.sweep import SweepError, run_sweep
    try:
        result = run_sweep(_CONFIG.value, Path(_WORKDIR.value), backend=_BACKEND.value)
    except SweepError as e:
        sys.exit(f"error: {e}")
    print((Path(_WORKDIR.value) / "results.md").read_text(), end="")
    if result.failed:
        sys.exit(f"error: {len(result.failed)} of {len(result.rows)} points failed: "
                 f"{', '.join(result.failed)} (see each point's sweep.log)")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
