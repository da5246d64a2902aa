"""Task prompts at three levels of specification, as in the report's CursorBench.

- L0 (vague): what a hurried user types; names at most the area of the code.
- L1 (pointed): names the module or function involved.
- L2 (specific): a concrete symptom or signature, a call and the value it should give.

Prompts never name tests, test files or line numbers. Each level has a few phrasings; the
task's RNG picks one, so prompts vary without changing what they say.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

PROMPT_LEVELS = ("L0", "L1", "L2")


def call_text(function: str, args: tuple) -> str:
    """`f(1, [2, 3])`: how a prompt shows a call."""
    return f"{function}({', '.join(repr(a) for a in args)})"


def outcome_text(outcome: tuple[str, Any]) -> str:
    kind, value = outcome
    return f"returns `{value!r}`" if kind == "ok" else f"raises {value}"


def bugfix(level: str, rng: random.Random, subsystem: str,
           symptoms: Sequence[tuple[str, str, tuple, Any, tuple[str, Any]]]) -> str:
    """symptoms: (function, path, args, expected value, actual outcome), one per bug."""
    if level == "L0":
        return rng.choice([
            f"Something is off in {subsystem}. Can you find the problem and fix it?",
            f"Users report wrong results from {subsystem}. Please fix it.",
            f"{_cap(subsystem)} gives bad answers for some inputs; please sort it out.",
        ])
    if level == "L1":
        names = _join([f"`{fn}` in `{path}`" for fn, path, *_ in symptoms])
        return rng.choice([
            f"{names} {_verb(symptoms, 'returns', 'return')} wrong results for some inputs. "
            f"Please fix {_it(symptoms)} without changing the interface.",
            f"There is a bug affecting {names}. Please track it down and fix it.",
        ])
    lines = [f"`{call_text(fn, args)}` (in `{path}`) {outcome_text(actual)}, but it should "
             f"return `{expected!r}`." for fn, path, args, expected, actual in symptoms]
    return " ".join(lines) + rng.choice([" Please fix the code.", " Can you fix it?"])


def feature(level: str, rng: random.Random, subsystem: str,
            wanted: Sequence[tuple[str, str, str, str, tuple, Any]]) -> str:
    """wanted: (name, path, signature, docstring, example args, example value) per function."""
    if level == "L0":
        names = _join([f"`{name}`" for name, *_ in wanted])
        return rng.choice([
            f"We still need {names} in {subsystem}. Please add {_it(wanted)}.",
            f"{_cap(subsystem)} is missing {names}. Could you implement {_it(wanted)}?",
        ])
    if level == "L1":
        parts = [f"`{name}` to `{path}` ({_first_sentence(doc)})"
                 for name, path, _, doc, *_ in wanted]
        return f"Please add {_join(parts)}."
    parts = [f"Implement `{signature}` in `{path}`: {' '.join(doc.split())} For example, "
             f"`{call_text(name, args)}` should return `{value!r}`."
             for name, path, signature, doc, args, value in wanted]
    return " ".join(parts)


def refactor(level: str, rng: random.Random, subsystem: str,
             renames: Sequence[tuple[str, str, str]]) -> str:
    """renames: (old name, new name, path where it is defined)."""
    if level == "L0":
        return " ".join(rng.choice([f"`{old}` is a confusing name; it should be `{new}`.",
                                    f"Let's call `{old}` `{new}` from now on."])
                        for old, new, _ in renames)
    if level == "L1":
        pairs = _join([f"`{old}` to `{new}`" for old, new, _ in renames])
        return f"Rename {pairs} throughout {subsystem}."
    parts = [f"Rename the function `{old}` defined in `{path}` to `{new}`, and update every "
             f"module that uses it." for old, new, path in renames]
    return " ".join(parts) + (" Keep the behaviour the same; the old "
                              f"name{'s' if len(renames) > 1 else ''} should no longer exist.")


def constant_question(level: str, rng: random.Random, subsystem: str, name: str, path: str,
                      meaning: str) -> str:
    if level == "L0":
        return rng.choice([f"What is {meaning}?", f"Quick question: what's {meaning}?"])
    if level == "L1":
        return f"In {subsystem}, what is {meaning}? Answer with the value."
    return (f"What is the value of the constant `{name}` in `{path}`? Reply with the value as "
            "it is written in the code.")


def call_question(level: str, rng: random.Random, function: str, module: str,
                  args: tuple) -> str:
    call = call_text(function, args)
    if level == "L0":
        return rng.choice([f"If I call `{call}`, what do I get back?",
                           f"What comes out of `{call}`?"])
    if level == "L1":
        return f"What does `{call}` return? Give the exact value."
    return (f"What does `{module}.{call}` return? Reply with the Python repr of the result "
            "(for example as `print(repr(...))` would show it).")


def _first_sentence(doc: str) -> str:
    text = " ".join(doc.split())
    sentence = text.split(". ")[0].rstrip(".")
    return sentence[0].lower() + sentence[1:] if sentence else "see its callers"


def _join(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _it(items: Sequence) -> str:
    return "it" if len(items) == 1 else "them"


def _verb(items: Sequence, one: str, many: str) -> str:
    return one if len(items) == 1 else many
