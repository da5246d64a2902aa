"""MoE routing against a loop-based reference, dispatch backends against `dense`, capacity
dropping, aux-loss-free bias updates, routing replay and padding."""
import itertools

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
import pytest

from c2jax.model import model_config, update_router_bias
from c2jax.model import dispatch
from c2jax.model.moe import MoE, route, sequence_aux_loss
from c2jax.parallel.expert import run_experts


def reference_route(cfg, logits, bias):
    """DeepSeek-V3 noaux_tc routing written as plain loops over tokens."""
    ids, weights = [], []
    per_group = cfg.n_routed_experts // cfg.n_group
    for row in logits:
        s = 1.0 / (1.0 + np.exp(-row.astype(np.float64)))
        c = s + bias
        groups = [sorted(c[g * per_group:(g + 1) * per_group])[-2:] for g in range(cfg.n_group)]
        best = sorted(range(cfg.n_group), key=lambda g: -sum(groups[g]))[:cfg.topk_group]
        allowed = [e for e in range(cfg.n_routed_experts) if e // per_group in best]
        top = sorted(allowed, key=lambda e: -c[e])[:cfg.num_experts_per_tok]
        w = s[top] / s[top].sum() * cfg.routed_scaling_factor
        ids.append(sorted(top))
        weights.append(dict(zip(top, w)))
    return ids, weights


def test_group_limited_routing_matches_reference():
    cfg = model_config(n_routed_experts=16, n_group=4, topk_group=2, num_experts_per_tok=3,
                       routed_scaling_factor=2.5)
    rng = np.random.RandomState(0)
    logits = rng.randn(64, 16).astype(np.float32)
    bias = (0.3 * rng.randn(16)).astype(np.float32)
    ids, weights, _ = route(cfg, jnp.asarray(logits), jnp.asarray(bias))
    ref_ids, ref_weights = reference_route(cfg, logits, bias)
    ids, weights = np.asarray(ids), np.asarray(weights)
    for t in range(64):
        assert sorted(ids[t]) == ref_ids[t]
        for e, w in zip(ids[t], weights[t]):
            assert w == pytest.approx(ref_weights[t][e], rel=1e-5)
    # The bias steers selection but never the weights: weights come from pre-bias scores.
    ids_nobias, _, _ = route(cfg, jnp.asarray(logits), jnp.zeros(16))
    assert (np.sort(np.asarray(ids_nobias), -1) != np.sort(ids, -1)).any()


def _expert_inputs(cfg, tokens=48, seed=0):
    rng = np.random.RandomState(seed)
    e, n, f = cfg.hidden_size, cfg.n_routed_experts, cfg.moe_intermediate_size
    x = jnp.asarray(rng.randn(tokens, e).astype(np.float32))
    ids, weights, _ = route(cfg, jnp.asarray(rng.randn(tokens, n).astype(np.float32)),
                            jnp.zeros(n))
    w = [jnp.asarray(0.1 * rng.randn(*shape).astype(np.float32))
         for shape in ((n, e, f), (n, e, f), (n, f, e))]
    return x, ids, weights, w


@pytest.mark.parametrize("backend,tokens,tiers", [("capacity", None, True),
                                                  ("capacity", None, False),
                                                  ("ragged", None, True), ("capacity", 3, True)],
                         ids=["capacity_tiered", "capacity", "ragged", "gathered_few_tokens"])
def test_backends_equal_dense_with_gradients(backend, tokens, tiers):
    base = model_config(capacity_factor=100.0)
    x, ids, weights, (gate, up, down) = _expert_inputs(base)
    if tokens is not None:   # 3 tokens x k=2 < 8 experts: run_experts takes the gathered path
        x, ids, weights = x[:tokens], ids[:tokens], weights[:tokens]
        assert ids.size < gate.shape[0]
    valid = jnp.ones(x.shape[0], bool)

    def loss(backend_name, x, weights, gate, up, down):
        cfg = model_config(moe_dispatch=backend_name, capacity_factor=100.0,
                           capacity_tiers=tiers)
        y, dropped = run_experts(x, ids, weights, valid, gate, up, down, cfg, (1, x.shape[0]))
        return jnp.sum(jnp.sin(y)), dropped

    grad = jax.grad(loss, argnums=(1, 2, 3, 4, 5), has_aux=True)
    ref_g, ref_dropped = jax.jit(grad, static_argnums=0)("dense", x, weights, gate, up, down)
    got_g, dropped = jax.jit(grad, static_argnums=0)(backend, x, weights, gate, up, down)
    assert int(dropped) == int(ref_dropped) == 0
    for a, b in zip(got_g, ref_g):
        np.testing.assert_allclose(np.asarray(a), np.asarray(b), rtol=1e-5, atol=1e-6)
    y_ref = run_experts(x, ids, weights, valid, gate, up, down, model_config(moe_dispatch="dense"),
                        (1, x.shape[0]))[0]
    y = run_experts(x, ids, weights, valid, gate, up, down,
                    model_config(moe_dispatch=backend, capacity_factor=100.0,
                                 capacity_tiers=tiers), (1, x.shape[0]))[0]
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), rtol=1e-5, atol=1e-6)


