"""A scripted baseline for questions about values: run the named expression, report its repr.

    python -m cursorbench.run --suite=mini:test --category=understanding --agent=runcall \
        --out=runs/runcall_test

For a task whose prompt names a call or a constant in backticks (`transpose([[1, 2]])`,
`grids.grid.transpose(...)`, the constant `MARGIN`), the agent makes two tool calls:

1. `run_terminal` with one fixed command that imports every non-test module of the repository
   into one namespace (each module's names, and each top-level package under its own name) and
   prints `repr(EXPRESSION)`;
2. `finish` with the first line of that output as the summary.

It never reads a file, so it needs no module path: the only parts that change between tasks
are the expression, copied from the prompt, and the answer, copied from the tool output. That
makes its trajectories SFT data for a policy too small to find and compose module paths
(`warm_start.sft_agent = "runcall"`), and a baseline for what the pattern alone resolves.
Prompts without a backticked expression, and commands that fail, end in a finish that says so
(not resolved).
"""
from __future__ import annotations

import re
from typing import Any

#: The command's fixed part: `{expression}` is replaced by the expression (inside the shell's
#: double quotes, so the code itself uses single quotes only).
COMMAND = ('python -c "import pkgutil as p,importlib as i;'
           "[globals().update(vars(i.import_module(m.name)),"
           "**{m.name.split('.')[0]:__import__(m.name)}) "
           "for m in p.walk_packages(['.']) if 'test' not in m.name];"
           'print(repr({expression}))"')

_BACKTICKED = re.compile(r"`([^`]+)`")
#: A call, or a dotted name (a constant), without shell-special characters.
_EXPRESSION = re.compile(r"[A-Za-z_][\w.]*(\(.*\))?$")
_CONSTANT = re.compile(r"the constant `([A-Za-z_]\w*)`")


def expression_of(prompt: str) -> str | None:
    """The expression a value question asks about: the constant it names, or its first
    backticked call; None when there is none (or it holds `"`, `$` or a backslash)."""
    constant = _CONSTANT.search(prompt)
    if constant:
        return constant.group(1)
    for span in _BACKTICKED.findall(prompt):
        if "(" in span and _EXPRESSION.match(span) and not set(span) & set('"$\\'):
            return span
    return None


def command_for(expression: str) -> str:
    return COMMAND.replace("{expression}", expression)


class RunCallAgent:
    """The step agent (`environments.Agent` interface); `messages` holds the conversation in
    `c2jax.data.chat` format, as the oracle's does."""

    def __init__(self):
        self.messages: list[dict[str, Any]] = []
        self._expression: str | None = None

    def begin(self, task, observation: dict[str, Any], info: dict[str, Any]) -> None:
        del task
        self.messages = [{"role": "system", "content": info["system_prompt"]},
                         {"role": "user", "content": observation["content"]}]
        self._expression = expression_of(observation["content"])

    def act(self, observation: dict[str, Any], info: dict[str, Any]) -> dict[str, Any]:
        del info
        if observation["role"] == "tool":
            self.messages.append({"role": "tool", "content": observation["content"]})
        if observation["role"] == "user" and self._expression is not None:
            action = {"tool": "run_terminal", "args": {"cmd": command_for(self._expression)}}
        elif observation["role"] == "tool" and not observation.get("is_error"):
            lines = observation["content"].splitlines()
            action = {"tool": "finish", "args": {"summary": lines[0] if lines else ""}}
        else:
            action = {"tool": "finish", "args": {"summary": "I could not find the value."}}
        self.messages.append({"role": "assistant", "content": "", "tool_call": action})
        return action
