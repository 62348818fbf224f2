"""Query Memory (``query_memory``): the model finds stored items by meaning and by filters."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, time
from typing import Any

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from agent_memory import AgentMemory
from agent_memory.config import DEFAULT_QUERY_LIMIT
from agent_memory.models.items import MemoryCriteria, MemoryType, QueryHit

__all__ = ["MAX_TOOL_QUERY_LIMIT", "QueryMemoryAction", "QueryMemoryArguments", "parse_time"]

MAX_TOOL_QUERY_LIMIT = 20
"""Most items one ``query_memory`` call lists (the library itself allows more)."""

EXCERPT_CHARS = 300
"""Length of the matching excerpt shown per hit, in characters."""


class QueryMemoryArguments(ActionArguments):
    """Arguments of ``query_memory``; every filter given must hold."""

    query: str | None = None
    """What you are looking for, in words; items are ranked by meaning. Leave it out to list the newest items."""
    type: MemoryType | None = None
    """Only items of this type: action_result, web_content, database_result, search_results, file or custom."""
    source: str | None = None
    """Only items from this source (exact match: a tool name, a URL, "agent")."""
    tags: list[str] = []
    """Only items that carry every one of these tags."""
    since: str | None = None
    """Only items stored at or after this time, ISO 8601: "2025-10-15" or "2025-10-15T14:30:00Z" (no zone = UTC)."""
    until: str | None = None
    """Only items stored at or before this time, ISO 8601; a date alone includes that whole day."""
    limit: int = Field(default=DEFAULT_QUERY_LIMIT, ge=1, le=MAX_TOOL_QUERY_LIMIT)
    """Most items to list (1-20)."""


def parse_time(value: str, *, name: str, end_of_day: bool = False) -> datetime:
    """An ISO 8601 date or date-time as an aware datetime (naive means UTC).

    A date alone (``2025-10-15``) is the start of that day, or its last microsecond when
    ``end_of_day`` (so ``until="2025-10-15"`` includes the whole day).

    Raises:
        ToolCallError: if ``value`` is not ISO 8601 (code ``invalid_arguments``).
    """
    text = value.strip()
    try:
        day = date.fromisoformat(text)
    except ValueError:
        pass
    else:
        return datetime.combine(day, time.max if end_of_day else time.min, tzinfo=UTC)
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise ToolCallError(
            f"{name}={value!r} is not an ISO 8601 date or time; use e.g. \"2025-10-15\" or "
            "\"2025-10-15T14:30:00Z\"."
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _excerpt(chunk: str, max_chars: int = EXCERPT_CHARS) -> str:
    """The chunk on one line, cut at a word boundary to about ``max_chars`` characters."""
    flat = " ".join(chunk.split())
    if len(flat) <= max_chars:
        return flat
    cut = flat[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut) + " …"


def _hit_line(rank: int, hit: QueryHit) -> str:
    item, meta = hit.item, hit.item.metadata
    parts = [item.id, item.type, f"source: {meta.source}"]
    if meta.title:
        parts.append(f'"{meta.title}"')
    if meta.text_tokens is not None:
        parts.append(f"{meta.text_tokens:,} tokens as text ({meta.tokens:,} raw)")
    else:
        parts.append(f"{meta.tokens:,} tokens")
    parts.append(meta.timestamp.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    if hit.similarity is not None:
        parts.append(f"similarity {hit.similarity:.2f}")
    elif hit.score is not None:
        parts.append("keyword match")
    lines = [f"{rank}. " + " · ".join(parts)]
    if meta.tags:
        lines.append("   tags: " + ", ".join(meta.tags))
    if hit.chunk:
        lines.append("   " + _excerpt(hit.chunk))
    return "\n".join(lines)


class QueryMemoryAction(MemoryAction[QueryMemoryArguments]):
    """``query_memory``: items ranked by relevance to ``query`` (``AgentMemory.query``: the best
    chunk of each item by meaning, fused with keyword search when the memory's config enables it),
    or the newest first without ``query``; filtered by type, source, tags and store time. Each hit
    shows the cosine similarity of its best chunk when the dense search found it. Finding nothing
    is not an error: the result is ``ok`` and suggests broader filters."""

    name = "query_memory"
    title = "Query Memory"
    Arguments = QueryMemoryArguments
    example = {"query": "quarterly revenue figures", "type": "web_content", "limit": 5}
    description = (
        "Search your long-term memory: stored tool results (web pages, search results, database "
        "results), files and your own notes. Use it to find the id of something seen earlier whose "
        "citation you no longer have, or to check whether memory already holds what you need before "
        "fetching it again.\n"
        "query ranks items by relevance to your words (by meaning and by keywords); type, source, "
        "tags and since/until (ISO 8601 dates, UTC) filter them; without query the newest items "
        "come first.\n"
        f"Example: {format_call('query_memory', example)}\n"
        f"Limits: lists at most limit items (default {DEFAULT_QUERY_LIMIT}, at most {MAX_TOOL_QUERY_LIMIT}), "
        f"each with its id, size in tokens and the best-matching passage (about {EXCERPT_CHARS} "
        "characters), not the whole content: read an item with retrieve_memory(id=...)."
    )

    def execute(self, memory: AgentMemory, args: QueryMemoryArguments) -> ToolResult:
        since = parse_time(args.since, name="since") if args.since else None
        until = parse_time(args.until, name="until", end_of_day=True) if args.until else None
        if since and until and since > until:
            raise ToolCallError(f"since ({args.since}) is after until ({args.until}); swap them or widen the range.")
        criteria = MemoryCriteria(
            text=args.query, type=args.type, source=args.source, tags=tuple(args.tags),
            since=since, until=until, limit=args.limit,
        )
        hits = memory.query(criteria)
        filters = {
            key: value
            for key, value in args.model_dump(exclude={"query", "limit"}).items()
            if value is not None and value != []
        }
        shown = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in filters.items())
        data: dict[str, Any] = {
            "query": criteria.text,
            "filters": filters,
            "hits": [
                {
                    "id": hit.item.id,
                    "type": hit.item.type,
                    "source": hit.item.metadata.source,
                    "title": hit.item.metadata.title,
                    "tags": list(hit.item.metadata.tags),
                    "tokens": hit.item.metadata.tokens,
                    "text_tokens": hit.item.metadata.text_tokens,
                    "timestamp": hit.item.metadata.timestamp.isoformat(),
                    "score": hit.score,
                    "similarity": hit.similarity,
                    "excerpt": _excerpt(hit.chunk) if hit.chunk else None,
                }
                for hit in hits
            ],
        }
        if not hits:
            return ToolResult.success(self._nothing_found(memory, criteria, shown), data)
        what = f', for "{criteria.text}", best match first' if criteria.text else ", newest first"
        plural = "s" if len(hits) != 1 else ""
        head = f"{len(hits)} memory item{plural}{what}" + (f" ({shown})" if shown else "") + ":"
        body = "\n".join(_hit_line(rank, hit) for rank, hit in enumerate(hits, 1))
        hint = (
            f"Read one with {format_call('retrieve_memory', {'id': hits[0].item.id})}; "
            'add transform="excerpt", around="<term>" to read only the part you need.'
        )
        return ToolResult.success(f"{head}\n{body}\n{hint}", data)

    @staticmethod
    def _nothing_found(memory: AgentMemory, criteria: MemoryCriteria, shown: str) -> str:
        if len(memory) == 0:
            return "No memory items: memory is empty. Results of your tools and store_memory calls are kept here."
        advice = []
        if shown:
            advice.append(f"drop or loosen a filter ({shown})")
        if criteria.text or not advice:
            advice.append("use other or fewer words")
        return f"No memory items match. Broaden the search: {'; or '.join(advice)}."
