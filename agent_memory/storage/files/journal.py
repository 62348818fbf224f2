"""The file backend's event journal: ``events.sqlite3`` in the agent directory.

SQLite in WAL mode with ``synchronous=FULL`` (a committed event survives a power loss), shared
safely by several processes; see :mod:`agent_memory.storage.journal` for the states of an event.
"""

from __future__ import annotations

import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from agent_memory.errors import ItemNotFoundError, LockTimeoutError, StoreError
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
from agent_memory.storage.sqlite_wal import use_wal

__all__ = ["DEFAULT_BUSY_TIMEOUT_S", "EVENTS_FILE", "FileJournal"]

EVENTS_FILE = "events.sqlite3"
"""File name of the journal, in the agent directory (``memory/agents/<agent_id>/``)."""

DEFAULT_BUSY_TIMEOUT_S = 30.0
"""How long one SQLite statement waits for another process's write to finish, in seconds."""

SCHEMA_VERSION = 1
"""Version of the file's tables; a newer file is refused, not misread."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    payload TEXT NOT NULL,
    queued_at REAL NOT NULL,
    status TEXT NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'applying', 'applied', 'failed')),
    applied_at REAL,
    result TEXT,
    error TEXT,
    applied_by TEXT
);
CREATE INDEX IF NOT EXISTS events_open ON events (seq) WHERE status IN ('queued', 'applying');
"""

_COLUMNS = "seq, id, kind, payload, queued_at, status, applied_at, result, error"

def _where(status: StatusFilter | None) -> tuple[str, tuple[Any, ...]]:
    kept = statuses(status)
    if kept is None:
        return "", ()
    return f" WHERE status IN ({', '.join('?' * len(kept))})", kept


def _db_error(exc: sqlite3.Error, path: Path) -> StoreError:
    message = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in message:
        return LockTimeoutError(f"{path}: another process held the event journal too long ({message})")
    return StoreError(f"event journal {path}: {type(exc).__name__}: {message}")


def _row_event(row: tuple[Any, ...]) -> JournalEntry:
    seq, event_id, kind, payload, queued_at, status, applied_at, result, error = row
    return JournalEntry(
        id=event_id, seq=seq, kind=EventKind(kind), payload=decode_payload(payload), queued_at=queued_at,
        status=status, applied_at=applied_at, result=decode_payload(result) if result is not None else None,
        error=error,
    )


