"""Can the model learn to copy? A copy toy, variants of the model side by side.

    python -m experiments.copy_toy --variant= --variant=tie_word_embeddings=True --min_half=8

Every example is a block of random token ids given twice. The first copy cannot be predicted
(ln of the ids in play); the repeat is free for a model that copies. The agent's later turns
need copying: a file or function name from a tool's output has to go into the next call, and
BENCHMARKS.md ("the warm start cannot copy") found that no warm-start checkpoint does it.

Two versions, and they test different circuits:
- fixed blocks (`--min_half=0`, every block `--half` long): the repeat is always `half` tokens
  back, so one positional head ("attend `half` back, copy what is there") solves it;
- varied blocks (`--min_half` > 0, n uniform in [min_half, half], random filler after the
  repeat): the repeat is at no fixed distance, so only content matching, the previous-token +
  induction circuit (Olsson et al. 2022, "In-context Learning and Induction Heads"), predicts it.
  This is the one an agent needs.

Each `--variant` (comma-separated FIELD=VALUE overrides of the tiny preset; empty = the preset)
is trained from the same init seed on the same batches, with the real objective
(`c2jax.train.losses.training_objective`, MTP included) and optimizer
(`c2jax.train.optimizer.make_optimizer`). Every `--every` steps it prints, on a fixed held-out
batch, the mean NLL of the first copy and of the repeat (its first token excluded: nothing
says where the repeat starts) and the argmax copy accuracy on the repeat. `--json` writes the
rows. Shapes: examples `[batch, 2 * half]`, ids drawn uniformly from the last `--ids` ids of
the vocabulary.
"""
from __future__ import annotations

import ast
import json
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app, flags

from c2jax.model import abstract_variables, apply, init, update_router_bias
from c2jax.train import losses
from c2jax.train.config import loss_config, optimizer_config
from c2jax.train.optimizer import make_optimizer, weight_decay_mask
from configs.models import tiny

_VARIANT = flags.DEFINE_multi_string(
    "variant", [""], "model overrides FIELD=VALUE[,FIELD=VALUE..]; '' = the tiny preset")
_OPTIMIZER = flags.DEFINE_multi_string("optimizer", [], "FIELD=VALUE optimizer overrides")
_STEPS = flags.DEFINE_integer("steps", 500, "optimizer steps per variant")
_VOCAB = flags.DEFINE_integer("vocab", 8192, "model vocabulary (the stdlib BPE's is 8192)")
_IDS = flags.DEFINE_integer("ids", 0, "distinct ids the blocks draw from; 0 = the whole vocab")
_HALF = flags.DEFINE_integer("half", 32, "most tokens per block (each example is 2x this)")
_MIN_HALF = flags.DEFINE_integer(
    "min_half", 0, "fewest tokens per block; 0 = every block has `half` (then a head looking "
    "exactly `half` tokens back solves the toy without induction)")
_BATCH = flags.DEFINE_integer("batch", 32, "examples per step")
_EVERY = flags.DEFINE_integer("every", 250, "report every this many steps")
_SEED = flags.DEFINE_integer("seed", 0, "init and data seed")
_JSON = flags.DEFINE_string("json", "", "write the rows here")


