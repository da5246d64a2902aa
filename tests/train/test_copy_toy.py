"""The known-positive induction toy (experiments/copy_toy.py): the tiny preset, trained with
the real objective and optimizer, must learn to copy a repeated random block over a small
vocabulary. A broken attention backward, mask or optimizer leaves the repeat as unpredictable
as the first half (ln 64 = 4.16)."""
import numpy as np
import pytest

from c2jax.train.config import optimizer_config
from configs.models import tiny
from experiments import copy_toy


def test_copy_batch_repeats_its_block():
    batch = copy_toy.copy_batch(np.random.default_rng(0), 3, 5, 100, 10)
    tokens, targets = batch["tokens"], batch["targets"]
    assert tokens.shape == (3, 10)
    np.testing.assert_array_equal(tokens[:, :5], tokens[:, 5:])
    np.testing.assert_array_equal(targets[:, :-1], tokens[:, 1:])
    assert tokens.min() >= 90 and tokens.max() < 100


def test_parse_overrides():
    assert copy_toy.parse_overrides("a=1, b=True,c=x") == {"a": 1, "b": True, "c": "x"}
    assert copy_toy.parse_overrides("") == {}
    with pytest.raises(ValueError, match="FIELD=VALUE"):
        copy_toy.parse_overrides("kv_lora_rank")


def test_tiny_preset_learns_to_copy():
    rows = copy_toy.train_copy_toy(tiny(vocab_size=64, num_mtp_layers=0), optimizer_config(), steps=300,
                                   half=32, batch=32, every=300, log=lambda s: None)
    first, last = rows[0], rows[-1]
    assert abs(first["repeat_nll"] - np.log(64)) < 0.3     # at init: nothing to copy with
    assert last["first_nll"] > np.log(64) - 0.2            # the first half stays random
    assert last["repeat_nll"] < 0.25 * last["first_nll"]
    assert last["copy_accuracy"] > 0.9
