"""Attacks an agent could run, each through `env.step` as a policy would send it.

Every attack must be contained and leave the host unaffected. Network tests only ever touch
127.0.0.1 on this machine: a listener the test opens itself, which the sandbox must not reach.
"""
import os
import re
import shlex
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from environments.task import load_task
from environments.uids import processes_of_uid
from tests.environments.conftest import FIXTURE_TASKS, SMALL_LIMITS

ANSWER_TASK = {"answer": "42", "category": "understanding",
               "limits": {"tool_timeout_s": 8, "max_steps": 100}}


@pytest.fixture
def env(make_env, write_task):
    """An episode on a small answer-only task (cheap to grade), already reset."""
    environment = make_env(load_task(write_task("target", {"app.py": "print('hi')\n"},
                                                **ANSWER_TASK)))
    environment.reset(seed=0)
    return environment


def uid_of(env):
    return env._runner.uid


def terminal(env, cmd, timeout_s=None):
    args = {"cmd": cmd} if timeout_s is None else {"cmd": cmd, "timeout_s": timeout_s}
    obs, *_ = env.step({"tool": "run_terminal", "args": args})
    return obs["content"]


def tool(env, name, **args):
    obs, *_ = env.step({"tool": name, "args": args})
    return obs


def host_still_works():
    return subprocess.run(["true"], check=False).returncode == 0


# ---- resource exhaustion ---------------------------------------------------------------------

def test_process_count_is_capped_by_the_uid_rlimit(env):
    script = ("import os, time\nn = 0\ntry:\n    while True:\n        if os.fork() == 0:\n"
              "            time.sleep(60)\n            os._exit(0)\n        n += 1\n"
              "except OSError as e:\n    print('forked', n, e.strerror)\n")
    start = time.monotonic()
    out = terminal(env, f"python -c {shlex.quote(script)}")
    forked = int(re.search(r"forked (\d+) Resource temporarily unavailable", out).group(1))
    assert 0 < forked < SMALL_LIMITS.processes
    assert time.monotonic() - start < 6  # the sleeping children died with the command
    assert processes_of_uid(uid_of(env)) == [] and host_still_works()


def test_fork_bomb_is_contained(env):
    # The classic bomb without its '&': every level waits for its two children, so the tree
    # keeps growing until the timeout instead of dying with the command's first shell.
    out = terminal(env, ":(){ :|: ; };:", timeout_s=2)
    assert "Resource temporarily unavailable" in out
    assert processes_of_uid(uid_of(env)) == [] and host_still_works()


def test_memory_bomb_hits_the_address_space_limit(env):
    out = terminal(env, "python -c 'x = bytearray(2 * 1024 ** 3)'")
    assert "MemoryError" in out and out.endswith("[exit code 1]")


def test_cpu_spin_is_killed_by_the_cpu_limit(env):
    out = terminal(env, "python -c 'while True: pass'")
    # The kernel SIGKILLs at the (equal soft and hard) RLIMIT_CPU, well before the 8 s
    # wall-clock timeout, which would have reported "timed out" instead.
    assert out.endswith(f"[exit code {128 + 9}]") and "timed out" not in out


def test_sleeping_forever_is_killed_by_the_wall_clock(env):
    start = time.monotonic()
    out = terminal(env, "sleep 600", timeout_s=0.5)
    assert "timed out after 0.5 s" in out and time.monotonic() - start < 5


def test_disk_fill_hits_the_file_size_limit_and_tmp_is_capped(env):
    out = terminal(env, "head -c 100M /dev/zero > big.bin; ls -l big.bin")
    assert "File size limit exceeded" in out
    assert (env._root / "ws" / "big.bin").stat().st_size == SMALL_LIMITS.file_size_mb << 20
    out = terminal(env, "for i in 1 2 3 4 5 6; do head -c 15M /dev/zero > /tmp/f$i || break; "
                        "done")
    assert "No space left on device" in out


def test_gigabytes_of_output_are_cut_off(env):
    start = time.monotonic()
    obs = tool(env, "run_terminal", cmd="head -c 5G /dev/zero | tr '\\0' x")
    assert obs["is_error"] == 1 and "the command was killed" in obs["content"]
    assert len(obs["content"]) <= env.task.limits.max_observation_chars
    assert time.monotonic() - start < 5


# ---- network ---------------------------------------------------------------------------------

