"""Shaped rewards for a group of episodes on the same task.

    r_i = correctness_i + style_weight * style_i + efficiency_weight * efficiency_i
          - length_lambda * p_group^length_kappa * f(cost_i / cost_ref)

  correctness  from the environment: the hidden tests' pass fraction (or `resolved`)
  style        well-formed communication in [0, 1]: the mean of (tool calls without error /
               steps) and (the episode ended with `finish`, i.e. a final message)
  efficiency   1 - min(1, steps / max_steps): fewer tool calls and turns score higher
  cost         output_tokens + tool_call_tokens * steps: what the episode spent
  cost_ref     the group's median cost (or `cost_ref_tokens` when > 0)
  p_group      the group's pass rate (mean correctness); f is concave (log1p or x^q, q < 1)

Scaling the length penalty by the pass rate (prime-rl's pass-rate-scaled penalty, made
non-linear) pushes easy tasks, which most samples solve, to be answered fast, while hard tasks,
which few solve, may think long: the Composer 2 report's behaviour. Every term is returned
separately so trainers log them per component. Pure Python: no JAX.
"""
from __future__ import annotations

import math
import statistics
from typing import Any, Mapping, Sequence

import ml_collections

LENGTH_FUNCTIONS = ("log1p", "power")


def reward_config(**overrides) -> ml_collections.ConfigDict:
    c = ml_collections.ConfigDict()
    c.correctness = "pass_fraction"  # "pass_fraction" | "resolved"
    c.style_weight = 0.1
    c.efficiency_weight = 0.05
    c.length_lambda = 0.2            # 0 turns the length penalty off
    c.length_kappa = 1.0             # exponent on the group pass rate
    c.length_function = "log1p"      # "log1p": f(x) = log(1 + x); "power": f(x) = x^q
    c.length_power = 0.5             # q for "power" (q < 1 keeps f concave)
    c.tool_call_tokens = 32          # tokens-equivalent cost of one tool call / turn
    c.cost_ref_tokens = 0            # fixed cost reference; 0 = the group's median cost
    c.lock()
    c.update(overrides)
    return c


def _length_f(x: float, cfg) -> float:
    if cfg.length_function == "log1p":
        return math.log1p(x)
    if cfg.length_function == "power":
        if not 0 < cfg.length_power < 1:
            raise ValueError(f"reward config field 'length_power' = {cfg.length_power}: "
                             "must be in (0, 1) so f is concave")
        return x ** cfg.length_power
    raise ValueError(f"reward config field 'length_function' = {cfg.length_function!r}: "
                     f"choose one of {LENGTH_FUNCTIONS}")


def episode_terms(info: Mapping[str, Any], *, max_steps: int,
                  output_tokens: int | None = None) -> dict[str, float]:
    """Raw per-episode terms from the environment's final `info` (see environments/env.py)."""
    comps = info["reward_components"]
    steps = max(int(comps["steps"]), 1)
    tokens = output_tokens if output_tokens is not None else (comps.get("output_tokens") or 0)
    well_formed = 1.0 - min(1.0, comps["tool_errors"] / steps)
    finished = 1.0 if info.get("termination") == "finish" else 0.0
    return {
        "pass_fraction": float(info["pass_fraction"]),
        "resolved": float(bool(info["resolved"])),
        "style": 0.5 * (well_formed + finished),
        "efficiency": 1.0 - min(1.0, steps / max(max_steps, 1)),
        "steps": float(steps),
        "output_tokens": float(tokens),
    }


def shape_group(terms: Sequence[Mapping[str, float]], cfg) -> list[dict[str, float]]:
    """Shaped rewards of one group (same task). Each result holds every term and `reward`."""
    if not terms:
        return []
    key = "resolved" if cfg.correctness == "resolved" else "pass_fraction"
    correct = [t[key] for t in terms]
    pass_rate = sum(correct) / len(correct)
    costs = [t["output_tokens"] + cfg.tool_call_tokens * t["steps"] for t in terms]
    cost_ref = cfg.cost_ref_tokens or statistics.median(costs) or 1.0
    out = []
    for t, c, cost in zip(terms, correct, costs):
        penalty = cfg.length_lambda * pass_rate ** cfg.length_kappa * _length_f(cost / cost_ref,
                                                                                cfg)
        reward = (c + cfg.style_weight * t["style"] + cfg.efficiency_weight * t["efficiency"]
                  - penalty)
        out.append({**t, "correctness": c, "cost": cost, "cost_ref": cost_ref,
                    "group_pass_rate": pass_rate, "length_penalty": penalty, "reward": reward})
    return out
