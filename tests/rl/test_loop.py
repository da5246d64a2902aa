"""The actor-learner loop end to end on the toy environment (c2jax/rl/loop.py): RL learns,
the staleness bound shows in the recorded versions, and synchronous mode is on-policy."""
import numpy as np

from c2jax.rl.loop import train_rl
from tests.rl.toy_config import get_config
from tests.rl.toy_envs import DigitsEnv, toy_tasks


def run(tmp_path, policy_dir, **overrides):
    config = get_config()
    with config.unlocked():
        config.init_from = str(policy_dir)
        for section, fields in overrides.items():
            config[section].update(fields)
    return train_rl(config, tmp_path / "rl", tasks=toy_tasks(8), make_env=DigitsEnv)


def test_async_rl_learns_the_toy_task(tmp_path, policy_dir):
    result = run(tmp_path, policy_dir, learner=dict(steps=30, matched_kl=True))
    rewards = [r["reward/pass_fraction"] for r in result.history]
    assert np.mean(rewards[:3]) < 0.2, rewards        # an untrained policy writes few digits
    assert np.mean(rewards[-3:]) > 0.6, rewards
    # eta = 1: tokens lag the params they train by at most eta + 1 versions in aggregate
    # (a group admitted at v trains by v + 1 + eta with in-flight groups finishing late).
    assert max(r["staleness/mean"] for r in result.history) <= 2.0
    assert any(r["staleness/max"] >= 1 for r in result.history)       # really off-policy
    assert all(r["learner/finite"] == 1.0 for r in result.history)
    # The float32 actor and learner agree once each token is scored under the params that
    # sampled it; against the current params, stale tokens also carry the policy's drift.
    # (Segments split by an in-flight swap are left out of the matched KL.)
    assert np.mean([r["learner/matched_token_fraction"] for r in result.history]) > 0.5
    assert max(r["learner/mismatch_kl_matched"] for r in result.history) < 1e-6
    assert max(r["learner/mismatch_kl"] for r in result.history) > 1e-4
    consumed = [g for r in result.history for g in r["group_ids"]]
    assert len(consumed) == len(set(consumed)) == 30 * 4


def test_synchronous_mode_trains_on_tokens_of_the_current_version(tmp_path, policy_dir):
    result = run(tmp_path, policy_dir, learner=dict(steps=4), staleness=dict(eta=0))
    assert [r["staleness/max"] for r in result.history] == [0.0] * 4
    assert [sorted(r["group_ids"]) for r in result.history] == [
        [4 * s + i for i in range(4)] for s in range(4)]
    assert all(r["learner/mismatch_kl"] < 1e-6 for r in result.history)