def test_capacity_tiers_double_from_the_mean_load_up_to_all_tokens():
    assert dispatch.capacity_tiers(48, 2, 8) == [12, 24, 48]
    assert dispatch.capacity_tiers(16, 2, 16) == [2, 4, 8, 16]
    assert dispatch.capacity_tiers(5, 2, 4) == [3, 5]
    assert dispatch.capacity_tiers(4, 2, 2) == [4]


def _routing(kind: str) -> np.ndarray:
    """48 tokens x 2 distinct experts of 8: evenly spread, or expert 0 taking the first choice
    of 20 / all tokens."""
    t = np.arange(48)
    if kind == "balanced":
        return np.stack([t % 8, (t + 1) % 8], axis=1)
    busy = 20 if kind == "busy" else 48
    first = np.where(t < busy, 0, 1 + t % 7)
    second = np.where(first == 0, 1 + t % 7, 1 + (t + 1) % 7)
    return np.stack([first, second], axis=1)


@pytest.mark.parametrize("kind,tier", [("balanced", 12), ("busy", 24), ("all_on_one", 48)])
def test_tiered_dispatch_is_dropless_whatever_the_busiest_expert_holds(kind, tier):
    """48 tokens, k=2, 8 experts: tiers 12 / 24 / 48. The busiest expert's load selects the
    tier; a tier below that load would drop slots and the result would differ from dense."""
    cfg = model_config(capacity_factor=100.0)
    x, _, weights, (gate, up, down) = _expert_inputs(cfg)
    ids = _routing(kind)
    assert (ids[:, 0] != ids[:, 1]).all()
    assert tier // 2 < np.bincount(ids.ravel()).max() <= tier
    ids, valid = jnp.asarray(ids, jnp.int32), jnp.ones(48, bool)
    y_ref = run_experts(x, ids, weights, valid, gate, up, down, model_config(moe_dispatch="dense"),
                        (1, 48))[0]
    y, dropped = jax.jit(lambda *a: run_experts(*a, cfg, (1, 48)))(x, ids, weights, valid, gate,
                                                                     up, down)
    assert int(dropped) == 0
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), rtol=1e-5, atol=1e-6)


def test_capacity_drops_late_choices_first_and_counts_them():
    cfg = model_config(n_routed_experts=4, num_experts_per_tok=2, moe_dispatch="capacity",
                       capacity_factor=1.0)
    tokens = 8
    # Every token picks expert 0 first and expert 1 second: 8 first choices for 4 slots.
    ids = jnp.tile(jnp.asarray([[0, 1]], jnp.int32), (tokens, 1))
    weights = jnp.ones((tokens, 2), jnp.float32)
    x = jnp.asarray(np.random.RandomState(1).randn(tokens, cfg.hidden_size).astype(np.float32))
    _, _, _, (gate, up, down) = _expert_inputs(model_config(n_routed_experts=4), tokens)
    cap = dispatch.capacity_per_expert(tokens, 2, 4, 1.0)
    assert cap == 4
    y, dropped = dispatch.capacity(x, ids, weights, jnp.ones(tokens, bool), gate, up, down, cfg,
                                   num_experts=4)
    assert int(dropped) == 2 * (tokens - cap)
    full = dispatch.expert_ffn(jnp.broadcast_to(x, (4, tokens, x.shape[1])), gate, up, down, cfg)
    expected = np.where(np.arange(tokens)[:, None] < cap, full[0] + full[1], 0.0)
    np.testing.assert_allclose(np.asarray(y), expected, rtol=1e-5, atol=1e-6)


