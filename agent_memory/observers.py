"""Notices: what a memory reports instead of raising, and the observers that hear them.

Some failures must not be raised into the agent: indexing that fails after an item is safely stored,
a damaged line of ``items.jsonl``, a missing content blob. The memory carries on (the item stays
stored and pending, the line is quarantined, the item is skipped) and *notifies* what happened (as
team9's agent framework notifies its observers): every notice is logged on the ``agent_memory``
logger and handed to each observer. The kernel, the agent loop and the event processor notify what
they did too (a compaction, an LLM call and its cost, a journaled event applied).

"Notice" names only this: what an observer hears. An *event* is what the event processor journals
and applies (:mod:`agent_memory.agent.events`, :class:`~agent_memory.storage.journal.JournalEntry`);
applying one is itself reported as the notice :class:`EventApplied`.

An observer is any object with ``on_notice(notice)`` (:class:`MemoryObserver`); give them to
``AgentMemory(..., observers=[...])`` or :meth:`AgentMemory.add_observer
<agent_memory.memory.AgentMemory.add_observer>`. Notices are frozen pydantic models with a
``kind`` field, so they can be matched by class or serialised (``notice.model_dump_json()``).
An observer that raises is logged and skipped; it never breaks the memory.

New kinds of notices are new subclasses of :class:`MemoryNotice`; observers should ignore kinds
they do not know.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from typing import ClassVar, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "Compacted",
    "CompactionRequested",
    "ContentMissing",
    "EventApplied",
    "NoticeRecorder",
    "IndexFailed",
    "IndexReadOnly",
    "Indexed",
    "IndexRecreated",
    "LLMCalled",
    "MemoryNotice",
    "MemoryObserver",
    "ObserverList",
    "RecordQuarantined",
    "RecordUnsupported",
    "Retrieved",
    "TraceIngested",
    "Truncated",
    "logger",
]

logger = logging.getLogger("agent_memory")
"""The library's logger; every notice is logged on it (level per notice class, WARNING for these)."""


def _now() -> datetime:
    return datetime.now(UTC)


