"""`precision_recipe` really quantizes every dense/expert matmul of the model, and stays close."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from c2jax.model import apply, init, model_config

TOKENS = jnp.asarray(np.random.RandomState(0).randint(0, 256, (2, 32)))


@pytest.mark.parametrize("recipe,bound", [("mxfp8", 0.06), ("nvfp4", 0.2)])
def test_recipe_changes_logits_within_its_error_and_trains(recipe, bound):
    base = model_config(moe_dispatch="capacity", num_mtp_layers=0)
    variables = init(base, jax.random.key(0))
    cfg = model_config(moe_dispatch="capacity", num_mtp_layers=0, precision_recipe=recipe)

    def logits(c, params):
        return apply({**variables, "params": params}, TOKENS, cfg=c)[0]
    ref = jax.jit(lambda p: logits(base, p))(variables["params"])
    got = jax.jit(lambda p: logits(cfg, p))(variables["params"])
    grads = jax.jit(jax.grad(lambda p: jnp.mean(logits(cfg, p) ** 2)))(variables["params"])
    rel = float(jnp.linalg.norm(got - ref) / jnp.linalg.norm(ref))
    assert 0.0 < rel < bound
    assert all(bool(jnp.isfinite(g).all()) for g in jax.tree.leaves(grads))
    expert_grad = grads["moe_layers"]["layer"]["mlp"]["experts"]["gate_proj"]
    assert float(jnp.abs(expert_grad).max()) > 0


def test_unknown_recipe_is_named():
    from c2jax.model import validate
    with pytest.raises(ValueError, match="precision_recipe"):
        validate(model_config(precision_recipe="fp4"))
