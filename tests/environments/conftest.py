"""Fixtures for the environment tests: real sandboxes with small limits, tasks, environments."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from environments import CodingEnv, SandboxConfig, SandboxLimits, open_sandbox
from environments.workspace import Workspace

FIXTURE_TASKS = Path(__file__).parent / "fixtures" / "tasks"
# The fixture tasks hold their own test files, which only make sense inside a task workspace.
collect_ignore = ["fixtures"]

#: Small enough that attacks hit them in well under a second of work.
SMALL_LIMITS = SandboxLimits(cpu_s=2, address_space_mb=512, file_size_mb=16, open_files=256,
                             processes=32, tmp_size_mb=64, output_bytes=1 << 20)
SMALL_SANDBOX = SandboxConfig(limits=SMALL_LIMITS)


@pytest.fixture
def sandbox():
    """A real bwrap sandbox with its own leased uid (released at teardown)."""
    runner = open_sandbox(SMALL_SANDBOX)
    yield runner
    runner.close()


@pytest.fixture
def workspace(tmp_path, sandbox) -> Workspace:
    """An empty workspace directory owned by the sandbox uid."""
    root = tmp_path / "ws"
    root.mkdir()
    os.chown(root, sandbox.uid, sandbox.uid)
    return Workspace(root, sandbox.uid)


@pytest.fixture
def make_env():
    """Builds CodingEnvs with small sandbox limits (workspaces in the default place, /dev/shm);
    closes them at teardown."""
    envs = []

    def make(task=None, **kwargs) -> CodingEnv:
        kwargs.setdefault("sandbox", SMALL_SANDBOX)
        env = CodingEnv(task, **kwargs)
        envs.append(env)
        return env

    yield make
    for env in envs:
        env.close()


@pytest.fixture
def write_task(tmp_path):
    """Writes a task directory: write_task(id, repo={path: text}, hidden={...}, **task_json)."""

    def write(task_id: str, repo: dict[str, str], hidden: dict[str, str] | None = None,
              reference_diff: str | None = None, **fields) -> Path:
        root = tmp_path / "tasks" / task_id
        spec = {"id": task_id, "prompt": f"Task {task_id}.", "category": "debug",
                "difficulty": "easy", **fields}
        for base, files in (("repo", repo), ("hidden", hidden or {})):
            (root / base).mkdir(parents=True, exist_ok=True)
            for rel, text in files.items():
                path = root / base / rel
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(text)
        (root / "task.json").write_text(json.dumps(spec))
        if reference_diff is not None:
            (root / "reference.diff").write_text(reference_diff)
        return root

    return write
