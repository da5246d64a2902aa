"""The scripted `runcall` agent: its one command evaluates the expression a value question
names in the task's repository, whatever module defines it."""
import subprocess
import sys
from pathlib import Path

import pytest

from cursorbench import agents
from cursorbench.mini.kinds import understanding
from cursorbench.runcall import RunCallAgent, command_for, expression_of


def _run_in_repo(repo: dict, cmd: str, root: Path) -> str:
    for path, text in repo.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    python = Path(sys.executable).parent
    done = subprocess.run(["bash", "-c", cmd], cwd=root, capture_output=True, text=True,
                          timeout=60, env={"PATH": f"{python}:/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[0]


@pytest.mark.parametrize("difficulty,level", [("medium", "L0"), ("medium", "L1"),
                                              ("hard", "L2"), ("easy", "L2")])
def test_the_command_prints_the_answer(make_context, tmp_path, difficulty, level):
    task = understanding.make(make_context("geometry", 4, difficulty, level=level))
    expression = expression_of(task.prompt)
    assert expression is not None, task.prompt
    assert _run_in_repo(task.repo, command_for(expression), tmp_path) == f" = {task.answer}"


def test_questions_without_an_expression_end_in_a_plain_finish(make_context):
    task = understanding.make(make_context("geometry", 4, "easy", level="L0"))
    assert expression_of(task.prompt) is None
    agent = agents.make_agent_factory("runcall")(0)
    assert isinstance(agent, RunCallAgent)
    observation = {"role": "user", "content": task.prompt, "tool": "", "is_error": 0}
    agent.begin(None, observation, {"system_prompt": "s"})
    assert agent.act(observation, {})["tool"] == "finish"


def test_the_finish_copies_the_first_line_of_the_output():
    agent = RunCallAgent()
    question = {"role": "user", "content": "What does `area(2, 3)` return?", "is_error": 0}
    agent.begin(None, question, {"system_prompt": "s"})
    call = agent.act(question, {})
    assert call["tool"] == "run_terminal" and call["args"]["cmd"].endswith(
        "print(' =',repr(eval(''' `area(2, 3)`'''[2:-1])))\nEOF")
    answer = agent.act({"role": "tool", "content": " = 6\n[exit code 0]", "is_error": 0}, {})
    assert answer == {"tool": "finish", "args": {"summary": " = 6"}}
    assert [m["role"] for m in agent.messages] == ["system", "user", "assistant", "tool",
                                                   "assistant"]


def test_departures_locate_the_first_difference_from_the_agents_command():
    from environments.tool_format import format_tool_call
    from experiments.runcall_departures import departure
    expression = "total_weight({'salt': 250})"
    right = format_tool_call("run_terminal", {"cmd": command_for(expression)}) + "<|end|>"
    assert departure(expression, right) == "command exact, later turn wrong"
    assert departure(None, right) == "no expression"
    assert departure(expression, right.replace("glob.glob", "glob.iglob")) == (
        "departs in the fixed command")
    assert departure(expression, right.replace("250", "205")) == "departs in the expression"
    assert departure(expression, right.replace("250})", "250}})")) == (
        "departs in the expression")
    assert departure(expression, right.replace("[2:-1]", "[2:]")) == (
        "departs after the expression")
    assert departure(expression, right[:40]) == "departs in the fixed command"   # cut short


def test_copy_rate_counts_only_attempts_that_reached_the_expression():
    from experiments.runcall_departures import copy_rate
    by_task = {"a": ["resolved", "departs in the expression", "departs in the fixed command"],
               "b": ["departs after the expression", "no expression"]}
    assert copy_rate(by_task, ["a", "b"]) == (1 / 2 + 1 / 1) / 2