class MemoryNotice(BaseModel):
    """Something that happened to a memory that its user may want to know (base class)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    log_level: ClassVar[int] = logging.WARNING
    """Level at which the memory logs this kind of notice."""

    kind: str
    """Which notice, e.g. ``index_failed``; fixed per subclass."""
    agent_id: str
    """The agent whose memory it happened to."""
    at: datetime = Field(default_factory=_now)
    """When it was reported (UTC)."""

    def describe(self) -> str:
        """One line for the log."""
        fields = self.model_dump(exclude={"kind", "agent_id", "at"})
        details = ", ".join(f"{key}={value!r}" for key, value in fields.items())
        return f"{self.kind} in memory {self.agent_id!r}: {details}"


class IndexFailed(MemoryNotice):
    """Indexing items failed; the items are stored and readable by id, but not found by queries
    until they are indexed."""

    kind: Literal["index_failed"] = "index_failed"
    item_ids: tuple[str, ...]
    """The items that were not indexed."""
    error: str
    """What the index said (short)."""
    pending: bool
    """``True``: the items stay pending and are retried by the next ``flush_index`` or query.
    ``False``: the index refused them while it works for other items: with ``label_only`` they are
    in the index by their label, else this process skips them until ``rebuild_index`` (another
    process retries them once)."""
    label_only: bool = False
    """``True``: the index took the item's label (type, source, title, tags) but not its text:
    filters and listings find it, a text query does not search its content; it is never retried
    (``rebuild_index`` tries its text again)."""


class Indexed(MemoryNotice):
    """Items got their vectors: the indexing thread (or a flush, or a query's catch-up) embedded
    their chunks and wrote them. Each stored item is embedded once, by one process, whatever
    number of processes share the memory."""

    log_level: ClassVar[int] = logging.DEBUG

    kind: Literal["indexed"] = "indexed"
    item_ids: tuple[str, ...]
    """The items whose vectors were written (items another process indexed first are left out)."""
    chunks_embedded: int
    """Chunks embedded for them (near-duplicates and text past ``max_embedded_chars`` are not)."""
    seconds: float
    """Wall time of embedding and writing them, in seconds."""


class RecordQuarantined(MemoryNotice):
    """A complete line of a JSONL file did not parse; it was taken out of the file so every other
    record stays readable."""

    kind: Literal["record_quarantined"] = "record_quarantined"
    path: str
    """The JSONL file the line was in."""
    line_no: int
    """1-based line number of the bad line in that file (before it was removed)."""
    reason: str
    """Why it did not parse (short, without the line's content)."""
    quarantine_path: str | None
    """The file its bytes were moved to (``items.jsonl.corrupt``), or ``None`` when the move
    failed and the line is only skipped when reading."""


class RecordUnsupported(MemoryNotice):
    """A record of ``items.jsonl`` is one this version cannot read (a newer ``schema_version``, an
    unknown field or type: written by a newer version, or by hand). It is kept where it is,
    unchanged; reading its item raises :class:`~agent_memory.errors.UnsupportedRecordError`, and
    every other item stays readable. Reported once per process and memory."""

    kind: Literal["record_unsupported"] = "record_unsupported"
    path: str
    """The JSONL file the record is in."""
    item_id: str
    """The memory id the record carries."""
    schema_version: int | None
    """Its ``schema_version`` when it has one (``None``: version 1, the field absent)."""
    reason: str
    """Why it cannot be read (short, without the record's content)."""


class ContentMissing(MemoryNotice):
    """An item's content blob is missing or damaged: that item cannot be read or indexed; every
    other item works."""

    kind: Literal["content_missing"] = "content_missing"
    item_id: str
    """The item whose content is gone."""
    error: str
    """What was found (missing file, hash mismatch)."""


class IndexRecreated(MemoryNotice):
    """An index file was damaged beyond use and was deleted and built again from ``items.jsonl``."""

    kind: Literal["index_recreated"] = "index_recreated"
    path: str
    """The index file that was recreated."""
    reason: str
    """What was wrong with it."""


class IndexReadOnly(MemoryNotice):
    """The memory directory is read-only (a read-only mount, a snapshot without write permission):
    the indexes are read without writing, and what would need a write is skipped. Reported when
    the index is opened (what was done to read it), and when a query finds stored items the index
    lacks (``unindexed_ids``): they cannot be indexed here, so text queries and listings miss
    them, while ``get``, ``retrieve`` and ``records`` still read them."""

    kind: Literal["index_read_only"] = "index_read_only"
    log_level: ClassVar[int] = logging.INFO
    path: str
    """The read-only index directory (``<agent_dir>/index``)."""
    detail: str
    """What the memory does instead of writing (a private copy of the vector index, the keyword
    index opened read-only, indexing skipped)."""
    unindexed_ids: tuple[str, ...] = ()
    """Stored items the index lacks and that cannot be indexed (at most 100 listed)."""
    unindexed_count: int = 0
    """How many stored items the index lacks."""


class TraceIngested(MemoryNotice):
    """A raw trace was recorded (a user message, a tool call, a tool result, an answer)."""

    kind: Literal["trace_ingested"] = "trace_ingested"
    log_level: ClassVar[int] = logging.DEBUG
    turn_id: str
    trace_id: str
    trace_type: str
    """``user``, ``assistant``, ``tool_call`` or ``tool_result``."""
    tool_result_ref: str | None = None
    """The memory id of a tool result's full content."""


class CompactionRequested(MemoryNotice):
    """A prompt passed the hard threshold (or the agent asked): compaction runs before the next call."""

    kind: Literal["compaction_requested"] = "compaction_requested"
    log_level: ClassVar[int] = logging.INFO
    prompt_tokens: int | None
    """The size that triggered it; ``None`` when the agent or the developer asked."""
    reported: bool
    """``True``: the provider's ``prompt_tokens``; ``False``: our own count."""
    reason: str
    """``hard`` (threshold), ``over`` (over the budget), ``requested`` (asked)."""


class Compacted(MemoryNotice):
    """Older turns became an episode and facts, and the working context was reset."""

    kind: Literal["compacted"] = "compacted"
    log_level: ClassVar[int] = logging.INFO
    turn_ids: tuple[str, ...]
    """The turns compacted (now in the archive), oldest first; empty when only the snapshot was
    rebuilt."""
    tail_turn_ids: tuple[str, ...]
    """The turns kept raw."""
    tokens_before: int
    """The prompt before, in tokens (the last reported size, else our count)."""
    tokens_after: int
    """Our count of the prompt after (messages and tools)."""
    epoch_id: int
    """The working context's new epoch."""
    summarizer: str | None
    fallback_reason: str | None
    """Why the LLM summarizer fell back to the extractive one, if it did."""


class Truncated(MemoryNotice):
    """Even after compaction the prompt did not fit: the oldest raw turns went to the archive
    without a summary (still searchable and retrievable by turn id)."""

    kind: Literal["truncated"] = "truncated"
    log_level: ClassVar[int] = logging.WARNING
    turn_ids: tuple[str, ...]
    """The turns archived without a summary, oldest first."""
    tokens_before: int
    """The next prompt before these turns were dropped (after the compaction that ran first, if
    one did: :class:`Compacted` tells the size that asked for it), in the kernel's count: its
    messages and tools, counted by the memory's token counter, plus what the provider counted
    beyond our count of the last prompt it reported
    (:meth:`~agent_memory.kernel.manager.MemoryManager.count_tokens`). The same counter as
    ``tokens_after``, never a provider's reported size."""
    tokens_after: int
    """The next prompt after they were dropped, in the same count as ``tokens_before``."""

    def describe(self) -> str:
        """One line for the log: which turns, and the prompt before and after in one count."""
        turns = ", ".join(self.turn_ids)
        return (f"truncated in memory {self.agent_id!r}: {len(self.turn_ids)} turn(s) archived without a summary "
                f"({turns}); the next prompt {self.tokens_before:,} -> {self.tokens_after:,} tokens "
                "(the kernel's count, messages and tools)")


class Retrieved(MemoryNotice):
    """Content was read back from memory (``retrieve``) or searched (``query``)."""

    kind: Literal["retrieved"] = "retrieved"
    log_level: ClassVar[int] = logging.DEBUG
    operation: Literal["retrieve", "query"]
    item_ids: tuple[str, ...]
    """The item read, or the hits of a query (best first)."""
    tokens: int
    """Tokens of the content returned (0 for a query)."""
    query: str | None = None
    """The query text (cut to 200 characters), for a query."""


class LLMCalled(MemoryNotice):
    """An LLM call of an agent (:class:`~agent_memory.agent.loop.MemoryAgent`) was answered: the
    tokens its provider reported, the prompt's cache reads and writes among them, and what the
    call cost. One per call, after the answer is recorded."""

    kind: Literal["llm_called"] = "llm_called"
    log_level: ClassVar[int] = logging.DEBUG
    turn_id: str
    """The turn the call belongs to."""
    step: int
    """The call's 1-based position in its run."""
    model: str | None
    """The model that answered, as the provider named it (``None``: not reported)."""
    prompt_tokens: int | None
    """The whole prompt, cache reads and writes included (``None``: not reported)."""
    completion_tokens: int | None
    """The answer (``None``: not reported)."""
    cache_read_tokens: int | None
    """Prompt tokens read from the provider's prompt cache (``None``: not reported)."""
    cache_write_tokens: int | None
    """Prompt tokens written to the provider's prompt cache (Anthropic; ``None``: not reported,
    as OpenAI never does)."""
    cost_usd: Decimal | None
    """What the call cost in USD (every part), priced from the reported usage; ``None``: not
    priced (``unpriced_reason``)."""
    price_model: str | None
    """The price model's label (its ``genai-prices`` model id); ``None``: none."""
    unpriced_reason: str | None = None
    """Why ``cost_usd`` is ``None``."""


class EventApplied(MemoryNotice):
    """A journaled memory event was applied (or refused) by an
    :class:`~agent_memory.agent.events.EventProcessor`: it is marked ``applied`` (or ``failed``)
    in the event journal, once."""

    kind: Literal["event_applied"] = "event_applied"
    log_level: ClassVar[int] = logging.DEBUG
    event_id: str
    """The journaled event (``qevt_…``)."""
    event_kind: str
    """Which event: ``user_message``, ``tool_result``, ... (an ``EventKind`` value)."""
    seq: int
    """Its place in the journal (1 for the first event ever journaled)."""
    status: Literal["applied", "failed"]
    """``applied``, or ``failed``: the manager refused it (a bad argument); it is not retried."""
    recovered: bool = False
    """``True``: its effect was found already written (by a process killed before it could mark
    the event applied), so it was only marked, not applied twice."""
    error: str | None = None
    """Why it failed (short), for ``failed``."""


@runtime_checkable
class MemoryObserver(Protocol):
    """Hears the notices of a memory. Called synchronously, in the thread that caused the notice,
    possibly from several threads at once; keep it quick and thread-safe."""

    def on_notice(self, notice: MemoryNotice) -> None:
        """Handle one notice (ignore kinds you do not know)."""
        ...


class NoticeRecorder:
    """An observer that keeps every notice, oldest first (for tests and diagnostics)."""

    def __init__(self) -> None:
        self.notices: list[MemoryNotice] = []
        self._lock = threading.Lock()

    def on_notice(self, notice: MemoryNotice) -> None:
        with self._lock:
            self.notices.append(notice)

    def of_type(self, kind: type[MemoryNotice]) -> list[MemoryNotice]:
        """The recorded notices of one class, oldest first."""
        with self._lock:
            return [notice for notice in self.notices if isinstance(notice, kind)]


class ObserverList:
    """The observers of one memory, and how notices reach them: logged first, then each observer
    in the order added; an observer that raises is logged and the others still run."""

    def __init__(self, observers: Iterable[MemoryObserver] = ()) -> None:
        self._observers: list[MemoryObserver] = []
        self._levels: dict[type[MemoryNotice], int] = {}
        self._lock = threading.Lock()
        for observer in observers:
            self.add(observer)

    def log_at(self, kind: type[MemoryNotice], level: int) -> None:
        """Log the notices of class ``kind`` (and its subclasses) at ``level`` instead of their
        own ``log_level``; observers still hear every one. A replay of recorded runs logs
        :class:`Truncated` at ``logging.DEBUG``: it counts them in its report, where a live agent's
        memory warns of each."""
        with self._lock:
            self._levels[kind] = level

    def _level(self, notice: MemoryNotice) -> int:
        with self._lock:
            for kind, level in self._levels.items():
                if isinstance(notice, kind):
                    return level
        return notice.log_level

    def add(self, observer: MemoryObserver) -> None:
        """Add an observer.

        Raises:
            TypeError: if it has no callable ``on_notice``.
        """
        if not callable(getattr(observer, "on_notice", None)):
            raise TypeError(f"an observer needs an on_notice(notice) method; got {type(observer).__name__}")
        with self._lock:
            self._observers.append(observer)

    def notify(self, notice: MemoryNotice) -> None:
        """Log ``notice`` (at its ``log_level``, or the one :meth:`log_at` set) and hand it to
        every observer; never raises (``Exception`` subclasses)."""
        logger.log(self._level(notice), notice.describe())
        with self._lock:
            observers = list(self._observers)
        for observer in observers:
            try:
                observer.on_notice(notice)
            except Exception:  # noqa: BLE001 - an observer must never break the memory
                logger.exception("memory observer %r failed on a %s notice", observer, notice.kind)

    def __len__(self) -> int:
        with self._lock:
            return len(self._observers)

    def __iter__(self) -> Iterator[MemoryObserver]:
        with self._lock:
            return iter(list(self._observers))
