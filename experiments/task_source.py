"""`config.tasks` -> (tasks, make_env): what the RL actors run, for every RL entry point."""
from __future__ import annotations

import importlib


def task_source(tasks_cfg):
    """(tasks, make_env) of the config's `tasks.suite`: a cursorbench suite (its tasks of
    `tasks.categories`, if any) in the sandboxed CodingEnv, or `python:module:function`, which
    is called with the tasks section."""
    spec = tasks_cfg.suite
    if spec.startswith("python:"):
        module, _, name = spec[len("python:"):].partition(":")
        try:
            factory = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError, ValueError) as e:
            raise ValueError(f"tasks.suite={spec!r}: cannot load {module}:{name} ({e})") from None
        return factory(tasks_cfg)
    from cursorbench import suites
    from environments import CodingEnv
    suite = suites.resolve(spec, categories=tuple(tasks_cfg.categories))
    sandbox = tasks_cfg.sandbox
    return suite.tasks, lambda: CodingEnv(sandbox=sandbox)
