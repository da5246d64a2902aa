import subprocess

from cursorbench import taskdir


def test_diff_applies_with_git_including_new_and_deleted_files(tmp_path):
    before = {"a.py": "x = 1\ny = 2\n", "gone.py": "old\n", "end.py": "no newline"}
    after = {"a.py": "x = 1\ny = 3\n", "new/b.py": "made\n", "end.py": "no newline!"}
    taskdir.write_files(tmp_path, before)
    (tmp_path / "p.diff").write_text(taskdir.unified_diff(before, after))
    subprocess.run(["git", "apply", "p.diff"], cwd=tmp_path, check=True)
    (tmp_path / "p.diff").unlink()
    got = {p.relative_to(tmp_path).as_posix(): p.read_text()
           for p in tmp_path.rglob("*") if p.is_file()}
    assert got == after
    assert taskdir.unified_diff(before, before) == ""
