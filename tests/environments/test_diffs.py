"""The file-based episode diff (environments/diffs.py)."""
import os
import shutil
import subprocess

from environments import diffs


def write(root, files):
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data if isinstance(data, bytes) else data.encode())


def test_diff_applies_with_git_and_reproduces_the_change(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    write(before, {"pkg/a.py": "1\n2\n3\n", "gone.txt": "bye\n", "same.txt": "x\n",
                   "tail.txt": "no newline"})
    write(after, {"pkg/a.py": "1\ntwo\n3\n", "new/b.py": "print()\n", "same.txt": "x\n",
                  "tail.txt": "no newline, changed"})
    diff = diffs.tree_diff(str(before), str(after))
    assert diffs.changed_files(diff) == 4
    assert diffs.count_changed_lines(diff) == (3, 3)
    assert "same.txt" not in diff
    applied = tmp_path / "applied"
    shutil.copytree(before, applied)
    subprocess.run(["git", "apply", "-"], input=diff, text=True, cwd=applied, check=True)
    assert diffs.tree_diff(str(applied), str(after)) == ""


def test_ignores_vcs_and_caches_but_not_hidden_source(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    write(before, {"a.py": "x\n"})
    write(after, {"a.py": "x\n", ".git/index": b"\0", "__pycache__/a.cpython-311.pyc": b"\0",
                  "b.pyc": b"\0", ".env": "KEY=1\n"})
    diff = diffs.tree_diff(str(before), str(after))
    assert diffs.changed_files(diff) == 1 and "b/.env" in diff


def test_binary_and_symlink_changes_are_named(tmp_path):
    before, after = tmp_path / "before", tmp_path / "after"
    write(before, {"img.bin": b"\0\1\2"})
    write(after, {"img.bin": b"\0\1\3"})
    os.symlink("/etc/passwd", after / "link")
    diff = diffs.tree_diff(str(before), str(after))
    assert "Binary files a/img.bin and b/img.bin differ" in diff
    assert "+symlink -> /etc/passwd" in diff