class FileJournal(EventJournal):
    """The journal of one agent's events in ``<agent_dir>/events.sqlite3``; thread-safe, and
    shared by every process that opens the same directory.

    Args:
        agent_dir: the agent's directory (``AgentMemory.agent_dir``); created on first use.
        busy_timeout_s: how long a statement waits for another process's write, in seconds
            (:class:`~agent_memory.errors.LockTimeoutError` after that).

    Raises:
        StoreError: if the file cannot be opened or is not an event journal (or a newer one).
    """

    def __init__(self, agent_dir: str | Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.agent_dir = Path(agent_dir)
        self.path = self.agent_dir / EVENTS_FILE
        self._busy_timeout_s = busy_timeout_s
        self._mutex = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._durable = True

    def __repr__(self) -> str:
        return f"FileJournal({str(self.path)!r})"

    @contextmanager
    def _db(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """The connection (opened and set up on first use), held by this thread; SQLite errors
        become :class:`StoreError` (:class:`LockTimeoutError` for a busy database).

        ``durable=False``: the writes of the block are not synced to disk at commit (they survive
        a killed process, not a power loss) until the next durable commit syncs them."""
        with self._mutex:
            try:
                if self._conn is None:
                    self._conn = self._open()
                    self._durable = True
                if durable != self._durable:
                    self._conn.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
                    self._durable = durable
                yield self._conn
            except sqlite3.Error as exc:
                raise _db_error(exc, self.path) from exc

    def _open(self) -> sqlite3.Connection:
        try:
            self.agent_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {self.agent_dir}: {exc}") from exc
        conn = sqlite3.connect(self.path, timeout=self._busy_timeout_s, isolation_level=None,
                               check_same_thread=False)
        try:
            use_wal(conn, self._busy_timeout_s)
            conn.execute("PRAGMA synchronous=FULL")
            conn.executescript(_SCHEMA)  # each statement is idempotent: safe when processes race
            conn.execute("INSERT OR IGNORE INTO meta (key, value) VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            row = conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            if int(row[0]) > SCHEMA_VERSION:
                raise StoreError(f"{self.path} has schema version {row[0]}; this library reads up to {SCHEMA_VERSION}")
        except BaseException:
            conn.close()
            raise
        return conn

    def close(self) -> None:
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def push(self, kind: EventKind | str, payload: dict[str, Any]) -> JournalEntry:
        checked = checked_kind(kind, payload)
        text = encode_payload(payload)
        event_id = EVENT_ID_PREFIX + secrets.token_hex(8)
        queued_at = time.time()
        with self._db() as db:
            cursor = db.execute("INSERT INTO events (id, kind, payload, queued_at) VALUES (?, ?, ?, ?)",
                                (event_id, checked.value, text, queued_at))
            seq = cursor.lastrowid
        assert seq is not None
        return JournalEntry(id=event_id, seq=seq, kind=checked, payload=payload, queued_at=queued_at,
                            status="queued")

    def set_status(self, event_id: str, status: EventStatus, *, result: Any = None, error: str | None = None,
                   applied_by: str | None = None, durable: bool = True) -> None:
        if status == "applying":
            with self._db() as db:
                db.execute("UPDATE events SET status = 'applying' WHERE id = ? AND status = 'queued'", (event_id,))
            return
        text = encode_payload(result) if result is not None else None
        with self._db(durable=durable) as db:
            db.execute("UPDATE events SET status = ?, applied_at = ?, result = ?, error = ?, applied_by = ? "
                       "WHERE id = ?", (status, time.time(), text, error, applied_by, event_id))

    def prune(self, keep: int) -> int:
        with self._db() as db:
            cursor = db.execute(
                "DELETE FROM events WHERE status IN ('applied', 'failed') AND seq NOT IN "
                "(SELECT seq FROM events WHERE status IN ('applied', 'failed') ORDER BY seq DESC LIMIT ?)",
                (max(0, keep),),
            )
            return cursor.rowcount

    def get(self, event_id: str) -> JournalEntry:
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
        if row is None:
            raise ItemNotFoundError(f"no queued event {event_id!r}", item_id=str(event_id))
        return _row_event(row)

    def peek_open(self) -> tuple[str, EventStatus] | None:
        with self._db() as db:
            row = db.execute("SELECT id, status FROM events WHERE status IN ('queued', 'applying') "
                             "ORDER BY seq LIMIT 1").fetchone()
        return (row[0], row[1]) if row is not None else None

    def next_open(self) -> JournalEntry | None:
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM events WHERE status IN ('queued', 'applying') "
                             "ORDER BY seq LIMIT 1").fetchone()
        return _row_event(row) if row is not None else None

    def events(self, *, status: StatusFilter | None = None, limit: int | None = None) -> list[JournalEntry]:
        where, params = _where(status)
        query = f"SELECT {_COLUMNS} FROM events{where} ORDER BY seq DESC"
        if limit is not None:
            query += " LIMIT ?"
            params += (limit,)
        with self._db() as db:
            rows = db.execute(query, params).fetchall()
        return [_row_event(row) for row in reversed(rows)]

    def count(self, *, status: StatusFilter | None = None) -> int:
        where, params = _where(status)
        with self._db() as db:
            return int(db.execute(f"SELECT COUNT(*) FROM events{where}", params).fetchone()[0])

    def last_closed(self) -> tuple[int, str | None]:
        with self._db() as db:
            row = db.execute("SELECT seq, applied_by FROM events WHERE status IN ('applied', 'failed') "
                             "ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row is not None else (0, None)
