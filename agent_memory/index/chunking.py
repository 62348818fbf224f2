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
earlier chunk of the same item; of a table (:func:`is_table`: JSON rows, JSON lines, CSV / TSV,
a database result) at most :data:`MAX_EMBEDDED_TABLE_CHUNKS`, spread over it. A result made of
one repeated line (a log, a padded page, a run of one character) would otherwise put hundreds of
identical vectors into the vector index, and an HNSW graph (Chroma's, pgvector's) full of points
at one place loses the items stored after them: its beam of ``ef`` candidates fills with
equidistant twins and never leaves them (30 facts stored after ``"GET /healthz 200 OK 0.4ms\n" * 2300`` came back in the top 5 for 24 of 30 paraphrases on
Chroma, 27 on pgvector, 30 by exact search). A twin adds nothing a query could find by meaning.
"""

from __future__ import annotations

import csv
import io
import itertools
import json
from collections.abc import Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import Any

import regex

from agent_memory.background import CHECKPOINT_ROWS, checkpoint
from agent_memory.html import extract_page, looks_like_html
from agent_memory.models.items import ItemRecord
from agent_memory.storage.vector import IndexChunk
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import JsonFormat, raw_text

__all__ = [
    "MAX_EMBEDDED_TABLE_CHUNKS", "NEAR_DUPLICATE_JACCARD", "TextChunk", "chunk_header", "chunk_text", "chunks_to_embed",
    "indexable_text", "is_table", "item_chunks", "shingles", "spread",
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
            if len(chunks) % CHECKPOINT_ROWS == 0:
                checkpoint()  # an indexing thread may pause here for the agent's step
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
    return extract_page(text).text if is_page(record, text) else text


def is_page(record: ItemRecord, text: str) -> bool:
    """Whether an item whose raw text is ``text`` is read as an HTML page (its main text): its
    media type says ``text/html``, or the text looks like HTML; never a JSON result."""
    return record.metadata.content_encoding != "json" and (
        record.metadata.media_type == "text/html" or looks_like_html(text))


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


def chunks_to_embed(chunks: Sequence[IndexChunk], *, max_start_char: int | None,
                    tables: AbstractSet[str] = frozenset()) -> list[IndexChunk]:
    """The chunks of ``chunks`` (one or more items' chunks, in order) that get a vector: those that
    start before ``max_start_char`` (``None``: all) and are not near-duplicates of an earlier kept
    chunk of the same item (:data:`NEAR_DUPLICATE_JACCARD` on :func:`shingles`). An item's chunk 0
    is always kept, so every item is in the vector index (listings and filters find it there).

    ``tables``: ids of items that are tables (:func:`is_table`); of each, at most
    :data:`MAX_EMBEDDED_TABLE_CHUNKS` chunks are candidates, spread evenly over all its chunks
    (:func:`spread`: the first, which holds the column names, the last, and evenly between),
    whatever ``max_start_char``; near-duplicates among them are dropped as above. Only with a
    keyword index, which holds every chunk, may the caller name tables.

    Cost: each chunk's shingles are compared only with the kept chunks it shares a shingle with
    (an inverted map per item), so a page of distinct chunks costs O(shingles) and a repetitive
    result, whose twins are dropped, keeps the map small."""
    counts = _runs(chunks) if tables else {}
    kept: list[IndexChunk] = []
    item_id: str | None = None
    sizes: list[int] = []
    holders: dict[int, list[int]] = {}
    sample: frozenset[int] | None = None
    position = 0
    for chunk in chunks:
        if chunk.item_id != item_id:
            item_id, sizes, holders, position = chunk.item_id, [], {}, 0
            sample = spread(counts[item_id], MAX_EMBEDDED_TABLE_CHUNKS) if item_id in tables else None
        else:
            position += 1
            if sample is not None:
                if position not in sample:
                    continue
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


def _runs(chunks: Sequence[IndexChunk]) -> dict[str, int]:
    """How many chunks each item has in ``chunks`` (its chunks are consecutive)."""
    return {item_id: sum(1 for _ in run) for item_id, run in itertools.groupby(chunk.item_id for chunk in chunks)}


def spread(n: int, k: int) -> frozenset[int]:
    """``k`` of the positions ``0 .. n-1`` evenly spaced, the first and the last among them (all
    ``n`` when ``n <= k``)."""
    if n <= k:
        return frozenset(range(n))
    if k <= 1:
        return frozenset([0])
    return frozenset(step * (n - 1) // (k - 1) for step in range(k))


# -- tables ----------------------------------------------------------------------------------------
MAX_EMBEDDED_TABLE_CHUNKS = 16
"""Chunks of a table (:func:`is_table`) that get a vector at most; every chunk is in the keyword
index, which finds an exact key or value wherever it is (``benchmarks/bench_key_lookup.py``: the
Chinook tables and tau-bench's JSON results, looked up by 259 names, ids and e-mails). What a
query *by meaning* can ask of a table is what it holds (its columns and the kind of its values),
which a sample of its rows says as well as all of them; its rows, one like the next, would
otherwise fill the vector index (Chinook's 3,503 tracks as JSON rows are 1,819 chunks, 302 of them
within ``max_embedded_chars``) and keep the table from being found by meaning for as long as they
take to embed (8-16 s for the Chinook tables and CSV results on 2 cores, ~26 chunks/s:
``benchmarks/bench_store.py``). 16 chunks of 160 tokens (~2,500 tokens: some 30 rows of Track,
85 of Album) embed in under a second there, like the main text of a 1 MB page (3-15 chunks)."""

MIN_TABLE_ROWS = 10
"""Rows a result must have to be a table; a smaller one has few chunks and is embedded whole anyway."""

TABLE_SAMPLE_ROWS = 50
"""Rows (evenly spread over JSON rows; the first ones of a text) read to tell a table."""

TABLE_SNIFF_CHARS = 65_536
"""Characters at the start of a text read to tell delimited rows (CSV, TSV, ``|`` tables)."""

PROSE_VALUE_WORDS = 12
"""Words from which a value reads as prose: rows that hold sentences (search results with their
snippets, reviews, messages) are documents whose every chunk a query by meaning may look for, so
they are no table. A database value (a name, an address, a title, a list of composers) is shorter."""

MAX_PROSE_ROWS = 0.1
"""Share of sampled rows with a prose value (:data:`PROSE_VALUE_WORDS`) above which rows are no table."""

_DELIMITERS = (",", "\t", "|", ";")


def is_table(record: ItemRecord, content: Any) -> bool:
    """Whether an item is a table, rows of data whose every chunk looks like the next: at least
    :data:`MIN_TABLE_ROWS` rows, at most :data:`MAX_PROSE_ROWS` of the sampled ones holding prose
    (:data:`PROSE_VALUE_WORDS`), in one of these forms:

    - JSON (stored as JSON, or text that parses as JSON): a list of objects or of arrays (a
      database result: ``SELECT`` rows as dicts or tuples), ``{"columns": [...], "rows": [...]}``,
      or an object with exactly one list, of such rows (``{"rows": [...], "count": 830}``);
    - JSON lines: text whose first lines each parse as a JSON object;
    - delimited text (CSV, TSV, ``|`` or ``;`` separated): the first lines of the text
      (:data:`TABLE_SNIFF_CHARS`) have one field count, at least 2, with at least two named
      header fields, under one delimiter.

    An HTML page is no table (its main text is indexed). Reads a bounded sample, except that JSON
    text is parsed whole."""
    meta = record.metadata
    if meta.content_encoding == "json":
        return _json_table(content)
    if meta.media_type == "text/html":
        return False
    text = raw_text(content, meta.content_encoding, binary=None)
    if not text or not text.strip():
        return False
    if text.lstrip()[:1] in ("[", "{"):
        try:
            return _json_table(json.loads(text))
        except (ValueError, RecursionError):
            lines = _json_lines(text)
            if lines is not None:
                return _data_rows(lines)
    if looks_like_html(text):
        return False
    return _delimited_table(text)


def _json_table(data: Any) -> bool:
    """Whether JSON ``data`` is rows (see :func:`is_table`)."""
    if isinstance(data, dict):
        if isinstance(data.get("columns"), list) and isinstance(data.get("rows"), list):
            return _data_rows(data["rows"])
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(lists) != 1:
            return False
        data = lists[0]
    return isinstance(data, list) and _data_rows(data)


def _json_lines(text: str) -> list[Any] | None:
    """The first :data:`TABLE_SAMPLE_ROWS` lines of ``text`` as JSON objects, or ``None`` if one is not."""
    rows = []
    for line in itertools.islice((line for line in io.StringIO(text) if line.strip()), TABLE_SAMPLE_ROWS):
        try:
            row = json.loads(line)
        except (ValueError, RecursionError):
            return None
        if not isinstance(row, dict):
            return None
        rows.append(row)
    return rows


def _data_rows(rows: list[Any]) -> bool:
    """Whether ``rows`` are at least :data:`MIN_TABLE_ROWS` rows of data: all objects or all
    arrays (in an even sample), few of them holding prose."""
    if len(rows) < MIN_TABLE_ROWS:
        return False
    sample = [rows[n] for n in sorted(spread(len(rows), TABLE_SAMPLE_ROWS))]
    if not (all(isinstance(row, dict) for row in sample) or all(isinstance(row, list) for row in sample)):
        return False
    return _few_prose(sample)


def _few_prose(rows: Sequence[Any]) -> bool:
    """Whether at most :data:`MAX_PROSE_ROWS` of ``rows`` hold a value of :data:`PROSE_VALUE_WORDS` words."""
    prose = sum(any(len(value.split()) >= PROSE_VALUE_WORDS for value in _strings(row)) for row in rows)
    return prose <= MAX_PROSE_ROWS * len(rows)


def _strings(value: Any, depth: int = 0) -> Iterator[str]:
    """The strings of a JSON value (nested up to 8 levels)."""
    if isinstance(value, str):
        yield value
    elif depth < 8 and isinstance(value, dict | list):
        for child in value.values() if isinstance(value, dict) else value:
            yield from _strings(child, depth + 1)


def _delimited_table(text: str) -> bool:
    """Whether ``text`` starts with delimited rows (see :func:`is_table`)."""
    head = text[:TABLE_SNIFF_CHARS]
    if len(text) > TABLE_SNIFF_CHARS:
        head = head[: head.rfind("\n") + 1]  # whole lines only
    lines = [line for line in head.splitlines(keepends=True) if line.strip()]
    if len(lines) <= MIN_TABLE_ROWS:
        return False
    for delimiter in _DELIMITERS:
        if delimiter not in lines[0]:
            continue
        try:
            records = list(itertools.islice(csv.reader(lines, delimiter=delimiter), TABLE_SAMPLE_ROWS + 1))
        except csv.Error:
            continue
        header, body = records[0], records[1:]
        if (len(header) >= 2 and sum(bool(field.strip()) for field in header) >= 2 and len(body) >= MIN_TABLE_ROWS
                and all(len(row) == len(header) for row in body)):
            return _few_prose(body)
    return False
