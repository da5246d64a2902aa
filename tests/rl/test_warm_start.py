"""The warm start's SFT data restart at summaries exactly as the RL actor's context does
(experiments/warm_start.py)."""
from experiments.warm_start import conversation_segments, with_failed_turn


def test_conversations_are_cut_at_summary_turns():
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    turn = {"role": "assistant", "content": "a", "tool_call": {"tool": "list_dir"}}
    tool = {"role": "tool", "content": "files"}
    summary = {"role": "summary", "content": "read files"}
    finish = {"role": "assistant", "content": "", "tool_call": {"tool": "finish"}}
    segments = conversation_segments(head + [turn, tool, summary, turn, tool, finish])
    assert segments == [head + [turn, tool, summary],
                        head + [dict(summary, train=False), turn, tool, finish]]
    # A conversation that ends on its summary leaves no empty trailing segment.
    assert conversation_segments(head + [turn, tool, summary]) == [head + [turn, tool, summary]]


def test_failed_turn_is_context_answered_with_the_environments_error():
    """The inserted attempt is the turn's text without its call, loss 0, followed by exactly
    what the environment answers such model text with; the real turn follows, trained."""
    import random

    from environments.env import _parse_action
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    turn = {"role": "assistant", "content": "Let me look.\n", "tool_call": {"tool": "list_dir"}}
    tool = {"role": "tool", "content": "files"}
    segment = head + [turn, tool, dict(turn, train=False), tool]   # only turn 2 is trained
    out = with_failed_turn(segment, random.Random(0))
    _, _, _, problem = _parse_action({"text": "Let me look.\n"})
    assert out == head + [{"role": "assistant", "content": "Let me look.\n", "train": False},
                          {"role": "tool", "content": f"error: {problem}"}] + segment[2:]
    assert with_failed_turn(head + [dict(turn, train=False), tool], random.Random(0)) is None
