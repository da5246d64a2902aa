"""Workspace paths, host-side writes, grader operations, baselines (environments/workspace.py)."""
import os
import stat
import subprocess

import pytest

from environments.workspace import (PathError, TaskSetupError, Workspace, copy_tree,
                                    prepare_baseline)


@pytest.fixture
def ws(tmp_path):
    """A workspace with a file, a directory and assorted symlinks, plus a secret outside it."""
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "src" / "a.py").write_text("a\n")
    (tmp_path / "secret.txt").write_text("secret\n")
    os.symlink("src/a.py", root / "inner_link")
    os.symlink("/workspace/src", root / "abs_inner_link")
    os.symlink(str(tmp_path), root / "host_dir_link")
    os.symlink("../secret.txt", root / "rel_escape")
    os.symlink("src/../..", root / "sneaky")
    os.symlink("loop_b", root / "loop_a")
    os.symlink("loop_a", root / "loop_b")
    return Workspace(root, uid=os.getuid())


def test_resolves_relative_and_workspace_absolute_paths(ws):
    assert ws.resolve("src/a.py") == ws.root / "src" / "a.py"
    assert ws.resolve("/workspace/src/a.py") == ws.root / "src" / "a.py"
    assert ws.resolve("./src/../src/a.py") == ws.root / "src" / "a.py"
    assert ws.resolve(".") == ws.root and ws.resolve("/workspace") == ws.root


def test_follows_symlinks_that_stay_inside(ws):
    assert ws.resolve("inner_link") == ws.root / "src" / "a.py"
    assert ws.resolve("abs_inner_link/a.py") == ws.root / "src" / "a.py"
    assert ws.resolve("inner_link", follow_last=False) == ws.root / "inner_link"


@pytest.mark.parametrize("path, message", [
    ("../secret.txt", "leads outside the workspace"),
    ("src/../../secret.txt", "leads outside the workspace"),
    ("/etc/passwd", "outside the workspace"),
    ("rel_escape", "through the symlink rel_escape -> ../secret.txt"),
    ("host_dir_link/secret.txt", "outside the workspace"),
    ("sneaky/secret.txt", "through the symlink sneaky"),
    ("loop_a", "too many levels of symbolic links"),
    ("src/a.py/x", "is not a directory"),
    ("missing.py", "does not exist"),
    ("a\0b", "NUL"),
])
def test_refuses_paths_that_escape_or_do_not_exist(ws, path, message):
    with pytest.raises(PathError, match=message):
        ws.resolve(path)


def test_missing_tail_resolves_for_creation_but_never_outside(ws):
    assert ws.resolve("new/dir/f.py", must_exist=False) == ws.root / "new" / "dir" / "f.py"
    with pytest.raises(PathError, match="outside"):
        ws.resolve("new/../../x", must_exist=False)
    with pytest.raises(PathError, match="outside"):
        ws.resolve("host_dir_link/new.txt", must_exist=False)


def test_write_file_creates_parents_and_never_writes_through_escaping_links(ws, tmp_path):
    assert ws.write_file("pkg/sub/mod.py", b"x = 1\n") is True
    assert (ws.root / "pkg" / "sub" / "mod.py").read_bytes() == b"x = 1\n"
    assert ws.write_file("inner_link", b"b\n") is False  # writes the target inside
    assert (ws.root / "src" / "a.py").read_text() == "b\n"
    with pytest.raises(PathError):
        ws.write_file("host_dir_link/planted.txt", b"x")
    with pytest.raises(PathError):
        ws.write_file("rel_escape", b"overwrite")
    assert not (tmp_path / "planted.txt").exists()
    assert (tmp_path / "secret.txt").read_text() == "secret\n"
    with pytest.raises(PathError, match="is a directory"):
        ws.write_file("src", b"x")


def test_written_files_belong_to_the_workspace_uid(tmp_path):
    root = tmp_path / "owned"
    root.mkdir()
    ws = Workspace(root, uid=1_992_001)
    ws.write_file("d/f.txt", b"x")
    assert (root / "d").stat().st_uid == (root / "d" / "f.txt").stat().st_uid == 1_992_001


def test_delete_file_removes_the_link_not_its_target(ws, tmp_path):
    ws.delete_file("rel_escape")
    assert not os.path.lexists(ws.root / "rel_escape")
    assert (tmp_path / "secret.txt").exists()
    with pytest.raises(PathError, match="is a directory"):
        ws.delete_file("src")


def test_replace_with_repairs_symlinked_parents_and_makes_readonly_copies(ws, tmp_path):
    source = tmp_path / "hidden"
    source.mkdir()
    (source / "test_h.py").write_text("def test(): pass\n")
    os.chmod(source / "test_h.py", 0o600)
    target = ws.replace_with("host_dir_link/hidden", source)  # the link is replaced by a dir
    assert target == ws.root / "host_dir_link" / "hidden"
    assert not os.path.islink(ws.root / "host_dir_link")
    assert not (tmp_path / "hidden" / "hidden").exists()
    copied = ws.root / "host_dir_link" / "hidden" / "test_h.py"
    assert stat.S_IMODE(copied.stat().st_mode) == 0o644


def test_remove_and_find_named(ws):
    ws.write_file("a/conftest.py", b"")
    ws.write_file("conftest.py", b"")
    assert ws.find_named(frozenset({"conftest.py"})) == ["a/conftest.py", "conftest.py"]
    ws.remove("a/conftest.py")
    ws.remove("host_dir_link/secret.txt")  # through a symlinked parent: nothing happens
    ws.remove("absent")
    assert ws.find_named(frozenset({"conftest.py"})) == ["conftest.py"]
    assert (ws.root.parent / "secret.txt").exists()


def test_copy_tree_keeps_links_and_modes_and_chowns(tmp_path):
    src = tmp_path / "src"
    (src / "d").mkdir(parents=True)
    (src / "d" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(src / "d" / "run.sh", 0o755)
    os.symlink("d/run.sh", src / "link")
    copy_tree(src, tmp_path / "dst", uid=1_992_002)
    dst = tmp_path / "dst"
    assert os.readlink(dst / "link") == "d/run.sh"
    assert stat.S_IMODE((dst / "d" / "run.sh").stat().st_mode) == 0o755
    assert all(p.lstat().st_uid == 1_992_002 for p in [dst, dst / "d", dst / "d" / "run.sh",
                                                         dst / "link"])


def test_baseline_runs_setup_and_has_a_single_commit(sandbox, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "main.py").write_text("print('hi')\n")
    dest = tmp_path / "baseline"
    prepare_baseline(repo, ("echo built > build.txt",), sandbox, dest, timeout_s=60,
                     task_id="t")
    assert (dest / "build.txt").read_text() == "built\n"
    log = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(dest), "log", "--all",
                          "--format=%s"], capture_output=True, text=True, check=True).stdout
    assert log == "Initial commit\n"
    status = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(dest), "status",
                             "--porcelain"], capture_output=True, text=True, check=True).stdout
    assert status == ""  # setup output is part of the baseline commit
    assert not (dest / ".git" / "hooks").exists()


def test_failing_setup_names_the_task_and_shows_output(sandbox, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    with pytest.raises(TaskSetupError, match=r"setup of task t1 failed \(exit code 3\)"
                                             r"[\s\S]*boom"):
        prepare_baseline(repo, ("echo boom; exit 3",), sandbox, tmp_path / "b", timeout_s=60,
                         task_id="t1")
