"""The RL config: one locked ConfigDict that fully describes an RL run, and its validation.

    config.init_from    the policy to start from (training workdir, step dir, model dir);
                        "" = the tiny warm start of experiments/rl.py (pretrain + SFT, cached)
    config.warm_start   that warm start: stage lengths, model (warm_start.model), optimizer
                        (warm_start.optimizer), the induction stage and copy documents
    config.tasks        which tasks the actors train on (a cursorbench suite spec)
    config.actor        actors, environments, sampler shape, actor compute dtype
    config.rollout      per-episode behaviour: tokens per turn, temperature, context strategy
    config.learner      steps, group size and count per step, microbatching, routing replay
    config.staleness    eta (0 = synchronous) and the in-flight cap
    config.mesh         c2jax.sharding.mesh_config()    the learner's mesh over learner.devices
    config.loss         c2jax.rl.losses.loss_config()   decoupled PPO / GSPO / CISPO, TIS, ...
    config.rewards      c2jax.rl.rewards.reward_config()  shaped reward terms
    config.optimizer    c2jax.train.config.optimizer_config()
    config.eval         held-out evaluation before and after RL (mean@1, best-of-k)
    config.runtime      "inprocess" (threads) | "ray"
    config.checkpoint   how often, how many; the run resumes from WORKDIR automatically
    config.distributed  c2jax.distributed.distributed_config()  the jax processes (empty: the
                        environment's); the loop itself runs in one (`loop.require_one_process`)

`configs/rl_tiny.py` (the demo) and `configs/rl_k2.py` (the cluster recipe) build one with
`rl_config(...)`. Every section is locked: a misspelt field is an error naming it.
"""
from __future__ import annotations

import ml_collections

from c2jax import cpu_affinity, sharding
from c2jax.distributed import distributed_config, validate as validate_distributed
from c2jax.model import model_config, validate as validate_model
from c2jax.rl.losses import loss_config, validate_loss_config
from c2jax.rl.rewards import LENGTH_FUNCTIONS, reward_config
from c2jax.rl.rollout import CONTEXT_STRATEGIES
from c2jax.train.config import ConfigError, optimizer_config
from environments.task import CATEGORIES

#: Agents whose trajectories the warm start's SFT can learn (`warm_start.sft_agent`).
SFT_AGENTS = ("oracle", "runcall")

RUNTIMES = ("inprocess", "ray")
ACTOR_DTYPES = ("float32", "bfloat16")


def _section(**fields) -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict(fields)
    c.lock()
    return c


#: Model config fields `warm_start.model` sets (defaults: the `tiny` preset's). The tiny
#: warm start reproduces no agent turn exactly; 128 wide and 4 deep it reproduces most first
#: turns, at about 3x the time (BENCHMARKS.md, "RL (issue #7)"). Tied embeddings with a
#: 64-wide KV latent let the tiny model learn a positional copy over 8,192 ids, which the
#: untied preset never does (experiments/copy_toy.py; BENCHMARKS.md, "The copy toy").
WARM_START_MODEL_FIELDS = ("hidden_size", "num_hidden_layers", "intermediate_size",
                           "num_attention_heads", "q_lora_rank", "kv_lora_rank",
                           "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                           "n_routed_experts", "num_experts_per_tok", "n_group", "topk_group",
                           "moe_intermediate_size", "tie_word_embeddings", "num_mtp_layers")
#: Optimizer fields `warm_start.optimizer` sets for all three stages (defaults: the stage
#: default, c2jax.train.config.optimizer_config). On the copy toy, the default's b2 0.95 and
#: decay keep the tiny model from forming induction heads (BENCHMARKS.md, "The copy toy").
WARM_START_OPTIMIZER_FIELDS = ("b2", "weight_decay", "grad_clip_norm", "min_lr_ratio")


