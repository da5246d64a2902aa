"""One RL episode, token-in/token-out: the policy samples turns, the environment answers.

    episode = run_episode(env, server, template, task, seed=..., group_id=..., sample=...,
                          settings=RolloutSettings(max_len=2048))

The context is a list of token ids that only ever grows by appending: the chat template
renders system + task once (`<|bos|>...`), then each turn appends the harness-written
`<|assistant|>` (loss 0), the sampled ids exactly as sampled (loss 1, with their behaviour
log-probs, policy versions and routed experts) and the tool's answer `<|tool|>...<|end|>`
(loss 0). The decoded text of the sampled turn goes to `env.step`; the environment parses the
tool call, and a malformed one comes back as an error observation.

**When the next turn would not fit** (`context_budget` tokens):

- `summarise` (the default, the Composer 2 recipe): the actor opens a summary turn
  (`<|assistant|><|summary|>`, loss 0), the model writes its summary (loss 1: the summary is
  trained, and shares the episode's reward), and the context restarts from system + task +
  that summary (the summary's ids reused, loss 0 now). The episode continues in a new segment.
- `truncate` (the ablation): the oldest turns are dropped until the next turn fits.
- `stop`: the episode ends with `finish`.

When even that cannot make room, or after `max_turns` tool turns, the actor sends `finish` so
the environment grades the work.

**Routing per position** (for replay in the learner): every call re-prefills the context, so a
position is seen by several calls. A position that produced a sampled token keeps the experts
it used then (its token's behaviour log-prob came from that forward); every other position
takes those of the latest prefill that covered it.
"""
from __future__ import annotations

import dataclasses
import time
import traceback
from typing import Any

import numpy as np
from environments import tool_format

from c2jax.data.chat import ChatTokens
from c2jax.model.config import num_moe_layers
from c2jax.rl.trajectory import Episode, Segment

CONTEXT_STRATEGIES = ("summarise", "truncate", "stop")
#: The finish an actor sends when no turn fits any more or its turns are spent (the
#: environment then grades the work).
FORCED_FINISH = {"tool": "finish",
                 "args": {"summary": "stopped: the turn or context limit was reached"}}


@dataclasses.dataclass(frozen=True)
class RolloutSettings:
    """How an actor runs episodes (rl config `rollout` section)."""
    max_len: int                    # the sampler's context: every segment fits in it
    max_new_tokens: int = 256       # per assistant turn
    temperature: float = 1.0
    top_p: float = 1.0
    context: str = "summarise"      # "summarise" | "truncate" | "stop" (see module docstring)
    context_budget: int = 0         # act when a turn would pass this many tokens; 0 = max_len
    summary_max_tokens: int = 256   # tokens a summary may take
    max_summaries: int = 4          # then the episode stops instead
    max_turns: int = 0              # sampled tool turns before the actor sends `finish`;
                                    # 0 = only the task's own step limit

    def __post_init__(self):
        if self.context not in CONTEXT_STRATEGIES:
            raise ValueError(f"rollout context={self.context!r}: choose one of "
                             f"{CONTEXT_STRATEGIES}")
        if self.context_budget > self.max_len:
            raise ValueError(f"rollout context_budget={self.context_budget} exceeds max_len="
                             f"{self.max_len}")

    @property
    def budget(self) -> int:
        return self.context_budget or self.max_len


