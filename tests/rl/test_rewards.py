"""Shaped rewards against hand-computed values and the easy-fast / hard-long property."""
import math

import pytest

from c2jax.rl.rewards import episode_terms, reward_config, shape_group


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
