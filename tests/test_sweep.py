"""The sweep runner (c2jax/sweep.py, experiments/sweep.py): every point runs
tests/sweep_entry.py as a real subprocess, whose metrics are a known formula of its config."""
import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from c2jax.sweep import DONE_FILE, FAILED_FILE, SweepError, expand, run_sweep, sweep_spec
from tests.sweep_entry import loss

REPO = Path(__file__).resolve().parents[1]
METRICS = {"loss": "loss", "loss_mean": "mean:loss", "first": "first_only",
           "score": "json:summary.json:final.score", "ratio": "sum:loss / max:loss"}


@pytest.fixture(autouse=True)
def in_repo(monkeypatch):
    """Point commands (`-m tests.sweep_entry`, the config path) are relative to the repo."""
    monkeypatch.chdir(REPO)


def spec(**fields):
    fields.setdefault("metrics", METRICS)
    return sweep_spec(entry="tests.sweep_entry", base_config="tests/sweep_entry_config.py",
                      **fields)


def runs(workdir: Path) -> list[str]:
    """The points the entry ran, in order (it appends one line per run)."""
    path = workdir / "entry_runs.txt"
    return path.read_text().split() if path.exists() else []


def read_csv(path: Path) -> dict[str, dict]:
    with open(path) as f:
        return {row["point"]: row for row in csv.DictReader(f)}


def cli(spec_text: str, tmp_path: Path, workdir: Path) -> subprocess.CompletedProcess:
    """`python -m experiments.sweep` on a spec file holding `spec_text`."""
    spec_file = tmp_path / "spec.py"
    spec_file.write_text("from c2jax.sweep import sweep_spec\n\n\ndef get_config(arg=None):\n"
                         f"    return sweep_spec(entry='tests.sweep_entry', "
                         f"base_config='tests/sweep_entry_config.py', {spec_text})\n")
    return subprocess.run([sys.executable, "-m", "experiments.sweep", f"--config={spec_file}",
                           f"--workdir={workdir}"], capture_output=True, text=True,
                          timeout=120, cwd=REPO)


def test_grid_tabulates_every_point_and_resumes(tmp_path):
    workdir = tmp_path / "sweep"
    s = spec(fixed={"y": 3}, grid={"x": [0.0, 2.5], "flag": [True, False]},
             plot=dict(x="x", y=("loss", "score"), group="flag"))
    result = run_sweep(s, workdir)
    names = ["x=0,flag=True", "x=0,flag=False", "x=2.5,flag=True", "x=2.5,flag=False"]
    assert result.failed == [] and [r["point"] for r in result.rows] == names
    assert sorted(runs(workdir)) == sorted(names)
    assert json.loads((workdir / "points.json").read_text())["x=2.5,flag=True"] == \
        {"x": 2.5, "flag": True}
    rows = read_csv(workdir / "results.csv")
    for name, (x, flag) in zip(names, [(0.0, True), (0.0, False), (2.5, True), (2.5, False)]):
        row = rows[name]
        assert row["status"] == "done" and float(row["x"]) == x and row["flag"] == str(flag)
        assert float(row["loss"]) == pytest.approx(loss(x, 3, flag))
        assert float(row["loss_mean"]) == pytest.approx((10.0 + x + loss(x, 3, flag)) / 2)
        assert float(row["first"]) == 1.0                    # the last record that has it
        assert float(row["score"]) == pytest.approx(3 * x)
        assert float(row["ratio"]) == pytest.approx((10.0 + x + loss(x, 3, flag))
                                                    / max(10.0 + x, loss(x, 3, flag)))
        assert float(row["seconds"]) > 0
    table = (workdir / "results.md").read_text().splitlines()
    assert table[0] == "| x | flag | loss | loss_mean | first | score | ratio | seconds | status |"
    assert table[4].startswith(f"| 2.5 | True | {loss(2.5, 3, True):.4g} | ")
    assert table[4].endswith(" | done |") and len(table) == 2 + len(names)
    assert (workdir / "results.png").read_bytes()[:4] == b"\x89PNG"

    run_sweep(s, workdir)                       # everything done: nothing reruns
    assert len(runs(workdir)) == 4
    (workdir / names[1] / DONE_FILE).unlink()   # a point interrupted before it finished
    run_sweep(s, workdir)
    assert runs(workdir)[4:] == [names[1]]
    assert read_csv(workdir / "results.csv")[names[1]]["status"] == "done"