class _Context:
    """The current segment: token ids with per-token records, grown by appending."""

    def __init__(self, moe_layers: int, k: int):
        self._moe, self._k = moe_layers, k
        self.tokens: list[int] = []
        self.mask: list[int] = []
        self.logprobs: list[float] = []
        self.versions: list[int] = []
        self.routing: list[np.ndarray | None] = []
        self._locked: list[bool] = []
        self.turn_starts: list[int] = []     # where each assistant turn begins

    def __len__(self) -> int:
        return len(self.tokens)

    def harness(self, ids) -> None:
        """Appends ids the harness wrote (loss 0)."""
        n = len(ids)
        self.tokens += list(ids)
        self.mask += [0] * n
        self.logprobs += [0.0] * n
        self.versions += [-1] * n
        self.routing += [None] * n
        self._locked += [False] * n

    def sampled(self, generation) -> None:
        """Appends a generation's tokens (loss 1) and stores the routing the call saw."""
        prompt_len = len(self.tokens)
        for p in range(prompt_len - 1):
            if not self._locked[p]:
                self.routing[p] = generation.prompt_routing[p]
        n = len(generation.tokens)
        self.tokens += generation.tokens
        self.mask += [1] * n
        self.logprobs += generation.logprobs.tolist()
        self.versions += generation.versions.tolist()
        self.routing += [None] * n
        self._locked += [False] * n
        # Position prompt_len - 1 + j produced token j: its experts are that call's.
        for j in range(n):
            self.routing[prompt_len - 1 + j] = generation.routing[j]
            self._locked[prompt_len - 1 + j] = True

    def to_json(self) -> dict[str, Any]:
        return {"tokens": list(self.tokens), "mask": list(self.mask),
                "logprobs": list(self.logprobs), "versions": list(self.versions),
                "routing": [None if r is None else np.asarray(r).tolist() for r in self.routing],
                "locked": list(self._locked), "turn_starts": list(self.turn_starts)}

    @classmethod
    def from_json(cls, d: dict[str, Any], moe_layers: int, k: int) -> _Context:
        ctx = cls(moe_layers, k)
        ctx.tokens, ctx.mask = list(d["tokens"]), list(d["mask"])
        ctx.logprobs, ctx.versions = list(d["logprobs"]), list(d["versions"])
        ctx.routing = [None if r is None else np.asarray(r, np.int16) for r in d["routing"]]
        ctx._locked, ctx.turn_starts = list(d["locked"]), list(d["turn_starts"])
        return ctx

    def segment(self, kind: str) -> Segment:
        zero = np.zeros((self._moe, self._k), np.int16)
        routing = np.stack([zero if r is None else r.astype(np.int16) for r in self.routing]) \
            if self.routing else np.zeros((0, self._moe, self._k), np.int16)
        return Segment(np.asarray(self.tokens, np.int32), np.asarray(self.mask, np.int8),
                       np.asarray(self.logprobs, np.float32),
                       np.asarray(self.versions, np.int32), routing, kind)


def _ids(render) -> list[int]:
    chat = ChatTokens()
    render(chat)
    return chat.ids


