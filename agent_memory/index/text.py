"""What of an item is embedded: readable text, not markup or JSON punctuation.

- HTML pages: the main content extracted by trafilatura (:mod:`agent_memory.html`).
- JSON: one line per leaf, ``path.to.key: value``; a list of rows gives one line per row.
- Bytes: the text if they decode as UTF-8, otherwise nothing (only the header is indexed).
- Text: as is.

Each chunk is embedded behind a short header (the item's title, or its source), so a chunk from
the middle of a page still says which page it belongs to.
"""

from __future__ import annotations

import json
from typing import Any

from agent_memory.html import extract_page, looks_like_html
from agent_memory.models.items import ItemRecord

__all__ = ["chunk_header", "indexable_text", "json_to_lines"]

MAX_JSON_LINES = 20_000
"""Leaves of a JSON document turned into index lines at most."""


def chunk_header(record: ItemRecord) -> str:
    """The line put before every chunk of ``record`` when it is embedded ("" if nothing useful)."""
    label = record.metadata.title or record.metadata.source
    return f"{label}\n" if label and label not in ("agent", "user") else ""


def indexable_text(record: ItemRecord, content: Any) -> str:
    """The text of ``content`` that should be embedded for ``record``."""
    encoding = record.metadata.content_encoding
    if encoding == "json":
        return "\n".join(json_to_lines(content))
    if encoding == "bytes":
        try:
            content = bytes(content).decode("utf-8")
        except UnicodeDecodeError:
            return ""
    text = str(content)
    if record.metadata.media_type == "text/html" or looks_like_html(text):
        return extract_page(text).text
    return text


def json_to_lines(data: Any, *, limit: int = MAX_JSON_LINES) -> list[str]:
    """Flatten JSON into readable lines: rows (objects in a list) one per line, other leaves as
    ``path: value``. Stops after ``limit`` lines."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)

    def walk(value: Any, path: str) -> None:
        if len(lines) >= limit:
            return
        if isinstance(value, dict):
            if value and all(not isinstance(v, dict | list) for v in value.values()):
                prefix = f"{path}: " if path else ""
                lines.append(prefix + "; ".join(f"{k}: {scalar(v)}" for k, v in value.items()))
                return
            for key, child in value.items():
                walk(child, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                walk(child, f"{path}.{i}" if path else str(i))
        else:
            lines.append(f"{path}: {scalar(value)}" if path else scalar(value))

    walk(data, "")
    return lines
