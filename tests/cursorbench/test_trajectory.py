import pytest

from cursorbench.mini import trajectory
from cursorbench.mini.trajectory import TrajectoryBuilder

FILES = {"pkg/a.py": "def f():\n    return 1\n" * 1 + "X = 1\n", "tests/test_a.py": "x\n"}


def _builder():
    b = TrajectoryBuilder("Fix f.\nMore text.", FILES)
    b.list_dir("Look around.")
    b.read_file("Read a.", "pkg/a.py")
    b.edit("Fix it.", "pkg/a.py", "return 1", "return 2", note="fixed f")
    b.run_tests("Test.")
    b.finish("Done.", "Fixed f.")
    return b


def test_edits_are_simulated_with_the_tool_rules():
    b = _builder()
    assert b.files["pkg/a.py"] == "def f():\n    return 2\nX = 1\n"
    with pytest.raises(ValueError, match="occurs 0 times"):
        b2 = TrajectoryBuilder("p", FILES)
        b2.edit("x", "pkg/a.py", "missing", "y", note="")
    with pytest.raises(ValueError, match="occurs 2 times"):
        TrajectoryBuilder("p", {"a.py": "1 1"}).edit("x", "a.py", "1", "2", note="")


def test_steps_without_budget_are_the_calls():
    steps = _builder().steps()
    assert [s["tool"] for s in steps] == ["list_dir", "read_file", "edit_file", "run_tests",
                                          "finish"]
    assert steps[2] == {"thought": "Fix it.", "tool": "edit_file",
                        "args": {"path": "pkg/a.py", "old_str": "return 1",
                                 "new_str": "return 2"}}


def test_budget_inserts_structured_summaries():
    steps = _builder().steps(context_budget=120)
    summaries = [s["summary"] for s in steps if trajectory.is_summary(s)]
    assert summaries
    last = summaries[-1]
    assert last.startswith("Task: Fix f.\n")
    assert "Files read: pkg/a.py" in last and "Files changed: pkg/a.py (fixed f)" in last
    assert [line.split(":")[0] for line in last.splitlines() if not line.startswith("- ")] \
        == list(trajectory.SUMMARY_SECTIONS)
    with pytest.raises(ValueError, match="no finish"):
        TrajectoryBuilder("p", FILES).steps()


def test_to_messages_renders_with_the_chat_template_format():
    from c2jax.data.chat import validate_messages

    steps = _builder().steps(context_budget=120)
    tool_steps = [s for s in steps if not trajectory.is_summary(s)]
    messages = trajectory.to_messages("system", "Fix f.", steps,
                                      [f"obs {i}" for i in range(len(tool_steps))])
    validate_messages(messages)
    roles = [m["role"] for m in messages]
    assert roles[:3] == ["system", "user", "assistant"] and "summary" in roles
    assert messages[-1]["tool_call"]["tool"] == "finish"
    with pytest.raises(ValueError, match="observations"):
        trajectory.to_messages("s", "p", steps, [])
