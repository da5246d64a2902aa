"""RL runtime benchmarks, measured side by side in one run on the same config and policy.

    python -m experiments.bench_rl [--config=configs/rl_tiny.py [--config.FIELD=VALUE ...]]
                                   [--init_from=DIR] [--steps=6] [--repeats=1]
                                   [--parts=throughput,kl]

Every run is `c2jax.rl.loop.train_rl` on `--config` (default the demo's `configs/rl_tiny.py`:
the tiny warm start, sandboxed mini:train episodes), with overrides as in experiments.rl, in a
fresh temporary workdir, without evaluation. E.g. `--config.warm_start.model.
num_hidden_layers=4` measures a policy with three MoE layers instead of one.

throughput   synchronous (eta = 0: generate, then train) against asynchronous (eta =
             `--eta`) RL. Trajectories/s counts the episodes the learner consumed between
             the end of step `--warmup_steps` (compilation, first sandboxes) and the end of
             step `--steps`; the learner idle fraction is the share of those steps' wall time
             the learner waited for a batch; CPU use is the machine's busy CPU seconds
             (/proc/stat: learner, sandboxes, Ray actors) over that window, per core. With
             `--config.runtime.backend=ray --config.runtime.learner_cpus=0
             --config.runtime.actor_cpus=1` learner and actors get a core each, as if they had
             their own devices (c2jax/cpu_affinity.py). Overlap can only fill time the
             synchronous run leaves idle: 1 / (1 - learner share) when learner and actors
             have their own devices, 1 / CPU use when they share CPUs; async beats that only
             by doing less work per trajectory (CPU s per trajectory: e.g. decode batches
             that stay full instead of draining at every step's end).
             `--repeats` alternates sync/async pairs and reports the median ratio.
kl           the learner/actor mismatch KL (k3 estimator of KL(pi_learner || pi_actor) over
             trained tokens) with a bfloat16 actor and a float32 learner, with routing replay
             and without it, the actor's output head in float32 (the RL default,
             `actor.head_dtype`) and in bfloat16. Synchronous by default (`--kl_eta=0`), so
             every token is on-policy by version and the KL is numerics plus expert-selection
             flips only; a float32 actor is the floor. With `--kl_eta` > 0 the KL against the
             learner's current params also holds the policy's drift between versions; the
             version-matched column (`learner.matched_kl`) scores each segment under the
             params that sampled it and so stays numerics plus flips.

The policy (`--init_from`, else the config's `init_from`, else the config's cached warm start,
as experiments/rl.py builds it) and the task order are the same for every run.
"""
from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from absl import app, flags, logging
from ml_collections import config_flags

from experiments.cli import QuietOrbax, parse_flags
from experiments.task_source import task_source

FLAGS = flags.FLAGS
_CONFIG = config_flags.DEFINE_config_file("config", None, "RL config file (default "
                                          "configs/rl_tiny.py; overrides need it named)")
flags.DEFINE_string("init_from", "", "policy to start from; '' = the config's init_from, "
                    "else its warm start")
flags.DEFINE_list("parts", ["throughput", "kl"], "which measurements to run")
flags.DEFINE_integer("steps", 6, "learner steps per throughput run")
flags.DEFINE_integer("warmup_steps", 1, "steps excluded from the throughput window")
flags.DEFINE_integer("repeats", 1, "synchronous/asynchronous throughput pairs, alternating")
flags.DEFINE_integer("eta", 2, "staleness bound of the asynchronous run")
flags.DEFINE_integer("kl_steps", 2, "learner steps per mismatch-KL run")
flags.DEFINE_integer("kl_eta", 0, "staleness bound of the mismatch-KL runs (0: every token is "
                     "on-policy by version, so the KL is numerics and routing flips only)")
flags.DEFINE_string("suite", "mini:train:400", "tasks the actors run")


def base_config():
    """`--config` as given, else configs/rl_tiny.py."""
    if _CONFIG.value is None:
        from configs import rl_tiny
        return rl_tiny.get_config()
    return _CONFIG.value.copy_and_resolve_references()


def bench_config(**sections):
    """`--config` with `sections` merged in, no evaluation and one checkpoint at the end."""
    config = base_config()
    with config.unlocked():
        config.init_from = FLAGS.init_from
        config.progress_bar = False
        config.tasks.suite = FLAGS.suite
        config.eval.suite = ""
        config.checkpoint.every = 10 ** 6
        for name, fields in sections.items():
            config[name].update(fields)
    return config


