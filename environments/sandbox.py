"""Runs untrusted shell commands in a fresh bubblewrap sandbox, one command per sandbox.

What one `Sandbox.run` does (see docs/environments.md for the threat model):

- bubblewrap with new ipc/pid/net/uts/cgroup namespaces (no network: only a loopback of its own),
  `--die-with-parent`, `--new-session`, `--clearenv` plus an allowlisted environment;
- a read-only view of /usr (and the merged-/usr links), a few /etc files, and the Python the task
  needs; size-capped tmpfs /tmp and /dev/shm; the episode's workspace read-write at /workspace;
  nothing else of the host (no /home, /root, /work, /sys);
- the command runs as a non-root uid leased from a pool (`uids.py`), with no capabilities and
  no_new_privs, under rlimits (soft = hard) on CPU time, address space, file size, open files
  and processes;
- a wall-clock timeout and an output cap SIGKILL the whole sandbox; when the command's shell
  exits, the pid namespace dies with it, so no process survives a command.

The sandbox needs root: bwrap runs as root without a user namespace (so it can mount paths only
root may traverse, like a pyenv under /root, and so sandboxed processes keep a distinct host uid
for RLIMIT_NPROC to count), and `setpriv` drops to the leased uid inside.
"""
from __future__ import annotations

import dataclasses
import functools
import glob
import os
import re
import shutil
import stat
import subprocess
import sys
import warnings
from collections.abc import Mapping, Sequence

from environments import process, uids

#: Where the workspace appears inside every sandbox; commands start there.
WORKSPACE = "/workspace"

_INSTALL_BWRAP = ("bubblewrap (bwrap) is not installed: run `apt-get install -y bubblewrap` "
                  "(with sudo if you are not root), or pass sandbox='none' to run commands "
                  "unsandboxed for trusted debugging only")
_NEEDS_ROOT = ("the bwrap sandbox must be started as root: it runs each concurrent sandbox as its "
               "own unprivileged uid so that RLIMIT_NPROC can stop fork bombs. Run as root (a "
               "container or VM is fine), or pass sandbox='none' to run commands unsandboxed "
               "for trusted debugging only")
# Merged-/usr distributions make these symlinks into /usr; older ones have real directories.
_ROOT_LINK_DIRS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
# /etc entries a sandbox may see: the loader cache, alternatives symlinks (e.g. /usr/bin/awk
# points into /etc/alternatives) and the time zone. No passwd, shadow, hosts, resolv.conf or ssl.
_ETC_ALLOWLIST = ("/etc/ld.so.cache", "/etc/alternatives", "/etc/localtime")
# The shell's first line points stdout and stderr at the output pipe and closes the original
# descriptor, so everything the command prints lands in one stream (as in a terminal) and the
# launcher's stderr stays reserved for infrastructure errors the command cannot forge.
_OUTPUT_FD_PRELUDE = "exec 1>&{fd} 2>&{fd} {fd}>&-\n"


class SandboxUnavailable(RuntimeError):
    """The sandbox cannot run here (not root, or bwrap or setpriv missing)."""


@dataclasses.dataclass(frozen=True)
class SandboxLimits:
    """Per-command resource limits. Each maps to one rlimit, a tmpfs size or an output cap."""
    cpu_s: int = 120                 # RLIMIT_CPU, per process: a CPU spin is killed
    address_space_mb: int = 4096     # RLIMIT_AS, per process: a memory bomb gets MemoryError
    file_size_mb: int = 512          # RLIMIT_FSIZE: the largest file a command may write
    open_files: int = 1024           # RLIMIT_NOFILE
    processes: int = 128             # RLIMIT_NPROC for the sandbox uid: fork bombs stop here
    tmp_size_mb: int = 512           # size of each private tmpfs, /tmp and /dev/shm (host RAM)
    output_bytes: int = 1 << 20      # captured output; past it the command is killed


