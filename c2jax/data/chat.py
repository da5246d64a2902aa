"""The chat template: messages -> token ids + loss mask, token-in/token-out.

One template serves SFT (render a whole conversation), the sampler (a prompt that ends with the
opening of an assistant turn) and RL (append sampled ids and tool observations to a growing id
list, never re-tokenising the past). The text it produces is the format fixed in
`environments.tool_format` (see its docstring); this module only turns it into ids.

Messages
--------
A conversation is a list of dicts::

    {"role": "system",    "content": str}
    {"role": "user",      "content": str}
    {"role": "assistant", "content": str, "tool_call": {"tool": str, "args": {...}}}
    {"role": "tool",      "content": str}        # a tool's output, written by the harness
    {"role": "summary",   "content": str}        # a self-summarisation turn by the assistant

`content` is required (it may be ""). `tool_call` is optional and allowed only on assistant
turns; its `args` default to {}. `train` (optional, assistant and summary turns only) set to
false renders the turn as context with loss 0: a conversation that restarts from a summary
(the RL actor's self-summarisation) carries that summary as context, trained where it was
written. Unknown keys are errors, so a typo such as "tool_calls" is caught.

Rendering
---------
The ids start with `<|bos|>`; each turn is its role token, its text and `<|end|>`::

    <|bos|><|system|>You are a coding agent.<|end|>
    <|user|>Fix the parser.<|end|>
    <|assistant|>Let me read it.
        <|tool_call|>{"tool": "read_file", "args": {"path": "p.py"}}<|end_tool_call|><|end|>
    <|tool|>def parse(s): ...<|end|>
    <|assistant|><|summary|>Read p.py; the bug is in parse.<|end_summary|><|end|>

(line breaks added here for reading: the template inserts no text of its own). An assistant's
text is its `content` immediately followed by the tool call, exactly as the model would have
generated it; put a newline at the end of `content` if you want one before the call. The call
body is `tool_format.tool_call_body`. Special tokens are single ids emitted by the template; text
is encoded with `Tokenizer.encode`, which never turns a literal "<|end|>" into the special id,
so tool output cannot forge a turn boundary.

Loss mask
---------
1 on every token the assistant produces: its text, its tool call (markers and body) and the
closing `<|end|>` (the model must learn to stop). 0 on `<|bos|>`, on system / user / tool turns
entirely, and on the tokens the harness writes to hand the turn to the model: `<|assistant|>`
and, for a summary, `<|assistant|><|summary|>` (the actor asks for a summary by writing both).
For the summary turn the content, `<|end_summary|>` and `<|end|>` carry loss 1.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from environments import tool_format

if TYPE_CHECKING:
    from c2jax.data.tokenizer import Tokenizer

#: Roles a message may have. "summary" renders as an assistant turn in `<|summary|>` markers.
ROLES = ("system", "user", "assistant", "tool", "summary")
_MESSAGE_KEYS = {"role", "content", "tool_call", "train"}
_TOOL_CALL_KEYS = {"tool", "args"}


class ChatError(ValueError):
    """A conversation that does not follow the message format; the message names the turn."""


def validate_messages(messages: Any) -> None:
    """Raises ChatError naming the first message (by index) and field that is malformed."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        raise ChatError(f"messages must be a list of dicts, got {type(messages).__name__}")
    if not messages:
        raise ChatError("messages is empty: a conversation needs at least one turn")
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ChatError(f"message {i} must be a dict, got {type(message).__name__}")
        role = message.get("role")
        if role not in ROLES:
            raise ChatError(f"message {i} has role {role!r}; choose one of {ROLES}")
        unknown = set(message) - _MESSAGE_KEYS
        if unknown:
            raise ChatError(f"message {i} ({role}) has unknown keys {sorted(unknown)}; "
                            f"allowed: {sorted(_MESSAGE_KEYS)}")
        if not isinstance(message.get("content"), str):
            raise ChatError(f"message {i} ({role}) needs a string 'content' (use \"\" for a turn "
                            f"without text), got {type(message.get('content')).__name__}")
        if "tool_call" in message:
            _validate_tool_call(i, role, message["tool_call"])
        if "train" in message:
            if role not in ("assistant", "summary"):
                raise ChatError(f"message {i} ({role}) has 'train'; only assistant and summary "
                                "turns are trained, so only they may turn it off")
            if not isinstance(message["train"], bool):
                raise ChatError(f"message {i} ({role}): 'train' must be true or false")


def _validate_tool_call(i: int, role: str, call: Any) -> None:
    if role != "assistant":
        raise ChatError(f"message {i} ({role}) has a 'tool_call'; only assistant turns may "
                        "call tools")
    if not isinstance(call, Mapping):
        raise ChatError(f"message {i} (assistant): 'tool_call' must be a dict "
                        f"{{\"tool\": ..., \"args\": {{...}}}}, got {type(call).__name__}")
    unknown = set(call) - _TOOL_CALL_KEYS
    if unknown:
        raise ChatError(f"message {i} (assistant): 'tool_call' has unknown keys {sorted(unknown)}; "
                        f"allowed: {sorted(_TOOL_CALL_KEYS)}")
    if not isinstance(call.get("tool"), str) or not call["tool"]:
        raise ChatError(f"message {i} (assistant): 'tool_call' needs a non-empty string 'tool'")
    if not isinstance(call.get("args", {}), Mapping):
        raise ChatError(f"message {i} (assistant): 'tool_call.args' must be a dict, "
                        f"got {type(call['args']).__name__}")


