"""Hugging Face checkpoints (DeepSeek-V3 / Kimi-K2 family) <-> c2jax variables.

    cfg, variables = load_hf("path/to/checkpoint")     # config.json + *.safetensors
    save_hf("out/", cfg, variables)                     # loads with AutoModelForCausalLM

Reads `config.json` with model_type `deepseek_v3` or `kimi_k2` (a multimodal config's
`text_config` is used when present), single-file or sharded safetensors (with
`model.safetensors.index.json`), per-expert tensor names (`mlp.experts.{j}.gate_proj.weight`,
what `save_pretrained` writes and the official checkpoints use) or the fused in-memory layout of
transformers 5 (`mlp.experts.gate_up_proj` `[experts, 2*moe_inter, hidden]`), FP8 weights with
128x128 block scales (`weight_scale_inv`, DeepSeek-V3's release format), and MTP modules stored
as extra decoder layers `model.layers.{num_hidden_layers + d}` with `enorm`, `hnorm`, `eh_proj`,
`shared_head.norm` (and copies of the embedding / head, which are shared here).

Conversion streams: each c2jax leaf is assembled from its tensors, read one at a time, then
handed to JAX before the next is read, so peak host memory is one leaf beyond the result.

CLI:  python -m c2jax.checkpoint.hf --to_orbax IN_HF_DIR OUT_DIR
      python -m c2jax.checkpoint.hf --to_hf IN_ORBAX_DIR OUT_HF_DIR
"""
from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn
from flax import traverse_util
from safetensors import safe_open
from safetensors.numpy import save_file

from c2jax import sharding
from c2jax.model.config import model_config, validate
from c2jax.model.transformer import abstract_variables

log = logging.getLogger(__name__)

SUPPORTED_MODEL_TYPES = ("deepseek_v3", "kimi_k2")
_FP8_BLOCK = 128


# --------------------------------------------------------------------------------------------
# config.json <-> model config

def config_from_hf(hf: dict, **overrides):
    """Builds our model config from a HF `config.json` dict; errors name the offending field.

    The MoE dispatch is the dropless `ragged` backend unless `overrides` choose another."""
    if "text_config" in hf and "hidden_size" not in hf:
        hf = hf["text_config"]
    model_type = hf.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise ValueError(f"config.json model_type {model_type!r} is not supported; c2jax reads "
                         f"{SUPPORTED_MODEL_TYPES} (the DeepSeek-V3 architecture)")
    if hf.get("hidden_act", "silu") != "silu":
        raise ValueError(f"config.json hidden_act {hf['hidden_act']!r}: only 'silu' is supported")
    if hf.get("attention_bias", False):
        raise ValueError("config.json attention_bias=true is not supported (DeepSeek-V3 has none)")
    if hf.get("topk_method", "noaux_tc") != "noaux_tc":
        raise ValueError(f"config.json topk_method {hf['topk_method']!r}: only DeepSeek-V3's "
                         "'noaux_tc' routing is supported")
    heads = hf["num_attention_heads"]
    if hf.get("num_key_value_heads", heads) != heads:
        raise ValueError("config.json num_key_value_heads must equal num_attention_heads for MLA")
    rope = dict(hf.get("rope_parameters") or {})
    legacy = hf.get("rope_scaling") or {}
    rope.update({k: v for k, v in legacy.items() if k not in rope})
    rope_type = rope.get("rope_type", rope.get("type", "default")) or "default"
    if rope_type not in ("default", "yarn"):
        raise ValueError(f"config.json rope type {rope_type!r}: only 'default' and 'yarn' exist here")
    theta = rope.get("rope_theta", hf.get("rope_theta", 10000.0))
    fields = dict(
        vocab_size=hf["vocab_size"], hidden_size=hf["hidden_size"],
        num_hidden_layers=hf["num_hidden_layers"],
        first_k_dense_replace=hf.get("first_k_dense_replace", 0),
        intermediate_size=hf["intermediate_size"],
        tie_word_embeddings=bool(hf.get("tie_word_embeddings", False)),
        rms_norm_eps=hf.get("rms_norm_eps", 1e-6),
        initializer_range=hf.get("initializer_range", 0.02),
        num_attention_heads=heads, q_lora_rank=hf.get("q_lora_rank") or 0,
        kv_lora_rank=hf["kv_lora_rank"], qk_nope_head_dim=hf["qk_nope_head_dim"],
        qk_rope_head_dim=hf["qk_rope_head_dim"], v_head_dim=hf["v_head_dim"],
        max_position_embeddings=hf.get("max_position_embeddings", 4096),
        rope_theta=float(theta), rope_interleave=bool(hf.get("rope_interleave", True)),
        n_routed_experts=hf.get("n_routed_experts") or 0,
        num_experts_per_tok=hf.get("num_experts_per_tok") or 1,
        n_group=hf.get("n_group") or 1, topk_group=hf.get("topk_group") or 1,
        n_shared_experts=hf.get("n_shared_experts") or 0,
        moe_intermediate_size=hf.get("moe_intermediate_size") or 0,
        scoring_func=hf.get("scoring_func", "sigmoid"),
        norm_topk_prob=bool(hf.get("norm_topk_prob", True)),
        routed_scaling_factor=float(hf.get("routed_scaling_factor", 1.0)),
        num_mtp_layers=hf.get("num_nextn_predict_layers", hf.get("num_mtp_layers", 0)) or 0,
        # Dropless, like the reference implementation, so logits match it; "capacity" is faster
        # on CPU and is what training configs choose.
        moe_dispatch="ragged",
    )
    cfg = model_config(**fields)
    if rope_type == "yarn":
        factor = rope.get("factor")
        original = rope.get("original_max_position_embeddings")
        if factor is None:
            factor = fields["max_position_embeddings"] / original
        cfg.rope_scaling.type = "yarn"
        cfg.rope_scaling.factor = float(factor)
        cfg.rope_scaling.original_max_position_embeddings = int(original)
        cfg.rope_scaling.beta_fast = float(rope.get("beta_fast") or 32.0)
        cfg.rope_scaling.beta_slow = float(rope.get("beta_slow") or 1.0)
        cfg.rope_scaling.mscale = float(rope.get("mscale") or 0.0)
        cfg.rope_scaling.mscale_all_dim = float(rope.get("mscale_all_dim") or 0.0)
        cfg.rope_scaling.truncate = bool(rope.get("truncate", True))
    with cfg.unlocked():
        cfg.update(overrides)
    validate(cfg)
    return cfg


