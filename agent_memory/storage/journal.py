"""The event journal (after the persistent event queue of team9's agent framework,
github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0): every memory event is
journaled, committed, before anything applies it.

An :class:`~agent_memory.agent.events.EventProcessor` journals each event (a user message, a tool
result, a store, a forget, ...) here, then applies the events one at a time, oldest first, and
marks each one applied. An event goes through these states, each change committed at once::

    queued ──► applying ──► applied
                   └──────► failed      (the manager refused it: a bad argument; never retried)

``applying`` marks the one event being applied: if a process is killed while applying it, the
next processor finds it still ``applying`` and checks whether its effect was written before it
applies it (see :class:`~agent_memory.agent.events.EventProcessor`). Nothing is lost: a journaled
event stays pending until applied, across crashes and restarts. (The status ``queued`` is the
stored name of a pending event not yet being applied.)

:class:`EventJournal` is the contract, as :class:`~agent_memory.storage.traces.TraceStore` and
LangGraph's ``BaseStore`` are: a backend implements the abstract operations (:meth:`push`,
:meth:`get`, :meth:`next_open`, :meth:`set_status`, :meth:`events`, :meth:`count`,
:meth:`last_closed`, :meth:`prune`, :meth:`close`), and the rest is built on them. The file
backend's is SQLite (:class:`~agent_memory.storage.files.journal.FileJournal`), Postgres's a table
(:mod:`agent_memory.storage.postgres`). Payloads are JSON; ``bytes`` (a tool's binary result) and
``datetime`` values round-trip through tagged objects (:func:`encode_payload`).
"""

from __future__ import annotations

import base64
import json
from abc import ABC, abstractmethod
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from agent_memory.errors import InvalidArgumentError, ItemNotFoundError, map_exceptions

__all__ = [
    "CLOSED_STATUSES",
    "EVENT_ID_PREFIX",
    "OPEN_STATUSES",
    "EventJournal",
    "EventKind",
    "EventStatus",
    "JournalEntry",
    "StatusFilter",
    "checked_kind",
    "decode_payload",
    "encode_payload",
    "statuses",
]

EVENT_ID_PREFIX = "qevt_"
"""Prefix of event ids (team9's): ``qevt_`` + 16 random hex digits. Stored, so kept until the
journal's format changes."""

BYTES_TAG = "$bytes"
DATETIME_TAG = "$datetime"
ESCAPE_TAG = "$object"
_TAGS = frozenset({BYTES_TAG, DATETIME_TAG, ESCAPE_TAG})


class EventKind(StrEnum):
    """What a journaled event does when applied (names lower-cased from AutoByteus' ingest operations
    and team9's ``MEMORY_FORGET`` / ``MEMORY_MARK_CRITICAL`` events)."""

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


class JournalEntry(BaseModel):
    """One event of the journal, as stored (a snapshot: it does not change when the journal does)."""

    model_config = ConfigDict(frozen=True)

    id: str
    """``qevt_`` + 16 hex digits."""
    seq: int
    """Position in the journal: 1 for the first event ever journaled, increasing, never reused."""
    kind: EventKind
    payload: dict[str, Any]
    """The event's arguments. Read from the journal: decoded (``bytes`` and ``datetime``
    restored; tuples are lists; a model, such as a message, is its JSON data). As returned by
    :meth:`EventJournal.push`: the payload as given, not read back."""
    queued_at: float
    """When it was journaled, in Unix time (seconds) (the stored column's name, kept until the
    journal's format changes)."""
    status: EventStatus
    applied_at: float | None = None
    """When it was marked applied or failed (Unix time, seconds); ``None`` while open."""
    result: Any = None
    """What applying it returned, as JSON data (``{"turn_id": ...}``, ``{"memory_id": ...}``);
    ``None`` while open, for a failed event, and for kinds that return nothing."""
    error: str | None = None
    """Why it failed (``"InvalidArgumentError: ..."``), for a ``failed`` event."""


