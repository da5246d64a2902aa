"""Learner batches and updates (c2jax/rl/learner.py) against direct computations."""
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from c2jax.rl.learner import Learner, make_batch
from c2jax.rl.losses import loss_config, policy_loss
from c2jax.rl.rollout import RolloutSettings, run_episode
from c2jax.sampling.engine import inference_config
from c2jax.train.state import TrainState
from tests.rl.toy_envs import DigitsEnv, toy_tasks


def episodes(server, template, count=3, temperature=1.0):
    tasks = toy_tasks(count, max_steps=2)
    settings = RolloutSettings(max_len=256, max_new_tokens=10, temperature=temperature)
    return [run_episode(DigitsEnv(), server, template, t, seed=i, group_id=0, sample=i,
                        settings=settings) for i, t in enumerate(tasks)]


def fresh_state(variables, tx):
    """A state over copies of `variables` (the update donates its input)."""
    params = jax.tree.map(jnp.copy, variables["params"])
    return TrainState(step=jnp.zeros((), jnp.int32), params=params, opt_state=tx.init(params),
                      router_bias=jax.tree.map(jnp.copy, variables["router_bias"]),
                      rng=jnp.zeros((2,), jnp.uint32))


def test_rows_are_shifted_segments_padded_to_a_power_of_two(server, template):
    eps = episodes(server, template)
    batch = make_batch(eps, [1.0, -1.0, 0.0], seq_len=256, microbatch_rows=1, moe_layers=1, k=2)
    assert batch["inputs"].shape == (4, 1, 256)          # 3 segments -> 4 microbatches of 1
    assert batch["normaliser"] == 3 * 256
    for r, ep in enumerate(eps):
        seg = ep.segments[0]
        n = len(seg) - 1
        row = {k: v[r, 0] for k, v in batch.items() if k not in ("normaliser", "routing")}
        assert row["inputs"][:n].tolist() == seg.tokens[:-1].tolist()
        assert row["targets"][:n].tolist() == seg.tokens[1:].tolist()
        assert row["loss_mask"][:n].tolist() == seg.loss_mask[1:].tolist()
        assert row["loss_mask"][n:].sum() == 0 and row["segment_ids"][n:].sum() == 0
        np.testing.assert_array_equal(row["behaviour_logp"][:n], seg.logprobs[1:])
        np.testing.assert_array_equal(batch["routing"][r, :, 0, :n], seg.routing[:-1]
                                      .transpose(1, 0, 2))
    assert batch["advantages"][:, 0].tolist() == [1.0, -1.0, 0.0, 0.0]
    assert batch["loss_mask"][3].sum() == 0                # the padding row trains nothing


