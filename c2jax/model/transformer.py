"""The decoder: embeddings, scanned dense and MoE layer stacks, final norm, head and MTP modules.

    logits, aux = apply(variables, tokens, segment_ids, positions, cfg=cfg, routing=None)

`variables` is `{"params": trainable weights, "router_bias": aux-loss-free biases}`; every leaf
carries logical axis names at init (see `c2jax.sharding`). Layers of one kind are stacked with
`nn.scan` (leading axis `layers`), so compile time does not grow with depth: the first
`first_k_dense_replace` layers form the `dense_layers` stack, the rest the `moe_layers` stack.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from flax import linen as nn

from c2jax.model.attention import MLAttention
from c2jax.model.config import num_moe_layers, validate
from c2jax.model.layers import Embedding, LMHead, RMSNorm, SwiGLU
from c2jax.model.moe import MoE
from c2jax.model.mtp import MTPCombine, shift_within_segment
from c2jax.model.rope import rotary_angles
from c2jax.parallel.context import inverse_order, load_balance_order
from c2jax import sharding
from c2jax.sharding import constrain, mesh_axis_size

_BS = ("activation_batch", "activation_length")
_BSE = ("activation_batch", "activation_length", "activation_embed")

_REMAT_POLICIES = {
    "full": None,
    "dots": jax.checkpoint_policies.checkpoint_dots,
    "dots_no_batch": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,
}


class DecoderLayer(nn.Module):
    """Pre-norm block: x + MLA(norm(x)), then + MLP or MoE of the norm. `[b, s, embed]`."""
    cfg: object
    moe: bool

    @nn.compact
    def __call__(self, x, cos, sin, segment_ids, positions, replay_ids=None):
        cfg = self.cfg
        e = cfg.hidden_size
        attn_in = RMSNorm(cfg, e, name="input_layernorm")(x)
        h = x + MLAttention(cfg, name="self_attn")(attn_in, cos, sin, segment_ids, positions)
        mlp_in = RMSNorm(cfg, e, name="post_attention_layernorm")(h)
        if self.moe:
            out, aux = MoE(cfg, name="mlp")(mlp_in, segment_ids, replay_ids)
        else:
            out, aux = SwiGLU(cfg, cfg.intermediate_size, name="mlp")(mlp_in), None
        return constrain(h + out, _BSE), aux


class _ScanBody(nn.Module):
    """One decoder layer in nn.scan's (carry, scanned input) -> (carry, output) form."""
    cfg: object
    moe: bool

    @nn.compact
    def __call__(self, x, replay_ids, cos, sin, segment_ids, positions):
        return DecoderLayer(self.cfg, self.moe, name="layer")(x, cos, sin, segment_ids, positions,
                                                              replay_ids)


def _stack(cfg, moe: bool, length: int, name: str, scan_replay: bool) -> nn.Module:
    body = _ScanBody
    if cfg.remat_policy != "none":
        body = nn.remat(body, policy=_REMAT_POLICIES[cfg.remat_policy], prevent_cse=False)
    scanned = nn.scan(
        body,
        variable_axes={"params": 0, "router_bias": 0},
        split_rngs={"params": True},
        in_axes=(0 if scan_replay else nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast,
                 nn.broadcast),
        length=length,
        metadata_params={nn.PARTITION_NAME: "layers"},
    )
    return scanned(cfg, moe, name=name)


