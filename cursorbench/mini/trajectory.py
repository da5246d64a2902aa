"""Oracle trajectories: the tool calls that solve a mini task, for SFT and for checking tasks.

A trajectory is a list of steps, each either a tool call in the environment's action format
plus the reasoning an assistant would write before it::

    {"thought": "Let me look at the project layout.", "tool": "list_dir", "args": {}}

or a self-summarisation turn::

    {"summary": "Task: ...\\nFiles read: ...\\nFiles changed: ...\\nFindings: ...\\nNext: ..."}

`TrajectoryBuilder` records the calls while simulating their effect on the files (an edit whose
`old_str` is missing or ambiguous is a generator bug and raises at generation time, not at
replay) and estimates each observation's length. `TrajectoryBuilder.steps(context_budget)`
inserts a summary turn whenever the conversation would pass `context_budget` characters: the
summary states what was read and changed so far, so an RL actor (#7) can drop the turns
before it and continue. `to_messages` turns a replayed trajectory into chat messages in the
format `c2jax.data.chat` renders (role "summary" for summary turns).
"""
from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

#: The sections of a summary turn, in order (the RL summariser, #7, asks for the same).
SUMMARY_SECTIONS = ("Task", "Files read", "Files changed", "Findings", "Next")
_RUN_TESTS_CHARS = 120          # "....... [100%]\n7 passed in 0.05s" and the exit code
_EDIT_CONTEXT_LINES = 4         # what edit_file shows around an edit (tools.py)


@dataclasses.dataclass
class _Call:
    thought: str
    tool: str
    args: dict[str, Any]
    observation_chars: int
    read: str | None = None          # a file this call read
    changed: tuple[str, str] | None = None  # (file, what changed) for an edit


class TrajectoryBuilder:
    """Records an oracle's tool calls over a simulated copy of the workspace files."""

    def __init__(self, prompt: str, files: Mapping[str, str]):
        self.prompt = prompt
        self.files = dict(files)
        self._calls: list[_Call] = []
        self._finished = False

    def list_dir(self, thought: str) -> None:
        self._add(thought, "list_dir", {}, len(_tree(self.files)))

    def read_file(self, thought: str, path: str) -> None:
        text = self.files[path]
        numbered = sum(len(line) + 7 for line in text.splitlines())
        self._add(thought, "read_file", {"path": path}, numbered, read=path)

    def grep(self, thought: str, pattern: str, python_regex: str) -> None:
        """`pattern` goes to the tool (grep -E); `python_regex` estimates what it matches."""
        regex = re.compile(python_regex)
        hits = [f"{path}:{i}:{line}" for path, text in sorted(self.files.items())
                for i, line in enumerate(text.splitlines(), 1) if regex.search(line)]
        self._add(thought, "grep", {"pattern": pattern}, sum(len(h) + 1 for h in hits))

    def edit(self, thought: str, path: str, old: str, new: str, note: str,
             replace_all: bool = False) -> None:
        """An edit_file call, applied to the simulated files with the tool's rules."""
        text = self.files[path]
        count = text.count(old)
        if count == 0 or (count > 1 and not replace_all) or old == new:
            raise ValueError(f"oracle edit of {path} would fail: old_str occurs {count} times")
        self.files[path] = text.replace(old, new)
        shown = (new.count("\n") + 1 + 2 * _EDIT_CONTEXT_LINES) * 60
        args = {"path": path, "old_str": old, "new_str": new}
        if replace_all:
            args["replace_all"] = True
        self._add(thought, "edit_file", args, shown, changed=(path, note))

    def run_tests(self, thought: str) -> None:
        self._add(thought, "run_tests", {}, _RUN_TESTS_CHARS)

    def run_terminal(self, thought: str, cmd: str, output: str) -> None:
        self._add(thought, "run_terminal", {"cmd": cmd}, len(output) + 16)

    def finish(self, thought: str, summary: str) -> None:
        self._add(thought, "finish", {"summary": summary}, 30)
        self._finished = True

    def steps(self, context_budget: int | None = None) -> list[dict[str, Any]]:
        """The trajectory; with a budget (characters), summary turns keep every stretch of
        conversation since the last summary within it (as far as single steps allow)."""
        if not self._finished:
            raise ValueError("the trajectory has no finish call")
        out: list[dict[str, Any]] = []
        used = len(self.prompt)
        for i, call in enumerate(self._calls):
            cost = len(call.thought) + len(json.dumps(call.args)) + call.observation_chars
            if context_budget is not None and used + cost > context_budget and i > 0:
                summary = self._summary(i)
                out.append({"summary": summary})
                used = len(self.prompt) + len(summary)
            out.append({"thought": call.thought, "tool": call.tool, "args": call.args})
            used += cost
        return out

    def _add(self, thought: str, tool: str, args: dict[str, Any], observation_chars: int,
             read: str | None = None, changed: tuple[str, str] | None = None) -> None:
        if self._finished:
            raise ValueError("the trajectory already finished")
        self._calls.append(_Call(thought, tool, args, observation_chars, read, changed))

    def _summary(self, upto: int) -> str:
        """The summary turn written before call `upto`: everything done in calls [0, upto)."""
        done = self._calls[:upto]
        read = list(dict.fromkeys(c.read for c in done if c.read))
        changed = [f"{path} ({note})" for path, note in (c.changed for c in done if c.changed)]
        findings = [c.thought for c in done]
        task = self.prompt.strip().splitlines()[0][:300]
        return "\n".join([
            f"{SUMMARY_SECTIONS[0]}: {task}",
            f"{SUMMARY_SECTIONS[1]}: {', '.join(read) if read else 'none'}",
            f"{SUMMARY_SECTIONS[2]}: {'; '.join(changed) if changed else 'none'}",
            f"{SUMMARY_SECTIONS[3]}:",
            *[f"- {f}" for f in findings],
            f"{SUMMARY_SECTIONS[4]}: {self._calls[upto].thought}",
        ])


def is_summary(step: Mapping[str, Any]) -> bool:
    return "summary" in step and "tool" not in step


def action_of(step: Mapping[str, Any]) -> dict[str, Any]:
    """The environment action of a tool step (without the thought)."""
    return {"tool": step["tool"], "args": dict(step["args"])}


def to_messages(system_prompt: str, prompt: str, steps: Sequence[Mapping[str, Any]],
                observations: Sequence[str]) -> list[dict[str, Any]]:
    """Chat messages (c2jax.data.chat format) of a replayed trajectory.

    `observations[i]` is what the environment returned for the i-th tool step (summary steps
    have none). The last tool step (finish) gets no tool turn: the episode ended there.
    """
    tool_steps = [s for s in steps if not is_summary(s)]
    if len(observations) != len(tool_steps):
        raise ValueError(f"{len(observations)} observations for {len(tool_steps)} tool steps")
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt},
                                      {"role": "user", "content": prompt}]
    seen = 0
    for step in steps:
        if is_summary(step):
            messages.append({"role": "summary", "content": step["summary"]})
            continue
        messages.append({"role": "assistant", "content": step.get("thought", "") + "\n",
                         "tool_call": action_of(step)})
        if step["tool"] != "finish":
            messages.append({"role": "tool", "content": observations[seen]})
        seen += 1
    return messages


def _tree(files: Mapping[str, str]) -> str:
    """Roughly what list_dir(".", depth=2) prints for these files."""
    entries = set()
    for path in files:
        parts = path.split("/")
        entries.add(parts[0] + ("/" if len(parts) > 1 else ""))
        if len(parts) > 1:
            entries.add("  " + parts[1] + ("/" if len(parts) > 2 else ""))
    return "\n".join(sorted(entries))
