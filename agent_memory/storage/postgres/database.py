"""One Postgres database as agent-memory uses it: a connection pool, the schema and its versions.

The schema is created and migrated by the library: :data:`MIGRATIONS` are applied in order, each
in one transaction under an advisory lock (so processes starting at once do not race), and the
version reached is kept in ``am_schema``. A database of a newer version than this library knows is
refused (:class:`~agent_memory.errors.ConfigurationError`), never written. Every table is keyed by
the agent id: one database serves any number of agents.

Connections come from one pool per process and URL (``psycopg_pool.ConnectionPool``), in autocommit
mode; a unit of work that must be atomic runs in :meth:`Database.transaction`.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from agent_memory.errors import ConfigurationError, LockTimeoutError, StoreError
from agent_memory.storage.urls import redacted_url

__all__ = ["EMBEDDING_DIMENSIONS", "MIGRATIONS", "SCHEMA_VERSION", "Database", "advisory_key"]

EMBEDDING_DIMENSIONS = 384
"""Dimensions of the vector column: the default embedding model's (all-MiniLM-L6-v2)."""

POOL_MAX_SIZE = 16
"""Most connections one process opens to one database (held locks each keep one)."""

POOL_TIMEOUT_S = 30.0
"""Longest wait for a free connection of the pool, in seconds."""

_CHUNK_COLUMNS = """agent_id text NOT NULL,
        item_id text NOT NULL,
        chunk_index integer NOT NULL,
        start_char integer NOT NULL,
        header_chars integer NOT NULL,
        type text NOT NULL,
        source text NOT NULL,
        timestamp_s double precision NOT NULL,
        tags text[] NOT NULL,
        text text NOT NULL,"""
"""The columns of a chunk both indexes keep (its item's facts, which filters test in SQL)."""

MIGRATION_LOCK = 0x616D5F736368656D  # "am_schem": the advisory lock key of schema changes

MIGRATIONS: tuple[str, ...] = (
    # 1: items, blobs, documents, traces, the journal, lock holders, the two indexes
    f"""
    CREATE EXTENSION IF NOT EXISTS vector;
    CREATE TABLE IF NOT EXISTS am_agents (
        agent_id text PRIMARY KEY,
        claimed_at timestamptz NOT NULL DEFAULT now()
    );
    CREATE TABLE IF NOT EXISTS am_item_logs (
        agent_id text PRIMARY KEY,
        generation bigint NOT NULL DEFAULT 1,
        last_seq bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS am_items (
        agent_id text NOT NULL,
        item_id text NOT NULL,
        position bigint NOT NULL,
        seq bigint NOT NULL,
        record bytea NOT NULL,
        PRIMARY KEY (agent_id, item_id)
    );
    CREATE INDEX IF NOT EXISTS am_items_seq ON am_items (agent_id, seq);
    CREATE INDEX IF NOT EXISTS am_items_position ON am_items (agent_id, position);
    CREATE TABLE IF NOT EXISTS am_blobs (
        agent_id text NOT NULL,
        digest text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (agent_id, digest)
    );
    CREATE TABLE IF NOT EXISTS am_documents (
        agent_id text NOT NULL,
        name text NOT NULL,
        rev bigint NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (agent_id, name)
    );
    CREATE TABLE IF NOT EXISTS am_traces (
        agent_id text NOT NULL,
        kind text NOT NULL,
        seq bigserial,
        record text NOT NULL,
        PRIMARY KEY (agent_id, kind, seq)
    );
    CREATE TABLE IF NOT EXISTS am_journals (
        agent_id text PRIMARY KEY,
        last_seq bigint NOT NULL DEFAULT 0
    );
    CREATE TABLE IF NOT EXISTS am_events (
        agent_id text NOT NULL,
        seq bigint NOT NULL,
        id text NOT NULL UNIQUE,
        kind text NOT NULL,
        payload text NOT NULL,
        queued_at double precision NOT NULL,
        status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'applying', 'applied', 'failed')),
        applied_at double precision,
        result text,
        error text,
        applied_by text,
        PRIMARY KEY (agent_id, seq)
    );
    CREATE INDEX IF NOT EXISTS am_events_open ON am_events (agent_id, seq) WHERE status IN ('queued', 'applying');
    CREATE TABLE IF NOT EXISTS am_lock_holders (
        agent_id text NOT NULL,
        name text NOT NULL,
        pid integer NOT NULL,
        host text NOT NULL,
        since double precision NOT NULL,
        note text NOT NULL,
        PRIMARY KEY (agent_id, name)
    );
    CREATE TABLE IF NOT EXISTS am_vectors (
        {_CHUNK_COLUMNS}
        embedding vector({EMBEDDING_DIMENSIONS}) NOT NULL,
        PRIMARY KEY (agent_id, item_id, chunk_index)
    );
    CREATE INDEX IF NOT EXISTS am_vectors_hnsw ON am_vectors USING hnsw (embedding vector_cosine_ops)
        WITH (m = 24, ef_construction = 200);
    CREATE INDEX IF NOT EXISTS am_vectors_listing ON am_vectors (agent_id, timestamp_s DESC) WHERE chunk_index = 0;
    CREATE TABLE IF NOT EXISTS am_keywords (
        {_CHUNK_COLUMNS}
        words tsvector NOT NULL,
        PRIMARY KEY (agent_id, item_id, chunk_index)
    );
    CREATE INDEX IF NOT EXISTS am_keywords_words ON am_keywords USING gin (words);
    CREATE TABLE IF NOT EXISTS am_keyword_terms (
        agent_id text NOT NULL,
        term text NOT NULL,
        df integer NOT NULL,
        PRIMARY KEY (agent_id, term)
    );
    CREATE TABLE IF NOT EXISTS am_keyword_stats (
        agent_id text PRIMARY KEY,
        chunks bigint NOT NULL DEFAULT 0,
        lexemes bigint NOT NULL DEFAULT 0
    );
    CREATE INDEX IF NOT EXISTS am_keywords_listing ON am_keywords (agent_id, timestamp_s DESC) WHERE chunk_index = 0;
    """,
)
"""The schema's versions: version ``n`` is reached by running ``MIGRATIONS[n - 1]`` after the
earlier ones. Append, never edit: a database at version ``n`` has run exactly the first ``n``."""

