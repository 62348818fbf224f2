"""Postgres search: chunks with their embeddings (pgvector) and their words (full-text search).

``am_vectors`` holds each chunk's embedding in a ``vector(384)`` column with an HNSW index for
cosine distance; ``am_keywords`` holds its ``tsvector`` (the ``english`` configuration: lower case,
stop words out, Snowball stems, as the file backend's FTS5 ``porter`` tokenizer) with a GIN index,
and the document frequency of every lexeme (kept with each write) for BM25.
Both carry the item facts a query filters on, and every filter is SQL in the same statement
(:func:`criteria_sql`), so a filter costs nothing extra and never starves the ranking.

The HNSW index serves every agent of the database: a search asks it for the nearest chunks of one
agent (``WHERE agent_id = ...``) with ``hnsw.ef_search`` (the candidates it keeps) at twice the
number wanted, at least :data:`MIN_EF_SEARCH`. Candidates that another agent owns, that fail a
filter, or whose rows were deleted and not vacuumed yet are dropped after the scan, so when fewer
than wanted remain the search asks again with four times the candidates, up to pgvector's
:data:`MAX_EF_SEARCH`; when even that yields too few while the agent has more matching chunks,
it answers from an exact scan of them (:data:`EXACT_FALLBACK`), so a small agent in a large
database still gets its best chunks. Keyword hits are ranked by BM25 (:meth:`PostgresKeywordIndex.search`);
fusion with the dense ranking uses ranks only (:mod:`agent_memory.index.fusion`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from agent_memory.config import MemoryConfig
from agent_memory.errors import KeywordIndexError, StoreError, VectorIndexError
from agent_memory.storage.keyword import query_words, within_budget
from agent_memory.storage.vector import ChunkHit, ChunkVectors, IndexChunk, as_rows
from agent_memory.models.items import MemoryCriteria
from agent_memory.storage.postgres.database import EMBEDDING_DIMENSIONS, Database
from agent_memory.storage.postgres.text import pg_text, pg_texts

__all__ = ["EXACT_FALLBACK", "TEXT_SEARCH_CONFIG", "PostgresKeywordIndex", "PostgresVectorIndex", "criteria_sql"]

TEXT_SEARCH_CONFIG = "english"
"""The Postgres text search configuration of the keyword index."""

MIN_EF_SEARCH = 100
"""Least ``hnsw.ef_search`` of a vector search (the candidates HNSW keeps while it walks)."""

MAX_EF_SEARCH = 1_000
"""Most ``hnsw.ef_search`` (pgvector's limit)."""

EXACT_FALLBACK = True
"""A vector search that the HNSW index answers with fewer chunks than wanted while the agent has
more matching chunks is answered again by an exact scan of them."""

ADD_BATCH = 256
"""Chunks written per statement batch."""

BM25_K1 = 1.2
"""BM25's term-frequency saturation (the usual value; with each word counted once per chunk it only
scales the length normalisation)."""

BM25_B = 0.75
"""BM25's length normalisation (the usual value)."""


def criteria_sql(criteria: MemoryCriteria) -> tuple[str, list[Any]]:
    """``criteria``'s filters (type, source, tags, time range; not its text) as SQL conditions to
    put after ``WHERE agent_id = %s``, and their parameters (texts as the columns keep them:
    :func:`~agent_memory.storage.postgres.text.pg_text`)."""
    clauses: list[str] = []
    params: list[Any] = []
    if criteria.type is not None:
        clauses.append("type = %s")
        params.append(criteria.type)
    if criteria.source is not None:
        clauses.append("source = %s")
        params.append(pg_text(criteria.source))
    if criteria.tags:
        clauses.append("tags @> %s")
        params.append(pg_texts(criteria.tags))
    if criteria.since is not None:
        clauses.append("timestamp_s >= %s")
        params.append(criteria.since.timestamp())
    if criteria.until is not None:
        clauses.append("timestamp_s <= %s")
        params.append(criteria.until.timestamp())
    return "".join(f" AND {clause}" for clause in clauses), params


def _split(chunk_ids: Sequence[str]) -> tuple[list[str], list[int]]:
    items, indexes = [], []
    for chunk_id in chunk_ids:
        item_id, _, index = chunk_id.rpartition(":")
        if item_id and index.isdigit():
            items.append(item_id)
            indexes.append(int(index))
    return items, indexes


_META = "item_id, chunk_index, start_char, header_chars, type, source, timestamp_s, tags, text"


def _meta_row(agent_id: str, chunk: IndexChunk) -> tuple[Any, ...]:
    """The chunk's columns, its texts as a ``text`` column can hold them (NUL replaced: a tool's
    binary-ish output is indexed like any other text)."""
    return (agent_id, chunk.item_id, chunk.chunk_index, chunk.start_char, chunk.header_chars, chunk.type,
            pg_text(chunk.source), chunk.timestamp_s, pg_texts(chunk.tags), pg_text(chunk.text))


class PostgresVectorIndex:
    """:class:`~agent_memory.storage.vector.VectorIndex` of one agent in ``am_vectors``: the
    vectors the library hands it, :data:`EMBEDDING_DIMENSIONS` floats each.

    Args:
        database: the database.
        agent_id: the agent.
        config: the memory's settings (not read: the library embeds).
    """

    def __init__(self, database: Database, agent_id: str, config: MemoryConfig) -> None:
        self.database = database
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"PostgresVectorIndex({self.agent_id!r})"

    def add(self, chunks: Sequence[IndexChunk], vectors: ChunkVectors) -> None:
        """Upsert chunks with their vectors.

        Raises:
            VectorIndexError: if the write fails, if ``vectors`` has not one row per chunk, or
                its rows are not :data:`EMBEDDING_DIMENSIONS` long (the column's type: another
                model needs another database).
        """
        rows = as_rows(vectors)
        if len(rows) != len(chunks):
            raise VectorIndexError(f"{len(chunks)} chunks came with {len(rows)} vectors")
        if len(rows) and rows.shape[1] != EMBEDDING_DIMENSIONS:
            raise VectorIndexError(f"the embedding model gives {rows.shape[1]} dimensions; the Postgres backend "
                                   f"keeps {EMBEDDING_DIMENSIONS}")
        for start in range(0, len(chunks), ADD_BATCH):
            batch = list(chunks[start : start + ADD_BATCH])
            values = [(*_meta_row(self.agent_id, chunk), vector)
                      for chunk, vector in zip(batch, rows[start : start + ADD_BATCH], strict=True)]
            try:
                with self.database.transaction() as conn, conn.cursor() as cursor:
                    cursor.executemany(
                        f"INSERT INTO am_vectors (agent_id, {_META}, embedding) VALUES "
                        "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT (agent_id, item_id, chunk_index) DO "
                        "UPDATE SET start_char = EXCLUDED.start_char, header_chars = EXCLUDED.header_chars, "
                        "type = EXCLUDED.type, source = EXCLUDED.source, timestamp_s = EXCLUDED.timestamp_s, "
                        "tags = EXCLUDED.tags, text = EXCLUDED.text, embedding = EXCLUDED.embedding", values)
            except StoreError as exc:
                raise VectorIndexError(f"vector index write failed: {exc}") from exc

    def search(
        self, vector: Sequence[float], criteria: MemoryCriteria, *, n_chunks: int,
        passing: Callable[[Sequence[str]], set[str]] | None = None,
    ) -> list[ChunkHit]:
        """The ``n_chunks`` chunks of this agent closest to ``vector`` among those matching
        ``criteria``'s filters (translated to SQL in the same statement; ``passing`` is not
        needed), best first (see the module docstring for the HNSW search and its exact fallback).

        Raises:
            VectorIndexError: if the query fails.
        """
        query = np.asarray(vector, dtype=np.float32)
        where, params = criteria_sql(criteria)
        columns = "item_id, chunk_index, text, header_chars, start_char, embedding <=> %s AS distance"
        try:
            with self.database.transaction() as conn:
                ef_search = min(MAX_EF_SEARCH, max(MIN_EF_SEARCH, 2 * n_chunks))
                while True:  # rows of other agents, filtered out, and dead rows take candidates' places
                    conn.execute("SELECT set_config('hnsw.ef_search', %s, true)", (str(ef_search),))
                    rows = conn.execute(
                        f"SELECT {columns} FROM am_vectors WHERE agent_id = %s{where} ORDER BY embedding <=> %s LIMIT %s",
                        (query, self.agent_id, *params, query, n_chunks)).fetchall()
                    if len(rows) >= n_chunks or ef_search >= MAX_EF_SEARCH:
                        break
                    ef_search = min(MAX_EF_SEARCH, 4 * ef_search)
                if EXACT_FALLBACK and len(rows) < n_chunks:
                    row = conn.execute(f"SELECT count(*) FROM am_vectors WHERE agent_id = %s{where}",
                                       (self.agent_id, *params)).fetchone()
                    if row is not None and int(row[0]) > len(rows):
                        rows = conn.execute(
                            f"WITH candidates AS MATERIALIZED (SELECT * FROM am_vectors WHERE agent_id = %s{where}) "
                            f"SELECT {columns} FROM candidates ORDER BY distance LIMIT %s",
                            (self.agent_id, *params, query, n_chunks)).fetchall()
        except StoreError as exc:
            raise VectorIndexError(f"vector search failed: {exc}") from exc
        return [ChunkHit(item_id=item_id, chunk_index=int(index), body=body[int(header):], start_char=int(start),
                         score=1.0 - float(distance))
                for item_id, index, body, header, start, distance in rows]

    def chunk_vector(self, item_id: str, chunk_index: int) -> list[float] | None:
        try:
            with self.database.connection() as conn:
                row = conn.execute("SELECT embedding FROM am_vectors WHERE agent_id = %s AND item_id = %s "
                                   "AND chunk_index = %s", (self.agent_id, item_id, chunk_index)).fetchone()
        except StoreError as exc:
            raise VectorIndexError(f"vector index read failed: {exc}") from exc
        if row is None:
            return None
        stored = row[0]  # a pgvector Vector (what register_vector reads a vector column as), or a plain array
        return [float(x) for x in (stored.to_list() if hasattr(stored, "to_list") else stored)]

    def list_items(self, criteria: MemoryCriteria) -> list[tuple[str, float]]:
        where, params = criteria_sql(criteria)
        return [(str(a), float(b)) for a, b in self._read(
            f"SELECT item_id, timestamp_s FROM am_vectors WHERE agent_id = %s AND chunk_index = 0{where}", params)]

    def item_ids(self) -> set[str]:
        return {str(row[0]) for row in self._read("SELECT item_id FROM am_vectors WHERE agent_id = %s AND chunk_index = 0",
                                                  [])}

    def held_items(self, item_ids: Sequence[str]) -> set[str]:
        """Which of ``item_ids`` have their chunk 0 here (:class:`~agent_memory.storage.vector.HeldItems`):
        one statement, by the primary key."""
        if not item_ids:
            return set()
        return {str(row[0]) for row in self._read(
            "SELECT item_id FROM am_vectors WHERE agent_id = %s AND chunk_index = 0 AND item_id = ANY(%s)",
            [list(item_ids)])}

    def _read(self, sql: str, params: list[Any]) -> list[Any]:
        try:
            with self.database.connection() as conn:
                return conn.execute(sql, (self.agent_id, *params)).fetchall()
        except StoreError as exc:
            raise VectorIndexError(f"vector index read failed: {exc}") from exc

    def delete_items(self, item_ids: Sequence[str]) -> None:
        if item_ids:
            self._write("DELETE FROM am_vectors WHERE agent_id = %s AND item_id = ANY(%s)", (self.agent_id, list(item_ids)))

    def reset(self) -> None:
        self._write("DELETE FROM am_vectors WHERE agent_id = %s", (self.agent_id,))

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        try:
            with self.database.connection() as conn:
                conn.execute(sql, params)
        except StoreError as exc:
            raise VectorIndexError(f"vector index write failed: {exc}") from exc

    def close(self) -> None:
        """Nothing of its own to release: the backend's pool serves it."""


class PostgresKeywordIndex:
    """:class:`~agent_memory.storage.keyword.KeywordIndex` of one agent in ``am_keywords``, ranked by
    BM25 (see :meth:`search`); the document frequency of each lexeme and the agent's chunk count
    and total length are kept up to date with every write (``am_keyword_terms``,
    ``am_keyword_stats``), so a query reads them in one lookup per word."""

    def __init__(self, database: Database, agent_id: str) -> None:
        self.database = database
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"PostgresKeywordIndex({self.agent_id!r})"

    def add(self, chunks: Sequence[IndexChunk]) -> None:
        rows = [(*_meta_row(self.agent_id, chunk), pg_text(chunk.text)) for chunk in chunks]
        for start in range(0, len(rows), ADD_BATCH):
            batch = rows[start : start + ADD_BATCH]
            keys = ([row[1] for row in batch], [row[2] for row in batch])
            try:
                with self.database.transaction() as conn:
                    self._drop(conn, "item_id = c.item_id AND chunk_index = c.idx",
                               "unnest(%s::text[], %s::int[]) AS c(item_id, idx)", list(keys))
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            f"INSERT INTO am_keywords (agent_id, {_META}, words) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, "
                            f"%s, %s, to_tsvector('{TEXT_SEARCH_CONFIG}', %s))", batch)
                    self._count(conn, keys)
            except StoreError as exc:
                raise KeywordIndexError(f"keyword index write failed: {exc}") from exc

    def _drop(self, conn: Any, match: str, source: str, params: list[Any]) -> None:
        """Delete the agent's rows that ``match`` (joined with ``source``) and take their lexemes
        out of the statistics, in the caller's transaction."""
        conn.execute(
            f"WITH gone AS (DELETE FROM am_keywords AS k USING {source} WHERE k.agent_id = %s AND k.{match} "
            "RETURNING k.words), "
            "terms AS (SELECT term, count(*) AS n FROM gone, unnest(tsvector_to_array(gone.words)) AS term GROUP BY term), "
            "lowered AS (UPDATE am_keyword_terms AS t SET df = t.df - terms.n FROM terms "
            "WHERE t.agent_id = %s AND t.term = terms.term RETURNING 1) "
            "UPDATE am_keyword_stats SET chunks = chunks - (SELECT count(*) FROM gone), "
            "lexemes = lexemes - (SELECT coalesce(sum(length(words)), 0) FROM gone) WHERE agent_id = %s",
            [*params, self.agent_id, self.agent_id, self.agent_id])

    def _count(self, conn: Any, keys: tuple[list[str], list[int]]) -> None:
        """Add the lexemes of the rows just written (``keys``: item ids and chunk indexes) to the
        statistics, terms in order (two writers never wait for each other in a cycle)."""
        new = ("SELECT k.words FROM am_keywords AS k JOIN unnest(%s::text[], %s::int[]) AS c(item_id, idx) "
               "ON k.item_id = c.item_id AND k.chunk_index = c.idx WHERE k.agent_id = %s")
        conn.execute(
            f"INSERT INTO am_keyword_terms (agent_id, term, df) SELECT %s, term, count(*) FROM ({new}) AS new, "
            "unnest(tsvector_to_array(new.words)) AS term GROUP BY term ORDER BY term "
            "ON CONFLICT (agent_id, term) DO UPDATE SET df = am_keyword_terms.df + EXCLUDED.df",
            [self.agent_id, *keys, self.agent_id])
        conn.execute(
            f"INSERT INTO am_keyword_stats (agent_id, chunks, lexemes) SELECT %s, count(*), coalesce(sum(length(words)), 0) "
            f"FROM ({new}) AS new ON CONFLICT (agent_id) DO UPDATE SET chunks = am_keyword_stats.chunks + EXCLUDED.chunks, "
            "lexemes = am_keyword_stats.lexemes + EXCLUDED.lexemes",
            [self.agent_id, *keys, self.agent_id])

    def search(
        self, text: str, criteria: MemoryCriteria, *, n_chunks: int, max_postings: int | None = None
    ) -> list[ChunkHit]:
        """BM25 (Robertson and Zaragoza, "The Probabilistic Relevance Framework", 2009; k1 =
        :data:`BM25_K1`, b = :data:`BM25_B`) of the query's words over the agent's chunks, each
        word counted once per chunk (``tsvector`` keeps positions, not counts), its IDF from the
        kept document frequencies: ``ln(1 + (N - df + 0.5) / (df + 0.5))``. With
        ``max_postings``, the commonest words are left out while the words kept appear in more
        chunks together (:func:`~agent_memory.storage.lexical.within_budget`, as the file index does)."""
        words = query_words(text)
        if not words:
            return []
        try:
            with self.database.connection() as conn:
                found = conn.execute(
                    f"SELECT w, tsvector_to_array(to_tsvector('{TEXT_SEARCH_CONFIG}', w)) FROM unnest(%s::text[]) AS w",
                    (words,)).fetchall()
                lexemes = {str(word): [str(term) for term in terms] for word, terms in found}
                every = sorted({term for terms in lexemes.values() for term in terms})
                df = dict(conn.execute("SELECT term, df FROM am_keyword_terms WHERE agent_id = %s AND term = ANY(%s) "
                                       "AND df > 0", (self.agent_id, every)).fetchall())
                stats = conn.execute("SELECT chunks, lexemes FROM am_keyword_stats WHERE agent_id = %s",
                                     (self.agent_id,)).fetchone()
        except StoreError as exc:
            raise KeywordIndexError(f"keyword index read failed: {exc}") from exc
        if stats is None or not stats[0]:
            return []
        chunks, average = int(stats[0]), max(1.0, int(stats[1]) / int(stats[0]))
        costs = [(word, sum(df[t] for t in lexemes[word]) if lexemes[word] and all(t in df for t in lexemes[word]) else 0)
                 for word in words]
        kept = within_budget(costs, max_postings)
        terms = sorted({term for word in kept for term in lexemes[word]})
        if not terms:
            return []
        weights = [math.log(1 + (chunks - df[t] + 0.5) / (df[t] + 0.5)) for t in terms]
        where, params = criteria_sql(criteria)
        matched = " + ".join(["CASE WHEN words @@ quote_literal(%s)::tsquery THEN %s ELSE 0 END"] * len(terms))
        anything = " || ".join(["quote_literal(%s)::tsquery"] * len(terms))
        rows = self._read(
            f"SELECT item_id, chunk_index, start_char, header_chars, text, ({matched}) * %s / "
            f"(1 + %s * (1 - %s + %s * length(words) / %s)) AS score FROM am_keywords "
            f"WHERE agent_id = %s AND words @@ ({anything}){where} ORDER BY score DESC, item_id, chunk_index LIMIT %s",
            [*(value for pair in zip(terms, weights, strict=True) for value in pair), BM25_K1 + 1, BM25_K1, BM25_B,
             BM25_B, average, self.agent_id, *terms, *params, n_chunks])
        return [ChunkHit(item_id=item_id, chunk_index=int(index), body=body[int(header):], start_char=int(start),
                         score=float(score))
                for item_id, index, start, header, body, score in rows]

    def passing(self, chunk_ids: Sequence[str], criteria: MemoryCriteria) -> set[str]:
        items, indexes = _split(chunk_ids)
        if not items:
            return set()
        where, params = criteria_sql(criteria)
        rows = self._read(
            "SELECT k.item_id, k.chunk_index FROM am_keywords AS k JOIN unnest(%s::text[], %s::int[]) AS c(item_id, idx) "
            f"ON k.item_id = c.item_id AND k.chunk_index = c.idx WHERE k.agent_id = %s{where}",
            [items, indexes, self.agent_id, *params])
        return {f"{item_id}:{index}" for item_id, index in rows}

    def list_items(self, criteria: MemoryCriteria, *, limit: int) -> list[tuple[str, float]]:
        where, params = criteria_sql(criteria)
        rows = self._read(
            f"SELECT item_id, timestamp_s FROM am_keywords WHERE agent_id = %s AND chunk_index = 0{where} "
            "ORDER BY timestamp_s DESC, item_id DESC LIMIT %s", [self.agent_id, *params, limit])
        return [(str(item_id), float(ts)) for item_id, ts in rows]

    def item_ids(self) -> set[str]:
        return {str(row[0]) for row in self._read("SELECT DISTINCT item_id FROM am_keywords WHERE agent_id = %s",
                                                  [self.agent_id])}

    def delete_items(self, item_ids: Sequence[str]) -> None:
        if not item_ids:
            return
        try:
            with self.database.transaction() as conn:
                self._drop(conn, "item_id = c.item_id", "unnest(%s::text[]) AS c(item_id)", [list(item_ids)])
        except StoreError as exc:
            raise KeywordIndexError(f"keyword index write failed: {exc}") from exc

    def reset(self) -> None:
        try:
            with self.database.transaction() as conn:
                for table in ("am_keywords", "am_keyword_terms", "am_keyword_stats"):
                    conn.execute(f"DELETE FROM {table} WHERE agent_id = %s", (self.agent_id,))
        except StoreError as exc:
            raise KeywordIndexError(f"keyword index write failed: {exc}") from exc

    def _read(self, sql: str, params: list[Any]) -> list[Any]:
        try:
            with self.database.connection() as conn:
                return conn.execute(sql, params).fetchall()
        except StoreError as exc:
            raise KeywordIndexError(f"keyword index read failed: {exc}") from exc

    def close(self) -> None:
        """Nothing of its own to release: the backend's pool serves it."""
