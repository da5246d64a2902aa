"""Ablation sweeps: a spec names an entry point, its base config and the fields to vary; every
point runs as `python -m ENTRY --config=BASE --workdir=WORKDIR/POINT --config.a.b=v ...`, one
after another here or as Ray tasks, and the final metrics land in one table and one plot.

    spec = sweep_spec(entry="experiments.rl", base_config="configs/rl_tiny.py",
                      fixed={"eval.suite": ""},                          # every point
                      grid={"staleness.eta": [0, 2, 4]},                 # Cartesian product
                      metrics={"reward": "reward/mean"}, plot={"x": "staleness.eta"})
    result = run_sweep(spec, "runs/sweeps/eta")

WORKDIR/POINT/ holds the entry's own outputs plus `sweep.log` (its stdout and stderr),
`sweep_point.json` (its overrides and command), and `sweep_done.json` or `sweep_failed.json`.
A done point is skipped on a rerun; any other point reruns (entries resume from their workdir).
WORKDIR/results.csv, results.md and results.png hold the table and the plot.

This module runs entry points by module name in subprocesses; it never imports them.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import importlib
import itertools
import json
import math
import os
import random as random_lib
import re
import subprocess
import sys
import time
from pathlib import Path

import ml_collections
from absl import flags, logging
from ml_collections import config_flags

from c2jax.ray_setup import init_ray
from c2jax.train.metrics import METRICS_FILE, read_records

BACKENDS = ("local", "ray")
AGGREGATES = {"last": lambda v: v[-1], "mean": lambda v: math.fsum(v) / len(v),
              "sum": math.fsum, "min": min, "max": max}
LOG_FILE, POINT_FILE, DONE_FILE, FAILED_FILE = ("sweep.log", "sweep_point.json",
                                                "sweep_done.json", "sweep_failed.json")
TAIL_LINES = 20
MAX_NAME_CHARS = 120


class SweepError(Exception):
    """A spec or a sweep directory that cannot work (raised before any point runs)."""


class MetricError(Exception):
    """A finished point lacks a metric the spec collects."""


def _dotted(fields: dict | None) -> ml_collections.ConfigDict:
    return ml_collections.ConfigDict(fields or {}, allow_dotted_keys=True, sort_keys=False)


def sweep_spec(*, entry: str, base_config: str, fixed: dict | None = None,
               grid: dict | None = None, random: dict | None = None, num_samples: int = 0,
               seed: int = 0, metrics: dict | None = None, plot: dict | None = None,
               validate: str = "", backend: str = "local",
               ray: dict | None = None) -> ml_collections.ConfigDict:
    """A locked sweep spec (what `configs/sweeps/*.py` return).

    entry        the entry module run per point, e.g. "experiments.rl"
    base_config  its --config file (FILE or FILE:ARG, relative to the working directory)
    fixed        {dotted field: value} overrides of every point
    grid         {dotted field: [values]}: one point per element of the Cartesian product
    random       {dotted field: [choices] | (low, high, "log" | "linear")}: `num_samples`
                 points drawn with `seed` (int bounds draw ints); give grid or random
    metrics      {column: source}; a source is "KEY" (the last metrics.jsonl record that has
                 KEY), "AGG:KEY" (AGG in last|mean|sum|min|max over those records),
                 "json:FILE:a.b" (a value in a JSON file of the point's workdir), or
                 "SOURCE / SOURCE" (a ratio; NaN for a zero denominator). A `seconds`
                 column (wall time of the run that finished the point) is always added.
    plot         x (a swept field; default the first), y (metric columns; default the first),
                 group (a swept field drawn as one line per value; default every other one)
    validate     "module:function" called on every point's config before anything runs
    backend      "local" (one point after another) | "ray" (Ray tasks)
    ray          address ("" = a local Ray of num_cpus CPUs), cpus_per_point, gpus_per_point
    """
    plot = dict(plot or {})
    y = plot.pop("y", ())
    spec = ml_collections.ConfigDict(dict(
        entry=entry, base_config=base_config, fixed=_dotted(fixed), grid=_dotted(grid),
        random=_dotted(random), num_samples=num_samples, seed=seed,
        metrics=_dotted(metrics), validate=validate, backend=backend,
        plot=dict(x=plot.pop("x", ""), y=(y,) if isinstance(y, str) else tuple(y),
                  group=plot.pop("group", "")),
        ray=dict(address="", num_cpus=2, cpus_per_point=1, gpus_per_point=0)))
    if plot:
        raise SweepError(f"unknown plot settings {sorted(plot)} (x, y, group)")
    spec.lock()
    unknown = sorted(set(ray or {}) - set(spec.ray))
    if unknown:
        raise SweepError(f"unknown ray settings {unknown} ({list(spec.ray)})")
    spec.ray.update(ray or {})
    return spec


@dataclasses.dataclass(frozen=True)
class Point:
    name: str          # its directory under the sweep workdir
    values: dict       # {swept field: value}


# ----------------------------------------------------------------------------- expansion

def _format_value(value) -> str:
    """A value as `--config.x=` parses it back."""
    if isinstance(value, (bool, str)):
        return str(value)
    return repr(value)


def _point_name(values: dict, prefix: str = "") -> str:
    label = ",".join(f"{k}={v:.6g}" if isinstance(v, float) else f"{k}={v}"
                     for k, v in values.items())
    label = re.sub(r"[^A-Za-z0-9._=,+-]", "_", label) or "base"
    if len(label) > MAX_NAME_CHARS:    # the mapping to values is in points.json
        label = f"{label[:MAX_NAME_CHARS - 9]}-{hashlib.sha1(label.encode()).hexdigest()[:8]}"
    return prefix + label


def _sample(rng: random_lib.Random, field: str, choice):
    if isinstance(choice, list):
        return rng.choice(choice)
    if not (isinstance(choice, tuple) and len(choice) == 3 and choice[2] in ("log", "linear")):
        raise SweepError(f"random field '{field}': give a list of choices or (low, high, "
                         f"'log' | 'linear'), not {choice!r}")
    low, high, scale = choice
    if scale == "log":
        if low <= 0:
            raise SweepError(f"random field '{field}': a log range needs low > 0 (got {low})")
        x = math.exp(rng.uniform(math.log(low), math.log(high)))
    else:
        x = rng.uniform(low, high)
    return round(x) if isinstance(low, int) and isinstance(high, int) else x


def expand(spec) -> list[Point]:
    """Every point of the spec, in a stable order (random: reproducible from `seed`)."""
    if spec.grid and spec.random:
        raise SweepError("give either grid or random, not both")
    if spec.random:
        if spec.num_samples < 1:
            raise SweepError("a random search needs num_samples >= 1")
        rng = random_lib.Random(spec.seed)
        samples = [{f: _sample(rng, f, c) for f, c in spec.random.items()}
                   for _ in range(spec.num_samples)]
        width = len(str(spec.num_samples - 1))
        return [Point(_point_name(v, f"r{i:0{width}d}-"), v) for i, v in enumerate(samples)]
    for field, values in spec.grid.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise SweepError(f"grid field '{field}': give a non-empty list, not {values!r}")
    fields = list(spec.grid.keys())
    points = [Point(_point_name(dict(zip(fields, combo))), dict(zip(fields, combo)))
              for combo in itertools.product(*spec.grid.values())]
    names = [p.name for p in points]
    if len(set(names)) != len(names):
        repeated = sorted({n for n in names if names.count(n) > 1})
        raise SweepError(f"the grid repeats points: {repeated}")
    return points


def override_args(spec, point: Point) -> list[str]:
    """The point's `--config.a.b=v` flags: the fixed overrides, then its own values."""
    return [f"--config.{k}={_format_value(v)}"
            for k, v in {**spec.fixed, **point.values}.items()]


def command(spec, point: Point, workdir: Path) -> list[str]:
    return [sys.executable, "-m", spec.entry, f"--config={spec.base_config}",
            f"--workdir={workdir / point.name}", *override_args(spec, point)]


# ----------------------------------------------------------------------------- validation

def _parse_config(base_config: str, args: list[str]) -> ml_collections.ConfigDict:
    """The config an entry would get from `--config=base_config ARGS` (the same parsing)."""
    argv = ["sweep", f"--config={base_config}", *args]
    values = flags.FlagValues()
    config_flags.DEFINE_config_file("config", None, "", flag_values=values, sys_argv=argv)
    values(argv)
    return values.config


def _check_field(base, field: str, where: str) -> None:
    node = base
    for part in field.split("."):
        if not isinstance(node, ml_collections.ConfigDict) or part not in node:
            raise SweepError(f"{where}: the base config has no field '{field}'")
        node = node[part]


def _parse_source(source: str):
    """A metric source as ("ratio", a, b) | ("json", file, path) | ("agg", agg, key)."""
    if " / " in source:
        num, den = source.split(" / ", 1)
        return "ratio", _parse_source(num.strip()), _parse_source(den.strip())
    if source.startswith("json:"):
        parts = source.split(":", 2)
        if len(parts) != 3 or not all(parts[1:]):
            raise SweepError(f"metric source {source!r}: write json:FILE:dotted.path")
        return "json", parts[1], parts[2]
    agg, sep, key = source.partition(":")
    if sep and agg in AGGREGATES and key:
        return "agg", agg, key
    return "agg", "last", source


def check_spec(spec, points: list[Point]) -> None:
    """Raises SweepError (one line) for an unknown field, a value the field cannot take, a
    config the spec's `validate` rejects, a bad metric source or plot setting."""
    if spec.backend not in BACKENDS:
        raise SweepError(f"backend {spec.backend!r}: choose one of {BACKENDS}")
    try:
        base = _parse_config(spec.base_config, [])
    except Exception as e:  # a missing file, or one that fails to build its config
        raise SweepError(f"base_config {spec.base_config!r} does not load: {e}") from None
    for where in ("fixed", "grid", "random"):
        for field in spec[where]:
            _check_field(base, field, where)
    check = None
    if spec.validate:
        module, _, name = spec.validate.partition(":")
        try:
            check = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as e:
            raise SweepError(f"validate {spec.validate!r} does not import: {e}") from None
    for point in points:
        try:
            config = _parse_config(spec.base_config, override_args(spec, point))
            if check is not None:
                check(config)
        except (flags.Error, AttributeError, KeyError, TypeError, ValueError) as e:
            raise SweepError(f"point {point.name}: {e}".replace("\n", " ")) from None
    swept = set(points[0].values)
    if not spec.metrics:
        raise SweepError("the spec collects no metrics")
    for column, source in spec.metrics.items():
        if column in ("point", "status", "seconds") or column in swept:
            raise SweepError(f"metric column '{column}' clashes with a column of the table")
        _parse_source(source)
    plot = spec.plot
    for field in (plot.x, plot.group):
        if field and field not in swept:
            raise SweepError(f"plot: '{field}' is not a swept field ({sorted(swept)})")
    for column in plot.y:
        if column not in spec.metrics:
            raise SweepError(f"plot: y '{column}' is not a metric column ({list(spec.metrics)})")


def check_resume(spec, points: list[Point], workdir: Path) -> None:
    """A point directory from an earlier run must hold the same command (else it resumes a
    different experiment)."""
    for point in points:
        path = workdir / point.name / POINT_FILE
        if path.exists():
            recorded = json.loads(path.read_text())["command"][1:]
            if recorded != command(spec, point, workdir)[1:]:
                raise SweepError(f"{path} was run as {recorded}, which differs from the spec "
                                 "now: use a new --workdir or delete that point")


# ----------------------------------------------------------------------------- metrics

def _lookup(tree, path: str):
    for part in path.split("."):
        tree = tree[part]
    return tree


def _metric(parsed, point_dir: Path, records: list[dict]) -> float:
    kind, a, b = parsed
    if kind == "ratio":
        num, den = _metric(a, point_dir, records), _metric(b, point_dir, records)
        return num / den if den else math.nan
    if kind == "json":
        try:
            value = _lookup(json.loads((point_dir / a).read_text()), b)
        except (OSError, KeyError, TypeError, ValueError) as e:
            raise MetricError(f"'{b}' of {a}: {e!r}") from None
        return math.nan if value is None else float(value)
    values = [math.nan if r[b] is None else float(r[b]) for r in records if b in r]
    if not values:
        raise MetricError(f"'{b}' is in no record of {METRICS_FILE}")
    return AGGREGATES[a](values)


def collect(spec, point_dir: Path) -> dict[str, float]:
    """{column: value} of a finished point; MetricError naming a metric it lacks."""
    path = point_dir / METRICS_FILE
    records = read_records(path) if path.exists() else []
    return {column: _metric(_parse_source(source), point_dir, records)
            for column, source in spec.metrics.items()}


# ----------------------------------------------------------------------------- running

def run_command(cmd: list[str], log_path: str, cwd: str) -> tuple[int, float]:
    """(exit code, seconds) of `cmd` with stdout and stderr in `log_path`; the child is
    terminated if this is interrupted. Runs here or inside a Ray task."""
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        with subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=cwd) as child:
            try:
                code = child.wait()
            except BaseException:
                child.terminate()
                child.wait()
                raise
    return code, time.monotonic() - start