def config_to_hf(cfg) -> dict:
    """A `config.json` dict that transformers' DeepseekV3ForCausalLM loads."""
    hf = {
        "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "first_k_dense_replace": cfg.first_k_dense_replace,
        "intermediate_size": cfg.intermediate_size,
        "tie_word_embeddings": cfg.tie_word_embeddings, "rms_norm_eps": cfg.rms_norm_eps,
        "initializer_range": cfg.initializer_range, "hidden_act": "silu",
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": cfg.num_attention_heads,
        "q_lora_rank": cfg.q_lora_rank or None, "kv_lora_rank": cfg.kv_lora_rank,
        "qk_nope_head_dim": cfg.qk_nope_head_dim, "qk_rope_head_dim": cfg.qk_rope_head_dim,
        "v_head_dim": cfg.v_head_dim, "max_position_embeddings": cfg.max_position_embeddings,
        "rope_theta": cfg.rope_theta, "rope_interleave": cfg.rope_interleave,
        "n_routed_experts": cfg.n_routed_experts, "num_experts_per_tok": cfg.num_experts_per_tok,
        "n_group": cfg.n_group, "topk_group": cfg.topk_group,
        "n_shared_experts": cfg.n_shared_experts,
        "moe_intermediate_size": cfg.moe_intermediate_size, "scoring_func": cfg.scoring_func,
        "topk_method": "noaux_tc", "norm_topk_prob": cfg.norm_topk_prob,
        "routed_scaling_factor": cfg.routed_scaling_factor,
        "num_nextn_predict_layers": cfg.num_mtp_layers, "attention_bias": False,
        "torch_dtype": "float32" if cfg.param_dtype == "float32" else "bfloat16",
    }
    rs = cfg.rope_scaling
    if rs.type == "yarn":
        hf["rope_scaling"] = {
            "type": "yarn", "rope_type": "yarn", "factor": rs.factor,
            "original_max_position_embeddings": rs.original_max_position_embeddings,
            "beta_fast": rs.beta_fast, "beta_slow": rs.beta_slow, "mscale": rs.mscale,
            "mscale_all_dim": rs.mscale_all_dim, "truncate": rs.truncate}
    return hf


