"""The decoder: embeddings, scanned dense and MoE layer stacks, final norm, head and MTP modules.

    logits, aux = apply(variables, tokens, segment_ids, positions, cfg=cfg, routing=None)
    logits, aux = apply(variables, tokens, segment_ids, positions, cfg=cfg, cache=cache, ...)

The second form decodes: the MLA latents of the new tokens are written into `cache` (see
`c2jax.sampling.cache`) and attention reads it; `apply_mtp` runs one MTP module the same way,
as the draft model of speculative decoding.

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
    """Pre-norm block: x + MLA(norm(x)), then + MLP or MoE of the norm. `[b, s, embed]`.

    Returns (x, aux); with a `cache` (see `MLAttention`), (x, aux, updated cache)."""
    cfg: object
    moe: bool
    cache_window: int = 0

    @nn.compact
    def __call__(self, x, cos, sin, segment_ids, positions, replay_ids=None, cache=None):
        cfg = self.cfg
        e = cfg.hidden_size
        attn_in = RMSNorm(cfg, e, name="input_layernorm")(x)
        attn = MLAttention(cfg, self.cache_window, name="self_attn")(
            attn_in, cos, sin, segment_ids, positions, cache)
        if cache is not None:
            attn, cache = attn
        h = x + attn
        mlp_in = RMSNorm(cfg, e, name="post_attention_layernorm")(h)
        if self.moe:
            out, aux = MoE(cfg, name="mlp")(mlp_in, segment_ids, replay_ids)
        else:
            out, aux = SwiGLU(cfg, cfg.intermediate_size, name="mlp")(mlp_in), None
        out = constrain(h + out, _BSE)
        return (out, aux) if cache is None else (out, aux, cache)


class _ScanBody(nn.Module):
    """One decoder layer in nn.scan's (carry, scanned input) -> (carry, output) form."""
    cfg: object
    moe: bool

    @nn.compact
    def __call__(self, x, replay_ids, cos, sin, segment_ids, positions):
        return DecoderLayer(self.cfg, self.moe, name="layer")(x, cos, sin, segment_ids, positions,
                                                              replay_ids)


class _CachedScanBody(nn.Module):
    """One decoder layer reading and writing the stack's latent cache, which rides in the scan
    carry (so each layer updates its rows in place instead of copying the whole cache).

    carry: (x `[b, s, embed]`, {"latent", "k_rope"} `[layers, b, max_len, d]`);
    scanned: (layer index, replay_ids `[b, s, k]` or None)."""
    cfg: object
    moe: bool
    cache_window: int

    @nn.compact
    def __call__(self, carry, scanned, cos, sin, segment_ids, positions):
        x, cache = carry
        layer, replay_ids = scanned
        x, aux, cache = DecoderLayer(self.cfg, self.moe, self.cache_window, name="layer")(
            x, cos, sin, segment_ids, positions, replay_ids, dict(cache, layer=layer))
        return (x, cache), aux


def _cached_stack(cfg, moe: bool, length: int, name: str, cache_window: int) -> nn.Module:
    scanned = nn.scan(
        _CachedScanBody,
        variable_axes={"params": 0, "router_bias": 0},
        split_rngs={"params": True},
        in_axes=(0, nn.broadcast, nn.broadcast, nn.broadcast, nn.broadcast),
        length=length,
        metadata_params={nn.PARTITION_NAME: "layers"},
    )
    return scanned(cfg, moe, cache_window, name=name)


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
        unroll=cfg.scan_unroll or length,
    )
    return scanned(cfg, moe, name=name)


def at_positions(x, logits_at):
    """x `[b, s, e]` at `logits_at` int `[b, n]` -> `[b, n, e]`; x itself when None."""
    return x if logits_at is None else jnp.take_along_axis(x, logits_at[:, :, None], axis=1)


def _output_head(cfg, embed):
    """The LM head: the tied embedding or an untied `lm_head` (`[b, s, embed]` -> logits)."""
    return embed.attend if cfg.tie_word_embeddings else LMHead(cfg, name="lm_head")


def _mtp_module(cfg, depth: int, emb_next, hidden, cos, sin, segment_ids, positions, cache=None,
                cache_window: int = 0):
    """MTP module `depth` (0-based) up to its decoder layer: combine(Emb(t_{i+depth+1}), h_i),
    then one MoE layer. Called inside a compact module, whose submodules these become.
    Returns the DecoderLayer's (hidden `[b, s, embed]`, aux[, cache])."""
    h_in = MTPCombine(cfg, name=f"mtp_{depth}_combine")(emb_next, hidden)
    return DecoderLayer(cfg, True, cache_window, name=f"mtp_{depth}_layer")(
        h_in, cos, sin, segment_ids, positions, None, cache)