@dataclasses.dataclass(frozen=True)
class PythonRuntime:
    """The interpreter sandboxed commands get as `python`, bound read-only at its host path.

    prefixes: directories to bind (a venv and the installation it was created from).
    bin_dir: put first on PATH, so `python` and `pytest` resolve to this environment.
    masked_files: files replaced by an empty one inside the sandbox (see `current`).
    """
    prefixes: tuple[str, ...]
    bin_dir: str
    masked_files: tuple[str, ...] = ()

    @classmethod
    def current(cls) -> PythonRuntime:
        """The environment of the running interpreter (sys.prefix and its base installation).

        Editable installs (`__editable__*.pth`) are masked: they load import hooks for source
        trees that the sandbox does not mount, so inside they only cost start-up time.
        """
        prefix = os.path.realpath(sys.prefix)  # binds and PATH must use the same spelling
        prefixes = tuple(dict.fromkeys((prefix, os.path.realpath(sys.base_prefix))))
        return cls(prefixes=prefixes, bin_dir=os.path.join(prefix, "bin"),
                   masked_files=_editable_hooks(prefix))

    @classmethod
    def from_venv(cls, venv: str | os.PathLike) -> PythonRuntime:
        """The virtual environment at `venv` (made with `python -m venv`) and the installation
        it was created from (pyvenv.cfg's `home`). ValueError if it is not one."""
        prefix = os.path.realpath(venv)
        cfg_path = os.path.join(prefix, "pyvenv.cfg")
        if not os.path.isfile(cfg_path) or not os.path.exists(os.path.join(prefix, "bin",
                                                                           "python")):
            raise ValueError(f"{venv} is not a virtual environment (no pyvenv.cfg and "
                             "bin/python)")
        with open(cfg_path) as f:
            settings = dict(line.partition("=")[::2] for line in f if "=" in line)
        home = {k.strip(): v.strip() for k, v in settings.items()}.get("home")
        if not home:
            raise ValueError(f"{cfg_path} names no 'home' installation")
        base = os.path.realpath(os.path.dirname(home.rstrip("/")))
        return cls(prefixes=tuple(dict.fromkeys((prefix, base))),
                   bin_dir=os.path.join(prefix, "bin"), masked_files=_editable_hooks(prefix))


def _editable_hooks(prefix: str) -> tuple[str, ...]:
    """The editable-install `.pth` files of the environment at `prefix` (masked inside)."""
    return tuple(sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages",
                                               "__editable__*.pth"))))


@dataclasses.dataclass(frozen=True)
class SandboxConfig:
    """How environments isolate agent commands.

    mode: "bwrap" (the sandbox) or "none" (commands run directly on the host: an explicit,
      warned opt-in for trusted debugging; no isolation and no limits but the timeout).
    python: the interpreter to expose; None means `PythonRuntime.current()`.
    extra_ro_paths: more host paths to bind read-only at the same place (e.g. a toolchain).
    first_uid, uid_count, uid_lock_dir: the pool of uids sandboxes run as (see `uids.py`).
    """
    mode: str = "bwrap"
    limits: SandboxLimits = SandboxLimits()
    python: PythonRuntime | None = None
    extra_ro_paths: tuple[str, ...] = ()
    first_uid: int = uids.DEFAULT_FIRST_UID
    uid_count: int = uids.DEFAULT_UID_COUNT
    uid_lock_dir: str | None = None  # also holds the sandbox's small state files
    bwrap: str = "bwrap"

    def __post_init__(self):
        if self.mode not in ("bwrap", "none"):
            raise ValueError(f"sandbox mode must be 'bwrap' or 'none', got {self.mode!r}")


@dataclasses.dataclass(frozen=True)
class CommandResult:
    """The outcome of one sandboxed command.

    exit_code: the shell's exit status, 128 + N if signal N ended it, None if we killed it.
    output: stdout and stderr interleaved, decoded as UTF-8 (undecodable bytes replaced).
    output_bytes: how much the command wrote in total (more than `output` when capped).
    infra_error: set when the sandbox itself failed (not the command): trainers drop these.
    """
    exit_code: int | None
    output: str
    output_bytes: int
    timed_out: bool
    output_capped: bool
    infra_error: str | None
    elapsed_s: float


