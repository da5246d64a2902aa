"""Runs a generated project's functions in-process, from source held in memory.

The mini generator must know, for every test case, what the correct code returns and what a
mutated (or incomplete) copy returns, to keep only mutations that some hidden test catches and
visible tests that pass on the broken repo. Spawning pytest per candidate would cost seconds;
importing the sources from a dict costs microseconds. The correct code is the
generator's own templates (trusted, loop-bounded by their inputs) and runs in this process;
mutated variants can do anything a slip can (`current += current` in a loop doubles a string
until memory runs out), so they run in `IsolatedEvaluator`, a forked child process with a memory
cap and a timeout. Agent code never runs here: it only ever runs in the environment's sandbox.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import math
import multiprocessing
import pickle
import resource
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

#: pytest.approx's defaults: the hidden tests compare floats with approx, so the generator
#: decides "same result" with the same tolerance.
_REL_TOL = 1e-6
_ABS_TOL = 1e-12
Outcome = tuple[str, Any]
#: A result bigger than this (pickled) is reported as an error instead: no test literal is.
_MAX_RESULT_BYTES = 1 << 20


class _MemoryImporter(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports modules of one project from `{relative path: source}`."""

    def __init__(self, files: Mapping[str, str]):
        self.modules: dict[str, tuple[str, str, bool]] = {}
        for path, source in files.items():
            if not path.endswith(".py"):
                continue
            parts = path[:-3].split("/")
            is_package = parts[-1] == "__init__"
            name = ".".join(parts[:-1] if is_package else parts)
            self.modules[name] = (path, source, is_package)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.modules:
            return None
        return importlib.util.spec_from_loader(fullname, self,
                                               is_package=self.modules[fullname][2])

    def create_module(self, spec):
        return None  # the default module object

    def exec_module(self, module):
        path, source, _ = self.modules[module.__name__]
        module.__file__ = path
        exec(_compiled(path, source), module.__dict__)


@functools.lru_cache(maxsize=4096)
def _compiled(path: str, source: str):
    # Tasks of one template share most sources (a seed picks among a few constants), so
    # compiling each distinct source once makes generation several times faster.
    return compile(source, path, "exec")


@contextmanager
def project_imported(files: Mapping[str, str]) -> Iterator[None]:
    """While active, `importlib.import_module("pkg.mod")` loads the project's in-memory sources.

    Every module of the project (and anything cached under its top-level names) is dropped from
    `sys.modules` on entry and exit, so two variants of one project never see each other.
    """
    importer = _MemoryImporter(files)
    roots = {name.split(".")[0] for name in importer.modules}

    def forget() -> None:
        for name in [n for n in sys.modules if n.split(".")[0] in roots]:
            del sys.modules[name]

    forget()
    sys.meta_path.insert(0, importer)
    try:
        yield
    finally:
        sys.meta_path.remove(importer)
        forget()


def call_function(module: str, function: str, args_list: Sequence[tuple]) -> list[tuple[str, Any]]:
    """("ok", value) or ("error", exception class name) of `module.function(*args)`, per args.

    Arguments are copied (through pickle: faster than deepcopy for plain data) so a function
    that mutates its input cannot change the next case.
    Must run inside `project_imported`; a module that fails to import, or lacks the function,
    gives the error for every case.
    """
    try:
        target = getattr(importlib.import_module(module), function)
    except Exception as e:  # any failure of generated code is an outcome, not a crash
        return [("error", type(e).__name__)] * len(args_list)
    outcomes = []
    for args in args_list:
        try:
            outcomes.append(("ok", target(*pickle.loads(pickle.dumps(args)))))
        except Exception as e:
            outcomes.append(("error", type(e).__name__))
    return outcomes


def evaluate(files: Mapping[str, str], targets: Mapping[str, tuple[str, str]],
             cases: Mapping[str, Sequence[tuple]]) -> dict[str, tuple[Outcome, ...]]:
    """Outcome of every case of `targets` (function -> (module, name to call)) on `files`,
    in this process: only for code known to terminate (the templates' correct code)."""
    with project_imported(files):
        return {name: tuple(call_function(module, attr, cases[name]))
                for name, (module, attr) in targets.items()}


