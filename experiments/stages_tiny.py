"""Stage A in miniature, end to end, with the numbers BENCHMARKS.md reports ("Training stages").

    python -m experiments.stages_tiny --workdir=runs/stages_tiny

Runs the entry points exactly as a user would (each a subprocess, printed before it starts):
  1. pretrain   configs/pretrain_tiny.py, 256 tokens, from random weights;
  2. longctx    configs/longctx_tiny.py from phase 1: YaRN x8 to 2048 tokens, on a mesh with
                `context` = --longctx_devices (fake CPU devices: real context parallelism);
  2b. ablation  the same phase without YaRN (plain RoPE trained at 2048);
  3. sft        configs/sft_tiny.py from phase 2 on conversations written from the stdlib: the
                user gives a function's signature and docstring, the assistant writes the body
                (held-out loss on the assistant's tokens only).
Then it measures the input pipeline of each stage's data config alone, and prints tables:
held-out loss before/after each stage; loss at positions below / beyond the phase-1 length,
with and without YaRN, before (zero-shot) and after the long-context phase; pipeline tokens/s
beside the train step's. Everything also lands in WORKDIR/stages_summary.json.
"""
from __future__ import annotations

import ast
import json
import os
import platform
import statistics
from pathlib import Path

from absl import app, flags

from c2jax.data import corpus
from c2jax.data.tokenizer import tokenizer_from_config
from configs import longctx_tiny, pretrain_tiny, sft_tiny
from experiments.bench_data import time_pipeline
from experiments.stage_runs import evals, run_stage

_WORKDIR = flags.DEFINE_string("workdir", "runs/stages_tiny", "where every stage's run goes")
_LONGCTX_DEVICES = flags.DEFINE_integer(
    "longctx_devices", 2, "fake CPU devices for the long-context runs (all on the context axis)")
_SFT_CONVERSATIONS = flags.DEFINE_integer("sft_conversations", 4000,
                                          "conversations written for the SFT stage")
_PIPELINE_BATCHES = flags.DEFINE_integer("pipeline_batches", 300,
                                         "batches timed per stage for the input pipeline alone")

SHORT = pretrain_tiny.SEQ_LEN
LONG = longctx_tiny.SEQ_LEN
#: A function body the SFT conversations use: long enough to be code, short enough to fit.
_BODY_LINES = (3, 40)


def median_train_tokens_per_sec(run: dict) -> float:
    return statistics.median(r["tokens_per_sec"] for r in run["records"] if "loss" in r)


def write_sft_conversations(path: Path, limit: int) -> int:
    """Conversations from the stdlib: signature + docstring -> the function's source.

    Functions with a docstring and a body of `_BODY_LINES` lines, in file order; the docstring
    is removed from the answer so the model has to write the code, not copy the prompt.
    """
    root = corpus.stdlib_dir()
    written = 0
    with open(path, "w") as out:
        for relpath in corpus.list_source_files(root):
            text = corpus.read_source_text(root / relpath)
            try:
                tree = ast.parse(text)
            except SyntaxError:  # a few stdlib test files are deliberately invalid
                continue
            for node in tree.body:
                docstring = ast.get_docstring(node) if isinstance(
                    node, ast.FunctionDef) else None
                if not docstring:
                    continue
                body = node.body[1:]   # without the docstring
                if not body:
                    continue
                lines = text.splitlines()
                code = "\n".join(lines[body[0].lineno - 1:node.end_lineno])
                if not _BODY_LINES[0] <= code.count("\n") + 1 <= _BODY_LINES[1]:
                    continue
                signature = lines[node.lineno - 1].strip()
                module = relpath.removesuffix(".py").replace("/", ".")
                messages = [
                    {"role": "system", "content": "You are a coding agent."},
                    {"role": "user", "content": f"In module `{module}`, write the body of\n"
                                                f"{signature}\n\"\"\"{docstring}\"\"\""},
                    {"role": "assistant", "content": code},
                ]
                out.write(json.dumps({"messages": messages}) + "\n")
                written += 1
                if written == limit:
                    return written
    return written


def pipeline_tokens_per_sec(stage_config, num_batches: int) -> float:
    """`[batch, seq]` positions per second the stage's train pipeline delivers on its own."""
    data = stage_config.data
    return time_pipeline(tokenizer_from_config(data.tokenizer), data.to_dict(), num_batches)


