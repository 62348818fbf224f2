"""Store in Memory (``store_memory``): the model saves text out of its context for later."""

from __future__ import annotations

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from agent_memory import AgentMemory
from agent_memory.errors import InvalidIdError, ItemNotFoundError
from agent_memory.ids import validate_memory_id
from agent_memory.models.items import MemoryType

__all__ = ["StoreMemoryAction", "StoreMemoryArguments"]


class StoreMemoryArguments(ActionArguments):
    """Arguments of ``store_memory``."""

    content: str = Field(min_length=1)
    """The text to keep, in full (notes, an intermediate result, a draft, extracted facts)."""
    type: MemoryType = "custom"
    """Kind of content: action_result, web_content, database_result, search_results, file or custom."""
    source: str = "agent"
    """Where the content came from: a tool name, a URL, or "agent" for your own notes."""
    title: str | None = None
    """A short title that says what the content is; shown in query_memory results."""
    tags: list[str] = []
    """Labels to find it again with query_memory(tags=[...]); lower-cased."""
    related_to: list[str] = []
    """Ids of existing memory items this one relates to, e.g. the pages a summary was made from."""


class StoreMemoryAction(MemoryAction[StoreMemoryArguments]):
    """``store_memory``: stores ``content`` with its metadata and answers with the new id and its
    size in tokens. Errors: ``invalid_id`` / ``not_found`` for a bad ``related_to`` id."""

    name = "store_memory"
    title = "Store in Memory"
    Arguments = StoreMemoryArguments
    example = {
        "content": "Q3 revenue: $4.2M (+12% y/y); churn 3.1%. Source: finance dashboard, 2025-10-14.",
        "title": "Q3 key figures",
        "tags": ["q3", "finance"],
    }
    description = (
        "Save text in long-term memory, out of your context, and get back a memory id "
        "(like mem_3f9a0c41b2de) to read it later with retrieve_memory or find it with query_memory.\n"
        "Use it for anything you will need again but do not want to keep in the conversation: "
        "notes, intermediate results, extracted facts, drafts. Tool results are stored "
        "automatically; do not store them again.\n"
        f"Example: {format_call('store_memory', example)}\n"
        "Limits: content is text (send data as JSON text). Give a title and tags so that "
        "query_memory can find the item; related_to must name existing ids."
    )

    def execute(self, memory: AgentMemory, args: StoreMemoryArguments) -> ToolResult:
        related: list[str] = []
        for ref in args.related_to:
            try:
                related.append(validate_memory_id(ref))
            except InvalidIdError as exc:
                raise ToolCallError(
                    f"related_to names {ref!r}, which is not a memory id (ids look like 'mem_3f9a0c41b2de'). "
                    "Nothing was stored; fix related_to and call store_memory again.",
                    code="invalid_id",
                ) from exc
            if related[-1] not in memory:
                raise ToolCallError(
                    f"related_to names {ref!r}, but no memory item has that id. Nothing was stored; "
                    "use query_memory to find ids, or leave related_to out.",
                    code="not_found",
                )
        try:
            item_id = memory.store(
                args.content,
                type=args.type,
                source=args.source,
                title=args.title,
                tags=args.tags,
                related_to=related,
            )
        except ItemNotFoundError as exc:  # removed between the check and the store
            raise ToolCallError(
                f"related_to names {exc.item_id!r}, but no memory item has that id. Nothing was stored.",
                code="not_found",
            ) from exc
        meta = memory.get(item_id).metadata
        return ToolResult.success(
            f"Stored as {item_id} ({meta.tokens:,} tokens, type {args.type}). "
            f"Read it with {format_call('retrieve_memory', {'id': item_id})}; "
            "query_memory finds it by meaning, tags or source.",
            {
                "id": item_id,
                "tokens": meta.tokens,
                "size_bytes": meta.size_bytes,
                "type": args.type,
                "source": meta.source,
                "title": meta.title,
                "tags": list(meta.tags),
                "related_to": list(meta.related_to),
            },
        )