@dataclasses.dataclass
class ChatTokens:
    """A conversation as ids and per-token loss mask, both `[tokens]`, grown in place.

    `loss_mask[i]` is 1 when token `ids[i]` was produced by the assistant (see module docstring).
    """
    ids: list[int] = dataclasses.field(default_factory=list)
    loss_mask: list[int] = dataclasses.field(default_factory=list)

    def extend(self, ids: Sequence[int], trainable: bool) -> None:
        self.ids.extend(ids)
        self.loss_mask.extend([int(trainable)] * len(ids))

    def __len__(self) -> int:
        return len(self.ids)


class ChatTemplate:
    """Renders messages with one tokenizer; every method appends ids, none re-encodes old ones."""

    def __init__(self, tokenizer: Tokenizer):
        self.tokenizer = tokenizer
        # Resolving every special token up front fails early, naming the token, for a
        # tokenizer.json that was not trained with `tool_format.SPECIAL_TOKENS`.
        self._special = {token: tokenizer.token_id(token) for token in tool_format.SPECIAL_TOKENS}
        self._role_ids = {role: self._special[token]
                          for role, token in tool_format.ROLE_TOKENS.items()}

    @property
    def end_id(self) -> int:
        """`<|end|>`: the sampler stops an assistant turn when it emits this id."""
        return self._special[tool_format.END]

    def begin(self) -> ChatTokens:
        """A new conversation: just `<|bos|>` (loss 0)."""
        chat = ChatTokens()
        chat.extend([self._special[tool_format.BOS]], trainable=False)
        return chat

    def render(self, messages: Sequence[Mapping[str, Any]]) -> ChatTokens:
        """The whole conversation: `<|bos|>` and every turn, with the assistant-only loss mask."""
        validate_messages(messages)
        chat = self.begin()
        for message in messages:
            self._append_valid_message(chat, message)
        return chat

    def generation_prompt(self, messages: Sequence[Mapping[str, Any]], *,
                          summary: bool = False) -> ChatTokens:
        """`render(messages)` followed by the opening of the assistant turn the sampler writes.

        The ids end with `<|assistant|>` (or `<|assistant|><|summary|>` when the harness asks
        for a self-summary); sample until `end_id`, then `append_completion`.
        """
        chat = self.render(messages)
        self.open_assistant_turn(chat, summary=summary)
        return chat

    def append_message(self, chat: ChatTokens, message: Mapping[str, Any]) -> None:
        """Appends one whole turn (validated) to `chat`."""
        validate_messages([message])
        self._append_valid_message(chat, message)

    def open_assistant_turn(self, chat: ChatTokens, *, summary: bool = False) -> None:
        """Appends the harness-written `<|assistant|>` (and `<|summary|>`), loss 0."""
        opening = [self._role_ids["assistant"]]
        if summary:
            opening.append(self._special[tool_format.SUMMARY])
        chat.extend(opening, trainable=False)

    def append_completion(self, chat: ChatTokens, completion_ids: Sequence[int]) -> None:
        """Appends ids the policy sampled, loss 1, exactly as sampled (including its `<|end|>`)."""
        chat.extend(list(completion_ids), trainable=True)

    def append_tool_output(self, chat: ChatTokens, output: str) -> None:
        """Appends a tool observation turn `<|tool|>output<|end|>`, loss 0."""
        self.append_message(chat, {"role": "tool", "content": output})

    def _append_valid_message(self, chat: ChatTokens, message: Mapping[str, Any]) -> None:
        role, content = message["role"], message["content"]
        end = self._special[tool_format.END]
        train = message.get("train", True)
        if role == "summary":
            self.open_assistant_turn(chat, summary=True)
            chat.extend(self.tokenizer.encode(content), trainable=train)
            chat.extend([self._special[tool_format.END_SUMMARY], end], trainable=train)
        elif role == "assistant":
            self.open_assistant_turn(chat)
            chat.extend(self.tokenizer.encode(content), trainable=train)
            call = message.get("tool_call")
            if call is not None:
                body = tool_format.tool_call_body(call["tool"], dict(call.get("args", {})))
                chat.extend([self._special[tool_format.TOOL_CALL]], trainable=train)
                chat.extend(self.tokenizer.encode(body), trainable=train)
                chat.extend([self._special[tool_format.END_TOOL_CALL]], trainable=train)
            chat.extend([end], trainable=train)
        else:
            chat.extend([self._role_ids[role]], trainable=False)
            chat.extend(self.tokenizer.encode(content), trainable=False)
            chat.extend([end], trainable=False)
