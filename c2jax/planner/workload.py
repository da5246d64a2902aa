"""What one optimizer step of a run computes: the model, the batch shape, the microbatches.

    workload = from_config(config, num_processes, model=None)

A stage config (`configs/pretrain_k2.py`, `longctx_k2.py`, `sft_k2.py`) trains
`data.batch_size` rows of `data.seq_len` tokens per process (the train loop's global batch is
`batch_size * process_count`) in one forward/backward. An RL config (`configs/rl_k2.py`) has no
model section (the policy comes from `init_from`), so the model is passed in; its learner
scans `learner.microbatch_rows` rows of `actor.max_len` tokens at a time, summing gradients,
over the `groups_per_step * group_size` episodes of a step (one segment each, every row padded
to full length: the planner's upper bound), rounded up to a power of two of microbatches as
`c2jax.rl.learner.make_batch` does.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Workload:
    kind: str                   # "pretrain" | "longctx" | "sft" | "rl"
    model: object               # model ConfigDict
    rules: tuple                # logical-axis rules of the run's mesh config
    rows: int                   # global rows of one forward/backward pass
    seq_len: int
    microbatches: int           # forward/backward passes per optimizer step
    accumulates_gradients: bool  # a float32 gradient accumulator lives across microbatches
    proximal_forward: bool      # an extra forward per row (decoupled PPO, updates_per_batch > 1)
    fused_attention: bool = False  # what-if: attention scores never materialised (no such
                                   # kernel in c2jax yet; see c2jax/planner/memory.py)

    @property
    def tokens_per_step(self) -> int:
        return self.rows * self.seq_len * self.microbatches


def _power_of_two(n: int) -> int:
    return 1 << (max(1, n) - 1).bit_length()


def from_config(config, num_processes: int, model=None) -> Workload:
    """The workload of a stage or RL config; `model` replaces (or, for RL, supplies) the model
    config. num_processes: host processes of the run (the stage's batch is per process)."""
    if "learner" in config:                                      # an RL config
        if model is None:
            raise ValueError("an RL config has no model section (the policy comes from "
                             "init_from): pass the model config")
        learner = config.learner
        episodes = learner.groups_per_step * learner.group_size
        return Workload(kind="rl", model=model, rules=tuple(config.mesh.rules),
                        rows=learner.microbatch_rows, seq_len=config.actor.max_len,
                        microbatches=_power_of_two(-(-episodes // learner.microbatch_rows)),
                        accumulates_gradients=True,
                        proximal_forward=learner.updates_per_batch > 1)
    return Workload(kind=config.stage, model=model if model is not None else config.model,
                    rules=tuple(config.mesh.rules),
                    rows=config.data.batch_size * num_processes, seq_len=config.data.seq_len,
                    microbatches=1, accumulates_gradients=False, proximal_forward=False)
