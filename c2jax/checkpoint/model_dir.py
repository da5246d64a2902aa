"""A model directory: the model config as JSON plus the variables as an orbax checkpoint.

    MODEL_DIR/model_config.json     c2jax model config (c2jax/model/config.py fields)
    MODEL_DIR/variables/            orbax PyTree checkpoint of {"params", "router_bias"}

This is what `python -m c2jax.checkpoint.hf --to_orbax` writes and `--to_hf` reads; training
checkpoints (c2jax/train) hold the same variables plus optimizer and data state.
"""
from __future__ import annotations

import json
import os

import jax
import orbax.checkpoint as ocp

from c2jax.model.config import model_config, validate
from c2jax.model.transformer import abstract_variables

CONFIG_FILE = "model_config.json"
VARIABLES_DIR = "variables"


def config_from_json(text: str):
    """A locked, validated model config from its JSON form; unknown fields are named."""
    fields = json.loads(text)
    cfg = model_config()
    unknown = sorted(set(fields) - set(cfg.keys()))
    if unknown:
        raise ValueError(f"model config has unknown fields {unknown}")
    with cfg.unlocked():
        cfg.update(fields)
    validate(cfg)
    return cfg


def save_model(path: str, cfg, variables) -> None:
    path = os.path.abspath(path)
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, CONFIG_FILE), "w") as f:
        f.write(cfg.to_json(indent=1))
    with ocp.StandardCheckpointer() as ckpt:
        ckpt.save(os.path.join(path, VARIABLES_DIR), variables, force=True)


def load_model(path: str):
    """Returns (cfg, variables) from a model directory."""
    path = os.path.abspath(path)
    config_path = os.path.join(path, CONFIG_FILE)
    if not os.path.exists(config_path):
        raise FileNotFoundError(f"{config_path} not found: not a c2jax model directory")
    with open(config_path) as f:
        cfg = config_from_json(f.read())
    from flax import linen as nn
    target = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype),
                          nn.unbox(abstract_variables(cfg)))
    with ocp.StandardCheckpointer() as ckpt:
        variables = ckpt.restore(os.path.join(path, VARIABLES_DIR), target)
    return cfg, variables
