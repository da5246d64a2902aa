"""Ways to break a real package so that fixing it takes multi-file work.

Each generator takes a `Package` and a seeded RNG and returns a `Candidate` (or None when the
package offers nothing suitable), deterministic from the seed:

- `feature_ablation`: 3-8 linked functions / methods (callers and callees of one another)
  across 2-4 modules lose their bodies (`raise NotImplementedError`, docstring kept); the
  reference fix restores them;
- `combined_mutations`: 3-6 of the mini suite's one-line mutations in different functions
  across the package;
- `refactor_reversal`: the tests use a renamed function (the rename is the fix): every module
  that defines, imports or calls it must follow;
- `module_move`: the tests import 3-8 linked functions from a new module; the fix moves them
  there and re-exports them (`moves.py`).

Ablations aim at 120-250 removed lines and moves at 60-125 moved lines (a diff of twice
that), CursorBench's size; mutations and renames stay small.

A candidate is only a proposal: `validate.py` decides, by running the tests, whether it is a
task.
"""
from __future__ import annotations

import dataclasses
import random
import re
from typing import Any

from cursorbench.mini import mutations
from cursorbench.real import moves
from cursorbench.real.source import Entity, Package

GENERATORS = ("feature_ablation", "combined_mutations", "refactor_reversal", "module_move")
#: Body lines an ablation aims to remove (CursorBench's median change is 181 lines), and how
#: many linked groups it looks at to find one in that range.
ABLATION_LINES = (120, 250)
ABLATION_TRIES = 200
#: Verb swaps that make a plausible new name for a refactor; others get a suffix.
_RENAME_VERBS = {"get": "fetch", "make": "build", "compute": "calculate", "to": "as",
                 "is": "check", "find": "locate", "add": "append", "remove": "drop"}


@dataclasses.dataclass(frozen=True)
class Candidate:
    """A proposed task.

    broken / solved: source files before and after the reference fix (all of them).
    tests: the test files as the grader runs them (rewritten for a refactor).
    baseline: the untouched package, sources and tests: what the tests must pass on.
    data: the package's non-Python files (`Package.data`), the same in every tree.
    spec: what was done (generator, seed, entities / mutations / renames), for the manifest
      and the prompt.
    """
    package: str
    generator: str
    seed: int
    broken: dict[str, str]
    solved: dict[str, str]
    tests: dict[str, str]
    spec: dict[str, Any]
    baseline: dict[str, str]
    data: dict[str, bytes] = dataclasses.field(default_factory=dict)


def feature_ablation(package: Package, rng: random.Random, seed: int) -> Candidate | None:
    """Among up to `ABLATION_TRIES` linked groups (3-8 entities over 2-4 modules), the first
    whose removed body lines fall in `ABLATION_LINES`, else the one closest to that range."""
    by_leaf: dict[str, list[Entity]] = {}
    for entity in package.entities:
        by_leaf.setdefault(entity.leaf, []).append(entity)
    linkable = [e for e in package.entities if e.end - e.body_start >= 1]
    rng.shuffle(linkable)
    groups = (_linked_group(start, package.entities, by_leaf, rng, rng.randint(3, 8))
              for start in linkable[:ABLATION_TRIES])
    best = moves.closest_in_range(
        (g for g in groups if len(g) >= 3 and 2 <= len({e.path for e in g}) <= 4),
        lambda g: sum(e.end - e.body_start + 1 for e in g), ABLATION_LINES)
    if best is None:
        return None
    broken = dict(package.sources)
    for entity in sorted(best, key=lambda e: (e.path, -e.start)):
        broken[entity.path] = _ablate(broken[entity.path], entity)
    return Candidate(package.name, "feature_ablation", seed, broken, dict(package.sources),
                     dict(package.tests), {"entities": sorted(e.name for e in best),
                                           "modules": sorted({e.path for e in best})},
                     package.files)