def test_cannot_reach_a_listener_on_host_loopback(env):
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.setblocking(False)
    port = listener.getsockname()[1]
    try:
        out = terminal(env, "python -c \"import socket; socket.create_connection(('127.0.0.1', "
                            f"{port}), timeout=2)\"; echo interfaces: "
                            "$(awk -F: 'NR > 2 {print $1}' /proc/net/dev)")
        assert "ConnectionRefusedError" in out
        interfaces = out.split("interfaces:")[1].split("[exit code")[0].split()
        assert interfaces == ["lo"]  # no route out of the sandbox at all
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()


def test_name_resolution_fails_without_a_way_out(env):
    # No resolv.conf and no interface but the sandbox's own loopback: the lookup goes nowhere.
    out = terminal(env, "ls /etc/resolv.conf; python -c \"import socket; "
                        "socket.getaddrinfo('example.com', 80)\"")
    assert "No such file or directory" in out and "gaierror" in out


# ---- host secrets ----------------------------------------------------------------------------

def test_cannot_read_host_files_or_environment(env, tmp_path, monkeypatch):
    secret = tmp_path / "host-secret.txt"
    secret.write_text("hunter2\n")
    monkeypatch.setenv("C2JAX_SECRET_TOKEN", "hunter2")
    checkout_file = Path(__file__).resolve().parents[2] / "setup.py"  # beside the bound .venv
    out = terminal(env, f"cat {secret} /etc/shadow /root/.bash_history {checkout_file}; "
                        "ls /home; env; cat /proc/1/environ; "
                        "cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'")
    assert "hunter2" not in out and "C2JAX_SECRET" not in out
    assert out.count("No such file or directory") >= 5
    for path in ("/etc/passwd", str(secret), f"../{secret.name}"):
        assert tool(env, "read_file", path=path)["is_error"] == 1
    terminal(env, f"ln -s {secret} leak; ln -s / root_link")
    for path in ("leak", "root_link/etc/passwd"):
        obs = tool(env, "read_file", path=path)
        assert obs["is_error"] == 1 and "hunter2" not in obs["content"]
    assert tool(env, "grep", pattern="hunter2", path=".")["content"].startswith("no matches")


# ---- writing outside the workspace -----------------------------------------------------------

def test_cannot_write_outside_the_workspace(env, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "victim.txt"
    victim.write_text("original\n")
    terminal(env, f"echo x > /usr/evil; echo x > /evil; echo x > {outside}/planted; "
                  f"ln -s {outside} out; ln -s .. up; ln -s {victim} victim_link")
    attempts = [
        ("create_file", {"path": "../planted", "content": "x"}),
        ("create_file", {"path": str(outside / "planted"), "content": "x"}),
        ("create_file", {"path": "out/planted", "content": "x"}),
        ("create_file", {"path": "up/planted", "content": "x"}),
        ("create_file", {"path": "victim_link", "content": "pwned"}),
        ("edit_file", {"path": "victim_link", "old_str": "original", "new_str": "pwned"}),
        ("delete_file", {"path": "out/victim.txt"}),
        ("apply_patch", {"diff": "--- /dev/null\n+++ b/../planted\n@@ -0,0 +1 @@\n+x\n"}),
        ("apply_patch", {"diff": "--- a/victim_link\n+++ b/victim_link\n@@ -1 +1 @@\n"
                                 "-original\n+pwned\n"}),
    ]
    for name, args in attempts:
        assert tool(env, name, **args)["is_error"] == 1, (name, args)
    assert sorted(os.listdir(outside)) == ["victim.txt"]
    assert victim.read_text() == "original\n"
    assert not os.path.exists("/evil") and not os.path.exists("/usr/evil")
    assert not (tmp_path / "planted").exists()


# ---- processes -------------------------------------------------------------------------------

def test_cannot_see_or_kill_host_processes_or_other_sandboxes(env, make_env, write_task):
    other = make_env(load_task(write_task("other", {"a.py": ""}, **ANSWER_TASK)))
    other.reset(seed=0)
    marker = other._root / "ws" / "started"
    result = {}
    victim_cmd = ("python -c \"import time; open('started', 'w').close(); time.sleep(2.5); "
                  "print('other sandbox survived')\"")
    thread = threading.Thread(target=lambda: result.update(out=terminal(other, victim_cmd)))
    thread.start()
    deadline = time.monotonic() + 20
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.01)  # polling for the other sandbox to start, bounded by the deadline
    victim_pids = " ".join(map(str, processes_of_uid(uid_of(other))))
    out = terminal(env, "ls /proc | grep -cE '^[0-9]+$'; cat /proc/*/cmdline | tr '\\0' ' '; "
                        f"echo; kill -9 {os.getpid()} {os.getppid()} {victim_pids}; "
                        "kill -9 1; kill -9 -1; echo attacker-done")
    thread.join(timeout=30)
    assert int(out.split()[0]) <= 5  # bash, its pipeline and the namespace's init
    with open("/proc/self/cmdline", "rb") as f:
        own_command = f.read().replace(b"\0", b" ").decode().strip()
    assert own_command not in out and "attacker-done" in out
    assert "other sandbox survived" in result["out"]
    assert host_still_works()


