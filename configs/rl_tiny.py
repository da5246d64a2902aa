"""Stage B in miniature, the demo: async RL of the tiny K2-style MoE on mini:train.

    python -m experiments.rl --config=configs/rl_tiny.py --workdir=runs/rl_tiny

With `init_from` empty it first runs the tiny warm start once (pretrain on the stdlib, long
context, SFT on oracle trajectories of mini:train; cached under .cache/warm_start), evaluates
it on held-out mini:test tasks (mean@1 and best-of-8), runs async RL with in-flight weight
updates and routing replay, and evaluates again. `make demo` runs exactly this. Sizes are
chosen for ~15 minutes on 2 CPU cores; the cluster recipe is configs/rl_k2.py.

    python -m experiments.rl --config=configs/rl_tiny.py:induction --workdir=runs/rl_induction

`:induction` swaps in the warm start that can copy from its context (`INDUCTION_WARM_START`):
a first stage of synthetic copy documents forms the induction circuit, pretraining keeps it
with copies mixed in, and every stage uses the settings under which the tiny model learns it
on the copy toy (a 32-dim rotary key, tied embeddings, a 64-wide KV latent, no MTP; AdamW with
b2 0.999 and no decay, clipping or cosine). 23 minutes on 2 cores instead of 15, and
it does not resolve a mini:test task either (BENCHMARKS.md, "Induction through the
pretraining pipeline").

    python -m experiments.rl --config=configs/rl_tiny.py:understanding --workdir=runs/rl_und

`:understanding` narrows the recipe to the one category of mini tasks such a policy can reach:
questions about the code, answered by listing, reading, running the call and copying the
value into `finish`. The induction warm start's SFT learns only those oracle trajectories, as
bare calls and with made-up package names, RL trains on mini:train's understanding tasks and
evaluation covers all 40 of mini:test's. It resolves none of them yet (BENCHMARKS.md, "The
understanding questions").

    python -m experiments.rl --config=configs/rl_tiny.py:runcall --workdir=runs/rl_runcall

`:runcall` is `:understanding` with SFT on the scripted `runcall` agent's resolved episodes
(cursorbench/runcall.py) instead of the oracle's: two calls, one fixed command that runs the
expression the question names and a finish that repeats the printed value, so the policy only
has to copy the expression and the value, never find or compose a path. The agent itself
answers 31 of mini:test's 40 understanding questions (8 of the others ask for a constant by
its meaning). Its warm start resolves mini:test questions (6 of 40 greedy). RL raised mean@1 and
best-of-8 with seed 0 (3.1% -> 7.2%, 20% -> 22.5% in 40 steps, intervals overlapping) and
lowered both with seed 1 (BENCHMARKS.md, "The first resolved mini:test tasks"). On 200
questions (`--config.eval.suite=mini:test:1000`) no RL variant tried moves either metric
beyond the noise: every run halves the attempts that leave the fixed command, and the copy
of the question's expression, which RL does not improve, then fails instead (BENCHMARKS.md,
"Dynamic sampling, the learner's temperature, and where the policy fails").
"""
from c2jax.rl.config import rl_config

#: `warm_start` fields of the `:induction` variant.
INDUCTION_WARM_START = dict(
    model=dict(qk_rope_head_dim=32, kv_lora_rank=64, tie_word_embeddings=True,
               num_mtp_layers=0),
    optimizer=dict(b2=0.999, weight_decay=0.0, grad_clip_norm=0.0, min_lr_ratio=1.0),
    induction_steps=2500, pretrain_steps=600, pretrain_learning_rate=1e-3,
    copy_fraction=0.99, copy_block=(8, 120), sft_steps=750, sft_learning_rate=1e-3)
#: The `:understanding` variant: the induction warm start, its SFT on the oracle trajectories
#: of mini:train's understanding questions only (400 of 2,000 tasks), RL on those questions and
#: evaluation on all 40 of mini:test. They are the one category a copying 64-wide policy can
#: answer: list, read, run the call (`run_terminal`), copy the printed value into `finish`.
UNDERSTANDING = ("understanding",)
VARIANTS = ("", "induction", "understanding", "runcall")


def get_config(arg=None):
    if (arg or "") not in VARIANTS:
        raise ValueError(f"configs/rl_tiny.py:{arg}: choose one of {VARIANTS[1:]} or none")
    config = _demo()
    if arg in ("induction", "understanding", "runcall"):
        config.warm_start.update(INDUCTION_WARM_START)
    if arg in ("understanding", "runcall"):
        # the oracle's calls without its reasoning, each conversation twice with made-up
        # package and module names; copy documents in the SFT mix keep the induction circuit
        config.warm_start.update(sft_tasks=2000, sft_categories=UNDERSTANDING, sft_steps=1500,
                                 sft_thoughts=False, sft_fresh_names=2, sft_copy_fraction=0.5)
        config.tasks.update(suite="mini:train:2000", categories=UNDERSTANDING)
        config.eval.update(categories=UNDERSTANDING, tasks=0)
        # the oracle's run_terminal turns are up to 343 characters (~110 tokens); its
        # answers take 3-5 turns, so 8 leave room for a few failed ones
        config.rollout.update(max_new_tokens=160, max_turns=8)
    if arg == "runcall":
        # SFT on the scripted agent's two-call answers (cursorbench/runcall.py) instead: no
        # path to find, only the expression and the printed value to copy
        config.warm_start.update(sft_agent="runcall", sft_fresh_names=0)
        # its command is ~200 characters plus the expression (<= 120): ~110-150 tokens
        config.rollout.update(max_new_tokens=192, max_turns=4)
        # groups of 8: with a few percent of attempts resolved, groups of 4 mostly hold no
        # success to compare against (BENCHMARKS.md, "The first resolved mini:test tasks")
        config.learner.update(group_size=8, steps=40)
    return config


def _demo():
    return rl_config(
        actor=dict(num_actors=1, envs_per_actor=8, slots=8, max_len=2048, steps_per_call=8),
        # 96 tokens cut 70% of the oracle's edit_file turns (docs/rl.md, "The demo"); 192
        # measured +8% on evaluation + RL, not yet re-timed from scratch against the 15 min.
        rollout=dict(max_new_tokens=96, temperature=1.0, context="summarise",
                     summary_max_tokens=96, max_turns=6),
        tasks=dict(suite="mini:train:400"),
        learner=dict(steps=10, groups_per_step=4, group_size=4, microbatch_rows=2,
                     routing_replay=True),
        staleness=dict(eta=2, max_running_groups=6),
        eval=dict(suite="mini:test", tasks=8, k=8, temperature=1.0, workers=8),
        checkpoint=dict(every=4, keep=2))
