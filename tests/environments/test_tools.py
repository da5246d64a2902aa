"""The agent's tools (environments/tools.py), each run for real against a sandboxed workspace."""
import pytest

from environments import tool_format
from environments.task import Task, TaskLimits
from environments.tools import (DEFAULT_TOOLS, Param, Tool, ToolContext, call_tool, clip_text,
                                system_prompt)

TOOLS = {t.name: t for t in DEFAULT_TOOLS}
CALC = "def add(a, b):\n    return a - b\n\n\ndef sub(a, b):\n    return a - b\n"


@pytest.fixture
def ctx(workspace, sandbox, tmp_path):
    task = Task(id="t", prompt="p", category="debug", difficulty="easy", repo_dir=tmp_path,
                hidden_dir=None, limits=TaskLimits(tool_timeout_s=10))
    workspace.write_file("calc.py", CALC.encode())
    workspace.write_file("tests/test_calc.py", b"from calc import sub\n\n\ndef test_sub():\n"
                                               b"    assert sub(3, 1) == 2\n")
    workspace.write_file("docs/readme.md", b"calc helpers\n")
    return ToolContext(workspace=workspace, runner=sandbox, task=task)


def call(ctx, name, **args):
    return call_tool(TOOLS, ctx, name, args)


def test_read_file_numbers_lines_and_selects_ranges(ctx):
    full = call(ctx, "read_file", path="calc.py")
    assert full.text.splitlines()[0] == "     1\tdef add(a, b):" and not full.is_error
    part = call(ctx, "read_file", path="calc.py", start_line=2, end_line=2)
    assert part.text == "     2\t    return a - b\n[lines 2-2 of 6]"
    assert "only 6 lines" in call(ctx, "read_file", path="calc.py", start_line=9).text
    assert "bad line range" in call(ctx, "read_file", path="calc.py", start_line=3,
                                    end_line=2).text
    assert call(ctx, "read_file", path="docs").is_error  # a directory
    ctx.workspace.write_file("blob.bin", b"\0\1\2")
    assert "looks binary" in call(ctx, "read_file", path="blob.bin").text


def test_list_dir_shows_a_tree_without_hidden_entries(ctx):
    ctx.workspace.write_file(".secretrc", b"")
    text = call(ctx, "list_dir", path=".", depth=2).text
    assert text.splitlines() == ["calc.py", "docs/", "  readme.md", "tests/", "  test_calc.py"]
    assert call(ctx, "list_dir", depth=1).text.splitlines() == ["calc.py", "docs/", "tests/"]


def test_grep_and_glob_find_things(ctx):
    assert call(ctx, "grep", pattern="return a -").text.splitlines() == [
        "calc.py:2:    return a - b", "calc.py:6:    return a - b"]
    assert call(ctx, "grep", pattern="sub", glob="test_*.py").text.startswith(
        "tests/test_calc.py:1:")
    assert "no matches" in call(ctx, "grep", pattern="nothing-here").text
    bad = call(ctx, "grep", pattern="(unclosed")
    assert bad.is_error and "extended regular expressions" in bad.text
    assert call(ctx, "glob", pattern="**/*.py").text.splitlines() == ["calc.py",
                                                                     "tests/test_calc.py"]
    assert call(ctx, "glob", pattern="*/*.md").text == "docs/readme.md"
    assert call(ctx, "glob", pattern="[!c]*").text.splitlines() == ["docs/", "tests/"]
    assert "bad glob pattern" in call(ctx, "glob", pattern="[z-a]").text


def test_edit_file_requires_a_unique_exact_match(ctx):
    many = call(ctx, "edit_file", path="calc.py", old_str="return a - b", new_str="return a + b")
    assert many.is_error and "occurs 2 times" in many.text and "lines 2, 6" in many.text
    missing = call(ctx, "edit_file", path="calc.py", old_str="return a*b", new_str="x")
    assert missing.is_error and "was not found" in missing.text
    assert "identical" in call(ctx, "edit_file", path="calc.py", old_str="a", new_str="a").text
    ok = call(ctx, "edit_file", path="calc.py", old_str="def add(a, b):\n    return a - b",
              new_str="def add(a, b):\n    return a + b")
    assert not ok.is_error and "     2\t    return a + b" in ok.text
    assert (ctx.workspace.root / "calc.py").read_text().count("a + b") == 1
    every = call(ctx, "edit_file", path="calc.py", old_str="(a, b)", new_str="(x, y)",
                 replace_all=True)
    assert "2 occurrences" in every.text