class EvaluationFailed(RuntimeError):
    """The variant ran past the timeout or killed its process: unusable as a task."""


class IsolatedEvaluator:
    """`evaluate` for untrusted variants, in a forked child with a memory cap and a timeout.

    One child serves many requests (a fork per request would cost more than the evaluation);
    a request that times out kills the child, and the next request starts a fresh one.
    """

    def __init__(self, timeout_s: float = 1.0, memory_mb: int = 512):
        self.timeout_s = timeout_s
        self.memory_mb = memory_mb
        self._process = None
        self._conn = None

    def evaluate(self, files: Mapping[str, str], targets: Mapping[str, tuple[str, str]],
                 cases: Mapping[str, Sequence[tuple]]) -> dict[str, tuple[Outcome, ...]]:
        """Like `evaluate`; raises EvaluationFailed on a timeout or a dead child."""
        if self._process is None:
            self._start()
        try:
            self._conn.send((dict(files), dict(targets), dict(cases)))
            if not self._conn.poll(self.timeout_s):
                raise EvaluationFailed(f"the variant ran longer than {self.timeout_s:g} s")
            return self._conn.recv()
        except (EOFError, OSError, EvaluationFailed) as e:
            self.close()
            if isinstance(e, EvaluationFailed):
                raise
            raise EvaluationFailed(f"the evaluation process died: {e!r}") from None

    def close(self) -> None:
        if self._process is not None:
            self._process.kill()
            self._process.join()
            self._conn.close()
        self._process = self._conn = None

    def _start(self) -> None:
        # fork: the child already has the generator's modules loaded (spawn would re-import).
        context = multiprocessing.get_context("fork")
        parent, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, self.memory_mb),
                                        daemon=True, name="c2jax-mini-eval")
        self._process.start()
        child.close()
        self._conn = parent

    def __enter__(self) -> IsolatedEvaluator:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _serve(conn, memory_mb: int) -> None:
    """The child's loop: evaluate requests until the parent goes away."""
    current = _address_space_bytes()
    limit = current + (memory_mb << 20)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    while True:
        try:
            files, targets, cases = conn.recv()
        except EOFError:
            return
        try:
            result = evaluate(files, targets, cases)
        except MemoryError:
            result = {name: (("error", "MemoryError"),) * len(cases[name]) for name in targets}
        checked = {}
        for name, outcomes in result.items():
            checked[name] = tuple(o if _small(o) else ("error", "ResultTooLarge")
                                  for o in outcomes)
        conn.send(checked)


def _small(outcome: Outcome) -> bool:
    try:
        return len(pickle.dumps(outcome)) <= _MAX_RESULT_BYTES
    except Exception:  # unpicklable values (generators, lambdas) cannot be test literals
        return False


def _address_space_bytes() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("VmSize is missing from /proc/self/status")


def same_outcome(expected: tuple[str, Any], actual: tuple[str, Any]) -> bool:
    """Whether a hidden test written from `expected` passes when the code gives `actual`."""
    if expected[0] != "ok" or actual[0] != "ok":
        return False
    return values_match(expected[1], actual[1])


def values_match(expected: Any, actual: Any) -> bool:
    """`actual == expected`, with pytest.approx semantics where `tests_writer` uses approx."""
    if uses_approx(expected):
        if isinstance(expected, float):
            return _close(expected, actual)
        if isinstance(expected, dict):
            return (isinstance(actual, dict) and actual.keys() == expected.keys()
                    and all(_close(v, actual[k]) for k, v in expected.items()))
        return (isinstance(actual, type(expected)) and len(actual) == len(expected)
                and all(_close(e, a) for e, a in zip(expected, actual)))
    return expected == actual


def uses_approx(value: Any) -> bool:
    """A float, or a flat list / tuple / dict of numbers holding a float: compared with approx."""
    if isinstance(value, float):
        return True
    items = value.values() if isinstance(value, dict) else value
    if not isinstance(value, (list, tuple, dict)) or not items:
        return False
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in items)
    return numbers and any(isinstance(v, float) for v in items)


def _close(expected: float, actual: Any) -> bool:
    if actual == expected:
        return True
    if not isinstance(actual, (int, float)):
        return False
    return math.isclose(actual, expected, rel_tol=_REL_TOL, abs_tol=_ABS_TOL)
