"""The objective's terms against direct references: CE and z-loss vs numpy, MTP targets vs a
per-position loop over packed documents, and the SFT mask (only masked-in targets count)."""
import jax
import numpy as np
import pytest

from c2jax.model import apply, init, model_config
from c2jax.train import losses
from c2jax.train.config import loss_config

RNG = np.random.RandomState(0)


def test_token_losses_match_numpy():
    logits = RNG.randn(2, 5, 11).astype(np.float32) * 3
    targets = RNG.randint(0, 11, (2, 5))
    ce, lse = jax.jit(losses.token_losses)(logits, targets)
    ref_lse = np.log(np.exp(logits.astype(np.float64)).sum(-1))
    ref_ce = ref_lse - np.take_along_axis(logits, targets[..., None], -1)[..., 0]
    np.testing.assert_allclose(ce, ref_ce, rtol=1e-5)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5)


def _packed_batch():
    """Two rows; row 0 holds documents of 4 and 3 tokens then padding; row 1 one document."""
    segment_ids = np.array([[1, 1, 1, 1, 2, 2, 2, 0], [1, 1, 1, 1, 1, 1, 1, 1]], np.int32)
    targets = np.arange(100, 116, dtype=np.int32).reshape(2, 8) * (segment_ids > 0)
    loss_mask = (segment_ids > 0).astype(np.float32)
    loss_mask[1, 5] = 0.0                       # e.g. a user token in a conversation
    return {"targets": targets, "segment_ids": segment_ids, "loss_mask": loss_mask}


@pytest.mark.parametrize("depth", [1, 2])
def test_mtp_targets_stay_in_document_and_respect_the_mask(depth):
    batch = _packed_batch()
    targets, mask = jax.jit(losses.mtp_targets, static_argnums=1)(batch, depth)
    seg = batch["segment_ids"]
    for b in range(2):
        for i in range(8):
            j = i + depth
            same_doc = j < 8 and seg[b, i] != 0 and seg[b, j] == seg[b, i]
            want_mask = batch["loss_mask"][b, j] if same_doc else 0.0
            assert mask[b, i] == want_mask, (b, i)
            if same_doc:
                assert targets[b, i] == batch["targets"][b, j], (b, i)


@pytest.fixture(scope="module")
def tiny_model():
    cfg = model_config(num_mtp_layers=2, capacity_factor=100.0)
    return cfg, init(cfg, jax.random.key(0))


def _lm_batch(cfg, loss_mask):
    tokens = RNG.randint(1, cfg.vocab_size, (2, 17)).astype(np.int32)
    return {"tokens": tokens[:, :-1], "targets": tokens[:, 1:],
            "loss_mask": loss_mask.astype(np.float32),
            "segment_ids": np.ones((2, 16), np.int32),
            "positions": np.tile(np.arange(16, dtype=np.int32), (2, 1))}


def test_objective_is_the_weighted_sum_and_sft_mask_selects_targets(tiny_model):
    cfg, variables = tiny_model
    loss_cfg = loss_config(mtp_weight=0.3, z_loss_weight=1e-2)
    objective = jax.jit(lambda b: losses.training_objective(
        variables["params"], variables["router_bias"], b, cfg, loss_cfg))
    mask = np.zeros((2, 16))
    mask[:, 6:12] = 1.0                          # "assistant" tokens only
    batch = _lm_batch(cfg, mask)
    value, (terms, _) = objective(batch)
    expected = (terms["loss"] + 0.3 / 2 * (terms["mtp_loss_1"] + terms["mtp_loss_2"])
                + 1e-2 * terms["z_loss"] + terms["aux_loss"])
    assert float(value) == pytest.approx(float(expected), rel=1e-6)
    assert float(terms["loss_tokens"]) == mask.sum()

    # The CE is the mean over masked-in targets of the full-model CE at those positions.
    logits, _ = jax.jit(lambda t: apply(variables, t, cfg=cfg))(
        batch["tokens"])
    ce, _ = losses.token_losses(logits, batch["targets"])
    assert float(terms["loss"]) == pytest.approx(float(np.asarray(ce)[mask > 0].mean()),
                                                 rel=1e-5)

    # Targets outside the mask do not matter; one inside does.
    outside = dict(batch, targets=batch["targets"].copy())
    outside["targets"][:, :6] = (outside["targets"][:, :6] + 1) % cfg.vocab_size
    assert float(objective(outside)[1][0]["loss"]) == float(terms["loss"])
    inside = dict(batch, targets=batch["targets"].copy())
    inside["targets"][0, 8] = (inside["targets"][0, 8] + 1) % cfg.vocab_size
    assert float(objective(inside)[1][0]["loss"]) != float(terms["loss"])
