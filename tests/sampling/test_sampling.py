"""Sampling distributions, draws and the speculative acceptance rule against numpy references
(c2jax/sampling/sampling.py, speculative.accept_drafts, stopping.truncate_at_stops)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.sampling.sampling import (SamplingParams, draw, sampling_logprobs, token_key,
                                     uniforms, validate_settings)
from c2jax.sampling.speculative import accept_drafts
from c2jax.sampling.stopping import NO_STOP, truncate_at_stops


def numpy_distribution(logits, temperature, top_k, top_p):
    """The reference: softmax(logits / T), keep the top_k most likely and the smallest prefix
    (by probability) whose mass reaches top_p, renormalise."""
    if temperature == 0:
        probs = np.zeros_like(logits)
        probs[np.argmax(logits)] = 1.0
        return probs
    z = logits / temperature
    probs = np.exp(z - z.max())
    probs /= probs.sum()
    order = np.argsort(-probs, kind="stable")
    keep = np.zeros_like(probs, bool)
    mass = 0.0
    for rank, i in enumerate(order):
        if (top_k and rank >= top_k) or mass >= top_p:
            break
        keep[i] = True
        mass += probs[i]
    kept = np.where(keep, probs, 0.0)
    return kept / kept.sum()


@pytest.mark.parametrize("temperature,top_k,top_p", [
    (1.0, 0, 1.0), (0.7, 0, 1.0), (1.0, 5, 1.0), (1.3, 0, 0.6), (0.9, 4, 0.8), (0.0, 0, 1.0),
    (0.0, 3, 0.5)])
def test_sampling_distribution_matches_the_numpy_reference(temperature, top_k, top_p):
    logits = np.random.default_rng(0).normal(size=(3, 40)).astype(np.float32) * 2
    params = SamplingParams.full(3, temperature, top_k, top_p)
    got = np.exp(np.asarray(sampling_logprobs(jnp.asarray(logits), params)))
    for row in range(3):
        np.testing.assert_allclose(got[row], numpy_distribution(logits[row], temperature,
                                                                top_k, top_p), atol=1e-6)


def test_rows_use_their_own_settings():
    logits = jnp.asarray(np.random.default_rng(1).normal(size=(2, 30)), jnp.float32)
    mixed = SamplingParams(jnp.asarray([0.0, 1.0]), jnp.asarray([0, 3], jnp.int32),
                           jnp.asarray([1.0, 1.0]))
    got = np.exp(np.asarray(sampling_logprobs(logits, mixed)))
    np.testing.assert_allclose(got[0], numpy_distribution(np.asarray(logits[0]), 0, 0, 1),
                               atol=1e-6)
    np.testing.assert_allclose(got[1], numpy_distribution(np.asarray(logits[1]), 1, 3, 1),
                               atol=1e-6)


def test_draws_follow_the_distribution_and_skip_zero_mass():
    probs = np.asarray([0.5, 0.0, 0.2, 0.3, 0.0], np.float32)
    n = 40_000
    logprobs = jnp.log(jnp.broadcast_to(jnp.asarray(probs), (n, probs.size)))
    u = jax.random.uniform(jax.random.key(0), (n,))
    counts = np.bincount(np.asarray(draw(logprobs, u)), minlength=probs.size)
    assert counts[1] == counts[4] == 0
    # 5 standard errors of a binomial proportion: fails only on a real bias.
    np.testing.assert_allclose(counts / n, probs, atol=5 * np.sqrt(0.25 / n))


def test_keys_depend_on_seed_and_token_index_only():
    seeds = jnp.stack([jax.random.key_data(jax.random.key(s)) for s in (7, 7, 8)])
    u = np.asarray(uniforms(token_key(seeds, jnp.asarray([3, 3, 3]), 0)))
    assert u[0] == u[1] != u[2]
    other_index = np.asarray(uniforms(token_key(seeds, jnp.asarray([4, 4, 4]), 0)))
    other_stream = np.asarray(uniforms(token_key(seeds, jnp.asarray([3, 3, 3]), 1)))
    assert len({u[0], other_index[0], other_stream[0]}) == 3


@pytest.mark.parametrize("depth", [1, 3])
def test_speculative_acceptance_preserves_the_target_distribution(depth):
    """Leviathan et al.'s guarantee: whatever the draft q, the first emitted token ~ p_0, and
    given it was the accepted draft d_1, the second ~ p_1."""
    rng = np.random.default_rng(depth)
    vocab, n = 6, 60_000
    p = rng.dirichlet(np.ones(vocab), size=depth + 1).astype(np.float32)    # p_0..p_D
    q = rng.dirichlet(np.ones(vocab) * 0.5, size=depth).astype(np.float32)  # q_1..q_D
    keys = jax.random.split(jax.random.key(depth), 3)
    drafts = jnp.stack([jax.random.categorical(jax.random.fold_in(keys[0], j),
                                               jnp.log(q[j]), shape=(n,))
                        for j in range(depth)], axis=1)
    target = jnp.broadcast_to(jnp.log(p), (n, depth + 1, vocab))
    draft_lp = jnp.broadcast_to(jnp.log(q), (n, depth, vocab))
    tokens, count, logprobs = accept_drafts(
        target, draft_lp, drafts, jax.random.uniform(keys[1], (n, depth)),
        jax.random.uniform(keys[2], (n,)))
    tokens, count = np.asarray(tokens), np.asarray(count)
    assert count.min() >= 1 and count.max() <= depth + 1
    tolerance = 5 * np.sqrt(0.25 / n)
    np.testing.assert_allclose(np.bincount(tokens[:, 0], minlength=vocab) / n, p[0],
                               atol=tolerance)
    if depth > 1:
        second = tokens[count >= 2, 1]
        np.testing.assert_allclose(np.bincount(second, minlength=vocab) / second.size, p[1],
                                   atol=5 * np.sqrt(0.25 / second.size))
    # Each emitted token's recorded log-prob is its log p under the target.
    np.testing.assert_allclose(np.asarray(logprobs[:, 0]), np.log(p[0])[tokens[:, 0]],
                               rtol=1e-5)


def test_greedy_drafts_are_accepted_exactly_when_they_equal_the_argmax():
    vocab = 5
    p = np.full((2, 3, vocab), -np.inf, np.float32)
    p[:, 0, 1] = p[:, 1, 2] = p[:, 2, 4] = 0.0                 # greedy target: 1, 2, then 4
    q = np.full((2, 2, vocab), -np.inf, np.float32)
    q[0, 0, 1] = q[0, 1, 2] = 0.0                              # row 0 drafts 1, 2: both right
    q[1, 0, 1] = q[1, 1, 3] = 0.0                              # row 1 drafts 1, 3: one right
    drafts = jnp.asarray([[1, 2], [1, 3]])
    tokens, count, _ = accept_drafts(jnp.asarray(p), jnp.asarray(q), drafts,
                                     jnp.full((2, 2), 0.999), jnp.full((2,), 0.5))
    assert np.asarray(count).tolist() == [3, 2]
    assert np.asarray(tokens).tolist() == [[1, 2, 4], [1, 2, 0]]


def test_stops_keep_the_stop_token_and_respect_the_budget():
    tokens = jnp.asarray([[5, 9, 7], [5, 6, 7], [9, 9, 9], [1, 2, 3]])
    stop_ids = jnp.asarray([[9, NO_STOP]] * 4)
    kept, stopped = truncate_at_stops(tokens, jnp.asarray([3, 3, 1, 3]), stop_ids,
                                      jnp.asarray([10, 10, 10, 2]))
    assert np.asarray(kept).tolist() == [2, 3, 1, 2]
    assert np.asarray(stopped).tolist() == [True, False, True, True]


@pytest.mark.parametrize("settings,name", [((-1.0, 0, 1.0), "temperature"),
                                           ((1.0, -2, 1.0), "top_k"),
                                           ((1.0, 0, 0.0), "top_p")])
def test_bad_settings_name_the_setting(settings, name):
    with pytest.raises(ValueError, match=name):
        validate_settings(*settings)