def rl_config(**sections) -> ml_collections.ConfigDict:
    """The default RL config with whole sections or top-level fields replaced by `sections`
    (e.g. `rl_config(learner=dict(steps=50))` updates fields of a section)."""
    tiny = model_config()
    c = ml_collections.ConfigDict()
    c.init_from = ""               # policy checkpoint; "" = the tiny warm start (rl_tiny only)
    c.seed = 0                     # task order, sampling seeds
    c.log_every = 1                # a metrics record every this many learner steps
    c.progress_bar = True
    c.warm_start = _section(        # only when init_from is "" (experiments/warm_start.py)
        model=_section(**{f: tiny[f] for f in WARM_START_MODEL_FIELDS}),  # sizes, tying
        # optimizer fields set in all three stages' configs (c2jax.train.config.
        # optimizer_config); None keeps each stage config's own value
        optimizer=_section(**{f: ml_collections.FieldReference(None, field_type=float)
                              for f in WARM_START_OPTIMIZER_FIELDS}),
        induction_steps=0,          # a first pretraining stage on copy documents alone (short
                                    # blocks), which forms the induction circuit; 0 = none
        pretrain_steps=300,         # tiny pretraining at 256 tokens
        # the pretraining (and induction) stages' peak learning rate; None keeps
        # configs/pretrain_tiny.py's
        pretrain_learning_rate=ml_collections.FieldReference(None, field_type=float),
        copy_fraction=0.0,          # share of pretraining documents that are synthetic copy
                                    # documents (c2jax/data/copy_task.py); 0 = off
        copy_block=(16, 120),       # (min, max) ids per copy block in pretraining
        longctx_steps=40,           # YaRN x8 to 2048 tokens
        sft_tasks=300,              # mini:train tasks whose oracle trajectories SFT learns
        sft_categories=(),          # only these task categories of them ("understanding", ...);
                                    # () = all
        sft_context_chars=4000,     # oracle trajectories summarise past this many characters
        sft_recovery_fraction=0.5,  # segments also written with a failed turn + its error
        sft_thoughts=True,          # keep the oracle's reasoning before each call; False =
                                    # train the calls alone
        sft_fresh_names=0,          # write each conversation this many times with made-up
                                    # package/module names (c2jax/data/fresh_names.py); 0 = off
        sft_agent="oracle",         # whose resolved trajectories SFT learns: "oracle" (the
                                    # task author's), or "runcall" (cursorbench/runcall.py:
                                    # run the expression a value question names, copy the repr)
        oracle_workers=2,           # environments replaying the oracle
        sft_copy_fraction=0.0,      # share of SFT documents that are copy documents
                                    # (`copy_block` ids), which keep the induction circuit
        sft_seq_len=2048,
        sft_batch_size=2,
        sft_steps=250,              # (head at trained positions only: configs/sft_tiny.py)
        sft_learning_rate=3e-3,
    )
    c.tasks = _section(
        suite="mini:train:400",     # cursorbench suite (mini:SPLIT[:N], a task directory) or
                                    # python:module:function -> (tasks, make_env) for your own
        categories=(),              # cursorbench suites: only these task categories; () = all
        sandbox="bwrap",            # "bwrap" (default) or "none" (trusted debugging only)
    )
    c.actor = _section(
        num_actors=1,               # sampler engines; each runs its own environments
        envs_per_actor=8,           # environments (threads) per actor = episodes in flight
        slots=8,                    # sequences each engine decodes together
        max_len=2048,               # context per segment (the engine's cache length)
        steps_per_call=8,           # decode steps per compiled call
        dtype="float32",            # actor compute dtype: "float32" | "bfloat16" (learner: model)
        head_dtype="float32",       # the output head and final norm: "float32" keeps a bf16
                                    # actor's sampling logits full precision; "" = actor.dtype
    )
    c.rollout = _section(
        max_new_tokens=192,         # tokens per assistant turn
        temperature=1.0,            # > 0; the learner scores softmax(logits / temperature), the
                                    # distribution actors sample (their recorded log-probs)
        top_p=1.0,                  # must be 1 (the learner cannot reproduce a nucleus)
        context="summarise",        # when a turn would not fit: "summarise" | "truncate" | "stop"
        context_budget=0,           # tokens; 0 = actor.max_len
        summary_max_tokens=192,
        max_summaries=4,
        max_turns=0,                # tool turns before the actor finishes; 0 = the task's limit
    )
    c.learner = _section(
        steps=20,                   # learner steps (each consumes groups_per_step groups)
        groups_per_step=4,          # B: tasks per step
        group_size=4,               # G: attempts per task; the advantage compares them
        microbatch_rows=4,          # rows (segments) per microbatch of the update
        updates_per_batch=1,        # optimizer updates per step (>1: the PPO clip matters)
        routing_replay=True,        # replay the actor's experts in the learner's forward
        matched_kl=False,           # also log the version-matched mismatch KL (keeps eta + 2
                                    #   param copies, one extra forward per version per step)
        drop_uniform_groups=False,  # skip groups whose correctness is all equal (all pass or
                                    # all fail; DAPO's dynamic sampling): actors keep sampling
                                    # until groups_per_step groups hold a signal
        devices=1,                  # learner devices (the first ones); 0 = all
    )
    c.staleness = _section(
        eta=2,                      # max learner versions a group may lag; 0 = synchronous
        max_running_groups=8,       # groups in flight at most (all actors)
    )
    c.mesh = sharding.mesh_config()  # the learner's mesh (sizes multiply to learner.devices)
    c.loss = loss_config()
    c.rewards = reward_config()
    c.optimizer = optimizer_config(learning_rate=1e-4, warmup_steps=2, weight_decay=0.0,
                                   min_lr_ratio=1.0)
    c.eval = _section(
        suite="mini:test",          # held-out tasks (no template shared with mini:train)
        categories=(),              # only these task categories ("understanding", ...); () = all
        tasks=40,                   # the first N tasks of the suite (after `categories`); 0 = all
        k=8,                        # attempts per task: mean@1 over them, and best-of-k
        temperature=1.0,
        workers=8,                  # episodes in flight
        before=True,                # evaluate the starting policy too
    )
    c.runtime = _section(
        backend="inprocess",        # "inprocess" | "ray"
        ray_address="",             # "" = start a local Ray; else an existing cluster
        ray_num_cpus=2,             # CPUs a local Ray may use
        ray_cpus_per_actor=1,       # CPUs each Ray actor reserves
        ray_object_store_mb=512,    # object store of a local Ray (params travel through it)
        ray_max_restarts=3,         # times Ray restarts a dead actor (its episodes rerun)
        learner_cpus="",            # cores the learner's process runs on, e.g. "0" or "0-7";
                                    # "" = all (c2jax/cpu_affinity.py)
        actor_cpus="",              # cores every Ray actor process runs on (backend "ray");
                                    # disjoint from learner_cpus, they act as separate devices
    )
    c.checkpoint = _section(
        every=5,                    # learner steps between checkpoints (and at the end)
        keep=3,
    )
    c.distributed = distributed_config()  # jax processes; all empty = the environment decides
    c.lock()
    for name, value in sections.items():
        if isinstance(value, dict):
            c[name].update(value)
        else:
            c[name] = value
    return c


