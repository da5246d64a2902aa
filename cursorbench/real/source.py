"""A package's source tree as the real-suite generators see it.

`load_package(root)` reads every `.py` file under root into {relative path: text} and splits
them into source modules and test files (the environment's rule: `test_*.py`, `*_test.py`,
`conftest.py`, anything under `tests/` or `test/`). It indexes the functions and methods of
the source modules with the names each one calls, so generators can find linked code. Every
other file (test fixtures such as dateutil's tzif resources, boltons' data files, stubs) is
kept as bytes in `data`: generators never touch it, and every tree a task writes carries it.
"""
from __future__ import annotations

import ast
import dataclasses
from collections.abc import Mapping
from pathlib import Path

from environments.grading import is_test_path

_SKIPPED_DIRS = {".git", "__pycache__", ".tox", "build", "dist", ".eggs"}
#: A non-Python file larger than this is not carried into tasks (no package's fixtures are).
MAX_DATA_BYTES = 1 << 20


@dataclasses.dataclass(frozen=True)
class Entity:
    """A function or method: `name` is "f" or "Class.f"; lines are 1-based and inclusive.

    body_start: the first body line after the docstring (what ablation removes).
    calls: names it calls (plain names and attribute names, e.g. `self._grow()` -> "_grow").
    """
    name: str
    path: str
    start: int
    end: int
    body_start: int
    indent: str
    calls: frozenset[str]

    @property
    def leaf(self) -> str:
        return self.name.rpartition(".")[2]


@dataclasses.dataclass(frozen=True)
class Package:
    name: str
    sources: Mapping[str, str]
    tests: Mapping[str, str]
    entities: tuple[Entity, ...]
    data: Mapping[str, bytes] = dataclasses.field(default_factory=dict)

    @property
    def files(self) -> dict[str, str]:
        return {**self.sources, **self.tests}


def load_package(root: str | Path, name: str | None = None) -> Package:
    """Reads the package at root; ValueError if it has no source or no tests."""
    root = Path(root)
    sources, tests, data = {}, {}, {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if (any(part in _SKIPPED_DIRS for part in rel.parts) or path.is_symlink()
                or not path.is_file()):
            continue
        if path.suffix != ".py":
            if path.stat().st_size <= MAX_DATA_BYTES:
                data[rel.as_posix()] = path.read_bytes()
            continue
        text = path.read_text(encoding="utf-8")
        (tests if is_test_path(rel.as_posix()) else sources)[rel.as_posix()] = text
    if not sources or not tests:
        raise ValueError(f"{root} needs both source modules and tests "
                         f"(found {len(sources)} and {len(tests)})")
    entities = tuple(e for path, text in sources.items() for e in _entities(path, text))
    return Package(name=name or root.name, sources=sources, tests=tests, entities=entities,
                   data=data)


def _entities(path: str, text: str) -> list[Entity]:
    tree = ast.parse(text, filename=path)
    lines = text.split("\n")
    found = []

    def add(node: ast.FunctionDef, prefix: str) -> None:
        body = node.body
        if (body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            body = body[1:]
        if not body:
            return
        first = body[0].lineno
        calls = set()
        for n in ast.walk(node):
            if isinstance(n, ast.Call):
                if isinstance(n.func, ast.Name):
                    calls.add(n.func.id)
                elif isinstance(n.func, ast.Attribute):
                    calls.add(n.func.attr)
        line = lines[first - 1]
        found.append(Entity(name=prefix + node.name, path=path, start=node.lineno,
                            end=node.end_lineno, body_start=first,
                            indent=line[:len(line) - len(line.lstrip())],
                            calls=frozenset(calls)))

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            add(node, "")
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    add(item, node.name + ".")
    return found
