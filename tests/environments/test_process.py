"""Capturing one child process (environments/process.py): timeouts, output cap, stdin."""
import time

from environments import process


def run(script: str, timeout_s: float = 10.0, output_limit: int = 1 << 20, stdin=None):
    return process.run_process(
        lambda fd, _: ["/bin/bash", "-c", f"exec 1>&{fd} 2>&{fd} {fd}>&-\n{script}"],
        timeout_s=timeout_s, output_limit=output_limit, stdin=stdin, env={"PATH": "/usr/bin:/bin"})


def test_captures_interleaved_output_and_exit_code():
    out = run("echo out; echo err >&2; exit 7")
    assert out.output == b"out\nerr\n" and out.exit_code == 7
    assert not out.timed_out and not out.output_capped and out.launcher_stderr == b""


def test_death_by_signal_reads_like_a_shell():
    assert run("kill -TERM $$").exit_code == 128 + 15


def test_timeout_kills_the_whole_group():
    start = time.monotonic()
    out = run("sleep 30 & sleep 30; echo never", timeout_s=0.5)
    assert out.timed_out and out.exit_code is None
    assert time.monotonic() - start < 5
    assert b"never" not in out.output


def test_timeout_holds_when_the_command_closes_its_output():
    out = run("exec >&- 2>&-; sleep 30", timeout_s=0.5)
    assert out.timed_out and out.elapsed_s < 5


def test_output_cap_kills_and_keeps_the_head():
    out = run("yes", output_limit=10_000)
    assert out.output_capped and out.exit_code is None
    assert len(out.output) == 10_000 and out.output.startswith(b"y\ny\n")
    assert out.output_total > 10_000


def test_stdin_is_fed_in_full():
    payload = b"x" * 300_000 + b"\n"
    out = run("wc -c", stdin=payload)
    assert out.output.strip() == str(len(payload)).encode()


def test_command_that_ignores_stdin_does_not_hang():
    out = run("true", stdin=b"y" * 1_000_000)
    assert out.exit_code == 0 and not out.timed_out


def test_launcher_stderr_is_kept_apart():
    out = process.run_process(
        lambda fd, _: ["/bin/bash", "-c", f"echo launcher-problem >&2; echo output >&{fd}"],
        timeout_s=10, output_limit=1000)
    assert out.launcher_stderr == b"launcher-problem\n" and out.output == b"output\n"


def test_waits_for_a_descendant_the_launcher_reports():
    # The launcher reports a background child and exits while that child still runs (as bwrap
    # leaves its dying sandbox init behind); the run ends only when the child has.
    out = process.run_process(
        lambda fd, report: ["/bin/bash", "-c",
                            f"sleep 0.4 & echo $! >&{report}; exec {report}>&-; sleep 0.1"],
        timeout_s=10, output_limit=1000,
        reported_pid=lambda data: int(data) if data.endswith(b"\n") else None)
    assert out.exit_code == 0 and out.elapsed_s >= 0.4


def test_ignores_a_reported_pid_that_is_not_its_grandchild():
    out = process.run_process(
        lambda fd, report: ["/bin/bash", "-c", f"echo 1 >&{report}"],
        timeout_s=10, output_limit=1000,
        reported_pid=lambda data: int(data) if data.endswith(b"\n") else None)
    assert out.exit_code == 0 and out.elapsed_s < 2
