"""The pinned packages the real suite is cut from, fetched and prepared at build time.

Nothing third-party is committed: each `PackageSpec` names a release on PyPI, where its
importable code and its tests sit inside the sdist, and the test dependencies (pinned). At
build time (`prepare`):

1. `pip download --no-binary=:all: --no-deps NAME==VERSION` fetches the sdist into
   `CACHE/sdists` (build isolation stays on: some sdists' metadata comes from setuptools-scm
   or hatch-vcs), and it is unpacked into `CACHE/src/NAME-VERSION`;
2. the task tree is the package directories moved to the root (a `src/` layout flattened, so
   `python -m pytest` imports them from the workspace) plus the test directory and the
   top-level `conftest.py`: `CACHE/trees/NAME-VERSION`;
3. a virtual environment with pytest and the test dependencies, never the package itself
   (the agent's workspace is what the tests import): `CACHE/venvs/NAME-VERSION`. Tasks name it
   in task.json (`"python"`), and the sandbox mounts it read-only.

Each step is done once and reused; a step that failed half-way is redone (its output is
written under a temporary name and renamed when complete). CACHE is `suites.cache_root()/real`
unless given.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path


class PackageError(RuntimeError):
    """A package could not be fetched, unpacked or given its environment (the message says
    which step and what pip said)."""


@dataclasses.dataclass(frozen=True)
class PackageSpec:
    """One pinned release.

    modules: importable directories (or single-module files) inside the sdist, e.g.
      ("src/attr", "src/attrs"); each lands at the tree's root under its own name.
    tests: the test directory inside the sdist; it keeps its path relative to the sdist root
      unless it sits inside a module directory (then it moves with it).
    test_requires: pinned requirements of the tests (pytest is always installed).
    extra_files: other sdist files the tests need, copied to the same relative place.
    """
    name: str
    version: str
    modules: tuple[str, ...]
    tests: str
    test_requires: tuple[str, ...] = ()
    extra_files: tuple[str, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.name}-{self.version}"


#: What every package's venv gets besides its own test requirements: pytest, and
#: pytest-timeout for the per-test limit of the real test command (`validate.REAL_PYTEST`).
PYTEST_REQUIREMENTS = ("pytest==9.2.0", "pytest-timeout==2.4.0")

#: The release set (sdists checked to ship their tests; sortedcontainers 2.4.0's has none).
PACKAGES = (
    PackageSpec("toolz", "1.2.0", modules=("toolz", "tlz"), tests="toolz/tests"),
    PackageSpec("cachetools", "8.0.2", modules=("src/cachetools",), tests="tests"),
    PackageSpec("more-itertools", "11.2.1", modules=("more_itertools",), tests="tests"),
    PackageSpec("boltons", "26.2.0", modules=("boltons",), tests="tests"),
    PackageSpec("python-dateutil", "4.0.0", modules=("src/dateutil",), tests="tests",
                test_requires=("hypothesis==6.170.17", "freezegun==1.5.5", "tzdata==2026.6",
                               "attrs==26.1.0", "sortedcontainers==2.4.0")),
    PackageSpec("attrs", "26.1.0", modules=("src/attr", "src/attrs"), tests="tests",
                test_requires=("hypothesis==6.170.17", "pympler==1.1", "cloudpickle==3.1.3",
                               "sortedcontainers==2.4.0")),
)


def by_name(names) -> list[PackageSpec]:
    """The specs named (PyPI names), in order; ValueError naming the unknown ones."""
    known = {p.name: p for p in PACKAGES}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown real-suite package(s) {unknown}; choose from {sorted(known)}")
    return [known[n] for n in names]


@dataclasses.dataclass(frozen=True)
class Prepared:
    spec: PackageSpec
    tree: Path     # the flattened package and tests (what `source.load_package` reads)
    venv: Path     # its test environment


def prepare(spec: PackageSpec, cache: str | os.PathLike, *, python: str = sys.executable,
            log=print) -> Prepared:
    """Fetches, unpacks, flattens and gives an environment to `spec` (each step cached)."""
    return Prepared(spec, tree(spec, cache, log=log), venv(spec, cache, python=python, log=log))


def tree(spec: PackageSpec, cache: str | os.PathLike, *, log=print) -> Path:
    """Steps 1-2: the flattened package and tests (an sdist already in CACHE/sdists is used
    as it is; otherwise pip downloads it)."""
    cache = Path(cache)
    sdist = _once(cache / "src" / spec.key, lambda tmp: _unpack(_download(spec, cache), tmp),
                  log, f"{spec.key}: fetching the sdist")
    return _once(cache / "trees" / spec.key, lambda tmp: _flatten(spec, _root(sdist), tmp),
                 log, f"{spec.key}: laying out the tree")


def venv(spec: PackageSpec, cache: str | os.PathLike, *, python: str = sys.executable,
         log=print) -> Path:
    """Step 3: the test environment (named by a hash of its requirements)."""
    return _once(Path(cache) / "venvs" / f"{spec.key}-{_requirements_hash(spec)}",
                 lambda tmp: _make_venv(spec, tmp, python), log,
                 f"{spec.key}: building the test environment")


def _once(final: Path, build, log, what: str) -> Path:
    if final.exists():
        return final
    log(what)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{final.name}-", dir=final.parent))
    try:
        build(tmp)
        tmp.chmod(0o755)       # mkdtemp's 0700 would hide a venv from the sandbox's uid
        tmp.rename(final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _download(spec: PackageSpec, cache: Path) -> Path:
    where = cache / "sdists"
    where.mkdir(parents=True, exist_ok=True)
    found = _sdist_in(where, spec)
    if found:
        return found
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-binary=:all:", "--no-deps",
         "--disable-pip-version-check", "-d", str(where), f"{spec.name}=={spec.version}"],
        capture_output=True, text=True)
    found = _sdist_in(where, spec)
    if done.returncode != 0 or not found:
        raise PackageError(f"{spec.key}: pip download failed:\n{done.stderr[-2000:]}")
    return found


def _sdist_in(where: Path, spec: PackageSpec) -> Path | None:
    stems = {spec.name, spec.name.replace("-", "_"), spec.name.replace("-", "_").lower()}
    for path in sorted(where.iterdir()):
        for stem in stems:
            if path.name.startswith(f"{stem}-{spec.version}.") and path.suffix in (".gz", ".zip"):
                return path
    return None


def _unpack(archive: Path, out: Path) -> None:
    if archive.suffix == ".zip":
        with zipfile.ZipFile(archive) as z:
            z.extractall(out)
    else:
        with tarfile.open(archive) as t:
            t.extractall(out, filter="data")


def _root(sdist: Path) -> Path:
    """The sdist's top directory (`NAME-VERSION/`)."""
    entries = [p for p in sdist.iterdir() if p.is_dir()]
    if len(entries) != 1:
        raise PackageError(f"{sdist}: expected one top directory, found {entries}")
    return entries[0]