def _fail(field: str, value, why: str):
    raise ConfigError(f"config field '{field}' = {value!r} is invalid: {why}")


def validate(c) -> None:
    """Raises ConfigError naming the first field that cannot work."""
    positive = {"actor": ("num_actors", "envs_per_actor", "slots", "max_len", "steps_per_call"),
                "rollout": ("max_new_tokens", "summary_max_tokens"),
                "learner": ("steps", "groups_per_step", "group_size", "microbatch_rows",
                            "updates_per_batch"),
                "staleness": ("max_running_groups",),
                "checkpoint": ("every", "keep"),
                "eval": ("k", "workers")}
    for section, fields in positive.items():
        for field in fields:
            if c[section][field] < 1:
                _fail(f"{section}.{field}", c[section][field], "must be >= 1")
    if c.learner.group_size < 2:
        _fail("learner.group_size", c.learner.group_size,
              "group-relative advantages need at least 2 attempts per task")
    if not c.rollout.temperature > 0:
        _fail("rollout.temperature", c.rollout.temperature, "must be > 0: the learner trains "
              "the sampling distribution softmax(logits / temperature), which greedy has not")
    if c.rollout.top_p != 1.0:
        _fail("rollout.top_p", c.rollout.top_p, "must be 1: the learner's log-probs cannot "
              "reproduce a truncated sampling distribution (tokens outside the nucleus would "
              "get importance weights of 0 / mu)")
    if c.rollout.max_turns < 0:
        _fail("rollout.max_turns", c.rollout.max_turns, "must be >= 0 (0 = the task's limit)")
    if c.staleness.eta < 0:
        _fail("staleness.eta", c.staleness.eta, "must be >= 0 (0 = synchronous)")
    if c.rollout.context not in CONTEXT_STRATEGIES:
        _fail("rollout.context", c.rollout.context, f"choose one of {CONTEXT_STRATEGIES}")
    if not 0 <= c.rollout.context_budget <= c.actor.max_len:
        _fail("rollout.context_budget", c.rollout.context_budget,
              f"must be in [0, actor.max_len={c.actor.max_len}]")
    if c.rollout.max_new_tokens >= c.actor.max_len:
        _fail("rollout.max_new_tokens", c.rollout.max_new_tokens,
              f"must be below actor.max_len={c.actor.max_len}")
    if c.actor.dtype not in ACTOR_DTYPES:
        _fail("actor.dtype", c.actor.dtype, f"choose one of {ACTOR_DTYPES}")
    if c.actor.head_dtype not in ("",) + ACTOR_DTYPES:
        _fail("actor.head_dtype", c.actor.head_dtype, f"choose '' or one of {ACTOR_DTYPES}")
    if c.runtime.backend not in RUNTIMES:
        _fail("runtime.backend", c.runtime.backend, f"choose one of {RUNTIMES}")
    if c.runtime.ray_max_restarts < 0:
        _fail("runtime.ray_max_restarts", c.runtime.ray_max_restarts, "must be >= 0")
    for field in ("learner_cpus", "actor_cpus"):
        try:
            cpus = cpu_affinity.parse_cpus(c.runtime[field])
            if cpus and not (field == "actor_cpus" and c.runtime.ray_address):
                cpu_affinity.check_cpus(f"runtime.{field}", cpus)  # a cluster's are remote
        except ValueError as e:
            _fail(f"runtime.{field}", c.runtime[field], str(e))
    if c.runtime.actor_cpus and c.runtime.backend != "ray":
        _fail("runtime.actor_cpus", c.runtime.actor_cpus, "in-process actors are threads of "
              "the learner's process; pinning them apart needs runtime.backend='ray'")
    if c.rewards.length_function not in LENGTH_FUNCTIONS:
        _fail("rewards.length_function", c.rewards.length_function,
              f"choose one of {LENGTH_FUNCTIONS}")
    if c.learner.devices < 0:
        _fail("learner.devices", c.learner.devices, "must be >= 0 (0 = all)")
    for field, categories in (("warm_start.sft_categories", c.warm_start.sft_categories),
                              ("tasks.categories", c.tasks.categories),
                              ("eval.categories", c.eval.categories)):
        if isinstance(categories, str) or not set(categories) <= set(CATEGORIES):
            _fail(field, categories, f"a tuple of task categories from {CATEGORIES}")
    if c.warm_start.sft_agent not in SFT_AGENTS:
        _fail("warm_start.sft_agent", c.warm_start.sft_agent, f"choose one of {SFT_AGENTS}")
    if c.warm_start.sft_fresh_names < 0:
        _fail("warm_start.sft_fresh_names", c.warm_start.sft_fresh_names, "must be >= 0")
    if not c.init_from:
        try:
            validate_model(model_config(**c.warm_start.model))
        except ValueError as e:
            raise ConfigError(f"[warm_start.model] {e}") from None
    for section, check in (("loss", validate_loss_config),
                           ("distributed", validate_distributed)):
        try:
            check(c[section])
        except ValueError as e:
            raise ConfigError(f"[{section}] {e}") from None
