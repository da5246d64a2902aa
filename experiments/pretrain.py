"""Pretraining stages (phase 1, and the long-context phase 2): config -> `c2jax.train.loop.train`.

    python -m experiments.pretrain --config=configs/pretrain_tiny.py --workdir=runs/pretrain_tiny
    python -m experiments.pretrain --config=configs/longctx_tiny.py:runs/pretrain_tiny \\
        --workdir=runs/longctx_tiny

Override any config field with `--config.<section>.<field>=value`. Rerunning with the same
`--workdir` resumes from its newest checkpoint. Several processes (one per host): start the
same command on each with `--config.distributed.coordinator_address=HOST:PORT
--config.distributed.num_processes=N --config.distributed.process_id=I` (or JAX_* variables,
or under srun / mpirun nothing; c2jax/distributed.py). Metrics: WORKDIR/metrics.jsonl and
WORKDIR/tensorboard/. A config or input that cannot work exits with a one-line message.
"""
from __future__ import annotations

import sys

from absl import app, flags, logging
from ml_collections import config_flags

from c2jax import distributed
from c2jax.train.config import ConfigError
from experiments.cli import QuietOrbax, parse_flags
from c2jax.train.loop import NonFiniteLossError, train

_CONFIG = config_flags.DEFINE_config_file(
    "config", None, "stage config file, e.g. configs/pretrain_tiny.py (optionally :ARG)")
_WORKDIR = flags.DEFINE_string("workdir", None, "directory for checkpoints and metrics; an "
                               "existing one is resumed")
flags.mark_flags_as_required(["config", "workdir"])


def stage_main(stages: tuple[str, ...]):
    """The absl main of an entry point that runs configs whose `stage` is in `stages`."""

    def main(argv):
        if len(argv) > 1:
            raise app.UsageError(f"unexpected arguments: {argv[1:]}")
        logging.get_absl_handler().addFilter(QuietOrbax())
        config = _CONFIG.value
        if config.stage not in stages:
            sys.exit(f"error: {sys.argv[0]} runs stages {stages}, but the config is a "
                     f"{config.stage!r} stage")
        try:
            distributed.initialize(config.distributed)
        except ValueError as e:   # a half-given multi-process setup
            sys.exit(f"error: [distributed] {e}")
        try:
            result = train(config, _WORKDIR.value)
        except (ConfigError, NonFiniteLossError) as e:
            sys.exit(f"error: {e}")
        print(f"{config.stage} finished at step {result.step}: train {result.train_metrics}; "
              f"eval {result.eval_metrics}")

    return main


if __name__ == "__main__":
    app.run(stage_main(("pretrain", "longctx")), flags_parser=parse_flags)
