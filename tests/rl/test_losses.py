"""The RL losses against REINFORCE and hand-computed values."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.rl.losses import group_advantages, loss_config, policy_loss, validate_loss_config

SEQS, TOKENS, VOCAB = 3, 6, 5
RNG = np.random.RandomState(0)
THETA = jnp.asarray(RNG.randn(SEQS, TOKENS, VOCAB), jnp.float32)
ACTIONS = jnp.asarray(RNG.randint(0, VOCAB, (SEQS, TOKENS)))
ADV = jnp.asarray([1.0, -0.5, 2.0])
MASK = jnp.asarray([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 1], [0, 1, 1, 0, 1, 1]], jnp.float32)


def logp_of(theta):
    return jnp.take_along_axis(jax.nn.log_softmax(theta), ACTIONS[..., None], -1)[..., 0]


@pytest.mark.parametrize("kind", ["ppo", "gspo", "cispo"])
def test_on_policy_gradient_equals_reinforce(kind):
    cfg = loss_config(kind=kind)
    behaviour = jax.lax.stop_gradient(logp_of(THETA))

    def loss(theta):
        return policy_loss(logp_of(theta), behaviour, behaviour, ADV, MASK, cfg)[0]

    def reinforce(theta):
        return -jnp.sum(ADV[:, None] * logp_of(theta) * MASK) / (SEQS * TOKENS)
    np.testing.assert_allclose(jax.grad(loss)(THETA), jax.grad(reinforce)(THETA), atol=1e-6)


@pytest.mark.parametrize("kind", ["ppo", "gspo", "cispo"])
def test_masked_tool_tokens_get_zero_gradient(kind):
    behaviour = logp_of(THETA) - 0.1
    g = jax.grad(lambda lp: policy_loss(lp, behaviour, behaviour + 0.05, ADV, MASK,
                                        loss_config(kind=kind))[0])(logp_of(THETA))
    assert np.all(np.asarray(g)[np.asarray(MASK) == 0] == 0)
    assert np.any(np.asarray(g)[np.asarray(MASK) == 1] != 0)


def test_token_weight_does_not_depend_on_sequence_length():
    # Two sequences with the same advantage: 2 tokens vs 6 tokens. Per-token gradients match.
    lp = jnp.zeros((2, 6)) - 1.0
    mask = jnp.asarray([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]], jnp.float32)
    g = jax.grad(lambda x: policy_loss(x, lp, lp, jnp.ones(2), mask, loss_config())[0])(lp)
    np.testing.assert_allclose(g[0, :2], g[1, :2])
    # and appending masked padding to the batch does not change it (fixed max_tokens)
    padded = jnp.pad(lp, ((0, 0), (0, 4)), constant_values=-1.0)
    cfg = loss_config(max_tokens=6)
    g_pad = jax.grad(lambda x: policy_loss(x, padded, padded, jnp.ones(2),
                                           jnp.pad(mask, ((0, 0), (0, 4))), cfg)[0])(padded)
    np.testing.assert_allclose(g_pad[:, :6], g)


@pytest.mark.parametrize("kind", ["ppo", "gspo", "cispo"])
def test_gradients_stay_finite_at_extreme_ratios(kind):
    lp = logp_of(THETA)
    behaviour = lp + jnp.asarray([[60.0], [-60.0], [0.0]])
    proximal = lp - jnp.asarray([[40.0], [-40.0], [0.0]])
    loss, g = jax.value_and_grad(lambda t: policy_loss(logp_of(t), behaviour, proximal, ADV,
                                                       MASK, loss_config(kind=kind))[0])(THETA)
    assert np.isfinite(float(loss)) and np.all(np.isfinite(np.asarray(g)))


def test_outlier_sequences_are_masked_and_is_weights_truncated():
    lp = logp_of(THETA)
    behaviour = lp - jnp.asarray([[0.0], [3.0], [0.1]])   # rho = 1, e^3, e^0.1
    cfg = loss_config(tis_cap=1.05)
    g = jax.grad(lambda x: policy_loss(x, behaviour, lp, ADV, MASK, cfg)[0])(lp)
    assert np.all(np.asarray(g)[1] == 0)                       # sequence 1 masked
    _, metrics = policy_loss(lp, behaviour, lp, ADV, MASK, cfg)
    assert float(metrics["masked_sequence_fraction"]) == pytest.approx(1 / 3)
    # sequence 2 has rho = e^0.1 > cap: its weight is the cap 1.05, not 1.105
    per_token = np.asarray(g)[2][np.asarray(MASK)[2] == 1]
    np.testing.assert_allclose(per_token, -1.05 * 2.0 / (SEQS * TOKENS), rtol=1e-5)


def test_advantages_by_hand():
    r = jnp.asarray([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0]])
    np.testing.assert_allclose(group_advantages(r, "mean"), [[0.5, -0.5, -0.5, 0.5], [0, 0, 0, 0]])
    # RLOO: r_i - mean of the other three
    np.testing.assert_allclose(group_advantages(r, "rloo")[0], [1 - 1 / 3, -2 / 3, -2 / 3, 2 / 3],
                               rtol=1e-6)
    np.testing.assert_allclose(group_advantages(jnp.asarray([[3.0]])), [[0.0]])


def test_bad_loss_config_is_named():
    with pytest.raises(ValueError, match="kind"):
        validate_loss_config(loss_config(kind="dpo"))
    with pytest.raises(KeyError):
        loss_config(epsilon=0.1)