def run(config) -> tuple[list[dict], list[tuple[float, float]]]:
    """(per-step records, (wall-clock time, CPU seconds used so far) at the end of each step)
    of one fresh RL run. CPU seconds are user + system of this process and of its finished
    children (the sandboxed tool and test runs)."""
    from c2jax.rl.loop import train_rl
    tasks, make_env = task_source(config.tasks)
    ends: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory() as workdir:
        result = train_rl(config, Path(workdir) / "rl", tasks=tasks, make_env=make_env,
                          on_step=lambda step, record: ends.append((time.monotonic(),
                                                                    _cpu_seconds())))
    return result.history, ends


_CORES = os.cpu_count() or 1


def _cpu_seconds() -> float:
    """Busy CPU seconds of the whole machine so far (/proc/stat): the learner, sandboxes, and
    Ray's actor processes, which are not this process's children. Nothing else may run."""
    with open("/proc/stat") as f:
        fields = [int(v) for v in f.readline().split()[1:]]
    idle = fields[3] + fields[4]                   # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def throughput_row(label: str, eta: int) -> dict:
    steps, warm = FLAGS.steps, FLAGS.warmup_steps
    history, ends = run(bench_config(learner=dict(steps=steps), staleness=dict(eta=eta)))
    window = history[warm:]
    episodes = int(sum(r["episodes/trained"] for r in window))
    seconds = ends[-1][0] - ends[warm - 1][0]
    cpu_seconds = ends[-1][1] - ends[warm - 1][1]
    return {"label": label, "eta": eta, "episodes": episodes, "seconds": seconds,
            "trajectories_per_s": episodes / seconds,
            "cpu": cpu_seconds / (seconds * _CORES), "cpu_s_per_episode": cpu_seconds / episodes,
            "idle": float(np.mean([r["learner/idle_fraction"] for r in window])),
            "actor_tok_s": float(np.mean([r["actor/tokens_per_sec"] for r in window])),
            "staleness": float(np.mean([r.get("staleness/mean", 0.0) for r in window])),
            "step_s": float(np.mean([r["learner/step_seconds"] for r in window])),
            "update_s": float(np.mean([r["learner/update_seconds"] for r in window])),
            "sync_s": float(np.mean([r["weight_sync/seconds"] for r in window]))}


def throughput_table() -> None:
    """`--repeats` synchronous/asynchronous pairs, alternating, so drift on a shared machine
    touches both modes alike; each pair's ratio, then the median."""
    pairs = [(throughput_row("synchronous", 0), throughput_row("asynchronous", FLAGS.eta))
             for _ in range(FLAGS.repeats)]
    print(f"\n## Async vs sync RL: {_config_name()}, steps {FLAGS.warmup_steps + 1}.."
          f"{FLAGS.steps} timed, {FLAGS.repeats} pair(s)\n")
    print("| pair | mode | eta | episodes | seconds | trajectories/s | vs sync | learner idle | "
          "actor tokens/s | s per step | update s | weight sync s | mean staleness | CPU use | "
          "CPU s per trajectory |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for i, pair in enumerate(pairs):
        base = pair[0]["trajectories_per_s"]
        for r in pair:
            print(f"| {i + 1} | {r['label']} | {r['eta']} | {r['episodes']} | "
                  f"{r['seconds']:.1f} | {r['trajectories_per_s']:.3f} | "
                  f"{r['trajectories_per_s'] / base:.2f}x | {r['idle']:.1%} | "
                  f"{r['actor_tok_s']:.0f} | {r['step_s']:.1f} | {r['update_s']:.1f} | "
                  f"{r['sync_s']:.2f} | {r['staleness']:.2f} | "
                  f"{r['cpu']:.0%} | {r['cpu_s_per_episode']:.2f} |")
    ratios = [a["trajectories_per_s"] / s["trajectories_per_s"] for s, a in pairs]
    share = float(np.median([1.0 - s["idle"] for s, _ in pairs]))
    cpu = float(np.median([s["cpu"] for s, _ in pairs]))
    print(f"\nAsync / sync: median {np.median(ratios):.2f}x over {len(ratios)} pair(s) "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}). The synchronous learner computes "
          f"{share:.1%} of the time: hiding all of it behind generation gives "
          f"{1.0 / (1.0 - share):.2f}x. The synchronous run keeps {cpu:.0%} of the "
          f"{_CORES} cores busy: on a machine that actors and learner share, overlap "
          f"alone gives at most {1.0 / max(cpu, 1e-9):.2f}x; more needs less work per "
          f"trajectory (CPU s per trajectory), e.g. fuller decode batches.")