def _tail(path: Path) -> str:
    return "\n".join(path.read_text(errors="replace").splitlines()[-TAIL_LINES:])


@dataclasses.dataclass
class SweepResult:
    rows: list[dict]       # one per point: point, status, the swept values, metrics, seconds
    failed: list[str]      # names of the points that failed


class _Progress:
    """One log line per point start and finish, with elapsed times."""

    def __init__(self, total: int):
        self.total, self.start, self.finished = total, time.monotonic(), 0

    def started(self, name: str, what: str = "start") -> None:
        logging.info("sweep: %s %s", what, name)

    def finished_point(self, name: str, status: str, seconds: float) -> None:
        self.finished += 1
        logging.info("sweep: [%d/%d] %s %s in %.0f s (sweep %.0f s)", self.finished,
                     self.total, name, status, seconds, time.monotonic() - self.start)


def _finish(spec, point: Point, point_dir: Path, code: int, seconds: float) -> str:
    """Records a point's outcome (done or failed); returns its status."""
    reason = f"exit {code}"
    if code == 0:
        try:
            metrics = collect(spec, point_dir)
        except MetricError as e:
            reason = f"exit 0 but metric {e}"
        else:
            (point_dir / DONE_FILE).write_text(json.dumps(
                {"values": point.values, "seconds": seconds, "metrics": metrics}, indent=1))
            return "done"
    tail = _tail(point_dir / LOG_FILE)
    (point_dir / FAILED_FILE).write_text(json.dumps(
        {"values": point.values, "returncode": code, "reason": reason, "seconds": seconds,
         "log_tail": tail}, indent=1))
    logging.error("sweep: %s failed (%s); the end of %s:\n%s", point.name, reason,
                  point_dir / LOG_FILE, tail)
    return f"failed ({reason})"


