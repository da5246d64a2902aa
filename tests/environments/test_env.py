"""The gymnasium environment (environments/env.py)."""
import gc
import shutil
import subprocess
import sys
import warnings

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import environments
from environments import OracleAgent, tool_format
from environments.task import load_task
from tests.environments.conftest import FIXTURE_TASKS, SMALL_SANDBOX

ANSWER_TASK = {"answer": "42", "category": "understanding"}


def test_registered_env_passes_the_gymnasium_checker():
    env = gymnasium.make(environments.ENV_ID, task=str(FIXTURE_TASKS), sandbox=SMALL_SANDBOX)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            check_env(env.unwrapped)
    finally:
        env.close()


def test_reset_gives_a_fresh_workspace_with_setup_and_a_clean_history(make_env):
    env = make_env(FIXTURE_TASKS / "debug-mean")
    obs, info = env.reset(seed=1)
    assert obs == {"role": "user", "tool": "", "content": load_task(
        FIXTURE_TASKS / "debug-mean").prompt, "is_error": 0}
    assert info["task_id"] == "debug-mean" and info["limits"]["max_steps"] == 20
    assert {s["name"] for s in info["tool_schemas"]} == set(env.tools)
    assert tool_format.TOOL_CALL in info["system_prompt"]
    obs, *_ = env.step({"tool": "run_terminal", "args": {
        "cmd": "git log --all --oneline | wc -l; git status --porcelain; cat VERSION; ls"}})
    assert obs["content"].split("\n")[:5] == ["1", "1.0", "VERSION", "stats", "tests"]
    assert "hidden_tests" not in obs["content"]
    env.step({"tool": "create_file", "args": {"path": "stats/core.py", "content": "broken"}})
    env.reset(seed=1)
    obs, *_ = env.step({"tool": "read_file", "args": {"path": "stats/core.py",
                                                       "start_line": 1, "end_line": 1}})
    assert obs["content"].startswith("     1\tdef total(values):")


def test_actions_as_dicts_raw_text_and_text_dicts(make_env, write_task):
    env = make_env(load_task(write_task("a", {"notes.txt": "hello\n"}, **ANSWER_TASK)))
    env.reset(seed=0)
    call = tool_format.format_tool_call("read_file", {"path": "notes.txt"})
    for action in ({"tool": "read_file", "args": {"path": "notes.txt"}, "output_tokens": 5},
                   f"Let me look.\n{call}", {"text": call, "output_tokens": 7}):
        obs, reward, terminated, truncated, info = env.step(action)
        assert obs == {"role": "tool", "tool": "read_file", "content": "     1\thello",
                       "is_error": 0}
        assert (reward, terminated, truncated) == (0.0, False, False)
    *_, info = env.step({"tool": "finish", "args": {"summary": "42"}})
    assert info["reward_components"]["output_tokens"] == 12
    assert info["reward_components"]["steps"] == 4


@pytest.mark.parametrize("action, message", [
    (42, "got int"),
    ("no call here", "no tool call found"),
    (f"{tool_format.TOOL_CALL}{{bad json{tool_format.END_TOOL_CALL}", "not valid JSON"),
    ({"tool": "read_file", "args": []}, "needs a string 'tool' and an object 'args'"),
    ({"tool": "x", "argz": {}}, "got ['argz', 'tool']"),
    ({"tool": "finish", "output_tokens": -3}, "non-negative integer"),
    ({"tool": "fly", "args": {}}, "unknown tool 'fly'"),
    ({"tool": "read_file", "args": {"path": "nope.txt"}}, "does not exist"),
])
def test_malformed_actions_are_counted_error_observations(make_env, write_task, action, message):
    env = make_env(load_task(write_task("m", {"a.txt": "x\n"}, **ANSWER_TASK)))
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(action)
    assert obs["is_error"] == 1 and message in obs["content"]
    assert obs in env.observation_space
    assert info == {"steps": 1, "tool_errors": 1}
    assert not terminated and not truncated


def test_step_outside_an_episode_is_a_caller_error(make_env, write_task):
    env = make_env(load_task(write_task("s", {"a.txt": ""}, **ANSWER_TASK)))
    with pytest.raises(RuntimeError, match="no episode has started"):
        env.step({"tool": "finish"})
    env.reset(seed=0)
    env.step({"tool": "finish"})
    with pytest.raises(RuntimeError, match="the episode is over"):
        env.step({"tool": "finish"})


