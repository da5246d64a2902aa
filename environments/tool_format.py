"""The text format of chat turns and tool calls, shared by the model side and the environment.

This module is the single definition of the special tokens and of how a tool call looks in
model text. `c2jax.data.chat` builds token ids from it; `environments` parses model text with it.
It is pure Python (no jax) so environment workers and env authors can use it anywhere.

A conversation renders as::

    <|system|>You are a coding agent...<|end|>
    <|user|>Fix the failing parser.<|end|>
    <|assistant|>I will look at the file first.
    <|tool_call|>{"tool": "read_file", "args": {"path": "parser.py"}}<|end_tool_call|><|end|>
    <|tool|>   1  def parse(s): ...<|end|>
    <|assistant|><|summary|>Read parser.py; the bug is ...<|end_summary|><|end|>

An assistant turn holds free text followed by at most one tool call; the call's body is a JSON
object `{"tool": NAME, "args": {...}}`. `<|summary|>...<|end_summary|>` marks a
self-summarisation turn (the RL actor asks for it when the context passes a budget).
"""
from __future__ import annotations

import json
from typing import Any

BOS = "<|bos|>"
EOS = "<|eos|>"
PAD = "<|pad|>"
SYSTEM = "<|system|>"
USER = "<|user|>"
ASSISTANT = "<|assistant|>"
TOOL = "<|tool|>"
END = "<|end|>"
TOOL_CALL = "<|tool_call|>"
END_TOOL_CALL = "<|end_tool_call|>"
SUMMARY = "<|summary|>"
END_SUMMARY = "<|end_summary|>"

#: Every reserved special token, in the order tokenizers assign them ids (pad gets id 0).
SPECIAL_TOKENS = (PAD, BOS, EOS, SYSTEM, USER, ASSISTANT, TOOL, END, TOOL_CALL, END_TOOL_CALL,
                  SUMMARY, END_SUMMARY)

#: Role name -> the token that opens its turn.
ROLE_TOKENS = {"system": SYSTEM, "user": USER, "assistant": ASSISTANT, "tool": TOOL}


class ToolCallError(ValueError):
    """Model text that should hold a tool call but does not parse; the message says why."""


def tool_call_body(tool: str, args: dict[str, Any]) -> str:
    """The JSON body of a tool call, the text between `<|tool_call|>` and `<|end_tool_call|>`.

    Token-level renderers (`c2jax.data.chat`) emit the two markers as special-token ids and
    tokenise only this body, so it is defined once here for both the text and the id paths.
    """
    return json.dumps({"tool": tool, "args": args}, ensure_ascii=False)


def format_tool_call(tool: str, args: dict[str, Any]) -> str:
    """Renders one tool call as model text: `<|tool_call|>{json}<|end_tool_call|>`."""
    return f"{TOOL_CALL}{tool_call_body(tool, args)}{END_TOOL_CALL}"


def parse_tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """Extracts the (tool, args) of the first tool call in assistant text.

    Raises ToolCallError naming the problem (no call, unterminated call, bad JSON, wrong
    fields) so the environment can return it to the agent as an error observation.
    """
    start = text.find(TOOL_CALL)
    if start < 0:
        raise ToolCallError(f"no tool call found: expected {TOOL_CALL}{{\"tool\": ..., "
                            f"\"args\": {{...}}}}{END_TOOL_CALL}")
    body_start = start + len(TOOL_CALL)
    end = text.find(END_TOOL_CALL, body_start)
    if end < 0:
        raise ToolCallError(f"tool call is not terminated with {END_TOOL_CALL}")
    body = text[body_start:end].strip()
    try:
        call = json.loads(body)
    except json.JSONDecodeError as e:
        raise ToolCallError(f"tool call body is not valid JSON ({e.msg} at char {e.pos})") from None
    if not isinstance(call, dict):
        raise ToolCallError("tool call body must be a JSON object {\"tool\": ..., \"args\": {...}}")
    tool, args = call.get("tool"), call.get("args", {})
    if not isinstance(tool, str) or not tool:
        raise ToolCallError("tool call needs a non-empty string field \"tool\"")
    if not isinstance(args, dict):
        raise ToolCallError(f"tool call field \"args\" must be an object, got {type(args).__name__}")
    unknown = set(call) - {"tool", "args"}
    if unknown:
        raise ToolCallError(f"tool call has unknown fields {sorted(unknown)}; only \"tool\" and "
                            "\"args\" are allowed")
    return tool, args


def parse_summary(text: str) -> str | None:
    """Returns the text of a `<|summary|>...<|end_summary|>` turn, or None if there is none."""
    start = text.find(SUMMARY)
    if start < 0:
        return None
    end = text.find(END_SUMMARY, start)
    body = text[start + len(SUMMARY): end if end >= 0 else len(text)]
    return body.strip()
