"""The DeepSeek-V3 MoE layer: router with group-limited top-k and aux-loss-free bias, routed and
shared experts (DeepSeek-V3 report sec. 2.1.2, eq. 12-16).

Routing, for token t with router logits l = x W_gate (float32):
  s = sigmoid(l)  (or softmax(l))                       affinities, `[tokens, experts]`
  c = s + b                                             b: `e_score_correction_bias`, selection only
  group score = sum of the top-2 of c in each group; keep the `topk_group` best groups and set
  the other groups' c to -inf (not 0: vLLM #13474)
  ids = top_k(c, k); weights = s[ids]  (pre-bias, so the bias never leaks into the output,
  transformers #41647), / sum(weights) if norm_topk_prob, * routed_scaling_factor.

The bias b is float32, lives in the `router_bias` collection (never touched by the optimizer)
and is moved after each step by `update_router_bias`: b += rate * sign(mean_load - load).

Routing replay (RL): given the expert ids an actor used, selection is skipped and the weights
are recomputed from the current router over those ids, so the router still gets gradients.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn

from c2jax.model.layers import SwiGLU, make_param
from c2jax.parallel.expert import run_experts


def route(cfg, router_logits, bias, replay_ids=None):
    """Selects experts. router_logits float32 `[tokens, experts]`, bias `[experts]`,
    replay_ids optional int `[tokens, k]`. Returns (ids int32 `[tokens, k]`,
    weights float32 `[tokens, k]`, affinities float32 `[tokens, experts]`)."""
    num_experts, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    logits = router_logits.astype(jnp.float32)
    if cfg.scoring_func == "sigmoid":
        scores = jax.nn.sigmoid(logits)
    else:
        scores = jax.nn.softmax(logits, axis=-1)
    if replay_ids is None:
        choice = scores + bias.astype(jnp.float32)
        if cfg.n_group > 1:
            tokens = choice.shape[0]
            grouped = choice.reshape(tokens, cfg.n_group, num_experts // cfg.n_group)
            group_scores = jax.lax.top_k(grouped, 2)[0].sum(-1)              # [tokens, groups]
            _, best_groups = jax.lax.top_k(group_scores, cfg.topk_group)
            group_mask = jax.nn.one_hot(best_groups, cfg.n_group, dtype=jnp.bool_).any(1)
            expert_mask = jnp.repeat(group_mask, num_experts // cfg.n_group, axis=1)
            choice = jnp.where(expert_mask, choice, -jnp.inf)
        _, ids = jax.lax.top_k(choice, k)
    else:
        ids = replay_ids
    ids = jax.lax.stop_gradient(ids).astype(jnp.int32)
    weights = jnp.take_along_axis(scores, ids, axis=-1)
    if cfg.norm_topk_prob:
        weights = weights / (jnp.sum(weights, axis=-1, keepdims=True) + 1e-20)
    return ids, weights * cfg.routed_scaling_factor, scores


def expert_load(ids, valid, num_experts: int):
    """float32 `[experts]`: how many valid tokens chose each expert."""
    onehot = jax.nn.one_hot(ids, num_experts, dtype=jnp.float32)          # [tokens, k, experts]
    return jnp.einsum("tke,t->e", onehot, valid.astype(jnp.float32))


def sequence_aux_loss(cfg, ids, scores, valid, batch: int):
    """DeepSeek-V3's sequence-wise balance loss (eq. 17-20), averaged over sequences.

    f_i = E/(k T) * #tokens choosing i, P_i = mean_t s_{t,i} / sum_j s_{t,j}, L = sum_i f_i P_i.
    ids `[b*s, k]`, scores `[b*s, experts]`, valid `[b*s]`.
    """
    num_experts, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    valid = valid.astype(jnp.float32).reshape(batch, -1)
    count = jnp.maximum(valid.sum(-1, keepdims=True), 1.0)                  # [b, 1]
    chosen = jax.nn.one_hot(ids, num_experts, dtype=jnp.float32).sum(1).reshape(batch, -1,
                                                                               num_experts)
    f = num_experts / k * jnp.einsum("bte,bt->be", chosen, valid) / count
    normed = scores / jnp.sum(scores, axis=-1, keepdims=True)
    p = jnp.einsum("bte,bt->be", normed.reshape(batch, -1, num_experts), valid) / count
    return jnp.mean(jnp.sum(f * p, axis=-1))


class Experts(nn.Module):
    """The routed experts' weights and their dispatch."""
    cfg: object

    @nn.compact
    def __call__(self, x, ids, weights, valid, batch_shape):
        """x `[tokens, embed]`, ids/weights `[tokens, k]` -> (y `[tokens, embed]`, dropped).
        batch_shape: (batch, seq), the layout the tokens were flattened from."""
        cfg = self.cfg
        e, n, f = cfg.hidden_size, cfg.n_routed_experts, cfg.moe_intermediate_size
        gate = make_param(self, "gate_proj", (n, e, f), ("exp", "embed", "mlp"), cfg)
        up = make_param(self, "up_proj", (n, e, f), ("exp", "embed", "mlp"), cfg)
        down = make_param(self, "down_proj", (n, f, e), ("exp", "mlp", "embed"), cfg)
        return run_experts(x, ids, weights, valid, gate, up, down, cfg, batch_shape)


