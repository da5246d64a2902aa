"""Stage B, the main job: asynchronous RL in sandboxed coding environments.

    python -m experiments.rl --config=configs/rl_tiny.py --workdir=runs/rl_tiny

1. policy     `config.init_from`, or (empty) the tiny warm start, run once and cached
              (experiments/warm_start.py: pretrain on code, long context, SFT on the oracle
              trajectories of mini:train);
2. eval       mean@1 and best-of-k of the starting policy on the held-out `eval.suite`;
3. RL         `c2jax.rl.loop.train_rl` on `tasks.suite` (resumes from WORKDIR if it holds a
              checkpoint, including its queued and in-flight episodes);
4. eval       the same evaluation of the final policy (in WORKDIR/eval_after_stepN, N = its
              learner steps, so a run resumed with more steps evaluates again);
5. report     a table (before / after, 95% bootstrap intervals) printed and written to
              WORKDIR/report.md, and reward / length curves as PNG.

Override any field with `--config.<section>.<field>=value`. Metrics: WORKDIR/metrics.jsonl
and WORKDIR/tensorboard/. A config or input that cannot work exits with a one-line message.
`config.distributed` (c2jax/distributed.py) is read first; the loop runs in one process, so a
multi-process setup stops with a message.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from absl import app, flags, logging
from ml_collections import config_flags

from experiments.cli import QuietOrbax, parse_flags
from experiments.task_source import task_source

_CONFIG = config_flags.DEFINE_config_file("config", None, "RL config file, e.g. "
                                          "configs/rl_tiny.py")
_WORKDIR = flags.DEFINE_string("workdir", None, "directory for checkpoints, metrics, evals; "
                               "an existing one is resumed")
flags.mark_flags_as_required(["config", "workdir"])


def evaluate(label: str, cfg, variables, tokenizer, config, out_dir: Path) -> dict | None:
    """mean@1 / best-of-k of a policy on `eval.suite` through the benchmark harness, with the
    RL actor's own episode loop as the agent. None when `eval.suite` is empty."""
    ev = config.eval
    if not ev.suite:
        return None
    from c2jax.data.chat import ChatTemplate
    from c2jax.rl.agent import policy_agent_factory
    from c2jax.rl.loop import rollout_settings
    from c2jax.sampling import Engine, GenerationServer, sampler_config
    from cursorbench import harness, suites
    suite = suites.resolve(ev.suite, categories=tuple(ev.categories))
    tasks = suite.tasks[:ev.tasks] if ev.tasks else suite.tasks
    settings = rollout_settings(config)
    settings = type(settings)(**{**settings.__dict__, "temperature": ev.temperature})
    engine = Engine(cfg, variables, tokenizer=tokenizer, config=sampler_config(
        slots=ev.workers, max_len=config.actor.max_len, steps_per_call=config.actor.steps_per_call))
    with GenerationServer(engine) as server:
        factory = policy_agent_factory(server, ChatTemplate(tokenizer), settings)
        return harness.run(tasks, factory, out_dir, k=ev.k, workers=ev.workers,
                           suite=suite.name, agent=label, sandbox=config.tasks.sandbox)


def report(before: dict | None, after: dict | None, k: int) -> str:
    """The before/after table (markdown)."""
    def cell(summary, key, ci_key):
        if summary is None or summary.get(key) is None:
            return "n/a"
        low, high = summary.get(ci_key) or (float("nan"), float("nan"))
        return f"{summary[key]:.1%} [{low:.1%}, {high:.1%}]"

    lines = [f"| policy | tasks | mean@1 [95% CI] | best-of-{k} [95% CI] | infra failures |",
             "|---|---:|---|---|---:|"]
    for name, s in (("before RL (SFT warm start)", before), ("after RL", after)):
        if s is None:
            continue
        lines.append(f"| {name} | {s['n_tasks']} | {cell(s, 'mean@1', 'mean@1_ci95')} | "
                     f"{cell(s, 'best_of_k', 'best_of_k_ci95')} | "
                     f"{s['infra_failure_rate']:.1%} |")
    return "\n".join(lines)


def plot_curves(history: list[dict], out: Path) -> list[Path]:
    """Reward and episode-length curves over learner steps (PNG)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    steps = [r["step"] for r in history]
    written = []
    for name, keys, ylabel in (
            ("reward_curve.png", ("reward/mean", "reward/correctness"), "reward"),
            ("length_curve.png", ("episode/sampled_tokens", "episode/turns"), "per episode")):
        fig, ax = plt.subplots(figsize=(6, 3.5))
        for key in keys:
            ax.plot(steps, [r[key] for r in history], label=key)
        ax.set_xlabel("learner step")
        ax.set_ylabel(ylabel)
        ax.legend()
        fig.tight_layout()
        fig.savefig(out / name, dpi=100)
        plt.close(fig)
        written.append(out / name)
    return written


def run(config, workdir: Path) -> dict:
    from c2jax.rl.config import validate
    from c2jax.rl.loop import require_one_process, train_rl
    from c2jax.train.checkpoint import load_trained_model
    from c2jax.train.metrics import METRICS_FILE, read_records

    validate(config)
    require_one_process()     # before the warm start and the evaluation
    workdir.mkdir(parents=True, exist_ok=True)
    if not config.init_from:
        from experiments.warm_start import warm_start
        with config.unlocked():
            config.init_from = str(warm_start(config.warm_start))
        print(f"policy: the tiny warm start in {config.init_from}", flush=True)
    tasks, make_env = task_source(config.tasks)
    before = None
    if config.eval.before:
        cfg, variables, tokenizer = load_trained_model(config.init_from)
        before = evaluate("before", cfg, variables, tokenizer, config, workdir / "eval_before")
    result = train_rl(config, workdir, tasks=tasks, make_env=make_env)
    # The harness resumes an interrupted evaluation from its records, so every policy version
    # gets its own directory: a run resumed with more steps evaluates its new final policy
    # instead of reading back the records of the one it stopped at.
    after = evaluate("after", result.model_cfg, result.variables, result.tokenizer, config,
                     workdir / f"eval_after_step{result.version}")
    history = [r for r in read_records(workdir / METRICS_FILE) if "reward/mean" in r]
    plots = plot_curves(history, workdir) if history else []
    table = report(before, after, config.eval.k)
    summary = {"before": before, "after": after, "rl_steps": result.version,
               "plots": [str(p) for p in plots]}
    (workdir / "report.md").write_text(table + "\n")
    (workdir / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    print(table)
    print(f"wrote {workdir / 'report.md'}, {workdir / 'summary.json'} and "
          f"{', '.join(p.name for p in plots)}")
    return summary


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    from c2jax import distributed
    from c2jax.train.config import ConfigError
    logging.get_absl_handler().addFilter(QuietOrbax())
    try:
        distributed.initialize(_CONFIG.value.distributed)
        run(_CONFIG.value, Path(_WORKDIR.value).absolute())
    except (ConfigError, ValueError, FileNotFoundError) as e:
        sys.exit(f"error: {e}")


if __name__ == "__main__":
    app.run(main, flags_parser=parse_flags)
