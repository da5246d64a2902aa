"""The policy agent (c2jax/rl/agent.py): a real sandboxed episode through
`cursorbench.run --agent=model:CKPT`."""
import json

from c2jax.rl.agent import assistant_message
from environments import tool_format


def test_assistant_message_splits_text_and_call():
    call = tool_format.format_tool_call("read_file", {"path": "a.py"})
    assert assistant_message(f"Let me look.\n{call}{tool_format.END}") == {
        "role": "assistant", "content": "Let me look.\n",
        "tool_call": {"tool": "read_file", "args": {"path": "a.py"}}}
    assert assistant_message("no call here") == {"role": "assistant", "content": "no call here"}


def test_model_agent_runs_a_sandboxed_episode_from_the_cli(tmp_path, policy_dir):
    from cursorbench import run
    model_dir = policy_dir
    out = tmp_path / "run"
    assert run.main(["--suite=mini:test", "--limit=1", f"--agent=model:{model_dir}",
                     "--max-new-tokens=12", "--max-len=1536", "--workers=1",
                     f"--out={out}"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_tasks"] == 1 and summary["infra_failure_rate"] == 0.0
    (trace,) = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    steps = trace["steps"]
    # The untrained model writes no valid call: the env answers each turn with an error (the
    # system prompt alone is ~1,200 of this small BPE's 1536 tokens, so the agent summarises
    # to make room, and finishes when even that cannot).
    assert all(s["is_error"] for s in steps[:-1]) and len(steps) >= 2
    assert steps[-1]["action"]["tool"] == "finish" and trace["termination"] == "finish"
    assert [m["role"] for m in trace["messages"][:4]] == ["system", "user", "assistant", "tool"]