def test_a_failing_point_is_reported_and_the_others_complete(tmp_path):
    workdir = tmp_path / "sweep"
    out = cli(f"fixed={{'fail_above': 1.5}}, grid={{'x': [0.0, 2.0, 1.0]}}, metrics={METRICS}",
              tmp_path, workdir)
    assert out.returncode == 1
    assert out.stderr.splitlines()[-1] == ("error: 1 of 3 points failed: x=2 "
                                           "(see each point's sweep.log)")
    assert sorted(runs(workdir)) == ["x=0", "x=1", "x=2"]        # went on after the failure
    failed = json.loads((workdir / "x=2" / FAILED_FILE).read_text())
    assert failed["returncode"] == 3 and "boom: x=2.0 > fail_above=1.5" in failed["log_tail"]
    assert "boom" in (workdir / "x=2" / "sweep.log").read_text()
    rows = read_csv(workdir / "results.csv")
    assert rows["x=2"]["status"] == "failed (exit 3)" and rows["x=2"]["loss"] == ""
    assert rows["x=1"]["status"] == "done" and float(rows["x=1"]["loss"]) == loss(1.0, 1, False)
    # Rerunning retries only the failed point; a changed spec does not resume old points.
    s = spec(fixed={"fail_above": 1.5}, grid={"x": [0.0, 2.0, 1.0]})
    assert run_sweep(s, workdir).failed == ["x=2"] and runs(workdir)[3:] == ["x=2"]
    with pytest.raises(SweepError, match="differs from the spec now"):
        run_sweep(spec(fixed={"fail_above": 9.0}, grid={"x": [0.0, 2.0, 1.0]}), workdir)


def test_a_bad_spec_fails_in_one_line_before_any_point_runs(tmp_path):
    workdir = tmp_path / "sweep"
    out = cli("grid={'x': [0.0], 'model.depth': [1, 2]}, metrics={'loss': 'loss'}",
              tmp_path, workdir)
    assert out.returncode == 1
    assert out.stderr.strip().splitlines()[-1] == \
        "error: grid: the base config has no field 'model.depth'"
    assert not workdir.exists()
    bad = [(dict(fixed={"y": "many"}), r"point x=0: flag --config.y=many: invalid literal"),
           (dict(fixed={"y": -1}, validate="tests.sweep_entry:validate"),
            r"point x=0: config field 'y' = -1 is invalid"),
           (dict(metrics={"x": "loss"}), "metric column 'x' clashes"),
           (dict(plot=dict(x="y")), r"plot: 'y' is not a swept field"),
           (dict(random={"y": [1]}, num_samples=2), "either grid or random")]
    for fields, message in bad:
        with pytest.raises(SweepError, match=message):
            run_sweep(spec(**{"grid": {"x": [0.0]}, **fields}), workdir)
    assert not runs(workdir)


def test_random_search_is_reproducible_from_its_seed():
    space = {"x": (0.01, 10.0, "log"), "y": (1, 5, "linear"), "flag": [True, False]}
    points = expand(spec(random=space, num_samples=12, seed=1))
    assert points == expand(spec(random=space, num_samples=12, seed=1))
    assert points != expand(spec(random=space, num_samples=12, seed=2))
    assert [p.name.split("-")[0] for p in points] == [f"r{i:02d}" for i in range(12)]
    assert points[3].name == "r03-" + ",".join(f"{k}={v:.6g}" if k == "x" else f"{k}={v}"
                                               for k, v in points[3].values.items())
    xs = [p.values["x"] for p in points]
    assert all(0.01 <= x <= 10.0 for x in xs) and min(xs) < 0.3 and max(xs) > 1.0
    assert {type(p.values["y"]) for p in points} == {int}
    assert {p.values["y"] for p in points} <= {1, 2, 3, 4, 5}
    assert {p.values["flag"] for p in points} == {True, False}
    with pytest.raises(SweepError, match="a log range needs low > 0"):
        expand(spec(random={"x": (0.0, 1.0, "log")}, num_samples=1))


@pytest.mark.xdist_group("ray")     # Ray tests share one xdist worker
def test_ray_backend_runs_points_as_ray_tasks(tmp_path, monkeypatch):
    ray = pytest.importorskip("ray")
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER",
                 "RAY_USAGE_STATS_ENABLED"):
        monkeypatch.setenv(name, "")       # restored (unset) after the test
        monkeypatch.delenv(name)
    workdir = tmp_path / "sweep"
    s = spec(grid={"x": [0.0, 3.0]}, ray=dict(num_cpus=1))
    result = run_sweep(s, workdir, backend="ray")
    assert result.failed == [] and sorted(runs(workdir)) == ["x=0", "x=3"]
    rows = read_csv(workdir / "results.csv")
    assert float(rows["x=3"]["loss"]) == loss(3.0, 1, False)
    assert os.environ["RAY_AUTH_MODE"] == "token" and not ray.is_initialized()
