"""Runs one child process with a wall-clock timeout, a cap on captured output and stdin input.

The child writes its output (stdout and stderr merged, as a terminal would show them) to a
dedicated pipe whose write end it inherits as `output_fd`; its own stderr is a second pipe that
only the launcher (bwrap, setpriv, the shell's first line) writes to before the command starts.
Keeping the two apart lets the caller tell an infrastructure failure from a command that merely
printed an error, and an agent cannot fake one (see `sandbox.py`).

A launcher may also report, on a third pipe (`report_fd`), the pid of a descendant that must be
gone before the run counts as finished: bwrap reports its sandbox's init this way, and the
kernel lets that init exit only after every process of its pid namespace has.
"""
from __future__ import annotations

import dataclasses
import os
import select
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Sequence

# How long to keep draining pipes (and waiting for a reported descendant) after the process
# group was killed: the kernel closes them as the processes die, which takes milliseconds; this
# only bounds a pathological case.
_DRAIN_AFTER_KILL_S = 2.0
_READ_CHUNK = 1 << 16
# The launcher's own diagnostics and reports are a few lines; more is not worth keeping.
_LAUNCHER_TEXT_LIMIT = 1 << 14


@dataclasses.dataclass(frozen=True)
class ProcessOutcome:
    """What one run produced.

    exit_code: the child's exit status (128 + N when a signal N ended it); None if it was killed
      by us (timeout or output cap).
    output: captured output bytes, at most `output_limit` of them.
    output_total: bytes the child wrote before it ended or was killed.
    launcher_stderr: what the launcher wrote to its stderr (empty when all went well).
    """
    exit_code: int | None
    output: bytes
    output_total: int
    launcher_stderr: bytes
    timed_out: bool
    output_capped: bool
    elapsed_s: float


def run_process(make_argv: Callable[[int, int | None], Sequence[str]], *, timeout_s: float,
                output_limit: int, stdin: bytes | None = None, env: dict[str, str] | None = None,
                cwd: str | None = None,
                reported_pid: Callable[[bytes], int | None] | None = None) -> ProcessOutcome:
    """Runs `make_argv(output_fd, report_fd)` in a new session and collects its output.

    The child inherits the write end of a fresh pipe as `output_fd` and must send its output
    there. With `reported_pid`, it also inherits `report_fd` (else None): `reported_pid` maps
    what arrived there so far to a pid (or None, not yet), and that process, which must be a
    child of ours, is awaited before returning. The whole process group is SIGKILLed when
    `timeout_s` passes or the output exceeds `output_limit` bytes.
    """
    output_r, output_w = os.pipe()
    report_r, report_w = os.pipe() if reported_pid is not None else (None, None)
    inherited = tuple(fd for fd in (output_w, report_w) if fd is not None)
    ours = tuple(fd for fd in (output_r, report_r) if fd is not None)
    start = time.monotonic()
    try:
        proc = subprocess.Popen(
            list(make_argv(output_w, report_w)),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, pass_fds=inherited,
            start_new_session=True, env=env if env is not None else {}, cwd=cwd)
    except BaseException:
        for fd in inherited + ours:
            os.close(fd)
        raise
    for fd in inherited:
        os.close(fd)
    run = _Run(proc, deadline=start + timeout_s, output_limit=output_limit)
    try:
        run.pump(output_r, report_r, stdin, reported_pid)
    except BaseException:
        run.kill_group()  # interrupted (e.g. Ctrl-C): leave nothing running
        raise
    finally:
        for fd in ours:
            os.close(fd)
        exit_code = run.finish()
    return ProcessOutcome(
        exit_code=None if run.killed else _normalise_exit(exit_code), output=bytes(run.head),
        output_total=run.total, launcher_stderr=bytes(run.launcher_err),
        timed_out=run.timed_out, output_capped=run.capped, elapsed_s=time.monotonic() - start)