def test_router_bias_update_moves_toward_balance():
    bias = {"a": jnp.zeros((2, 4))}
    load = {"a": jnp.asarray([[10.0, 0.0, 5.0, 5.0], [1.0, 1.0, 1.0, 1.0]])}
    new = update_router_bias(bias, load, 0.1)["a"]
    np.testing.assert_allclose(np.asarray(new), [[-0.1, 0.1, 0.0, 0.0], [0, 0, 0, 0]])


def _moe_vars(cfg, x, seg):
    return nn.unbox(jax.jit(MoE(cfg).init)(jax.random.key(0), x, seg))


def test_replay_reproduces_routing_and_trains_the_router():
    cfg = model_config(moe_dispatch="dense")
    x = jnp.asarray(np.random.RandomState(2).randn(2, 6, cfg.hidden_size).astype(np.float32))
    seg = jnp.ones((2, 6), jnp.int32)
    variables = _moe_vars(cfg, x, seg)
    apply = jax.jit(lambda v, x, r: MoE(cfg).apply(v, x, seg, r))
    y, aux = jax.jit(lambda v, x: MoE(cfg).apply(v, x, seg))(variables, x)
    y_replay, aux_replay = apply(variables, x, aux["ids"])
    np.testing.assert_allclose(np.asarray(y_replay), np.asarray(y), rtol=1e-6)
    other = (aux["ids"] + 1) % cfg.n_routed_experts
    assert not np.allclose(np.asarray(apply(variables, x, other)[0]), np.asarray(y))

    def loss(params):
        out, _ = MoE(cfg).apply({**variables, "params": params}, x, seg, other)
        return jnp.sum(out ** 2)
    router_grad = jax.grad(loss)(variables["params"])["gate"]
    assert float(jnp.abs(router_grad).max()) > 0


def test_padding_tokens_are_not_routed_or_counted():
    cfg = model_config(moe_dispatch="capacity")
    x = jnp.asarray(np.random.RandomState(3).randn(1, 8, cfg.hidden_size).astype(np.float32))
    seg = jnp.asarray([[1, 1, 1, 2, 2, 0, 0, 0]])
    variables = _moe_vars(cfg, x, seg)
    y, aux = jax.jit(lambda v: MoE(cfg).apply(v, x, seg))(variables)
    assert float(aux["load"].sum()) == 5 * cfg.num_experts_per_tok
    shared_only = jax.jit(lambda v: MoE(model_config(n_routed_experts=cfg.n_routed_experts))
                          .apply(v, x, jnp.zeros_like(seg)))(variables)[0]
    np.testing.assert_allclose(np.asarray(y[0, 5:]), np.asarray(shared_only[0, 5:]), atol=1e-6)


def test_sequence_aux_loss_is_one_when_perfectly_balanced():
    cfg = model_config(n_routed_experts=4, n_group=1, topk_group=1, num_experts_per_tok=1)
    ids = jnp.asarray(list(itertools.chain.from_iterable([[e] for e in range(4)] * 2)))[:, None]
    scores = jnp.full((8, 4), 0.5)
    loss = sequence_aux_loss(cfg, ids, scores, jnp.ones(8, bool), batch=2)
    assert float(loss) == pytest.approx(1.0)
    skewed = sequence_aux_loss(cfg, jnp.zeros((8, 1), jnp.int32),
                               jnp.asarray([[0.9, 0.1, 0.1, 0.1]] * 8), jnp.ones(8, bool), 2)
    assert float(skewed) > 1.0
