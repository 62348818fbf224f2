"""The persistent event queue of one memory (seed 003 "persistent queue"): ``events.sqlite3`` in
the agent directory.

Every memory event (a user message, a tool result, a store, a forget, ...) is *journaled* here,
committed, before anything applies it; an :class:`~agent_memory.agent.events.EventProcessor`
then applies the events one at a time, oldest first, and marks each one applied. An event goes
through these states, each change committed at once::

    queued ──► applying ──► applied
                   └──────► failed      (the manager refused it: a bad argument; never retried)

``applying`` marks the one event being applied: if a process is killed while applying it, the
next processor finds it still ``applying`` and checks whether its effect was written before it
applies it (see :class:`~agent_memory.agent.events.EventProcessor`). Nothing is lost: a queued
event stays queued until applied, across crashes and restarts.

The file is SQLite in WAL mode with ``synchronous=FULL`` (a committed event survives a power
loss), shared safely by several processes. Payloads are JSON; ``bytes`` (a tool's binary result)
and ``datetime`` values round-trip through tagged objects (:func:`encode_payload`).
"""

from __future__ import annotations

import base64
import json
import secrets
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from enum import StrEnum
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_memory.errors import (
    InvalidArgumentError,
    ItemNotFoundError,
    LockTimeoutError,
    StoreError,
    map_exceptions,
)

__all__ = [
    "DEFAULT_BUSY_TIMEOUT_S",
    "EVENTS_FILE",
    "EVENT_ID_PREFIX",
    "EventKind",
    "EventQueue",
    "EventStatus",
    "QueuedEvent",
    "decode_payload",
    "encode_payload",
]

EVENTS_FILE = "events.sqlite3"
"""File name of the queue, in the agent directory (``memory/agents/<agent_id>/``)."""

EVENT_ID_PREFIX = "qevt_"
"""Prefix of event ids (the seed's): ``qevt_`` + 16 random hex digits."""

DEFAULT_BUSY_TIMEOUT_S = 30.0
"""How long one SQLite statement waits for another process's write to finish, in seconds."""

SCHEMA_VERSION = 1
"""Version of the file's tables; a newer file is refused, not misread."""