class Transformer(nn.Module):
    """The DeepSeek-V3 / Kimi-K2 decoder with MTP modules."""
    cfg: object

    @nn.compact
    def __call__(self, tokens, segment_ids=None, positions=None, replay_ids=None):
        """tokens int `[b, s]`; segment_ids int `[b, s]` (0 = padding; default: one document);
        positions int `[b, s]` (default 0..s-1); replay_ids int `[moe_layers, b, s, k]`.

        Returns (logits float32 `[b, s, vocab]`, aux) with aux:
          `routing`     int32 `[moe_layers, b, s, k]` experts chosen per MoE layer
          `router_load` tree shaped like variables["router_bias"]: tokens per expert
          `dropped_fraction`  routed slots dropped at capacity, over all MoE layers
          `aux_loss`    the weighted sequence-wise balance loss (0 when disabled)
          `mtp_logits`  float32 `[mtp_depth, b, s, vocab]` (absent when num_mtp_layers = 0)
        """
        cfg = self.cfg
        b, s = tokens.shape
        if segment_ids is None:
            segment_ids = jnp.ones((b, s), jnp.int32)
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
        n_moe = num_moe_layers(cfg)

        # Context parallelism: compute in the load-balanced sequence order (see parallel/context).
        shards = mesh_axis_size("context")
        order = load_balance_order(s, shards) if shards > 1 else None
        undo = inverse_order(order) if shards > 1 else None

        def to_layout(a, axis=1):
            return a if order is None else jnp.take(a, order, axis=axis)

        def from_layout(a, axis=1):
            return a if undo is None else jnp.take(a, undo, axis=axis)

        seg = constrain(to_layout(segment_ids), _BS)
        pos = constrain(to_layout(positions), _BS)
        embed = Embedding(cfg, name="embed_tokens")
        head = embed.attend if cfg.tie_word_embeddings else LMHead(cfg, name="lm_head")
        x = embed(constrain(to_layout(tokens), _BS))
        cos, sin = rotary_angles(cfg, pos)

        if cfg.first_k_dense_replace:
            x, _ = _stack(cfg, False, cfg.first_k_dense_replace, "dense_layers", False)(
                x, None, cos, sin, seg, pos)
        aux, moe_aux, loads = {}, [], {}
        if n_moe:
            replay = None if replay_ids is None else to_layout(replay_ids, axis=2)
            x, stack_aux = _stack(cfg, True, n_moe, "moe_layers", replay is not None)(
                x, replay, cos, sin, seg, pos)
            moe_aux.append(stack_aux)
            loads["moe_layers"] = {"layer": {"mlp": {"e_score_correction_bias": stack_aux["load"]}}}
            aux["routing"] = from_layout(stack_aux["ids"], axis=2)
        hidden = x
        logits = head(from_layout(RMSNorm(cfg, cfg.hidden_size, name="norm")(x)))

        mtp_logits = []
        for depth in range(1, cfg.num_mtp_layers + 1):
            next_tokens, _ = shift_within_segment(tokens, segment_ids, depth)
            name = f"mtp_{depth - 1}"
            h_in = MTPCombine(cfg, name=f"{name}_combine")(
                embed(constrain(to_layout(next_tokens), _BS)), hidden)
            hidden, layer_aux = DecoderLayer(cfg, True, name=f"{name}_layer")(
                h_in, cos, sin, seg, pos)
            moe_aux.append(jax.tree.map(lambda a: a[None], layer_aux))
            loads[f"{name}_layer"] = {"mlp": {"e_score_correction_bias": layer_aux["load"]}}
            normed = RMSNorm(cfg, cfg.hidden_size, name=f"{name}_norm")(hidden)
            mtp_logits.append(head(from_layout(normed)))
        if mtp_logits:
            aux["mtp_logits"] = jnp.stack(mtp_logits)

        if moe_aux:
            dropped = sum(jnp.sum(a["dropped"]) for a in moe_aux)
            slots = (jnp.sum(segment_ids != 0) * cfg.num_experts_per_tok
                     * (n_moe + cfg.num_mtp_layers))
            aux["dropped_fraction"] = dropped / jnp.maximum(slots, 1)
            aux["aux_loss"] = cfg.seq_aux_loss_alpha * sum(jnp.sum(a["aux_loss"]) for a in moe_aux)
            aux["router_load"] = loads
        return logits, aux


# --------------------------------------------------------------------------------------------
# Functional entry points

def build(cfg) -> Transformer:
    """Validates the config and returns the Flax module."""
    validate(cfg)
    return Transformer(cfg)


def abstract_variables(cfg, batch: int = 1, seq: int = 8):
    """Shapes and logical partitioning of every variable, without allocating (`eval_shape`)."""
    model = build(cfg)
    tokens = jax.ShapeDtypeStruct((batch, seq), jnp.int32)
    return jax.eval_shape(lambda k, t: model.init(k, t), jax.random.key(0), tokens)


def init(cfg, key, batch: int = 1, seq: int = 8):
    """Unsharded variables `{"params", "router_bias"}` as plain arrays (no metadata boxes)."""
    model = build(cfg)
    return nn.unbox(jax.jit(model.init)(key, jnp.zeros((batch, seq), jnp.int32)))


def apply(variables, tokens, segment_ids=None, positions=None, *, cfg, routing=None):
    """The model as a function: see `Transformer.__call__` for shapes and the aux dict."""
    return build(cfg).apply(variables, tokens, segment_ids, positions, routing)


def init_sharded(cfg, key, mesh, rules, batch: int = 1, seq: int = 8):
    """Variables created directly in their shards: jit of init with `out_shardings` taken from
    the logical names, so no host ever holds the full unsharded tree."""
    sharding.validate_layout(cfg, dict(zip(mesh.axis_names, mesh.devices.shape)))
    abstract = abstract_variables(cfg, batch, seq)
    shardings = sharding.param_shardings(abstract, mesh, rules)
    model = build(cfg)

    def _init(k):
        return nn.unbox(model.init(k, jnp.zeros((batch, seq), jnp.int32)))

    with sharding.activate(mesh, rules):
        return jax.jit(_init, out_shardings=shardings)(key)
