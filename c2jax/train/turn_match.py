"""Teacher-forced turn match: how much of each assistant turn of a reference conversation a
policy would write itself, given everything before it.

    rendered = [assistant_turns(template, messages) for messages in conversations]
    stats = turn_match(cfg, variables, rendered, seq_len=2048)
    stats["by_turn"][i] == {"turns": n, "token_accuracy": a, "exact": e}

For the i-th trained assistant turn of every conversation, the model sees the conversation up
to that token (teacher forcing, one forward per conversation) and its argmax is compared with
each token the reference turn holds (its text, tool call and closing `<|end|>`; the
harness-written `<|assistant|>` is not predicted). `token_accuracy` is the mean share of
right tokens per turn, `exact` the share of turns whose every token is right: what a greedy
decoder reproduces without a single slip. Agent turns are only useful when exact (one wrong
token in a tool call's path is a failed call), so `exact` is the number that predicts whether a
warm start can act, where the SFT loss does not (BENCHMARKS.md, "RL (issue #7)").
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from c2jax.data.chat import ChatTemplate
from c2jax.model import apply


#: A rendered conversation: its ids `[tokens]` and the (start, end) span of every trained
#: assistant turn.
Rendered = tuple[list[int], list[tuple[int, int]]]


def assistant_turns(template: ChatTemplate, messages: Sequence[Mapping[str, Any]]) -> Rendered:
    """(ids, spans): the rendered conversation `[tokens]` and, per trained assistant turn, the
    half-open span of the tokens the policy writes (after `<|assistant|>`, up to and including
    its `<|end|>`)."""
    chat = template.begin()
    spans = []
    for message in messages:
        start = len(chat)
        template.append_message(chat, message)
        if message["role"] == "assistant" and message.get("train", True):
            spans.append((start + 1, len(chat)))
    return chat.ids, spans


def turn_match(cfg, variables, rendered: Sequence[Rendered], seq_len: int,
               max_turns: int = 8) -> dict[str, Any]:
    """Per assistant-turn index (0-based, up to `max_turns`), over `rendered` conversations
    (`assistant_turns` of each): turns scored, mean token accuracy, exact-match share; plus the
    same pooled over all turns. Conversations are cut at `seq_len` tokens and a turn that does
    not fit whole is skipped."""
    forward = jax.jit(lambda v, t: jnp.argmax(apply(v, t, cfg=cfg)[0], axis=-1))
    per_turn: dict[int, list[tuple[float, bool]]] = {}
    for ids, spans in rendered:
        tokens = np.zeros((1, seq_len), np.int32)
        kept = ids[:seq_len]
        tokens[0, :len(kept)] = kept
        predicted = np.asarray(forward(variables, jnp.asarray(tokens)))[0]
        for i, (start, end) in enumerate(spans[:max_turns]):
            if end > seq_len:
                break
            right = predicted[start - 1:end - 1] == np.asarray(ids[start:end])
            per_turn.setdefault(i, []).append((float(right.mean()), bool(right.all())))

    def summary(scores):
        scores = np.asarray(scores, np.float64).reshape(-1, 2)
        return {"turns": int(len(scores)), "token_accuracy": float(scores[:, 0].mean()),
                "exact": float(scores[:, 1].mean())}

    pooled = [s for i in sorted(per_turn) for s in per_turn[i]]
    return {"by_turn": {i: summary(per_turn[i]) for i in sorted(per_turn)},
            "all": summary(pooled) if pooled else {"turns": 0}}