def kl_table() -> None:
    """Per actor numerics (dtype, head dtype): routing replay on and off; the ratios compare
    each replay row with the no-replay row of the same numerics. Two KLs per run: against the
    learner's current params (what the update's off-policy correction sees; with staleness it
    also holds the policy's drift) and version-matched (each segment scored under the params
    that sampled it: numerics and expert flips only)."""
    rows = []
    for label, dtype, head in (("float32 actor (floor)", "float32", "float32"),
                               ("bfloat16 actor, float32 head", "bfloat16", "float32"),
                               ("bfloat16 actor, bfloat16 head", "bfloat16", "")):
        for replay in ((True,) if dtype == "float32" else (True, False)):
            history, _ = run(bench_config(
                learner=dict(steps=FLAGS.kl_steps, routing_replay=replay, matched_kl=True),
                staleness=dict(eta=FLAGS.kl_eta),
                actor=dict(dtype=dtype, head_dtype=head)))
            rows.append(dict(
                label=label, replay=replay,
                kls=[r["learner/mismatch_kl"] for r in history],
                matched=_token_weighted(history, "learner/mismatch_kl_matched",
                                        "learner/matched_token_fraction"),
                share=float(np.mean([r["learner/matched_token_fraction"] for r in history])),
                is_max=max(r["learner/is_weight_max"] for r in history)))
    without = {r["label"]: r for r in rows if not r["replay"]}
    print(f"\n## Mismatch KL, actor vs fp32 learner: {_config_name()}, eta {FLAGS.kl_eta}, "
          f"{FLAGS.kl_steps} steps each\n")
    print("| actor | routing replay | KL vs current params, per step | mean | vs no replay | "
          "version-matched KL | vs no replay | matched tokens | max IS weight |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        base = without.get(r["label"])
        ratio = f"{np.mean(r['kls']) / np.mean(base['kls']):.3f}" if base else "n/a"
        matched_ratio = f"{r['matched'] / base['matched']:.3f}" if base else "n/a"
        print(f"| {r['label']} | {'yes' if r['replay'] else 'no'} | "
              f"{', '.join(f'{k:.2e}' for k in r['kls'])} | {np.mean(r['kls']):.2e} | "
              f"{ratio} | {r['matched']:.2e} | {matched_ratio} | {r['share']:.0%} | "
              f"{r['is_max']:.2f} |")


def _config_name() -> str:
    """The config file and its overrides, as given on the command line."""
    if _CONFIG.value is None:
        return "configs/rl_tiny.py"
    overrides = [a for a in sys.argv[1:] if a.startswith("--config.")]
    return " ".join([config_flags.get_config_filename(FLAGS["config"]), *overrides])


def _token_weighted(history: list[dict], value: str, weight: str) -> float:
    """Mean of a per-step metric over the steps, each weighted by its token share."""
    weights = np.asarray([r[weight] for r in history])
    values = np.nan_to_num(np.asarray([r[value] for r in history]))
    return float(np.sum(values * weights) / max(np.sum(weights), 1e-12))


def main(argv):
    del argv
    logging.get_absl_handler().addFilter(QuietOrbax())
    config = base_config()
    if not FLAGS.init_from:
        FLAGS.init_from = config.init_from
    if not FLAGS.init_from:
        from experiments.warm_start import warm_start
        FLAGS.init_from = str(warm_start(config.warm_start))
    print(f"policy: {FLAGS.init_from}")
    if FLAGS.warmup_steps < 1 or FLAGS.steps <= FLAGS.warmup_steps:
        raise app.UsageError("need 1 <= --warmup_steps < --steps")
    if FLAGS.repeats < 1:
        raise app.UsageError(f"--repeats={FLAGS.repeats}: need at least one pair")
    parts = {"throughput": throughput_table, "kl": kl_table}
    unknown = set(FLAGS.parts) - set(parts)
    if unknown:
        raise app.UsageError(f"unknown --parts {sorted(unknown)}; choose from {sorted(parts)}")
    for name in FLAGS.parts:
        parts[name]()


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