class _Episode:
    """The state of one running episode (see run_episode)."""

    def __init__(self, env, server, template, task, seed, group_id, sample, settings):
        self.env, self.server, self.template = env, server, template
        self.task, self.seed, self.settings = task, seed, settings
        self.group_id, self.sample = group_id, sample
        cfg = server.engine.cfg
        self.moe_layers = num_moe_layers(cfg)
        self.k = cfg.num_experts_per_tok
        self.segments: list[Segment] = []
        self.actions: list[Any] = []
        self.observations: list[str] = []    # the environment's answer to each action
        self.summaries = self.truncations = self.turns = 0
        self.header: list[int] = []
        self.ctx = _Context(self.moe_layers, self.k)
        self.assistant = _ids(template.open_assistant_turn)
        self.summary_opening = _ids(lambda c: template.open_assistant_turn(c, summary=True))
        tokenizer = template.tokenizer
        self.summary_close = [tokenizer.token_id(tool_format.END_SUMMARY), template.end_id]

    def generate(self, max_new: int):
        return self.server.generate(
            self.ctx.tokens, max_new, temperature=self.settings.temperature,
            top_p=self.settings.top_p, seed=(self.seed * 1_000_003 + self.turns) % (1 << 31),
            stop_tokens=[self.template.end_id])

    def room(self) -> int:
        """New tokens the next assistant turn may take."""
        return self.settings.budget - len(self.ctx) - len(self.assistant)

    def make_room(self) -> bool:
        """Applies the context strategy until a turn fits; False when nothing more helps."""
        s = self.settings
        while self.room() < min(s.max_new_tokens, 16):
            if s.context == "summarise" and self.summaries < s.max_summaries:
                if not self.summarise():
                    return False
            elif s.context == "truncate" and len(self.ctx.turn_starts) > 1:
                self.truncate()
            else:
                return False
        return True

    def summarise(self) -> bool:
        ctx = self.ctx
        room = self.settings.max_len - len(ctx) - len(self.summary_opening)
        if room < 8:
            return False
        ctx.harness(self.summary_opening)
        generation = self.generate(min(self.settings.summary_max_tokens, room))
        ctx.sampled(generation)
        self.turns += 1
        self.summaries += 1
        self.segments.append(ctx.segment("summary"))
        summary = list(generation.tokens)
        if not summary or summary[-1] != self.template.end_id:
            summary += self.summary_close        # closed by the harness when cut off
        fresh = _Context(self.moe_layers, self.k)
        fresh.harness(self.header + self.summary_opening + summary)
        self.ctx = fresh
        return True

    def truncate(self) -> None:
        """Drops the oldest turn; the new segment keeps the rest as context (loss 0)."""
        old = self.ctx
        self.segments.append(old.segment("truncated"))
        self.truncations += 1
        keep_from = old.turn_starts[1]
        fresh = _Context(self.moe_layers, self.k)
        fresh.harness(self.header)
        shift = len(self.header) - keep_from
        fresh.harness(old.tokens[keep_from:])
        fresh.turn_starts = [start + shift for start in old.turn_starts[1:]]
        self.ctx = fresh

    def snapshot(self) -> dict[str, Any]:
        """The episode at its last turn boundary, JSON-ready (see `resume`)."""
        return {"seed": self.seed, "header": list(self.header), "ctx": self.ctx.to_json(),
                "segments": [seg.to_json() for seg in self.segments],
                "actions": list(self.actions), "observations": list(self.observations),
                "summaries": self.summaries, "truncations": self.truncations,
                "turns": self.turns}

    def resume(self, snapshot: dict[str, Any]) -> None:
        """Rebuilds the environment by replaying the recorded actions, then the context."""
        observation, _ = self.env.reset(seed=self.seed, options={"task": self.task})
        for i, (action, expected) in enumerate(zip(snapshot["actions"],
                                                   snapshot["observations"])):
            observation, _, terminated, truncated, _ = self.env.step(action)
            if terminated or truncated or observation["content"] != expected:
                raise RuntimeError(f"replaying the action log diverged at step {i}: the "
                                   "environment answered differently than when recorded")
        self.header = list(snapshot["header"])
        self.ctx = _Context.from_json(snapshot["ctx"], self.moe_layers, self.k)
        self.segments = [Segment.from_json(seg) for seg in snapshot["segments"]]
        self.actions, self.observations = list(snapshot["actions"]), list(snapshot["observations"])
        self.summaries, self.truncations = snapshot["summaries"], snapshot["truncations"]
        self.turns = snapshot["turns"]

    def start(self) -> None:
        observation, info = self.env.reset(seed=self.seed, options={"task": self.task})
        self.begin(observation, info)

    def begin(self, observation: dict[str, Any], info: dict[str, Any]) -> None:
        """Renders system + task from an environment that has just been reset."""
        header = self.template.render([{"role": "system", "content": info["system_prompt"]},
                                       {"role": "user", "content": observation["content"]}])
        self.header = header.ids
        self.ctx.harness(self.header)

    def run(self, on_boundary=None) -> dict[str, Any]:
        """Plays the episode from its current state to the end; returns the final info.
        `on_boundary(snapshot)` is called after every turn (for rollout checkpoints)."""
        while True:
            over = self.settings.max_turns and self.turns - self.summaries >= \
                self.settings.max_turns
            if not over and self.make_room():
                self.ctx.turn_starts.append(len(self.ctx))
                self.ctx.harness(self.assistant)
                generation = self.generate(min(self.settings.max_new_tokens, self.room()))
                self.ctx.sampled(generation)
                self.turns += 1
                action = {"text": self.template.tokenizer.decode(generation.tokens),
                          "output_tokens": len(generation.tokens)}
            else:
                action = dict(FORCED_FINISH)
            self.actions.append(action)
            observation, _, terminated, truncated, info = self.env.step(action)
            if terminated or truncated:
                self.segments.append(self.ctx.segment("turns"))
                return info
            self.observations.append(observation["content"])
            self.ctx.harness(_ids(lambda c: self.template.append_tool_output(
                c, observation["content"])))
            if on_boundary is not None:
                on_boundary(self.snapshot())


def run_episode(env, server, template, task, *, seed: int, group_id: int, sample: int,
                settings: RolloutSettings, resume: dict[str, Any] | None = None,
                on_boundary=None) -> Episode:
    """Runs one episode (see module docstring). Never raises: an environment or sampler error
    makes an `infra_failure` episode whose `error` holds the traceback.

    resume: a snapshot (`on_boundary` gives one after every turn) to continue from, e.g. after
    a crash: the environment is rebuilt by replaying the recorded actions.
    """
    started = time.monotonic()
    state = _Episode(env, server, template, task, seed, group_id, sample, settings)
    try:
        if resume is None:
            state.start()
        else:
            state.resume(resume)
        info = state.run(on_boundary)
        error = None
        infra = bool(info.get("infra_failure"))
    except Exception:  # one broken episode must not take the actor down; it is reported
        info, error, infra = {}, traceback.format_exc(limit=8), True
    task_id = getattr(task, "id", str(task))
    return Episode(task_id=task_id, group_id=group_id, sample=sample, segments=state.segments,
                   info=info, actions=state.actions, infra_failure=infra, error=error,
                   summaries=state.summaries, truncations=state.truncations, turns=state.turns,
                   seconds=time.monotonic() - started)
