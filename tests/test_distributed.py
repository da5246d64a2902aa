"""Where a multi-process setup comes from (config, JAX_* variables, SLURM / Open MPI), what a
half-given one says, and the config sections that carry it. The processes themselves run in
tests/train/test_multiprocess.py."""
import jax
import pytest

from c2jax import distributed
from c2jax.distributed import Plan, distributed_config, plan
from c2jax.rl.config import rl_config, validate as validate_rl
from c2jax.train.config import ConfigError, stage_config, validate as validate_stage

SLURM = {"SLURM_JOB_ID": "77", "SLURM_STEP_NODELIST": "node[003-004]", "SLURM_NTASKS": "4",
         "SLURM_PROCID": "2", "SLURM_LOCALID": "0"}


def test_nothing_anywhere_is_one_process_and_initializes_nothing():
    assert plan(distributed_config(), {}) == Plan(1, 0, None, None, None)
    assert plan(distributed_config(num_processes=1), {}).num_processes == 1
    assert distributed.initialize(distributed_config(), {}).num_processes == 1
    assert not jax.distributed.is_initialized()


def test_config_then_environment():
    env = {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "1",
           "JAX_COORDINATOR_ADDRESS": "10.0.0.1:1234", "JAX_LOCAL_DEVICE_IDS": "2,3"}
    assert plan(distributed_config(), env) == Plan(2, 1, "10.0.0.1:1234", (2, 3), None)
    given = distributed_config(num_processes=4, process_id=0, coordinator_address="h:99",
                               local_device_ids=(0,))
    assert plan(given, env) == Plan(4, 0, "h:99", (0,), None)


def test_a_launcher_provides_what_is_not_given():
    # jax's SLURM detection fills the id and coordinator in; a count that disagrees is refused.
    assert plan(distributed_config(), SLURM) == Plan(4, None, None, None, "slurm")
    assert plan(distributed_config(process_id=2), SLURM).process_id == 2
    with pytest.raises(ValueError, match="the slurm launcher started 4 processes"):
        plan(distributed_config(num_processes=2), SLURM)
    assert plan(distributed_config(), {**SLURM, "SLURM_NTASKS": "1"}).num_processes == 1
    ompi = {"OMPI_MCA_orte_hnp_uri": "1.2.3.4;tcp://10.0.0.1:5000", "OMPI_COMM_WORLD_SIZE": "3"}
    assert plan(distributed_config(), ompi) == Plan(3, None, None, None, "ompi")


@pytest.mark.parametrize("cfg, env, message", [
    (dict(process_id=1), {}, "process_id = 1 is set .* the number of processes is not"),
    ({}, {"JAX_COORDINATOR_ADDRESS": "h:1"}, "coordinator_address = 'h:1' is set"),
    (dict(num_processes=2), {"JAX_COORDINATOR_ADDRESS": "h:1"},
     r"needs process_id \(--config.distributed.process_id or JAX_PROCESS_ID\)"),
    (dict(num_processes=2, process_id=0), {}, "needs coordinator_address"),
    ({}, {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "2", "JAX_COORDINATOR_ADDRESS": "h:1"},
     r"process_id = 2 must be in \[0, 2\)"),
    ({}, {"JAX_NUM_PROCESSES": "two"}, "JAX_NUM_PROCESSES='two' is not an integer"),
    ({}, {"JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0", "JAX_COORDINATOR_ADDRESS": "h"},
     "must be HOST:PORT"),
])
def test_a_half_given_setup_names_what_is_missing(cfg, env, message):
    with pytest.raises(ValueError, match=message):
        plan(distributed_config(**cfg), env)


@pytest.mark.parametrize("fields, message", [
    (dict(num_processes=-1), "'num_processes' = -1"),
    (dict(process_id=-2), "'process_id' = -2"),
    (dict(num_processes=2, process_id=2), "must be below num_processes=2"),
    (dict(coordinator_address="10.0.0.1"), "must be HOST:PORT"),
    (dict(local_device_ids=(0, 0)), "'local_device_ids'"),
    (dict(initialization_timeout=0), "'initialization_timeout' = 0"),
])
def test_stage_and_rl_configs_validate_the_section(fields, message):
    with pytest.raises(ConfigError, match=rf"\[distributed\] .*{message}"):
        validate_stage(stage_config(stage="pretrain",
                                    distributed=distributed_config(**fields)), 1)
    with pytest.raises(ConfigError, match=rf"\[distributed\] .*{message}"):
        validate_rl(rl_config(distributed=fields))