# --------------------------------------------------------------------------------------------
# The tensor map: every c2jax leaf and the HF tensor(s) it is made of

@dataclass(frozen=True)
class _Entry:
    path: tuple[str, ...]           # our leaf, e.g. ("params", "moe_layers", "layer", ...)
    hf: str                         # HF tensor name, "{layer}" formatted per stacked layer
    layers: tuple[int, ...] | None  # HF layer indices stacked into the leaf's axis 0, or None
    to_ours: Callable               # HF array -> our (per-layer) array
    to_hf: Callable                 # our (per-layer) array -> HF array
    expert: int | None = None       # for per-expert tensors: the expert's row of axis 0(+1)


def _identity(a):
    return a


def _transpose(a):
    return np.ascontiguousarray(a.T)


def _heads_in(heads):
    """HF [heads*d, in] <-> ours [in, heads, d]."""
    return (lambda a: np.ascontiguousarray(a.reshape(heads, -1, a.shape[-1]).transpose(2, 0, 1)),
            lambda a: np.ascontiguousarray(a.transpose(1, 2, 0).reshape(-1, a.shape[0])))


def _heads_out(heads):
    """HF [embed, heads*v] <-> ours [heads, v, embed]."""
    return (lambda a: np.ascontiguousarray(a.reshape(a.shape[0], heads, -1).transpose(1, 2, 0)),
            lambda a: np.ascontiguousarray(a.transpose(2, 0, 1).reshape(a.shape[2], -1)))


def _layer_entries(cfg, prefix: tuple[str, ...], hf_layer: str, layers, moe: bool):
    """Entries of one decoder layer (or a stack of them when `layers` is a tuple)."""
    h = cfg.num_attention_heads
    q_in, q_out = _heads_in(h)
    o_in, o_out = _heads_out(h)
    attn = prefix + ("self_attn",)
    p = f"{hf_layer}.self_attn"
    out = [
        _Entry(prefix + ("input_layernorm", "weight"), f"{hf_layer}.input_layernorm.weight",
               layers, _identity, _identity),
        _Entry(prefix + ("post_attention_layernorm", "weight"),
               f"{hf_layer}.post_attention_layernorm.weight", layers, _identity, _identity),
        _Entry(attn + ("kv_a_proj_with_mqa",), f"{p}.kv_a_proj_with_mqa.weight", layers,
               _transpose, _transpose),
        _Entry(attn + ("kv_a_layernorm", "weight"), f"{p}.kv_a_layernorm.weight", layers,
               _identity, _identity),
        _Entry(attn + ("kv_b_proj",), f"{p}.kv_b_proj.weight", layers, q_in, q_out),
        _Entry(attn + ("o_proj",), f"{p}.o_proj.weight", layers, o_in, o_out),
    ]
    if cfg.q_lora_rank:
        out += [
            _Entry(attn + ("q_a_proj",), f"{p}.q_a_proj.weight", layers, _transpose, _transpose),
            _Entry(attn + ("q_a_layernorm", "weight"), f"{p}.q_a_layernorm.weight", layers,
                   _identity, _identity),
            _Entry(attn + ("q_b_proj",), f"{p}.q_b_proj.weight", layers, q_in, q_out),
        ]
    else:
        out.append(_Entry(attn + ("q_proj",), f"{p}.q_proj.weight", layers, q_in, q_out))
    mlp = prefix + ("mlp",)
    if not moe:
        for name in ("gate_proj", "up_proj", "down_proj"):
            out.append(_Entry(mlp + (name,), f"{hf_layer}.mlp.{name}.weight", layers,
                              _transpose, _transpose))
        return out
    out.append(_Entry(mlp + ("gate",), f"{hf_layer}.mlp.gate.weight", layers,
                      _transpose, _transpose))
    bias_path = ("router_bias",) + prefix[1:] + ("mlp", "e_score_correction_bias")
    out.append(_Entry(bias_path, f"{hf_layer}.mlp.gate.e_score_correction_bias", layers,
                      _identity, _identity))
    for j in range(cfg.n_routed_experts):
        for name in ("gate_proj", "up_proj", "down_proj"):
            out.append(_Entry(mlp + ("experts", name), f"{hf_layer}.mlp.experts.{j}.{name}.weight",
                              layers, _transpose, _transpose, expert=j))
    if cfg.n_shared_experts:
        for name in ("gate_proj", "up_proj", "down_proj"):
            out.append(_Entry(mlp + ("shared_experts", name),
                              f"{hf_layer}.mlp.shared_experts.{name}.weight", layers,
                              _transpose, _transpose))
    return out


