"""The entry points as a user runs them (subprocesses), and the cluster configs.

- A run killed with SIGKILL after a checkpoint and restarted logs exactly the losses of an
  uninterrupted run, step for step.
- A typo in a config field, an impossible input or a half-given multi-process setup ends in a
  one-line message, no traceback.
- The K2 sibling configs build and lower their sharded train step on a fake 8-device mesh,
  with abstract parameters only (a 1T-parameter state is never allocated).
"""
import importlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from c2jax import flops, sharding
from c2jax.train.config import validate
from c2jax.train.loop import build_steps
from c2jax.train.metrics import METRICS_FILE, read_records
from tests.train.conftest import config_overrides

REPO = Path(__file__).resolve().parents[2]
STEPS, CHECKPOINT_AT = 60, 6


def _command(module, config, workdir, *extra):
    return [sys.executable, "-m", module, f"--config={config}", f"--workdir={workdir}", *extra]


def _pretrain(workdir, corpus_dir, tokenizer_path):
    return _command("experiments.pretrain", "configs/pretrain_tiny.py", workdir,
                    *config_overrides(corpus_dir, tokenizer_path),
                    f"--config.train.steps={STEPS}", "--config.train.log_every=1",
                    "--config.train.eval_every=0",
                    f"--config.train.checkpoint_every={CHECKPOINT_AT}")


def _losses(workdir):
    return [(r["step"], r["loss"]) for r in read_records(workdir / METRICS_FILE) if "loss" in r]


def test_sigkill_and_restart_reproduces_the_uninterrupted_losses(tmp_path, corpus_dir,
                                                                 tokenizer_path, subprocess_env):
    reference = tmp_path / "reference"
    subprocess.run(_pretrain(reference, corpus_dir, tokenizer_path), cwd=REPO,
                   env=subprocess_env, check=True, capture_output=True)
    expected = _losses(reference)
    assert [s for s, _ in expected] == list(range(1, STEPS + 1))

    killed = tmp_path / "killed"
    process = subprocess.Popen(_pretrain(killed, corpus_dir, tokenizer_path), cwd=REPO,
                               env=subprocess_env, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    checkpoint_dir = killed / "checkpoints" / str(CHECKPOINT_AT)
    deadline = time.monotonic() + 300
    # Kill once the checkpoint is complete (orbax renames it into place when it is) and the
    # run has gone past it, so the restart must discard steps the killed run already logged.
    while time.monotonic() < deadline and process.poll() is None:
        if checkpoint_dir.is_dir() and (killed / METRICS_FILE).exists() and \
                _losses(killed) and _losses(killed)[-1][0] > CHECKPOINT_AT + 1:
            break
        time.sleep(0.02)
    assert process.poll() is None, "the run finished before it could be killed"
    os.kill(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL
    killed_at = _losses(killed)[-1][0]
    assert CHECKPOINT_AT < killed_at < STEPS

    restarted = subprocess.run(_pretrain(killed, corpus_dir, tokenizer_path), cwd=REPO,
                               env=subprocess_env, check=True, capture_output=True, text=True)
    resumed_from = int(re.search(r"from the checkpoint at step (\d+)", restarted.stderr)[1])
    assert CHECKPOINT_AT <= resumed_from < killed_at
    assert _losses(killed) == expected              # exactly, step for step


def test_config_typo_is_one_line(tmp_path, subprocess_env):
    done = subprocess.run(_command("experiments.pretrain", "configs/pretrain_tiny.py", tmp_path,
                                   "--config.train.stpes=3"),
                          cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert "the config has no field 'stpes'" in done.stderr
    assert 'Did you mean "steps"' in done.stderr


def test_half_given_multi_process_setup_is_one_line(tmp_path, subprocess_env):
    done = subprocess.run(_command("experiments.pretrain", "configs/pretrain_tiny.py", tmp_path,
                                   "--config.distributed.process_id=1"),
                          cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: [distributed] distributed.process_id = 1 is set")


def test_bad_input_is_one_line_and_sft_needs_conversations(tmp_path, corpus_dir,
                                                           tokenizer_path, subprocess_env):
    beyond_rope = subprocess.run(
        _command("experiments.pretrain", "configs/pretrain_tiny.py", tmp_path,
                 *config_overrides(corpus_dir, tokenizer_path), "--config.data.seq_len=512"),
        cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert beyond_rope.returncode == 1 and "Traceback" not in beyond_rope.stderr
    assert beyond_rope.stderr.strip().splitlines()[-1].startswith(
        "error: data.seq_len = 512 is beyond the model's rope range")

    sft_on_source_files = subprocess.run(
        _command("experiments.sft", "configs/sft_tiny.py", tmp_path,
                 f"--config.data.source={corpus_dir}"),
        cwd=REPO, env=subprocess_env, capture_output=True, text=True)
    assert sft_on_source_files.returncode == 1 and "Traceback" not in sft_on_source_files.stderr
    assert "SFT trains on conversations" in sft_on_source_files.stderr


#: Meshes of 8 fake devices for the cluster configs: every kind of parallelism they use.
K2_TEST_MESHES = {"pretrain_k2": {"fsdp": 2, "expert": 4},
                  "longctx_k2": {"fsdp": 1, "context": 2, "expert": 4},
                  "sft_k2": {"fsdp": 2, "expert": 4}}
#: Without context parallelism, causal attention is traced as one Python-level query block per
#: `attention_block_size` rows, so tracing time grows with the length (32k: ~40 s here) while
#: the sharded program's structure does not; those configs are validated at their own length
#: and lowered at K2's original 4k. The context-parallel one is lowered at its full 256k.
LOWER_SEQ_LEN = {"pretrain_k2": 4096, "sft_k2": 4096}


@pytest.mark.parametrize("name", sorted(K2_TEST_MESHES))
def test_k2_configs_build_and_lower_their_sharded_train_step(name):
    config = importlib.import_module(f"configs.{name}").get_config()
    with config.unlocked():
        config.mesh.update(K2_TEST_MESHES[name])
        if config.stage == "sft":
            config.data.source = "conversations.jsonl"
    validate(config, num_devices=8)
    with config.unlocked():
        config.data.seq_len = LOWER_SEQ_LEN.get(name, config.data.seq_len)
    steps = build_steps(config, sharding.make_mesh(config.mesh))

    counts = flops.param_counts(config.model)
    n_params = sum(int(np.prod(leaf.shape)) for leaf in jax.tree.leaves(
        steps.abstract_state.params))
    assert n_params == counts["total"] + counts["mtp"]              # ~1.03e12, never allocated
    experts = steps.abstract_state.params["moe_layers"]["layer"]["mlp"]["experts"]["up_proj"]
    assert experts.sharding.spec[1] == "expert"
    # float32 master weights and moments, bfloat16 compute inside the step.
    assert config.model.dtype == "bfloat16"
    assert {leaf.dtype for leaf in jax.tree.leaves(steps.abstract_state.params)} == {
        np.dtype("float32")}
    lowered = steps.train_step.lower(steps.abstract_state, steps.abstract_batch)
    text = lowered.as_text()
    assert "all_to_all" in text                                     # expert parallelism
    assert "bf16" in text
    assert steps.abstract_batch["tokens"].shape == (config.data.batch_size, config.data.seq_len)