def test_create_and_delete_files(ctx):
    assert call(ctx, "create_file", path="pkg/new.py", content="a\nb\n").text == (
        "Created pkg/new.py (2 lines)")
    assert call(ctx, "create_file", path="pkg/new.py", content="c").text == (
        "Overwrote pkg/new.py (1 lines)")
    assert call(ctx, "delete_file", path="pkg/new.py").text == "Deleted pkg/new.py"
    assert call(ctx, "delete_file", path="pkg/new.py").is_error


def test_apply_patch_applies_a_diff_or_changes_nothing(ctx):
    diff = ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1,2 @@\n def add(a, b):\n"
            "-    return a - b\n+    return a + b\n")
    assert not call(ctx, "apply_patch", diff=diff).is_error
    assert (ctx.workspace.root / "calc.py").read_text().startswith(
        "def add(a, b):\n    return a + b\n")
    stale = call(ctx, "apply_patch", diff=diff.replace("a - b\n+", "a * b\n+"))
    assert stale.is_error and "did not apply" in stale.text
    assert (ctx.workspace.root / "calc.py").read_text().count("a + b") == 1


def test_run_terminal_reports_exit_codes_and_timeouts(ctx):
    assert call(ctx, "run_terminal", cmd="echo hi; exit 4").text == "hi\n[exit code 4]"
    slow = call(ctx, "run_terminal", cmd="echo partial; sleep 30", timeout_s=0.5)
    assert slow.is_error and "partial" in slow.text and "timed out after 0.5 s" in slow.text
    assert call(ctx, "run_terminal", cmd="true", timeout_s=0).is_error


def test_run_tests_runs_visible_tests_and_selectors(ctx):
    result = call(ctx, "run_tests")
    assert "1 passed" in result.text and result.text.endswith("[exit code 0]")
    assert "1 passed" in call(ctx, "run_tests", selector="tests/test_calc.py::test_sub").text
    assert "not an option" in call(ctx, "run_tests", selector="--collect-only").text
    assert call(ctx, "run_tests", selector="../elsewhere.py").is_error


def test_finish_ends_the_episode_with_a_summary(ctx):
    result = call(ctx, "finish", summary="done")
    assert result.finished and result.summary == "done" and not result.is_error


@pytest.mark.parametrize("name, args, message", [
    ("teleport", {}, "unknown tool 'teleport'; available tools: apply_patch"),
    ("read_file", {}, "needs the argument 'path'"),
    ("read_file", {"path": "calc.py", "lines": 3}, "unknown argument(s) ['lines']"),
    ("read_file", {"path": 3}, "'path' must be a string"),
    ("edit_file", {"path": "calc.py", "old_str": "a", "new_str": "b", "replace_all": "yes"},
     "'replace_all' must be a boolean"),
    ("list_dir", {"depth": True}, "'depth' must be a integer"),
    ("read_file", {"path": "../../etc/passwd"}, "leads outside the workspace"),
])
def test_bad_calls_are_error_results(ctx, name, args, message):
    result = call_tool(TOOLS, ctx, name, args)
    assert result.is_error and message in result.text


def test_integer_valued_floats_are_accepted(ctx):
    assert not call(ctx, "read_file", path="calc.py", start_line=2.0, end_line=3.0).is_error


def test_clip_text_keeps_head_and_tail():
    text = "H" * 5000 + "T" * 5000
    clipped = clip_text(text, 1000)
    assert len(clipped) <= 1000 + 80
    assert clipped.startswith("H" * 400) and clipped.endswith("T" * 400)
    assert "characters cut from the middle" in clipped
    assert clip_text("short", 1000) == "short"


def test_schemas_and_system_prompt_describe_every_tool():
    schema = TOOLS["edit_file"].schema()
    assert schema["parameters"]["required"] == ["path", "old_str", "new_str"]
    assert schema["parameters"]["properties"]["replace_all"]["type"] == "boolean"
    prompt = system_prompt(DEFAULT_TOOLS)
    assert tool_format.TOOL_CALL in prompt
    for tool in DEFAULT_TOOLS:
        assert tool.signature() in prompt


def test_a_custom_tool_plugs_in(ctx):
    word_count = Tool("word_count", "Count words in a file.",
                      (Param("path", "string", "file"),),
                      lambda c, path: str(len(c.workspace.resolve(path).read_text().split())))
    tools = {**TOOLS, "word_count": word_count}
    assert call_tool(tools, ctx, "word_count", {"path": "docs/readme.md"}).text == "2"
