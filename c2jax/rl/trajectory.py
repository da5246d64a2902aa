"""Token-in/token-out trajectories: what an actor records and the learner trains on.

An episode is one or more **segments**. A segment is one context window exactly as the model
saw it; a new one starts when the episode self-summarises (the context restarts from system +
task + summary) or is truncated. Every array of a segment is per token, `[n]`:

    tokens      int32    the context: prompt, sampled turns, tool outputs, as token ids
    loss_mask   int8     1 on tokens the policy sampled (trained), 0 on what the harness wrote
    logprobs    float32  behaviour log-prob of each sampled token (0 where loss_mask is 0)
    versions    int32    policy version that sampled each token (-1 where loss_mask is 0)
    routing     int16    `[n, moe_layers, k]` experts used at each position (see rollout.py)

Nothing is ever re-tokenised: the learner's row is `tokens` itself (pain point: retokenisation
drift). An `Episode` carries its segments, the shaped reward with every component, the
actions it sent (so a crashed run can replay the environment), and `infra_failure`: such
episodes are dropped from training and counted, never scored as zero.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass
class Segment:
    tokens: np.ndarray
    loss_mask: np.ndarray
    logprobs: np.ndarray
    versions: np.ndarray
    routing: np.ndarray
    kind: str = "turns"        # how it ended: "turns" (episode end), "summary", "truncated"

    def __len__(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def sampled(self) -> int:
        return int(self.loss_mask.sum())

    def to_json(self) -> dict[str, Any]:
        return {"tokens": self.tokens.tolist(), "loss_mask": self.loss_mask.tolist(),
                "logprobs": self.logprobs.tolist(), "versions": self.versions.tolist(),
                "routing": self.routing.tolist(), "routing_shape": list(self.routing.shape),
                "kind": self.kind}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Segment:
        return cls(np.asarray(d["tokens"], np.int32), np.asarray(d["loss_mask"], np.int8),
                   np.asarray(d["logprobs"], np.float32), np.asarray(d["versions"], np.int32),
                   np.asarray(d["routing"], np.int16).reshape(d["routing_shape"]), d["kind"])


@dataclasses.dataclass
class Episode:
    """One attempt at a task. `group_id` ties the `group_size` attempts of one task together
    (their rewards are compared for the advantage); `sample` is the attempt's index in it."""
    task_id: str
    group_id: int
    sample: int
    segments: list[Segment]
    info: dict[str, Any]              # the environment's final info (reward_components, ...)
    actions: list[Any]                # every action sent to env.step, in order
    infra_failure: bool = False
    error: str | None = None
    reward: float = 0.0               # shaped (rewards.shape_group), filled per group
    components: dict[str, float] = dataclasses.field(default_factory=dict)
    summaries: int = 0                # self-summarisation turns
    truncations: int = 0              # context truncations (the ablation strategy)
    turns: int = 0                    # assistant turns sampled
    seconds: float = 0.0

    @property
    def sampled_tokens(self) -> int:
        return sum(s.sampled for s in self.segments)

    def versions(self) -> np.ndarray:
        """Versions of every sampled token, `[sampled_tokens]`."""
        parts = [s.versions[s.loss_mask > 0] for s in self.segments]
        return np.concatenate(parts) if parts else np.zeros((0,), np.int32)

    def to_json(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["segments"] = [s.to_json() for s in self.segments]
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Episode:
        d = dict(d)
        d["segments"] = [Segment.from_json(s) for s in d["segments"]]
        return cls(**d)
