"""Text and action spaces (environments/spaces.py)."""
from gymnasium import spaces as gym_spaces

from environments import spaces

CODE = 'def f(x):\n    return {"λ": x}  # 中文 🙂\n'


def test_gymnasium_text_rejects_code_but_unicode_text_accepts_it():
    assert CODE not in gym_spaces.Text(1000)
    assert CODE in spaces.UnicodeText(1000)
    assert "" in spaces.UnicodeText(10) and "" not in spaces.UnicodeText(10, min_length=1)
    assert "x" * 11 not in spaces.UnicodeText(10)
    assert b"bytes" not in spaces.UnicodeText(10) and 3 not in spaces.UnicodeText(10)


def test_samples_lie_in_the_space_and_follow_the_seed():
    space, twin = spaces.UnicodeText(100, min_length=5, seed=7), spaces.UnicodeText(
        100, min_length=5, seed=7)
    samples = [space.sample() for _ in range(20)]
    assert all(s in space for s in samples)
    assert samples == [twin.sample() for _ in range(20)]
    assert len(set(samples)) > 1


def test_action_space_accepts_the_three_action_forms():
    action = spaces.AgentAction(max_text_chars=1000)
    assert {"tool": "read_file", "args": {"path": "a.py"}} in action
    assert {"tool": "finish"} in action
    assert {"tool": "finish", "args": {}, "output_tokens": 12} in action
    assert {"text": "<|tool_call|>{}<|end_tool_call|>", "output_tokens": 3} in action
    assert "raw model text" in action
    for bad in ({"tool": 3, "args": {}}, {"tool": "x", "args": []}, {"args": {}},
                {"tool": "x", "args": {}, "extra": 1}, {"text": "t", "output_tokens": -1},
                {"text": "t", "output_tokens": True}, 42, "x" * 1001):
        assert bad not in action, bad


def test_action_samples_are_seeded_text():
    a, b = spaces.AgentAction(), spaces.AgentAction()
    a.seed(3)
    b.seed(3)
    sample = a.sample()
    assert isinstance(sample, str) and sample in a and sample == b.sample()


def test_observation_space_holds_env_observations():
    space = spaces.observation_space()
    assert {"role": "tool", "tool": "read_file", "content": CODE, "is_error": 1} in space
    assert {"role": "tool", "tool": "read_file", "content": CODE, "is_error": 2} not in space
