"""Stage B at cluster scale: async RL of Kimi K2 (1T MoE) in sandboxed coding environments.

    python -m experiments.rl --config=configs/rl_k2.py --workdir=/runs/k2_rl \\
        --config.init_from=/runs/k2_sft --config.tasks.suite=/data/tasks/train \\
        --config.runtime.ray_address=HEAD:6379

The Composer 2 recipe at its real shape: a 256-device learner mesh (fsdp 4 x expert 64),
actors as Ray actors on their own nodes (one engine each, 64 environments, bf16 compute) that
receive every new version in flight, eta = 4 versions of staleness, groups of 8 attempts,
self-summarisation past 96k tokens of a 128k context, routing replay on. Not run here: the
tests validate it; the sizes of the mesh and the fleet are the knobs to change for another
cluster. Export RAY_AUTH_MODE=token and the cluster's RAY_AUTH_TOKEN before starting.
"""
from c2jax.rl.config import rl_config
from c2jax.sharding import mesh_config


def get_config(arg=None):
    del arg
    return rl_config(
        init_from="",                 # required: the SFT checkpoint (configs/sft_k2.py)
        warm_start=dict(pretrain_steps=1),  # unused: init_from is always given at this scale
        tasks=dict(suite="", sandbox="bwrap"),
        actor=dict(num_actors=32, envs_per_actor=64, slots=64, max_len=131072,
                   steps_per_call=16, dtype="bfloat16"),
        rollout=dict(max_new_tokens=8192, temperature=1.0, context="summarise",
                     context_budget=98304, summary_max_tokens=2048, max_summaries=8),
        learner=dict(steps=2000, groups_per_step=64, group_size=8, microbatch_rows=1,
                     updates_per_batch=1, routing_replay=True, devices=256),
        mesh=mesh_config(fsdp=4, expert=64),
        staleness=dict(eta=4, max_running_groups=512),
        optimizer=dict(learning_rate=1e-6, warmup_steps=20, weight_decay=0.0),
        eval=dict(suite="", tasks=0, k=8, workers=64),
        runtime=dict(backend="ray", ray_cpus_per_actor=16),
        checkpoint=dict(every=10, keep=3))
