"""Real orbax checkpoints: everything a resume needs round-trips, keep-N holds, a truncated
newest checkpoint falls back to the previous one with a warning, a different model is refused,
and `init_from` reads weights from a workdir or a model directory."""
import logging

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from c2jax.checkpoint.model_dir import save_model
from c2jax.data.tokenizer import load_tokenizer
from c2jax.train import checkpoint
from c2jax.train.checkpoint import Checkpointer, load_variables
from c2jax.train.config import ConfigError
from c2jax.train.state import TrainState, placed

TX = optax.adamw(1e-3)


def _state(step: int) -> TrainState:
    """A small TrainState with real optimizer state; values depend on `step`."""
    params = {"w": jnp.arange(12.0).reshape(3, 4) * step, "norm": jnp.ones(4) + step}
    opt_state = TX.update(params, TX.init(params), params)[1]
    return TrainState(step=jnp.int32(step), params=params, opt_state=opt_state,
                      router_bias={"b": jnp.full((2, 8), 0.01 * step)},
                      rng=jax.random.key_data(jax.random.key(step)))


def _abstract() -> TrainState:
    device = jax.sharding.SingleDeviceSharding(jax.devices()[0])
    shapes = jax.eval_shape(lambda: _state(1))
    return placed(shapes, jax.tree.map(lambda _: device, shapes))


def _data_state(step: int) -> dict:
    return {"format": 1, "pipeline": {"seq_len": 64}, "grain": {"next_index": step * 8}}


@pytest.fixture
def tok(tokenizer_path):
    return load_tokenizer(tokenizer_path)


def _save(ckpt, step, config, tok):
    ckpt.save(_state(step), data_state=_data_state(step), config=config, tokenizer=tok)


def _assert_state_equal(a: TrainState, b: TrainState):
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_round_trip_and_keep_n(tmp_path, make_config, tok):
    config = make_config()
    ckpt = Checkpointer(tmp_path, keep=2, async_save=True)
    for step in (1, 2, 3, 4):
        _save(ckpt, step, config, tok)
    ckpt.wait()
    assert ckpt.steps() == [3, 4]
    restored = ckpt.restore_latest(_abstract(), config.model)
    ckpt.close()
    assert restored.step == 4
    _assert_state_equal(restored.state, _state(4))
    assert restored.data_state == _data_state(4)
    assert restored.config == checkpoint.config_json(config)
    saved_tok = load_tokenizer(checkpoint.saved_tokenizer_dir(ckpt.step_dir(4)))
    assert saved_tok.fingerprint() == tok.fingerprint()
    text = "def f(x):\n    return x  # é"
    assert saved_tok.encode(text) == tok.encode(text)


def test_truncated_latest_falls_back_to_previous(tmp_path, make_config, tok, caplog):
    config = make_config()
    ckpt = Checkpointer(tmp_path, keep=3, async_save=True)
    for step in (1, 2):
        _save(ckpt, step, config, tok)
    ckpt.wait()
    ckpt.close()
    # Truncate every array data file of the newest checkpoint, as a disk-full or a crash
    # outside orbax's atomic rename would leave it.
    data_files = [p for p in (tmp_path / "checkpoints" / "2" / "variables").rglob("*")
                  if p.is_file() and p.parent.name == "d"]
    assert data_files
    for path in data_files:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])

    ckpt = Checkpointer(tmp_path, keep=3, async_save=True)
    with caplog.at_level(logging.WARNING):
        restored = ckpt.restore_latest(_abstract(), config.model)
    assert restored.step == 1
    _assert_state_equal(restored.state, _state(1))
    assert restored.data_state == _data_state(1)
    warning = " ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "step 2" in warning and "falling back to the previous checkpoint" in warning
    assert ckpt.steps() == [1]
    assert (tmp_path / checkpoint.CORRUPT_DIR / "2").is_dir()      # kept for inspection
    _save(ckpt, 2, config, tok)                                     # the step can be redone
    ckpt.wait()
    assert ckpt.steps() == [1, 2]
    ckpt.close()


def test_a_different_model_is_refused_not_quarantined(tmp_path, make_config, tok):
    ckpt = Checkpointer(tmp_path, keep=2, async_save=False)
    _save(ckpt, 1, make_config(), tok)
    other = make_config(model={"hidden_size": 32})
    with pytest.raises(ConfigError, match=r"different model \(hidden_size: saved 64, now 32\)"):
        ckpt.restore_latest(_abstract(), other.model)
    assert ckpt.steps() == [1]
    ckpt.close()


def test_load_variables_from_workdir_and_model_directory(tmp_path, make_config, tok):
    config = make_config()
    ckpt = Checkpointer(tmp_path / "run", keep=2, async_save=False)
    for step in (1, 2):
        _save(ckpt, step, config, tok)
    ckpt.close()
    abstract = _abstract()
    target = {"params": abstract.params, "router_bias": abstract.router_bias}
    variables, source = load_variables(tmp_path / "run", target)
    assert source == tmp_path / "run" / "checkpoints" / "2"
    _assert_state_equal(variables["params"], _state(2).params)

    save_model(str(tmp_path / "model"), config.model,
               {"params": _state(5).params, "router_bias": _state(5).router_bias})
    variables, _ = load_variables(tmp_path / "model", target)
    _assert_state_equal(variables["router_bias"], _state(5).router_bias)

    with pytest.raises(ConfigError, match="holds no checkpoints"):
        load_variables(tmp_path / "model" / "variables", target)