# -- payload codec -------------------------------------------------------------------------------
def _encode(value: Any) -> Any:
    if isinstance(value, BaseModel):  # a checked Message or ToolCall: its JSON data
        return _encode(value.model_dump(mode="json", exclude_defaults=True))
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
    """JSON text of a payload: JSON data, with ``bytes`` as ``{"$bytes": <base64>}``,
    ``datetime`` as ``{"$datetime": <ISO 8601>}`` and a pydantic model as its JSON data (read back
    as that data, a dict) (an object of one key that is one of these tags
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




StatusFilter = Literal["queued", "applying", "applied", "failed", "open", "closed"]
"""A status, or ``open`` (``queued`` and ``applying``: not applied yet) or ``closed`` (``applied``
and ``failed``)."""

OPEN_STATUSES: tuple[EventStatus, ...] = ("queued", "applying")
"""The statuses of an event not applied yet."""

CLOSED_STATUSES: tuple[EventStatus, ...] = ("applied", "failed")
"""The statuses of an event done with."""


def statuses(status: StatusFilter | None) -> tuple[EventStatus, ...] | None:
    """The statuses a filter keeps (``None``: every event)."""
    if status is None:
        return None
    if status == "open":
        return OPEN_STATUSES
    if status == "closed":
        return CLOSED_STATUSES
    return (status,)


def checked_kind(kind: EventKind | str, payload: Any) -> EventKind:
    """``kind`` as an :class:`EventKind`, after checking the payload is a dict (what every
    journal's :meth:`~EventJournal.push` checks first).

    Raises:
        InvalidArgumentError: for an unknown kind or a payload that is not a dict.
    """
    try:
        checked = EventKind(kind)
    except ValueError:
        known = ", ".join(k.value for k in EventKind)
        raise InvalidArgumentError(f"unknown event kind {kind!r}; use one of: {known}") from None
    if not isinstance(payload, dict):
        raise InvalidArgumentError(f"an event payload is a dict, not {type(payload).__name__}")
    return checked


class EventJournal(ABC):
    """The journal of one agent's memory events; thread-safe, and shared by every process that
    opens the same backend. Subclasses implement the abstract methods; the rest is built on them."""

    # -- the backend -------------------------------------------------------------------------
    @abstractmethod
    def push(self, kind: EventKind | str, payload: dict[str, Any]) -> JournalEntry:
        """Journal an event (durable before this returns) and return it, ``queued``, with the next
        ``seq`` (increasing, never reused) and the payload as given (it is written, not read
        back). Check the arguments with :func:`checked_kind` and encode the payload with
        :func:`encode_payload` first.

        Raises:
            InvalidArgumentError: for an unknown kind or a payload JSON cannot carry.
            StoreError: if the write fails (nothing is journaled).
        """

    @abstractmethod
    def get(self, event_id: str) -> JournalEntry:
        """The event with this id. Raises :class:`~agent_memory.errors.ItemNotFoundError` if there
        is none (never journaled, or pruned)."""

    @abstractmethod
    def next_open(self) -> JournalEntry | None:
        """The open event with the lowest ``seq`` (``queued``, or ``applying`` after an
        interruption); ``None`` when none is open."""

    def peek_open(self) -> tuple[str, EventStatus] | None:
        """``(id, status)`` of the event :meth:`next_open` would return, without its payload (which
        can be megabytes); ``None`` when none is open. The processor asks this to apply an event it
        journaled itself from the payload it holds. Backends should override this with a query
        that reads no payload; this default reads the whole event."""
        event = self.next_open()
        return (event.id, event.status) if event is not None else None

    @abstractmethod
    def set_status(self, event_id: str, status: EventStatus, *, result: Any = None, error: str | None = None,
                   applied_by: str | None = None, durable: bool = True) -> None:
        """Move an event on. ``applying``: only a ``queued`` event (else nothing happens), always
        durable. ``applied`` or ``failed``: record when, ``result`` (JSON data, or ``None``),
        ``error`` and ``applied_by`` (an opaque token of the manager). ``durable=False``: the
        change may be lost to a power cut (not to a killed process) until the next durable write."""

    @abstractmethod
    def events(self, *, status: StatusFilter | None = None, limit: int | None = None) -> list[JournalEntry]:
        """The stored events (all, or those of ``status``), oldest first; the newest ``limit``."""

    @abstractmethod
    def count(self, *, status: StatusFilter | None = None) -> int:
        """How many events are stored (pruned ones are not), all or those of ``status``."""

    @abstractmethod
    def last_closed(self) -> tuple[int, str | None]:
        """``(seq, applied_by)`` of the newest applied or failed event; ``(0, None)`` if none."""

    @abstractmethod
    def prune(self, keep: int) -> int:
        """Delete applied and failed events but the newest ``keep`` of them (open events always
        stay); returns how many were deleted."""

    @abstractmethod
    def close(self) -> None:
        """Release connections (reopened by the next use). Idempotent."""

    # -- built on them -----------------------------------------------------------------------
    def mark_applying(self, event_id: str) -> None:
        """Mark a pending event as being applied now (durable before its effect is written)."""
        self.set_status(event_id, "applying")

    def mark_applied(self, event_id: str, result: Any = None, *, applied_by: str | None = None) -> JournalEntry:
        """Mark an event applied, with what applying it returned (JSON data, or ``None``) and
        which manager applied it. Returns the event as now stored.

        Not durable at once (the next journaled event or ``applying`` mark makes it so): lost only
        to a power cut, which leaves the event ``applying``, and an ``applying`` event is checked
        for its effect before it is applied."""
        self.set_status(event_id, "applied", result=result, applied_by=applied_by, durable=False)
        return self.get(event_id)

    def mark_failed(self, event_id: str, error: str, *, applied_by: str | None = None) -> JournalEntry:
        """Mark an event refused (it is not retried); ``error`` says why. Returns the event."""
        self.set_status(event_id, "failed", error=error, applied_by=applied_by, durable=False)
        return self.get(event_id)

    def discard(self, event_id: str, reason: str = "discarded") -> JournalEntry:
        """Give up on an open event (one that fails every time it is applied, blocking the journal):
        it is marked ``failed`` with ``reason`` and never applied.

        Raises:
            ItemNotFoundError: if no open event has this id.
        """
        event = self.get(event_id)
        if event.status not in OPEN_STATUSES:
            raise ItemNotFoundError(f"event {event_id!r} is not open (it is {event.status})", item_id=event_id)
        self.set_status(event_id, "failed", error=reason)
        return self.get(event_id)

    def pending(self) -> list[JournalEntry]:
        """The events not applied yet, oldest first."""
        return self.events(status="open")

    def open_count(self) -> int:
        """How many events are not applied yet (``queued`` or ``applying``)."""
        return self.count(status="open")
