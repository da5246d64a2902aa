"""Scripted agents (environments/agents.py): the oracle solves every fixture task, null none."""
import pytest

from environments import NullAgent, OracleAgent
from environments.task import load_task
from tests.environments.conftest import FIXTURE_TASKS

TASK_IDS = ["debug-mean", "feature-slugify", "understand-port"]


def play(env, agent):
    obs, info = env.reset(seed=0)
    agent.begin(env.task, obs, info)
    while True:
        obs, reward, terminated, truncated, info = env.step(agent.act(obs, info))
        if terminated or truncated:
            return reward, info


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_oracle_scores_one_and_null_scores_zero(make_env, task_id):
    env = make_env(FIXTURE_TASKS / task_id)
    reward, info = play(env, OracleAgent())
    assert reward == 1.0 and info["resolved"], info["grading_notes"]
    assert info["reward_components"]["tool_errors"] == 0 and not info["infra_failure"]
    if env.task.reference_diff:
        assert info["reward_components"]["diff_lines"] > 0
        assert all(status == "passed" for status in info["tests_status"].values())
    reward, info = play(env, NullAgent())
    assert reward == 0.0 and not info["resolved"]
    assert info["diff"] == "" and info["reward_components"]["steps"] == 1


def test_oracle_refuses_a_task_it_cannot_solve(write_task):
    task = load_task(write_task("unsolvable", {"a.py": ""}, test_command="true"))
    with pytest.raises(ValueError, match="neither reference.diff nor an answer"):
        OracleAgent().begin(task, {}, {})
