"""Decode throughput of the c2jax sampler vs HF transformers `generate`, and MTP speculative
decoding vs plain decoding, measured side by side in one run.

    python -m experiments.bench_decode [--mtp_checkpoint=runs/stages_tiny/pretrain]

Part 1 (`small` preset, random weights exported with `c2jax.save_hf` and loaded by
`AutoModelForCausalLM.from_pretrained`): greedy, `--new_tokens` after a `--prompt_len`-token
prompt, at batch 1 and 16, float32 on both sides. Contenders alternate (round-robin) so machine
noise hits them alike; the time of a generate call includes the prompt's prefill. Both sides
must produce the same tokens: the fraction of rows that agree exactly is printed (a parity test
of the latent cache against HF's per-head cache).

Part 2 (a trained tiny model with MTP heads, by default the checkpoint of the tiny pretraining
stage, `experiments/stages_tiny.py`): plain vs speculative decoding on held-out stdlib code
prompts, greedy and sampled, batch 1 and 8; the acceptance rate of the MTP drafts and the
speed-up. At temperature 0 both must emit identical tokens (checked).
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import torch
from absl import app, flags
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

import c2jax
from c2jax.data import corpus
from c2jax.data.config import data_config
from c2jax.flops import param_counts
from c2jax.model import init
from c2jax.sampling import Engine, sampler_config
from c2jax.train.checkpoint import load_trained_model
from configs.models import small

FLAGS = flags.FLAGS
flags.DEFINE_list("batches", ["1", "16"], "batch sizes of part 1")
flags.DEFINE_integer("prompt_len", 32, "prompt tokens")
flags.DEFINE_integer("new_tokens", 64, "greedy tokens generated per row")
flags.DEFINE_integer("rounds", 3, "timed calls per contender (after one warm-up call)")
flags.DEFINE_integer("threads", 2, "torch intra-op threads (XLA:CPU uses every core)")
flags.DEFINE_string("mtp_checkpoint", "runs/stages_tiny/pretrain",
                    "part 2: a training workdir of a model with MTP heads ('' skips part 2)")
flags.DEFINE_list("spec_batches", ["1", "8"], "batch sizes of part 2")
flags.DEFINE_integer("spec_new_tokens", 96, "tokens per row in part 2")


def timed(run, rounds: int):
    """Median wall time of `rounds` calls, and the last result."""
    times, result = [], None
    for _ in range(rounds):
        t0 = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - t0)
    return float(np.median(times)), result


def hf_generate(model, prompts: np.ndarray, new_tokens: int):
    ids = torch.as_tensor(prompts)

    def run():
        with torch.no_grad():
            out = model.generate(ids, attention_mask=torch.ones_like(ids),
                                 max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                                 do_sample=False, eos_token_id=None, pad_token_id=0)
        return out[:, prompts.shape[1]:].numpy().tolist()
    return run


def c2jax_generate(cfg, variables, prompts: np.ndarray, new_tokens: int, *,
                   speculative: bool = False, temperature: float = 0.0):
    length = prompts.shape[1] + new_tokens
    engine = Engine(cfg, variables, config=sampler_config(
        slots=len(prompts), max_len=1 << (length - 1).bit_length(), steps_per_call=8,
        speculative=speculative))

    def run():
        gens = engine.generate([dict(prompt=p.tolist(), max_new_tokens=new_tokens,
                                     temperature=temperature, seed=i)
                                for i, p in enumerate(prompts)])
        return [g.tokens for g in gens]
    return run, engine


def read_bandwidth(megabytes: int = 256, reps: int = 5) -> float:
    """Bytes/s of a jitted sum over a float32 array: the machine's weight-streaming speed."""
    x = jnp.ones((megabytes << 18,), jnp.float32)
    f = jax.jit(jnp.sum)
    jax.block_until_ready(f(x))
    best = min(timed(lambda: jax.block_until_ready(f(x)), 1)[0] for _ in range(reps))
    return x.size * 4 / best


def weight_bytes_per_step(cfg, batch: int) -> float:
    """float32 bytes of the weights one decode step of `batch` rows must read: everything but
    the input embedding, with only the routed experts some row chose (expected distinct
    experts per layer: E (1 - (1 - k/E)^batch), ignoring group limits)."""
    counts = param_counts(cfg)
    e_routed, k = cfg.n_routed_experts, cfg.num_experts_per_tok
    expert = 3 * cfg.hidden_size * cfg.moe_intermediate_size
    moe_layers = cfg.num_hidden_layers - cfg.first_k_dense_replace
    used = e_routed * (1 - (1 - k / e_routed) ** batch)
    params = counts["total"] - counts["embedding"] - moe_layers * (e_routed - used) * expert
    return 4.0 * params


