"""MemoryToolkit: the memory actions bound to one memory, as provider tool lists and a dispatcher."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import Any

from actions.base import MemoryAction, ToolResult
from actions.query import QueryMemoryAction
from actions.retrieve import RetrieveMemoryAction
from actions.store import StoreMemoryAction
from agent_memory import AgentMemory

__all__ = ["MemoryToolkit", "default_actions"]


def default_actions() -> tuple[MemoryAction[Any], ...]:
    """The three memory actions: store_memory, retrieve_memory, query_memory (in that order)."""
    return (StoreMemoryAction(), RetrieveMemoryAction(), QueryMemoryAction())


class MemoryToolkit:
    """The memory tools of one agent: schemas to send to the provider, and a dispatcher for the
    tool calls that come back.

    Args:
        memory: the agent's memory every call runs on.
        actions: the actions offered; ``None``: :func:`default_actions`. Names must be unique.

    Raises:
        ValueError: if two actions share a name.

    Example::

        toolkit = MemoryToolkit(memory)
        response = client.chat.completions.create(..., tools=toolkit.openai_tools())
        for call in response.choices[0].message.tool_calls or []:
            result = toolkit.dispatch(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content})
    """

    def __init__(self, memory: AgentMemory, actions: Iterable[MemoryAction[Any]] | None = None) -> None:
        self.memory = memory
        self.actions: tuple[MemoryAction[Any], ...] = tuple(actions) if actions is not None else default_actions()
        self._by_name = {action.name: action for action in self.actions}
        if len(self._by_name) != len(self.actions):
            raise ValueError(f"tool names must be unique: {[action.name for action in self.actions]}")

    def __repr__(self) -> str:
        return f"MemoryToolkit({self.memory!r}, tools={list(self._by_name)})"

    @property
    def names(self) -> list[str]:
        """The tool names, in the order of :attr:`actions`."""
        return list(self._by_name)

    def get(self, name: str) -> MemoryAction[Any] | None:
        """The action called ``name``, or ``None``."""
        return self._by_name.get(name)

    def openai_tools(self) -> list[dict[str, Any]]:
        """The ``tools`` list for OpenAI chat completions (function calling)."""
        return [action.openai_schema() for action in self.actions]

    def anthropic_tools(self) -> list[dict[str, Any]]:
        """The ``tools`` list for the Anthropic Messages API."""
        return [action.anthropic_schema() for action in self.actions]

    def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Run the tool call ``name(arguments)`` on the memory.

        Args:
            name: the tool name the model called.
            arguments: the JSON string the provider returned (OpenAI ``function.arguments``) or
                a dict (Anthropic ``tool_use.input``); ``None`` or ``""``: no arguments.

        Returns:
            The action's :class:`ToolResult`; an unknown ``name`` gives ``error="unknown_tool"``.
            Never raises for the model's mistakes (see :meth:`MemoryAction.run`).
        """
        action = self._by_name.get(name)
        if action is None:
            return ToolResult.failure(
                "unknown_tool", f"There is no tool {name!r}. The memory tools are: {', '.join(self._by_name)}."
            )
        return action.run(self.memory, arguments)

    async def adispatch(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """:meth:`dispatch` in a worker thread, for async agent loops."""
        return await asyncio.to_thread(self.dispatch, name, arguments)
