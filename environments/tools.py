"""The agent's tools (Cursor-like), their argument checking, and how their output is shown.

A tool is a `Tool`: a name, a description, typed parameters and a function
`run(ctx, **args) -> ToolResult`. File tools work on the host through `Workspace` (fast, and
path-checked); anything that executes agent-controlled code or parses agent-controlled patterns
(terminal, tests, grep, patches) runs in the sandbox. A tool signals a problem the agent caused
by raising `ToolError` (or `PathError`); the environment turns it into an error observation.
`InfraError` marks a sandbox failure that is nobody's fault in the episode.

To add a tool, build a `Tool` and pass `tools=DEFAULT_TOOLS + (my_tool,)` to the environment
(docs/environments.md has a worked example).
"""
from __future__ import annotations

import dataclasses
import os
import re
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from environments import tool_format
from environments.sandbox import WORKSPACE, CommandResult
from environments.task import Task
from environments.workspace import PathError, Workspace

_MAX_READ_BYTES = 8 << 20       # larger files are refused by read_file / edit_file
_LIST_DIR_MAX_ENTRIES = 1000
_GLOB_MAX_RESULTS = 500
_GREP_MAX_LINES = 200
_SNIPPET_CONTEXT_LINES = 4
_JSON_TYPES = {"string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,)}


class ToolError(Exception):
    """The agent used a tool wrongly or the tool failed; the message is shown to the agent."""


class InfraError(RuntimeError):
    """The sandbox failed to run a command: an infrastructure problem, not the agent's."""


@dataclasses.dataclass(frozen=True)
class Param:
    """One tool parameter. `kind` is a JSON-schema type: string, integer, number or boolean."""
    name: str
    kind: str
    description: str
    required: bool = True
    default: Any = None


@dataclasses.dataclass(frozen=True)
class ToolResult:
    """What a tool returns. `finished` ends the episode (with `summary` as the agent's answer)."""
    text: str
    is_error: bool = False
    finished: bool = False
    summary: str = ""


@dataclasses.dataclass
class ToolContext:
    """What tools may touch: the workspace, the sandbox runner and the task (for limits)."""
    workspace: Workspace
    runner: Any  # sandbox.Sandbox or sandbox.HostRunner: anything with their `run`
    task: Task

    def run(self, command: str, *, timeout_s: float | None = None,
            stdin: bytes | None = None) -> CommandResult:
        """Runs a shell command in a fresh sandbox on the workspace; InfraError if it failed."""
        limit = self.task.limits.tool_timeout_s
        timeout = limit if timeout_s is None else min(timeout_s, limit)
        result = self.runner.run(command, workspace=str(self.workspace.root), timeout_s=timeout,
                                 stdin=stdin)
        if result.infra_error:
            raise InfraError(f"the sandbox failed to run the command: {result.infra_error}")
        return result


@dataclasses.dataclass(frozen=True)
class Tool:
    name: str
    description: str
    params: tuple[Param, ...]
    run: Callable[..., ToolResult | str]

    def schema(self) -> dict[str, Any]:
        """A JSON-schema description (the function-calling format chat templates use)."""
        return {
            "name": self.name, "description": self.description,
            "parameters": {
                "type": "object",
                "properties": {p.name: {"type": p.kind, "description": p.description}
                               for p in self.params},
                "required": [p.name for p in self.params if p.required],
            },
        }

    def signature(self) -> str:
        parts = [p.name if p.required else f"{p.name}={p.default!r}" for p in self.params]
        return f"{self.name}({', '.join(parts)})"


def call_tool(tools: Mapping[str, Tool], ctx: ToolContext, name: str,
              args: Mapping[str, Any]) -> ToolResult:
    """Checks the arguments and runs one tool call; agent mistakes come back as error results.

    InfraError propagates: the caller decides what an infrastructure failure means.
    """
    tool = tools.get(name)
    if tool is None:
        return ToolResult(f"error: unknown tool {name!r}; available tools: "
                          f"{', '.join(sorted(tools))}", is_error=True)
    try:
        kwargs = _check_args(tool, args)
        result = tool.run(ctx, **kwargs)
    except (ToolError, PathError) as e:
        return ToolResult(f"error: {e}", is_error=True)
    except OSError as e:
        return ToolResult(f"error: {name} failed: {e.strerror or e}", is_error=True)
    return result if isinstance(result, ToolResult) else ToolResult(result)


def _check_args(tool: Tool, args: Mapping[str, Any]) -> dict[str, Any]:
    known = {p.name: p for p in tool.params}
    unknown = sorted(set(args) - set(known))
    if unknown:
        raise ToolError(f"{tool.name} got unknown argument(s) {unknown}; usage: {tool.signature()}")
    kwargs = {}
    for p in tool.params:
        if p.name not in args or args[p.name] is None:
            if p.required:
                raise ToolError(f"{tool.name} needs the argument {p.name!r}; usage: "
                                f"{tool.signature()}")
            kwargs[p.name] = p.default
            continue
        value = args[p.name]
        if p.kind == "integer" and isinstance(value, float) and value.is_integer():
            value = int(value)
        if not isinstance(value, _JSON_TYPES[p.kind]) or (
                p.kind != "boolean" and isinstance(value, bool)):
            raise ToolError(f"{tool.name}: argument {p.name!r} must be a {p.kind}, got "
                            f"{type(value).__name__}")
        kwargs[p.name] = value
    return kwargs


def clip_text(text: str, limit: int) -> str:
    """Keeps the head and tail of `text` within `limit` characters, saying how much was cut."""
    if len(text) <= limit:
        return text
    notice_budget = 120
    keep = max(limit - notice_budget, 0)
    head = text[:keep // 2]
    tail = text[len(text) - (keep - keep // 2):] if keep else ""
    cut = len(text) - len(head) - len(tail)
    return (f"{head}\n[... {cut} characters cut from the middle; read_file with a line range "
            f"or grep shows the rest ...]\n{tail}")


def system_prompt(tools: Sequence[Tool]) -> str:
    """Instructions a policy needs to use the tools: the call format and each tool's usage."""
    example = tool_format.format_tool_call("read_file", {"path": "README.md"})
    lines = [
        f"You are a coding agent working in a repository at {WORKSPACE}. Paths are relative "
        "to it. Call exactly one tool per turn, written as:",
        example,
        "When the task is done, call finish with a short summary. Tools:",
    ]
    lines += [f"- {t.signature()}: {t.description}" for t in tools]
    return "\n".join(lines)


# ---- file tools (host side, path-checked) --------------------------------------------------------

def _read_text(ws: Workspace, path: str) -> str:
    host = ws.resolve(path)
    fd = os.open(host, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if stat.S_ISDIR(st.st_mode):
            raise ToolError(f"{path!r} is a directory; use list_dir")
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{path!r} is not a regular file")
        if st.st_size > _MAX_READ_BYTES:
            raise ToolError(f"{path!r} is {st.st_size} bytes, over the {_MAX_READ_BYTES} byte "
                            "limit; use grep or run_terminal (head, sed -n) to look inside")
        data = f.read()
    if b"\0" in data[:8192]:
        raise ToolError(f"{path!r} looks binary; inspect it with run_terminal (e.g. xxd | head)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{path!r} is not UTF-8 text") from None


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{first + i:>6}\t{line}" for i, line in enumerate(lines))


def read_file(ctx: ToolContext, path: str, start_line: int, end_line: int) -> str:
    lines = _read_text(ctx.workspace, path).splitlines()
    if not lines:
        return f"{path} is empty"
    if start_line > len(lines):
        raise ToolError(f"{path} has only {len(lines)} lines")
    end = len(lines) if end_line == -1 else end_line
    if start_line < 1 or end < start_line:
        raise ToolError(f"bad line range {start_line}..{end_line}: lines are numbered from 1 "
                        "and end_line must be >= start_line (or -1 for the end)")
    end = min(end, len(lines))
    body = _numbered(lines[start_line - 1:end], start_line)
    if start_line > 1 or end < len(lines):
        body += f"\n[lines {start_line}-{end} of {len(lines)}]"
    return body


def list_dir(ctx: ToolContext, path: str, depth: int) -> str:
    ws = ctx.workspace
    host = ws.resolve(path)
    if not host.is_dir():
        raise ToolError(f"{path!r} is not a directory; use read_file")
    if depth < 1:
        raise ToolError("depth must be at least 1")
    out: list[str] = []

    def walk(directory, level: int) -> bool:
        try:
            entries = sorted(os.scandir(directory), key=lambda e: e.name)
        except PermissionError:
            out.append("  " * level + "[unreadable]")
            return True
        for entry in entries:
            if entry.name.startswith("."):
                continue  # hidden entries (.git, caches) are noise for the agent
            if len(out) >= _LIST_DIR_MAX_ENTRIES:
                return False
            indent = "  " * level
            if entry.is_symlink():
                out.append(f"{indent}{entry.name}@ -> {os.readlink(entry.path)}")
            elif entry.is_dir(follow_symlinks=False):
                out.append(f"{indent}{entry.name}/")
                if level + 1 < depth and not walk(entry.path, level + 1):
                    return False
            else:
                out.append(f"{indent}{entry.name}")
        return True

    complete = walk(host, 0)
    if not out:
        return f"{ws.display(host)} is empty (hidden entries are not listed)"
    if not complete:
        out.append(f"[stopped after {_LIST_DIR_MAX_ENTRIES} entries; list a subdirectory]")
    return "\n".join(out)


def glob_files(ctx: ToolContext, pattern: str) -> str:
    ws = ctx.workspace
    if pattern.startswith("/"):
        if not pattern.startswith(WORKSPACE + "/"):
            raise ToolError(f"pattern {pattern!r} is outside the workspace; use a relative "
                            "pattern like 'src/**/*.py'")
        pattern = pattern[len(WORKSPACE) + 1:]
    while pattern.startswith("./"):
        pattern = pattern[2:]
    try:
        regex = _glob_regex(pattern)
    except re.error as e:
        raise ToolError(f"bad glob pattern {pattern!r}: {e}") from None
    matches = []
    for dirpath, dirnames, filenames in os.walk(ws.root):  # never follows symlinked dirs
        dirnames[:] = [d for d in dirnames if d != ".git"]
        rel_dir = os.path.relpath(dirpath, ws.root)
        for name in dirnames + filenames:
            rel = name if rel_dir == "." else f"{rel_dir}/{name}"
            if regex.match(rel):
                matches.append(rel + ("/" if name in dirnames else ""))
    if not matches:
        return f"no paths match {pattern!r}"
    matches.sort()
    shown = matches[:_GLOB_MAX_RESULTS]
    more = len(matches) - len(shown)
    return "\n".join(shown) + (f"\n[{more} more matches not shown]" if more else "")


def _glob_regex(pattern: str) -> re.Pattern:
    """`*` and `?` stay within one path component, `**` spans any number, `[...]` is a class."""
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        elif pattern[i] == "[" and "]" in pattern[i + 2:]:
            end = pattern.index("]", i + 2)
            body = pattern[i + 1:end]
            if body.startswith("!"):
                body = "^" + body[1:]
            out.append("[" + body.replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out) + r"\Z")


def edit_file(ctx: ToolContext, path: str, old_str: str, new_str: str,
              replace_all: bool) -> str:
    ws = ctx.workspace
    text = _read_text(ws, path)
    if old_str == "":
        raise ToolError("old_str is empty; use create_file to write a whole file")
    if old_str == new_str:
        raise ToolError("old_str and new_str are identical: nothing to change")
    count = text.count(old_str)
    if count == 0:
        raise ToolError(f"old_str was not found in {path}. It must match the file exactly, "
                        "including whitespace and indentation; read_file shows the current text")
    if count > 1 and not replace_all:
        lines = [text.count("\n", 0, m.start()) + 1 for m in re.finditer(re.escape(old_str), text)]
        raise ToolError(f"old_str occurs {count} times in {path} (lines "
                        f"{', '.join(map(str, lines[:20]))}); include more surrounding lines to "
                        "make it unique, or pass replace_all=true")
    first = text.index(old_str)
    new_text = text.replace(old_str, new_str) if replace_all else text.replace(old_str, new_str, 1)
    ws.write_file(path, new_text.encode("utf-8"))
    # Show the edited region with a few lines of context, as they now read.
    start = new_text.count("\n", 0, first)
    end = start + new_str.count("\n")
    lines = new_text.splitlines()
    lo = max(0, start - _SNIPPET_CONTEXT_LINES)
    hi = min(len(lines), end + 1 + _SNIPPET_CONTEXT_LINES)
    what = f"{count} occurrences" if count > 1 else "1 occurrence"
    return f"Edited {path} ({what} replaced). The first edit now reads:\n" + _numbered(
        lines[lo:hi], lo + 1)


def create_file(ctx: ToolContext, path: str, content: str) -> str:
    created = ctx.workspace.write_file(path, content.encode("utf-8"))
    n = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return f"{'Created' if created else 'Overwrote'} {path} ({n} lines)"


def delete_file(ctx: ToolContext, path: str) -> str:
    ctx.workspace.delete_file(path)
    return f"Deleted {path}"


# ---- sandboxed tools -------------------------------------------------------------------------

def _command_report(result: CommandResult, timeout_note: float | None = None) -> ToolResult:
    text = result.output
    if result.output_capped:
        return ToolResult(f"{text}\n[output passed {result.output_bytes} bytes; the command was "
                          "killed. Redirect big outputs to a file and grep it]", is_error=True)
    if result.timed_out:
        return ToolResult(f"{text}\n[timed out after {timeout_note:g} s; the command was killed]",
                          is_error=True)
    return ToolResult(f"{text}[exit code {result.exit_code}]" if text.endswith("\n") or not text
                      else f"{text}\n[exit code {result.exit_code}]")


def run_terminal(ctx: ToolContext, cmd: str, timeout_s: float | None) -> ToolResult:
    if not cmd.strip():
        raise ToolError("cmd is empty")
    limit = ctx.task.limits.tool_timeout_s
    if timeout_s is not None and timeout_s <= 0:
        raise ToolError(f"timeout_s must be positive (at most {limit:g})")
    timeout = limit if timeout_s is None else min(timeout_s, limit)
    return _command_report(ctx.run(cmd, timeout_s=timeout), timeout)


def run_tests(ctx: ToolContext, selector: str | None) -> ToolResult:
    command = ctx.task.visible_test_command
    if selector:
        if selector.startswith("-"):
            raise ToolError("selector must be a test path or node id (like tests/test_x.py::"
                            "test_y), not an option")
        ctx.workspace.resolve(selector.split("::", 1)[0])  # exists and stays inside
        command += " " + shlex.quote(selector)
    return _command_report(ctx.run(command), ctx.task.limits.tool_timeout_s)


def grep(ctx: ToolContext, pattern: str, path: str, glob: str | None) -> ToolResult:
    if not pattern:
        raise ToolError("pattern is empty")
    target = ctx.workspace.display(ctx.workspace.resolve(path))
    command = "grep -rnIE --color=never --exclude-dir=.git"
    if glob:
        command += f" --include={shlex.quote(glob)}"
    command += f" -e {shlex.quote(pattern)} -- {shlex.quote(target)}"
    result = ctx.run(command)
    if result.timed_out or result.output_capped:
        return _command_report(result, ctx.task.limits.tool_timeout_s)
    if result.exit_code == 1:
        return ToolResult(f"no matches for {pattern!r} in {target}")
    if result.exit_code != 0:
        raise ToolError(f"grep failed: {result.output.strip()} (patterns are POSIX extended "
                        "regular expressions, as in grep -E)")
    lines = [line[2:] if line.startswith("./") else line for line in result.output.splitlines()]
    more = len(lines) - _GREP_MAX_LINES
    text = "\n".join(lines[:_GREP_MAX_LINES])
    return ToolResult(text + (f"\n[{more} more matching lines not shown; narrow the pattern, path "
                              "or glob]" if more > 0 else ""))


# git apply is atomic and strict; patch --fuzz accepts diffs with slightly stale context. Both
# run in the sandbox, so a hostile diff can only touch the workspace.
_APPLY_PATCH = """cat > /tmp/agent.diff
if git apply --whitespace=nowarn --verbose /tmp/agent.diff; then exit 0; fi
echo "git apply failed; retrying with patch --fuzz=3"
patch --batch --forward -p1 --fuzz=3 --dry-run -i /tmp/agent.diff >/dev/null &&
  exec patch --batch --forward -p1 --fuzz=3 --no-backup-if-mismatch -i /tmp/agent.diff
exit 1
"""


def apply_patch(ctx: ToolContext, diff: str) -> ToolResult:
    if not diff.strip():
        raise ToolError("diff is empty")
    if not diff.endswith("\n"):
        diff += "\n"  # git apply rejects a last hunk line without its newline
    result = ctx.run(_APPLY_PATCH, stdin=diff.encode("utf-8"))
    if result.exit_code != 0 or result.timed_out:
        raise ToolError("the patch did not apply; nothing was changed. Output:\n"
                        f"{result.output.strip()}\nUse a unified diff with paths relative to the "
                        "workspace (a/ and b/ prefixes), or edit_file")
    return ToolResult(result.output.strip() or "Patch applied")


def finish(ctx: ToolContext, summary: str) -> ToolResult:
    return ToolResult("Episode finished; grading.", finished=True, summary=summary)


DEFAULT_TOOLS: tuple[Tool, ...] = (
    Tool("read_file", "Read a UTF-8 text file with line numbers; start_line/end_line (1-based, "
         "inclusive, -1 = end of file) select a range.",
         (Param("path", "string", "file path, relative to the workspace"),
          Param("start_line", "integer", "first line to show", False, 1),
          Param("end_line", "integer", "last line to show, -1 for the end", False, -1)),
         read_file),
    Tool("list_dir", "List a directory as a tree (hidden entries skipped).",
         (Param("path", "string", "directory, relative to the workspace", False, "."),
          Param("depth", "integer", "how many levels to show", False, 2)),
         list_dir),
    Tool("grep", "Search file contents for a POSIX extended regular expression; prints "
         "path:line:text.",
         (Param("pattern", "string", "regular expression (grep -E syntax)"),
          Param("path", "string", "file or directory to search", False, "."),
          Param("glob", "string", "only files whose name matches, e.g. '*.py'", False, None)),
         grep),
    Tool("glob", "Find paths matching a glob pattern ('**' spans directories).",
         (Param("pattern", "string", "glob pattern, e.g. 'src/**/*.py'"),),
         glob_files),
    Tool("edit_file", "Replace old_str with new_str in a file. old_str must match exactly "
         "(whitespace included) and be unique unless replace_all is true.",
         (Param("path", "string", "file to edit"),
          Param("old_str", "string", "exact text to replace"),
          Param("new_str", "string", "replacement text"),
          Param("replace_all", "boolean", "replace every occurrence", False, False)),
         edit_file),
    Tool("create_file", "Create a file (or overwrite it) with the given content; parent "
         "directories are created.",
         (Param("path", "string", "file to write"),
          Param("content", "string", "the whole file content")),
         create_file),
    Tool("delete_file", "Delete a file or symlink.",
         (Param("path", "string", "file to delete"),),
         delete_file),
    Tool("apply_patch", "Apply a unified diff (a/ b/ prefixes, paths relative to the "
         "workspace).",
         (Param("diff", "string", "the unified diff"),),
         apply_patch),
    Tool("run_terminal", "Run a bash command in a fresh sandbox at /workspace (no network; "
         "state other than files does not persist between calls).",
         (Param("cmd", "string", "the command"),
          Param("timeout_s", "number", "seconds before it is killed (capped by the task)",
                False, None)),
         run_terminal),
    Tool("run_tests", "Run the repository's visible tests, optionally one file or test id.",
         (Param("selector", "string", "e.g. tests/test_x.py or tests/test_x.py::test_y",
                False, None),),
         run_tests),
    Tool("finish", "End the episode; the summary is your final answer or a note on what you did.",
         (Param("summary", "string", "what you did, or the answer to the question", False, ""),),
         finish),
)
