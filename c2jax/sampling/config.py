"""The sampler config: batch slots, cache length, shape buckets, speculative decoding."""
from __future__ import annotations

import ml_collections


def sampler_config(**overrides) -> ml_collections.ConfigDict:
    """Defaults for `Engine`; the result is locked, so a misspelt field raises."""
    c = ml_collections.ConfigDict()
    c.slots = 8                 # sequences decoded together: the batch of every decode step
    c.max_len = 1024            # cache positions per slot: prompt + new tokens must fit
    c.min_bucket = 16           # smallest prompt / attention-window bucket; buckets double
    c.steps_per_call = 4        # decode steps (or speculative rounds) per compiled call
    c.speculative = False       # draft with the MTP modules, verify with the main model
    c.capacity_factor = 0.0     # MoE capacity while sampling; 0 = dropless (capacity = tokens)
    c.max_stop_tokens = 8       # stop ids a request may give
    c.lock()
    c.update(overrides)
    return c


def validate(c) -> None:
    """Raises ValueError naming the field that cannot work."""
    for field in ("slots", "max_len", "min_bucket", "steps_per_call", "max_stop_tokens"):
        if int(c[field]) < 1:
            raise ValueError(f"sampler config field '{field}' = {c[field]} must be >= 1")
    if c.min_bucket > c.max_len:
        raise ValueError(f"sampler config min_bucket={c.min_bucket} exceeds max_len={c.max_len}")
    if c.capacity_factor < 0:
        raise ValueError(f"sampler config capacity_factor={c.capacity_factor} must be >= 0 "
                         "(0 = dropless)")
