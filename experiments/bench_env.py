"""Benchmarks the coding environment: reset latency, tool-call latency sandboxed vs not, and
graded episodes per second, all measured side by side in one run.

    python -m experiments.bench_env                      # defaults used for BENCHMARKS.md
    python -m experiments.bench_env --calls=200 --episodes=40

Goals (issue #4): sandboxed `run_terminal("python -c pass")` p50 <= 40 ms, reset <= 50 ms for a
100-file repository. The unsandboxed rows run the same tool calls through sandbox="none".
"""
from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

from absl import app, flags

from environments import CodingEnv, EnvPool, OracleAgent, load_task
from environments.diffs import tree_diff

_RESETS = flags.DEFINE_integer("resets", 100, "resets to time per row (after the first, which "
                               "builds the task's baseline)")
_CALLS = flags.DEFINE_integer("calls", 100, "tool calls to time per row")
_GRADES = flags.DEFINE_integer("grades", 10, "episodes whose run_tests and finish steps are timed")
_EPISODES = flags.DEFINE_integer("episodes", 20, "graded oracle episodes for the throughput row")
_WORKERS = flags.DEFINE_integer("workers", 2, "concurrent environments for the throughput row")
_FILES = flags.DEFINE_integer("files", 100, "source files in the synthetic repository")


def make_task(root: Path, n_files: int) -> Path:
    """A debug task on a synthetic package of `n_files` modules, with a hidden test and the
    reference fix, so the oracle can play graded episodes."""
    task = root / "bench-task"
    repo = task / "repo"
    (repo / "app").mkdir(parents=True)
    (repo / "tests").mkdir()
    (task / "hidden" / "hidden_tests").mkdir(parents=True)
    (repo / "app" / "__init__.py").write_text('"""A synthetic package."""\n')
    for i in range(1, n_files - 2):
        body = "".join(f"\n\ndef f{j}(x):\n    return x * {j} + {i}\n" for j in range(12))
        (repo / "app" / f"mod{i:03d}.py").write_text(f'"""Module {i}."""{body}')
    (repo / "app" / "pricing.py").write_text(
        '"""Prices."""\n\n\ndef total(prices, discount):\n'
        '    return sum(prices) * (1 + discount)\n')
    (repo / "tests" / "test_mod.py").write_text(
        "from app.mod001 import f2\n\n\ndef test_f2():\n    assert f2(1) == 3\n")
    (task / "hidden" / "hidden_tests" / "test_pricing.py").write_text(
        "from app.pricing import total\n\n\ndef test_discount():\n"
        "    assert total([10, 10], 0.5) == 10\n")
    fixed = repo.parent / "fixed"
    subprocess.run(["cp", "-r", str(repo), str(fixed)], check=True)
    (fixed / "app" / "pricing.py").write_text(
        '"""Prices."""\n\n\ndef total(prices, discount):\n'
        '    return sum(prices) * (1 - discount)\n')
    (task / "reference.diff").write_text(tree_diff(str(repo), str(fixed)))
    subprocess.run(["rm", "-rf", str(fixed)], check=True)
    (task / "task.json").write_text(
        '{"id": "bench-task", "prompt": "Discounts make prices go up.", "category": "debug",'
        ' "difficulty": "easy", "hidden_tests": ["hidden_tests"],'
        ' "test_command": "python -m pytest -q -p no:cacheprovider hidden_tests tests",'
        ' "limits": {"max_steps": 10000, "max_output_chars": 100000000}}')
    return task


def percentiles(seconds: list[float]) -> tuple[float, float]:
    ms = sorted(s * 1000 for s in seconds)
    return statistics.median(ms), ms[min(len(ms) - 1, round(0.99 * (len(ms) - 1)))]


def time_calls(envs: dict[str, CodingEnv], action: dict, n: int) -> dict[str, list[float]]:
    """Times `action` in every env, interleaved so machine noise hits all rows alike."""
    times = {name: [] for name in envs}
    for _ in range(n):
        for name, env in envs.items():
            start = time.perf_counter()
            obs, *_ = env.step(action)
            times[name].append(time.perf_counter() - start)
            if obs["is_error"]:
                raise RuntimeError(f"{action} failed in the {name} env: {obs['content']}")
    return times


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo")
                if line.startswith("model name")), platform.processor())
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    bwrap = subprocess.run(["bwrap", "--version"], capture_output=True, text=True).stdout.strip()
    return (f"{os.cpu_count()} vCPU {cpu}, {mem_gib:.0f} GiB RAM, Linux {platform.release()}, "
            f"Python {platform.python_version()}, {bwrap}")


