"""An item's index chunks: what of it is indexed, cut into overlapping token windows.

What is indexed is readable text, not markup or JSON punctuation (:func:`indexable_text`):

- HTML pages: the main content extracted by trafilatura (:mod:`agent_memory.html`).
- JSON: one line per leaf, ``path.to.key: value``; a list of rows gives one line per row.
- Bytes: the text if they decode as UTF-8, otherwise nothing (only the header is indexed).
- Text: as is.

A 150 KB page is far longer than the embedding model's window (256 word pieces for MiniLM); one
vector for it would describe only its beginning. Chunks of ``chunk_tokens`` tokens that overlap
by ``overlap_tokens`` make every part of the text findable (:func:`chunk_text`). Chunk boundaries
move back to the nearest whitespace within the last quarter of a window, so words are not cut in
half. Each chunk is embedded behind a short header (the item's title, or its source), so a chunk
from the middle of a page still says which page it belongs to (:func:`item_chunks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent_memory.html import extract_page, looks_like_html
from agent_memory.models.items import ItemRecord
from agent_memory.storage.vector import IndexChunk
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import JsonFormat, raw_text

__all__ = ["TextChunk", "chunk_header", "chunk_text", "indexable_text", "item_chunks"]


@dataclass(frozen=True, slots=True)
class TextChunk:
    """One window of a text."""

    index: int
    """0-based position among the text's chunks."""
    text: str
    """The window's text: exactly ``source[start_char:end_char]``."""
    start_char: int
    """Offset of the first character in the source text."""
    end_char: int
    """Offset one past the last character."""


def chunk_text(text: str, counter: TokenCounter, *, chunk_tokens: int, overlap_tokens: int) -> list[TextChunk]:
    """Split ``text`` into windows of at most ``chunk_tokens`` tokens, ``overlap_tokens`` shared.

    Returns an empty list for blank text and one chunk for text that fits in one window.

    Raises:
        ValueError: if ``overlap_tokens`` is not below ``chunk_tokens``.
    """
    if overlap_tokens >= chunk_tokens or chunk_tokens < 1:
        raise ValueError("need 0 <= overlap_tokens < chunk_tokens")
    if not text.strip():
        return []
    offsets = counter.token_char_offsets(text)
    n_tokens = len(offsets) - 1
    if n_tokens <= chunk_tokens:
        return [TextChunk(0, text, 0, len(text))]
    chunks: list[TextChunk] = []
    start_tok = 0
    while True:
        end_tok = min(start_tok + chunk_tokens, n_tokens)
        end_tok = _back_to_space(text, offsets, start_tok, end_tok, n_tokens, chunk_tokens)
        start, end = offsets[start_tok], offsets[end_tok]
        if text[start:end].strip():
            chunks.append(TextChunk(len(chunks), text[start:end], start, end))
        if end_tok >= n_tokens:
            return chunks
        start_tok = max(end_tok - overlap_tokens, start_tok + 1)


def _back_to_space(
    text: str, offsets: list[int], start_tok: int, end_tok: int, n_tokens: int, chunk_tokens: int
) -> int:
    """Move a window end back to a token that begins with whitespace, within a quarter window."""
    if end_tok >= n_tokens:
        return end_tok
    floor = end_tok - chunk_tokens // 4
    for tok in range(end_tok, max(floor, start_tok + 1), -1):
        pos = offsets[tok]
        if pos < len(text) and text[pos].isspace():
            return tok
    return end_tok


def chunk_header(record: ItemRecord) -> str:
    """The line put before every chunk of ``record`` when it is embedded ("" if nothing useful)."""
    label = record.metadata.title or record.metadata.source
    return f"{label}\n" if label and label not in ("agent", "user") else ""


def indexable_text(record: ItemRecord, content: Any, *, json_format: JsonFormat = "lines") -> str:
    """The text of ``content`` that should be embedded for ``record``: its raw text
    (:func:`~agent_memory.transforms.raw_text`, JSON in ``json_format``: one line per row or leaf
    by default; nothing for binary bytes), an HTML page as its main text."""
    text = raw_text(content, record.metadata.content_encoding, json_format=json_format, binary=None)
    if text is None:
        return ""
    if record.metadata.content_encoding != "json" and (record.metadata.media_type == "text/html" or looks_like_html(text)):
        return extract_page(text).text
    return text


def item_chunks(record: ItemRecord, content: Any, counter: TokenCounter, *, max_chars: int, chunk_tokens: int,
                overlap_tokens: int) -> list[IndexChunk]:
    """The chunks of one item: its indexable text (its first ``max_chars`` characters) cut into
    windows of ``chunk_tokens`` tokens sharing ``overlap_tokens``, each behind the item's header;
    an item with no text gets one head chunk so that filters and listings still find it.

    Raises:
        ValueError: if ``overlap_tokens`` is not below ``chunk_tokens``.
    """
    text = indexable_text(record, content)[:max_chars]
    header = chunk_header(record)
    pieces = chunk_text(text, counter, chunk_tokens=chunk_tokens, overlap_tokens=overlap_tokens)
    meta = record.metadata
    timestamp_s = meta.timestamp.timestamp()
    if not pieces:
        label = header or f"{record.type} from {meta.source}\n"
        return [IndexChunk(item_id=record.id, chunk_index=0, text=label, header_chars=len(label), start_char=0,
                           type=record.type, source=meta.source, timestamp_s=timestamp_s, tags=meta.tags)]
    return [
        IndexChunk(item_id=record.id, chunk_index=piece.index, text=header + piece.text, header_chars=len(header),
                   start_char=piece.start_char, type=record.type, source=meta.source, timestamp_s=timestamp_s,
                   tags=meta.tags)
        for piece in pieces
    ]
