"""The Postgres backend (extra ``postgres``): one database that processes on many machines share.

``AgentMemory("a", backend="postgresql://user:password@host/db")`` (or ``AGENT_MEMORY_URL``) keeps
everything of every agent in the database: item records and content blobs
(:mod:`~agent_memory.storage.postgres.items`), chunks with a pgvector HNSW index and full-text
search (:mod:`~agent_memory.storage.postgres.search`), traces, episodes and facts (the
agent's logs ``traces.<kind>``, rows of ``am_items`` as every log), the working context and forks
(:mod:`~agent_memory.storage.postgres.documents`), the event journal
(:mod:`~agent_memory.storage.postgres.journal`) and advisory locks that die with their session
(:mod:`~agent_memory.storage.postgres.locks`). The schema is created and migrated by the library
(:mod:`~agent_memory.storage.postgres.database`); the ``vector`` extension must be available to the
server (pgvector; the ``pgserver`` package ships a server with it, which the test suite starts).
Nothing is kept on local disk, so any process that has the URL sees the same memory.
"""

from __future__ import annotations

from typing import Any

import psycopg

from agent_memory.config import MemoryConfig
from agent_memory.ids import validate_agent_id
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.vector import VectorIndex
from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.storage.contracts import ITEMS_LOG, BackendDefaults, QuarantineHook, checked_log_name
from agent_memory.storage.postgres.database import Database
from agent_memory.storage.postgres.documents import PostgresDocumentSlot
from agent_memory.storage.postgres.items import PostgresItemLog
from agent_memory.storage.postgres.journal import PostgresJournal
from agent_memory.storage.postgres.locks import PostgresLocks
from agent_memory.storage.urls import redacted_url
from agent_memory.tokens import TokenCounter

__all__ = ["PostgresBackend"]


class PostgresBackend(BackendDefaults):
    """:class:`~agent_memory.storage.contracts.Backend` in the database ``url``.

    Args:
        url: ``postgresql://user:password@host:port/database`` (a ``?host=/socket/dir`` query for
            a Unix socket). The password is used to connect and never shown (:attr:`url` leaves it out).

    Raises:
        ConfigurationError: if the database cannot be reached or prepared (see
            :class:`~agent_memory.storage.postgres.database.Database`).
    """

    def __init__(self, url: str) -> None:
        self.database = Database(url)
        self.url = redacted_url(self.database.url)

    def __repr__(self) -> str:
        return f"PostgresBackend({self.url!r})"

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called (the process's next :func:`~agent_memory.storage.open_backend`
        of the URL opens a new one)."""
        return self.database.closed

    def describe(self, agent_id: str) -> str:
        return f"{self.url} (agent {validate_agent_id(agent_id)!r})"

    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> PostgresItemLog:
        """The log ``items`` is the agent's rows of ``am_items``; another log ``<name>`` the rows
        under the key ``<agent_id>/<name>`` (an agent id holds no ``/``). Rows hold no damage to
        quarantine."""
        agent_id = validate_agent_id(agent_id)
        return PostgresItemLog(self.database, agent_id if name == ITEMS_LOG else f"{agent_id}/{checked_log_name(name)}")

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> KeywordIndex | None:
        with HEAVY_IMPORTS:  # its module imports numpy
            from agent_memory.storage.postgres.search import PostgresKeywordIndex

        index = PostgresKeywordIndex(self.database, validate_agent_id(agent_id))
        if recreate:
            index.reset()
        return index

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        with HEAVY_IMPORTS:  # numpy and pgvector: on first use
            from agent_memory.storage.postgres.search import PostgresVectorIndex

        return PostgresVectorIndex(self.database, validate_agent_id(agent_id), config)

    def document(self, agent_id: str, name: str) -> PostgresDocumentSlot:
        return PostgresDocumentSlot(self.database, validate_agent_id(agent_id), name)

    def journal(self, agent_id: str) -> PostgresJournal:
        return PostgresJournal(self.database, validate_agent_id(agent_id))

    def locks(self, agent_id: str) -> PostgresLocks:
        return PostgresLocks(self.database, validate_agent_id(agent_id))

    def claim(self, agent_id: str) -> bool:
        agent_id = validate_agent_id(agent_id)
        with self.database.transaction() as conn:
            if agent_id in self._stored(conn, agent_id):
                return False
            row = conn.execute("INSERT INTO am_agents (agent_id) VALUES (%s) ON CONFLICT DO NOTHING RETURNING agent_id",
                               (agent_id,)).fetchone()
        return row is not None

    def release_claim(self, agent_id: str) -> None:
        agent_id = validate_agent_id(agent_id)
        with self.database.transaction() as conn:
            for table in _AGENT_TABLES:  # the agent's rows and those of its other logs ('<agent>/<name>')
                conn.execute(f"DELETE FROM {table} WHERE agent_id = %s OR starts_with(agent_id, %s)",
                             (agent_id, f"{agent_id}/"))

    def agent_ids(self) -> list[str]:
        with self.database.connection() as conn:
            rows = conn.execute(" UNION ".join(f"SELECT split_part(agent_id, '/', 1) FROM {table}"
                                               for table in _AGENT_TABLES) + " ORDER BY 1").fetchall()
        return [str(row[0]) for row in rows]

    @staticmethod
    def _stored(conn: psycopg.Connection[Any], agent_id: str) -> set[str]:
        """``{agent_id}`` when anything is stored under it or one of its other logs (items,
        traces, documents), else ``set()``."""
        query = " UNION ".join(f"(SELECT split_part(agent_id, '/', 1) FROM {table} "
                               "WHERE agent_id = %s OR starts_with(agent_id, %s) LIMIT 1)" for table in _AGENT_TABLES)
        rows = conn.execute(query, [agent_id, f"{agent_id}/"] * len(_AGENT_TABLES)).fetchall()
        return {str(row[0]) for row in rows}

    def close(self) -> None:
        self.database.close()


_AGENT_TABLES = ("am_agents", "am_items", "am_blobs", "am_documents", "am_events", "am_vectors",
                 "am_keywords", "am_keyword_terms", "am_keyword_stats", "am_item_logs", "am_item_deletions",
                 "am_journals", "am_lock_holders")
"""Every table with an ``agent_id`` column: what an agent holds (its logs other than ``items``
under ``<agent_id>/<name>``)."""
