"""Invalid model configs raise a ValueError that names the field."""
import pytest

from c2jax.model import model_config, validate
from configs.models import PRESETS, get_config

BAD = [
    (dict(topk_group=3, n_group=2), "topk_group"),
    (dict(num_experts_per_tok=9), "num_experts_per_tok"),
    (dict(n_group=3), "n_group"),
    (dict(qk_rope_head_dim=7), "qk_rope_head_dim"),
    (dict(first_k_dense_replace=5), "first_k_dense_replace"),
    (dict(moe_dispatch="magic"), "moe_dispatch"),
    (dict(scoring_func="relu"), "scoring_func"),
    (dict(hidden_size=0), "hidden_size"),
    (dict(n_group=4, topk_group=1, num_experts_per_tok=3), "topk_group"),
    (dict(rope_scaling=dict(type="yarn", factor=0.5)), "rope_scaling.factor"),
    (dict(rope_scaling=dict(type="ntk")), "rope_scaling.type"),
    (dict(dtype="float8"), "dtype"),
    (dict(capacity_factor=0.0), "capacity_factor"),
]


@pytest.mark.parametrize("overrides,field", BAD, ids=[f for _, f in BAD])
def test_invalid_field_is_named(overrides, field):
    with pytest.raises(ValueError, match=f"'{field}'"):
        validate(model_config(**overrides))


def test_typo_in_field_name_is_rejected():
    cfg = model_config()
    with pytest.raises(AttributeError, match="hiden_size"):
        cfg.hiden_size = 3


@pytest.mark.parametrize("name", PRESETS)
def test_presets_are_valid(name):
    validate(get_config(name))


def test_unknown_preset_is_named():
    with pytest.raises(ValueError, match="gpt5"):
        get_config("gpt5")