def _launch(spec, point: Point, workdir: Path) -> list[str]:
    """Prepares the point's directory; returns its command."""
    point_dir = workdir / point.name
    point_dir.mkdir(parents=True, exist_ok=True)
    (point_dir / FAILED_FILE).unlink(missing_ok=True)
    cmd = command(spec, point, workdir)
    (point_dir / POINT_FILE).write_text(json.dumps({"values": point.values, "command": cmd},
                                                   indent=1))
    return cmd


def _run_local(spec, todo: list[Point], workdir: Path, progress: _Progress) -> None:
    for point in todo:
        cmd = _launch(spec, point, workdir)
        progress.started(point.name)
        code, seconds = run_command(cmd, str(workdir / point.name / LOG_FILE), os.getcwd())
        progress.finished_point(point.name, _finish(spec, point, workdir / point.name, code,
                                                    seconds), seconds)


def _run_ray(spec, todo: list[Point], workdir: Path, progress: _Progress) -> None:
    ray, started = init_ray(spec.ray.address, num_cpus=spec.ray.num_cpus)
    remote = ray.remote(run_command).options(num_cpus=spec.ray.cpus_per_point,
                                             num_gpus=spec.ray.gpus_per_point, max_retries=0)
    pending = {}
    try:
        for point in todo:
            cmd = _launch(spec, point, workdir)
            pending[remote.remote(cmd, str(workdir / point.name / LOG_FILE), os.getcwd())] = point
            progress.started(point.name, "submit")
        while pending:
            (ref,), _ = ray.wait(list(pending), num_returns=1)
            point = pending.pop(ref)
            code, seconds = ray.get(ref)
            progress.finished_point(point.name, _finish(spec, point, workdir / point.name, code,
                                                        seconds), seconds)
    finally:
        for ref in pending:          # interrupted: each task terminates its child
            ray.cancel(ref)
        if pending:
            ray.wait(list(pending), num_returns=len(pending), timeout=30)
        if started:
            ray.shutdown()


