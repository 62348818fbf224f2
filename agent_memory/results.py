"""What a tool result is, and how it is stored: one place for the replay, the memory manager and
the agent loop (one function decides it, so no two callers can type the same result differently).

A result given as text is sniffed: a JSON document is a ``database_result`` (``application/json``),
an HTML page ``web_content`` (``text/html``), anything else an ``action_result`` (``text/plain``).
JSON-able data (not text) is a ``database_result`` stored as JSON. Its title is the call that made
it (``tool(args)``, short), its source the tool's name, unless the caller knows better.
"""

from __future__ import annotations

import json
from typing import Any

from agent_memory.html import looks_like_html
from agent_memory.limits import MAX_SOURCE_CHARS, MAX_TITLE_CHARS, shorten
from agent_memory.models.items import MemoryType

__all__ = ["CALL_TITLE_ARGS_CHARS", "classify_result", "result_store_arguments"]

CALL_TITLE_ARGS_CHARS = 60
"""Arguments longer than this are shown as ``tool(…)`` in a result's title."""


def classify_result(content: Any) -> tuple[MemoryType, str]:
    """``(memory type, media type)`` of a tool result (see the module docstring)."""
    if not isinstance(content, str | bytes):
        return "database_result", "application/json"
    if isinstance(content, bytes):
        return "file", "application/octet-stream"
    if content.lstrip()[:1] in ("[", "{"):
        try:
            json.loads(content)
        except ValueError:
            pass
        else:
            return "database_result", "application/json"
    if looks_like_html(content):
        return "web_content", "text/html"
    return "action_result", "text/plain"


def result_store_arguments(
    content: Any,
    *,
    tool: str | None,
    call_arguments: str | None = None,
    type: MemoryType | None = None,  # noqa: A002 - AgentMemory.store's name
    media_type: str | None = None,
    source: str | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """The arguments of ``AgentMemory.store`` for one tool result: what the caller knows, the
    rest sniffed (:func:`classify_result`) or derived from the call. A tool that answered nothing
    (``""``) is a result too: ``allow_empty`` is set."""
    if type is None or media_type is None:
        kind, media = classify_result(content)
        type, media_type = type or kind, media_type or media
    name = tool or "tool"
    if title is None and call_arguments:
        title = f"{name}({call_arguments})" if len(call_arguments) <= CALL_TITLE_ARGS_CHARS else f"{name}(…)"
    return {
        "content": content,
        "type": type,
        "media_type": media_type,
        "source": shorten(source or name, MAX_SOURCE_CHARS),
        "title": shorten(title, MAX_TITLE_CHARS) if title else title,
        "allow_empty": True,
    }