def sandbox_env(python: PythonRuntime | None, extra: Mapping[str, str] | None = None
                ) -> dict[str, str]:
    """The whole environment a command sees: nothing of the host's, so no secrets leak in."""
    path = "/usr/local/bin:/usr/bin:/bin"
    if python is not None:
        path = f"{python.bin_dir}:{path}"
    env = {
        "PATH": path, "HOME": "/tmp", "TMPDIR": "/tmp", "USER": "agent", "LOGNAME": "agent",
        "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "TERM": "dumb",
        # No pagers or progress bars: output goes to a pipe, not a person.
        "PAGER": "cat", "GIT_PAGER": "cat", "MANPAGER": "cat", "TQDM_DISABLE": "1",
        "PIP_PROGRESS_BAR": "off", "PIP_NO_INPUT": "1",
        # __pycache__ files would show up in the episode's diff.
        "PYTHONDONTWRITEBYTECODE": "1", "PYTHONUNBUFFERED": "1",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "agent",
        "GIT_AUTHOR_EMAIL": "agent@sandbox", "GIT_COMMITTER_NAME": "agent",
        "GIT_COMMITTER_EMAIL": "agent@sandbox",
    }
    env.update(extra or {})
    return env


@functools.lru_cache(maxsize=None)
def _find_tools(bwrap: str) -> tuple[str, str]:
    """Absolute paths of bwrap and setpriv, or how to install them."""
    found = shutil.which(bwrap)
    if found is None:
        raise SandboxUnavailable(_INSTALL_BWRAP)
    setpriv = shutil.which("setpriv", path="/usr/bin:/bin:/usr/sbin:/sbin")
    if setpriv is None:
        raise SandboxUnavailable("setpriv is not installed: run `apt-get install -y util-linux`")
    return found, setpriv


@functools.lru_cache(maxsize=None)
def _bwrap_supports_tmpfs_size(bwrap: str) -> bool:
    """`--size` (a capped tmpfs) arrived in bubblewrap 0.7; older ones get an uncapped /tmp."""
    out = subprocess.run([bwrap, "--help"], capture_output=True, text=True, check=False)
    return "--size" in out.stdout


def _system_mount_args() -> list[str]:
    args = ["--ro-bind", "/usr", "/usr"]
    for path in _ROOT_LINK_DIRS:
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]  # bwrap would create it 0700 when root
    for path in _ETC_ALLOWLIST:
        args += ["--ro-bind-try", path, path]
    return args


def _ro_path_args(paths: Sequence[str], masked: Sequence[str], empty_file: str) -> list[str]:
    """Read-only binds at host paths outside /usr, with world-traversable parent directories.

    bwrap creates missing parents with mode 0700 when it runs as root, which would hide e.g.
    /root/.pyenv from the unprivileged uid; `--perms 0755 --dir` creates them traversable.
    """
    paths = sorted({p for p in paths if p != "/usr" and not p.startswith("/usr/")}, key=len)

    def inside_a_bind(dir_path: str) -> bool:
        return any(dir_path == p or dir_path.startswith(p + "/") for p in paths)

    parents = sorted({"/" + "/".join(p.strip("/").split("/")[:i])
                      for p in paths for i in range(1, p.strip("/").count("/") + 1)})
    args = []
    for parent in parents:
        if not inside_a_bind(parent):
            args += ["--perms", "0755", "--dir", parent]
    for path in paths:
        args += ["--ro-bind", path, path]
    for path in masked:
        args += ["--ro-bind", empty_file, path]
    return args


def _empty_file(state_dir: str) -> str:
    """A read-only empty file to mount over masked files, kept in our private state directory
    and shared by every sandbox (/dev/null cannot serve: bwrap mounts binds nodev, which makes
    device nodes unreadable)."""
    path = os.path.join(state_dir, "empty")
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o444)
    try:
        st = os.fstat(fd)
        if st.st_size or not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            raise SandboxUnavailable(f"{path} should be an empty file of ours; delete it")
    finally:
        os.close(fd)
    return path


def _ulimit_prelude(limits: SandboxLimits) -> str:
    """The shell's first line: set soft and hard limits (bash's `ulimit` sets both unless told
    otherwise; an unprivileged process cannot raise a hard limit again). It runs before the
    output redirection, so a failure is reported as an infrastructure error."""
    return (f"ulimit -t {limits.cpu_s} -v {limits.address_space_mb * 1024} "
            f"-f {limits.file_size_mb * 1024} -n {limits.open_files} -u {limits.processes} "
            "-c 0 || exit 125\n")


