"""MemoryToolkit: the memory actions bound to one memory, as provider tool lists and a dispatcher.

Which tools go with a call is decided by a :class:`~agent_memory.presentation.offer.ToolOffer`
from what the prompt shows (:class:`~agent_memory.presentation.offer.OfferState`): by default
``retrieve_memory`` once a result is cited, ``query_memory`` once memory holds items the prompt
does not show, ``store_memory`` when the developer asks for it. ``form="single"`` offers the same
capabilities as one ``memory`` tool with an ``op`` argument (:mod:`actions.combined`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from actions.base import MemoryAction, ToolResult
from actions.combined import CombinedMemoryAction
from actions.compact import CompactMemoryAction
from actions.forget import ForgetMemoryAction
from actions.pin import PinMemoryAction
from actions.query import QueryMemoryAction
from actions.retrieve import RetrieveMemoryAction
from actions.store import StoreMemoryAction, StoreMemoryUploadAction
from agent_memory import AgentMemory
from agent_memory.errors import quoted
from agent_memory.presentation.offer import OfferState, ToolOffer

if TYPE_CHECKING:
    from agent_memory.kernel.manager import MemoryManager

__all__ = ["MemoryToolkit", "default_actions"]

ToolForm = Literal["separate", "single"]
"""``separate``: one tool per capability; ``single``: one ``memory`` tool with an ``op``."""


def default_actions(*, agent_id: str | None = None) -> tuple[MemoryAction[Any], ...]:
    """The three memory actions: store_memory, retrieve_memory, query_memory (in that order);
    ``agent_id``: the agent whose compacted turns ``retrieve_memory`` reads by turn id (``None``:
    the memory's agent)."""
    return (StoreMemoryAction(), RetrieveMemoryAction(agent_id=agent_id), QueryMemoryAction())


class MemoryToolkit:
    """The memory tools of one agent: schemas to send to the provider, and a dispatcher for the
    tool calls that come back.

    Args:
        memory: the agent's memory every call runs on.
        actions: the actions offered; ``None``: :func:`default_actions`. Names must be unique.
        offer: when each tool is offered (see :meth:`tool_definitions`); ``None``: ``ToolOffer()``,
            each tool from the call it becomes usable.
        form: ``separate`` tools (default) or one ``single`` ``memory`` tool with an ``op``.
        manager: the agent's :class:`~agent_memory.kernel.manager.MemoryManager`, when the
            conversation is managed: adds ``compact_memory`` (offered under memory pressure),
            ``forget_memory`` and ``pin_memory`` (offered when ``offer.always`` names ``forget`` /
            ``pin``, or in ``mode="all"``), and ``retrieve_memory`` then also reads any turn by its
            id, compacted or not.
        uploads: ``store_memory`` also takes text longer than one call carries (8,000
            characters), in parts (:class:`~actions.store.StoreMemoryUploadAction`; 54 tokens
            more schema; what the MCP server offers). ``False``: one call, one note.
        read_dir: a directory of the user's whose files ``store_memory`` may store by ``path``
            (symlinks resolved, nothing outside it read; implies ``uploads``). ``None``:
            ``store_memory`` takes text only and its schema has no ``path``.

    Raises:
        ValueError: if two actions share a name, ``form`` is unknown, or ``uploads`` or
            ``read_dir`` is given and no action is a ``StoreMemoryAction``.
        ConfigurationError: if ``read_dir`` is not an existing directory.

    Example::

        toolkit = MemoryToolkit(memory)
        response = client.chat.completions.create(..., tools=toolkit.tool_definitions(state))
        for call in response.choices[0].message.tool_calls or []:
            result = toolkit.dispatch(call.function.name, call.function.arguments)
            messages.append({"role": "tool", "tool_call_id": call.id, "content": result.content})
    """

    def __init__(
        self,
        memory: AgentMemory,
        actions: Iterable[MemoryAction[Any]] | None = None,
        *,
        offer: ToolOffer | None = None,
        form: ToolForm = "separate",
        manager: MemoryManager | None = None,
        uploads: bool = False,
        read_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if form not in ("separate", "single"):
            raise ValueError(f"form must be 'separate' or 'single', not {form!r}")
        self.memory = memory
        self.actions: tuple[MemoryAction[Any], ...] = tuple(actions) if actions is not None else default_actions(
            agent_id=manager.agent_id if manager is not None else None)  # a shared sub-agent reads its own turns
        if uploads or read_dir is not None:
            if not any(isinstance(action, StoreMemoryAction) for action in self.actions):
                raise ValueError("uploads and read_dir are for store_memory, and these actions have no StoreMemoryAction")
            store = StoreMemoryUploadAction(read_dir)
            self.actions = tuple(store if isinstance(action, StoreMemoryAction) else action for action in self.actions)
        self.manager = manager
        if manager is not None:
            managed = (CompactMemoryAction(manager), ForgetMemoryAction(manager), PinMemoryAction(manager))
            have = {action.capability for action in self.actions}
            self.actions = (*self.actions, *(action for action in managed if action.capability not in have))
        self.offer = offer if offer is not None else ToolOffer()
        self.form: ToolForm = form
        names = [action.name for action in self.actions]
        if len(set(names)) != len(names):
            raise ValueError(f"tool names must be unique: {names}")
        self._by_name = {action.name: action for action in self.actions}
        self._single: dict[frozenset[str], CombinedMemoryAction] = {}

    def __repr__(self) -> str:
        return f"MemoryToolkit({self.memory!r}, tool_names={self.names}, form={self.form!r})"

    @property
    def names(self) -> list[str]:
        """Names of every tool this toolkit can offer (``["memory"]`` in the single form)."""
        return [CombinedMemoryAction.name] if self.form == "single" else list(self._by_name)

    def get(self, name: str) -> MemoryAction[Any] | None:
        """The action called ``name``, or ``None``."""
        if self.form == "single":
            return self._combined(None) if name == CombinedMemoryAction.name else None
        return self._by_name.get(name)

    def tools_for(self, state: OfferState | None = None) -> list[MemoryAction[Any]]:
        """The actions to offer with a prompt in ``state`` (``None``: every action).

        In the single form: one ``memory`` action whose ``op`` takes the needed capabilities
        (none: an empty list).
        """
        if state is None:
            chosen = list(self.actions)
        else:
            needed = self.offer.needed(state)
            chosen = [action for action in self.actions if action.capability in needed]
        if self.form == "single":
            return [self._combined(chosen)] if chosen else []
        return chosen

    def _combined(self, chosen: list[MemoryAction[Any]] | None) -> CombinedMemoryAction:
        chosen = list(self.actions) if chosen is None else chosen
        key = frozenset(action.name for action in chosen)
        if key not in self._single:
            self._single[key] = CombinedMemoryAction(chosen)
        return self._single[key]

    def tool_definitions(self, state: OfferState | None = None) -> list[dict[str, Any]]:
        """The ``tools`` list for OpenAI chat completions (function calling) for a prompt in
        ``state``; ``None``: every tool."""
        return [action.openai_schema() for action in self.tools_for(state)]

    def anthropic_tool_definitions(self, state: OfferState | None = None) -> list[dict[str, Any]]:
        """The ``tools`` list for the Anthropic Messages API for a prompt in ``state``."""
        return [action.anthropic_schema() for action in self.tools_for(state)]

    def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Run the tool call ``name(arguments)`` on the memory.

        Every tool of the toolkit answers, offered in this call or not (a model may call a tool
        it saw earlier).

        Args:
            name: the tool name the model called.
            arguments: the JSON string the provider returned (OpenAI ``function.arguments``) or
                a dict (Anthropic ``tool_use.input``); ``None`` or ``""``: no arguments.

        Returns:
            The action's :class:`ToolResult`; an unknown ``name`` gives ``error="unknown_tool"``.
            Never raises for the model's mistakes (see :meth:`MemoryAction.run`).
        """
        action = self.get(name) if isinstance(name, str) else None
        if action is None:
            return ToolResult.failure(
                "unknown_tool",
                f"There is no tool {quoted(name)}. The memory tools are: {', '.join(self.names)}.",
            )
        return action.run(self.memory, arguments)

    async def adispatch(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """:meth:`dispatch` in a worker thread, for async agent loops."""
        return await asyncio.to_thread(self.dispatch, name, arguments)
