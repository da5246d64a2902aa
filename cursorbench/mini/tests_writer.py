"""Writes pytest modules from test cases: one test function per (function, arguments, value).

Expected values are Python literals (templates return lists, dicts, tuples, strings and
numbers). Floats, and flat containers of numbers holding a float, are compared with
`pytest.approx`, so a correct fix that sums in another order still passes; `execution.values_match`
decides "passes" with the same rule when the generator picks cases.
"""
from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any

from cursorbench.mini.execution import uses_approx


@dataclasses.dataclass(frozen=True)
class Case:
    """`module.function(*args)` must return `expected`."""
    module: str
    function: str
    args: tuple
    expected: Any


def render(doc: str, cases: list[Case], extra_tests: tuple[str, ...] = ()) -> str:
    """A pytest module: the docstring, imports, then a test per case and the extra tests.

    `extra_tests` are complete test function sources (they may `import` what they need
    inside the function body).
    """
    needs_pytest = any(uses_approx(c.expected) for c in cases)
    imports: dict[str, set[str]] = defaultdict(set)
    for case in cases:
        imports[case.module].add(case.function)
    lines = [f'"""{doc}"""']
    if needs_pytest:
        lines.append("import pytest")
    if needs_pytest and imports:
        lines.append("")
    for module in sorted(imports):
        lines.append(f"from {module} import {', '.join(sorted(imports[module]))}")
    counters: dict[str, int] = defaultdict(int)
    for case in cases:
        counters[case.function] += 1
        call = f"{case.function}({', '.join(repr(a) for a in case.args)})"
        expected = repr(case.expected)
        if uses_approx(case.expected):
            expected = f"pytest.approx({expected})"
        lines += ["", "", f"def test_{case.function}_{counters[case.function]}():",
                  f"    assert {call} == {expected}"]
    for test in extra_tests:
        lines += ["", "", test.rstrip("\n")]
    return "\n".join(lines) + "\n"
