"""The copy toy (experiments/copy_toy.py). With fixed blocks it is a known positive: the tiny
preset, trained with the real objective and optimizer, must learn to copy a block repeated a
fixed distance back over a small vocabulary (a positional head suffices). A broken attention
backward, mask or optimizer leaves the repeat as unpredictable as the first copy (ln 64)."""
import jax
import numpy as np
import pytest

from c2jax.model import init
from c2jax.train.config import optimizer_config
from c2jax.train.copy_probe import copy_probe
from configs.models import tiny
from experiments import copy_toy


def test_copy_batch_repeats_its_block():
    batch = copy_toy.copy_batch(np.random.default_rng(0), 3, 5, 100, 10)
    tokens, targets = batch["tokens"], batch["targets"]
    assert tokens.shape == (3, 10)
    np.testing.assert_array_equal(tokens[:, :5], tokens[:, 5:])
    np.testing.assert_array_equal(targets[:, :-1], tokens[:, 1:])
    assert tokens.min() >= 90 and tokens.max() < 100
    assert batch["repeat"][:, 5:9].all() and batch["repeat"].sum() == 3 * 4


def test_varied_blocks_mark_exactly_their_repeat():
    batch = copy_toy.copy_batch(np.random.default_rng(1), 64, 12, 1000, 0, min_half=3)
    lengths = batch["repeat"].sum(axis=1) + 1
    assert set(lengths) == set(range(3, 13))
    for tokens, targets, repeat, n in zip(batch["tokens"], batch["targets"], batch["repeat"],
                                          lengths):
        np.testing.assert_array_equal(tokens[n:2 * n], tokens[:n])
        np.testing.assert_array_equal(targets[repeat], tokens[1:n])


def test_parse_overrides():
    assert copy_toy.parse_overrides("a=1, b=True,c=x") == {"a": 1, "b": True, "c": "x"}
    assert copy_toy.parse_overrides("") == {}
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        copy_toy.parse_overrides("kv_lora_rank")


def test_tiny_preset_learns_to_copy():
    """...and the copy probe (c2jax/train/copy_probe.py) sees the same: ~0 at init, the toy's
    accuracy on 32-id blocks after it. The toy's copy is positional (fixed blocks), so the probe
    at another distance stays low: the probe measures copying at each distance separately."""
    cfg = tiny(vocab_size=64, num_mtp_layers=0)
    rows, trained = copy_toy.train_copy_toy(cfg, optimizer_config(), steps=300, half=32,
                                            batch=32, every=300, log=lambda s: None)
    first, last = rows[0], rows[-1]
    assert abs(first["repeat_nll"] - np.log(64)) < 0.3     # at init: nothing to copy with
    assert last["first_nll"] > np.log(64) - 0.2            # the first half stays random
    assert last["repeat_nll"] < 0.25 * last["first_nll"]
    assert last["copy_accuracy"] > 0.9
    probe = dict(first_id=0, blocks=(32, 20), rows=16)
    before = copy_probe(cfg, init(cfg, jax.random.key(0)), **probe)
    after = copy_probe(cfg, trained, **probe)
    assert before["random_32"] < 0.1 and after["random_32"] > 0.9
    assert after["random_20"] < 0.5