def _flatten(spec: PackageSpec, root: Path, out: Path) -> None:
    for module in spec.modules:
        source = root / module
        if not source.exists():
            raise PackageError(f"{spec.key}: {module} is not in the sdist")
        target = out / source.name
        (shutil.copytree if source.is_dir() else shutil.copy2)(source, target)
    tests = root / spec.tests
    if not tests.is_dir():
        raise PackageError(f"{spec.key}: no test directory {spec.tests} in the sdist")
    inside = [m for m in spec.modules if spec.tests.startswith(m.rstrip("/") + "/")]
    if not inside:
        shutil.copytree(tests, out / spec.tests)
    for extra in (*spec.extra_files, "conftest.py"):
        if (root / extra).is_file():
            (out / extra).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / extra, out / extra)
    for junk in out.rglob("__pycache__"):
        shutil.rmtree(junk)


def _requirements_hash(spec: PackageSpec) -> str:
    return hashlib.sha256(json.dumps([*PYTEST_REQUIREMENTS, *spec.test_requires]).encode()
                          ).hexdigest()[:10]


def _make_venv(spec: PackageSpec, out: Path, python: str) -> None:
    # Built in place under its temporary name, then renamed: a venv's scripts hold absolute
    # paths, so the interpreter is always run as `VENV/bin/python -m ...` (the sandbox does).
    subprocess.run([python, "-m", "venv", str(out)], check=True, capture_output=True)
    done = subprocess.run(
        [str(out / "bin" / "python"), "-m", "pip", "install", "--disable-pip-version-check",
         "-q", *PYTEST_REQUIREMENTS, *spec.test_requires], capture_output=True, text=True)
    if done.returncode != 0:
        raise PackageError(f"{spec.key}: installing its test requirements failed:\n"
                           f"{done.stderr[-2000:]}")
