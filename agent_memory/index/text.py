"""What of an item is embedded: readable text, not markup or JSON punctuation.

- HTML pages: the main content extracted by trafilatura (:mod:`agent_memory.html`).
- JSON: one line per leaf, ``path.to.key: value``; a list of rows gives one line per row.
- Bytes: the text if they decode as UTF-8, otherwise nothing (only the header is indexed).
- Text: as is.

Each chunk is embedded behind a short header (the item's title, or its source), so a chunk from
the middle of a page still says which page it belongs to.
"""

from __future__ import annotations

from typing import Any

from agent_memory.html import extract_page, looks_like_html
from agent_memory.models.items import ItemRecord
from agent_memory.transforms import raw_text

__all__ = ["chunk_header", "indexable_text"]

def chunk_header(record: ItemRecord) -> str:
    """The line put before every chunk of ``record`` when it is embedded ("" if nothing useful)."""
    label = record.metadata.title or record.metadata.source
    return f"{label}\n" if label and label not in ("agent", "user") else ""


def indexable_text(record: ItemRecord, content: Any) -> str:
    """The text of ``content`` that should be embedded for ``record``: its raw text
    (:func:`~agent_memory.transforms.raw_text`, JSON as lines, nothing for binary bytes), an HTML
    page as its main text."""
    text = raw_text(content, record.metadata.content_encoding, json_format="lines", binary=None)
    if text is None:
        return ""
    if record.metadata.content_encoding != "json" and (record.metadata.media_type == "text/html" or looks_like_html(text)):
        return extract_page(text).text
    return text
