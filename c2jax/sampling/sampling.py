"""Turning logits into tokens: temperature, top-k, top-p and greedy, with explicit keys.

Every slot of a batch carries its own settings (`SamplingParams`, arrays `[batch]`), so requests
with different settings share one compiled step. Sampling is done in two parts:

  `sampling_logprobs`   logits -> log-probabilities of the distribution a token is drawn from:
                        logits / temperature, then top-k and top-p truncation, renormalised.
                        Temperature 0 is greedy: the distribution is a point mass on the argmax
                        (its log-probability is 0), so speculative decoding needs no special
                        case for it.
  `draw`                one token per row from such a distribution by inverse CDF with one
                        uniform per row (cheaper on CPU than a Gumbel draw over the vocabulary).

Keys: a request's draws depend only on its own seed, the index of the token being drawn and a
stream number (`token_key`), never on its slot or on the other requests in the batch, so a
request samples the same tokens alone or under continuous batching.
"""
from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

_NEG_INF = -jnp.inf


@flax.struct.dataclass
class SamplingParams:
    """Per-slot sampling settings, each `[batch]`.

    temperature float32 (0 = greedy); top_k int32 (0 = no limit); top_p float32 (1 = no limit).
    """
    temperature: jax.Array
    top_k: jax.Array
    top_p: jax.Array

    @classmethod
    def full(cls, batch: int, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0):
        return cls(jnp.full((batch,), temperature, jnp.float32),
                   jnp.full((batch,), top_k, jnp.int32), jnp.full((batch,), top_p, jnp.float32))


def validate_settings(temperature: float, top_k: int, top_p: float) -> None:
    """Raises ValueError naming the setting that is out of range."""
    if not temperature >= 0:
        raise ValueError(f"temperature={temperature} must be >= 0 (0 = greedy)")
    if int(top_k) != top_k or top_k < 0:
        raise ValueError(f"top_k={top_k} must be a non-negative integer (0 = no limit)")
    if not 0 < top_p <= 1:
        raise ValueError(f"top_p={top_p} must be in (0, 1] (1 = no limit)")


def sampling_logprobs(logits, params: SamplingParams):
    """Log-probabilities of the sampling distribution: logits float `[batch, ..., vocab]` ->
    float32 of the same shape (-inf outside the top-k / top-p set; a one-hot log distribution
    at the argmax where temperature is 0)."""
    logits = logits.astype(jnp.float32)
    extra = logits.ndim - 2                      # dims between batch and vocab
    expand = (slice(None),) + (None,) * (extra + 1)
    temperature = params.temperature[expand]
    greedy = temperature <= 0
    scaled = jax.nn.log_softmax(logits / jnp.where(greedy, 1.0, temperature), axis=-1)
    truncating = jnp.any((params.top_k > 0) | (params.top_p < 1))
    # Sorting the vocabulary is the expensive part, so it only runs when some slot asks for it.
    scaled = jax.lax.cond(truncating, _truncate, lambda lp, *_: lp, scaled,
                          params.top_k[expand[:-1]], params.top_p[expand[:-1]])
    argmax = jnp.argmax(logits, axis=-1)
    point_mass = jnp.where(jnp.arange(logits.shape[-1]) == argmax[..., None], 0.0, _NEG_INF)
    return jnp.where(greedy, point_mass, scaled)


def _truncate(logprobs, top_k, top_p):
    """Keeps the top_k most likely tokens and the smallest set whose mass reaches top_p (both
    as limits; ties at the cut stay in), renormalised. top_k / top_p are `[batch, ...]`."""
    vocab = logprobs.shape[-1]
    ordered = -jnp.sort(-logprobs, axis=-1)                              # descending
    mass_before = jnp.cumsum(jnp.exp(ordered), axis=-1) - jnp.exp(ordered)
    keep_p = jnp.sum(mass_before < top_p[..., None], axis=-1)            # >= 1 always
    keep_k = jnp.where(top_k > 0, jnp.minimum(top_k, vocab), vocab)
    keep = jnp.minimum(keep_p, keep_k)
    threshold = jnp.take_along_axis(ordered, (keep - 1)[..., None], axis=-1)
    kept = jnp.where(logprobs >= threshold, logprobs, _NEG_INF)
    return kept - jax.nn.logsumexp(kept, axis=-1, keepdims=True)


def draw(logprobs, uniforms):
    """One token per row by inverse CDF: logprobs `[batch, vocab]`, uniforms in [0, 1)
    `[batch]` -> int32 `[batch]`. Zero-probability tokens are never drawn."""
    cdf = jnp.cumsum(jnp.exp(logprobs), axis=-1)
    target = uniforms[:, None] * cdf[:, -1:]
    index = jnp.sum(cdf <= target, axis=-1)
    return jnp.minimum(index, logprobs.shape[-1] - 1).astype(jnp.int32)


def token_key(seed_keys, token_index, stream: int):
    """The key of draw `stream` for token `token_index` of each row: seed_keys uint32 key data
    `[batch, 2]`, token_index int `[batch]` -> typed keys `[batch]`."""
    def one(key_data, index):
        key = jax.random.wrap_key_data(key_data)
        return jax.random.fold_in(jax.random.fold_in(key, index), stream)
    return jax.vmap(one)(seed_keys, token_index)


def uniforms(keys):
    """One float32 uniform in [0, 1) per key `[batch]`."""
    return jax.vmap(lambda k: jax.random.uniform(k, (), jnp.float32))(keys)


def seed_key_data(seed: int):
    """The uint32 key data `[2]` a request's draws derive from."""
    return jax.random.key_data(jax.random.key(seed))


def sample(logits, params: SamplingParams, seed_keys, token_index, stream: int = 0):
    """Draws one token per row. logits `[batch, vocab]` -> (tokens int32 `[batch]`, their
    log-probability float32 `[batch]` under the sampling distribution)."""
    logprobs = sampling_logprobs(logits, params)
    tokens = draw(logprobs, uniforms(token_key(seed_keys, token_index, stream)))
    return tokens, jnp.take_along_axis(logprobs, tokens[:, None], axis=-1)[:, 0]
