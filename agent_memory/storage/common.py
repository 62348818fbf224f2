"""What every backend shares: documents, traces and the event journal built on its keyed logs and
locks, and how a backend's description of an agent is shown.

A backend has to implement only the few shapes of :mod:`~agent_memory.storage.contracts`: the
keyed log with its ``expect`` token, named locks, and the vector index. Everything else memory
keeps is one of those shapes again, so the library builds it here, once, for every backend:

==========================  ==============================  ====================================
what                        on the log named                 how
==========================  ==============================  ====================================
a document (``fork``, the   ``document.<name>``              one record, replaced whole; the
working context, …)                                          log's token is the document's
traces (raw, archive,       ``traces.<kind>``                one record per trace record, in
episodic, semantic)                                          write order; a rewrite is
                                                             ``replace_all``; read-modify-writes
                                                             hold the lock ``traces.<kind>``
the event journal           ``journal``                      one record per event (its JSON),
                                                             replaced in place as its status
                                                             moves on; every write passes
                                                             ``expect``, so ``seq`` numbers are
                                                             never given twice
==========================  ==============================  ====================================

A backend may hand out its own document or journal instead (:func:`document` and :func:`journal`
use a backend's ``document`` or ``journal`` method when it has one): the built-in ones do, to
keep their on-disk formats until issue 39's steps a3 and a4 move them onto logs too. Traces are
logs on every backend; the file backend keeps its logs ``traces.<kind>`` as AutoByteus' JSONL
files, read by AutoByteus' own reader (github.com/AutoByteus/autobyteus, ``autobyteus/memory/``).
A third party's backend needs none of them.

Each object reads its log incrementally (``LogRead`` since its last token) and keeps what it read,
so a read costs what changed since, and a change another process made is seen on the next read.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from secrets import token_hex
from typing import Any

from pydantic import TypeAdapter

from agent_memory.errors import ConflictError, ItemNotFoundError, StoreError
from agent_memory.models.items import STORED_CONTEXT
from agent_memory.models.traces import EPISODIC_ADAPTER, RAW_TRACE_ADAPTER, SEMANTIC_ADAPTER
from agent_memory.storage.contracts import Backend, ChangeToken, DocumentSlot, Log, LogChange, LogEntry, Locks
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
from agent_memory.storage.traces import KINDS, TraceKind, TraceRecord, TraceStore, trace_key
from agent_memory.storage.urls import redacted_text

__all__ = ["LogDocument", "LogJournal", "LogTraceStore", "describe", "document", "journal", "traces"]

CONFLICT_RETRIES = 50
"""Writes of the journal retried after a :class:`~agent_memory.errors.ConflictError` (another
process wrote first) before giving up."""

_ADAPTERS: dict[str, TypeAdapter[Any]] = {
    "raw": RAW_TRACE_ADAPTER, "archive": RAW_TRACE_ADAPTER, "episodic": EPISODIC_ADAPTER, "semantic": SEMANTIC_ADAPTER,
}


class _Folded:
    """What one reader holds of a log: records by key in log order, and the token they are at."""

    def __init__(self, log: Log) -> None:
        self.log = log
        self.records: dict[str, bytes] = {}
        self.token: ChangeToken | None = None

    def refresh(self) -> dict[str, bytes]:
        """Apply the changes since the last read (:class:`~agent_memory.storage.contracts.LogRead`'s
        order: reset, deletes, then puts) and return the records."""
        found = self.log.read(self.token)
        if found.reset:
            self.records = {}
        for key in found.deleted:
            self.records.pop(key, None)
        for key, record in found.records:
            self.records[key] = record
        self.token = found.token
        return self.records


# -- documents ------------------------------------------------------------------------------------
_DOCUMENT_KEY = "document"


def _document_record(data: bytes) -> bytes:
    body: dict[str, str] = {"id": _DOCUMENT_KEY}
    try:
        body["text"] = data.decode("utf-8")
    except UnicodeDecodeError:
        body["base64"] = base64.b64encode(data).decode("ascii")
    return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def _document_data(record: bytes) -> bytes:
    body = json.loads(record)
    return body["text"].encode("utf-8") if "text" in body else base64.b64decode(body["base64"])


class LogDocument:
    """:class:`~agent_memory.storage.contracts.DocumentSlot` on a log that holds one record: the
    log's token is the document's. Thread-safe."""

    def __init__(self, log: Log) -> None:
        self._held = _Folded(log)
        self._mutex = threading.Lock()

    def token(self) -> ChangeToken:
        with self._mutex:
            self._held.refresh()
            assert self._held.token is not None
            return self._held.token

    def get(self) -> tuple[bytes | None, ChangeToken]:
        with self._mutex:
            record = self._held.refresh().get(_DOCUMENT_KEY)
            assert self._held.token is not None
            return (_document_data(record) if record is not None else None), self._held.token

    def put(self, data: bytes, *, expect: ChangeToken | None = None) -> ChangeToken:
        return self._held.log.write(LogChange(put=[LogEntry(_DOCUMENT_KEY, _document_record(data))]), expect=expect)


# -- traces ---------------------------------------------------------------------------------------
class LogTraceStore(TraceStore):
    """:class:`~agent_memory.storage.traces.TraceStore` on four logs (``traces.<kind>``), one record
    per trace record: its JSON, keyed by its id (:func:`~agent_memory.storage.traces.trace_key`),
    and the backend's locks for read-modify-writes (re-entrant in a thread, as
    :meth:`TraceStore._locked` must be).

    Args:
        logs: the log of each kind (``raw``, ``archive``, ``episodic``, ``semantic``).
        locks: the agent's locks.
    """

    def __init__(self, logs: dict[TraceKind, Log], locks: Locks) -> None:
        super().__init__()
        self._held = {kind: _Folded(log) for kind, log in logs.items()}
        self._parsed: dict[TraceKind, dict[str, tuple[bytes, TraceRecord]]] = {kind: {} for kind in logs}
        self._locks = locks
        self._mutex = threading.Lock()

    @staticmethod
    def _entries(kind: TraceKind, records: Sequence[TraceRecord], held: dict[str, bytes]) -> list[LogEntry]:
        """One entry per record, keyed by its id, or ``<id>#<turn_id>/<seq>`` when ``held`` (the
        log's records before them) or an earlier one of them holds that id for another line."""
        adapter = _ADAPTERS[kind]
        seen = dict(held)
        entries = []
        for record in records:
            data = adapter.dump_json(record)
            key = trace_key(json.loads(data), seen)
            seen[key] = data
            entries.append(LogEntry(key, data))
        return entries

    def _append(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        if records:
            with self._mutex:
                held = dict(self._held[kind].refresh())
            self._held[kind].log.write(LogChange(put=self._entries(kind, records, held)))

    def _read(self, kind: TraceKind) -> list[TraceRecord]:
        adapter = _ADAPTERS[kind]
        with self._mutex:
            records = self._held[kind].refresh()
            parsed = self._parsed[kind]
            out = []
            for key, record in records.items():  # each record validated once, not on every read
                held = parsed.get(key)
                if held is None or held[0] is not record:
                    held = parsed[key] = (record, adapter.validate_json(record, context=STORED_CONTEXT))
                out.append(held[1])
            if len(parsed) > len(records):
                self._parsed[kind] = {key: value for key, value in parsed.items() if key in records}
        return out

    def _rewrite(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        self._held[kind].log.write(LogChange(put=self._entries(kind, records, {}), replace_all=True))

    def _locked(self, kind: TraceKind) -> AbstractContextManager[None]:
        return self._locked_across(self._locks, kind)


# -- the event journal ----------------------------------------------------------------------------
_COUNTER_KEY = "$last_seq"
"""The record that holds the last ``seq`` given (so a pruned event's number is never reused)."""


def _event(record: dict[str, Any], *, with_payload: bool = True) -> JournalEntry:
    return JournalEntry(
        id=record["id"], seq=record["seq"], kind=EventKind(record["kind"]),
        payload=decode_payload(record["payload"]) if with_payload else {},
        queued_at=record["queued_at"], status=record["status"], applied_at=record.get("applied_at"),
        result=decode_payload(record["result"]) if record.get("result") is not None else None,
        error=record.get("error"))


def _dumped(record: dict[str, Any]) -> bytes:
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


class LogJournal(EventJournal):
    """:class:`~agent_memory.storage.journal.EventJournal` on one log: one record per event, in
    ``seq`` order, replaced in place when its status moves on, and a counter record. Every write
    passes the token of the read it was decided on (``expect``) and is retried on a conflict, so
    two processes never give the same ``seq`` or undo each other's status. Every write is durable
    (``durable=False`` is honoured as durable)."""

    def __init__(self, log: Log) -> None:
        self._held = _Folded(log)
        self._parsed: dict[str, tuple[bytes, dict[str, Any]]] = {}
        self._mutex = threading.RLock()

    def _events(self) -> list[dict[str, Any]]:
        """Every stored event (parsed once per record), in ``seq`` order."""
        records = self._held.refresh()
        out = []
        for key, record in records.items():
            if key == _COUNTER_KEY:
                continue
            held = self._parsed.get(key)
            if held is None or held[0] is not record:
                held = self._parsed[key] = (record, json.loads(record))
            out.append(held[1])
        if len(self._parsed) >= len(records):  # a delete since: forget what the log no longer holds
            self._parsed = {key: value for key, value in self._parsed.items() if key in records}
        return sorted(out, key=lambda event: event["seq"])

    def _write(self, change: Callable[[list[dict[str, Any]]], LogChange | None]) -> None:
        """Write what ``change(events)`` returns (a :class:`LogChange`, or ``None``: nothing),
        decided on a fresh read and retried while another writer was first."""
        for _ in range(CONFLICT_RETRIES):
            with self._mutex:
                made = change(self._events())
                if made is None:
                    return
                try:
                    self._held.log.write(made, expect=self._held.token)
                    return
                except ConflictError:
                    continue
        raise StoreError(f"the event journal kept changing under {CONFLICT_RETRIES} writes in a row")

    def push(self, kind: EventKind | str, payload: dict[str, Any]) -> JournalEntry:
        checked = checked_kind(kind, payload)
        text = encode_payload(payload)
        event_id = EVENT_ID_PREFIX + token_hex(8)
        queued_at = time.time()
        given: list[int] = []

        def change(events: list[dict[str, Any]]) -> LogChange:
            counter = self._held.records.get(_COUNTER_KEY)
            seq = (json.loads(counter)["last_seq"] if counter is not None else 0) + 1
            given[:] = [seq]
            record = {"id": event_id, "seq": seq, "kind": checked.value, "payload": text, "queued_at": queued_at,
                      "status": "queued"}
            return LogChange(put=[LogEntry(event_id, _dumped(record)),
                                  LogEntry(_COUNTER_KEY, _dumped({"id": _COUNTER_KEY, "last_seq": seq}))])

        self._write(change)
        return JournalEntry(id=event_id, seq=given[0], kind=checked, payload=payload, queued_at=queued_at,
                            status="queued")

    def get(self, event_id: str) -> JournalEntry:
        with self._mutex:
            self._events()
            held = self._parsed.get(event_id) if event_id != _COUNTER_KEY else None
        if held is None:
            raise ItemNotFoundError(f"no queued event {event_id!r}", item_id=str(event_id))
        return _event(held[1])

    def _first_open(self) -> dict[str, Any] | None:
        with self._mutex:
            return next((event for event in self._events() if event["status"] in ("queued", "applying")), None)

    def next_open(self) -> JournalEntry | None:
        found = self._first_open()
        return _event(found) if found is not None else None

    def peek_open(self) -> tuple[str, EventStatus] | None:
        found = self._first_open()
        return (found["id"], found["status"]) if found is not None else None

    def set_status(self, event_id: str, status: EventStatus, *, result: Any = None, error: str | None = None,
                   applied_by: str | None = None, durable: bool = True) -> None:
        text = encode_payload(result) if result is not None else None
        applied_at = time.time()

        def change(events: list[dict[str, Any]]) -> LogChange | None:
            held = self._parsed.get(event_id)
            if held is None or event_id not in self._held.records:
                return None  # unknown or pruned: nothing to move on, as an UPDATE of no row
            record = dict(held[1])
            if status == "applying":
                if record["status"] != "queued":
                    return None
                record["status"] = "applying"
            else:
                record.update(status=status, applied_at=applied_at, result=text, error=error, applied_by=applied_by)
            return LogChange(put=[LogEntry(event_id, _dumped(record))])

        self._write(change)

    def events(self, *, status: StatusFilter | None = None, limit: int | None = None) -> list[JournalEntry]:
        wanted = statuses(status)
        with self._mutex:
            chosen = [event for event in self._events() if wanted is None or event["status"] in wanted]
        if limit is not None:
            chosen = chosen[len(chosen) - limit:] if limit > 0 else []
        return [_event(event) for event in chosen]

    def count(self, *, status: StatusFilter | None = None) -> int:
        wanted = statuses(status)
        with self._mutex:
            return sum(1 for event in self._events() if wanted is None or event["status"] in wanted)

    def last_closed(self) -> tuple[int, str | None]:
        with self._mutex:
            closed = [event for event in self._events() if event["status"] in ("applied", "failed")]
        return (closed[-1]["seq"], closed[-1].get("applied_by")) if closed else (0, None)

    def prune(self, keep: int) -> int:
        pruned: list[int] = [0]

        def change(events: list[dict[str, Any]]) -> LogChange | None:
            closed = [event["id"] for event in events if event["status"] in ("applied", "failed")]
            gone = closed[: max(0, len(closed) - max(0, keep))]
            pruned[0] = len(gone)
            return LogChange(delete=gone) if gone else None

        self._write(change)
        return pruned[0]

    def close(self) -> None:
        """Nothing to release: the log's backend holds the connections."""


# -- what the library asks a backend for ----------------------------------------------------------
def describe(backend: Backend, agent_id: str) -> str:
    """Where the agent's records are, for messages and notices: the backend's
    ``describe(agent_id)`` (a path; its URL and the agent id), without any password a third
    party's backend puts in it (:func:`~agent_memory.storage.urls.redacted_text`): the one place
    the library turns it into text."""
    return redacted_text(str(backend.describe(agent_id)))


def document(backend: Backend, agent_id: str, name: str) -> DocumentSlot:
    """The agent's document ``name``: the backend's own (``backend.document``) when it has one,
    else a :class:`LogDocument` on its log ``document.<name>``."""
    own = getattr(backend, "document", None)
    return own(agent_id, name) if own is not None else LogDocument(backend.log(agent_id, f"document.{name}"))


def traces(backend: Backend, agent_id: str) -> TraceStore:
    """The agent's traces: a :class:`LogTraceStore` on its logs ``traces.<kind>`` and its locks
    (every backend's; the file backend's logs are AutoByteus' JSONL files)."""
    return LogTraceStore({kind: backend.log(agent_id, f"traces.{kind}") for kind in KINDS}, backend.locks(agent_id))


def journal(backend: Backend, agent_id: str) -> EventJournal:
    """The agent's event journal: the backend's own (``backend.journal``) when it has one, else a
    :class:`LogJournal` on its log ``journal``."""
    own = getattr(backend, "journal", None)
    if own is not None:
        found: EventJournal = own(agent_id)
        return found
    return LogJournal(backend.log(agent_id, "journal"))