class Sandbox:
    """Runs commands for one episode as one sandbox uid, leased from the configured pool.

    `close()` kills anything left running as the uid and hands it back.
    """

    isolated = True  # can mount extra paths and keeps agent code off the host

    def __init__(self, config: SandboxConfig):
        if os.geteuid() != 0:
            raise SandboxUnavailable(_NEEDS_ROOT)
        self.config = config
        self.python = config.python or PythonRuntime.current()
        self._bwrap, self._setpriv = _find_tools(config.bwrap)
        pool = uids.UidPool(config.first_uid, config.uid_count, config.uid_lock_dir)
        self._lease = pool.acquire()
        self._empty_file = _empty_file(pool.lock_dir)
        self._fixed_args = self._build_fixed_args(empty_file=self._empty_file)

    @property
    def uid(self) -> int:
        """The host uid sandboxed processes run as (and that should own the workspace)."""
        return self._lease.uid

    def use_python(self, python: PythonRuntime | None) -> None:
        """Commands from now on get `python` (None: the config's, else the running one)."""
        python = python or self.config.python or PythonRuntime.current()
        if python != self.python:
            self.python = python
            self._fixed_args = self._build_fixed_args(empty_file=self._empty_file)

    def _build_fixed_args(self, empty_file: str) -> list[str]:
        cfg = self.config
        # No user namespace: processes must keep the leased uid on the host for RLIMIT_NPROC
        # to count them (--unshare-all would add one). Capabilities are limited to what
        # setpriv needs to drop to the uid.
        args = [self._bwrap, "--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts",
                "--unshare-cgroup-try", "--cap-drop", "ALL", "--cap-add", "CAP_SETUID",
                "--cap-add", "CAP_SETGID", "--cap-add", "CAP_SETPCAP"]
        args += ["--hostname", "sandbox", "--die-with-parent", "--new-session", "--clearenv"]
        args += _system_mount_args()
        args += ["--proc", "/proc", "--dev", "/dev"]
        # World-writable (sticky) scratch space: bwrap makes tmpfs mounts 0755 root otherwise.
        # /dev/shm is where multiprocessing keeps its semaphores. Mounted before the
        # interpreter's binds: a venv under /tmp (a CI checkout there) must stay visible on top.
        for scratch in ("/tmp", "/dev/shm"):
            if _bwrap_supports_tmpfs_size(self._bwrap):
                args += ["--size", str(cfg.limits.tmp_size_mb << 20)]
            args += ["--perms", "1777", "--tmpfs", scratch]
        args += _ro_path_args(list(self.python.prefixes) + list(cfg.extra_ro_paths),
                              self.python.masked_files, empty_file)
        return args

    def _command_args(self, output_fd: int, command: str, limits: SandboxLimits) -> list[str]:
        uid = str(self.uid)
        script = (_ulimit_prelude(limits) + _OUTPUT_FD_PRELUDE.format(fd=output_fd) + command)
        return [self._setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups",
                "--no-new-privs", "--bounding-set=-all", "--inh-caps=-all", "--",
                "/bin/bash", "-c", script]

    def run(self, command: str, *, workspace: str, timeout_s: float, stdin: bytes | None = None,
            binds: Sequence[tuple[str, str]] = (), ro_binds: Sequence[tuple[str, str]] = (),
            env: Mapping[str, str] | None = None, cpu_s: int | None = None) -> CommandResult:
        """Runs `command` with bash in a fresh sandbox, the host dir `workspace` at /workspace.

        binds / ro_binds: extra (host path, sandbox path) mounts, applied after the workspace so
        they may cover paths inside it (the grader makes hidden tests read-only this way).
        cpu_s: this command's RLIMIT_CPU instead of the configured one (the grader gives a
        test run its whole timeout: one pytest process may legitimately need minutes).
        When this returns, no process of the command is left.
        """
        if not self._lease.active:
            raise RuntimeError("this sandbox was closed; open a new one")
        args = list(self._fixed_args)
        for key, value in sandbox_env(self.python, env).items():
            args += ["--setenv", key, value]
        args += ["--bind", workspace, WORKSPACE]
        for host, inside in binds:
            args += ["--bind", host, inside]
        for host, inside in ro_binds:
            args += ["--ro-bind", host, inside]
        args += ["--chdir", WORKSPACE]
        limits = self.config.limits
        if cpu_s is not None:
            limits = dataclasses.replace(limits, cpu_s=int(cpu_s))
        # bwrap returns as soon as the command's shell exits, while the pid namespace may still
        # be dying; it reports the namespace's init on --info-fd, and waiting for that init
        # means waiting until every process of the command is gone.
        outcome = process.run_process(
            lambda output_fd, info_fd: args + ["--info-fd", str(info_fd), "--"]
            + self._command_args(output_fd, command, limits),
            timeout_s=timeout_s, output_limit=self.config.limits.output_bytes, stdin=stdin,
            env={"PATH": "/usr/bin:/bin"}, reported_pid=_bwrap_child_pid)
        if outcome.exit_code is None:
            self.kill_processes()  # killed early, maybe before bwrap reported its init
        return _to_result(outcome)

    def kill_processes(self) -> int:
        """Kills every process of the sandbox uid and waits until they are gone."""
        return self._lease.kill_processes()

    def close(self) -> None:
        self._lease.release()


