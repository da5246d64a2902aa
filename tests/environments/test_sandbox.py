"""The bubblewrap sandbox (environments/sandbox.py), run for real."""
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from environments import sandbox as sb
from environments.uids import processes_of_uid
from tests.environments.conftest import SMALL_LIMITS, SMALL_SANDBOX


def run(runner, workspace, command, **kwargs):
    kwargs.setdefault("timeout_s", 30)
    return runner.run(command, workspace=str(workspace.root), **kwargs)


def status_fields(text):
    return {line.split(":")[0]: line.split(":", 1)[1].split() for line in text.splitlines()}


def test_runs_as_a_leased_unprivileged_uid(sandbox, workspace):
    assert sandbox.uid >= 1000 and sandbox.uid != os.geteuid()
    result = run(sandbox, workspace, "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|"
                                     "CapAmb|NoNewPrivs):' /proc/self/status")
    fields = status_fields(result.output)
    assert fields["Uid"] == [str(sandbox.uid)] * 4  # real, effective, saved, filesystem
    assert fields["Gid"] == [str(sandbox.uid)] * 4
    assert fields["Groups"] == []
    for caps in ("CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb"):
        assert int(fields[caps][0], 16) == 0, caps
    assert fields["NoNewPrivs"] == ["1"]


def test_rlimits_are_applied(sandbox, workspace):
    result = run(sandbox, workspace, "ulimit -t; ulimit -v; ulimit -f; ulimit -n; ulimit -u; "
                                     "ulimit -Hv")
    cpu, vmem_kb, fsize_blocks, nofile, nproc, hard_vmem_kb = result.output.split()
    assert int(cpu) == SMALL_LIMITS.cpu_s
    assert int(vmem_kb) == int(hard_vmem_kb) == SMALL_LIMITS.address_space_mb * 1024
    assert int(fsize_blocks) * 1024 == SMALL_LIMITS.file_size_mb << 20
    assert int(nofile) == SMALL_LIMITS.open_files
    assert int(nproc) == SMALL_LIMITS.processes
    raised = run(sandbox, workspace, "ulimit -v unlimited && echo raised")
    assert "raised" not in raised.output  # hard limits cannot be lifted from inside


def test_filesystem_view(sandbox, workspace):
    script = """
    ls /; echo ---; ls /etc; echo ---
    touch /usr/evil 2>&1 | grep -c 'Read-only' ; touch /evil 2>&1 | grep -c 'denied'
    touch /workspace/ok /tmp/ok /dev/shm/ok && echo writable
    stat -c %a /tmp /dev/shm; df -m /tmp | tail -1 | awk '{print $2}'
    """
    root, etc, rest = run(sandbox, workspace, script).output.split("---\n")
    # The interpreter's prefixes are bound at their host paths (a checkout under /work, /check,
    # ...), so their top-level directories show; nothing else of the host does.
    python_tops = {Path(p).parts[1] for p in sb.PythonRuntime.current().prefixes}
    assert set(root.split()) <= {"bin", "dev", "etc", "lib", "lib32", "lib64", "libx32", "proc",
                                 "sbin", "tmp", "usr", "workspace"} | python_tops
    assert not ({"home", "sys"} - python_tops) & set(root.split())
    assert set(etc.split()) <= {"alternatives", "ld.so.cache", "localtime"}
    ro, denied, writable, tmp_mode, shm_mode, tmp_mb = rest.split()
    assert (ro, denied, writable) == ("1", "1", "writable")
    assert tmp_mode == shm_mode == "1777"
    assert int(tmp_mb) == SMALL_LIMITS.tmp_size_mb
    assert (workspace.root / "ok").stat().st_uid == sandbox.uid


def test_tmp_is_private_to_each_command(sandbox, workspace):
    run(sandbox, workspace, "echo x > /tmp/left-behind")
    # (A checkout under /tmp shows its venv's parent dirs here, bound read-only on the tmpfs.)
    listing = run(sandbox, workspace, "ls -A /tmp").output.split()
    prefix = Path(sys.prefix).resolve()
    allowed = {prefix.relative_to("/tmp").parts[0]} if prefix.is_relative_to("/tmp") else set()
    assert set(listing) <= allowed, listing


def test_host_can_read_and_delete_what_the_uid_created(sandbox, workspace):
    run(sandbox, workspace, "mkdir -p locked/deep && echo data > locked/deep/f && "
                            "chmod 000 locked/deep/f locked/deep locked")
    assert (workspace.root / "locked" / "deep" / "f").read_text() == "data\n"
    shutil.rmtree(workspace.root / "locked")
    assert not (workspace.root / "locked").exists()


def test_project_python_and_pytest_run_inside(sandbox, workspace):
    (workspace.root / "test_inside.py").write_text("def test_ok():\n    assert 1 + 1 == 2\n")
    result = run(sandbox, workspace, "python -c 'import sys; print(sys.prefix)'; "
                                     "python -m pytest -q -p no:cacheprovider test_inside.py")
    assert result.output.splitlines()[0] == os.path.realpath(sys.prefix)
    assert "1 passed" in result.output and result.exit_code == 0


