"""Compact Memory (``compact_memory``): the agent compacts its conversation at a task break.

Offered only while the conversation is under memory pressure (the soft threshold of the token
budget, as in team9's agent framework, github.com/team9ai/team9, apps/server/libs/agent-framework/
at b753b7c0: "AI can compact at task break"). The call only *requests* the compaction: the memory
manager runs it before the next LLM call, so the current step's messages stay as they are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actions.base import ActionArguments, MemoryAction, ToolResult
from agent_memory import AgentMemory

if TYPE_CHECKING:
    from agent_memory.kernel.manager import MemoryManager

__all__ = ["CompactMemoryAction", "CompactMemoryArguments"]


class CompactMemoryArguments(ActionArguments):
    """``compact_memory`` takes no arguments."""


class CompactMemoryAction(MemoryAction[CompactMemoryArguments]):
    """``compact_memory``: asks the agent's memory manager to compact before the next call.

    Args:
        manager: the memory manager of the agent's conversation.
    """

    name = "compact_memory"
    title = "Compact Memory"
    capability = "compact"
    Arguments = CompactMemoryArguments
    example: dict[str, str] = {}
    description = (
        "Summarize older turns of this conversation to free context, at a task break. Nothing is "
        "lost: compacted turns stay searchable and retrievable by turn id. Example: compact_memory()"
    )

    def __init__(self, manager: MemoryManager) -> None:
        self.manager = manager

    def execute(self, memory: AgentMemory, args: CompactMemoryArguments) -> ToolResult:
        self.manager.request_compaction()
        return ToolResult.success(
            "Compaction requested: older turns will be summarized before your next step; a summary "
            "and the recent turns stay in your context.",
            {"requested": True},
        )
