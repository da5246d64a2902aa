"""Routing replay x staleness: the tiny RL recipe with and without routing replay, at
eta = 0 (synchronous), 2 and 4.

    python -m experiments.sweep --config=configs/sweeps/rl_replay_eta.py \\
        --workdir=runs/sweeps/rl_replay_eta

Every point is `configs/rl_tiny.py` (same learner steps, same warm start) without the
before/after evaluation, so a point is just the RL run (~5 minutes on 2 CPU cores). Each
point's config passes `c2jax.rl.config.validate` before anything runs (eta = 4 is admitted by
the staleness rule; `max_running_groups` = 6 caps what is in flight at every eta).
"""
from c2jax.sweep import sweep_spec


def get_config(arg=None):
    del arg
    return sweep_spec(
        entry="experiments.rl",
        base_config="configs/rl_tiny.py",
        fixed={"eval.suite": "", "eval.before": False, "progress_bar": False},
        grid={"learner.routing_replay": [True, False], "staleness.eta": [0, 2, 4]},
        metrics={
            "reward": "reward/mean",                       # the last step's groups
            "reward_mean": "mean:reward/mean",             # over all steps
            "mismatch_kl": "mean:learner/mismatch_kl",     # actor vs learner log-probs
            "is_weight_max": "max:learner/is_weight_max",
            "clip_fraction": "mean:learner/clip_fraction",
            "staleness": "mean:staleness/mean",            # token lag behind the learner
            "idle": "mean:learner/idle_fraction",
            "traj_per_s": "sum:episodes/trained / sum:learner/step_seconds",
        },
        plot=dict(x="staleness.eta", y=("reward_mean", "mismatch_kl", "traj_per_s"),
                  group="learner.routing_replay"),
        validate="c2jax.rl.config:validate",
    )