# ----------------------------------------------------------------------------- results

def _row(spec, point: Point, workdir: Path) -> dict:
    point_dir = workdir / point.name
    row = {"point": point.name, **point.values}
    done, failed = point_dir / DONE_FILE, point_dir / FAILED_FILE
    if done.exists():
        try:
            metrics = collect(spec, point_dir)
            row.update(status="done", **metrics,
                       seconds=json.loads(done.read_text())["seconds"])
        except MetricError as e:
            row["status"] = f"failed (metric {e})"
    elif failed.exists():
        row["status"] = f"failed ({json.loads(failed.read_text())['reason']})"
    else:
        row["status"] = "not run"
    return row


def _cell(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def write_csv(rows: list[dict], columns: list[str], path: Path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, columns, restval="")
        writer.writeheader()
        writer.writerows(rows)


def markdown_table(rows: list[dict], columns: list[str]) -> str:
    lines = ["| " + " | ".join(columns) + " |",
             "|" + "|".join("---" if c in ("point", "status") else "---:" for c in columns) + "|"]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def plot(spec, rows: list[dict], fields: list[str], path: Path) -> bool:
    """results.png: each y metric against x, one line per group value; False when there is
    nothing to plot (no swept field, no finished point)."""
    done = [r for r in rows if r["status"] == "done"]
    x = spec.plot.x or (fields[0] if fields else "")
    ys = list(spec.plot.y) or list(spec.metrics)[:1]
    if not x or not done:
        return False
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    group = [spec.plot.group] if spec.plot.group else [f for f in fields if f != x]
    numeric = all(isinstance(r[x], (int, float)) and not isinstance(r[x], bool) for r in done)
    order = {str(v): i for i, v in enumerate(dict.fromkeys(r[x] for r in rows))}
    fig, axes = plt.subplots(1, len(ys), figsize=(5 * len(ys), 3.5), squeeze=False)
    for ax, y in zip(axes[0], ys):
        lines: dict[str, list] = {}
        for r in done:
            label = ",".join(f"{g}={r[g]}" for g in group) or y
            lines.setdefault(label, []).append((r[x] if numeric else order[str(r[x])], r[y]))
        for label, xy in lines.items():
            xy.sort()
            ax.plot(*zip(*xy), "o-" if spec.grid else "o", label=label)
        if not numeric:
            ax.set_xticks(list(order.values()), list(order))
        ax.set_xlabel(x)
        ax.set_ylabel(y)
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_results(spec, points: list[Point], workdir: Path) -> list[dict]:
    """results.csv, results.md (and results.png) from every point's directory; the rows."""
    rows = [_row(spec, p, workdir) for p in points]
    fields = list(points[0].values)
    columns = [*fields, *spec.metrics, "seconds", "status"]
    write_csv(rows, ["point", *columns], workdir / "results.csv")
    (workdir / "results.md").write_text(markdown_table(rows, columns))
    if plot(spec, rows, fields, workdir / "results.png"):
        logging.info("sweep: wrote %s", workdir / "results.png")
    return rows


def run_sweep(spec, workdir: str | Path, backend: str | None = None) -> SweepResult:
    """Validates the spec, runs every point not done yet, writes the results. `backend`
    replaces the spec's."""
    workdir = Path(workdir).absolute()
    if backend:
        spec.backend = backend
    points = expand(spec)
    check_spec(spec, points)
    check_resume(spec, points, workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "points.json").write_text(json.dumps({p.name: p.values for p in points},
                                                    indent=1))
    todo = [p for p in points if not (workdir / p.name / DONE_FILE).exists()]
    logging.info("sweep: %d points, %d done before, %d to run (%s)", len(points),
                 len(points) - len(todo), len(todo), spec.backend)
    runner = _run_ray if spec.backend == "ray" else _run_local
    try:
        if todo:
            runner(spec, todo, workdir, _Progress(len(todo)))
    finally:                      # interrupted too: the points that finished ("not run")
        rows = write_results(spec, points, workdir)
        logging.info("sweep: wrote %s and %s", workdir / "results.csv", workdir / "results.md")
    return SweepResult(rows, [r["point"] for r in rows if r["status"] != "done"])