def test_no_process_outlives_a_command_or_the_episode(env):
    start = time.monotonic()
    out = terminal(env, "sleep 300 & nohup sleep 300 > /dev/null 2>&1 & "
                        "setsid sleep 300 & (setsid sh -c 'sleep 300 &') ; echo spawned")
    assert "spawned" in out and time.monotonic() - start < 5
    assert processes_of_uid(uid_of(env)) == []
    env.step({"tool": "finish", "args": {"summary": "42"}})
    assert processes_of_uid(uid_of(env)) == []


# ---- grader tampering ------------------------------------------------------------------------

def test_tampering_with_tests_and_grader_files_does_not_pay(make_env):
    env = make_env(FIXTURE_TASKS / "debug-mean")
    env.reset(seed=0)
    assert "No such file" in terminal(env, "ls hidden_tests; find / -name test_mean.py")
    always_pass = ("import pytest\n\n@pytest.hookimpl(hookwrapper=True)\n"
                   "def pytest_runtest_makereport(item, call):\n    outcome = yield\n"
                   "    outcome.get_result().outcome = 'passed'\n")
    for path, content in {
        "tests/test_total.py": "def test_total():\n    assert True\n",
        "conftest.py": always_pass,
        "stats/conftest.py": always_pass,
        "hidden_tests/test_mean.py": "def test_mean():\n    assert True\n",
        "hidden_tests/conftest.py": always_pass,
        "pytest.ini": "[pytest]\naddopts = -p no:junitxml\n",
        "tests/tox.ini": "[pytest]\naddopts = -p no:junitxml\n",
        "pytest.py": "print('5 passed'); raise SystemExit(0)\n",
        "sitecustomize.py": "import os; os._exit(0)\n",
    }.items():
        assert tool(env, "create_file", path=path, content=content)["is_error"] == 0
    *_, info = env.step({"tool": "finish", "args": {"summary": "All tests pass."}})
    assert info["reward_components"]["tests_total"] == 5 and not info["resolved"]
    assert info["tests_status"]["hidden_tests.test_mean::test_mean_of_three"] == "failed"
    assert "hidden_tests.test_mean::test_mean" not in info["tests_status"]


def test_code_under_test_cannot_rewrite_or_move_the_hidden_tests(make_env):
    env = make_env(FIXTURE_TASKS / "debug-mean")
    env.reset(seed=0)
    # Runs when the hidden tests import the module; pytest captures prints, so it logs to a file.
    attack = ("\nimport os\nlog = open('attack.log', 'a')\ntry:\n"
              "    open('hidden_tests/test_mean.py', 'w').write('')\n"
              "except OSError as e:\n    log.write(f'write blocked: {e.strerror}\\n')\ntry:\n"
              "    os.rename('hidden_tests', 'moved')\nexcept OSError as e:\n"
              "    log.write(f'rename blocked: {e.strerror}\\n')\n")
    source = (FIXTURE_TASKS / "debug-mean" / "repo" / "stats" / "core.py").read_text()
    tool(env, "create_file", path="stats/core.py", content=source + attack)
    *_, info = env.step({"tool": "finish", "args": {"summary": ""}})
    log = (env._root / "ws" / "attack.log").read_text()
    assert "write blocked: Read-only file system" in log
    assert "rename blocked: Device or resource busy" in log
    assert info["tests_status"]["hidden_tests.test_mean::test_mean_of_three"] == "failed"
    assert not info["resolved"]
