"""The episode's working copy of a repository, and safe host-side access to it.

File tools (read, list, edit, create, delete) run in the host process, not in a sandbox, to
keep them fast. They are safe because every agent path goes through `Workspace.resolve`, which
walks it component by component, follows symlinks itself with the workspace as the root (an
absolute link target counts as a path inside the sandbox's /workspace) and refuses anything
that leaves the workspace; and because no agent process runs between two commands (each
command's pid namespace dies with it), nothing can swap a checked path for a symlink before we
use it.
"""
from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

from environments.sandbox import WORKSPACE, CommandResult

_MAX_SYMLINKS = 40  # the kernel's own limit on nested symlinks in one lookup

# Runs in the sandbox after the task's setup commands: one commit and nothing else, so the
# history cannot reveal a fix. No hook templates; one pack file keeps the per-reset copy small.
_GIT_INIT = """
git init -q --template= -b main .
git add -A
git commit -q --allow-empty --no-verify -m "Initial commit"
git repack -adq
"""


class PathError(ValueError):
    """An agent-supplied path that cannot be used; the message says why, for the agent."""


class TaskSetupError(RuntimeError):
    """A task's setup commands (or the git baseline) failed: a broken task, not a bad agent."""


class Workspace:
    """A host directory that sandboxed commands see as /workspace, owned by the sandbox uid."""

    def __init__(self, root: str | Path, uid: int):
        self.root = Path(root)
        self.uid = uid

    # ---- paths -------------------------------------------------------------------------------

    def resolve(self, path: str, *, follow_last: bool = True, must_exist: bool = True) -> Path:
        """The host path for a workspace-relative `path`; PathError if it leaves the workspace.

        `path` may also be absolute under /workspace. With `must_exist=False` the missing tail
        is returned as it would be created. With `follow_last=False` a final symlink is
        returned itself (to delete the link, not its target).
        """
        pending = _components(path, what=repr(path))
        resolved: list[str] = []
        links = 0
        via = ""  # the last symlink followed, to explain where an escape came from
        while pending:
            name = pending.pop(0)
            if name in ("", "."):
                continue
            if name == "..":
                if not resolved:
                    raise PathError(f"{path!r} leads outside the workspace{via}")
                resolved.pop()
                continue
            candidate = self.root.joinpath(*resolved, name)
            try:
                st = os.lstat(candidate)
            except FileNotFoundError:
                if must_exist:
                    raise PathError(f"{path!r} does not exist") from None
                resolved.append(name)
                continue
            last = not pending
            if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
                links += 1
                if links > _MAX_SYMLINKS:
                    raise PathError(f"{path!r}: too many levels of symbolic links")
                target = os.readlink(candidate)
                via = f" through the symlink {self.display(candidate)} -> {target}"
                if target.startswith("/"):
                    resolved = []
                    pending = _components(target, what=f"{path!r} (via{via})") + pending
                else:
                    pending = target.split("/") + pending
                continue
            if not last and not stat.S_ISDIR(st.st_mode):
                raise PathError(f"{path!r}: {self.display(candidate)} is not a directory")
            resolved.append(name)
        return self.root.joinpath(*resolved)

    def display(self, host_path: str | Path) -> str:
        """The workspace-relative form of a host path inside the workspace ('.' for the root)."""
        rel = os.path.relpath(host_path, self.root)
        return "." if rel == "." else rel

    # ---- agent-facing writes -----------------------------------------------------------------

    def write_file(self, path: str, data: bytes) -> bool:
        """Creates or overwrites a file (and missing parent directories); True if created."""
        target = self.resolve(path, must_exist=False)
        if target == self.root:
            raise PathError("a file path is required, not the workspace root")
        self._make_dirs(target.parent)
        created = not os.path.lexists(target)
        if not created and stat.S_ISDIR(os.lstat(target).st_mode):
            raise PathError(f"{path!r} is a directory")
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC,
                     0o644)
        try:
            _write_all(fd, data)
            if created:
                os.fchown(fd, self.uid, self.uid)
        finally:
            os.close(fd)
        return created

    def delete_file(self, path: str) -> None:
        """Deletes a file or symlink (the link itself, never its target)."""
        target = self.resolve(path, follow_last=False)
        if target == self.root or stat.S_ISDIR(os.lstat(target).st_mode):
            raise PathError(f"{path!r} is a directory; delete directories with run_terminal "
                            "(rm -r)")
        os.unlink(target)

    def _make_dirs(self, host_dir: Path) -> None:
        missing = []
        while not host_dir.exists():
            missing.append(host_dir)
            host_dir = host_dir.parent
        for directory in reversed(missing):
            os.mkdir(directory, 0o755)
            os.chown(directory, self.uid, self.uid)

    # ---- grader-side operations (no agent process is alive while they run) -------------------

    def replace_with(self, rel: str, source: Path) -> Path:
        """Puts a copy of `source` (file, symlink or tree) at `rel`, whatever the agent left.

        Parents that the agent turned into symlinks or files are replaced by real directories
        first, so the copy cannot be redirected outside. The copy is owned by root-or-caller,
        not the sandbox uid, so sandboxed code cannot edit it in place.
        """
        target = self._real_parents(rel, create=True)
        _remove(target)
        if source.is_symlink():
            os.symlink(os.readlink(source), target)
        elif source.is_dir():
            copy_tree(source, target, uid=None)
        else:
            _copy_file(str(source), str(target), 0o644, None)
        return target

    def remove(self, rel: str) -> None:
        """Removes whatever is at `rel` without following symlinks (no-op if absent)."""
        target = self._real_parents(rel, create=False)
        if target is not None:
            _remove(target)

    def find_named(self, names: frozenset[str]) -> list[str]:
        """Workspace-relative paths of entries called one of `names` (not under .git)."""
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames[:] = [d for d in dirnames if d != ".git"]
            for name in filenames + dirnames:
                if name in names:
                    found.append(os.path.relpath(os.path.join(dirpath, name), self.root))
        return sorted(found)

    def _real_parents(self, rel: str, *, create: bool) -> Path | None:
        parts = [p for p in _components(rel, what=repr(rel)) if p not in ("", ".")]
        if not parts or ".." in parts:
            raise ValueError(f"grader path {rel!r} must be a plain relative path")
        current = self.root
        for name in parts[:-1]:
            current = current / name
            try:
                st = os.lstat(current)
            except FileNotFoundError:
                st = None
            if st is not None and stat.S_ISDIR(st.st_mode):
                continue
            if not create:
                return None
            if st is not None:
                os.unlink(current)  # a symlink or file where a directory belongs
            os.mkdir(current, 0o755)
        return current / parts[-1]


