"""JSON documents: shape, keys and sample values, nested values shown by their shape.

Any JSON the search-results and database-result plugins did not claim: stored JSON, or text that
parses as a JSON object or array. Key content reads like ``name: {first_name: Mia, last_name:
Li} · dob: 1990-04-05 · reservations: [NQNU5R, …(4)]``: scalars in full (cut when long),
small flat objects inline, bigger ones as ``{3 keys: a, b, c}``, lists by length and first items.
"""

from __future__ import annotations

from typing import Any

from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import json_to_lines
from compaction_plugins.base import NOT_JSON, BasePlugin, cap, fit, item_json, short

__all__ = ["JsonDocumentPlugin", "describe"]

INLINE_KEYS = 4
"""An object of scalars with at most this many keys is shown inline."""


def describe(value: Any, *, depth: int = 0, max_chars: int = 50) -> str:
    """A short description of a JSON value: scalars as text, containers by shape and samples."""
    if isinstance(value, dict):
        if not value:
            return "{}"
        scalars = all(not isinstance(v, dict | list) for v in value.values())
        if scalars and len(value) <= INLINE_KEYS and depth < 2:
            return "{" + ", ".join(f"{k}: {short(v, 24)}" for k, v in value.items()) + "}"
        names = list(value)
        shown = ", ".join(str(k) for k in names[:4]) + (", …" if len(names) > 4 else "")
        return f"{{{len(names)} keys: {shown}}}"
    if isinstance(value, list):
        if not value:
            return "[]"
        if all(not isinstance(v, dict | list) for v in value):
            shown = ", ".join(short(v, 20) for v in value[:3])
            return f"[{shown}{', …' if len(value) > 3 else ''}]" + (f"({len(value)})" if len(value) > 3 else "")
        first = value[0]
        if isinstance(first, dict):
            keys = ", ".join(str(k) for k in list(first)[:4]) + (", …" if len(first) > 4 else "")
            return f"[{len(value)} × {{{keys}}}]"
        return f"[{len(value)} × {describe(first, depth=depth + 1)}]"
    return short(value, max_chars)


class JsonDocumentPlugin(BasePlugin):
    """Any other JSON: its top-level keys with values (or shapes), most informative first."""

    name = "json_document"
    priority = 40

    def matches(self, item: MemoryItem) -> bool:
        return item_json(item) is not NOT_JSON

    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        data = item_json(item)
        if data is NOT_JSON:
            return ""
        if isinstance(data, dict):
            # scalars first (ids, names, statuses are what a model looks for), containers after
            entries = sorted(data.items(), key=lambda kv: isinstance(kv[1], dict | list))
            return fit([f"{k}: {describe(v)}" for k, v in entries], max_tokens, counter, min_cut_tokens=5)
        if isinstance(data, list):
            head = describe(data)
            first = data[0] if data else None
            while isinstance(first, list) and first:
                first = first[0]
            if isinstance(first, dict):
                pairs = sorted(first.items(), key=lambda kv: isinstance(kv[1], dict | list))
                sample = fit([f"{k}: {describe(v, depth=1)}" for k, v in pairs], max_tokens, counter, sep=", ")
                return fit([head, f"1st: {sample}"], max_tokens, counter)
            return cap(head, max_tokens, counter)
        return cap(short(data, 200), max_tokens, counter)

    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        data = item_json(item)
        if data is NOT_JSON:
            return ""
        if isinstance(data, dict):
            shape = f"object, {len(data)} keys: " + ", ".join(str(k) for k in data)
        elif isinstance(data, list):
            shape = f"array of {len(data)}: {describe(data)}"
        else:
            shape = type(data).__name__
        lines = [cap(shape, max_tokens // 4 or 1, counter)]
        lines.extend(short(line, 160) for line in json_to_lines(data, limit=400))
        return cap(fit(lines, max_tokens, counter, sep="\n", cut_last=False), max_tokens, counter)