class MoE(nn.Module):
    """Routed + shared experts: `[b, s, embed]` -> (`[b, s, embed]`, aux dict)."""
    cfg: object

    @nn.compact
    def __call__(self, x, segment_ids, replay_ids=None):
        """segment_ids int `[b, s]` (0 = padding, not routed); replay_ids int `[b, s, k]`.

        aux: `load` float32 `[experts]` (tokens per expert), `ids` int32 `[b, s, k]`,
        `dropped` int32 (slots over capacity), `aux_loss` float32 (sequence-wise balance loss).
        """
        cfg = self.cfg
        b, s, e = x.shape
        n, k = cfg.n_routed_experts, cfg.num_experts_per_tok
        # The router stays in float32: the bias must be fp32 (vLLM #23640) and small logit
        # errors flip top-k choices.
        w_router = self.param("gate", nn.with_logical_partitioning(
            nn.initializers.normal(cfg.initializer_range), ("embed", None)), (e, n), jnp.float32)
        bias = self.variable("router_bias", "e_score_correction_bias", nn.with_logical_partitioning(
            jnp.zeros, (None,)), (n,), jnp.float32)
        tokens = x.reshape(b * s, e)
        valid = (segment_ids != 0).reshape(b * s)
        router_logits = jnp.einsum("te,en->tn", tokens.astype(jnp.float32), w_router)
        replay = None if replay_ids is None else replay_ids.reshape(b * s, k)
        ids, weights, scores = route(cfg, router_logits, bias.value, replay)
        routed, dropped = Experts(cfg, name="experts")(tokens, ids, weights, valid, (b, s))
        y = routed.reshape(b, s, e)
        if cfg.n_shared_experts:
            y = y + SwiGLU(cfg, cfg.n_shared_experts * cfg.moe_intermediate_size,
                           name="shared_experts")(x)
        aux = {
            "load": expert_load(ids, valid, n),
            "ids": ids.reshape(b, s, k),
            "dropped": dropped,
            "aux_loss": (sequence_aux_loss(cfg, ids, scores, valid, b)
                         if cfg.seq_aux_loss_alpha else jnp.zeros((), jnp.float32)),
        }
        return y, aux


def update_router_bias(router_bias, loads, rate: float):
    """Aux-loss-free balancing (DeepSeek-V3 sec. 2.1.2): b_i += rate * sign(mean(load) - load_i).

    router_bias: a tree whose leaves are bias arrays `[..., experts]`; loads: the matching tree
    of token counts from the forward pass (same shapes). Returns the updated tree.
    """
    def one(bias, load):
        mean = jnp.mean(load, axis=-1, keepdims=True)
        return bias + rate * jnp.sign(mean - load).astype(bias.dtype)
    return jax.tree.map(one, router_bias, loads)
