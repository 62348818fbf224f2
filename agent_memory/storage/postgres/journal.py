"""The Postgres event journal: ``am_events``, with each agent's event counter in ``am_journals``.

A push takes the agent's next ``seq`` from its ``am_journals`` row (locked by the update, so pushes
are numbered in the order they commit and a number is never reused, also after a prune) and
inserts the event in the same transaction. The oldest open event is read with ``FOR UPDATE SKIP
LOCKED`` inside its transaction, so a second reader passes over a row another one is moving on;
applying events is serial anyway (one holder of the step lock at a time).
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from agent_memory.errors import ItemNotFoundError
from agent_memory.storage.journal import (
    EVENT_ID_PREFIX,
    EventJournal,
    EventKind,
    EventStatus,
    JournalEntry,
    StatusFilter,
    checked_kind,
    decode_payload,
    encode_payload,
    statuses,
)
from agent_memory.storage.postgres.database import Database
from agent_memory.storage.postgres.text import pg_text

__all__ = ["PostgresJournal"]

_COLUMNS = "seq, id, kind, payload, queued_at, status, applied_at, result, error"

def _status(status: StatusFilter | None) -> tuple[str, tuple[Any, ...]]:
    kept = statuses(status)
    if kept is None:
        return "", ()
    return " AND status = ANY(%s)", (list(kept),)


def _event(row: tuple[Any, ...]) -> JournalEntry:
    seq, event_id, kind, payload, queued_at, status, applied_at, result, error = row
    return JournalEntry(
        id=event_id, seq=int(seq), kind=EventKind(kind), payload=decode_payload(payload), queued_at=float(queued_at),
        status=status, applied_at=applied_at, result=decode_payload(result) if result is not None else None,
        error=error,
    )


class PostgresJournal(EventJournal):
    """:class:`~agent_memory.storage.journal.EventJournal` of one agent in ``database``. Every
    write is committed (durable) before it returns: ``durable=False`` changes nothing here."""

    def __init__(self, database: Database, agent_id: str) -> None:
        self.database = database
        self.agent_id = agent_id

    def __repr__(self) -> str:
        return f"PostgresJournal({self.agent_id!r})"

    def push(self, kind: EventKind | str, payload: dict[str, Any]) -> JournalEntry:
        checked = checked_kind(kind, payload)
        text = encode_payload(payload)
        event_id = EVENT_ID_PREFIX + secrets.token_hex(8)
        queued_at = time.time()
        with self.database.transaction() as conn:
            conn.execute("INSERT INTO am_journals (agent_id) VALUES (%s) ON CONFLICT DO NOTHING", (self.agent_id,))
            row = conn.execute("UPDATE am_journals SET last_seq = last_seq + 1 WHERE agent_id = %s RETURNING last_seq",
                               (self.agent_id,)).fetchone()
            assert row is not None
            seq = int(row[0])
            conn.execute("INSERT INTO am_events (agent_id, seq, id, kind, payload, queued_at) VALUES (%s, %s, %s, %s, %s, %s)",
                         (self.agent_id, seq, event_id, checked.value, text, queued_at))
        return JournalEntry(id=event_id, seq=seq, kind=checked, payload=payload, queued_at=queued_at,
                            status="queued")

    def get(self, event_id: str) -> JournalEntry:
        with self.database.connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM am_events WHERE agent_id = %s AND id = %s",
                               (self.agent_id, event_id)).fetchone()
        if row is None:
            raise ItemNotFoundError(f"no queued event {event_id!r}", item_id=str(event_id))
        return _event(row)

    def peek_open(self) -> tuple[str, EventStatus] | None:
        with self.database.connection() as conn:
            row = conn.execute("SELECT id, status FROM am_events WHERE agent_id = %s AND status IN ('queued', 'applying') "
                               "ORDER BY seq LIMIT 1", (self.agent_id,)).fetchone()
        return (row[0], row[1]) if row is not None else None

    def next_open(self) -> JournalEntry | None:
        with self.database.transaction() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM am_events WHERE agent_id = %s AND status IN ('queued', 'applying') "
                               "ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED", (self.agent_id,)).fetchone()
        return _event(row) if row is not None else None

    def set_status(self, event_id: str, status: EventStatus, *, result: Any = None, error: str | None = None,
                   applied_by: str | None = None, durable: bool = True) -> None:
        with self.database.connection() as conn:
            if status == "applying":
                conn.execute("UPDATE am_events SET status = 'applying' WHERE agent_id = %s AND id = %s AND status = 'queued'",
                             (self.agent_id, event_id))
                return
            text = encode_payload(result) if result is not None else None
            conn.execute("UPDATE am_events SET status = %s, applied_at = %s, result = %s, error = %s, applied_by = %s "
                         "WHERE agent_id = %s AND id = %s",
                         (status, time.time(), text, None if error is None else pg_text(error), applied_by,
                          self.agent_id, event_id))

    def events(self, *, status: StatusFilter | None = None, limit: int | None = None) -> list[JournalEntry]:
        where, params = _status(status)
        query = f"SELECT {_COLUMNS} FROM am_events WHERE agent_id = %s{where} ORDER BY seq DESC"
        args: tuple[Any, ...] = (self.agent_id, *params)
        if limit is not None:
            query += " LIMIT %s"
            args += (limit,)
        with self.database.connection() as conn:
            rows = conn.execute(query, args).fetchall()
        return [_event(row) for row in reversed(rows)]

    def count(self, *, status: StatusFilter | None = None) -> int:
        where, params = _status(status)
        with self.database.connection() as conn:
            row = conn.execute(f"SELECT count(*) FROM am_events WHERE agent_id = %s{where}",
                               (self.agent_id, *params)).fetchone()
        return int(row[0]) if row is not None else 0

    def last_closed(self) -> tuple[int, str | None]:
        with self.database.connection() as conn:
            row = conn.execute("SELECT seq, applied_by FROM am_events WHERE agent_id = %s AND status IN ('applied', 'failed') "
                               "ORDER BY seq DESC LIMIT 1", (self.agent_id,)).fetchone()
        return (int(row[0]), row[1]) if row is not None else (0, None)

    def prune(self, keep: int) -> int:
        with self.database.connection() as conn:
            cursor = conn.execute(
                "DELETE FROM am_events WHERE agent_id = %s AND status IN ('applied', 'failed') AND seq NOT IN "
                "(SELECT seq FROM am_events WHERE agent_id = %s AND status IN ('applied', 'failed') "
                "ORDER BY seq DESC LIMIT %s)", (self.agent_id, self.agent_id, max(0, keep)))
            return cursor.rowcount

    def close(self) -> None:
        """Nothing of its own to release: the backend's pool serves it."""
