"""Shaped rewards against hand-computed values and the easy-fast / hard-long property; how
a finished group becomes a training group (dynamic sampling)."""
import math

import numpy as np
import pytest

from c2jax.rl.config import rl_config
from c2jax.rl.loop import FinishedGroups, group_maker
from c2jax.rl.rewards import episode_terms, reward_config, shape_group
from c2jax.rl.trajectory import Episode


def _terms(correct, tokens, steps=4):
    return {"pass_fraction": correct, "resolved": correct, "style": 1.0, "efficiency": 0.5,
            "steps": steps, "output_tokens": tokens}


def test_hand_computed_group():
    cfg = reward_config(style_weight=0.1, efficiency_weight=0.0, length_lambda=0.2,
                        tool_call_tokens=0)
    out = shape_group([_terms(1.0, 100), _terms(0.0, 300)], cfg)
    # pass rate 0.5, cost_ref = median(100, 300) = 200
    assert out[0]["reward"] == pytest.approx(1.0 + 0.1 - 0.2 * 0.5 * math.log1p(0.5))
    assert out[1]["reward"] == pytest.approx(0.0 + 0.1 - 0.2 * 0.5 * math.log1p(1.5))


def test_easy_tasks_are_pushed_to_be_fast_hard_tasks_may_think():
    cfg = reward_config(length_lambda=0.5)
    easy = shape_group([_terms(1.0, t) for t in (100, 400)] + [_terms(1.0, 250)], cfg)
    hard = shape_group([_terms(1.0, 100), _terms(0.0, 400), _terms(0.0, 250)], cfg)
    # The same cost ratio costs more when the group's pass rate is high.
    assert easy[0]["length_penalty"] > hard[0]["length_penalty"]
    # Concave: doubling the cost ratio less than doubles the penalty.
    assert easy[1]["length_penalty"] < 4 * easy[0]["length_penalty"]
    assert easy[0]["reward"] > easy[1]["reward"]


def test_episode_terms_from_env_info():
    info = {"termination": "finish", "pass_fraction": 0.5, "resolved": False,
            "reward_components": {"steps": 5, "tool_errors": 1, "output_tokens": 77}}
    t = episode_terms(info, max_steps=20)
    assert t["style"] == pytest.approx(0.5 * (0.8 + 1.0))
    assert t["efficiency"] == pytest.approx(0.75)
    assert t["output_tokens"] == 77


def test_power_length_function_must_be_concave():
    with pytest.raises(ValueError, match="length_power"):
        shape_group([_terms(1.0, 10)], reward_config(length_function="power", length_power=1.5))


def _scored(resolved: bool, steps: int) -> Episode:
    info = {"reward_components": {"steps": steps, "tool_errors": 0}, "termination": "finish",
            "pass_fraction": float(resolved), "resolved": resolved}
    return Episode("t", 0, 0, [], info, [])


@pytest.mark.parametrize("drop", [False, True])
def test_dynamic_sampling_drops_groups_of_equal_correctness_and_counts_them(drop):
    config = rl_config(learner=dict(drop_uniform_groups=drop))
    finished = FinishedGroups()
    make = group_maker(config, [None], finished)
    # all fail, with shaped rewards that differ (fewer steps are more efficient)
    failed = make(0, 0, 0, [_scored(False, 2), _scored(False, 5), _scored(False, 9)])
    mixed = make(1, 0, 0, [_scored(True, 2), _scored(False, 5), _scored(False, 9)])
    assert (failed is None) == drop
    if not drop:
        assert np.ptp(failed.advantages) > 0        # the shaping terms alone differ
    assert mixed is not None and mixed.advantages[0] > 0 > mixed.advantages[1]
    assert finished.take() == pytest.approx(1 / 6)   # dropped groups count too
    assert finished.take() is None                    # reset by take