def _fmt(x: float) -> str:
    return f"{x:.3f}"


def main(argv):
    del argv
    workdir = Path(_WORKDIR.value).absolute()
    workdir.mkdir(parents=True, exist_ok=True)
    pretrain_dir, longctx_dir = workdir / "pretrain", workdir / "longctx_yarn"
    plain_dir, sft_dir = workdir / "longctx_plain_rope", workdir / "sft"
    runs = {}
    runs["pretrain"] = run_stage("experiments.pretrain", "configs/pretrain_tiny.py", pretrain_dir)
    runs["longctx"] = run_stage("experiments.pretrain",
                                f"configs/longctx_tiny.py:{pretrain_dir}", longctx_dir,
                                devices=_LONGCTX_DEVICES.value)
    runs["longctx_plain"] = run_stage(
        "experiments.pretrain", f"configs/longctx_tiny.py:{pretrain_dir}", plain_dir,
        "--config.model.rope_scaling.type=default",
        f"--config.model.max_position_embeddings={LONG}",
        devices=_LONGCTX_DEVICES.value)
    conversations = workdir / "sft_conversations.jsonl"
    count = write_sft_conversations(conversations, _SFT_CONVERSATIONS.value)
    print(f"\nwrote {count} conversations to {conversations}")
    runs["sft"] = run_stage("experiments.sft", f"configs/sft_tiny.py:{longctx_dir}", sft_dir,
                            f"--config.data.source={conversations}")

    sft_config = sft_tiny.get_config()
    with sft_config.unlocked():
        sft_config.data.source = str(conversations)
    stage_configs = {"pretrain": pretrain_tiny.get_config(), "longctx": longctx_tiny.get_config(),
                     "sft": sft_config}
    pipeline = {name: pipeline_tokens_per_sec(cfg, _PIPELINE_BATCHES.value)
                for name, cfg in stage_configs.items()}

    print(f"\nmachine: {platform.machine()} {os.cpu_count()} CPUs, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f}")
    print("\n| stage | steps | wall s | held-out loss at start | held-out loss at end |")
    print("|---|---:|---:|---:|---:|")
    for name in ("pretrain", "longctx", "longctx_plain", "sft"):
        first, last = evals(runs[name])[0], evals(runs[name])[-1]
        print(f"| {name} | {last['step']} | {runs[name]['seconds']:.0f} | "
              f"{_fmt(first['eval_loss'])} | {_fmt(last['eval_loss'])} |")

    short_key, long_key = f"eval_loss_positions_0_{SHORT}", f"eval_loss_positions_{SHORT}_{LONG}"
    print(f"\n| model (held-out, {LONG}-token rows) | loss at positions < {SHORT} | "
          f"loss at positions {SHORT}-{LONG - 1} | long - short |")
    print("|---|---:|---:|---:|")
    rows = [("phase 1 weights, plain RoPE (zero-shot)", evals(runs["longctx_plain"])[0]),
            ("phase 1 weights, YaRN x8 (zero-shot)", evals(runs["longctx"])[0]),
            ("after the long-context phase, plain RoPE", evals(runs["longctx_plain"])[-1]),
            ("after the long-context phase, YaRN x8", evals(runs["longctx"])[-1])]
    for label, record in rows:
        print(f"| {label} | {_fmt(record[short_key])} | {_fmt(record[long_key])} | "
              f"{record[long_key] - record[short_key]:+.3f} |")

    print("\n| stage | input pipeline alone, tokens/s | train step, tokens/s (median) | ratio |")
    print("|---|---:|---:|---:|")
    for name in ("pretrain", "longctx", "sft"):
        step = median_train_tokens_per_sec(runs[name])
        print(f"| {name} | {pipeline[name]:,.0f} | {step:,.0f} | {pipeline[name] / step:,.0f}x |")

    summary = {"runs": {k: {"seconds": v["seconds"], "evals": evals(v),
                            "train_tokens_per_sec_median": median_train_tokens_per_sec(v)}
                        for k, v in runs.items()},
               "pipeline_tokens_per_sec": pipeline, "sft_conversations": count}
    (workdir / "stages_summary.json").write_text(json.dumps(summary, indent=1))


if __name__ == "__main__":
    app.run(main)
