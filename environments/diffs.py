"""The episode's diff: what the agent changed, computed from the files, not from git.

The agent can rewrite `.git` (commit, reset, delete it), so the diff compares the workspace
with the untouched baseline copy directly. The result is a unified diff that `git apply` and
`patch -p1` accept; binary and oversized files are named but not shown.
"""
from __future__ import annotations

import difflib
import os

# Not part of a solution: VCS data and caches that tools write as a side effect.
_IGNORED_DIRS = frozenset({".git", "__pycache__", ".pytest_cache", ".mypy_cache"})
_IGNORED_SUFFIXES = (".pyc",)
_MAX_DIFF_FILE_BYTES = 1 << 20


def tree_diff(before: str, after: str) -> str:
    """A unified diff (a/ and b/ prefixes, sorted by path) turning tree `before` into `after`."""
    old, new = _snapshot(before), _snapshot(after)
    chunks = []
    for rel in sorted(old.keys() | new.keys()):
        a, b = old.get(rel), new.get(rel)
        if a != b:
            chunks.append(_file_diff(rel, a, b))
    return "".join(chunks)


def count_changed_lines(diff: str) -> tuple[int, int]:
    """(added, removed) lines in a unified diff, not counting the ---/+++ headers."""
    added = removed = 0
    for line in diff.splitlines():
        if line.startswith("+") and not line.startswith("+++ "):
            added += 1
        elif line.startswith("-") and not line.startswith("--- "):
            removed += 1
    return added, removed


def changed_files(diff: str) -> int:
    """How many files a diff made by `tree_diff` touches."""
    return sum(1 for line in diff.splitlines() if line.startswith("diff --git "))


def _snapshot(root: str) -> dict[str, bytes]:
    """Path -> content for every regular file and symlink under root (links as their target)."""
    files: dict[str, bytes] = {}

    def visit(directory: str) -> None:
        with os.scandir(directory) as entries:
            for entry in entries:
                rel = os.path.relpath(entry.path, root)
                if entry.is_symlink():
                    files[rel] = b"symlink -> " + os.fsencode(os.readlink(entry.path)) + b"\n"
                elif entry.is_dir(follow_symlinks=False):
                    if entry.name not in _IGNORED_DIRS:
                        visit(entry.path)
                elif entry.is_file(follow_symlinks=False) and not entry.name.endswith(
                        _IGNORED_SUFFIXES):
                    size = entry.stat(follow_symlinks=False).st_size
                    files[rel] = _read_regular(entry.path, size)

    visit(root)
    return files


def _read_regular(path: str, size: int) -> bytes:
    if size > _MAX_DIFF_FILE_BYTES:
        # Distinct sizes give distinct markers, so a change in size still shows as a change.
        return b"\0large file of %d bytes" % size
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as f:
        return f.read(_MAX_DIFF_FILE_BYTES + 1)


def _file_diff(rel: str, a: bytes | None, b: bytes | None) -> str:
    header = f"diff --git a/{rel} b/{rel}\n"
    if a is None:
        header += "new file mode 100644\n"
    elif b is None:
        header += "deleted file mode 100644\n"
    from_name = f"a/{rel}" if a is not None else "/dev/null"
    to_name = f"b/{rel}" if b is not None else "/dev/null"
    a_text, b_text = _as_text(a), _as_text(b)
    if a_text is None or b_text is None:
        return header + f"Binary files {from_name} and {to_name} differ\n"
    lines = difflib.unified_diff(a_text.splitlines(keepends=True),
                                 b_text.splitlines(keepends=True), from_name, to_name)
    out = [header]
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


def _as_text(data: bytes | None) -> str | None:
    if data is None:
        return ""
    if b"\0" in data[:8192]:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