BYTES_TAG = "$bytes"
DATETIME_TAG = "$datetime"
ESCAPE_TAG = "$object"
_TAGS = frozenset({BYTES_TAG, DATETIME_TAG, ESCAPE_TAG})

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
CREATE TABLE IF NOT EXISTS step_lock (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    step_id TEXT NOT NULL,
    pid INTEGER NOT NULL,
    host TEXT NOT NULL,
    acquired_at REAL NOT NULL
);
"""


class EventKind(StrEnum):
    """What a queued event does when applied (the seed's event names, lower-case)."""

    USER_MESSAGE = "user_message"
    """``MemoryManager.ingest_user_message``: starts a turn."""
    ASSISTANT_RESPONSE = "assistant_response"
    """``MemoryManager.ingest_assistant_response``: the model's answer and its tool calls."""
    TOOL_INTENT = "tool_intent"
    """``MemoryManager.ingest_tool_intent``: tool calls apart from an answer."""
    TOOL_RESULT = "tool_result"
    """``MemoryManager.ingest_tool_result``: a tool's result, stored in memory."""
    MEMORY_STORE = "memory_store"
    """``AgentMemory.store``: content stored by the agent or the developer."""
    MEMORY_FORGET = "memory_forget"
    """``MemoryManager.forget``: an item forgotten everywhere."""
    MEMORY_MARK_CRITICAL = "memory_mark_critical"
    """``MemoryManager.pin_item`` / ``pin_fact``: kept in every compaction snapshot."""
    COMPACTION_REQUEST = "compaction_request"
    """``MemoryManager.request_compaction``: compact before the next call."""
    USAGE_REPORT = "usage_report"
    """``MemoryManager.observe_usage``: the size of the last prompt (may request a compaction)."""


EventStatus = Literal["queued", "applying", "applied", "failed"]
"""Where an event is: waiting, being applied (or interrupted while applied), done, refused."""


class QueuedEvent(BaseModel):
    """One event of the queue, as stored (a snapshot: it does not change when the queue does)."""

    model_config = ConfigDict(frozen=True)

    id: str
    """``qevt_`` + 16 hex digits."""
    seq: int
    """Position in the queue: 1 for the first event ever queued, increasing, never reused."""
    kind: EventKind
    payload: dict[str, Any]
    """The event's arguments, decoded (``bytes`` and ``datetime`` restored; tuples are lists)."""
    queued_at: float
    """When it was journaled, in seconds since the Unix epoch."""
    status: EventStatus
    applied_at: float | None = None
    """When it was marked applied or failed (epoch seconds); ``None`` while open."""
    result: Any = None
    """What applying it returned, as JSON data (``{"turn_id": ...}``, ``{"memory_id": ...}``);
    ``None`` while open, for a failed event, and for kinds that return nothing."""
    error: str | None = None
    """Why it failed (``"InvalidArgumentError: ..."``), for a ``failed`` event."""


# -- payload codec -------------------------------------------------------------------------------
def _encode(value: Any) -> Any:
    if isinstance(value, bytes | bytearray | memoryview):
        return {BYTES_TAG: base64.b64encode(bytes(value)).decode("ascii")}
    if isinstance(value, datetime):
        return {DATETIME_TAG: value.isoformat()}
    if isinstance(value, dict):
        encoded = {key: _encode(item) for key, item in value.items()}
        if len(value) == 1 and next(iter(value)) in _TAGS:  # a user's object that looks like a tag
            return {ESCAPE_TAG: encoded}
        return encoded
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def _decode(value: Any) -> Any:
    if isinstance(value, dict):
        if len(value) == 1:
            ((key, item),) = value.items()
            if key == BYTES_TAG:
                return base64.b64decode(item)
            if key == DATETIME_TAG:
                return datetime.fromisoformat(item)
            if key == ESCAPE_TAG:
                return {inner: _decode(x) for inner, x in item.items()}
        return {key: _decode(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_decode(item) for item in value]
    return value


def encode_payload(value: Any) -> str:
    """JSON text of a payload: JSON data, with ``bytes`` as ``{"$bytes": <base64>}`` and
    ``datetime`` as ``{"$datetime": <ISO 8601>}`` (an object of one key that is one of these tags
    is wrapped in ``{"$object": ...}`` so it is not misread). Tuples become lists.

    Raises:
        InvalidArgumentError: if the value holds something JSON cannot carry (a set, an object)
            or is nested too deeply.
    """
    with map_exceptions("encode_payload"):
        return json.dumps(_encode(value), ensure_ascii=False, separators=(",", ":"))


def decode_payload(text: str) -> Any:
    """The value :func:`encode_payload` encoded (``bytes`` and ``datetime`` restored)."""
    return _decode(json.loads(text))


# -- the queue -----------------------------------------------------------------------------------
def _db_error(exc: sqlite3.Error, path: Path) -> StoreError:
    message = str(exc)
    if isinstance(exc, sqlite3.OperationalError) and "locked" in message:
        return LockTimeoutError(f"{path}: another process held the event queue too long ({message})")
    return StoreError(f"event queue {path}: {type(exc).__name__}: {message}")


_COLUMNS = "seq, id, kind, payload, queued_at, status, applied_at, result, error"


def _row_event(row: tuple[Any, ...]) -> QueuedEvent:
    seq, event_id, kind, payload, queued_at, status, applied_at, result, error = row
    return QueuedEvent(
        id=event_id, seq=seq, kind=EventKind(kind), payload=decode_payload(payload), queued_at=queued_at,
        status=status, applied_at=applied_at, result=decode_payload(result) if result is not None else None,
        error=error,
    )


class EventQueue:
    """The journal of one memory's events (``<agent_dir>/events.sqlite3``); thread-safe, and
    shared by every process that opens the same directory.

    Args:
        agent_dir: the agent's directory (``AgentMemory.agent_dir``); created on first use.
        busy_timeout_s: how long a statement waits for another process's write, in seconds
            (:class:`~agent_memory.errors.LockTimeoutError` after that).

    Raises:
        StoreError: if the file cannot be opened or is not an event queue (or a newer one).
    """

    def __init__(self, agent_dir: str | Path, *, busy_timeout_s: float = DEFAULT_BUSY_TIMEOUT_S) -> None:
        self.agent_dir = Path(agent_dir)
        self.path = self.agent_dir / EVENTS_FILE
        self._busy_timeout_s = busy_timeout_s
        self._mutex = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._durable = True

    def __repr__(self) -> str:
        return f"EventQueue({str(self.path)!r})"

    @contextmanager
    def _db(self, *, durable: bool = True) -> Iterator[sqlite3.Connection]:
        """The connection (opened and set up on first use), held by this thread; SQLite errors
        become :class:`StoreError` (:class:`LockTimeoutError` for a busy database).

        ``durable=False``: the writes of the block are not synced to disk at commit (they
        survive a killed process, not a power loss) until the next durable commit syncs them:
        for writes whose loss costs nothing but a check (see :meth:`mark_applied`)."""
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
            conn.execute("PRAGMA journal_mode=WAL")
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
        """Close the connection (reopened by the next use). Idempotent."""
        with self._mutex:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    # -- writing -------------------------------------------------------------------------------
    def push(self, kind: EventKind | str, payload: dict[str, Any]) -> QueuedEvent:
        """Journal an event (committed before this returns) and return it, ``queued``.

        Raises:
            InvalidArgumentError: if ``kind`` is unknown or the payload is not a JSON-able dict
                (``bytes`` and ``datetime`` values are fine).
            StoreError: if the write fails (nothing is queued).
        """
        try:
            kind = EventKind(kind)
        except ValueError:
            known = ", ".join(k.value for k in EventKind)
            raise InvalidArgumentError(f"unknown event kind {kind!r}; use one of: {known}") from None
        if not isinstance(payload, dict):
            raise InvalidArgumentError(f"an event payload is a dict, not {type(payload).__name__}")
        text = encode_payload(payload)
        event_id = EVENT_ID_PREFIX + secrets.token_hex(8)
        queued_at = time.time()
        with self._db() as db:
            cursor = db.execute("INSERT INTO events (id, kind, payload, queued_at) VALUES (?, ?, ?, ?)",
                                (event_id, kind.value, text, queued_at))
            seq = cursor.lastrowid
        assert seq is not None
        return QueuedEvent(id=event_id, seq=seq, kind=kind, payload=decode_payload(text), queued_at=queued_at,
                           status="queued")

    def _close_event(self, event_id: str, status: EventStatus, *, result: Any = None, error: str | None = None,
                     applied_by: str | None = None, durable: bool = False) -> QueuedEvent:
        text = encode_payload(result) if result is not None else None
        with self._db(durable=durable) as db:
            db.execute("UPDATE events SET status = ?, applied_at = ?, result = ?, error = ?, applied_by = ? "
                       "WHERE id = ?", (status, time.time(), text, error, applied_by, event_id))
        return self.get(event_id)

    def mark_applying(self, event_id: str) -> None:
        """Mark an event as being applied now (committed before its effect is written)."""
        with self._db() as db:
            db.execute("UPDATE events SET status = 'applying' WHERE id = ? AND status = 'queued'", (event_id,))

    def mark_applied(self, event_id: str, result: Any = None, *, applied_by: str | None = None) -> QueuedEvent:
        """Mark an event applied, with what applying it returned (JSON data, or ``None``), and
        which manager applied it (an opaque token). Returns the event as now stored.

        Not synced at once (the next journaled event or ``applying`` mark syncs it): lost only
        to a power cut, which leaves the event ``applying``, and an ``applying`` event is checked
        for its effect before it is applied."""
        return self._close_event(event_id, "applied", result=result, applied_by=applied_by)

    def mark_failed(self, event_id: str, error: str, *, applied_by: str | None = None) -> QueuedEvent:
        """Mark an event refused (it is not retried); ``error`` says why. Returns the event."""
        return self._close_event(event_id, "failed", error=error, applied_by=applied_by)

    def discard(self, event_id: str, reason: str = "discarded") -> QueuedEvent:
        """Give up on an open event (one that fails every time it is applied, blocking the queue):
        it is marked ``failed`` with ``reason`` and never applied.

        Raises:
            ItemNotFoundError: if no open event has this id.
        """
        event = self.get(event_id)
        if event.status not in ("queued", "applying"):
            raise ItemNotFoundError(f"event {event_id!r} is not open (it is {event.status})", item_id=event_id)
        return self._close_event(event_id, "failed", error=reason, durable=True)

    def prune(self, keep: int) -> int:
        """Delete applied and failed events but the newest ``keep`` of them (open events always
        stay); returns how many were deleted."""
        with self._db() as db:
            cursor = db.execute(
                "DELETE FROM events WHERE status IN ('applied', 'failed') AND seq NOT IN "
                "(SELECT seq FROM events WHERE status IN ('applied', 'failed') ORDER BY seq DESC LIMIT ?)",
                (max(0, keep),),
            )
            return cursor.rowcount

    # -- reading -------------------------------------------------------------------------------
    def get(self, event_id: str) -> QueuedEvent:
        """The event with this id.

        Raises:
            ItemNotFoundError: if there is none (never queued, or pruned).
        """
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM events WHERE id = ?", (event_id,)).fetchone()
        if row is None:
            raise ItemNotFoundError(f"no queued event {event_id!r}", item_id=str(event_id))
        return _row_event(row)

    def next_open(self) -> QueuedEvent | None:
        """The oldest event not applied yet (``queued``, or ``applying`` after an interruption);
        ``None`` when the queue is empty."""
        with self._db() as db:
            row = db.execute(f"SELECT {_COLUMNS} FROM events WHERE status IN ('queued', 'applying') "
                             "ORDER BY seq LIMIT 1").fetchone()
        return _row_event(row) if row is not None else None

    def pending(self) -> list[QueuedEvent]:
        """The events not applied yet, oldest first."""
        with self._db() as db:
            rows = db.execute(f"SELECT {_COLUMNS} FROM events WHERE status IN ('queued', 'applying') "
                              "ORDER BY seq").fetchall()
        return [_row_event(row) for row in rows]

    def events(self, *, status: EventStatus | None = None, limit: int | None = None) -> list[QueuedEvent]:
        """The stored events (every status, or one), oldest first; the newest ``limit`` when given."""
        query = f"SELECT {_COLUMNS} FROM events" + (" WHERE status = ?" if status else "") + " ORDER BY seq DESC"
        params: tuple[Any, ...] = (status,) if status else ()
        if limit is not None:
            query += " LIMIT ?"
            params += (limit,)
        with self._db() as db:
            rows = db.execute(query, params).fetchall()
        return [_row_event(row) for row in reversed(rows)]

    def count(self, *, status: EventStatus | None = None) -> int:
        """How many events are stored (pruned ones are not), of every status or of one."""
        with self._db() as db:
            if status is None:
                return db.execute("SELECT COUNT(*) FROM events").fetchone()[0]
            return db.execute("SELECT COUNT(*) FROM events WHERE status = ?", (status,)).fetchone()[0]

    def open_count(self) -> int:
        """How many events are not applied yet (``queued`` or ``applying``)."""
        with self._db() as db:
            return db.execute("SELECT COUNT(*) FROM events WHERE status IN ('queued', 'applying')").fetchone()[0]

    def last_closed(self) -> tuple[int, str | None]:
        """``(seq, applied_by)`` of the newest applied or failed event; ``(0, None)`` if none."""
        with self._db() as db:
            row = db.execute("SELECT seq, applied_by FROM events WHERE status IN ('applied', 'failed') "
                             "ORDER BY seq DESC LIMIT 1").fetchone()
        return (row[0], row[1]) if row is not None else (0, None)

    # -- the step lock's record of its holder ----------------------------------------------------
    def write_holder(self, step_id: str | None, *, pid: int = 0, host: str = "", acquired_at: float = 0.0) -> None:
        """Record who holds the step lock (``step_id`` ``None``: nobody). Only the
        :class:`~agent_memory.agent.step_lock.StepLock` calls this, under the OS lock. Not synced:
        the record is only informative (the OS lock says who holds it)."""
        with self._db(durable=False) as db:
            if step_id is None:
                db.execute("DELETE FROM step_lock")
            else:
                db.execute("INSERT OR REPLACE INTO step_lock (one, step_id, pid, host, acquired_at) "
                           "VALUES (1, ?, ?, ?, ?)", (step_id, pid, host, acquired_at))

    def read_holder(self) -> tuple[str, int, str, float] | None:
        """``(step_id, pid, host, acquired_at)`` as last recorded (possibly by a holder that died:
        only the OS lock says whether it is held); ``None`` when nothing is recorded."""
        with self._db() as db:
            row = db.execute("SELECT step_id, pid, host, acquired_at FROM step_lock").fetchone()
        return (row[0], row[1], row[2], row[3]) if row is not None else None
