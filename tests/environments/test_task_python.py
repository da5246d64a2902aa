"""A task's own virtual environment (`"python"` in task.json): its interpreter and packages are
what the task's sandboxed commands see, and the env switches back for a task without one."""
import subprocess
import sys
from pathlib import Path

import pytest

import environments
from environments.sandbox import PythonRuntime
from environments.task import TaskError


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """A venv (no pip) whose site-packages holds a module only it provides."""
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    site = next(root.glob("lib/python3*/site-packages"))
    (site / "only_in_this_venv.py").write_text("WHERE = 'the task venv'\n")
    return root


def _run(env, command: str) -> str:
    obs, *_ = env.step({"tool": "run_terminal", "args": {"cmd": command}})
    return obs["content"]


def test_from_venv_binds_the_venv_and_its_base_installation(venv):
    runtime = PythonRuntime.from_venv(venv)
    assert runtime.prefixes[0] == str(venv.resolve())
    assert Path(runtime.prefixes[1], "bin").is_dir() and runtime.bin_dir.endswith("/bin")
    with pytest.raises(ValueError, match="not a virtual environment"):
        PythonRuntime.from_venv(venv / "lib")


def test_a_task_runs_with_its_own_venv_and_the_next_task_without(venv, write_task, make_env):
    own = environments.load_task(write_task("own", {"a.py": "x = 1\n"}, python=str(venv),
                                                     test_command="true"))
    plain = environments.load_task(write_task("plain", {"a.py": "x = 1\n"}, test_command="true"))
    env = make_env()
    probe = "python -c 'import sys, only_in_this_venv as m; print(sys.prefix, m.WHERE)'"
    env.reset(options={"task": own})
    assert f"{venv.resolve()} the task venv\n" in _run(env, probe)
    env.reset(options={"task": plain})
    assert "No module named 'only_in_this_venv'" in _run(env, probe)
    assert f"{Path(sys.prefix).resolve()}\n" in _run(env, "python -c 'import sys; print(sys.prefix)'")


def test_a_python_that_is_not_a_venv_is_named(write_task, tmp_path):
    path = write_task("bad", {"a.py": ""}, python=str(tmp_path / "nowhere"),
                      test_command="true")
    with pytest.raises(TaskError, match="not the absolute path of a virtual environment"):
        environments.load_task(path)