def tensor_map(cfg) -> list[_Entry]:
    """Every HF tensor of the checkpoint and the c2jax leaf it belongs to."""
    k, n = cfg.first_k_dense_replace, cfg.num_hidden_layers
    entries = [
        _Entry(("params", "embed_tokens", "embedding"), "model.embed_tokens.weight", None,
               _identity, _identity),
        _Entry(("params", "norm", "weight"), "model.norm.weight", None, _identity, _identity),
    ]
    if not cfg.tie_word_embeddings:
        entries.append(_Entry(("params", "lm_head", "kernel"), "lm_head.weight", None,
                              _transpose, _transpose))
    if k:
        entries += _layer_entries(cfg, ("params", "dense_layers", "layer"), "model.layers.{layer}",
                                  tuple(range(k)), moe=False)
    if n > k:
        entries += _layer_entries(cfg, ("params", "moe_layers", "layer"), "model.layers.{layer}",
                                  tuple(range(k, n)), moe=True)
    for d in range(cfg.num_mtp_layers):
        hf_layer = f"model.layers.{n + d}"
        entries += _layer_entries(cfg, ("params", f"mtp_{d}_layer"), hf_layer, None, moe=True)
        combine = ("params", f"mtp_{d}_combine")
        entries += [
            _Entry(combine + ("enorm", "weight"), f"{hf_layer}.enorm.weight", None,
                   _identity, _identity),
            _Entry(combine + ("hnorm", "weight"), f"{hf_layer}.hnorm.weight", None,
                   _identity, _identity),
            _Entry(combine + ("eh_proj",), f"{hf_layer}.eh_proj.weight", None,
                   _transpose, _transpose),
            _Entry(("params", f"mtp_{d}_norm", "weight"), f"{hf_layer}.shared_head.norm.weight",
                   None, _identity, _identity),
        ]
    return entries


def _mtp_copies(cfg) -> list[tuple[str, tuple[str, ...], Callable]]:
    """Tensors the official layout repeats inside each MTP layer; shared here, so only written."""
    out = []
    head = (("params", "embed_tokens", "embedding") if cfg.tie_word_embeddings
            else ("params", "lm_head", "kernel"))
    for d in range(cfg.num_mtp_layers):
        hf_layer = f"model.layers.{cfg.num_hidden_layers + d}"
        out.append((f"{hf_layer}.embed_tokens.weight", ("params", "embed_tokens", "embedding"),
                    _identity))
        out.append((f"{hf_layer}.shared_head.head.weight", head,
                    _identity if cfg.tie_word_embeddings else _transpose))
    return out


# --------------------------------------------------------------------------------------------
# Reading

class _TensorSource:
    """Random access to the tensors of a (possibly sharded) safetensors checkpoint."""

    def __init__(self, path: str):
        index = os.path.join(path, "model.safetensors.index.json")
        single = os.path.join(path, "model.safetensors")
        if os.path.exists(index):
            with open(index) as f:
                weight_map = json.load(f)["weight_map"]
            self._file_of = {name: os.path.join(path, fn) for name, fn in weight_map.items()}
        elif os.path.exists(single):
            with safe_open(single, framework="np") as f:
                self._file_of = {name: single for name in f.keys()}
        else:
            files = sorted(fn for fn in os.listdir(path) if fn.endswith(".safetensors"))
            if not files:
                raise FileNotFoundError(f"no *.safetensors files in {path}")
            self._file_of = {}
            for fn in files:
                with safe_open(os.path.join(path, fn), framework="np") as f:
                    self._file_of.update({name: os.path.join(path, fn) for name in f.keys()})
        self._open: dict[str, object] = {}

    def __contains__(self, name: str) -> bool:
        return name in self._file_of

    def names(self):
        return self._file_of.keys()

    def get(self, name: str) -> np.ndarray:
        if name not in self._file_of:
            raise KeyError(name)
        fn = self._file_of[name]
        if fn not in self._open:
            self._open[fn] = safe_open(fn, framework="np")
        handle = self._open[fn]
        array = handle.get_tensor(name)
        scale_name = name.replace(".weight", ".weight_scale_inv")
        if scale_name != name and scale_name in self._file_of:
            array = _dequantize_fp8_blocks(array, self.get(scale_name))
        return array


