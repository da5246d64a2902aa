"""FLOPs, traffic and ranking of the planner on the real K2 config, without devices."""
import subprocess
import sys

import pytest

from c2jax import flops, sharding
from c2jax.planner import comms, hardware, layouts, memory, workload
from configs import pretrain_k2, rl_k2
from configs.models import kimi_k2_1t

REPO = __file__.rsplit("/tests/", 1)[0]


@pytest.fixture(scope="module")
def k2_pretrain():
    return workload.from_config(pretrain_k2.get_config(), num_processes=256)


def _sizes(**axes):
    return {a: axes.get(a, 1) for a in sharding.MESH_AXES}


def test_flops_match_c2jax_flops_when_the_batch_splits_evenly(k2_pretrain):
    sizes = _sizes(fsdp=4, context=4, expert=64, tensor=2)           # 2048 devices
    per_device = layouts.flops_per_device(k2_pretrain, sizes)
    total = flops.training_flops_per_token(k2_pretrain.model, 32768) * k2_pretrain.tokens_per_step
    assert per_device * 2048 == pytest.approx(total, rel=1e-9)


def test_replicated_rows_cost_every_replica_the_whole_row():
    # One row per microbatch cannot be split over the batch axes: each of them computes it.
    work = workload.from_config(rl_k2.get_config(), num_processes=32, model=kimi_k2_1t())
    assert work.rows == 1 and work.microbatches == 512
    per_device = layouts.flops_per_device(work, _sizes(fsdp=4, expert=64))
    per_row = flops.training_flops_per_token(work.model, work.seq_len) * work.seq_len
    assert per_device == pytest.approx(per_row * 512, rel=1e-9)


def test_traffic_is_zero_on_unused_axes_and_ring_sized(k2_pretrain):
    only_fsdp = comms.bytes_per_step(k2_pretrain, _sizes(fsdp=8))
    assert only_fsdp["tp_all_reduce"] == only_fsdp["ep_all_to_all"] == 0
    assert only_fsdp["cp_all_gather"] == only_fsdp["dp_all_reduce"] == 0
    leaves = memory.leaves_on(k2_pretrain.model, k2_pretrain.rules, _sizes(fsdp=8))
    gathered = sum(leaf.gathered_elems for leaf in leaves if leaf.gathered_elems != leaf.shard_elems)
    # A ring all-gather over 8 brings in 7/8 of every FSDP-sharded weight, twice (bf16).
    assert only_fsdp["fsdp_all_gather"] == pytest.approx(2 * 2 * gathered * 7 / 8, rel=1e-9)
    with_tp = comms.bytes_per_step(k2_pretrain, _sizes(fsdp=4, tensor=2))
    assert with_tp["tp_all_reduce"] > 0


def test_links_inside_a_node_are_nvlink():
    b200 = hardware.get("b200")
    sizes = _sizes(fsdp=16, expert=4, tensor=2)
    assert layouts.link_bandwidth(sizes, "tensor", b200) == b200.nvlink_bandwidth
    assert layouts.link_bandwidth(sizes, "expert", b200) == b200.nvlink_bandwidth   # 4 x 2
    assert layouts.link_bandwidth(sizes, "fsdp", b200) == b200.network_bandwidth


def test_ranking_puts_fitting_layouts_first_fastest_first(k2_pretrain):
    plans = layouts.rank_layouts(k2_pretrain, hardware.get("b200"), 4096,
                                 remat_policies=("none", "full"))
    fitting = [p for p in plans if p.fits]
    assert fitting and plans[:len(fitting)] == fitting
    assert [p.step_seconds for p in fitting] == sorted(p.step_seconds for p in fitting)
    assert all(p.memory.total <= 0.9 * 180e9 for p in fitting)
    assert {p.remat_policy for p in plans} == {"none", "full"}
    for p in plans:
        assert p.sizes["tensor"] <= 8 and 384 % p.sizes["expert"] == 0


def test_unknown_hardware_and_missing_precision_are_clear_errors():
    with pytest.raises(ValueError, match="unknown hardware 'tpu9'"):
        hardware.get("tpu9")
    with pytest.raises(ValueError, match="h100 has no fp4"):
        hardware.get("h100").flops("nvfp4")


def test_plan_command_reports_the_k2_rl_config():
    done = subprocess.run(
        [sys.executable, "-m", "experiments.plan", "--config=configs/rl_k2.py",
         "--hardware=b200", "--devices=2048", "--top=3"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    out = done.stdout
    assert "## Plan: kimi_k2_1t (1026.4B total, 32.9B active) on 2048 x b200" in out
    assert "| fsdp_all_gather |" in out and "| ep_all_to_all |" in out