def test_update_equals_the_full_batch_gradient_whatever_the_microbatching(server, template,
                                                                          policy):
    cfg, variables = policy
    frozen = inference_config(cfg)
    eps = episodes(server, template, count=4)
    adv = [1.0, -0.5, 0.25, -0.75]
    tx = optax.sgd(0.1)
    results = []
    for rows in (1, 4):
        batch = make_batch(eps, adv, seq_len=256, microbatch_rows=rows, moe_layers=1, k=2)
        learner = Learner(frozen, loss_config(), tx, replay=True)
        state, metrics = learner.update(fresh_state(variables, tx), batch)
        results.append((state.params, metrics))
    for a, b in zip(jax.tree.leaves(results[0][0]), jax.tree.leaves(results[1][0])):
        np.testing.assert_allclose(a, b, atol=1e-6)

    # ... and equals one policy_loss over all rows at once (learner.token_logprobs aside).
    batch = make_batch(eps, adv, seq_len=256, microbatch_rows=4, moe_layers=1, k=2)
    flat = {k: jnp.asarray(v[0]) for k, v in batch.items() if k != "normaliser"}

    def direct(params):
        from c2jax.rl.learner import token_logprobs
        logp, _ = token_logprobs({"params": params, "router_bias": variables["router_bias"]},
                                 flat, frozen, True)
        return policy_loss(logp, flat["behaviour_logp"], None, flat["advantages"],
                           flat["loss_mask"], loss_config(), normaliser=4 * 256)[0]

    grads = jax.grad(direct)(variables["params"])
    expected = jax.tree.map(lambda p, g: p - 0.1 * g, variables["params"], grads)
    for a, b in zip(jax.tree.leaves(results[1][0]), jax.tree.leaves(expected)):
        np.testing.assert_allclose(a, b, atol=1e-6)
    # The first sampled token of a segment is a target too, so every sampled token trains.
    assert results[1][1]["trained_tokens"] == sum(e.sampled_tokens for e in eps)


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_replayed_routing_reproduces_the_actor_logprobs(server, template, policy, temperature):
    """At any sampling temperature: the learner scores softmax(logits / T), as actors sample."""
    cfg, variables = policy
    eps = episodes(server, template, temperature=temperature)
    batch = make_batch(eps, [0.0] * 3, seq_len=256, microbatch_rows=4, moe_layers=1, k=2)
    learner = Learner(inference_config(cfg), loss_config(), optax.sgd(0.0), replay=True,
                      temperature=temperature)
    logp = np.asarray(learner.logprobs(variables, jax.tree.map(jnp.asarray, batch)))
    mask = batch["loss_mask"] > 0
    np.testing.assert_allclose(logp[mask], batch["behaviour_logp"][mask], atol=2e-4)


def test_matched_mismatch_kl_scores_each_token_under_its_own_version(server, template, policy):
    """Version 0 sampled every token; the batch claims row 0's tokens came from version 1,
    published here as perturbed params: the matched KL must be the k3 KL of exactly that
    selection, and zero (fp32, replay) when every version maps to the sampling params."""
    cfg, variables = policy
    eps = episodes(server, template)
    batch = make_batch(eps, [0.0] * 3, seq_len=256, microbatch_rows=4, moe_layers=1, k=2)
    learner = Learner(inference_config(cfg), loss_config(), optax.sgd(0.0), replay=True)
    mask = batch["loss_mask"] > 0
    assert set(np.unique(batch["versions"][mask])) == {0}

    same = learner.matched_mismatch_kl({0: variables}, batch)
    assert same["matched_token_fraction"] == 1.0
    assert 0.0 <= same["mismatch_kl_matched"] < 1e-6

    perturbed = {"params": jax.tree.map(lambda p: p * 1.5, variables["params"]),
                 "router_bias": variables["router_bias"]}
    batch["versions"][:, 0] = np.where(mask[:, 0], 1, batch["versions"][:, 0])
    got = learner.matched_mismatch_kl({0: variables, 1: perturbed}, batch)
    placed = jax.tree.map(jnp.asarray, batch)
    by_version = {v: np.asarray(learner.logprobs(p, placed))
                  for v, p in ((0, variables), (1, perturbed))}
    logp = np.where(batch["versions"] == 1, by_version[1], by_version[0])
    log_rho = (logp - batch["behaviour_logp"])[mask].astype(np.float64)
    want = np.mean(np.exp(-log_rho) - 1.0 + log_rho)
    assert got["matched_token_fraction"] == 1.0
    assert want > 1e-3
    np.testing.assert_allclose(got["mismatch_kl_matched"], want, rtol=1e-5)

    row0 = mask[:, 0].sum() / mask.sum()
    missing = learner.matched_mismatch_kl({0: variables}, batch)
    np.testing.assert_allclose(missing["matched_token_fraction"], 1.0 - row0)
    assert missing["mismatch_kl_matched"] < 1e-6

    # A row whose tokens span two versions (a swap mid-segment) is left out.
    trained = np.flatnonzero(mask[0, 1])
    batch["versions"][0, 1, trained[len(trained) // 2:]] = 1
    mixed = learner.matched_mismatch_kl({0: variables, 1: perturbed}, batch)
    np.testing.assert_allclose(mixed["matched_token_fraction"],
                               1.0 - mask[:, 1].sum() / mask.sum())
