"""Where a training step's time goes: one jitted step traced with jax.profiler, op time by part
of the model.

    python -m experiments.profile_model [--preset=small] [--dtype=bfloat16] [--scan_unroll=0]
        [--rounds=5] [--capacity_factor=1.25] [--attention_block_size=N]

Builds the step `experiments/bench_model.py` times (forward, next-token cross-entropy, backward,
AdamW; no MTP), runs it `--rounds` times (median printed), then traces one more call and sums
the duration of every XLA op (fusion, dot, copy...) in the trace by the model part its
`op_name` metadata names: self-attention, routed experts (router, dispatch, expert GEMMs,
combine), shared expert, dense MLP, output head / embedding, norms, the rest (loss, optimizer,
layer-loop bookkeeping). The forward and backward (`transpose(...)` in the op name) are
reported apart, and the `--top` slowest single ops are listed (of one part with `--part`).
On CPU two cores run ops side by side, so the op times add up to more than the step.
"""
from __future__ import annotations

import collections
import gzip
import json
import re
import statistics
import tempfile
import time
from pathlib import Path

import jax
import numpy as np
from absl import app, flags

from configs.models import get_config
from experiments.bench_model import BATCH, c2jax_step
from c2jax.model import init

FLAGS = flags.FLAGS
# --scan_unroll, --capacity_factor and --rounds are bench_model's flags (imported above).
flags.DEFINE_string("preset", "small", "model preset")
flags.DEFINE_string("dtype", "bfloat16", "compute dtype")
flags.DEFINE_integer("attention_block_size", None, "override model.attention_block_size")
flags.DEFINE_integer("top", 15, "slowest single ops to list")
flags.DEFINE_string("part", "", "list the slowest ops of this part only (a prefix of its name, "
                    "e.g. 'rest' or 'routed')")

#: (part, regex on the op_name metadata), first match wins.
PARTS = (("self-attention", r"self_attn"), ("routed experts", r"mlp/(experts|router|gate)|moe"),
         ("shared expert", r"shared_expert"), ("dense MLP", r"/mlp/"),
         ("output head / embedding", r"lm_head|embed"), ("norms", r"norm"))
_SKIP = ("ThunkExecutor", "$", "SlinkyThreadPool", "while")


def part_of(op_name: str) -> str:
    for part, pattern in PARTS:
        if re.search(pattern, op_name):
            return part
    return "rest (loss, optimizer, loop bookkeeping)"


def op_names(hlo_text: str) -> dict[str, str]:
    """HLO instruction name -> the op_name of it or, for a fusion without one, of the last
    instruction in its fused computation that has one."""
    calls = dict(re.findall(r"%([\w.-]+) = [^\n]*?calls=%([\w.-]+)", hlo_text))
    bodies = {m.group(1).lstrip("%"): m.group(2)
              for m in re.finditer(r"\n(%?[\w.-]+) [^\n]*\{\n(.*?)\n\}", hlo_text, re.S)}
    names = {}
    for line in hlo_text.split("\n"):
        match = re.match(r"\s*(?:ROOT )?%([\w.-]+) = ", line)
        if not match or match.group(1) in names:
            continue
        own = re.search(r'op_name="([^"]*)"', line)
        inner = re.findall(r'op_name="([^"]*)"', bodies.get(calls.get(match.group(1), ""), ""))
        names[match.group(1)] = own.group(1) if own else (inner[-1] if inner else "")
    return names


def op_durations(trace_dir: str) -> collections.Counter:
    """XLA op name -> summed duration (microseconds) in the newest trace under trace_dir."""
    path = sorted(Path(trace_dir).rglob("*.trace.json.gz"))[-1]
    events = json.load(gzip.open(path))["traceEvents"]
    durations = collections.Counter()
    for event in events:
        if event.get("ph") == "X" and not event["name"].startswith(_SKIP):
            durations[event["name"]] += event["dur"]
    return durations


def main(argv):
    del argv
    cfg = get_config(FLAGS.preset)
    with cfg.unlocked():
        cfg.num_mtp_layers = 0
        cfg.dtype = FLAGS.dtype
        cfg.capacity_factor = FLAGS.capacity_factor
        cfg.scan_unroll = FLAGS.scan_unroll
        if FLAGS.attention_block_size is not None:
            cfg.attention_block_size = FLAGS.attention_block_size
    batch, seq = BATCH.get(FLAGS.preset, (8, 256))
    tokens = np.random.RandomState(0).randint(0, cfg.vocab_size, (batch, seq + 1))
    run = c2jax_step(cfg, init(cfg, jax.random.key(0)), tokens)
    run()
    times = []
    for _ in range(FLAGS.rounds):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    with tempfile.TemporaryDirectory() as trace_dir:
        jax.profiler.start_trace(trace_dir)
        run()
        jax.profiler.stop_trace()
        durations = op_durations(trace_dir)
    hlo = run.lowered().compile().as_text()
    names = op_names(hlo)
    by_part = collections.Counter()
    for op, micros in durations.items():
        name = names.get(op, "")
        by_part[(part_of(name), "backward" if "transpose(" in name else "forward")] += micros
    total = sum(by_part.values())
    print(f"{FLAGS.preset} {batch}x{seq} {FLAGS.dtype}, scan_unroll={FLAGS.scan_unroll}: step "
          f"{statistics.median(times):.3f} s (median of {FLAGS.rounds}); op time in the traced "
          f"step {total / 1e6:.3f} s\n")
    print("| part | forward s | backward s | share of op time |\n|---|---:|---:|---:|")
    parts = sorted({p for p, _ in by_part}, key=lambda p: -(by_part[(p, "forward")]
                                                              + by_part[(p, "backward")]))
    for part in parts:
        fwd, bwd = by_part[(part, "forward")], by_part[(part, "backward")]
        print(f"| {part} | {fwd / 1e6:.3f} | {bwd / 1e6:.3f} | {(fwd + bwd) / total:.0%} |")
    print(f"\nslowest ops{' of ' + FLAGS.part if FLAGS.part else ''}:\n")
    listed = [(op, micros) for op, micros in durations.most_common()
              if part_of(names.get(op, "")).startswith(FLAGS.part)]
    for op, micros in listed[:FLAGS.top]:
        print(f"  {micros / 1e3:8.1f} ms  {op:36s} {names.get(op, '')[-90:]}")


if __name__ == "__main__":
    app.run(main)
