"""Search results: the ranked titles and where they point.

Recognised: type ``search_results`` or any JSON that is a ranked list of hits (objects with a
title and a URL or link, optionally a snippet), bare or under a key such as ``results``,
``items``, ``organic_results`` or ``hits``. Text search results of type ``search_results`` with
one URL per hit ("1. Title\\nhttps://...\\nsnippet") are read too.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit

from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter
from compaction_plugins.base import NOT_JSON, BasePlugin, cap, fit, item_json, item_text, short

__all__ = ["SearchHit", "SearchResultsPlugin", "parse_hits"]

TITLE_KEYS = ("title", "name", "headline")
URL_KEYS = ("url", "link", "href", "uri", "displayed_link")
SNIPPET_KEYS = ("snippet", "description", "content", "summary", "text", "body")
LIST_KEYS = ("results", "organic_results", "items", "hits", "documents", "web", "data")
MIN_HIT_SHARE = 0.6
"""Share of a list's entries that must look like hits for the list to be search results."""

JUDGED_ENTRIES = 200
"""A list whose first this many entries are not search hits is not read further: a search answers
tens of hits; a query result of thousands of rows is refused after 200."""

_URL = re.compile(r"https?://\S+")

SearchHit = tuple[str, str, str]
"""``(title, url, snippet)``; any of them may be ""."""


def _first(entry: dict[str, Any], keys: tuple[str, ...]) -> str:
    for key in keys:
        value = entry.get(key)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return ""


def _hits_from_list(values: list[Any]) -> list[SearchHit] | None:
    if not values or not all(isinstance(v, dict) for v in values):
        return None
    judged = values[:JUDGED_ENTRIES]
    if sum(1 for v in judged if _first(v, TITLE_KEYS) and _first(v, URL_KEYS)) < MIN_HIT_SHARE * len(judged):
        return None
    hits = [(_first(v, TITLE_KEYS), _first(v, URL_KEYS), _first(v, SNIPPET_KEYS)) for v in values]
    good = sum(1 for title, url, _ in hits if title and url)
    return hits if good >= MIN_HIT_SHARE * len(hits) else None


def parse_hits(data: Any) -> list[SearchHit] | None:
    """The hits of JSON search results, best first, or ``None`` if ``data`` is not such a list."""
    if isinstance(data, list):
        return _hits_from_list(data)
    if isinstance(data, dict):
        for key in LIST_KEYS:
            value = data.get(key)
            if isinstance(value, list):
                hits = _hits_from_list(value)
                if hits is not None:
                    return hits
            elif isinstance(value, dict):  # {"web": {"results": [...]}}
                hits = parse_hits(value)
                if hits is not None:
                    return hits
    return None


def _text_hits(text: str) -> list[SearchHit] | None:
    """Hits of plain-text results: each URL line with the line before it as title."""
    lines = [line.strip() for line in text.splitlines()]
    hits: list[SearchHit] = []
    for i, line in enumerate(lines):
        found = _URL.search(line)
        if not found:
            continue
        url = found.group(0).rstrip(").,]")
        title = line[: found.start()].strip(" -–:|[]()")
        if not title and i > 0:
            title = lines[i - 1]
        title = re.sub(r"^\d+[.)]\s*", "", title)
        snippet = lines[i + 1] if i + 1 < len(lines) and not _URL.search(lines[i + 1]) else ""
        hits.append((title, url, snippet))
    return hits if len(hits) >= 2 else None


def _host_path(url: str, max_chars: int = 48) -> str:
    parts = urlsplit(url)
    if not parts.netloc:
        return short(url, max_chars)
    host = parts.netloc.removeprefix("www.")
    return short(host + parts.path.rstrip("/"), max_chars)


class SearchResultsPlugin(BasePlugin):
    """Search results: ``N results: 1. Title (host/path) · 2. …`` in rank order."""

    name = "search_results"
    priority = 20

    def _hits(self, item: MemoryItem) -> list[SearchHit] | None:
        data = item_json(item)
        if data is not NOT_JSON:
            return parse_hits(data)
        if item.type == "search_results":
            text = item_text(item)
            return _text_hits(text) if text else None
        return None

    def matches(self, item: MemoryItem) -> bool:
        return self._hits(item) is not None

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        hits = self._hits(item) or []
        pieces = [f"{len(hits)} results:"]
        for rank, (title, url, snippet) in enumerate(hits, 1):
            label = short(title or snippet or url, 70)
            pieces.append(f"{rank}. {label} ({_host_path(url)})" if url and title else f"{rank}. {label}")
        head, rest = pieces[0], pieces[1:]
        body = fit(rest, max_tokens - counter.count(head + " "), counter, sep="; ", min_cut_tokens=6)
        return f"{head} {body}" if body else fit([head], max_tokens, counter)

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        hits = self._hits(item) or []
        blocks = [f"{len(hits)} results"]
        for rank, (title, url, snippet) in enumerate(hits, 1):
            block = f"{rank}. {title or '(untitled)'}"
            if url:
                block += f"\n   {url}"
            if snippet:
                block += f"\n   {short(snippet, 240)}"
            blocks.append(block)
        return cap(fit(blocks, max_tokens, counter, sep="\n", cut_last=False), max_tokens, counter)
