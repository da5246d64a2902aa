"""Fixtures for the RL tests: a real small BPE, a tiny model over it saved as a model
directory (what `config.init_from` points at), and rollout plumbing over the toy envs."""
import jax
import pytest

from c2jax.checkpoint.model_dir import save_model
from c2jax.data import corpus
from c2jax.data.chat import ChatTemplate
from c2jax.data.tokenizer import save_tokenizer, train_tokenizer
from c2jax.model import init, model_config
from c2jax.sampling import Engine, GenerationServer, sampler_config


@pytest.fixture(scope="package")
def tokenizer():
    files = [corpus.stdlib_dir() / name for name in ("shlex.py", "getopt.py", "heapq.py")]
    return train_tokenizer((corpus.read_source_text(p) for p in files), 320)


@pytest.fixture(scope="package")
def policy(tokenizer):
    """(cfg, variables) of a tiny MoE over the tokenizer's vocabulary."""
    cfg = model_config(vocab_size=tokenizer.vocab_size, max_position_embeddings=2048)
    return cfg, init(cfg, jax.random.key(0))


@pytest.fixture(scope="package")
def policy_dir(tmp_path_factory, policy, tokenizer):
    cfg, variables = policy
    path = tmp_path_factory.mktemp("policy") / "model"
    save_model(str(path), cfg, variables)
    save_tokenizer(tokenizer, path)
    return path


@pytest.fixture
def server(policy, tokenizer):
    cfg, variables = policy
    with GenerationServer(Engine(cfg, variables, tokenizer=tokenizer, config=sampler_config(
            slots=4, max_len=256, min_bucket=16, steps_per_call=4))) as s:
        yield s


@pytest.fixture(scope="package")
def template(tokenizer):
    return ChatTemplate(tokenizer)