def _dequantize_fp8_blocks(codes: np.ndarray, scale_inv: np.ndarray) -> np.ndarray:
    """DeepSeek-V3 FP8 release format: W = codes * scale_inv per 128x128 block."""
    rows, cols = codes.shape
    full = np.repeat(np.repeat(scale_inv.astype(np.float32), _FP8_BLOCK, 0), _FP8_BLOCK, 1)
    return codes.astype(np.float32) * full[:rows, :cols]


def _fused_expert(source: _TensorSource, name: str, expert: int, inter: int):
    """Reads one expert's weight from transformers 5's fused `gate_up_proj` / `down_proj`."""
    layer, rest = name.split(".mlp.experts.")
    proj = rest.split(".")[1]
    if proj in ("gate_proj", "up_proj"):
        fused = source.get(f"{layer}.mlp.experts.gate_up_proj")[expert]   # [2*inter, hidden]
        return fused[:inter] if proj == "gate_proj" else fused[inter:]
    return source.get(f"{layer}.mlp.experts.down_proj")[expert]          # [hidden, inter]


def load_hf(path: str, param_dtype: str = "float32", mesh=None, rules=None, **cfg_overrides):
    """Reads a HF DeepSeek-V3 / Kimi-K2 checkpoint directory.

    Returns (cfg, variables) where variables = {"params": ..., "router_bias": ...}. With a
    `mesh` (and `rules`), each leaf is placed directly with its NamedSharding.
    """
    config_path = os.path.join(path, "config.json")
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{config_path} not found: a HF checkpoint directory needs it")
    with open(config_path) as f:
        hf_config = json.load(f)
    cfg = config_from_hf(hf_config, param_dtype=param_dtype, **cfg_overrides)
    source = _TensorSource(path)
    if cfg.num_mtp_layers:
        first_mtp = f"model.layers.{cfg.num_hidden_layers}.eh_proj.weight"
        if first_mtp not in source:
            log.warning("config.json declares %d MTP layer(s) but %s is absent (transformers' "
                        "save_pretrained drops them); loading without MTP modules",
                        cfg.num_mtp_layers, first_mtp)
            with cfg.unlocked():
                cfg.num_mtp_layers = 0
    abstract = abstract_variables(cfg)
    shapes = traverse_util.flatten_dict(nn.unbox(abstract))
    shardings = None
    if mesh is not None:
        shardings = traverse_util.flatten_dict(
            sharding.param_shardings(abstract, mesh, rules or sharding.DEFAULT_RULES))

    by_leaf: dict[tuple[str, ...], list[_Entry]] = {}
    for entry in tensor_map(cfg):
        by_leaf.setdefault(entry.path, []).append(entry)
    missing_leaves = set(shapes) - set(by_leaf)
    if missing_leaves:
        raise ValueError(f"internal: no HF tensor maps to {sorted(missing_leaves)}")
    fused = any(".mlp.experts.gate_up_proj" in n for n in source.names())
    leaves = {}
    for path, entries in by_leaf.items():
        target = shapes[path]
        dtype = np.float32 if path[0] == "router_bias" or path[-1] == "gate" else \
            jnp.dtype(target.dtype)
        buffer = np.empty(target.shape, dtype=dtype)
        for entry in entries:
            for slot, layer in enumerate(entry.layers or (None,)):
                name = entry.hf.format(layer=layer)
                if entry.expert is not None and fused and name not in source:
                    array = _fused_expert(source, name, entry.expert, cfg.moe_intermediate_size)
                elif name in source:
                    array = source.get(name)
                else:
                    raise ValueError(f"checkpoint {path!r} has no tensor {name!r} "
                                     f"(needed for {'/'.join(entry.path)})")
                value = entry.to_ours(np.asarray(array))
                index = () if entry.layers is None else (slot,)
                if entry.expert is not None:
                    index = index + (entry.expert,)
                expected = buffer[index].shape
                if value.shape != expected:
                    raise ValueError(f"tensor {name!r} has shape {tuple(np.shape(array))}, which "
                                     f"does not fit {'/'.join(entry.path)} {expected} of the "
                                     "config in config.json")
                buffer[index] = value
        leaves[path] = (jax.device_put(buffer, shardings[path]) if shardings
                        else jnp.asarray(buffer))
        del buffer
    return cfg, traverse_util.unflatten_dict(leaves)


