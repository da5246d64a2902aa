"""A template instantiated with a seed: the files of a tiny package, its functions and test cases.

`instantiate` picks the package name and constants, fills in the sources, finds every
function (docstring, signature, which project functions it calls) and draws argument tuples
for the tested ones, then runs the correct code once to record what each case returns.
Task kinds (`bugfix`, `feature`, ...) start from a `Project` and change it.
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import random
import string
from collections.abc import Mapping
from typing import Any

from cursorbench.mini import execution
from cursorbench.mini.templates import Template

#: How many argument tuples each tested function gets (duplicates are dropped).
CASES_PER_FUNCTION = 6
Outcome = execution.Outcome


class TemplateError(ValueError):
    """A template whose code or inputs are broken (a bug in the template, not in a task)."""


@dataclasses.dataclass(frozen=True)
class Function:
    """One function of the project.

    path / module: where it is defined ("shop/pricing.py" / "shop.pricing").
    start, end: its 1-based line span in that file (the def line to the last body line).
    calls: project functions it calls by name.
    """
    name: str
    path: str
    module: str
    doc: str
    params: tuple[str, ...]
    start: int
    end: int
    calls: frozenset[str]

    @property
    def signature(self) -> str:
        return f"{self.name}({', '.join(self.params)})"


@dataclasses.dataclass(frozen=True)
class Project:
    """A template instance. `files` maps paths relative to the repo root to sources.

    cases: tested function -> argument tuples; expected: the same keys -> what the correct
    code returns for each tuple (every outcome is ("ok", value): templates must not raise).
    constants: module-level constant -> (path, value).
    """
    template: Template
    package: str
    params: Mapping[str, Any]
    files: Mapping[str, str]
    functions: Mapping[str, Function]
    constants: Mapping[str, tuple[str, Any]]
    cases: Mapping[str, tuple[tuple, ...]]
    expected: Mapping[str, tuple[Outcome, ...]]

    def module_paths(self) -> list[str]:
        """Paths of the package's modules (not __init__), in template order."""
        return [f"{self.package}/{name}" for name in self.template.modules]

    def callers(self, name: str) -> set[str]:
        """Functions that call `name`, directly or through other project functions."""
        found: set[str] = set()
        frontier = {name}
        while frontier:
            frontier = {f.name for f in self.functions.values()
                        if f.calls & frontier and f.name not in found}
            found |= frontier
        return found

    def module_doc(self, path: str) -> str:
        """The first line of a module's docstring."""
        doc = ast.get_docstring(parse(self.files[path])) or ""
        return doc.splitlines()[0] if doc else ""


def instantiate(template: Template, rng: random.Random) -> Project:
    """Fills in the template with choices from `rng` and records the correct outcomes."""
    package = rng.choice(template.packages)
    params = {name: rng.choice(choices) for name, choices in sorted(template.params.items())}
    literals = {name: repr(value) for name, value in params.items()}
    files = {f"{package}/__init__.py": f'"""{template.subsystem[0].upper()}'
                                       f'{template.subsystem[1:]}."""\n'}
    for name, source in template.modules.items():
        try:
            files[f"{package}/{name}"] = string.Template(source).substitute(literals)
        except (KeyError, ValueError) as e:
            raise TemplateError(f"template {template.name!r}, module {name}: placeholder "
                                f"{e} has no value in params") from None
    functions, constants = _scan_checked(files, package, template)
    missing = sorted(set(template.inputs) - set(functions))
    if missing:
        raise TemplateError(f"template {template.name!r} has inputs for unknown functions "
                            f"{missing}")
    cases = {name: _draw_cases(template.inputs[name], rng, params)
             for name in functions if name in template.inputs}
    targets = {name: (functions[name].module, name) for name in cases}
    expected = execution.evaluate(files, targets, cases)
    for name, outcomes in expected.items():
        for args, outcome in zip(cases[name], outcomes):
            if outcome[0] != "ok":
                raise TemplateError(f"template {template.name!r}: {name}{args!r} raises "
                                    f"{outcome[1]} on the correct code; fix its inputs")
    return Project(template=template, package=package, params=params, files=files,
                   functions=functions, constants=constants, cases=cases, expected=expected)


def _scan_checked(files: Mapping[str, str], package: str, template: Template
                  ) -> tuple[dict[str, Function], dict[str, tuple[str, Any]]]:
    functions, constants = _scan(tuple(sorted(files.items())), package)
    unknown = sorted(set(template.constants) - set(constants))
    if unknown:
        raise TemplateError(f"template {template.name!r} describes unknown constants {unknown}")
    return dict(functions), dict(constants)


@functools.lru_cache(maxsize=1024)
def _scan(files: tuple[tuple[str, str], ...], package: str
          ) -> tuple[dict[str, Function], dict[str, tuple[str, Any]]]:
    """(functions, constants) of the package (cached: callers copy the dicts they change)."""
    functions: dict[str, Function] = {}
    constants: dict[str, tuple[str, Any]] = {}
    for path, source in files:
        if not path.startswith(package + "/") or path.endswith("__init__.py"):
            continue
        tree = parse(source)
        module = path[:-3].replace("/", ".")
        for node in tree.body:
            if isinstance(node, ast.FunctionDef):
                if node.name in functions:
                    raise TemplateError(f"function {node.name} is defined twice "
                                        f"({functions[node.name].path} and {path})")
                functions[node.name] = Function(
                    name=node.name, path=path, module=module,
                    doc=ast.get_docstring(node) or "",
                    params=tuple(a.arg for a in node.args.args),
                    start=node.lineno, end=node.end_lineno,
                    calls=frozenset(n.func.id for n in ast.walk(node)
                                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)))
            elif (isinstance(node, ast.Assign) and len(node.targets) == 1
                  and isinstance(node.targets[0], ast.Name)
                  and isinstance(node.value, ast.Constant)):
                constants[node.targets[0].id] = (path, node.value.value)
    # Keep only calls of project functions (not builtins).
    functions = {name: dataclasses.replace(f, calls=f.calls & functions.keys())
                 for name, f in functions.items()}
    return functions, constants


@functools.lru_cache(maxsize=4096)
def parse(source: str) -> ast.Module:
    """The AST of a source (cached: tasks of one template share sources; do not modify it)."""
    return ast.parse(source)


def _draw_cases(args_fn, rng: random.Random, params: Mapping[str, Any]) -> tuple[tuple, ...]:
    cases, seen = [], set()
    for _ in range(3 * CASES_PER_FUNCTION):
        args = args_fn(rng, params)
        key = repr(args)
        if key not in seen:
            seen.add(key)
            cases.append(args)
        if len(cases) == CASES_PER_FUNCTION:
            break
    return tuple(cases)
