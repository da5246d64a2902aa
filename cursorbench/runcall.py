"""A scripted baseline for questions about values: run the named expression, report its repr.

    python -m cursorbench.run --suite=mini:test --category=understanding --agent=runcall \
        --out=runs/runcall_test

For a task whose prompt names a call or a constant in backticks (`transpose([[1, 2]])`,
`grids.grid.transpose(...)`, the constant `MARGIN`), the agent makes two tool calls:

1. `run_terminal` with one fixed command (a Python heredoc) that imports every non-test module
   of the repository into one namespace (each module's names, and each top-level package under
   its own name) and prints ` = repr(EXPRESSION)`;
2. `finish` with the first line of that output (` = VALUE`) as the summary.

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

#: The command's fixed part, a heredoc (nothing in it is expanded by the shell):
#: `{expression}` is replaced by the expression. Two choices make it easier for a policy that
#: copies by induction (a token continued as it was continued earlier in the context): the
#: expression stands in a string after " `", as in the prompt, so the token before its first
#: piece is the same in both places; and the value is printed after " =", which the finish
#: summary repeats before the value.
COMMAND = ("python - <<'EOF'\n"
           "import glob,importlib as I\n"
           "for f in glob.glob('*/*.py'):\n"
           " n=f[:-3].replace('/','.')\n"
           " if 'test' not in n:globals().update(vars(I.import_module(n)),"
           "**{n.split('.')[0]:__import__(n)})\n"
           "print(' =',repr(eval(''' `{expression}`'''[2:-1])))\n"
           "EOF")

_BACKTICKED = re.compile(r"`([^`]+)`")
#: A call, or a dotted name (a constant).
_EXPRESSION = re.compile(r"[A-Za-z_][\w.]*(\(.*\))?$")
_CONSTANT = re.compile(r"the constant `([A-Za-z_]\w*)`")
_UNSAFE = ("\\", "'''", "\n")


def expression_of(prompt: str) -> str | None:
    """The expression a value question asks about: the constant it names, or its first
    backticked call; None when there is none (or it holds a backslash, a line break or three
    single quotes, which the command's string cannot hold)."""
    constant = _CONSTANT.search(prompt)
    if constant:
        return constant.group(1)
    for span in _BACKTICKED.findall(prompt):
        if "(" in span and _EXPRESSION.match(span) and not any(u in span for u in _UNSAFE):
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