class Transformer(nn.Module):
    """The DeepSeek-V3 / Kimi-K2 decoder with MTP modules."""
    cfg: object
    cache_window: int = 0

    @nn.compact
    def __call__(self, tokens, segment_ids=None, positions=None, replay_ids=None, cache=None,
                 logits_at=None):
        """tokens int `[b, s]`; segment_ids int `[b, s]` (0 = padding; default: one document);
        positions int `[b, s]` (default 0..s-1); replay_ids int `[moe_layers, b, s, k]`.

        logits_at: optional int `[b, n]`, the positions whose logits (and MTP logits) to compute
        (`c2jax.train.head_positions`: only where a loss is taken); `s` below becomes `n`.

        Returns (logits float32 `[b, s, vocab]`, aux) with aux:
          `routing`     int32 `[moe_layers, b, s, k]` experts chosen per MoE layer
          `router_load` tree shaped like variables["router_bias"]: tokens per expert
          `dropped_fraction`  routed slots dropped at capacity, over all MoE layers
          `aux_loss`    the weighted sequence-wise balance loss (0 when disabled)
          `mtp_logits`  float32 `[mtp_depth, b, s, vocab]` (absent when num_mtp_layers = 0)

        With `cache` (decoding; see `_decode`) the result is different: see there.
        """
        cfg = self.cfg
        b, s = tokens.shape
        if segment_ids is None:
            segment_ids = jnp.ones((b, s), jnp.int32)
        if positions is None:
            positions = jnp.broadcast_to(jnp.arange(s, dtype=jnp.int32), (b, s))
        if cache is not None:
            return self._decode(tokens, segment_ids, positions, replay_ids, cache, logits_at)
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
        head = _output_head(cfg, embed)
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
        logits = head(RMSNorm(cfg, cfg.hidden_size, head=True, name="norm")(
            at_positions(from_layout(x), logits_at)))

        mtp_logits = []
        for depth in range(1, cfg.num_mtp_layers + 1):
            next_tokens, _ = shift_within_segment(tokens, segment_ids, depth)
            name = f"mtp_{depth - 1}"
            hidden, layer_aux = _mtp_module(cfg, depth - 1,
                                            embed(constrain(to_layout(next_tokens), _BS)),
                                            hidden, cos, sin, seg, pos)
            moe_aux.append(jax.tree.map(lambda a: a[None], layer_aux))
            loads[f"{name}_layer"] = {"mlp": {"e_score_correction_bias": layer_aux["load"]}}
            normed = RMSNorm(cfg, cfg.hidden_size, head=True, name=f"{name}_norm")(
                at_positions(from_layout(hidden), logits_at))
            mtp_logits.append(head(normed))
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

    def _decode(self, tokens, segment_ids, positions, replay_ids, cache, logits_at):
        """The main model over new tokens with a latent cache (MTP modules do not run; see
        `MTPStep`). Context parallelism does not apply: rows are independent sequences.

        cache: {"dense_layers", "moe_layers"} (those the config has), each {"latent":
        `[layers, b, max_len, kv_lora_rank]`, "k_rope": `[layers, b, max_len, rope]`}; positions
        index it. logits_at: optional int `[b, n]` indices into the s new tokens whose logits
        are wanted (default all). Returns (logits float32 `[b, n, vocab]`, aux) with aux
        `routing` int32 `[moe_layers, b, s, k]`, `hidden` `[b, s, embed]` (last layer, before
        the final norm: the MTP input) and `cache` (the updated cache).
        """
        cfg = self.cfg
        embed = Embedding(cfg, name="embed_tokens")
        head = _output_head(cfg, embed)
        x = embed(constrain(tokens, _BS))
        cos, sin = rotary_angles(cfg, positions)
        aux, new_cache = {}, {}
        stacks = [("dense_layers", False, cfg.first_k_dense_replace),
                  ("moe_layers", True, num_moe_layers(cfg))]
        for name, moe, length in stacks:
            if not length:
                continue
            replay = replay_ids if moe else None
            if self.has_variable("params", f"{name}_0"):     # `unstack_layers` layout
                stack_cache, ids = cache[name], []
                for i in range(length):
                    x, layer_aux, stack_cache = DecoderLayer(
                        cfg, moe, self.cache_window, name=f"{name}_{i}")(
                        x, cos, sin, segment_ids, positions,
                        None if replay is None else replay[i], dict(stack_cache, layer=i))
                    if moe:
                        ids.append(layer_aux["ids"])
                new_cache[name] = stack_cache
                stack_aux = {"ids": jnp.stack(ids)} if moe else {}
            else:
                (x, new_cache[name]), stack_aux = _cached_stack(cfg, moe, length, name,
                                                                self.cache_window)(
                    (x, cache[name]), (jnp.arange(length, dtype=jnp.int32), replay),
                    cos, sin, segment_ids, positions)
            if moe:
                aux["routing"] = stack_aux["ids"]
        aux["hidden"], aux["cache"] = x, new_cache
        return head(RMSNorm(cfg, cfg.hidden_size, head=True, name="norm")(
            at_positions(x, logits_at))), aux


