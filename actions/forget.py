"""Forget Memory (``forget_memory``): the agent removes a stored item for good (team9's
``MEMORY_FORGET``, github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0): a wrong
page, a secret pasted by mistake, a result that misleads.

With the conversation's :class:`~agent_memory.kernel.manager.MemoryManager` the item also leaves
the conversation (its trace previews are redacted and every prompt shows a "forgotten" note in its
place); without one, only the memory forgets it. Offered when the developer asks for it
(``ToolOffer(always={"forget"})``): deleting is not something a prompt should suggest by itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolResult, format_call
from actions.retrieve import MAX_ID_CHARS
from agent_memory import AgentMemory

if TYPE_CHECKING:
    from agent_memory.kernel.manager import MemoryManager

__all__ = ["ForgetMemoryAction", "ForgetMemoryArguments"]


class ForgetMemoryArguments(ActionArguments):
    """Arguments of ``forget_memory``."""

    id: str = Field(max_length=MAX_ID_CHARS)


class ForgetMemoryAction(MemoryAction[ForgetMemoryArguments]):
    """``forget_memory``: removes the item ``id`` from memory (record, index, content unless
    another item shares it) and, with a manager, from the conversation.

    Args:
        manager: the conversation's memory manager; ``None``: the memory alone forgets.
    """

    name = "forget_memory"
    title = "Forget Memory"
    capability = "forget"
    Arguments = ForgetMemoryArguments
    example = {"id": "mem_0123456789ab"}
    description = (
        "Delete a stored item for good (wrong, outdated or sensitive); it cannot be read again. "
        f"Example: {format_call('forget_memory', example)}"
    )

    def __init__(self, manager: MemoryManager | None = None) -> None:
        self.manager = manager

    def execute(self, memory: AgentMemory, args: ForgetMemoryArguments) -> ToolResult:
        removed = self.manager.forget(args.id) if self.manager is not None else memory.forget(args.id)
        if not removed:
            return ToolResult.failure(
                "not_found",
                f"There is no item {args.id} (already forgotten, or a wrong id): nothing was deleted. "
                "Copy the id exactly from its citation or from a search hit.",
            )
        return ToolResult.success(f"Forgot {args.id}: it is deleted and no longer in your context.",
                                  {"id": args.id, "forgotten": True})