@pytest.mark.parametrize("limits, action, reason", [
    ({"max_steps": 2}, {"tool": "list_dir"}, "max_steps"),
    ({"max_output_chars": 10}, {"tool": "read_file", "args": {"path": "big.txt"}},
     "max_output_chars"),
    ({"max_wall_s": 1e-6}, {"tool": "list_dir"}, "max_wall_s"),
])
def test_budgets_truncate_and_the_episode_is_still_graded(make_env, write_task, limits, action,
                                                         reason):
    env = make_env(load_task(write_task("b", {"big.txt": "x" * 500}, limits=limits,
                                        **ANSWER_TASK)))
    env.reset(seed=0)
    for _ in range(limits.get("max_steps", 1)):
        obs, reward, terminated, truncated, info = env.step(action)
    assert truncated and not terminated
    assert info["termination"] == reason
    assert info["reward_components"]["answer_matched"] is False and reward == 0.0


def test_long_outputs_are_clipped_to_the_observation_budget(make_env, write_task):
    env = make_env(load_task(write_task("c", {"a.txt": ""}, limits={"max_observation_chars": 500},
                                        **ANSWER_TASK)))
    env.reset(seed=0)
    obs, *_ = env.step({"tool": "run_terminal", "args": {"cmd": "seq 1 10000"}})
    assert len(obs["content"]) <= 500 and "characters cut from the middle" in obs["content"]
    assert obs["content"].startswith("1\n2\n") and obs["content"].endswith("[exit code 0]")


def test_final_info_carries_diff_components_and_answer(make_env, write_task):
    env = make_env(load_task(write_task("d", {"a.txt": "one\n"}, **ANSWER_TASK)))
    env.reset(seed=0)
    env.step({"tool": "create_file", "args": {"path": "a.txt", "content": "one\ntwo\n"}})
    env.step({"tool": "read_file", "args": {"path": "missing"}})
    obs, reward, terminated, truncated, info = env.step(
        {"tool": "finish", "args": {"summary": "The answer is 42."}})
    assert terminated and not truncated and reward == 1.0 and info["resolved"]
    assert info["termination"] == "finish" and info["infra_failure"] is False
    assert "+two" in info["diff"] and info["summary"] == "The answer is 42."
    components = info["reward_components"]
    assert (components["steps"], components["tool_errors"], components["diff_lines"],
            components["diff_files"], components["output_tokens"]) == (3, 1, 1, 1, None)


def test_infra_failures_are_flagged_for_trainers(make_env, write_task):
    env = make_env(load_task(write_task("i", {"a.txt": ""}, **ANSWER_TASK)))
    env.reset(seed=0)
    shutil.rmtree(env._root / "ws")  # the workspace vanishes under the episode
    obs, *_ = env.step({"tool": "run_terminal", "args": {"cmd": "true"}})
    assert obs["is_error"] == 1 and "the sandbox failed" in obs["content"]
    *_, info = env.step({"tool": "finish", "args": {"summary": "42"}})
    assert info["infra_failure"] is True
    assert any("infrastructure failure" in note for note in info["grading_notes"])


def test_suite_sampling_follows_the_seed_and_options_override(make_env):
    env = make_env(FIXTURE_TASKS)
    picks = [env.reset(seed=s)[1]["task_id"] for s in range(8)]
    assert picks == [env.reset(seed=s)[1]["task_id"] for s in range(8)]
    assert len(set(picks)) > 1
    _, info = env.reset(seed=0, options={"task": FIXTURE_TASKS / "understand-port"})
    assert info["task_id"] == "understand-port"


def test_constructor_and_reset_errors_are_explained(make_env):
    with pytest.raises(ValueError, match="reward must be one of"):
        make_env(FIXTURE_TASKS, reward="vibes")
    with pytest.raises(ValueError, match="tool names must be unique"):
        make_env(FIXTURE_TASKS, tools=environments.DEFAULT_TOOLS * 2)
    with pytest.raises(ValueError, match="no task"):
        make_env().reset()


def test_unsandboxed_mode_is_warned_and_still_grades(make_env):
    env = make_env(FIXTURE_TASKS / "debug-mean", sandbox="none")
    agent = OracleAgent()
    with pytest.warns(RuntimeWarning, match="UNSANDBOXED"):
        obs, info = env.reset(seed=0)
    agent.begin(env.task, obs, info)
    terminated = truncated = False
    while not (terminated or truncated):
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
    assert reward == 1.0 and info["reward_components"]["tests_total"] == 5


def test_an_env_dropped_without_close_gives_back_its_workspace(write_task, tmp_path):
    env = environments.CodingEnv(load_task(write_task("gc", {"a.txt": ""}, **ANSWER_TASK)),
                                 sandbox=SMALL_SANDBOX, workdir=str(tmp_path))
    env.reset(seed=0)
    root, lease = env._root, env._runner._lease
    assert root.exists() and lease.active
    del env
    gc.collect()
    assert not root.exists() and not lease.active


def test_the_package_does_not_import_jax():
    code = "import sys, environments; print('jax' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=str(FIXTURE_TASKS.parents[3]), check=True)
    assert out.stdout.strip() == "False"
