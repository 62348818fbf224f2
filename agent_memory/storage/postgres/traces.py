"""Postgres traces: ``am_traces``, one row per record of each kind (raw, archive, episodic,
semantic), in write order (``seq``).

A rewrite of a kind (archiving turns, a redaction) deletes and inserts in one transaction, so a
reader sees the old records or the new ones. A read-modify-write (``_locked``) holds the agent's
advisory lock of that kind (re-entrant in a thread), so processes on any machine take turns.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import Any

from pydantic import TypeAdapter

from agent_memory.models.items import STORED_CONTEXT
from agent_memory.models.traces import EPISODIC_ADAPTER, RAW_TRACE_ADAPTER, SEMANTIC_ADAPTER
from agent_memory.storage.postgres.database import Database
from agent_memory.storage.postgres.locks import PostgresLocks
from agent_memory.storage.traces import TraceKind, TraceRecord, TraceStore

__all__ = ["PostgresTraceStore"]

_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "raw": RAW_TRACE_ADAPTER, "archive": RAW_TRACE_ADAPTER, "episodic": EPISODIC_ADAPTER, "semantic": SEMANTIC_ADAPTER,
}

class PostgresTraceStore(TraceStore):
    """:class:`~agent_memory.storage.traces.TraceStore` of one agent in ``database``."""

    def __init__(self, database: Database, agent_id: str) -> None:
        super().__init__()
        self.database = database
        self.agent_id = agent_id
        self._locks = PostgresLocks(database, agent_id)

    def __repr__(self) -> str:
        return f"PostgresTraceStore({self.agent_id!r})"

    def _append(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        adapter = _ADAPTERS[kind]
        rows = [(self.agent_id, kind, adapter.dump_json(record).decode("utf-8")) for record in records]
        if not rows:
            return
        with self.database.transaction() as conn, conn.cursor() as cursor:
            cursor.executemany("INSERT INTO am_traces (agent_id, kind, record) VALUES (%s, %s, %s)", rows)

    def _read(self, kind: TraceKind) -> list[TraceRecord]:
        adapter = _ADAPTERS[kind]
        with self.database.connection() as conn:
            rows = conn.execute("SELECT record FROM am_traces WHERE agent_id = %s AND kind = %s ORDER BY seq",
                                (self.agent_id, kind)).fetchall()
        return [adapter.validate_json(row[0], context=STORED_CONTEXT) for row in rows]

    def _rewrite(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        adapter = _ADAPTERS[kind]
        rows = [(self.agent_id, kind, adapter.dump_json(record).decode("utf-8")) for record in records]
        with self.database.transaction() as conn:
            conn.execute("DELETE FROM am_traces WHERE agent_id = %s AND kind = %s", (self.agent_id, kind))
            if rows:
                with conn.cursor() as cursor:
                    cursor.executemany("INSERT INTO am_traces (agent_id, kind, record) VALUES (%s, %s, %s)", rows)

    def _locked(self, kind: TraceKind) -> AbstractContextManager[None]:
        return self._locked_across(self._locks, kind)