def test_masked_files_read_as_empty(workspace):
    python = sb.PythonRuntime.current()
    masked = os.path.join(sys.prefix, "pyvenv.cfg")
    assert os.path.getsize(masked) > 0
    runner = sb.open_sandbox(sb.SandboxConfig(
        limits=SMALL_LIMITS, python=sb.PythonRuntime(python.prefixes, python.bin_dir, (masked,))))
    try:
        os.chown(workspace.root, runner.uid, runner.uid)
        assert run(runner, workspace, f"wc -c < {masked}").output.strip() == "0"
    finally:
        runner.close()


def test_current_runtime_binds_this_interpreter():
    python = sb.PythonRuntime.current()
    assert os.path.realpath(sys.prefix) in python.prefixes
    assert os.path.realpath(sys.base_prefix) in python.prefixes
    assert python.bin_dir == os.path.join(os.path.realpath(sys.prefix), "bin")
    assert all(os.path.basename(p).startswith("__editable__") for p in python.masked_files)


def test_environment_is_only_the_allowlist(sandbox, workspace, monkeypatch):
    monkeypatch.setenv("C2JAX_TEST_SECRET", "hunter2")
    result = run(sandbox, workspace, "env", env={"EXTRA": "1"})
    names = {line.split("=", 1)[0] for line in result.output.splitlines()}
    assert names == set(sb.sandbox_env(None)) | {"EXTRA", "PWD", "SHLVL", "_"}
    assert "hunter2" not in result.output


def test_stdin_reaches_the_command(sandbox, workspace):
    assert run(sandbox, workspace, "tr a-z A-Z", stdin=b"hello\n").output == "HELLO\n"


def test_infra_errors_are_told_apart_from_command_errors(sandbox, workspace, tmp_path):
    broken = run(sandbox, workspace, "true", binds=[(str(tmp_path / "missing"), "/x")])
    assert broken.infra_error and "bwrap" in broken.infra_error
    forged = run(sandbox, workspace, "echo 'bwrap: Can not mount' >&2; exit 1")
    assert forged.infra_error is None and forged.exit_code == 1
    assert forged.output == "bwrap: Can not mount\n"


def test_limits_that_cannot_be_set_are_an_infra_error_not_a_silent_pass(workspace):
    runner = sb.open_sandbox(sb.SandboxConfig(limits=sb.SandboxLimits(open_files=10 ** 9)))
    try:
        result = run(runner, workspace, "echo ran")
    finally:
        runner.close()
    assert result.infra_error and "ulimit" in result.infra_error
    assert result.exit_code == 125 and "ran" not in result.output


def test_timeout_kills_the_sandbox_and_everything_in_it(sandbox, workspace):
    result = run(sandbox, workspace, "sleep 60 & sleep 60 & echo started; wait", timeout_s=0.5)
    assert result.timed_out and result.exit_code is None
    assert result.output == "started\n"
    assert processes_of_uid(sandbox.uid) == []


def test_output_cap_kills_the_command(sandbox, workspace):
    result = run(sandbox, workspace, "yes")
    assert result.output_capped and len(result.output) == SMALL_LIMITS.output_bytes
    assert processes_of_uid(sandbox.uid) == []


def test_closed_sandbox_refuses_to_run(workspace):
    runner = sb.open_sandbox(SMALL_SANDBOX)
    runner.close()
    with pytest.raises(RuntimeError, match="closed"):
        run(runner, workspace, "true")


def test_a_crashed_parent_takes_its_sandboxes_with_it(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = ("import sys; from environments import open_sandbox\n"
              "from tests.environments.conftest import SMALL_SANDBOX\n"
              "runner = open_sandbox(SMALL_SANDBOX)\nprint(runner.uid, flush=True)\n"
              f"runner.run('sleep 300 & echo up; sleep 300', workspace={str(workspace)!r}, "
              "timeout_s=600)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                              cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    uid = int(parent.stdout.readline())
    deadline = time.monotonic() + 20
    while len(processes_of_uid(uid)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)  # polling for the sandbox to start, bounded by the deadline
    assert len(processes_of_uid(uid)) >= 2
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while processes_of_uid(uid) and time.monotonic() < deadline:
        time.sleep(0.01)  # the kernel delivers the parent-death signals asynchronously
    assert processes_of_uid(uid) == []


def test_refuses_to_start_without_root():
    script = ("import os; from environments import sandbox\nos.setgid(1992099); "
              "os.setuid(1992099)\ntry:\n    sandbox.open_sandbox()\n"
              "except sandbox.SandboxUnavailable as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert "must be started as root" in out.stdout and "sandbox='none'" in out.stdout


def test_missing_bwrap_says_how_to_install_it():
    with pytest.raises(sb.SandboxUnavailable, match=r"apt-get install -y bubblewrap"):
        sb.open_sandbox(sb.SandboxConfig(bwrap="/nonexistent/bwrap"))


def test_unknown_mode_is_rejected():
    with pytest.raises(ValueError, match="'bwrap' or 'none'"):
        sb.SandboxConfig(mode="docker")


def test_none_mode_is_an_explicit_warned_opt_in(workspace):
    with pytest.warns(RuntimeWarning, match="UNSANDBOXED"):
        runner = sb.open_sandbox("none")
    result = run(runner, workspace, "pwd; echo $HOME")
    assert result.output.split() == [str(workspace.root)] * 2
    with pytest.raises(ValueError, match="cannot mount"):
        run(runner, workspace, "true", ro_binds=[("/etc", "/x")])
