"""`module_move`: a refactor whose tests import functions from a module that does not exist yet.

The reference fix moves 3-8 linked top-level functions of one module `pkg/m.py` into a new
module `pkg/m_<topic>.py` and re-exports them from `pkg.m` (at its end, so that the new module
may import `pkg.m`'s helpers without a circular-import failure), so the package's own callers
and `from pkg.m import f` keep working. The test files that import a moved function
`from pkg.m import ...` import it from the new module instead: on the untouched tree they fail
to import, which makes their tests the targets. The change is about twice the moved lines
(removed here, added there), which is how a refactor reaches CursorBench's size.

Groups are rejected when `pkg.m` uses a moved name at module level (a decorator argument,
an alias, a registry), since the re-export at the end would come too late.
"""
from __future__ import annotations

import ast
import builtins
import random
import re

from cursorbench.real.source import Entity, Package

#: Lines a move aims to take out of the module (the diff is about twice that).
MOVE_LINES = (60, 125)
MOVE_TRIES = 200


def module_move(package: Package, rng: random.Random, seed: int, candidate_type):
    """A `candidate_type` (generators.Candidate) or None when no group qualifies."""
    modules = [p for p in sorted(package.sources) if _dotted(p, package.sources)]
    tops = [e for e in package.entities if "." not in e.name and e.path in modules]
    rng.shuffle(tops)
    plans = (_plan(package, start, rng) for start in tops[:MOVE_TRIES])
    best = closest_in_range((p for p in plans if p), lambda p: p["lines"], MOVE_LINES)
    if best is None:
        return None
    solved = dict(package.sources)
    solved[best["path"]] = best["remaining"]
    solved[best["new_path"]] = best["new_text"]
    spec = {"moves": {"from": best["module"], "to": best["new_module"],
                      "functions": best["names"]},
            "modules": [best["path"], best["new_path"]]}
    return candidate_type(package.name, "module_move", seed, dict(package.sources), solved,
                          best["tests"], spec, package.files)


def closest_in_range(items, size, bounds: tuple[int, int]):
    """The first item whose `size` lies in `bounds`, else the one closest to them (None if
    there are no items). Items are taken lazily, so a generator stops at the first fit."""
    low, high = bounds
    best, best_miss = None, None
    for item in items:
        miss = max(low - size(item), size(item) - high, 0)
        if best is None or miss < best_miss:
            best, best_miss = item, miss
        if miss == 0:
            break
    return best


def _plan(package: Package, start: Entity, rng: random.Random) -> dict | None:
    path = start.path
    text = package.sources[path]
    tree = ast.parse(text)
    functions = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    if start.name not in functions:
        return None
    group = _group(start.name, functions, rng, rng.randint(3, 8))
    if len(group) < 3:
        return None
    module = _dotted(path, package.sources)
    stem = path.rsplit("/", 1)[-1][:-3]
    new_stem = f"{stem}_{start.name.strip('_').split('_')[0]}"
    new_path = path.rsplit("/", 1)[0] + f"/{new_stem}.py"
    if new_path in package.sources or not re.fullmatch(r"[A-Za-z_]\w*", new_stem):
        return None
    new_module = module.rsplit(".", 1)[0] + "." + new_stem
    if _used_at_module_level(tree, group):
        return None
    tests = _retarget_tests(package.tests, module, new_module, group)
    if tests is None:
        return None
    lines = text.split("\n")
    spans = sorted((_first_line(functions[n]), functions[n].end_lineno) for n in group)
    moved = ["\n".join(lines[a - 1:b]) for a, b in spans]
    keep = [line for i, line in enumerate(lines, 1)
            if not any(a <= i <= b for a, b in spans)]
    imports = [ast.get_source_segment(text, n) for n in tree.body
               if isinstance(n, (ast.Import, ast.ImportFrom))]
    helpers = sorted(_free_names(functions, group) & _module_bindings(tree, group))
    header = [f'"""{_titled(group)} (moved from `{module}`)."""'] + imports
    if helpers:
        header.append(f"from {module} import {', '.join(helpers)}")
    new_text = "\n".join(header) + "\n\n\n" + "\n\n\n".join(moved) + "\n"
    remaining = "\n".join(keep).rstrip("\n") + (
        f"\n\n\nfrom {new_module} import {', '.join(sorted(group))}  # noqa: E402,F401\n")
    return {"path": path, "module": module, "new_path": new_path, "new_module": new_module,
            "names": sorted(group), "new_text": new_text, "remaining": remaining,
            "tests": tests, "lines": sum(b - a + 1 for a, b in spans)}


