"""c2jax coding-agent environments: tasks, tools, a bubblewrap sandbox and a gymnasium env.

Pure Python (gymnasium + the standard library, no JAX), so environment workers run anywhere and
people who write environments need no JAX. Importing the package registers "c2jax/Coding-v0":

    import gymnasium, environments
    env = gymnasium.make("c2jax/Coding-v0", task="path/to/task")

See docs/environments.md for the task format, the tools and the sandbox's threat model.
"""
import gymnasium

from environments.agents import Agent, NullAgent, OracleAgent
from environments.env import CodingEnv
from environments.pool import EnvPool, EpisodeResult
from environments.sandbox import (CommandResult, PythonRuntime, Sandbox, SandboxConfig,
                                  SandboxLimits, SandboxUnavailable, open_sandbox)
from environments.task import CATEGORIES, Task, TaskError, TaskLimits, load_suite, load_task
from environments.tools import DEFAULT_TOOLS, Param, Tool, ToolError, ToolResult

ENV_ID = "c2jax/Coding-v0"

if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="environments.env:CodingEnv")

__all__ = [
    "Agent", "CATEGORIES", "CodingEnv", "CommandResult", "DEFAULT_TOOLS", "ENV_ID", "EnvPool",
    "EpisodeResult", "NullAgent", "OracleAgent", "Param", "PythonRuntime", "Sandbox",
    "SandboxConfig", "SandboxLimits", "SandboxUnavailable", "Task", "TaskError", "TaskLimits",
    "Tool", "ToolError", "ToolResult", "load_suite", "load_task", "open_sandbox",
]
