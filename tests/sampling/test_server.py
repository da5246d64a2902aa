"""Stop strings, the thread-safe server and the public `c2jax.generate`."""
import threading

import numpy as np
import pytest

import c2jax
from c2jax.sampling import Engine, GenerationServer

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
