"""What a prompt costs in tokens: its messages, each with its framing, and its tool definitions
(each message 4 framing tokens + its content, an assistant's tool calls their names and arguments,
``o200k_base`` by default: the accounting with which the public baselines on the tau-bench,
SWE-agent and ReAct-HotpotQA runs were measured. Every figure of the project uses it: the kernel's
budget, the presentation's choices, the replay and the benchmarks count prompts this way)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from agent_memory.models.messages import Message
from agent_memory.tokens import TokenCounter, default_token_counter

__all__ = ["FRAMING_TOKENS", "count_prompt_tokens", "message_tokens", "tool_tokens"]


FRAMING_TOKENS = 4
"""Tokens each message costs besides its content (the accounting of this module's docstring)."""


def message_tokens(message: Message, count: Callable[[str], int]) -> int:
    """Tokens of one message in a prompt: 4 framing + content + each tool call's name and arguments.
    A tool message whose result is still a reference (``content is None``) counts as empty: resolve
    references first."""
    tokens = FRAMING_TOKENS + count(message.content or "")
    for call in message.tool_calls:
        tokens += count(call.name) + count(call.arguments)
    return tokens


def tool_tokens(tool_definitions: Sequence[dict[str, Any]], count: Callable[[str], int]) -> int:
    """Tokens of tool definitions as sent: the list as JSON (``json.dumps`` defaults), 0 for none."""
    return count(json.dumps(list(tool_definitions))) if tool_definitions else 0


def count_prompt_tokens(messages: Sequence[Message], tool_definitions: Sequence[dict[str, Any]] = (), *,
                        counter: TokenCounter | None = None) -> int:
    """Our own count of a prompt, for when a provider reports no usage: every message
    (:func:`message_tokens`) plus the tool definitions (:func:`tool_tokens`), o200k_base by
    default. The replay counts prompts the same way."""
    count = (counter or default_token_counter()).count
    return sum(message_tokens(m, count) for m in messages) + tool_tokens(tool_definitions, count)
