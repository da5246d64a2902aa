"""The engine: continuous batching, per-token records, stops, compile stability, in-flight
weight swaps and speculative decoding, each against a cache-free reference
(c2jax/sampling/engine.py, steps.py, speculative.py)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.model import apply
from c2jax.sampling import Engine
from c2jax.sampling.cache import init_cache, main_cache
from c2jax.sampling.engine import inference_config
from c2jax.sampling.speculative import speculative_steps
from c2jax.sampling.steps import decode_steps, prefill

from tests.sampling.conftest import reference_greedy, reference_logits, small_config
from tests.sampling.test_sampling import numpy_distribution

PROMPTS = [[1, 2, 3], [5, 6, 7, 8, 9, 10], [11], [4] * 12, [7, 3], [200, 100, 50, 25, 12]]


def compiled_counts():
    return prefill._cache_size(), decode_steps._cache_size(), speculative_steps._cache_size()


def test_greedy_matches_the_reference_with_continuous_batching(cfg, variables):
    engine = Engine(cfg, variables, config=small_config(slots=4))
    generations = engine.generate([dict(prompt=p, max_new_tokens=4 + i)
                                   for i, p in enumerate(PROMPTS)])
    for i, (prompt, g) in enumerate(zip(PROMPTS, generations)):
        assert g.tokens == reference_greedy(cfg, variables, prompt, 4 + i)
        assert g.finish_reason == "length"
        assert g.versions.tolist() == [0] * len(g.tokens)
        np.testing.assert_array_equal(g.logprobs, 0.0)              # greedy: a point mass
        # Routing of every position, prompt and generated (the last token was never input).
        sequence = prompt + g.tokens[:-1]
        _, routing = reference_logits(cfg, variables, sequence)
        recorded = np.concatenate([g.prompt_routing, g.routing], axis=0)  # [positions, L, k]
        np.testing.assert_array_equal(recorded.transpose(1, 0, 2), routing)


def test_sampled_tokens_carry_their_logprob_and_do_not_depend_on_the_batch(cfg, variables):
    settings = dict(max_new_tokens=8, temperature=0.8, top_k=20, top_p=0.9)
    engine = Engine(cfg, variables, config=small_config(slots=3))
    together = engine.generate([dict(prompt=p, seed=10 + i, **settings)
                                for i, p in enumerate(PROMPTS)])
    alone = Engine(cfg, variables, config=small_config(slots=1)).generate(
        [dict(prompt=PROMPTS[4], seed=14, **settings)])[0]
    assert alone.tokens == together[4].tokens
    for prompt, g in zip(PROMPTS[:3], together):
        logits, _ = reference_logits(cfg, variables, prompt + g.tokens)
        for j, token in enumerate(g.tokens):
            dist = numpy_distribution(logits[len(prompt) - 1 + j], 0.8, 20, 0.9)
            assert dist[token] > 0
            np.testing.assert_allclose(g.logprobs[j], np.log(dist[token]), atol=1e-4)
    assert len({tuple(g.tokens) for g in together}) == len(PROMPTS)


def test_finished_slots_are_refilled_while_others_run(cfg, variables):
    engine = Engine(cfg, variables, config=small_config(slots=2, steps_per_call=1))
    long_id = engine.submit([1, 2, 3], max_new_tokens=12)
    engine.submit([4, 5], max_new_tokens=2)
    waiting_id = engine.submit([6], max_new_tokens=2)
    finished_at = {}
    for step in range(40):
        for g in engine.step():
            finished_at[g.request_id] = step
        if not engine.busy:
            break
    # The third request got the second slot as soon as it was free, and finished long before
    # the first request, which kept decoding the whole time.
    assert finished_at[waiting_id] < finished_at[long_id] - 5


def test_stop_tokens_and_budget(cfg, variables):
    greedy = reference_greedy(cfg, variables, PROMPTS[1], 8)
    stop = greedy[3]
    first = greedy.index(stop)
    engine = Engine(cfg, variables, config=small_config())
    stopped, budget = engine.generate([
        dict(prompt=PROMPTS[1], max_new_tokens=8, stop_tokens=[999 % cfg.vocab_size, stop]),
        dict(prompt=PROMPTS[1], max_new_tokens=2)])
    assert stopped.tokens == greedy[:first + 1] and stopped.finish_reason == "stop_token"
    assert budget.tokens == greedy[:2] and budget.finish_reason == "length"


def test_bad_requests_are_refused_with_a_reason(cfg, variables):
    engine = Engine(cfg, variables, config=small_config())
    for request, message in [(dict(prompt=[], max_new_tokens=2), "at least one token"),
                             (dict(prompt=[cfg.vocab_size], max_new_tokens=2), "vocabulary"),
                             (dict(prompt=[1] * 60, max_new_tokens=10), "max_len=64"),
                             (dict(prompt=[1], max_new_tokens=2, stop_strings=["x"]),
                              "need a tokenizer"),
                             (dict(prompt=[1], max_new_tokens=2, top_p=2.0), "top_p")]:
        with pytest.raises(ValueError, match=message):
            engine.submit(**request)


def test_a_stream_of_requests_does_not_recompile_after_warm_up(cfg, variables):
    config = small_config(slots=4)

    def stream(lengths, offset):
        engine = Engine(cfg, variables, config=config)
        rng = np.random.default_rng(offset)
        engine.generate([dict(prompt=rng.integers(1, 200, n).tolist(), max_new_tokens=6,
                              seed=offset + i) for i, n in enumerate(lengths)])

    stream([3, 9, 17, 5, 11, 2], offset=0)                    # warm-up: buckets 8, 16, 32
    warm = compiled_counts()
    stream([4, 10, 18, 7, 12, 3], offset=100)                # other lengths, same buckets
    assert compiled_counts() == warm


def test_weights_swap_between_two_decode_steps(cfg, variables, other_variables):
    prompt = PROMPTS[1]
    config = small_config(slots=1, steps_per_call=2)

    def run(swap_to, version):
        engine = Engine(cfg, variables, config=config)
        engine.submit(prompt, max_new_tokens=7)
        assert engine.step() == []          # prefill (1 token) + 2 decode steps, at version 0
        engine.set_params(swap_to, version=version)
        return engine.run()[0]

    unswapped = run(variables, 0)
    counts = compiled_counts()
    # The same weights under a new version number: same tokens, versions switch at token 3.
    relabelled = run(jax.tree.map(jnp.copy, variables), 1)
    assert relabelled.tokens == unswapped.tokens
    assert relabelled.versions.tolist() == [0, 0, 0, 1, 1, 1, 1]
    swapped = run(other_variables, 5)
    assert compiled_counts() == counts                       # params are an argument
    assert swapped.versions.tolist() == [0, 0, 0, 5, 5, 5, 5]
    assert swapped.tokens[:3] == unswapped.tokens[:3]
    # Token 3 is the new weights' prediction with the cache the old weights wrote (positions
    # before the swap) plus the new weights' latents of token 2: the in-flight semantics.
    frozen = inference_config(cfg)
    n = len(prompt) + 2
    seq = jnp.asarray([prompt + swapped.tokens[:2]], jnp.int32)
    cache = main_cache(init_cache(cfg, 1, n + 1))
    _, aux = apply(variables, seq, cfg=frozen, cache=cache)
    logits, _ = apply(other_variables, jnp.asarray([[swapped.tokens[2]]]), None,
                      jnp.asarray([[n]]), cfg=frozen, cache=aux["cache"])
    assert swapped.tokens[3] == int(jnp.argmax(logits[0, -1]))
    with pytest.raises(ValueError, match="embed_tokens"):
        engine = Engine(cfg, variables, config=config)
        bad = jax.tree_util.tree_map_with_path(
            lambda path, a: a[:-1] if "embed_tokens" in jax.tree_util.keystr(path) else a,
            variables)
        engine.set_params(bad, version=9)


def test_speculative_decoding_is_exact_at_temperature_zero(cfg, variables):
    requests = [dict(prompt=p, max_new_tokens=9) for p in PROMPTS[:5]]
    plain = Engine(cfg, variables, config=small_config(slots=3)).generate(requests)
    engine = Engine(cfg, variables, config=small_config(slots=3, speculative=True,
                                                        steps_per_call=2))
    speculative = engine.generate(requests)
    for a, b in zip(plain, speculative):
        assert a.tokens == b.tokens
        np.testing.assert_array_equal(a.routing, b.routing)
    assert engine.drafted > 0 and 0.0 <= engine.acceptance_rate <= 1.0


def test_speculative_sampling_records_the_target_logprobs(cfg, variables):
    engine = Engine(cfg, variables, config=small_config(slots=2, speculative=True))
    generations = engine.generate([dict(prompt=p, max_new_tokens=6, temperature=1.0, seed=i)
                                   for i, p in enumerate(PROMPTS[:2])])
    for prompt, g in zip(PROMPTS[:2], generations):
        assert len(g.tokens) == 6
        logits, _ = reference_logits(cfg, variables, prompt + g.tokens)
        for j, token in enumerate(g.tokens):
            dist = numpy_distribution(logits[len(prompt) - 1 + j], 1.0, 0, 1.0)
            np.testing.assert_allclose(g.logprobs[j], np.log(dist[token]), atol=1e-4)
