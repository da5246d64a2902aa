"""The warm start (experiments/warm_start.py): its SFT data restart at summaries exactly as the
RL actor's context does, and its stage configs take the `warm_start` settings."""
import pytest

from c2jax.train.config import ConfigError
from configs import pretrain_tiny, rl_tiny, sft_tiny
from experiments.warm_start import (INDUCTION_BLOCK, _pretrain_stages, _sft_config, _sized,
                                    conversation_segments, with_failed_turn, without_thoughts)


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


def test_without_thoughts_keeps_every_call_and_drops_only_the_reasoning():
    head = [{"role": "system", "content": "s"}, {"role": "user", "content": "task"}]
    call = {"tool": "read_file", "args": {"path": "a.py"}}
    turns = [{"role": "assistant", "content": "Let me read a.py.\n", "tool_call": call},
             {"role": "tool", "content": "x = 1"},
             {"role": "summary", "content": "read a.py"},
             {"role": "assistant", "content": "A reply without a call."}]
    assert without_thoughts(head + turns) == head + [
        {"role": "assistant", "content": "", "tool_call": call}] + turns[1:]


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


def test_stage_configs_take_the_warm_start_optimizer_and_copy_share(tmp_path):
    """`warm_start.optimizer` reaches every stage (None keeps the stage's own value); the
    induction stage trains on short copy blocks and the pretraining stage starts from it with
    its own copy share and block; a block too long for the rows fails before anything runs."""
    ws = rl_tiny.get_config().warm_start
    [(_, default)] = _pretrain_stages(ws, tmp_path)
    assert default.optimizer.learning_rate == pretrain_tiny.get_config().optimizer.learning_rate
    ws.optimizer.b2 = 0.999
    ws.pretrain_learning_rate, ws.copy_fraction, ws.copy_block = 1e-3, 0.5, (8, 100)
    ws.model.qk_rope_head_dim = 32
    ws.induction_steps, ws.pretrain_steps = 80, 40
    (name_i, induction), (name_p, pretrain) = _pretrain_stages(ws, tmp_path)
    assert (name_i, name_p) == ("induction", "pretrain")
    assert induction.data.copy_block == INDUCTION_BLOCK and induction.train.steps == 80
    assert pretrain.train.init_from == str(tmp_path / "induction")
    assert (pretrain.optimizer.learning_rate, pretrain.optimizer.b2) == (1e-3, 0.999)
    assert (pretrain.data.copy_fraction, pretrain.data.copy_block) == (0.5, (8, 100))
    assert pretrain.model.qk_rope_head_dim == 32 and induction.model.qk_rope_head_dim == 32
    assert pretrain.train.steps == 40 and pretrain.optimizer.warmup_steps == 10
    sft = _sized(sft_tiny.get_config("/nowhere"), 40, ws)
    assert sft.optimizer.b2 == 0.999
    assert sft.optimizer.weight_decay == sft_tiny.get_config("/nowhere").optimizer.weight_decay
    assert sft.data.copy_fraction == 0.0
    assert _sft_config(ws, tmp_path).data.copy_fraction == 0.0
    ws.sft_copy_fraction = 0.5
    sft = _sft_config(ws, tmp_path)
    assert (sft.data.copy_fraction, sft.data.copy_block) == (0.5, (8, 100))
    assert sft.train.init_from == str(tmp_path / "longctx")
    ws.induction_steps = 0
    [(_, alone)] = _pretrain_stages(ws, tmp_path)
    assert alone.train.init_from == ""
    ws.copy_block = (8, 200)
    with pytest.raises(ConfigError, match=r"\[warm_start\] the pretrain stage.*copy_block"):
        _pretrain_stages(ws, tmp_path)
    ws.copy_fraction, ws.sft_seq_len = 0.0, 300
    with pytest.raises(ConfigError, match=r"\[warm_start\] the sft stage.*copy_block"):
        _sft_config(ws, tmp_path)


@pytest.mark.parametrize("agent", ["oracle", "runcall"])
def test_sft_data_can_be_restricted_to_task_categories(tmp_path, monkeypatch, agent):
    """`warm_start.sft_categories` keeps the replay (real sandbox) to those tasks, and only
    resolved episodes become SFT data (the oracle resolves them all; `runcall` not)."""
    import json

    from experiments.warm_start import sft_conversations
    monkeypatch.setenv("C2JAX_CACHE_DIR", str(tmp_path / "cache"))
    ws = rl_tiny.get_config().warm_start
    ws.sft_tasks, ws.sft_categories, ws.sft_recovery_fraction = 10, ("understanding",), 0.0
    ws.sft_agent = agent
    written = sft_conversations(ws, tmp_path / "sft.jsonl")
    results = [json.loads(line)
               for line in (tmp_path / "oracle_run" / "results.jsonl").read_text().splitlines()]
    assert results and all(r["task_id"].endswith("-understanding") for r in results)
    resolved = sum(r["resolved"] for r in results)
    # (task 8 of mini:train asks for a constant by its meaning: runcall cannot answer it)
    assert len(results) < 10 and (resolved == len(results)) == (agent == "oracle")
    conversations = [json.loads(line)["messages"]
                     for line in (tmp_path / "sft.jsonl").read_text().splitlines()]
    assert written == len(conversations) and (written >= resolved if agent == "oracle"
                                              else written == resolved)
    tools = {m["tool_call"]["tool"] for c in conversations for m in c if m.get("tool_call")}
    if agent == "runcall":
        assert tools == {"run_terminal", "finish"}
    else:
        assert {"read_file", "finish"} <= tools


def test_the_cache_key_follows_every_setting_but_ignores_neutral_new_fields():
    """Fields added later leave the key alone at their neutral values (old caches stay
    valid) and change it at any other value, as every other setting does."""
    from experiments.warm_start import _KEY_NEUTRAL, _key
    ws = rl_tiny.get_config().warm_start
    base = _key(ws)
    assert all(ws[field] == value for field, value in _KEY_NEUTRAL.items())
    for field, value in (("sft_fresh_names", 2), ("sft_thoughts", False), ("sft_agent", "runcall"),
                         ("sft_categories", ("understanding",)), ("sft_copy_fraction", 0.5),
                         ("sft_steps", 251)):
        default = ws[field]
        ws[field] = value
        assert _key(ws) != base, field
        ws[field] = default
        assert _key(ws) == base