def _dotted(path: str, sources) -> str | None:
    """`pkg/sub/m.py` -> `pkg.sub.m` when every directory on the way is a package."""
    parts = path[:-3].split("/")
    if len(parts) < 2 or parts[-1] == "__init__":
        return None
    for i in range(1, len(parts)):
        if "/".join(parts[:i]) + "/__init__.py" not in sources:
            return None
    return ".".join(parts)


def _group(start: str, functions: dict[str, ast.FunctionDef], rng: random.Random,
           size: int) -> list[str]:
    """Top-level functions of the module linked to `start` by calls either way."""
    calls = {name: {n.func.id for n in ast.walk(node)
                    if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
             for name, node in functions.items()}
    group, frontier = [start], [start]
    while frontier and len(group) < size:
        current = frontier.pop(0)
        linked = sorted((calls[current] & functions.keys())
                        | {n for n, called in calls.items() if current in called})
        rng.shuffle(linked)
        for name in linked:
            if name not in group and len(group) < size:
                group.append(name)
                frontier.append(name)
    return group


def _first_line(node: ast.FunctionDef) -> int:
    return min([node.lineno] + [d.lineno for d in node.decorator_list])


def _used_at_module_level(tree: ast.Module, group) -> bool:
    """Whether a statement outside the function bodies loads a moved name."""
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            inside = node.decorator_list + node.args.defaults + node.args.kw_defaults
            if node.name in group:
                continue
        elif isinstance(node, ast.ClassDef):
            inside = node.decorator_list + node.bases + [
                s for s in node.body if not isinstance(s, ast.FunctionDef)]
        else:
            inside = [node]
        for part in inside:
            if part is not None and any(isinstance(n, ast.Name) and n.id in group
                                        for n in ast.walk(part)):
                return True
    return False


def _free_names(functions: dict[str, ast.FunctionDef], group) -> set[str]:
    """Names the moved functions load that they do not bind themselves."""
    free = set()
    for name in group:
        node = functions[name]
        bound = {a.arg for a in ast.walk(node.args) if isinstance(a, ast.arg)}
        bound |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, (ast.Store, ast.Del))}
        loaded = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                  and isinstance(n.ctx, ast.Load)}
        free |= loaded - bound
    return free - set(group) - set(dir(builtins))


def _module_bindings(tree: ast.Module, group) -> set[str]:
    """Names the module binds outside its imports (defs, classes, assignments), moved ones
    excluded: what the new module imports back."""
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            continue
        else:
            names |= {n.id for n in ast.walk(node) if isinstance(n, ast.Name)
                      and isinstance(n.ctx, ast.Store)}
    return names - set(group)


def _retarget_tests(tests: dict[str, str], module: str, new_module: str, group
                    ) -> dict[str, str] | None:
    """The tests with `from module import <moved>` split so the moved names come from
    `new_module`; None when no test imports a moved name that way."""
    out, changed = dict(tests), False
    for path, text in tests.items():
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        edits = []
        for node in ast.walk(tree):
            if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == module
                    and any(a.name in group for a in node.names)):
                edits.append(node)
        if not edits:
            continue
        lines = text.split("\n")
        for node in sorted(edits, key=lambda n: -n.lineno):
            indent = re.match(r"\s*", lines[node.lineno - 1]).group(0)
            stay = [_alias(a) for a in node.names if a.name not in group]
            go = [_alias(a) for a in node.names if a.name in group]
            new = ([f"{indent}from {module} import {', '.join(stay)}"] if stay else []) + [
                f"{indent}from {new_module} import {', '.join(go)}"]
            lines[node.lineno - 1:node.end_lineno] = new
        out[path] = "\n".join(lines)
        changed = True
    return out if changed else None


def _alias(alias: ast.alias) -> str:
    return alias.name if alias.asname is None else f"{alias.name} as {alias.asname}"


def _titled(group) -> str:
    return "`" + "`, `".join(sorted(group)) + "`"