class _Run:
    """The bookkeeping of one `run_process` call."""

    def __init__(self, proc: subprocess.Popen, *, deadline: float, output_limit: int):
        self.proc = proc
        self.deadline = deadline
        self.output_limit = output_limit
        self.head = bytearray()
        self.total = 0
        self.launcher_err = bytearray()
        self.report = bytearray()
        self.descendant_fd = -1  # pidfd of the reported descendant
        self.timed_out = self.capped = self.killed = False

    def kill_group(self) -> None:
        if not self.killed:
            self.killed = True
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.deadline = time.monotonic() + _DRAIN_AFTER_KILL_S

    def pump(self, output_r: int, report_r: int | None, stdin: bytes | None,
             reported_pid: Callable[[bytes], int | None] | None) -> None:
        """Moves data between the pipes and us until they close or the deadline passes."""
        proc = self.proc
        sel = selectors.DefaultSelector()
        sel.register(output_r, selectors.EVENT_READ, "output")
        sel.register(proc.stderr, selectors.EVENT_READ, "stderr")
        if report_r is not None:
            sel.register(report_r, selectors.EVENT_READ, "report")
        pending_in = memoryview(stdin) if stdin else None
        if proc.stdin is not None:
            if pending_in:
                os.set_blocking(proc.stdin.fileno(), False)
                sel.register(proc.stdin, selectors.EVENT_WRITE, "stdin")
            else:
                proc.stdin.close()
        try:
            while sel.get_map():
                remaining = self.deadline - time.monotonic()
                if remaining <= 0:
                    if self.killed:
                        return  # pipes still open after the kill: give up on the rest
                    self.timed_out = True
                    self.kill_group()
                    continue
                for key, _ in sel.select(timeout=remaining):
                    if key.data == "stdin":
                        try:
                            written = os.write(key.fd, pending_in[:_READ_CHUNK])
                        except BlockingIOError:
                            continue
                        except BrokenPipeError:  # the command stopped reading: its business
                            written = len(pending_in)
                        pending_in = pending_in[written:]
                        if not pending_in:
                            sel.unregister(key.fileobj)
                            proc.stdin.close()
                        continue
                    chunk = os.read(key.fd, _READ_CHUNK)
                    if not chunk:
                        sel.unregister(key.fileobj)
                    elif key.data == "stderr":
                        self.launcher_err += chunk[:_LAUNCHER_TEXT_LIMIT - len(self.launcher_err)]
                    elif key.data == "report":
                        self.report += chunk[:_LAUNCHER_TEXT_LIMIT - len(self.report)]
                        if self.descendant_fd < 0:
                            self._watch(reported_pid(bytes(self.report)))
                    else:
                        self.total += len(chunk)
                        self.head += chunk[:max(0, self.output_limit - len(self.head))]
                        if self.total > self.output_limit and not self.killed:
                            self.capped = True
                            self.kill_group()
        finally:
            sel.close()
            self.proc.stderr.close()
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()

    def _watch(self, pid: int | None) -> None:
        """Opens a pidfd on the reported descendant while it is surely alive (its parent, our
        child, is still running), after checking it really is a child of our child."""
        if pid is None:
            return
        try:
            fd = os.pidfd_open(pid)
        except ProcessLookupError:
            return
        if _parent_of(pid) == self.proc.pid:  # the pidfd pins pid, so this checks that process
            self.descendant_fd = fd
        else:
            os.close(fd)

    def finish(self) -> int:
        """Waits (within the deadline) for the child and the reported descendant to end."""
        # The pipes can close before the process ends (a command may close its own output), so
        # the wait is bounded by the same deadline.
        try:
            code = self.proc.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = self.timed_out or not self.killed
            self.kill_group()
            code = self.proc.wait()
        if self.descendant_fd >= 0:
            poller = select.poll()
            poller.register(self.descendant_fd, select.POLLIN)  # readable once it has exited
            wait_s = max(self.deadline - time.monotonic(), _DRAIN_AFTER_KILL_S)
            poller.poll(int(wait_s * 1000))
            os.close(self.descendant_fd)
        return code


def _parent_of(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    return int(stat[stat.rindex(b")") + 2:].split()[1])


def _normalise_exit(code: int) -> int:
    """Popen reports death by signal N as -N; shells (and bwrap) report 128 + N. Use the latter."""
    return 128 - code if code < 0 else code
