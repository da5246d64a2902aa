"""Whole-model behaviour: causality, document masking in packed rows, MTP inputs, remat,
bf16, and the router-load tree that feeds the bias update."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.model import apply, init, model_config, update_router_bias
from c2jax.model.mtp import mtp_targets, shift_within_segment

CFG = model_config(moe_dispatch="dense", num_mtp_layers=1)
VARS = None


def _vars():
    global VARS
    if VARS is None:
        VARS = init(CFG, jax.random.key(0))
    return VARS


def _run(tokens, segment_ids=None, positions=None, cfg=CFG, variables=None):
    fn = jax.jit(lambda v, t, s, p: apply(v, t, s, p, cfg=cfg))
    return fn(variables or _vars(), jnp.asarray(tokens), segment_ids, positions)


def test_future_tokens_do_not_change_past_logits():
    tokens = np.random.RandomState(0).randint(1, CFG.vocab_size, (1, 12))
    changed = tokens.copy()
    changed[0, 8] = (changed[0, 8] + 1) % CFG.vocab_size
    a, aux_a = _run(tokens)
    b, aux_b = _run(changed)
    np.testing.assert_array_equal(np.asarray(a[0, :8]), np.asarray(b[0, :8]))
    assert not np.allclose(np.asarray(a[0, 8:]), np.asarray(b[0, 8:]))
    # MTP at position i reads token i+1, so position 7 changes but 0..6 do not.
    np.testing.assert_array_equal(np.asarray(aux_a["mtp_logits"][0, 0, :7]),
                                  np.asarray(aux_b["mtp_logits"][0, 0, :7]))
    assert not np.allclose(np.asarray(aux_a["mtp_logits"][0, 0, 7]),
                           np.asarray(aux_b["mtp_logits"][0, 0, 7]))


def test_packed_documents_equal_separate_rows():
    rng = np.random.RandomState(1)
    doc_a, doc_b = rng.randint(1, CFG.vocab_size, 7), rng.randint(1, CFG.vocab_size, 5)
    packed = np.concatenate([doc_a, doc_b])[None]
    segments = np.asarray([[1] * 7 + [2] * 5])
    positions = np.asarray([list(range(7)) + list(range(5))])
    logits, aux = _run(packed, jnp.asarray(segments), jnp.asarray(positions))
    alone_a, aux_a = _run(doc_a[None])
    alone_b, aux_b = _run(doc_b[None])
    np.testing.assert_allclose(np.asarray(logits[0, :7]), np.asarray(alone_a[0]), atol=2e-5)
    np.testing.assert_allclose(np.asarray(logits[0, 7:]), np.asarray(alone_b[0]), atol=2e-5)
    # MTP never reads across the document boundary either.
    np.testing.assert_allclose(np.asarray(aux["mtp_logits"][0, 0, :7]),
                               np.asarray(aux_a["mtp_logits"][0, 0]), atol=2e-5)


def test_shift_within_segment_and_mtp_targets():
    tokens = jnp.asarray([[5, 6, 7, 8, 9, 10]])
    seg = jnp.asarray([[1, 1, 1, 2, 2, 0]])
    shifted, ok = shift_within_segment(tokens, seg, 1)
    np.testing.assert_array_equal(np.asarray(shifted), [[6, 7, 0, 9, 0, 0]])
    np.testing.assert_array_equal(np.asarray(ok), [[1, 1, 0, 1, 0, 0]])
    targets, mask = mtp_targets(tokens, seg, depth=1)
    np.testing.assert_array_equal(np.asarray(targets), [[7, 0, 0, 0, 0, 0]])
    np.testing.assert_array_equal(np.asarray(mask), [[1, 0, 0, 0, 0, 0]])


def _loss_and_grads(cfg, variables, tokens):
    def loss(params):
        logits, aux = apply({**variables, "params": params}, tokens, cfg=cfg)
        return jnp.mean(jax.nn.log_softmax(logits)[..., 0]) + jnp.mean(aux["mtp_logits"] ** 2)
    return jax.jit(jax.value_and_grad(loss))(variables["params"])


@pytest.mark.parametrize("policy", ["full", "dots"])
def test_remat_gives_identical_gradients(policy):
    tokens = jnp.asarray(np.random.RandomState(2).randint(0, CFG.vocab_size, (2, 8)))
    ref = _loss_and_grads(CFG, _vars(), tokens)
    got = _loss_and_grads(model_config(moe_dispatch="dense", num_mtp_layers=1,
                                       remat_policy=policy), _vars(), tokens)
    for a, b in zip(jax.tree.leaves(got), jax.tree.leaves(ref)):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-7)


def test_bf16_compute_is_close_to_fp32():
    tokens = np.random.RandomState(3).randint(0, CFG.vocab_size, (2, 10))
    ref, _ = _run(tokens)
    bf16 = model_config(moe_dispatch="dense", num_mtp_layers=1, dtype="bfloat16")
    got, _ = _run(tokens, cfg=bf16)
    assert got.dtype == jnp.float32
    assert float(jnp.abs(got - ref).max()) < 0.05 * float(jnp.abs(ref).max()) + 1e-2


def test_float32_head_under_bf16_compute_is_closer_to_fp32():
    """head_dtype=float32 removes the output head's (and final norm's) bf16 rounding: over
    every logit, the error against the float32 model shrinks."""
    tokens = np.random.RandomState(4).randint(0, CFG.vocab_size, (2, 16))
    ref, _ = _run(tokens)
    errors = {}
    for head in ("", "float32"):
        cfg = model_config(moe_dispatch="dense", num_mtp_layers=1, dtype="bfloat16",
                           head_dtype=head)
        got, aux = _run(tokens, cfg=cfg)
        assert got.dtype == aux["mtp_logits"].dtype == jnp.float32
        errors[head] = float(jnp.mean(jnp.abs(got - ref)))
    assert errors["float32"] < 0.95 * errors[""], errors


def test_router_load_matches_bias_tree_and_updates_it():
    tokens = np.random.RandomState(4).randint(0, CFG.vocab_size, (2, 10))
    _, aux = _run(tokens)
    bias = _vars()["router_bias"]
    assert jax.tree.structure(aux["router_load"]) == jax.tree.structure(bias)
    for load, b in zip(jax.tree.leaves(aux["router_load"]), jax.tree.leaves(bias)):
        assert load.shape == b.shape
        assert float(load.sum(-1).min()) == 2 * 10 * CFG.num_experts_per_tok
    new = update_router_bias(bias, aux["router_load"], 0.01)
    moved = [np.abs(np.asarray(n - b)).max() for n, b in zip(jax.tree.leaves(new),
                                                             jax.tree.leaves(bias))]
    assert all(m == pytest.approx(0.01) for m in moved)
