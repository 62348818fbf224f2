"""Provider-neutral conversation messages (seed 000, "Tool Message Schema").

A tool result in the conversation keeps a reference to its memory item (``tool_result_ref``), not
a copy: the presentation policy decides, each time messages are built for an LLM call, whether
the model sees the full result or its citation. Stored history is never rewritten.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Message", "Role", "ToolCall"]

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks: the system prompt, the user, the model, or a tool's result."""


class ToolCall(BaseModel):
    """One tool call the model made."""

    model_config = ConfigDict(frozen=True)

    id: str
    """The provider's call id; the tool message answering it carries the same ``tool_call_id``."""
    name: str
    """Tool name."""
    arguments: str = "{}"
    """Arguments as the JSON string the provider returned."""


class Message(BaseModel):
    """One message of a conversation.

    A ``tool`` message either holds its result in ``content`` or, once the result is in memory,
    names it with ``tool_result_ref`` (and ``content`` is then ``None``).
    """

    model_config = ConfigDict(frozen=True)

    role: Role
    """Who speaks."""
    content: str | None = None
    """Text of the message; ``None`` for an assistant message that only calls tools, or a tool
    message whose result is referenced by ``tool_result_ref``."""
    tool_calls: tuple[ToolCall, ...] = Field(default=())
    """Tool calls of an assistant message (several for parallel calls), in order."""
    tool_call_id: str | None = None
    """For a ``tool`` message: the id of the call it answers."""
    name: str | None = None
    """For a ``tool`` message: the tool's name."""
    tool_result_ref: str | None = None
    """For a ``tool`` message: the memory id of the full result."""
