"""Renaming a conversation's package and modules to fresh random names (SFT augmentation).

    renamed = fresh_names(messages, random.Random(0))

Generated coding tasks draw their package and module names from small pools, so a policy
fine-tuned on them can write a memorised name (`weather/forecast.py`) where the task in front
of it says `meteo/forecast.py`: it never has to copy. Every package and module name (`names_in`)
is replaced, consistently in every message's text and tool-call arguments, by a made-up one
(`zikugi/tamuzo.py`), so the only way to reproduce a name is to copy it from earlier in the
conversation. The dotted import forms (`from zikugi.tamuzo import f`, `from .tamuzo import f`)
and test files (`tests/test_tamuzo.py`) follow: a name is replaced wherever it stands as a
path or module part (next to `/`, in a dotted name, after `test_`). Prose words stay (a module
`interest.py` leaves "the yearly interest rate" alone), and so do system messages.
"""
from __future__ import annotations

import random
import re
from typing import Any

_PATH = re.compile(r"(?<![\w/])([a-z][a-z0-9_]*)/[a-z][a-z0-9_]*\.py\b")
_MODULE = re.compile(r"(?<![\w.])([a-z][a-z0-9_]*)\.py\b")
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_CONSONANTS, _VOWELS = "bcdfghklmnprstvz", "aeiou"


def names_in(messages: list[dict[str, Any]]) -> list[str]:
    """The names to replace in the non-system messages: packages (`package/` of a
    `package/module.py` path, besides `tests`) and modules (any `module.py`, besides
    `__init__` and `test_*`)."""
    return _names(_text(messages))


def fresh_names(messages: list[dict[str, Any]], rng: random.Random) -> list[dict[str, Any]]:
    """`messages` with their package and module names replaced by fresh ones (see above)."""
    text = _text(messages)
    names = _names(text)
    if not names:
        return [dict(m) for m in messages]
    taken = set(_WORD.findall(text))
    mapping = {}
    for name in names:
        mapping[name] = _fresh(rng, taken)
        taken.add(mapping[name])
    alternatives = "|".join(map(re.escape, names))
    # a name where it is a path or module part: after `/` or `.` (paths, imports), after
    # `test_`, or right before `/` or a `.` that continues a dotted name (`.py`, `pkg.mod`);
    # prose words stay as they are, at the end of a sentence too
    pattern = re.compile(r"(?:(?<=[/.])|(?<=\btest_)|(?<![A-Za-z0-9_])(?=(?:"
                         + alternatives + r")(?:/|\.[A-Za-z_])))(" + alternatives
                         + r")(?![A-Za-z0-9_])")
    rename = lambda s: pattern.sub(lambda m: mapping[m.group(1)], s)  # noqa: E731
    return [dict(m) if m["role"] == "system" else
            {k: _map_strings(v, rename) if k in ("content", "tool_call") else v
             for k, v in m.items()}
            for m in messages]


def _names(text: str) -> list[str]:
    packages = {m.group(1) for m in _PATH.finditer(text)} - {"tests"}
    modules = {m.group(1) for m in _MODULE.finditer(text)
               if m.group(1) != "__init__" and not m.group(1).startswith("test_")}
    return sorted(packages | modules)


def _map_strings(value, fn):
    """`value` (strings in nested lists and dicts) with `fn` applied to every string."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return [_map_strings(v, fn) for v in value]
    if isinstance(value, dict):
        return {k: _map_strings(v, fn) for k, v in value.items()}
    return value


def _text(messages: list[dict[str, Any]]) -> str:
    """Every string of the non-system messages' text and calls, one per line."""
    found: list[str] = []
    for m in messages:
        if m["role"] != "system":
            _map_strings([m.get("content", ""), m.get("tool_call")], found.append)
    return "\n".join(found)


def _fresh(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS)
                       for _ in range(rng.randint(2, 4)))
        if name not in taken:
            return name
