"""The loop end to end, in process: what a run writes, starting a stage from another run's
weights, the non-finite-loss policy, and bad inputs stopped with a message that names them."""
import json

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest

from c2jax.train.config import ConfigError
from c2jax.train.loop import NonFiniteLossError, train
from c2jax.train.metrics import METRICS_FILE, TENSORBOARD_DIR, read_records

TRAIN_KEYS = {"step", "loss", "tokens_per_sec", "mtp_loss_1", "grad_norm", "lr", "mfu",
              "dropped_fraction", "expert_load_max_over_mean/layer_1",
              "expert_load_max_over_mean/mtp_0", "finite", "z_loss", "objective"}


@pytest.fixture(scope="module")
def pretrained(make_config, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("pretrain")
    config = make_config(train={"steps": 4, "eval_every": 2, "eval_batches": 2,
                                "eval_position_buckets": (32,)})
    return config, workdir, train(config, workdir)


def test_a_run_writes_metrics_eval_and_checkpoints(pretrained):
    config, workdir, result = pretrained
    records = read_records(workdir / METRICS_FILE)
    train_records = [r for r in records if "loss" in r]
    eval_records = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in train_records] == [1, 2, 3, 4]
    for r in train_records:
        assert TRAIN_KEYS <= set(r) and r["finite"] == 1.0 and r["tokens_per_sec"] > 0
    assert [r["step"] for r in eval_records] == [0, 2, 4]
    for r in eval_records:
        assert {"eval_loss", "eval_mtp_loss_1", "eval_loss_positions_0_32",
                "eval_loss_positions_32_64"} <= set(r)
    assert eval_records[-1]["eval_loss"] < eval_records[0]["eval_loss"]
    assert list((workdir / TENSORBOARD_DIR).glob("events.out.tfevents.*"))
    assert sorted(int(p.name) for p in (workdir / "checkpoints").iterdir()) == [2, 4]
    saved = json.loads((workdir / "checkpoints" / "4" / "config" / "metadata").read_text())
    assert saved["train"]["steps"] == 4 and saved["stage"] == "pretrain"
    assert result.step == 4 and result.eval_metrics == {k: v for k, v in eval_records[-1].items()
                                                        if k != "step"}


def _saved_params(step_dir):
    with ocp.StandardCheckpointer() as checkpointer:
        return jax.device_get(checkpointer.restore(step_dir / "variables")["params"])


def test_init_from_starts_a_new_stage_from_the_weights(pretrained, make_config, tmp_path):
    _, source_dir, _ = pretrained
    # The first step runs at learning rate 0 (warmup starts at 0), so the checkpoint after it
    # holds exactly the weights the stage started from. (Same steps and warmup as the source
    # run, so the compiled train step is reused.)
    config = make_config(stage="longctx", train={"checkpoint_every": 1, "keep_checkpoints": 4,
                                                 "init_from": str(source_dir)})
    result = train(config, tmp_path)
    assert result.resumed_from is None
    assert read_records(tmp_path / METRICS_FILE)[0]["lr"] == 0.0
    started = _saved_params(tmp_path / "checkpoints" / "1")
    source = _saved_params(source_dir / "checkpoints" / "4")
    for a, b in zip(jax.tree.leaves(started), jax.tree.leaves(source)):
        np.testing.assert_array_equal(a, b)


def test_nonfinite_losses_stop_the_run_and_keep_the_last_good_checkpoint(make_config,
                                                                          tmp_path):
    # A learning rate of 1e30 blows the weights up in the first update; every later step is
    # non-finite and skipped, and the run stops after 3 in a row.
    config = make_config(optimizer={"learning_rate": 1e30, "warmup_steps": 0},
                         train={"steps": 10, "checkpoint_every": 1, "max_nonfinite_steps": 3})
    with pytest.raises(NonFiniteLossError) as error:
        train(config, tmp_path)
    records = read_records(tmp_path / METRICS_FILE)
    bad = [r["step"] for r in records if r.get("finite") == 0.0]
    assert len(bad) == 3 and bad == list(range(bad[0], bad[0] + 3))
    good = [r["step"] for r in records if r.get("finite") == 1.0]
    assert good == list(range(1, bad[0]))
    message = str(error.value)
    assert f"stopping at step {bad[-1]}" in message and "3 steps in a row" in message
    assert f"last good checkpoint is step {good[-1]}" in message
    assert sorted(int(p.name) for p in (tmp_path / "checkpoints").iterdir())[-1] == good[-1]


@pytest.fixture
def empty_corpus(tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "README.txt").write_text("no python here")
    (tmp_path / "empty.jsonl").write_text("\n\n")
    return tmp_path


@pytest.mark.parametrize("overrides, pattern", [
    ({"data": {"source": "{tmp}/empty"}}, r"\[data\] cannot open the train split: corpus "
                                          r"directory .*empty holds no files ending in"),
    ({"data": {"source": "{tmp}/empty.jsonl"}}, r"empty.jsonl holds no records"),
    ({"data": {"source": "{tmp}/missing"}}, r"data source .*missing does not exist"),
    ({"data": {"tokenizer": {"path": "{tmp}/tok.json"}}}, r"no tokenizer at .*tok.json"),
    ({"model": {"vocab_size": 256}}, r"the tokenizer has 512 ids but model.vocab_size = 256"),
])
def test_bad_inputs_are_named_before_anything_is_built(make_config, empty_corpus, overrides,
                                                       pattern):
    overrides = json.loads(json.dumps(overrides).replace("{tmp}", str(empty_corpus)))
    with pytest.raises(ConfigError, match=pattern):
        train(make_config(**overrides), empty_corpus / "run")
    assert not (empty_corpus / "run" / "checkpoints").exists()


@pytest.mark.parametrize("fraction, full_width", [(1.0, 0.0), (0.05, 1.0)])
def test_head_fraction_runs_the_same_losses(pretrained, make_config, tmp_path, fraction,
                                            full_width):
    """At fraction 1 every batch fits the head positions (the gathered-head step runs); at
    0.05 no packed pretraining row fits, so each step falls back to the full-width step. The
    losses are the pretrained fixture's either way."""
    _, reference_dir, _ = pretrained
    config = make_config(train={"steps": 4, "head_fraction": fraction})
    train(config, tmp_path)
    records = [r for r in read_records(tmp_path / METRICS_FILE) if "loss" in r]
    reference = [r for r in read_records(reference_dir / METRICS_FILE) if "loss" in r]
    assert [r["head_full_width"] for r in records] == [full_width] * 4
    np.testing.assert_allclose([r["loss"] for r in records], [r["loss"] for r in reference],
                               rtol=1e-5)
