"""The warm start's SFT data restart at summaries exactly as the RL actor's context does
(experiments/warm_start.py)."""
from experiments.warm_start import conversation_segments


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
