"""Pin Memory (``pin_memory``): the agent marks an item or a fact as critical (team9's
``MEMORY_MARK_CRITICAL``, github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0)
so that it survives every compaction of the conversation verbatim.

A pinned item is shown (cut to ~1,000 tokens) and a pinned fact word for word in every Compaction
Snapshot (:class:`~agent_memory.kernel.snapshot_builder.CompactionSnapshotBuilder`). Pins live in
the conversation, so the action needs its :class:`~agent_memory.kernel.manager.MemoryManager`.
Offered when the developer asks for it (``ToolOffer(always={"pin"})``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from actions.retrieve import MAX_ID_CHARS
from agent_memory import AgentMemory

if TYPE_CHECKING:
    from agent_memory.kernel.manager import MemoryManager

__all__ = ["MAX_FACT_CHARS", "PinMemoryAction", "PinMemoryArguments"]

MAX_FACT_CHARS = 500
"""Longest fact one ``pin_memory`` call may pin, in characters (~120 tokens: a pinned fact is in
every prompt after a compaction; longer knowledge goes in an item, pinned by id)."""


class PinMemoryArguments(ActionArguments):
    """Arguments of ``pin_memory``: ``id`` of a stored item, or a ``fact`` to keep."""

    id: str | None = Field(default=None, max_length=MAX_ID_CHARS)
    fact: str | None = Field(default=None, max_length=MAX_FACT_CHARS)


class PinMemoryAction(MemoryAction[PinMemoryArguments]):
    """``pin_memory``: pins a stored item (``id``) or a new fact (``fact``) into every compaction.

    Args:
        manager: the conversation's memory manager.
    """

    name = "pin_memory"
    title = "Pin Memory"
    capability = "pin"
    Arguments = PinMemoryArguments
    example = {"fact": "The user wants answers in French."}
    description = (
        "Keep a stored item (id) or a fact word for word through every compaction of this "
        f"conversation; for what must never be summarized away. Example: {format_call('pin_memory', example)}"
    )

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    def execute(self, memory: AgentMemory, args: PinMemoryArguments) -> ToolResult:
        if (args.id is None) == (args.fact is None):
            raise ToolCallError(
                'give either id (a stored item, e.g. id="mem_0123456789ab") or fact (a sentence to keep), not '
                f"{'both' if args.id is not None else 'neither'}."
            )
        if args.id is not None:
            self.manager.pin_item(args.id)
            return ToolResult.success(f"Pinned {args.id}: it stays in your context through every compaction.",
                                      {"id": args.id, "pinned": True})
        fact = (args.fact or "").strip()
        if not fact:
            raise ToolCallError("fact is empty: give the sentence to keep. Nothing was pinned.")
        fact_id = self.manager.pin_fact(fact)
        return ToolResult.success(f"Pinned the fact as {fact_id}: it stays in your context through every compaction.",
                                  {"id": fact_id, "fact": fact, "pinned": True})