_LAYER_STACKS = ("dense_layers", "moe_layers")


@jax.jit
def unstack_layers(variables):
    """The decode layout of `variables`: each layer stack's leaves `[layers, ...]` split into
    one subtree per layer, `{stack}_{i}` (`moe_layers_0`, ...), in every collection.

    A decode step scanned over a stack slices every layer's weights out of it, and XLA copies
    a dynamic slice of a loop-invariant operand: at decode batch sizes that copy costs about as
    much as the matmuls that read the weights (docs/sampling.md). `Transformer._decode` runs
    the layers of this layout one after the other from their own buffers. One copy of the
    stacked weights per call (the sampler makes it once per `set_params`); the result is
    another tree, so it is not for training.
    """
    def split(collection):
        out = {}
        for key, sub in collection.items():
            if key in _LAYER_STACKS:
                layers = jax.tree.leaves(sub)[0].shape[0]
                out.update({f"{key}_{i}": jax.tree.map(lambda a, i=i: a[i], sub["layer"])
                            for i in range(layers)})
            else:
                out[key] = sub
        return out
    return {name: split(collection) for name, collection in variables.items()}


class MTPStep(nn.Module):
    """MTP module `depth` (0-based) at decode time, as a draft model (applied to the whole
    variable tree: its submodules carry the names they have inside `Transformer`).

    At position i it reads the previous depth's hidden state h_i and the token t_{i+depth+1},
    writes its own latent cache at i, and predicts t_{i+depth+2}.
    """
    cfg: object
    depth: int
    cache_window: int = 0

    @nn.compact
    def __call__(self, hidden, next_tokens, segment_ids, positions, cache, logits_at):
        """hidden `[b, s, embed]`, next_tokens / segment_ids / positions int `[b, s]`, cache
        {"latent": `[1, b, max_len, kv_lora_rank]`, "k_rope": `[1, b, max_len, rope]`},
        logits_at int `[b, n]` (indices into s).

        Returns (logits float32 `[b, n, vocab]`, hidden `[b, s, embed]` (the next depth's
        input), the updated cache, routing int32 `[b, s, k]`)."""
        cfg = self.cfg
        embed = Embedding(cfg, name="embed_tokens")
        cos, sin = rotary_angles(cfg, positions)
        hidden, aux, cache = _mtp_module(cfg, self.depth, embed(next_tokens), hidden, cos, sin,
                                         segment_ids, positions,
                                         dict(cache, layer=jnp.zeros((), jnp.int32)),
                                         self.cache_window)
        picked = at_positions(hidden, logits_at)
        normed = RMSNorm(cfg, cfg.hidden_size, head=True,
                         name=f"mtp_{self.depth}_norm")(picked)
        return _output_head(cfg, embed)(normed), hidden, cache, aux["ids"]


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


def apply(variables, tokens, segment_ids=None, positions=None, *, cfg, routing=None, cache=None,
          cache_window: int = 0, logits_at=None):
    """The model as a function: see `Transformer.__call__` for shapes and the aux dict, and
    `Transformer._decode` for the `cache` path (decoding: `cache_window` static, the number of
    cached positions attended to; 0 = all)."""
    validate(cfg)
    model = Transformer(cfg, cache_window)
    return model.apply(variables, tokens, segment_ids, positions, routing, cache, logits_at)


def apply_mtp(variables, hidden, next_tokens, segment_ids, positions, *, cfg, depth: int, cache,
              logits_at, cache_window: int = 0):
    """MTP module `depth` (0-based) over cached positions: see `MTPStep`."""
    return MTPStep(cfg, depth, cache_window).apply(variables, hidden, next_tokens, segment_ids,
                                                   positions, cache, logits_at)


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
