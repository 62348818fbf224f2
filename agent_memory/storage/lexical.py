"""A BM25 keyword index beside the vector index, in SQLite FTS5: the file backend's (one file) and
the in-process backend's (a database in this process's memory, SQLite's ``memdb`` VFS).

Dense embeddings are strong on paraphrase and multi-hop questions, BM25 on names, numbers and rare
words; fused, they beat either alone (on HotpotQA, all paragraphs pooled, recall@5: .775 with
all-MiniLM-L6-v2, .750 with bm25s, .783 fused by reciprocal rank fusion, k=60). The index is one
SQLite file (``index/lexical.sqlite3``): persistent, incremental, safe for several processes
(SQLite's own locking), with filters (type, source, tags, time) applied in SQL. Scores are FTS5's
``bm25()`` (Robertson-Spärck Jones BM25, k1=1.2, b=0.75), negated so higher is better. Text is
tokenised by FTS5's ``porter unicode61`` tokenizer (case-folded, stemmed).

FTS5 scores every chunk that contains any query term, so a query's cost grows with the document
frequencies of its terms, and in a large memory with the memory: ~2 µs per posting at 123k
chunks, 40-120 ms for a HotpotQA question. A search may be given a budget of postings
(``MemoryConfig.keyword_max_postings``): the query's words are looked up in the index's
vocabulary (``fts5vocab``, after FTS5's own tokenizer) and taken rarest first within the budget
(:func:`within_budget`).

Each thread has its own connection (SQLite connections are not shared across threads); every
connection is remembered so that :meth:`LexicalIndex.close` closes all of them. A file that
SQLite calls "not a database" or "malformed" is damaged beyond use: :meth:`LexicalIndex.destroy`
deletes it so that it can be created again and refilled from ``items.jsonl``.

An in-process index (:meth:`LexicalIndex.in_memory`) lives in SQLite's ``memdb`` VFS
(https://sqlite.org/src/file/src/memdb.c, SQLite 3.36+): one database that every connection of the
process opening the same name shares, with SQLite's usual locking (not the shared-cache mode),
kept while a connection is open: the in-process backend keeps one open for as long as its data.

A read-only index (``LexicalIndex(path, read_only=True)``, for a memory on a read-only mount) is
opened with SQLite's ``mode=ro`` URI, or, where SQLite cannot create the WAL's shared-memory file
beside it (a read-only directory), ``immutable=1``: nothing is written, and writes raise
:class:`~agent_memory.errors.KeywordIndexError`.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from agent_memory.errors import KeywordIndexError
from agent_memory.storage.keyword import is_corruption, query_words, within_budget
from agent_memory.storage.sqlite_wal import use_wal
from agent_memory.storage.vector import ChunkHit, IndexChunk
from agent_memory.models.items import MemoryCriteria

__all__ = ["MAX_CACHED_TERMS", "LexicalIndex", "fts_query"]

MAX_CACHED_TERMS = 100_000
"""Most terms whose document frequency an index keeps between changes (past it, no more are
kept until the next change empties the cache)."""


_TOKENIZER = "porter unicode61"
_SCHEMA = f"""
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
CREATE INDEX IF NOT EXISTS chunk_meta_listing ON chunk_meta(chunk_index, timestamp_s);
CREATE VIRTUAL TABLE IF NOT EXISTS chunk_text USING fts5(text, tokenize='{_TOKENIZER}');
"""
_BUSY_TIMEOUT_S = 60.0
"""How long a connection waits for another's lock (SQLite's busy timeout), in seconds."""

_SESSION_SCHEMA = f"""
CREATE VIRTUAL TABLE IF NOT EXISTS temp.chunk_vocab USING fts5vocab(main, chunk_text, 'row');
CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_words USING fts5(word, tokenize='{_TOKENIZER}');
CREATE VIRTUAL TABLE IF NOT EXISTS temp.query_terms USING fts5vocab(temp, query_words, 'instance');
"""
"""Per connection: the index's vocabulary (document frequency of each stemmed term), and a
scratch table through which query words pass FTS5's own tokenizer, so that each word's stemmed
terms are exactly the ones the index holds."""


def fts_query(words: Sequence[str]) -> str | None:
    """An FTS5 ``MATCH`` expression: ``words`` (see :func:`query_words`) joined by OR, each quoted
    so no FTS5 syntax leaks in. ``None`` when there is no word."""
    if not words:
        return None
    return " OR ".join(f'"{word}"' for word in words)


class LexicalIndex:
    """BM25 over the same chunks as the vector index.

    Args:
        path: the SQLite file; its directory is created (not when ``read_only``).
        read_only: open an existing file without writing anything (see the module docstring).

    Raises:
        KeywordIndexError: if SQLite lacks FTS5 or the file cannot be opened (read-only: also
            if it does not exist).
    """

    def __init__(self, path: Path, *, read_only: bool = False, _memdb: str | None = None) -> None:
        self.path = path
        self.read_only = read_only
        self._memdb = _memdb
        """The ``memdb`` URI of an in-process index (:meth:`in_memory`); ``None``: the file ``path``."""
        if _memdb is None and read_only and not path.is_file():
            raise KeywordIndexError(f"there is no keyword index at {path} to read")
        if _memdb is None and not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        self._local = threading.local()
        self._all: list[sqlite3.Connection] = []
        self._all_lock = threading.Lock()
        self._frequencies: dict[str, int] = {}
        """Document frequency of each term looked up since the index last changed (see
        :meth:`_known_frequencies`): reading one from ``fts5vocab`` walks the term's whole doclist,
        ~0.15 ms for a common word at 123k chunks, and the commonest words recur in every query."""
        self._frequencies_generation = 0
        """Bumped whenever :attr:`_frequencies` is emptied: a lookup that began before does not
        put what it read into the emptied cache."""
        self._data_versions: dict[int, int] = {}
        """``PRAGMA data_version`` of each connection (by ``id``) when it last looked at the cache."""
        self._frequencies_lock = threading.Lock()
        try:
            with self._connect() as conn:
                conn.executescript("SELECT count(*) FROM chunk_meta" if read_only else _SCHEMA)
        except sqlite3.Error as exc:
            self.close()
            raise KeywordIndexError(
                f"cannot create the keyword index at {path}: {exc}{_HINT if is_corruption(exc) else ''}"
            ) from exc
        except KeywordIndexError:
            self.close()
            raise

    @classmethod
    def in_memory(cls, name: str) -> tuple[LexicalIndex, sqlite3.Connection]:
        """An index in this process's memory under ``name`` (every index of the process opened
        with the same name shares its data), and a connection that keeps the data alive: SQLite
        frees a ``memdb`` database when its last connection closes, and :meth:`close` closes the
        index's own. The caller holds the keeper for as long as the data must live.

        Raises:
            KeywordIndexError: if this SQLite lacks the ``memdb`` VFS (before 3.36) or FTS5.
        """
        uri = f"file:/{quote(name, safe='')}?vfs=memdb"
        try:
            keeper = sqlite3.connect(uri, uri=True, check_same_thread=False)
        except sqlite3.Error as exc:
            raise KeywordIndexError(f"SQLite {sqlite3.sqlite_version} cannot keep an index in memory: {exc}") from exc
        return cls(Path(name), _memdb=uri), keeper

    def _connect(self) -> sqlite3.Connection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            try:
                # check_same_thread=False only so that close() may close every thread's connection;
                # each connection is still used by the one thread that opened it.
                if self._memdb is not None:
                    conn = sqlite3.connect(self._memdb, uri=True, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
                elif self.read_only:
                    conn = self._connect_read_only()
                else:
                    conn = sqlite3.connect(self.path, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
            except sqlite3.Error as exc:
                raise KeywordIndexError(f"cannot open the keyword index at {self.path}: {exc}") from exc
            with self._all_lock:
                self._all.append(conn)
            self._local.conn = conn
            try:
                if not self.read_only and self._memdb is None:
                    use_wal(conn, _BUSY_TIMEOUT_S)
                conn.executescript(_SESSION_SCHEMA)
            except sqlite3.Error as exc:
                raise KeywordIndexError(
                    f"cannot open the keyword index at {self.path}: {exc}{_HINT if is_corruption(exc) else ''}"
                ) from exc
        return conn

    def _connect_read_only(self) -> sqlite3.Connection:
        """A connection that never writes the file: ``mode=ro`` (it reads a ``-wal`` file a
        writer left), else ``immutable=1`` (SQLite cannot open a WAL database ``mode=ro`` when it
        cannot create the ``-shm`` file beside it, as in a read-only directory)."""
        uri = self.path.resolve().as_uri()
        conn = sqlite3.connect(f"{uri}?mode=ro", uri=True, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)
        try:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return conn
        except sqlite3.OperationalError:
            conn.close()
        return sqlite3.connect(f"{uri}?immutable=1", uri=True, timeout=_BUSY_TIMEOUT_S, check_same_thread=False)

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        try:
            return self._connect().execute(sql, params).fetchall()
        except sqlite3.Error as exc:
            raise KeywordIndexError(f"keyword index read failed: {exc}{_HINT if is_corruption(exc) else ''}") from exc

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
            raise KeywordIndexError(f"keyword index write failed: {exc}{_HINT if is_corruption(exc) else ''}") from exc
        finally:
            with self._frequencies_lock:
                self._forget_frequencies()

    def search(
        self, text: str, criteria: MemoryCriteria, *, n_chunks: int, max_postings: int | None = None
    ) -> list[ChunkHit]:
        """The ``n_chunks`` chunks with the highest BM25 score for ``text`` among items matching
        ``criteria``'s filters, best first (``score`` = -bm25, higher is better).

        ``max_postings``: the words searched are cut to this budget of postings by
        :func:`within_budget` (the commonest left out); ``None``: every word of ``text``."""
        words = query_words(text)
        if max_postings is not None and words:
            words = within_budget(self.postings(words), max_postings)
        match = fts_query(words)
        if match is None:
            return []
        where, params = _filters(criteria)
        # The best rows by score first (joined with chunk_meta only to filter), their text and
        # facts after: reading the text of every matching row (thousands in a large memory)
        # before the sort doubled the cost (benchmarks/bench_scale.py at 100k items: 15 -> 7 ms).
        # Equal scores are ordered by rowid (the order chunks were written).
        best = (
            "SELECT chunk_text.rowid AS row, bm25(chunk_text) AS score FROM chunk_text"
            + (" JOIN chunk_meta AS m ON m.rowid = chunk_text.rowid" if where else "")
            + f" WHERE chunk_text MATCH ?{where} ORDER BY score, row LIMIT ?"
        )
        sql = (
            "SELECT m.item_id, m.chunk_index, m.start_char, m.header_chars, t.text, best.score"
            f" FROM ({best}) AS best JOIN chunk_meta AS m ON m.rowid = best.row JOIN chunk_text AS t ON t.rowid = best.row"
            " ORDER BY best.score, best.row"
        )
        rows = self._read(sql, (match, *params, n_chunks))
        return [
            ChunkHit(item_id=item_id, chunk_index=index, body=body[header:], start_char=start, score=-float(bm25))
            for item_id, index, start, header, body, bm25 in rows
        ]

    def postings(self, words: Sequence[str]) -> list[tuple[str, int]]:
        """``(word, postings)`` for each word: the sum of the document frequencies (chunks
        containing it) of the terms FTS5's tokenizer makes of the word; 0 when one of them is in
        no chunk (a quoted word of several terms is a phrase, which then matches nothing).

        Raises:
            KeywordIndexError: if SQLite fails.
        """
        conn = self._connect()
        try:
            generation = self._known_frequencies(conn)
            with conn:
                conn.executemany(
                    "INSERT INTO temp.query_words (rowid, word) VALUES (?, ?)",
                    [(n, word) for n, word in enumerate(words)],
                )
                instances = conn.execute("SELECT doc, term FROM temp.query_terms").fetchall()
                conn.execute("DELETE FROM temp.query_words")
            with self._frequencies_lock:
                frequency = {term: self._frequencies[term] for _, term in instances if term in self._frequencies}
            looked_up: dict[str, int] = {}
            for _, term in instances:
                if term not in frequency:
                    # one lookup per term: fts5vocab answers "term = ?" from the term's own doclist
                    row = conn.execute("SELECT doc FROM temp.chunk_vocab WHERE term = ?", (term,)).fetchone()
                    frequency[term] = looked_up[term] = int(row[0]) if row else 0
            with self._frequencies_lock:
                if generation == self._frequencies_generation and len(self._frequencies) < MAX_CACHED_TERMS:
                    self._frequencies.update(looked_up)
        except sqlite3.Error as exc:
            raise KeywordIndexError(f"keyword index read failed: {exc}{_HINT if is_corruption(exc) else ''}") from exc
        terms: dict[int, list[int]] = {}
        for n, term in instances:
            terms.setdefault(int(n), []).append(frequency[term])
        return [
            (word, sum(counts) if (counts := terms.get(n)) and all(counts) else 0) for n, word in enumerate(words)
        ]

    def _known_frequencies(self, conn: sqlite3.Connection) -> int:
        """Empty the cache of document frequencies if the index changed since ``conn`` last looked
        (a commit by any other connection, of this process or another, changes its ``PRAGMA
        data_version``; this object's own writes empty it themselves), and return the cache's
        generation."""
        version = int(conn.execute("PRAGMA data_version").fetchone()[0])
        with self._frequencies_lock:
            if self._data_versions.get(id(conn)) != version:
                self._data_versions[id(conn)] = version
                self._forget_frequencies()
            return self._frequencies_generation

    def _forget_frequencies(self) -> None:
        """Empty the cache of document frequencies (under ``_frequencies_lock``)."""
        self._frequencies.clear()
        self._frequencies_generation += 1

    def passing(self, chunk_ids: Sequence[str], criteria: MemoryCriteria) -> set[str]:
        """Which of ``chunk_ids`` (``<item_id>:<chunk_index>``) belong to items matching
        ``criteria``'s filters (its text is ignored); ids this index lacks do not pass. One
        lookup by primary key per id: O(len(chunk_ids)), whatever the memory's size.

        Raises:
            KeywordIndexError: if SQLite fails.
        """
        if not chunk_ids:
            return set()
        where, params = _filters(criteria)
        sql = f"SELECT m.chunk_id FROM chunk_meta AS m WHERE m.chunk_id IN (SELECT value FROM json_each(?)){where}"
        return {row[0] for row in self._read(sql, (json.dumps(list(chunk_ids)), *params))}

    def list_items(self, criteria: MemoryCriteria, *, limit: int) -> list[tuple[str, float]]:
        """Up to ``limit`` items matching ``criteria``'s filters (its text is ignored), newest
        first, as (item id, Unix time in seconds). SQLite orders and limits along
        ``chunk_meta_listing``, so a listing costs O(limit) (O(limit / share of items passing
        the filters) with filters), not O(items)."""
        where, params = _filters(criteria)
        sql = (
            "SELECT m.item_id, m.timestamp_s FROM chunk_meta AS m WHERE m.chunk_index = 0"
            f"{where} ORDER BY m.timestamp_s DESC, m.rowid DESC LIMIT ?"
        )
        return [(item_id, float(ts)) for item_id, ts in self._read(sql, (*params, limit))]

    def item_ids(self) -> set[str]:
        """Ids of the items that have chunks in this index."""
        return {row[0] for row in self._read("SELECT DISTINCT item_id FROM chunk_meta")}

    def delete_items(self, item_ids: Sequence[str]) -> None:
        """Remove every chunk of these items."""
        self._write(
            lambda conn: [
                (
                    conn.executemany(
                        "DELETE FROM chunk_text WHERE rowid = ?",
                        conn.execute("SELECT rowid FROM chunk_meta WHERE item_id = ?", (item_id,)).fetchall(),
                    ),
                    conn.execute("DELETE FROM chunk_meta WHERE item_id = ?", (item_id,)),
                )
                for item_id in item_ids
            ]
        )

    def reset(self) -> None:
        """Remove everything.

        Raises:
            KeywordIndexError: if SQLite fails (``is_corruption(exc)`` tells a damaged file).
        """
        self._write(lambda conn: (conn.execute("DELETE FROM chunk_meta"), conn.execute("DELETE FROM chunk_text")))

    def _write(self, fn: Any) -> None:
        conn = self._connect()
        try:
            with conn:
                fn(conn)
        except sqlite3.Error as exc:
            raise KeywordIndexError(f"keyword index write failed: {exc}{_HINT if is_corruption(exc) else ''}") from exc
        finally:
            with self._frequencies_lock:
                self._forget_frequencies()

    def close(self) -> None:
        """Close every thread's connection (idempotent); the index reopens on next use."""
        with self._all_lock:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except sqlite3.Error:  # pragma: no cover - closing a broken connection
                pass
        self._local = threading.local()
        with self._frequencies_lock:
            self._data_versions.clear()
            self._forget_frequencies()

    def destroy(self) -> None:
        """Close every connection and delete the file (with its ``-wal`` and ``-shm`` files), so
        that a new :class:`LexicalIndex` on the path starts empty. For a damaged file.

        Raises:
            KeywordIndexError: if a file cannot be deleted.
        """
        self.close()
        self.delete_files(self.path)

    @staticmethod
    def delete_files(path: Path) -> None:
        """Delete the index file at ``path`` with its ``-wal``, ``-shm`` and ``-journal`` files
        (for a file too damaged to open; no connection may be open on it).

        Raises:
            KeywordIndexError: if a file cannot be deleted.
        """
        for suffix in ("", "-wal", "-shm", "-journal"):
            try:
                Path(str(path) + suffix).unlink(missing_ok=True)
            except OSError as exc:
                raise KeywordIndexError(f"cannot delete the damaged keyword index {path}: {exc}") from exc


_HINT = " (the keyword index file is damaged; the next query or AgentMemory.rebuild_index() recreates it)"


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
