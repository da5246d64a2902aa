"""Fixtures for the sampler tests: the tiny model (with one MTP module) and a reference
generator that recomputes the whole sequence with the training forward at every token."""
import jax
import numpy as np
import pytest

from c2jax.model import apply, init, model_config
from c2jax.sampling import sampler_config
from c2jax.sampling.engine import inference_config


@pytest.fixture(scope="package")
def cfg():
    return model_config()


@pytest.fixture(scope="package")
def variables(cfg):
    return init(cfg, jax.random.key(0))


@pytest.fixture(scope="package")
def other_variables(cfg):
    return init(cfg, jax.random.key(1))


def small_config(**overrides):
    fields = dict(slots=4, max_len=64, min_bucket=8, steps_per_call=3)
    fields.update(overrides)
    return sampler_config(**fields)


_FORWARDS = {}
#: Reference sequences are padded to this length (causal attention: padding after a position
#: cannot change it), so the reference compiles once.
REFERENCE_LEN = 64


def reference_logits(cfg, variables, tokens):
    """Training-forward logits float32 `[len(tokens), vocab]` and routing
    `[moe_layers, len(tokens), k]` of one sequence: no cache involved. The config is the
    sampler's (`inference_config`: dropless MoE capacity), so both route identically."""
    frozen = inference_config(cfg)
    if frozen not in _FORWARDS:
        _FORWARDS[frozen] = jax.jit(lambda v, t, s: apply(v, t, s, cfg=frozen))
    n = len(tokens)
    padded = np.zeros((1, REFERENCE_LEN), np.int32)
    padded[0, :n] = tokens
    segments = (np.arange(REFERENCE_LEN) < n).astype(np.int32)[None]
    logits, aux = _FORWARDS[frozen](variables, padded, segments)
    return np.asarray(logits[0, :n]), np.asarray(aux["routing"][:, 0, :n])


def reference_greedy(cfg, variables, prompt, n):
    tokens = list(prompt)
    for _ in range(n):
        logits, _ = reference_logits(cfg, variables, tokens)
        tokens.append(int(np.argmax(logits[-1])))
    return tokens[len(prompt):]


@pytest.fixture(scope="package")
def tokenizer():
    """A real byte-level BPE (with the chat special tokens) on a few stdlib files."""
    from c2jax.data import corpus
    from c2jax.data.tokenizer import train_tokenizer
    files = [corpus.stdlib_dir() / name for name in ("shlex.py", "getopt.py", "heapq.py")]
    return train_tokenizer((corpus.read_source_text(p) for p in files), 320)


@pytest.fixture(scope="package")
def chat_model(tokenizer):
    """(cfg, variables) of a tiny model over the tokenizer's vocabulary."""
    cfg = model_config(vocab_size=tokenizer.vocab_size, max_position_embeddings=2048)
    return cfg, init(cfg, jax.random.key(3))