def main(argv: list[str]) -> None:
    del argv
    load_before = os.getloadavg()[0]
    workdir = Path(tempfile.mkdtemp(prefix="c2jax-bench-env-"))
    task = load_task(make_task(workdir, _FILES.value))
    rows: list[tuple[str, float, float, str]] = []

    warnings.filterwarnings("ignore", message="sandbox='none'")  # deliberate here
    envs = {"sandboxed": CodingEnv(task), "unsandboxed": CodingEnv(task, sandbox="none")}
    try:
        first = {}
        for name, env in envs.items():
            start = time.perf_counter()
            env.reset(seed=0)
            first[name] = time.perf_counter() - start
        on_disk = CodingEnv(task, workdir=str(workdir))  # $TMPDIR, not the /dev/shm default
        on_disk.reset(seed=0)
        resets = {"workspaces in RAM (/dev/shm, the default)": [], f"workspaces on disk "
                  f"({workdir.parent})": []}
        for i in range(_RESETS.value):
            for env, times in zip((envs["sandboxed"], on_disk), resets.values()):
                start = time.perf_counter()
                env.reset(seed=i)
                times.append(time.perf_counter() - start)
        on_disk.close()
        n_files = sum(len(files) for _, _, files in os.walk(task.repo_dir))
        for where, times in resets.items():
            rows.append((f"reset, {n_files}-file repo, {where}", *percentiles(times),
                         "goal <= 50"))
        rows.append(("first reset (builds the baseline: copy, setup, git init)",
                     first["sandboxed"] * 1000, first["sandboxed"] * 1000, "once per task"))

        for label, action in [
            ('run_terminal("python -c pass")',
             {"tool": "run_terminal", "args": {"cmd": "python -c pass"}}),
            ('run_terminal("true")', {"tool": "run_terminal", "args": {"cmd": "true"}}),
            ('read_file("app/pricing.py")',
             {"tool": "read_file", "args": {"path": "app/pricing.py"}}),
        ]:
            times = time_calls(envs, action, _CALLS.value)
            for name in envs:
                goal = "goal <= 40" if "python" in label and name == "sandboxed" else ""
                rows.append((f"{label}, {name}", *percentiles(times[name]), goal))

        # The two pytest runs of an oracle episode, timed in the sandboxed env alone.
        run_tests, finish = [], []
        for i in range(_GRADES.value):
            env = envs["sandboxed"]
            env.reset(seed=i)
            env.step({"tool": "apply_patch", "args": {"diff": task.reference_diff}})
            for times, action in ((run_tests, {"tool": "run_tests", "args": {}}),
                                  (finish, {"tool": "finish", "args": {}})):
                start = time.perf_counter()
                env.step(action)
                times.append(time.perf_counter() - start)
        rows.append(("run_tests() (the visible tests: pytest in the sandbox)",
                     *percentiles(run_tests), ""))
        rows.append(("finish(): diff, restore, hidden tests in a fresh sandbox, grade",
                     *percentiles(finish), ""))
    finally:
        for env in envs.values():
            env.close()

    with EnvPool(_WORKERS.value) as pool:
        pool.run_episodes([task] * _WORKERS.value, OracleAgent)  # builds each env's baseline
        start = time.perf_counter()
        results = pool.run_episodes([task] * _EPISODES.value, OracleAgent)
        wall = time.perf_counter() - start
    solved = sum(r.resolved for r in results)
    per_episode = [r.elapsed_s for r in results]
    rows.append((f"graded oracle episode ({_WORKERS.value} concurrent; {solved}/{len(results)} "
                 f"resolved; {len(results) / wall:.2f} episodes/s)", *percentiles(per_episode),
                 ""))
    subprocess.run(["rm", "-rf", str(workdir)], check=True)

    print(f"date: {datetime.date.today().isoformat()}")
    print(f"machine: {machine()}")
    print(f"1-minute load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"(on {os.cpu_count()} CPUs: above that, other work competed with the benchmark)")
    print(f"command: python -m experiments.bench_env {' '.join(sys.argv[1:])}".rstrip())
    print()
    print("| measurement | p50 ms | p99 ms | note |")
    print("|---|---:|---:|---|")
    for label, p50, p99, note in rows:
        print(f"| {label} | {p50:.1f} | {p99:.1f} | {note} |")


if __name__ == "__main__":
    app.run(main)
