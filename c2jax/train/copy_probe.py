"""Does a policy copy from its context? The induction probe of a checkpoint.

    stats = copy_probe(cfg, variables, tokenizer)
    stats == {"random_32": 0.61, "random_64": 0.80, "random_100": 0.96,
              "code_first": 0.04, "code_repeat": 0.44}

- `random_n`: rows of n uniformly random non-special ids, each given twice; the argmax accuracy
  on the repeat (its first token excluded: nothing says where the repeat starts). Nothing but
  copying predicts it, so a model without the induction circuit (Olsson et al. 2022) scores
  ~0 and one with it close to 1, at every n: the n's are copy distances.
- `code_first` / `code_repeat`: `CODE_TOKENS` tokens of a stdlib module's source given twice;
  the accuracy on the first copy is what the model knows about code, the repeat's gain over it
  is what copying adds on real text.

An agent's calls copy names from a tool's output or the task, so a warm start that scores ~0
here cannot act (BENCHMARKS.md, "The copy toy" and "Induction through the pretraining
pipeline"). The warm start prints these after pretraining and after SFT.
"""
from __future__ import annotations

import difflib
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from c2jax.model import apply

#: Copy distances the random rows test, and rows per distance.
RANDOM_BLOCKS = (32, 64, 100)
ROWS = 8
#: Tokens of real code given twice, and where in `difflib`'s source (a stdlib file that ships
#: with every Python) they start.
CODE_TOKENS = 100
CODE_OFFSET = 5000


def repeat_accuracy(forward, variables, tokens: np.ndarray) -> tuple[float, float]:
    """(first copy, repeat) argmax accuracy of `forward(variables, tokens) -> argmax ids` on
    `tokens` int `[rows, 2 n]` whose two halves are equal, each half's first token excluded."""
    n = tokens.shape[1] // 2
    predicted = np.asarray(forward(variables, jnp.asarray(tokens, jnp.int32)))
    first = predicted[:, :n - 1] == tokens[:, 1:n]
    repeat = predicted[:, n:2 * n - 1] == tokens[:, n + 1:]
    return float(first.mean()), float(repeat.mean())


def random_rows(block: int, *, rows: int, first_id: int, vocab_size: int,
                seed: int = 0) -> np.ndarray:
    """int32 `[rows, 2 block]`: random ids in [first_id, vocab_size), each row's block twice."""
    ids = np.random.default_rng([seed, block]).integers(first_id, vocab_size, (rows, block))
    return np.concatenate([ids, ids], axis=1).astype(np.int32)


def copy_probe(cfg, variables, tokenizer=None, *, first_id: int = 100,
               blocks: tuple[int, ...] = RANDOM_BLOCKS, rows: int = ROWS) -> dict[str, float]:
    """The probe's accuracies (module docstring) for the model `cfg` with `variables`; the
    code rows only when a `tokenizer` (c2jax.data.tokenizer) is given."""
    forward = jax.jit(lambda v, t: jnp.argmax(apply(v, t, cfg=cfg)[0], axis=-1))
    stats = {}
    for block in blocks:
        tokens = random_rows(block, rows=rows, first_id=first_id, vocab_size=cfg.vocab_size)
        stats[f"random_{block}"] = repeat_accuracy(forward, variables, tokens)[1]
    if tokenizer is not None:
        source = Path(difflib.__file__).read_text()[CODE_OFFSET:]
        ids = list(tokenizer.encode(source))[:CODE_TOKENS]
        stats["code_first"], stats["code_repeat"] = repeat_accuracy(
            forward, variables, np.asarray([ids + ids]))
    return stats


def describe(stats: dict[str, float]) -> str:
    """One line, e.g. 'copy probe: random 32/64/100 ids 0.61/0.80/0.96, code repeat 0.44
    (first copy 0.04)'."""
    blocks = [k.split("_")[1] for k in stats if k.startswith("random_")]
    line = (f"copy probe: random {'/'.join(blocks)} ids "
            + "/".join(f"{stats['random_' + b]:.2f}" for b in blocks))
    if "code_repeat" in stats:
        line += f", code repeat {stats['code_repeat']:.2f} (first copy {stats['code_first']:.2f})"
    return line
