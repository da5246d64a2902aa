"""An RL config over the toy digits environment (tests/rl/toy_envs.py), for the end-to-end
and kill/resume tests: pass the policy with `--config.init_from=MODEL_DIR`."""
from c2jax.rl.config import rl_config


def get_config(arg=None):
    del arg
    return rl_config(
        progress_bar=False,
        tasks=dict(suite="python:tests.rl.toy_envs:digits_source"),
        actor=dict(max_len=128, envs_per_actor=8, slots=8, steps_per_call=4),
        rollout=dict(max_new_tokens=8),
        learner=dict(steps=30, groups_per_step=4, group_size=4, microbatch_rows=8),
        staleness=dict(eta=1, max_running_groups=8),
        optimizer=dict(learning_rate=1e-2),
        eval=dict(suite=""),
        checkpoint=dict(every=3, keep=2))