def prepare_baseline(repo_dir: Path, setup: tuple[str, ...], runner, dest: Path, *,
                     timeout_s: float, task_id: str) -> None:
    """Builds a task's starting workspace at `dest`: a copy of repo/, the task's setup commands
    run once in the sandbox, then a fresh one-commit git history. Resets copy this baseline."""
    copy_tree(repo_dir, dest, uid=runner.uid)
    script = "set -e\n" + "\n".join(setup) + "\n" + _GIT_INIT
    result: CommandResult = runner.run(script, workspace=str(dest), timeout_s=timeout_s)
    if result.infra_error:
        raise TaskSetupError(f"the sandbox failed while setting up task {task_id}: "
                             f"{result.infra_error}")
    if result.exit_code != 0:
        status = "timed out" if result.timed_out else f"exit code {result.exit_code}"
        raise TaskSetupError(f"setup of task {task_id} failed ({status}) in {WORKSPACE}:\n"
                             f"{result.output[-4000:]}")


def copy_tree(source: Path, dest: Path, *, uid: int | None) -> None:
    """Copies a directory tree (symlinks as symlinks).

    With `uid`, everything is chowned to it and modes are kept (a workspace the sandbox uid
    owns). Without, the copy stays ours and is made readable but not writable for others (what
    the grader puts in: sandboxed code may read it, not edit it).

    Hard links would be faster but unsafe: an in-place write in one workspace (`echo >> f`)
    would change the shared inode in every other. Plain copies of a small repo take a few ms.
    """
    dir_mode = stat.S_IMODE(os.stat(source).st_mode) | 0o700 if uid is not None else 0o755
    os.mkdir(dest, dir_mode)
    os.chmod(dest, dir_mode)  # mkdir applies the umask
    if uid is not None:
        os.chown(dest, uid, uid)
    with os.scandir(source) as entries:
        for entry in entries:
            src, dst = entry.path, os.path.join(dest, entry.name)
            if entry.is_symlink():
                os.symlink(os.readlink(src), dst)
                if uid is not None:
                    os.lchown(dst, uid, uid)
            elif entry.is_dir(follow_symlinks=False):
                copy_tree(Path(src), Path(dst), uid=uid)
            elif entry.is_file(follow_symlinks=False):
                mode = stat.S_IMODE(entry.stat(follow_symlinks=False).st_mode)
                if uid is None:
                    mode = (mode & 0o755) | 0o644
                _copy_file(src, dst, mode, uid)


def _copy_file(src: str, dst: str, mode: int, uid: int | None) -> None:
    in_fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        out_fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
        try:
            # sendfile copies in the kernel and, unlike copy_file_range, across filesystems.
            while os.sendfile(out_fd, in_fd, None, 1 << 30):
                pass
            os.fchmod(out_fd, mode)  # open applies the umask
            if uid is not None:
                os.fchown(out_fd, uid, uid)
        finally:
            os.close(out_fd)
    finally:
        os.close(in_fd)


def _remove(path: Path) -> None:
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        shutil.rmtree(path)
    else:
        os.unlink(path)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _components(path: str, *, what: str) -> list[str]:
    """Splits a workspace path; absolute paths must be under /workspace."""
    if not isinstance(path, str):
        raise PathError(f"paths must be strings, got {type(path).__name__}")
    if "\0" in path:
        raise PathError(f"{what} contains a NUL character")
    if path.startswith("/"):
        if path != WORKSPACE and not path.startswith(WORKSPACE + "/"):
            raise PathError(f"{what} is outside the workspace: use a path relative to the "
                            f"workspace root (or under {WORKSPACE})")
        path = path[len(WORKSPACE):]
    return path.split("/")