def combined_mutations(package: Package, rng: random.Random, seed: int) -> Candidate | None:
    wanted = rng.randint(3, 6)
    entities = list(package.entities)
    rng.shuffle(entities)
    broken = dict(package.sources)
    applied, lines_used = [], set()
    for entity in entities:
        kinds = list(mutations.MUTATION_TYPES)
        rng.shuffle(kinds)
        for kind in kinds:
            source = package.sources[entity.path]
            options = [m for m in mutations.find_mutations(entity.path, source, entity.name, kind)
                       if (entity.path, m.line) not in lines_used]
            if options:
                mutation = rng.choice(options)
                broken[entity.path] = mutations.apply(broken[entity.path], mutation)
                lines_used.add((entity.path, mutation.line))
                applied.append({"type": kind, "function": entity.name, "path": entity.path,
                                "line": mutation.line})
                break
        if len(applied) == wanted:
            break
    if len(applied) < 3:
        return None
    return Candidate(package.name, "combined_mutations", seed, broken, dict(package.sources),
                     dict(package.tests), {"mutations": applied}, package.files)


def refactor_reversal(package: Package, rng: random.Random, seed: int) -> Candidate | None:
    names = sorted({e.name for e in package.entities if "." not in e.name})
    rng.shuffle(names)
    every = {**package.sources, **package.tests}
    for old in names:
        word = re.compile(rf"\b{re.escape(old)}\b")
        users = [p for p, text in package.sources.items() if word.search(text)]
        tests = [p for p, text in package.tests.items() if word.search(text)]
        new = _new_name(old)
        # `.old` is an attribute of something else (`items.add(x)`), which a rename must not
        # touch; `test_old` is another name and stays.
        attribute = re.compile(rf"\.{re.escape(old)}\b")
        if (len(users) < 2 or not tests
                or any(re.search(rf"\b{re.escape(new)}\b", t) for t in every.values())
                or any(attribute.search(t) for t in every.values())):
            continue
        solved = {p: word.sub(new, t) for p, t in package.sources.items()}
        renamed_tests = {p: word.sub(new, t) for p, t in package.tests.items()}
        return Candidate(package.name, "refactor_reversal", seed, dict(package.sources),
                         solved, renamed_tests, {"renames": {old: new}, "modules": users},
                         package.files)
    return None


def module_move(package: Package, rng: random.Random, seed: int) -> Candidate | None:
    return moves.module_move(package, rng, seed, Candidate)


def generate(package: Package, generator: str, seed: int) -> Candidate | None:
    """The candidate `generator` makes from `package` with `seed` (None if it cannot)."""
    if generator not in GENERATORS:
        raise ValueError(f"unknown generator {generator!r}; choose one of {GENERATORS}")
    candidate = globals()[generator](package,
                                     random.Random(f"{package.name}/{generator}/{seed}"), seed)
    return candidate and dataclasses.replace(candidate, data=dict(package.data))


def _linked_group(start: Entity, entities, by_leaf, rng: random.Random, size: int
                  ) -> list[Entity]:
    """Entities reachable from `start` through calls in either direction, up to `size`."""
    group, frontier = [start], [start]
    while frontier and len(group) < size:
        current = frontier.pop(0)
        neighbours = [e for leaf in current.calls for e in by_leaf.get(leaf, [])]
        neighbours += [e for e in entities if current.leaf in e.calls]
        rng.shuffle(neighbours)
        for entity in neighbours:
            if entity not in group and len(group) < size:
                group.append(entity)
                frontier.append(entity)
    return group


def _ablate(text: str, entity: Entity) -> str:
    lines = text.split("\n")
    stub = [f"{entity.indent}raise NotImplementedError"]
    return "\n".join(lines[:entity.body_start - 1] + stub + lines[entity.end:])


def _new_name(old: str) -> str:
    head, _, tail = old.lstrip("_").partition("_")
    prefix = old[:len(old) - len(old.lstrip("_"))]
    if head in _RENAME_VERBS and tail:
        return f"{prefix}{_RENAME_VERBS[head]}_{tail}"
    return f"{old}_impl"