def part1():
    cfg = small()
    variables = init(cfg, jax.random.key(0))
    rng = np.random.RandomState(0)
    bandwidth = read_bandwidth()
    print(f"\n## c2jax vs HF transformers generate: `small`, greedy, {FLAGS.new_tokens} new "
          f"tokens after {FLAGS.prompt_len}, float32\n")
    print(f"Machine read bandwidth (jit sum over 256 MB): {bandwidth / 1e9:.1f} GB/s. The "
          "floor is the tokens/s at which each decode step only streams the weights it needs "
          "once at that speed.\n")
    print("| batch | contender | s per generate | tokens/s | vs HF | vs floor | "
          "same tokens as HF |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        c2jax.save_hf(tmp, cfg, variables)
        model = AutoModelForCausalLM.from_pretrained(tmp, attn_implementation="eager").float()
    model.eval()
    for batch in map(int, FLAGS.batches):
        prompts = rng.randint(16, cfg.vocab_size, (batch, FLAGS.prompt_len))
        contenders = {"HF transformers": hf_generate(model, prompts, FLAGS.new_tokens),
                      "c2jax": c2jax_generate(cfg, variables, prompts, FLAGS.new_tokens)[0]}
        for run in contenders.values():   # warm-up: compiles c2jax's buckets
            run()
        times = {name: [] for name in contenders}
        outputs = {}
        for _ in range(FLAGS.rounds):
            for name, run in contenders.items():
                t, outputs[name] = timed(run, 1)
                times[name].append(t)
        hf_time = float(np.median(times["HF transformers"]))
        same = np.mean([a == b for a, b in zip(outputs["c2jax"], outputs["HF transformers"])])
        floor = batch * bandwidth / weight_bytes_per_step(cfg, batch)
        for name in contenders:
            t = float(np.median(times[name]))
            rate = batch * FLAGS.new_tokens / t
            print(f"| {batch} | {name} | {t:.3f} | {rate:,.0f} | {hf_time / t:.2f}x | "
                  f"{rate / floor:.0%} of {floor:,.0f} | {same:.0%} |")


def code_prompts(tokenizer, count: int, length: int) -> np.ndarray:
    """`count` prompts of `length` tokens from the starts of files of the held-out ("eval")
    split of the stdlib corpus, which the pretraining stage never trained on."""
    documents = corpus.open_documents(corpus.STDLIB_SOURCE, split="eval",
                                      eval_fraction=data_config().eval_fraction)
    rows = []
    for i in range(len(documents)):
        ids = tokenizer.encode(documents[i]["text"])
        if len(ids) >= length:
            rows.append(ids[:length])
        if len(rows) == count:
            return np.asarray(rows, np.int32)
    raise ValueError(f"the held-out split has fewer than {count} files of {length} tokens")


def part2(path: str):
    if not Path(path).exists():
        raise app.UsageError(f"--mtp_checkpoint={path} does not exist: run `python -m "
                             "experiments.stages_tiny` first (or pass '' to skip part 2)")
    cfg, variables, tokenizer = load_trained_model(path)
    if not cfg.num_mtp_layers:
        raise app.UsageError(f"{path}: the model has no MTP modules to draft with")
    print(f"\n## MTP speculative vs plain decoding: the tiny model of {path} (MTP depth "
          f"{cfg.num_mtp_layers}), stdlib code prompts of {FLAGS.prompt_len} tokens, "
          f"{FLAGS.spec_new_tokens} new tokens\n")
    print("| batch | temperature | plain tokens/s | speculative tokens/s | speed-up | "
          "acceptance | same tokens |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for batch in map(int, FLAGS.spec_batches):
        prompts = code_prompts(tokenizer, batch, FLAGS.prompt_len)
        for temperature in (0.0, 1.0):
            plain, _ = c2jax_generate(cfg, variables, prompts, FLAGS.spec_new_tokens,
                                      temperature=temperature)
            spec, engine = c2jax_generate(cfg, variables, prompts, FLAGS.spec_new_tokens,
                                          speculative=True, temperature=temperature)
            plain(), spec()                                   # warm-up
            engine.drafted = engine.accepted = 0
            times = {"plain": [], "spec": []}
            for _ in range(FLAGS.rounds):
                t, plain_tokens = timed(plain, 1)
                times["plain"].append(t)
                t, spec_tokens = timed(spec, 1)
                times["spec"].append(t)
            tp, ts = np.median(times["plain"]), np.median(times["spec"])
            same = (f"{np.mean([a == b for a, b in zip(plain_tokens, spec_tokens)]):.0%}"
                    if temperature == 0 else "n/a (sampled)")
            n = batch * FLAGS.spec_new_tokens
            print(f"| {batch} | {temperature:g} | {n / tp:,.0f} | {n / ts:,.0f} | "
                  f"{tp / ts:.2f}x | {engine.acceptance_rate:.2f} | {same} |")


def main(argv):
    del argv
    torch.set_num_threads(FLAGS.threads)
    hf_logging.set_verbosity_error()
    part1()
    if FLAGS.mtp_checkpoint:
        part2(FLAGS.mtp_checkpoint)


if __name__ == "__main__":
    app.run(main)
