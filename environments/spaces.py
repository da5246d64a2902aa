"""Gymnasium spaces for a text environment: unrestricted text, tool-call actions, observations.

Gymnasium's `Text` space accepts only characters from a fixed charset (alphanumeric by
default), so code, punctuation and Unicode would fall outside it. `UnicodeText` checks only the
type and the length.
"""
from __future__ import annotations

import string
from typing import Any

import numpy as np
from gymnasium import spaces

#: Upper bound on any text in an observation or action (characters).
MAX_TEXT_CHARS = 1 << 20
# What `UnicodeText.sample` draws from: printable ASCII plus a few multi-byte characters, so
# samples exercise decoding paths without being useful actions.
_SAMPLE_CHARS = tuple(string.printable) + ("é", "λ", "中", "—", "🙂")


class UnicodeText(spaces.Space[str]):
    """Any Python string with min_length <= len <= max_length characters."""

    def __init__(self, max_length: int = MAX_TEXT_CHARS, *, min_length: int = 0,
                 seed: int | np.random.Generator | None = None):
        if not 0 <= min_length <= max_length:
            raise ValueError(f"need 0 <= min_length <= max_length, got {min_length}, {max_length}")
        self.min_length = min_length
        self.max_length = max_length
        super().__init__(dtype=str, seed=seed)

    def contains(self, x: Any) -> bool:
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random text of up to 64 characters: something a policy could emit, rarely a tool call."""
        if mask is not None or probability is not None:
            raise NotImplementedError("UnicodeText.sample takes no mask or probability")
        high = min(self.max_length, max(self.min_length, 64))
        length = int(self.np_random.integers(self.min_length, high + 1))
        picks = self.np_random.integers(0, len(_SAMPLE_CHARS), size=length)
        return "".join(_SAMPLE_CHARS[i] for i in picks)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, UnicodeText) and self.min_length == other.min_length
                and self.max_length == other.max_length)


class AgentAction(spaces.Space[Any]):
    """An action: a tool call `{"tool": str, "args": dict}`, or raw model text holding one.

    `args` may be left out when a tool needs none.

    Dict actions may also be `{"text": str}`; either dict form may carry `"output_tokens": int`
    (how many tokens the policy generated for the turn, summed into the reward components).
    Whether the tool exists and the arguments fit is the environment's business (an error
    observation), not the space's: the space only checks the shape.
    """

    def __init__(self, max_text_chars: int = MAX_TEXT_CHARS,
                 seed: int | np.random.Generator | None = None):
        self.text = UnicodeText(max_text_chars)
        super().__init__(seed=seed)

    def seed(self, seed: int | None = None) -> int | list[int] | dict[str, int]:
        seeded = super().seed(seed)
        self.text.seed(int(self.np_random.integers(2**31)))
        return seeded

    def contains(self, x: Any) -> bool:
        if isinstance(x, str):
            return self.text.contains(x)
        if not isinstance(x, dict):
            return False
        tokens = x.get("output_tokens", 0)
        if not isinstance(tokens, int) or isinstance(tokens, bool) or tokens < 0:
            return False
        keys = set(x) - {"output_tokens"}
        if keys == {"text"}:
            return self.text.contains(x["text"])
        return (keys in ({"tool", "args"}, {"tool"}) and isinstance(x["tool"], str)
                and isinstance(x.get("args", {}), dict))

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Random raw text (almost never a valid tool call, so stepping it is side-effect free)."""
        return self.text.sample(mask, probability)

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __repr__(self) -> str:
        return f"AgentAction(max_text_chars={self.text.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AgentAction) and self.text == other.text


def observation_space() -> spaces.Dict:
    """role: "user" (the task prompt, on reset) or "tool"; tool: the tool's name ("" on reset);
    content: the text; is_error: 1 when the action was malformed or the tool failed."""
    return spaces.Dict({
        "role": UnicodeText(16),
        "tool": UnicodeText(256),
        "content": UnicodeText(MAX_TEXT_CHARS),
        "is_error": spaces.Discrete(2),
    })