SCHEMA_VERSION = len(MIGRATIONS)
"""The schema version this library creates and reads."""


def advisory_key(*parts: str) -> int:
    """A signed 64-bit advisory lock key for ``parts`` (sha256 of them, joined by NUL)."""
    digest = hashlib.sha256("\0".join(parts).encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def _configure(conn: psycopg.Connection[Any]) -> None:
    register_vector(conn)


class Database:
    """The pool and schema of one database URL (see the module docstring).

    Args:
        url: a ``postgresql://`` URL (a libpq connection string works too).

    Raises:
        ConfigurationError: if the database cannot be reached, the ``vector`` extension cannot be
            created, or the database's schema is newer than this library's.
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self._closed = False
        self._lock = threading.Lock()
        self._migrate()
        self.pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            url, min_size=1, max_size=POOL_MAX_SIZE, timeout=POOL_TIMEOUT_S, open=True,
            kwargs={"autocommit": True}, configure=_configure, name="agent-memory",
        )

    def _migrate(self) -> None:
        try:
            with psycopg.connect(self.url, autocommit=True) as conn:
                conn.execute("SELECT pg_advisory_lock(%s)", (MIGRATION_LOCK,))
                try:
                    conn.execute("CREATE TABLE IF NOT EXISTS am_schema (version integer NOT NULL)")
                    row = conn.execute("SELECT max(version) FROM am_schema").fetchone()
                    version = int(row[0]) if row is not None and row[0] is not None else 0
                    if version > SCHEMA_VERSION:
                        raise ConfigurationError(
                            f"the database's agent-memory schema is version {version}; this library reads up to "
                            f"{SCHEMA_VERSION}: upgrade agent-memory")
                    for number in range(version + 1, SCHEMA_VERSION + 1):
                        with conn.transaction():
                            conn.execute(MIGRATIONS[number - 1])
                            conn.execute("INSERT INTO am_schema (version) VALUES (%s)", (number,))
                finally:
                    conn.execute("SELECT pg_advisory_unlock(%s)", (MIGRATION_LOCK,))
        except psycopg.Error as exc:
            raise ConfigurationError(f"cannot prepare the database {redacted_url(self.url)}: {exc}") from exc

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection of the pool (autocommit) for the ``with`` block; errors of the database
        become :class:`~agent_memory.errors.StoreError`."""
        try:
            with self.pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise LockTimeoutError(f"no free connection to {redacted_url(self.url)} within {POOL_TIMEOUT_S:g} s") from exc
        except psycopg.Error as exc:
            raise StoreError(f"database {redacted_url(self.url)}: {type(exc).__name__}: {exc}") from exc

    @contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """A connection inside one transaction: committed when the block ends, rolled back (nothing
        written) when it raises."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        """Close the pool. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self.pool.close()
