"""The memory actions as agent tools: Store in Memory, Retrieve from Memory, Query Memory.

Each action has a pydantic arguments model (its JSON schema is the tool's parameter schema), a
description written as a prompt, and schemas for OpenAI function calling and Anthropic tools.
:class:`MemoryToolkit` binds them to an :class:`~agent_memory.AgentMemory` and dispatches the
provider's tool calls. A model's mistake never raises: it comes back as a :class:`ToolResult`
with ``ok=False`` that says what to do next.

This package imports ``agent_memory``; ``agent_memory`` never imports it.
"""

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolJsonSchema, ToolResult, format_call
from actions.compact import CompactMemoryAction, CompactMemoryArguments
from actions.forget import ForgetMemoryAction, ForgetMemoryArguments
from actions.pin import PinMemoryAction, PinMemoryArguments
from actions.query import QueryMemoryAction, QueryMemoryArguments
from actions.retrieve import RetrieveMemoryAction, RetrieveMemoryArguments, build_transform, parse_line_slice
from actions.store import StoreMemoryAction, StoreMemoryArguments, StoreMemoryUploadAction
from actions.toolkit import MemoryToolkit, default_actions

__all__ = [
    "ActionArguments",
    "CompactMemoryAction",
    "CompactMemoryArguments",
    "ForgetMemoryAction",
    "ForgetMemoryArguments",
    "MemoryAction",
    "MemoryToolkit",
    "PinMemoryAction",
    "PinMemoryArguments",
    "QueryMemoryAction",
    "QueryMemoryArguments",
    "RetrieveMemoryAction",
    "RetrieveMemoryArguments",
    "StoreMemoryAction",
    "StoreMemoryArguments",
    "StoreMemoryUploadAction",
    "ToolCallError",
    "ToolJsonSchema",
    "ToolResult",
    "build_transform",
    "default_actions",
    "format_call",
    "parse_line_slice",
]
