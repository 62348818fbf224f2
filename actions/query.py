"""Query Memory (``query_memory``): the model finds stored items by meaning and by filters."""

from __future__ import annotations

import json
from datetime import UTC
from typing import Any

from pydantic import Field

from actions.base import ActionArguments, MemoryAction, ToolCallError, ToolResult, format_call
from actions.store import MAX_TAGS, Tag
from agent_memory import AgentMemory
from agent_memory.config import DEFAULT_QUERY_LIMIT
from agent_memory.limits import shorten
from agent_memory.models.items import MemoryCriteria, QueryHit

__all__ = ["MAX_QUERY_CHARS", "MAX_QUERY_PAGES", "MAX_TOOL_QUERY_LIMIT", "QueryMemoryAction", "QueryMemoryArguments"]

MAX_TOOL_QUERY_LIMIT = 20
"""Most items one ``query_memory`` call lists (the library itself allows more)."""

MAX_QUERY_PAGES = 5
"""Pages of hits a model can walk (``limit`` x ``page`` <= 100, the library's most hits per query)."""

MAX_QUERY_CHARS = 1_000
"""Longest query a model may send, in characters (the embedding model reads ~256 word pieces)."""

EXCERPT_CHARS = 300
"""Length of the matching excerpt shown per hit, in characters."""

HIT_LABEL_CHARS = 100
"""Most characters of a hit's source, title and tag list shown (20 hits stay well under the
answer cap whatever the developer stored as metadata)."""


class QueryMemoryArguments(ActionArguments):
    """Arguments of ``query_memory``; every filter given must hold."""

    query: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    """Omit to list the newest"""
    tags: list[Tag] = Field(default=[], max_length=MAX_TAGS)
    limit: int | None = Field(default=None, ge=1, le=MAX_TOOL_QUERY_LIMIT)
    page: int | None = Field(default=None, ge=1, le=MAX_QUERY_PAGES)


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
    parts = [item.id, item.type, f"source: {shorten(meta.source, HIT_LABEL_CHARS)}"]
    if meta.title:
        parts.append(f'"{shorten(meta.title, HIT_LABEL_CHARS)}"')
    if meta.tokens is None:
        parts.append(f"{meta.size_bytes:,} bytes, tokens not counted yet")
    elif meta.text_tokens is not None:
        parts.append(f"{meta.text_tokens:,} tokens as text ({meta.tokens:,} raw)")
    else:
        parts.append(f"{meta.tokens:,} tokens")
    parts.append(meta.timestamp.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC"))
    if hit.match is not None:
        parts.append(hit.match)
    turns = meta.extra.get("turn_ids")
    if isinstance(turns, list) and turns:
        parts.append("turns " + shorten(", ".join(map(str, turns)), HIT_LABEL_CHARS))
    lines = [f"{rank}. " + " · ".join(parts)]
    if meta.tags:
        lines.append("   tags: " + shorten(", ".join(meta.tags), HIT_LABEL_CHARS))
    if hit.chunk:
        lines.append("   " + _excerpt(hit.chunk))
    return "\n".join(lines)


class QueryMemoryAction(MemoryAction[QueryMemoryArguments]):
    """``query_memory``: items ranked by relevance to ``query`` (``AgentMemory.query``: the best
    chunk of each item by meaning, fused with keyword search when the memory's config enables it),
    or the newest first without ``query`` (an empty or blank ``query`` is a tool error, as
    ``AgentMemory.query`` refuses it); only items carrying every tag in ``tags``. Each hit
    shows the cosine similarity of its best chunk when the dense search found it. Finding nothing
    is not an error: the result is ``ok`` and suggests a broader search. (The library's
    ``AgentMemory.query`` also filters by type, source and time; the tool keeps to what a model
    needs: every token of its schema is paid on every call.)"""

    name = "query_memory"
    title = "Query Memory"
    capability = "query"
    Arguments = QueryMemoryArguments
    example = {"query": "Q3 revenue"}
    description = (
        "Search stored results and notes by meaning and keywords, e.g. to find an id you lost or "
        f"check before fetching again. Returns up to limit hits (default {DEFAULT_QUERY_LIMIT}, max "
        f"{MAX_TOOL_QUERY_LIMIT}). Example: {format_call('query_memory', example)}"
    )

    def execute(self, memory: AgentMemory, args: QueryMemoryArguments) -> ToolResult:
        if args.query is not None and not args.query.strip():
            raise ToolCallError(
                "query is empty: give words to search for, or leave query out to list the newest items."
            )
        limit, page = args.limit or DEFAULT_QUERY_LIMIT, args.page or 1
        criteria = MemoryCriteria(text=args.query, tags=tuple(args.tags), limit=limit * page)
        found = memory.query(criteria)
        hits, first_rank = found[(page - 1) * limit :], (page - 1) * limit + 1
        filters = {"tags": list(criteria.tags)} if criteria.tags else {}
        shown = ", ".join(f"{key}={json.dumps(value, ensure_ascii=False)}" for key, value in filters.items())
        data: dict[str, Any] = {
            "query": criteria.text,
            "filters": filters,
            "page": page,
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
        if not hits and page > 1:
            return ToolResult.success(f"No more hits: page {page} is past the last one ({len(found)} hits in all).", data)
        if not hits:
            return ToolResult.success(self._nothing_found(memory, criteria, shown), data)
        what = f', for "{shorten(criteria.text, 80)}", best match first' if criteria.text else ", newest first"
        plural = "s" if len(hits) != 1 else ""
        on_page = f", page {page}" if page > 1 else ""
        head = f"{len(hits)} memory item{plural}{what}{on_page}" + (f" ({shown})" if shown else "") + ":"
        body = "\n".join(_hit_line(rank, hit) for rank, hit in enumerate(hits, first_rank))
        hint = (
            f"Read one with {format_call(self.retrieve_call, {'id': hits[0].item.id})}; "
            'add around="<term>" to read only the part you need.'
        )
        if len(hits) == limit and page < MAX_QUERY_PAGES:
            more = {key: value for key, value in (("query", args.query), ("tags", args.tags or None),
                                                  ("limit", args.limit)) if value}
            hint += f" More hits: {format_call(self.name, {**more, 'page': page + 1})}."
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