class HostRunner:
    """sandbox="none": runs commands directly on the host, in the workspace directory.

    For trusted debugging only: the command sees the host filesystem, network and environment
    variables it is given, runs as the caller, and only the timeout and output cap apply.
    """

    isolated = False

    def __init__(self, config: SandboxConfig):
        warnings.warn("sandbox='none': agent commands run UNSANDBOXED on the host as "
                      f"uid {os.getuid()} with network access; use only with trusted agents",
                      RuntimeWarning, stacklevel=3)
        self.config = config
        self.python = config.python or PythonRuntime.current()

    @property
    def uid(self) -> int:
        return os.getuid()

    def use_python(self, python: PythonRuntime | None) -> None:
        self.python = python or self.config.python or PythonRuntime.current()

    def run(self, command: str, *, workspace: str, timeout_s: float, stdin: bytes | None = None,
            binds: Sequence[tuple[str, str]] = (), ro_binds: Sequence[tuple[str, str]] = (),
            env: Mapping[str, str] | None = None, cpu_s: int | None = None) -> CommandResult:
        """Same contract as `Sandbox.run`, but `binds`/`ro_binds` cannot be honoured here (and
        no rlimit is set, so `cpu_s` has nothing to change)."""
        if binds or ro_binds:
            raise ValueError("sandbox='none' cannot mount paths; use the bwrap sandbox")
        outcome = process.run_process(
            lambda output_fd, _: ["/bin/bash", "-c",
                                  _OUTPUT_FD_PRELUDE.format(fd=output_fd) + command],
            timeout_s=timeout_s, output_limit=self.config.limits.output_bytes, stdin=stdin,
            env=sandbox_env(self.python, {"HOME": workspace, **(env or {})}), cwd=workspace)
        return _to_result(outcome)

    def kill_processes(self) -> int:
        return 0

    def close(self) -> None:
        pass


def open_sandbox(config: SandboxConfig | str = "bwrap") -> Sandbox | HostRunner:
    """A runner for one episode: a `Sandbox`, or a `HostRunner` when mode is "none"."""
    if isinstance(config, str):
        config = SandboxConfig(mode=config)
    if config.mode == "none":
        return HostRunner(config)
    return Sandbox(config)


def _bwrap_child_pid(info: bytes) -> int | None:
    """The sandbox init's host pid from bwrap's --info-fd JSON, once it has fully arrived."""
    match = re.search(rb'"child-pid":\s*(\d+)\D', info)
    return int(match.group(1)) if match else None


def _to_result(outcome: process.ProcessOutcome) -> CommandResult:
    infra = outcome.launcher_stderr.decode("utf-8", "replace").strip() or None
    return CommandResult(
        exit_code=outcome.exit_code, output=outcome.output.decode("utf-8", "replace"),
        output_bytes=outcome.output_total, timed_out=outcome.timed_out,
        output_capped=outcome.output_capped, infra_error=infra, elapsed_s=outcome.elapsed_s)
