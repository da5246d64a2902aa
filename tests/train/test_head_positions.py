"""The LM head at the loss positions only (`train.head_fraction`): the positions against a
direct loop, the objective and its gradient against the full-width head, and the loop's
fallback to the full-width step when a row needs more positions."""
import jax
import numpy as np
import pytest

from c2jax.model import init, model_config
from c2jax.train import head_positions, losses
from c2jax.train.config import loss_config


def _sft_mask(rng, rows=2, seq=24):
    """Assistant-like spans of trained tokens between untrained ones."""
    mask = np.zeros((rows, seq), np.float32)
    for r in range(rows):
        for start in rng.choice(seq - 4, 2, replace=False):
            mask[r, start:start + rng.randint(1, 4)] = 1.0
    return mask


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_positions_are_exactly_those_with_a_loss_at_some_depth(depth):
    mask = _sft_mask(np.random.RandomState(depth))
    got = head_positions.head_positions(mask, depth, 24)
    assert got is not None
    positions, valid = got
    for r in range(mask.shape[0]):
        want = [i for i in range(24)
                if any(i + k < 24 and mask[r, i + k] for k in range(depth + 1))]
        n = int(valid[r].sum())
        assert positions[r, :n].tolist() == want
        assert valid[r, n:].sum() == 0 and (positions[r, n:] == 0).all()
    tight = max(int(head_positions.needed(mask, depth)[r].sum()) for r in range(2))
    assert head_positions.head_positions(mask, depth, tight) is not None
    assert head_positions.head_positions(mask, depth, tight - 1) is None
    assert head_positions.width(24, 0.25) == 6 and head_positions.width(24, 1e-9) == 1


def test_objective_and_gradient_equal_the_full_width_head():
    cfg = model_config(num_mtp_layers=2, capacity_factor=100.0)
    variables = init(cfg, jax.random.key(0))
    loss_cfg = loss_config(mtp_weight=0.3, z_loss_weight=1e-2)
    rng = np.random.RandomState(7)
    tokens = rng.randint(1, cfg.vocab_size, (2, 25)).astype(np.int32)
    segment_ids = np.ones((2, 24), np.int32)
    segment_ids[0, 15:] = 2                       # two packed documents in row 0
    positions = np.arange(24, dtype=np.int32)[None].repeat(2, 0)
    positions[0, 15:] -= 15
    batch = {"tokens": tokens[:, :-1], "targets": tokens[:, 1:], "loss_mask": _sft_mask(rng),
             "segment_ids": segment_ids, "positions": positions}
    heads = head_positions.head_positions(batch["loss_mask"], cfg.num_mtp_layers, 16)
    sparse = {**batch, **dict(zip(head_positions.KEYS, heads))}
    assert heads[1].sum(axis=1).max() < 24        # the head really skips positions

    def objective(params, b):
        return losses.training_objective(params, variables["router_bias"], b, cfg, loss_cfg)

    grad = jax.jit(jax.value_and_grad(objective, has_aux=True))
    (full_value, (full_terms, _)), full_grads = grad(variables["params"], batch)
    (value, (terms, _)), grads = grad(variables["params"], sparse)
    for name in ("loss", "mtp_loss_1", "mtp_loss_2", "z_loss", "loss_tokens"):
        np.testing.assert_allclose(terms[name], full_terms[name], rtol=1e-5, err_msg=name)
    np.testing.assert_allclose(value, full_value, rtol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=2e-4, atol=1e-7),
                 grads, full_grads)
