"""Loss parity of the low-precision recipes: the tiny pretraining in bf16, mxfp8 and nvfp4.

    python -m experiments.lowp_parity --workdir=runs/lowp_parity
    python -m experiments.lowp_parity --steps=200 --recipes=bf16,mxfp8   # shorter, a subset

Runs `experiments.pretrain` on configs/pretrain_tiny.py once per recipe (each a subprocess,
printed before it starts) with the same seed, data order and compute dtype; only
`model.precision_recipe` differs. Rerunning with the same --workdir resumes each run (a finished
one is not trained again). `--noise_seeds` extra baseline runs differ only in `train.seed`
(the initialisation): their gaps show how much of a recipe's gap is run-to-run noise. Then it
prints a markdown table of the final losses and their gaps
to bf16 against the goals (mxfp8 within 1%, nvfp4 within 3%, after NVIDIA's MXFP8 and NVFP4
pretraining reports, docs/low_precision.md), and writes WORKDIR/lowp_parity.png (training and
held-out loss curves) and WORKDIR/lowp_parity.json.

"final train loss" is the mean of the last `--tail` logged training losses (single steps are
noisy at batch 8); "final held-out loss" is the eval at the last step (16 batches of the
held-out split). On CPU the quantized recipes run the jnp references, which compute exactly
what the GPU kernels compute, so the losses are the recipes' own.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path

from absl import app, flags

from experiments.stage_runs import evals, run_stage

_WORKDIR = flags.DEFINE_string("workdir", "runs/lowp_parity", "one run per recipe goes here")
_STEPS = flags.DEFINE_integer("steps", 600, "training steps per run (pretrain_tiny: 600)")
_RECIPES = flags.DEFINE_list("recipes", ["bf16", "mxfp8", "nvfp4"],
                             "precision recipes to run; the first is the baseline")
_DTYPE = flags.DEFINE_string("dtype", "bfloat16", "model compute dtype of every run")
_TAIL = flags.DEFINE_integer("tail", 5, "logged training losses averaged for the final loss")
_NOISE_SEEDS = flags.DEFINE_integer(
    "noise_seeds", 1, "extra runs of the baseline recipe with train.seed = 1, 2, ...: how far "
    "the final loss moves from the initialisation alone, the yardstick for the gaps")

CONFIG = "configs/pretrain_tiny.py"
#: Relative final-loss gap to bf16 that each recipe should stay within.
GOALS = {"mxfp8": 0.01, "nvfp4": 0.03}


def summarise(runs: dict[str, dict], tail: int) -> dict[str, dict]:
    """recipe -> final train / held-out loss and the relative gaps to the first recipe."""
    out = {}
    for recipe, run in runs.items():
        train = [r["loss"] for r in run["records"] if "loss" in r]
        held_out = evals(run)
        out[recipe] = {"final_train_loss": statistics.fmean(train[-tail:]),
                       "final_eval_loss": held_out[-1]["eval_loss"],
                       "median_tokens_per_sec": statistics.median(
                           r["tokens_per_sec"] for r in run["records"] if "tokens_per_sec" in r)}
    base = out[next(iter(out))]
    for summary in out.values():
        for key in ("final_train_loss", "final_eval_loss"):
            summary[key.replace("final_", "gap_")] = summary[key] / base[key] - 1
    return out


def table(summary: dict[str, dict]) -> str:
    baseline = next(iter(summary))
    lines = ["| recipe | final train loss | gap | final held-out loss | gap | goal | "
             "train tokens/s (median) |", "|---|---:|---:|---:|---:|---|---:|"]
    for recipe, s in summary.items():
        goal = GOALS.get(recipe)
        verdict = "baseline" if recipe == baseline else "run-to-run noise" if "seed" in recipe \
            else (
            f"<= {goal:.0%}: {'met' if abs(s['gap_eval_loss']) <= goal else 'NOT met'}"
            if goal else "-")
        lines.append(f"| {recipe} | {s['final_train_loss']:.4f} | {s['gap_train_loss']:+.2%} | "
                     f"{s['final_eval_loss']:.4f} | {s['gap_eval_loss']:+.2%} | {verdict} | "
                     f"{s['median_tokens_per_sec']:,.0f} |")
    return "\n".join(lines)


def plot(runs: dict[str, dict], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    for recipe, run in runs.items():
        train = [(r["step"], r["loss"]) for r in run["records"] if "loss" in r]
        left.plot(*zip(*train), label=recipe, linewidth=1)
        held_out = [(r["step"], r["eval_loss"]) for r in evals(run)]
        right.plot(*zip(*held_out), marker="o", label=recipe)
    left.set(title="training loss", xlabel="step", ylabel="cross-entropy (nats)")
    right.set(title="held-out loss", xlabel="step")
    for axes in (left, right):
        axes.grid(alpha=0.3)
        axes.legend()
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def main(argv):
    if len(argv) > 1:
        raise app.UsageError(f"unexpected arguments: {argv[1:]}")
    workdir = Path(_WORKDIR.value)
    workdir.mkdir(parents=True, exist_ok=True)
    steps = _STEPS.value
    runs = {}
    baseline = _RECIPES.value[0]
    plan = [(recipe, recipe, 0) for recipe in _RECIPES.value]
    plan += [(f"{baseline}, seed {s}", baseline, s) for s in range(1, _NOISE_SEEDS.value + 1)]
    for name, recipe, seed in plan:
        runs[name] = run_stage(
            "experiments.pretrain", CONFIG, workdir / name.replace(", seed ", "_seed"),
            f"--config.model.precision_recipe={recipe}", f"--config.model.dtype={_DTYPE.value}",
            f"--config.train.seed={seed}",
            f"--config.train.steps={steps}", f"--config.train.eval_every={max(1, steps // 3)}",
            f"--config.train.checkpoint_every={max(1, steps // 3)}",
            f"--config.optimizer.warmup_steps={min(30, steps // 5)}")
    summary = summarise(runs, _TAIL.value)
    plot(runs, workdir / "lowp_parity.png")
    (workdir / "lowp_parity.json").write_text(json.dumps(
        {"config": CONFIG, "steps": steps, "dtype": _DTYPE.value, "summary": summary}, indent=1))
    print(f"\n# lowp_parity: {CONFIG}, {steps} steps, compute dtype {_DTYPE.value}\n")
    print(table(summary))
    print(f"\nplot: {workdir / 'lowp_parity.png'}; numbers: {workdir / 'lowp_parity.json'}")


if __name__ == "__main__":
    app.run(main)
