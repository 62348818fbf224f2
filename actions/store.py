"""Store in Memory (``store_memory``): the model saves text out of its context for later."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from agent_memory import AgentMemory

__all__ = ["MAX_CONTENT_CHARS", "MAX_TAGS", "MAX_TAG_CHARS", "MAX_TITLE_CHARS", "StoreMemoryAction",
           "StoreMemoryArguments", "Tag"]

MAX_CONTENT_CHARS = 8_000
"""Longest text one ``store_memory`` call may save, in characters (~2k tokens of prose: a long
note; storing it, embedding included, takes ~0.5-1.3 s on 2 cores depending on load). Longer notes
go in several calls; the library API (``AgentMemory.store``) has no such limit."""

MAX_TITLE_CHARS = 200
"""Longest title, in characters (it is shown in every query hit and embedded with every chunk)."""

MAX_TAGS = 10
"""Most tags per call (each becomes an index filter)."""

MAX_TAG_CHARS = 40
"""Longest tag, in characters."""

Tag = Annotated[str, Field(max_length=MAX_TAG_CHARS)]
"""One label, as the memory tools take it."""


class StoreMemoryArguments(ActionArguments):
    """Arguments of ``store_memory``."""

    content: str = Field(max_length=MAX_CONTENT_CHARS)
    title: str | None = Field(default=None, max_length=MAX_TITLE_CHARS)
    tags: list[Tag] = Field(default=[], max_length=MAX_TAGS)


class StoreMemoryAction(MemoryAction[StoreMemoryArguments]):
    """``store_memory``: stores ``content`` (type ``custom``, source ``agent``) with its title and
    tags and answers with the new id and its size in tokens."""

    name = "store_memory"
    title = "Store in Memory"
    capability = "store"
    Arguments = StoreMemoryArguments
    example = {"content": "Q3 revenue $4.2M", "title": "Q3", "tags": ["finance"]}
    description = (
        "Save notes for later, outside your context; returns an id. Tool results are saved "
        f"already. Example: {format_call('store_memory', example)}"
    )

    def execute(self, memory: AgentMemory, args: StoreMemoryArguments) -> ToolResult:
        if not args.content.strip():
            raise ToolCallError("content is empty: give the text to keep. Nothing was stored.")
        item_id = memory.store(args.content, type="custom", source="agent", title=args.title, tags=args.tags)
        meta = memory.get(item_id).metadata
        return ToolResult.success(
            f"Stored as {item_id} ({meta.tokens:,} tokens). Read it with "
            f"{format_call(self.retrieve_call, {'id': item_id})}; a query finds it by meaning or tags.",
            {
                "id": item_id,
                "tokens": meta.tokens,
                "size_bytes": meta.size_bytes,
                "type": "custom",
                "source": meta.source,
                "title": meta.title,
                "tags": list(meta.tags),
            },
        )
