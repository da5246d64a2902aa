"""Writing task directories (the environment's format) from generated files.

Shared by every generator: the pytest command tasks grade with, writing a tree of files, and
reference diffs: git-style unified diffs (`diff --git` headers, a/ and b/ prefixes, sorted by
path) from in-memory contents, which `git apply` (the environment's `apply_patch`) and
`patch -p1` accept. Counting changed lines is `environments.diffs.count_changed_lines`.
"""
from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path

# Plugin autoload (xdist, anyio, ...) is most of pytest's start-up in the project venv, and a
# graded episode runs pytest at least once (BENCHMARKS.md, "Environment"). JUnit output, which
# grading reads, is built into pytest.
PYTEST = "PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 python -m pytest -q -p no:cacheprovider"


def write_files(root: Path, files: Mapping[str, str | bytes]) -> None:
    """Writes {relative path: text or bytes} under root, one mkdir per directory (on a slow
    disk, file-system calls are most of a generator's cost)."""
    made: set[Path] = set()
    for rel, text in sorted(files.items()):
        path = root / rel
        if path.parent not in made:
            path.parent.mkdir(parents=True, exist_ok=True)
            made.add(path.parent)
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text)


def unified_diff(before: Mapping[str, str], after: Mapping[str, str]) -> str:
    """The diff turning files `before` into `after` ({relative path: text}; a path missing
    on one side is a created or deleted file)."""
    chunks = []
    for path in sorted(before.keys() | after.keys()):
        a, b = before.get(path), after.get(path)
        if a == b:
            continue
        header = f"diff --git a/{path} b/{path}\n"
        if a is None:
            header += "new file mode 100644\n"
        elif b is None:
            header += "deleted file mode 100644\n"
        lines = difflib.unified_diff((a or "").splitlines(keepends=True),
                                     (b or "").splitlines(keepends=True),
                                     f"a/{path}" if a is not None else "/dev/null",
                                     f"b/{path}" if b is not None else "/dev/null")
        body = [line if line.endswith("\n") else line + "\n\\ No newline at end of file\n"
                for line in lines]
        chunks.append(header + "".join(body))
    return "".join(chunks)