def parse_overrides(text: str) -> dict:
    """'a=1,b=True,c=x' -> {'a': 1, 'b': True, 'c': 'x'} (values as Python literals when they
    parse as one)."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        if "=" not in item:
            raise ValueError(f"override {item!r} is not FIELD=VALUE")
        field, value = item.split("=", 1)
        try:
            out[field.strip()] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            out[field.strip()] = value.strip()
    return out


def copy_batch(rng: np.random.Generator, batch: int, half: int, vocab: int, ids: int,
               min_half: int = 0) -> dict:
    """A training batch of blocks given twice: `tokens`, `targets`, `loss_mask`, `segment_ids`,
    `positions`, each `[batch, 2 * half]` (one document per row, every target trained), and
    `repeat` bool `[batch, 2 * half]`: True where the target is a repeated token other than the
    repeat's first. Each row's block has n tokens, n uniform in [min_half, half] (0 = half),
    followed by random filler up to 2 * half: with n varying, the repeat is at no fixed distance,
    so only content matching (induction) predicts it, not a head that looks n tokens back."""
    seq = 2 * half
    low = min_half or half
    doc = rng.integers(vocab - (ids or vocab), vocab, size=(batch, seq + 1)).astype(np.int32)
    repeat = np.zeros((batch, seq), bool)
    for row, n in enumerate(rng.integers(low, half + 1, size=batch)):
        doc[row, n:2 * n] = doc[row, :n]
        repeat[row, n:2 * n - 1] = True   # position i predicts doc[i + 1]
    return {"tokens": doc[:, :-1], "targets": doc[:, 1:], "repeat": repeat,
            "loss_mask": np.ones((batch, seq), np.float32),
            "segment_ids": np.ones((batch, seq), np.int32),
            "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), (batch, seq)).copy()}


def train_copy_toy(model_cfg, opt_cfg, *, steps: int, half: int, batch: int, ids: int = 0,
                   min_half: int = 0, every: int = 250, seed: int = 0, log=print
                   ) -> tuple[list[dict], dict]:
    """Trains `model_cfg` on the copy toy; returns (rows, trained variables), one row per
    report: {step, first_nll, repeat_nll, copy_accuracy} on a fixed held-out batch of 16
    examples (first: the first block's tokens after its first; repeat: `copy_batch`'s
    `repeat`)."""
    vocab = model_cfg.vocab_size
    variables = init(model_cfg, jax.random.key(seed))
    params, router_bias = variables["params"], variables["router_bias"]
    tx = make_optimizer(opt_cfg, steps, weight_decay_mask(abstract_variables(model_cfg)["params"]))
    opt_state = tx.init(params)
    loss_cfg = loss_config()

    @jax.jit
    def step(params, opt_state, router_bias, batch_):
        (_, (_, aux)), grads = jax.value_and_grad(
            lambda p: losses.training_objective(p, router_bias, batch_, model_cfg, loss_cfg),
            has_aux=True)(params)
        updates, opt_state = tx.update(grads, opt_state, params)
        if "router_load" in aux:
            router_bias = update_router_bias(router_bias, aux["router_load"],
                                             model_cfg.router_bias_update_rate)
        return optax.apply_updates(params, updates), opt_state, router_bias

    held_out = copy_batch(np.random.default_rng(seed + 10_000), 16, half, vocab, ids, min_half)
    repeat_np = held_out.pop("repeat")
    block = repeat_np.sum(axis=1, keepdims=True) + 1                     # n of each row
    first = jnp.asarray(np.arange(2 * half)[None] < block - 1)
    repeat = jnp.asarray(repeat_np)

    @jax.jit
    def report(params, router_bias):
        logits = apply({"params": params, "router_bias": router_bias}, held_out["tokens"],
                       cfg=model_cfg)[0]
        nll, _ = losses.token_losses(logits, held_out["targets"])
        hit = jnp.argmax(logits, -1) == held_out["targets"]

        def mean_over(mask, values):
            return jnp.sum(jnp.where(mask, values, 0.0)) / jnp.sum(mask)

        return mean_over(first, nll), mean_over(repeat, nll), mean_over(repeat, hit)

    rng = np.random.default_rng(seed)
    rows, start = [], time.time()
    for i in range(steps + 1):
        if i % every == 0 or i == steps:
            first_nll, repeat_nll, acc = (float(x) for x in report(params, router_bias))
            rows.append(dict(step=i, first_nll=first_nll, repeat_nll=repeat_nll,
                             copy_accuracy=acc))
            log(f"  step {i:5d}  first-half NLL {first_nll:6.3f}  repeat NLL {repeat_nll:6.3f}"
                f"  copy accuracy {acc:.3f}  ({time.time() - start:.0f} s)")
        if i < steps:
            batch_ = copy_batch(rng, batch, half, vocab, ids, min_half)
            del batch_["repeat"]
            params, opt_state, router_bias = step(params, opt_state, router_bias, batch_)
    return rows, {"params": params, "router_bias": router_bias}


def main(argv):
    del argv
    opt_cfg = optimizer_config(**parse_overrides(",".join(_OPTIMIZER.value)))
    results = []
    for variant in _VARIANT.value:
        overrides = parse_overrides(variant)
        cfg = tiny(**{"vocab_size": _VOCAB.value,
                      "max_position_embeddings": max(512, 2 * _HALF.value), **overrides})
        print(f"variant {variant or '(tiny preset)'}: vocab {cfg.vocab_size}, "
              f"ids {_IDS.value or cfg.vocab_size}, block {_MIN_HALF.value or _HALF.value}-"
              f"{_HALF.value}, batch {_BATCH.value}", flush=True)
        rows, _ = train_copy_toy(cfg, opt_cfg, steps=_STEPS.value, half=_HALF.value,
                              batch=_BATCH.value, ids=_IDS.value, min_half=_MIN_HALF.value,
                              every=_EVERY.value, seed=_SEED.value,
                              log=lambda s: print(s, flush=True))
        results.append(dict(variant=variant, rows=rows))
    print("\n| variant | step | first-half NLL | repeat NLL | copy accuracy |")
    print("|---|---:|---:|---:|---:|")
    for result in results:
        last = result["rows"][-1]
        print(f"| {result['variant'] or 'tiny preset'} | {last['step']} | "
              f"{last['first_nll']:.3f} | {last['repeat_nll']:.3f} | "
              f"{last['copy_accuracy']:.3f} |")
    if _JSON.value:
        with open(_JSON.value, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    app.run(main)