# --------------------------------------------------------------------------------------------
# Writing

def save_hf(path: str, cfg, variables, dtype: str | None = None,
            max_shard_bytes: int = 2 * 1024**3) -> None:
    """Writes config.json and sharded safetensors that transformers loads.

    Tensors are converted and written shard by shard (at most `max_shard_bytes` held at once).
    `dtype` (e.g. "bfloat16") casts the weights; the router and its bias stay float32.
    """
    os.makedirs(path, exist_ok=True)
    flat = traverse_util.flatten_dict(variables)
    jobs = []  # (hf name, leaf path, index into leaf, to_hf)
    for entry in tensor_map(cfg):
        if entry.path not in flat:
            raise ValueError(f"variables have no leaf {'/'.join(entry.path)} for {entry.hf!r}")
        for slot, layer in enumerate(entry.layers or (None,)):
            index = () if entry.layers is None else (slot,)
            if entry.expert is not None:
                index = index + (entry.expert,)
            jobs.append((entry.hf.format(layer=layer), entry.path, index, entry.to_hf))
    for name, leaf, fn in _mtp_copies(cfg):
        jobs.append((name, leaf, (), fn))

    weight_map, shard, shard_bytes, shard_files = {}, {}, 0, []

    def flush():
        nonlocal shard, shard_bytes
        if shard:
            fn = f"model-{len(shard_files) + 1:05d}.safetensors"
            save_file(shard, os.path.join(path, fn), metadata={"format": "pt"})
            shard_files.append(fn)
            weight_map.update({name: fn for name in shard})
        shard, shard_bytes = {}, 0

    for name, leaf, index, fn in jobs:
        array = np.asarray(jax.device_get(flat[leaf][index] if index else flat[leaf]))
        keep_fp32 = leaf[0] == "router_bias" or leaf[-1] == "gate"
        out_dtype = np.float32 if keep_fp32 or dtype is None else jnp.dtype(dtype)
        shard[name] = np.ascontiguousarray(fn(array).astype(out_dtype))
        shard_bytes += shard[name].nbytes
        if shard_bytes >= max_shard_bytes:
            flush()
    flush()
    total = len(shard_files)
    for i, fn in enumerate(shard_files):
        final = f"model-{i + 1:05d}-of-{total:05d}.safetensors"
        os.replace(os.path.join(path, fn), os.path.join(path, final))
        for name, owner in weight_map.items():
            if owner == fn:
                weight_map[name] = final
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=1)
    hf_config = config_to_hf(cfg)
    if dtype is not None:
        hf_config["torch_dtype"] = dtype
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=1)


def main(argv=None) -> None:
    import argparse
    from c2jax.checkpoint.model_dir import load_model, save_model
    parser = argparse.ArgumentParser(prog="python -m c2jax.checkpoint.hf",
                                     description="Convert between HF safetensors and c2jax.")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--to_orbax", nargs=2, metavar=("HF_DIR", "MODEL_DIR"))
    mode.add_argument("--to_hf", nargs=2, metavar=("MODEL_DIR", "HF_DIR"))
    parser.add_argument("--dtype", default=None, help="cast weights when writing HF (bfloat16)")
    args = parser.parse_args(argv)
    if args.to_orbax:
        cfg, variables = load_hf(args.to_orbax[0])
        save_model(args.to_orbax[1], cfg, variables)
        print(f"wrote {args.to_orbax[1]}")
    else:
        cfg, variables = load_model(args.to_hf[0])
        save_hf(args.to_hf[1], cfg, variables, dtype=args.dtype)
        print(f"wrote {args.to_hf[1]}")


if __name__ == "__main__":
    main()
