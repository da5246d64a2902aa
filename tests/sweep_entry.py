"""A tiny entry point for tests/test_sweep.py, run by the sweep as a real subprocess:
`python -m tests.sweep_entry --config=tests/sweep_entry_config.py --workdir=DIR`.

It appends its workdir's name to DIR/../entry_runs.txt (the tests count runs), exits 3 with
"boom" on stderr when `x > fail_above`, and otherwise writes DIR/metrics.jsonl (two records:
`loss` = `loss(config)` at step 2) and DIR/summary.json ({"final": {"score": x * y}}).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from absl import app, flags
from ml_collections import config_flags

from experiments.cli import parse_flags

_CONFIG = config_flags.DEFINE_config_file("config", None, "tests/sweep_entry_config.py")
_WORKDIR = flags.DEFINE_string("workdir", None, "output directory")
flags.mark_flags_as_required(["config", "workdir"])


def loss(x: float, y: int, flag: bool) -> float:
    """The final metric the tests expect for a config."""
    return (x - 1.0) ** 2 + y + (0.5 if flag else 0.0)


def validate(config) -> None:
    """What a spec's `validate` may call: rejects a negative `y`."""
    if config.y < 0:
        raise ValueError(f"config field 'y' = {config.y} is invalid: must be >= 0")


def main(argv):
    del argv
    config, workdir = _CONFIG.value, Path(_WORKDIR.value)
    workdir.mkdir(parents=True, exist_ok=True)
    with open(workdir.parent / "entry_runs.txt", "a") as f:
        f.write(workdir.name + "\n")
    if config.x > config.fail_above:
        print(f"boom: x={config.x} > fail_above={config.fail_above}", file=sys.stderr)
        sys.exit(3)
    records = [{"step": 1, "loss": 10.0 + config.x, "first_only": 1.0},
               {"step": 2, "loss": loss(config.x, config.y, config.flag)}]
    (workdir / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (workdir / "summary.json").write_text(json.dumps({"final": {"score": config.x * config.y}}))


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
