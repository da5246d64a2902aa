"""A pool of unprivileged uids, one per concurrent sandbox, shared safely across processes.

Why a uid per sandbox: RLIMIT_NPROC (the fork-bomb limit) counts processes per uid system-wide
and is ignored for root, so each sandbox must run as its own non-root uid. The uids need no
/etc/passwd entry. A lease is an exclusive `flock` on a per-uid lock file: the kernel drops it
when the holder exits, so a crashed trainer never leaks uids, and threads and processes that
share the pool never receive the same uid.
"""
from __future__ import annotations

import errno
import fcntl
import os
import select
import signal
import stat
import tempfile
import time

# A range well above login uids (1000+) and the usual subordinate-uid ranges (100000 + 65536*k
# for the first users), so sandbox processes never share a uid with a real account.
DEFAULT_FIRST_UID = 1_990_000
DEFAULT_UID_COUNT = 512
# How long killing a uid's processes may take; SIGKILLed processes exit in milliseconds unless
# stuck in the kernel (e.g. on a dead network filesystem).
_REAP_TIMEOUT_S = 10.0


class UidPoolExhausted(RuntimeError):
    """Every uid in the pool is leased: too many concurrent sandboxes for the configured range."""


class UidLease:
    """Exclusive use of one uid (and the gid of the same number) until `release()`."""

    def __init__(self, uid: int, lock_fd: int):
        self.uid = uid
        self.gid = uid
        self._lock_fd = lock_fd

    @property
    def active(self) -> bool:
        return self._lock_fd >= 0

    def kill_processes(self) -> int:
        """SIGKILLs every process running as this uid; returns how many were killed."""
        return kill_processes_of_uid(self.uid)

    def release(self) -> None:
        """Kills what still runs as the uid, then hands it back. Safe to call twice."""
        if self._lock_fd < 0:
            return
        self.kill_processes()
        os.close(self._lock_fd)  # closing the descriptor drops the flock
        self._lock_fd = -1

    def __enter__(self) -> UidLease:
        return self

    def __exit__(self, *exc) -> None:
        self.release()

    def __repr__(self) -> str:
        return f"UidLease(uid={self.uid}, active={self.active})"


class UidPool:
    """Leases uids in [first_uid, first_uid + count) through lock files in `lock_dir`."""

    def __init__(self, first_uid: int = DEFAULT_FIRST_UID, count: int = DEFAULT_UID_COUNT,
                 lock_dir: str | None = None):
        if first_uid < 1000 or count < 1:
            raise ValueError(f"uid pool [{first_uid}, +{count}) must be non-empty and above the "
                             "system uids (first_uid >= 1000)")
        self.first_uid = first_uid
        self.count = count
        self.lock_dir = lock_dir or os.path.join(tempfile.gettempdir(),
                                                 f"c2jax-sandbox-{os.geteuid()}")

    def acquire(self) -> UidLease:
        """Leases a free uid, first killing anything a crashed earlier holder left running."""
        dir_fd = self._open_lock_dir()
        try:
            for uid in range(self.first_uid, self.first_uid + self.count):
                fd = os.open(f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o600, dir_fd=dir_fd)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except OSError as e:
                    os.close(fd)
                    if e.errno in (errno.EWOULDBLOCK, errno.EACCES):
                        continue
                    raise
                lease = UidLease(uid, fd)
                lease.kill_processes()
                return lease
        finally:
            os.close(dir_fd)
        raise UidPoolExhausted(
            f"all {self.count} sandbox uids from {self.first_uid} are in use; close idle "
            "environments or configure a larger uid range (SandboxConfig.uid_count)")

    def _open_lock_dir(self) -> int:
        # The directory may sit in a world-writable /tmp on a host without protected_symlinks,
        # so it must be a real directory that we own, opened without following links.
        try:
            os.mkdir(self.lock_dir, 0o700)
        except FileExistsError:
            pass
        fd = os.open(self.lock_dir, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        st = os.fstat(fd)
        if st.st_uid != os.geteuid() or stat.S_IMODE(st.st_mode) & 0o022:
            os.close(fd)
            raise PermissionError(
                f"uid lock directory {self.lock_dir} must be owned by uid {os.geteuid()} and "
                "not writable by others; remove it or pass another lock_dir")
        return fd


def processes_of_uid(uid: int) -> list[int]:
    """Pids of live (not zombie) processes whose real uid is `uid`, from /proc/<pid>/status.

    The status file, not the owner of /proc/<pid>, is the source: a process that made itself
    non-dumpable shows up as owned by root there.
    """
    pids = []
    for name in os.listdir("/proc"):
        if name.isdigit() and _real_uid_if_alive(int(name)) == uid:
            pids.append(int(name))
    return pids


def kill_processes_of_uid(uid: int, timeout_s: float = _REAP_TIMEOUT_S) -> int:
    """SIGKILLs every process of `uid` and waits until they are gone; returns how many.

    Each process is signalled and awaited through a pidfd, so a pid recycled between the scan
    and the kill can never hit an unrelated process. Scans repeat until one finds nothing (a
    dying fork bomb may fork between scans) or `timeout_s` passes.
    """
    if uid == 0 or uid == os.geteuid():
        raise ValueError(f"refusing to kill every process of uid {uid}: it is not a sandbox uid")
    killed = 0
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pids = processes_of_uid(uid)
        if not pids:
            break
        poller, fds = select.poll(), []
        for pid in pids:
            try:
                fd = os.pidfd_open(pid)
            except ProcessLookupError:
                continue
            fds.append(fd)
            # The pidfd pins the process: if it still has the uid now, it is the one we saw.
            if _real_uid_if_alive(pid) == uid:
                try:
                    signal.pidfd_send_signal(fd, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
            poller.register(fd, select.POLLIN)  # readable once the process has exited
        pending = len(fds)
        while pending and time.monotonic() < deadline:
            ready = poller.poll(max(1, int((deadline - time.monotonic()) * 1000)))
            for fd, _ in ready:
                poller.unregister(fd)
                pending -= 1
        for fd in fds:
            os.close(fd)
    return killed


def _real_uid_if_alive(pid: int) -> int | None:
    """The real uid of a live process, None if it is gone or a zombie."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            status = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state = status.split(b"\nState:", 1)[1].split(None, 1)[0]
    if state in (b"Z", b"X"):
        return None
    return int(status.split(b"\nUid:", 1)[1].split(None, 1)[0])
