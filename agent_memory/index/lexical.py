"""A BM25 keyword index beside the vector index, in SQLite FTS5.

Dense embeddings are strong on paraphrase and multi-hop questions, BM25 on names, numbers and
rare words; fused, they beat either alone (BASELINES.md: HotpotQA recall@5 .775 dense, .750
BM25). The index is one SQLite file (``index/lexical.sqlite3``): persistent, incremental, safe for
several processes (SQLite's own locking), with filters (type, source, tags, time) applied in SQL.
Scores are FTS5's ``bm25()`` (Robertson-Spärck Jones BM25, k1=1.2, b=0.75), negated so higher
is better. Text is tokenised by FTS5's ``porter unicode61`` tokenizer (case-folded, stemmed).
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent_memory.errors import VectorIndexError
from agent_memory.index.vector import ChunkHit, IndexChunk
from agent_memory.models.items import MemoryCriteria

__all__ = ["LexicalIndex", "fts_query"]

_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its of on or she that the their "
    "them they this to was were what when where which who whom why with you your how did do does "
    "than then there these those which while will would can could should into about after before".split()
)
_SCHEMA = """
CREATE TABLE IF NOT EXISTS chunk_meta (
    rowid INTEGER PRIMARY KEY,
    chunk_id TEXT UNIQUE NOT NULL,
    item_id TEXT NOT NULL,
    chunk_index INTEGER NOT NULL,
    start_char INTEGER NOT NULL,
    header_chars INTEGER NOT NULL,
    type TEXT NOT NULL,
    source TEXT NOT NULL,
    timestamp_s REAL NOT NULL,
    tags TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS chunk_meta_item ON chunk_meta(item_id);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_text USING fts5(text, tokenize='porter unicode61');
"""


def fts_query(text: str) -> str | None:
    """An FTS5 ``MATCH`` expression: the distinct non-stopword terms of ``text`` joined by OR
    (each quoted, so no FTS5 syntax leaks in). ``None`` when ``text`` has no usable term."""
    terms: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word not in _STOPWORDS and word not in terms:
            terms.append(word)
    if not terms:
        return None
    return " OR ".join(f'"{term}"' for term in terms[:64])


class LexicalIndex:
    """BM25 over the same chunks as the vector index.

    Args:
        path: the SQLite file; its directory is created.

    Raises:
        VectorIndexError: if SQLite lacks FTS5 or the file cannot be opened.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        with self._connect() as conn:
            try:
                conn.executescript(_SCHEMA)
            except sqlite3.Error as exc:
                raise VectorIndexError(f"cannot create the keyword index at {path}: {exc}") from exc

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                conn = sqlite3.connect(self.path, timeout=60)
                conn.execute("PRAGMA journal_mode=WAL")
            except sqlite3.Error as exc:
                raise VectorIndexError(f"cannot open the keyword index at {self.path}: {exc}") from exc
            self._local.conn = conn
        return conn

    def add(self, chunks: Sequence[IndexChunk]) -> None:
        """Add or replace chunks (keyed by item id and chunk index)."""
        conn = self._connect()
        try:
            with conn:
                for chunk in chunks:
                    chunk_id = f"{chunk.item_id}:{chunk.chunk_index}"
                    row = conn.execute("SELECT rowid FROM chunk_meta WHERE chunk_id = ?", (chunk_id,)).fetchone()
                    if row is not None:
                        conn.execute("DELETE FROM chunk_text WHERE rowid = ?", row)
                        conn.execute("DELETE FROM chunk_meta WHERE rowid = ?", row)
                    cursor = conn.execute(
                        "INSERT INTO chunk_meta (chunk_id, item_id, chunk_index, start_char, header_chars, type,"
                        " source, timestamp_s, tags) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (
                            chunk_id, chunk.item_id, chunk.chunk_index, chunk.start_char, chunk.header_chars,
                            chunk.type, chunk.source, chunk.timestamp_s, "".join(f"|{t}|" for t in chunk.tags),
                        ),
                    )
                    conn.execute("INSERT INTO chunk_text (rowid, text) VALUES (?, ?)", (cursor.lastrowid, chunk.text))
        except sqlite3.Error as exc:
            raise VectorIndexError(f"keyword index write failed: {exc}") from exc

    def search(self, text: str, criteria: MemoryCriteria, *, n_chunks: int) -> list[ChunkHit]:
        """The ``n_chunks`` chunks with the highest BM25 score for ``text`` among items matching
        ``criteria``'s filters, best first (``score`` = -bm25, higher is better)."""
        match = fts_query(text)
        if match is None:
            return []
        where, params = _filters(criteria)
        sql = (
            "SELECT m.item_id, m.chunk_index, m.start_char, m.header_chars, chunk_text.text, bm25(chunk_text)"
            " FROM chunk_text JOIN chunk_meta AS m ON m.rowid = chunk_text.rowid"
            f" WHERE chunk_text MATCH ?{where} ORDER BY bm25(chunk_text) LIMIT ?"
        )
        try:
            rows = self._connect().execute(sql, (match, *params, n_chunks)).fetchall()
        except sqlite3.Error as exc:
            raise VectorIndexError(f"keyword search failed: {exc}") from exc
        return [
            ChunkHit(item_id=item_id, chunk_index=index, body=body[header:], start_char=start, score=-float(bm25))
            for item_id, index, start, header, body, bm25 in rows
        ]

    def item_ids(self) -> set[str]:
        """Ids of the items that have chunks in this index."""
        rows = self._connect().execute("SELECT DISTINCT item_id FROM chunk_meta").fetchall()
        return {row[0] for row in rows}

    def delete_items(self, item_ids: Sequence[str]) -> None:
        """Remove every chunk of these items."""
        conn = self._connect()
        with conn:
            for item_id in item_ids:
                rows = conn.execute("SELECT rowid FROM chunk_meta WHERE item_id = ?", (item_id,)).fetchall()
                conn.executemany("DELETE FROM chunk_text WHERE rowid = ?", rows)
                conn.execute("DELETE FROM chunk_meta WHERE item_id = ?", (item_id,))

    def reset(self) -> None:
        """Remove everything."""
        conn = self._connect()
        with conn:
            conn.execute("DELETE FROM chunk_meta")
            conn.execute("DELETE FROM chunk_text")

    def close(self) -> None:
        """Close this thread's connection."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


def _filters(criteria: MemoryCriteria) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    if criteria.type is not None:
        clauses.append("m.type = ?")
        params.append(criteria.type)
    if criteria.source is not None:
        clauses.append("m.source = ?")
        params.append(criteria.source)
    for tag in criteria.tags:
        clauses.append("instr(m.tags, ?) > 0")
        params.append(f"|{tag}|")
    if criteria.since is not None:
        clauses.append("m.timestamp_s >= ?")
        params.append(criteria.since.timestamp())
    if criteria.until is not None:
        clauses.append("m.timestamp_s <= ?")
        params.append(criteria.until.timestamp())
    return "".join(f" AND {clause}" for clause in clauses), params
