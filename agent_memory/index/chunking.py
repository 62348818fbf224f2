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

Not every chunk is embedded (:func:`chunks_to_embed`): the keyword index takes all of them, the
vector index those that start within ``max_embedded_chars`` and are not near-duplicates of an
earlier chunk of the same item. A result made of one repeated line (a log, a padded page, a run of
one character) would otherwise put hundreds of identical vectors into the vector index, and an
HNSW graph (Chroma's, pgvector's) full of points at one place loses the items stored after them:
its beam of ``ef`` candidates fills with equidistant twins and never leaves them (30 facts stored
after ``"GET /healthz 200 OK 0.4ms\n" * 2300`` came back in the top 5 for 24 of 30 paraphrases on
Chroma, 27 on pgvector, 30 by exact search). A twin adds nothing a query could find by meaning.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import regex

from agent_memory.html import extract_page, looks_like_html
from agent_memory.models.items import ItemRecord
from agent_memory.storage.vector import IndexChunk
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import JsonFormat, raw_text

__all__ = [
    "NEAR_DUPLICATE_JACCARD", "TextChunk", "chunk_header", "chunk_text", "chunks_to_embed", "indexable_text",
    "item_chunks", "shingles",
]


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


NEAR_DUPLICATE_JACCARD = 0.8
"""Jaccard similarity of two chunks' shingle sets (:func:`shingles`) from which the later chunk is
a near-duplicate of the earlier and is not embedded. Broder (1997), "On the resemblance and
containment of documents", defines resemblance so; near-duplicate web pages are commonly taken at
0.8-0.9 on word shingles. Chunks of real text share only their overlap (``chunk_overlap_tokens``,
a fifth of a chunk by default), well below 0.8; chunks of a repeated line, or of rows that differ
only in their numbers, share nearly all their shingles."""

SHINGLE_WORDS = 3
"""Words per shingle (a text of fewer words is one shingle of all of them)."""

_TOKEN = regex.compile(r"\w+|[^\w\s]+")
_DIGITS = regex.compile(r"\d+")
_RUN = regex.compile(r"(.)\1{2,}")


def shingles(text: str) -> frozenset[int]:
    """The set of ``SHINGLE_WORDS``-grams of ``text``'s words and runs of punctuation (hashed; for
    comparing chunks of one item within one process), normalised so that texts differing only in
    their numbers, in case, or in the length of a run of one character compare equal: lower case,
    every run of digits read as ``0``, every run of one character cut to two."""
    words = [_RUN.sub(r"\1\1", _DIGITS.sub("0", word)) for word in _TOKEN.findall(text.lower())]
    if len(words) <= SHINGLE_WORDS:
        return frozenset([hash(tuple(words))]) if words else frozenset()
    return frozenset(hash(tuple(words[n : n + SHINGLE_WORDS])) for n in range(len(words) - SHINGLE_WORDS + 1))


def chunks_to_embed(chunks: Sequence[IndexChunk], *, max_start_char: int | None) -> list[IndexChunk]:
    """The chunks of ``chunks`` (one or more items' chunks, in order) that get a vector: those that
    start before ``max_start_char`` (``None``: all) and are not near-duplicates of an earlier kept
    chunk of the same item (:data:`NEAR_DUPLICATE_JACCARD` on :func:`shingles`). An item's chunk 0
    is always kept, so every item is in the vector index (listings and filters find it there).

    Cost: each chunk's shingles are compared only with the kept chunks it shares a shingle with
    (an inverted map per item), so a page of distinct chunks costs O(shingles) and a repetitive
    result, whose twins are dropped, keeps the map small."""
    kept: list[IndexChunk] = []
    item_id: str | None = None
    sizes: list[int] = []
    holders: dict[int, list[int]] = {}
    for chunk in chunks:
        if chunk.item_id != item_id:
            item_id, sizes, holders = chunk.item_id, [], {}
        elif max_start_char is not None and chunk.start_char >= max_start_char:
            continue
        body = shingles(chunk.text[chunk.header_chars:])
        shared: dict[int, int] = {}
        for shingle in body:
            for holder in holders.get(shingle, ()):
                shared[holder] = shared.get(holder, 0) + 1
        if any(both / (len(body) + sizes[holder] - both) >= NEAR_DUPLICATE_JACCARD for holder, both in shared.items()):
            continue
        for shingle in body:
            holders.setdefault(shingle, []).append(len(sizes))
        sizes.append(len(body))
        kept.append(chunk)
    return kept
