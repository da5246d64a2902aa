"""Stop strings, the thread-safe server, the public `c2jax.generate`, and the model-backed
agent driving a real sandboxed episode through `cursorbench.run --agent=model:CKPT`."""
import json
import threading

import numpy as np
import pytest

import c2jax
from c2jax.checkpoint.model_dir import save_model
from c2jax.data.tokenizer import save_tokenizer
from c2jax.sampling import Engine, GenerationServer
from c2jax.sampling.agent import assistant_message
from environments import tool_format

from tests.sampling.conftest import reference_greedy, small_config


def test_stop_strings_cut_after_the_completing_token(chat_model, tokenizer):
    cfg, variables = chat_model
    prompt = tokenizer.encode("def parse(s):\n")
    greedy = reference_greedy(cfg, variables, prompt, 10)
    # Stop on the text of generated tokens 3-4 (it may start inside token 3's text).
    target = tokenizer.decode(greedy[3:5])
    expected = next(n for n in range(1, 11) if target in tokenizer.decode(greedy[:n]))
    engine = Engine(cfg, variables, config=small_config(), tokenizer=tokenizer)
    (g,) = engine.generate([dict(prompt=prompt, max_new_tokens=10, stop_strings=[target])])
    assert g.tokens == greedy[:expected] and g.finish_reason == "stop_string"


def test_server_batches_callers_from_many_threads(cfg, variables):
    prompts = [[i + 1, 2 * i + 3, 7] for i in range(6)]
    with GenerationServer(Engine(cfg, variables, config=small_config(slots=4))) as server:
        results = [None] * len(prompts)

        def call(i):
            results[i] = server.generate(prompts[i], 5, timeout=120).tokens

        threads = [threading.Thread(target=call, args=(i,)) for i in range(len(prompts))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        with pytest.raises(ValueError, match="vocabulary"):
            server.generate([cfg.vocab_size], 3)             # raised in the caller's thread
    assert results == [reference_greedy(cfg, variables, p, 5) for p in prompts]
    with pytest.raises(RuntimeError, match="closed"):
        server.submit([1], 2)


def test_public_generate(cfg, variables):
    prompts = [[5, 6, 7], [9]]
    greedy = c2jax.generate(cfg, variables, prompts, 4)
    assert [g.tokens for g in greedy] == [reference_greedy(cfg, variables, p, 4)
                                          for p in prompts]
    sampled = c2jax.generate(cfg, variables, [[5, 6, 7]] * 3, 6, temperature=1.0, seed=4)
    assert len({tuple(g.tokens) for g in sampled}) == 3      # seed + i: independent draws
    assert all(g.logprobs.shape == (6,) and np.all(g.logprobs <= 0) for g in sampled)


def test_assistant_message_splits_text_and_call():
    call = tool_format.format_tool_call("read_file", {"path": "a.py"})
    assert assistant_message(f"Let me look.\n{call}{tool_format.END}") == {
        "role": "assistant", "content": "Let me look.\n",
        "tool_call": {"tool": "read_file", "args": {"path": "a.py"}}}
    assert assistant_message("no call here") == {"role": "assistant", "content": "no call here"}


def test_model_agent_runs_a_sandboxed_episode_from_the_cli(tmp_path, chat_model, tokenizer):
    from cursorbench import run
    cfg, variables = chat_model
    model_dir = tmp_path / "model"
    save_model(str(model_dir), cfg, variables)
    save_tokenizer(tokenizer, model_dir)
    out = tmp_path / "run"
    assert run.main(["--suite=mini:test", "--limit=1", f"--agent=model:{model_dir}",
                     "--max-new-tokens=12", "--max-len=1536", "--workers=1",
                     f"--out={out}"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["n_tasks"] == 1 and summary["infra_failure_rate"] == 0.0
    (trace,) = [json.loads(line) for line in (out / "trajectories.jsonl").read_text().splitlines()]
    steps = trace["steps"]
    # The untrained model writes no valid call: the env answers each turn with an error, and
    # when the next turn would not fit in 1536 tokens (the system prompt alone is ~1,200 of this small BPE's) the agent finishes the episode.
    assert all(s["is_error"] for s in steps[:-1]) and len(steps) >= 2
    assert steps[-1]["action"]["tool"] == "finish" and trace["termination"] == "finish"
    assert [m["role"] for m in trace["messages"][:3]] == ["system", "user", "assistant"]
