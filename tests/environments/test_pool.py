"""Concurrent episodes (environments/pool.py)."""
import pytest

from environments import EnvPool, NullAgent, OracleAgent
from tests.environments.conftest import FIXTURE_TASKS, SMALL_SANDBOX


@pytest.fixture
def pool():
    with EnvPool(2, sandbox=SMALL_SANDBOX) as envs:
        yield envs


class ExplodingAgent(NullAgent):
    def act(self, observation, info):
        raise RuntimeError("policy server went away")


def test_runs_episodes_concurrently_in_task_order(pool):
    tasks = [FIXTURE_TASKS / "debug-mean", FIXTURE_TASKS / "understand-port",
             FIXTURE_TASKS / "understand-port"]
    results = pool.run_episodes(tasks, OracleAgent, seeds=[0, 1, 2])
    assert [r.task_id for r in results] == ["debug-mean", "understand-port", "understand-port"]
    assert all(r.reward == 1.0 and r.resolved and r.terminated and r.error is None
               for r in results)
    assert results[0].steps == 3 and results[0].info["reward_components"]["diff_lines"] == 2
    uids = {env._runner.uid for env in pool.envs}
    assert len(uids) == 2  # each environment has its own sandbox uid


def test_a_failing_agent_is_reported_not_raised(pool):
    tasks = [FIXTURE_TASKS / "understand-port"] * 2
    failed = pool.run_episodes(tasks, ExplodingAgent)
    assert all(r.infra_failure and "policy server went away" in r.error for r in failed)
    assert [r.reward for r in pool.run_episodes(tasks, OracleAgent)] == [1.0, 1.0]


def test_deadline_stops_the_batch(pool):
    results = pool.run_episodes([FIXTURE_TASKS / "understand-port"] * 3, OracleAgent,
                                timeout_s=0)
    assert all(r.infra_failure and "deadline" in r.error for r in results)


def test_lock_step_reset_and_step_for_batched_actors(pool):
    first = pool.reset([FIXTURE_TASKS / "understand-port", FIXTURE_TASKS / "debug-mean"],
                       seeds=[0, 0])
    assert [info["task_id"] for _, info in first] == ["understand-port", "debug-mean"]
    steps = pool.step([{"tool": "finish", "args": {"summary": "8137"}}, None])
    obs, reward, terminated, truncated, info = steps[0]
    assert steps[1] is None and terminated and reward == 1.0
    with pytest.raises(ValueError, match="3 actions for 2 environments"):
        pool.step([None, None, None])
    with pytest.raises(ValueError, match="got 1 seeds for 2 tasks"):
        pool.run_episodes([FIXTURE_TASKS / "understand-port"] * 2, NullAgent, seeds=[0])
