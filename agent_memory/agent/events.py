"""Serial, durable processing of memory events (after team9's agent framework,
github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0: its persistent queue, here
the event journal; execution modes, stepping, step lock; observers hear notices).

An :class:`EventProcessor` stands in front of a :class:`~agent_memory.kernel.manager.MemoryManager`:
every event (a user message, an answer, tool calls, a tool result, a store, a forget, a pin, a
compaction request, a usage report: one typed model per kind, :mod:`agent_memory.models.events`,
each applied by its own handler: the table ``_HANDLERS`` at the end of this module) is first journaled in the memory's
:class:`~agent_memory.storage.journal.EventJournal` (``events.sqlite3``, or a table), then applied, one at
a time, oldest first, under the memory's :class:`~agent_memory.agent.step_lock.StepLock`:

- **auto** mode (the default): :meth:`EventProcessor.dispatch` applies the pending events at once, then
  runs a pending truncation and a pending compaction, and returns the applied event.
- **stepping** mode: ``dispatch`` only journals; each :meth:`EventProcessor.step` does one thing,
  in this order: apply the oldest event; else run a pending truncation
  (:attr:`MemoryManager.truncation_required`); else run a pending compaction; and says what it
  did (:class:`StepResult`). For debugging, and for generating data step by step.

**Exactly once.** An event is marked ``applying`` (committed) before its effect is written and
``applied`` after. A process killed in between leaves it ``applying``; the next processor checks
whether its effect exists before it applies it: the raw traces of an ingest carry the event id as
``correlation_id``, a store and a tool result journaled with its content get a memory id derived
from the event id (:func:`event_memory_id`), and pins, forgets, compaction requests and usage
reports are idempotent. So after any crash every journaled event is applied once: none lost, none
twice. The restarted manager rebuilds its in-process state (pending tool calls, the working
context) from the raw traces when it is constructed.

**One write per result.** In auto mode a tool result is stored first (durable), under
:func:`result_memory_id` (the conversation, the call, the sha256 of its bytes), and its event is
journaled with that memory id and a bounded preview, never a second copy of the bytes (issue #38).
A crash between the two leaves a stored item that no event names: the call stays unanswered, and
the same result dispatched again finds the item under the same id; otherwise it stays an ordinary
item (retrievable, found by queries, removed by ``forget``), named by no trace.

**Several processes.** The step lock keeps two processes from applying events of one memory at
once, and it dies with its holder: a killed holder's lock is free at once (team9's stays locked). A
MemoryManager keeps in-process state (the turn counter, the working context), so only one live
manager should apply a memory's events: other processes dispatch in stepping mode (they only
journal) and the applying process steps or dispatches in auto mode. A processor whose manager
missed events another live manager applied refuses to apply more
(:class:`~agent_memory.errors.ConfigurationError`): open a new manager and processor.

**Observers** of the manager hear every ingest, compaction, truncation and retrieval (as before)
and, from the processor, the notice :class:`~agent_memory.observers.EventApplied` for each event applied or
refused.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from enum import StrEnum
from secrets import token_hex
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict

from agent_memory.agent.step_lock import DEFAULT_STEP_LOCK_TIMEOUT_S, StepLock
from agent_memory.errors import (
    ConfigurationError,
    EventFailedError,
    InvalidArgumentError,
    IsolationError,
    ItemNotFoundError,
)
from agent_memory.ids import derived_memory_id
from agent_memory.kernel.budget import BudgetCheck
from agent_memory.kernel.manager import MemoryManager
from agent_memory.models.events import (
    AssistantResponseEvent,
    CompactionRequestEvent,
    Event,
    MemoryForgetEvent,
    MemoryMarkCriticalEvent,
    MemoryStoreEvent,
    StoreArguments,
    ToolIntentEvent,
    ToolResultEvent,
    TraceEvent,
    UsageReportEvent,
    UserMessageEvent,
    read_event,
)
from agent_memory.models.items import encoded_once
from agent_memory.models.messages import Message, ToolCall
from agent_memory.models.traces import RawTraceItem, tool_result_preview
from agent_memory.observers import EventApplied, MemoryObserver, logger
from agent_memory.storage.journal import EventJournal, EventKind, EventStatus, JournalEntry
from agent_memory.storage import common
from agent_memory.storage.contracts import sha256_hex

__all__ = [
    "DEFAULT_KEEP_APPLIED_EVENTS",
    "EventProcessor",
    "ExecutionMode",
    "StepResult",
    "event_memory_id",
    "result_memory_id",
]

DEFAULT_KEEP_APPLIED_EVENTS = 1_000
"""Applied (and failed) events kept in the journal for inspection; older ones are deleted (open
events never are). A tool result journaled whole (stepping mode) can be megabytes, so the journal must not
grow for ever."""

PRUNE_EVERY_EVENTS = 64
"""The journal is pruned after every this many applied events."""

MAX_ERROR_CHARS = 1_000
"""Longest refusal message kept with a failed event, in characters."""

REFUSALS = (ValueError, TypeError, ItemNotFoundError, IsolationError)
"""Errors that mean the event itself is wrong and can never apply (``InvalidArgumentError``,
``InvalidIdError``, ``TransformError``, ``IngestError`` are ``ValueError`` s; an unknown item; a
sub-agent's write into its parent's memory):
it is marked ``failed`` and the next event is applied. Any other error (a full disk, a lock held too long)
leaves it open, retried by the next step."""

_MANAGER_TOKENS: weakref.WeakKeyDictionary[MemoryManager, str] = weakref.WeakKeyDictionary()
_TOKENS_LOCK = threading.Lock()


def _manager_token(manager: MemoryManager) -> str:
    """An id of this manager object (processors sharing a manager share its state)."""
    with _TOKENS_LOCK:
        return _MANAGER_TOKENS.setdefault(manager, token_hex(8))


def event_memory_id(event_id: str) -> str:
    """The memory id under which a journaled store event, or a tool result event journaled with its
    content, stores that content when it is applied (unless the store names its own ``item_id``):
    derived from the event id, so a retried event finds it."""
    return derived_memory_id(f"event:{event_id}")


def result_memory_id(agent_id: str, tool_call_id: str, content_sha256: str) -> str:
    """The memory id under which a tool result is stored before its event is journaled (see
    :meth:`EventProcessor.dispatch`): derived from the conversation, the call and the sha256 of the
    result's bytes (:func:`~agent_memory.models.items.content_to_bytes`), so the same result of
    the same call dispatched again (a retry after a crash between the store and the journal)
    finds the item stored by the first try instead of storing a second one."""
    return derived_memory_id(f"result:{agent_id}/{tool_call_id}/{content_sha256}")


class ExecutionMode(StrEnum):
    """How :meth:`EventProcessor.dispatch` treats an event."""

    AUTO = "auto"
    """Apply it (and everything journaled before it) at once, then pending truncation and compaction."""
    STEPPING = "stepping"
    """Only journal it; :meth:`EventProcessor.step` applies events one at a time."""


class StepResult(BaseModel):
    """What one :meth:`EventProcessor.step` did (team9's ``StepResult``)."""

    model_config = ConfigDict(frozen=True)

    step_id: str
    """The step lock's id for this step (``step_…``)."""
    event_processed: bool
    """Whether an event was applied (or refused: see ``event.status``)."""
    event: JournalEntry | None = None
    """The event, as stored after the step (``applied`` or ``failed``); ``None`` if none."""
    truncation_performed: bool = False
    """Whether the oldest raw turns were truncated (only when no event was pending)."""
    truncated_turn_ids: tuple[str, ...] = ()
    """The turns truncated, oldest first."""
    compaction_performed: bool = False
    """Whether a compaction ran (only when no event and no truncation was pending)."""
    compacted_turn_ids: tuple[str, ...] = ()
    """The turns the compaction moved to the archive, oldest first (may be empty)."""
    has_pending_operations: bool
    """Whether another step has work: events pending, or a truncation or compaction."""
    pending_event_count: int
    """Events still waiting in the journal to be applied."""


class EventProcessor:
    """Journals a memory's events and applies them serially, exactly once (see the module
    docstring).

    Args:
        manager: the memory's kernel; events are applied through its public methods.
        mode: ``"auto"`` or ``"stepping"`` (:class:`ExecutionMode`); settable later
            (:attr:`execution_mode`).
        journal: the event journal; ``None``: the memory backend's journal of the manager's agent
            (``events.sqlite3`` in its directory, a Postgres table, or the log ``journal``).
        observers: added to the manager and its memory: they hear ingest, compaction,
            truncation, retrieval and :class:`~agent_memory.observers.EventApplied`.
        tool_definitions: the tool definitions sent with each prompt, counted when a step truncates or
            compacts (as :meth:`MemoryManager.compact` counts them).
        lock_timeout_s: how long a step or an auto-mode dispatch waits for the step lock, in
            seconds, unless the call says otherwise.
        keep_applied: applied and failed events kept in the journal (older ones deleted);
            ``None``: keep every event.

    Raises:
        InvalidArgumentError: for an unknown mode.
        StoreError: if the journal cannot be opened.
    """

    def __init__(
        self,
        manager: MemoryManager,
        *,
        mode: ExecutionMode | str = ExecutionMode.AUTO,
        journal: EventJournal | None = None,
        observers: Iterable[MemoryObserver] = (),
        tool_definitions: Sequence[dict[str, Any]] = (),
        lock_timeout_s: float = DEFAULT_STEP_LOCK_TIMEOUT_S,
        keep_applied: int | None = DEFAULT_KEEP_APPLIED_EVENTS,
    ) -> None:
        self.manager = manager
        self.execution_mode = mode  # validated by the setter
        backend = manager.memory.backend
        self.journal = journal if journal is not None else common.journal(backend, manager.agent_id)
        self.step_lock = StepLock(backend.locks(manager.agent_id), key=f"{backend.url}|{manager.agent_id}")
        self.tool_definitions = list(tool_definitions)
        self.lock_timeout_s = lock_timeout_s
        self.keep_applied = keep_applied
        for observer in observers:
            manager.observers.add(observer)
            manager.memory.add_observer(observer)
        self._token = _manager_token(manager)
        self._known_seq = self.journal.last_closed()[0]  # the manager was built after these were applied
        self._owner: int | None = None
        self._applied_since_prune = 0

    def __repr__(self) -> str:
        return f"EventProcessor({self.manager.agent_id!r}, mode={self._mode.value}, pending={self.pending_count})"

    def close(self) -> None:
        """Close the journal's database connection (reopened by the next use). The manager and its
        memory stay open: close them yourself."""
        self.journal.close()

    # -- mode and views ------------------------------------------------------------------------
    @property
    def execution_mode(self) -> ExecutionMode:
        """``auto`` or ``stepping``; set it to switch (events already journaled stay pending until
        the next auto dispatch or step)."""
        return self._mode

    @execution_mode.setter
    def execution_mode(self, mode: ExecutionMode | str) -> None:
        try:
            self._mode = ExecutionMode(mode)
        except ValueError:
            raise InvalidArgumentError(f"execution mode is 'auto' or 'stepping', not {mode!r}") from None

    def pending_events(self) -> list[JournalEntry]:
        """The events not applied yet, oldest first."""
        return self.journal.pending()

    @property
    def pending_count(self) -> int:
        """How many events wait to be applied."""
        return self.journal.open_count()

    @property
    def has_pending_truncation(self) -> bool:
        """Whether a step would truncate (see :attr:`MemoryManager.truncation_required`)."""
        return self.manager.truncation_required

    @property
    def has_pending_compaction(self) -> bool:
        """Whether a compaction is requested (:attr:`MemoryManager.compaction_required`)."""
        return self.manager.compaction_required

    def is_step_locked(self) -> bool:
        """Whether a step runs now, here or in another process (a dead holder does not count)."""
        return self.step_lock.is_locked()

    def current_step_id(self) -> str | None:
        """The running step's id, or ``None`` when no step runs."""
        return self.step_lock.current_step_id()

    # -- dispatch ------------------------------------------------------------------------------
    def dispatch(self, event: Event | EventKind | str, payload: Mapping[str, Any] | None = None, *,
                 timeout_s: float | None = None) -> JournalEntry:
        """Journal an event; in auto mode also apply the pending events (this event and every one before
        it), then any pending truncation and compaction.

        A tool result to store (a :class:`~agent_memory.models.events.ToolResultEvent` with a
        ``result``, not ``is_error``, not ``inline``) dispatched in auto mode, answering a call the
        manager has recorded, is stored in the memory first (:meth:`MemoryManager.store_tool_result`,
        durable when it returns, under :func:`result_memory_id`), and the event journaled holds its
        memory id and preview, not its bytes: one write of the result. Otherwise (stepping mode, a
        call not recorded yet) the event holds the result and applying it stores it.

        Args:
            event: the event (a model of :mod:`agent_memory.models.events`, such as
                ``UserMessageEvent(content="hi")``), or its kind (:class:`EventKind`, or its value
                ``"user_message"``) with ``payload``.
            payload: with a kind: the event's fields (``{"content": "hi"}``; see the models, and
                the convenience methods); ``bytes`` and ``datetime`` values are kept. ``None``:
                none (a ``compaction_request``). Not given with a typed event.
            timeout_s: the wait for the step lock (auto mode); ``None``: ``lock_timeout_s``.

        Returns:
            The event: ``applied`` with its ``result`` in auto mode; ``queued`` in stepping mode,
            and when called from inside a step or dispatch of this processor (by an observer):
            the running dispatch applies it after the current event, or a later step does.

        Raises:
            InvalidArgumentError: for an unknown kind or a malformed payload (saying which field
                and why; :func:`~agent_memory.models.events.read_event`), or a tool result
                the memory refuses to store (nothing journaled); in auto mode, the manager's own
                error when it refuses the event (the event is then ``failed``).
            EventFailedError: in auto mode, if another process applied and refused the event.
            LockTimeoutError: in auto mode, if the step lock stayed held; the event is journaled
                and the next step or dispatch applies it: do not dispatch it again.
            StoreError: if journaling fails (nothing journaled), or applying fails for a reason
                other than the event (the event stays pending and is retried by the next step).
            ConfigurationError: if another live manager applied this memory's events since this
                processor's manager was built (see the module docstring).
        """
        if isinstance(event, str):
            typed = read_event(event, {} if payload is None else payload)
        elif isinstance(event, _EVENT_TYPES) and payload is None:
            typed = event
        else:
            raise InvalidArgumentError("dispatch takes a typed event (agent_memory.models.events) alone, or an event "
                                       "kind and its payload")
        if isinstance(typed, ToolResultEvent):
            typed = self._stored_first(typed)
        journaled = self.journal.push(typed.kind, typed.payload())  # the one write of the payload; not read back
        if self._mode is ExecutionMode.STEPPING or self._owner == threading.get_ident():
            return journaled
        own: JournalEntry | None = None
        own_error: BaseException | None = None
        with self._stepping(timeout_s):
            while (applied := self._apply_next(held=(journaled, typed))) is not None:
                if applied[0].id == journaled.id:
                    own, own_error = applied
            try:
                self._maintain()
            except Exception:  # noqa: BLE001 - the event is applied; the maintenance stays pending
                logger.warning("truncation or compaction after event %s failed; it stays pending", journaled.id,
                               exc_info=True)
        done = own if own is not None else self.journal.get(journaled.id)  # else another process applied it
        if done.status == "failed":
            if own_error is not None:
                raise own_error
            raise EventFailedError(f"event {journaled.id} ({typed.kind}) was refused: {done.error}", event_id=journaled.id,
                                   error=done.error or "")
        return done

    def step(self, *, timeout_s: float | None = None) -> StepResult:
        """Do one thing under the step lock: apply the oldest pending event; else run a pending
        truncation; else run a pending compaction; and say what was done.

        Args:
            timeout_s: the wait for the step lock; ``None``: ``lock_timeout_s``.

        Raises:
            LockTimeoutError: if another step (here or in another process) held the lock longer.
            StoreError: if applying or compacting failed for a reason other than the event (the
                event stays pending; the compaction stays requested). An event the manager
                refuses does not raise: it is returned ``failed``.
            ConfigurationError: if called from inside a step, or if another live manager applied
                this memory's events (see the module docstring).
        """
        if self._owner == threading.get_ident():
            raise ConfigurationError("step() was called from inside a step (by an observer?); dispatch instead")
        with self._stepping(timeout_s) as step_id:
            applied = self._apply_next()
            truncated: tuple[str, ...] = ()
            compacted: tuple[str, ...] = ()
            did_truncate = did_compact = False
            if applied is None:
                if self.manager.truncation_required:
                    truncated, did_truncate = self.manager.truncate_oldest(tool_definitions=self.tool_definitions), True
                elif self.manager.compaction_required:
                    compacted, did_compact = self.manager.compact(tool_definitions=self.tool_definitions).turn_ids, True
            open_events = self.journal.open_count()
            pending = open_events > 0 or self.manager.truncation_required or self.manager.compaction_required
            return StepResult(
                step_id=step_id, event_processed=applied is not None, event=applied[0] if applied else None,
                truncation_performed=did_truncate, truncated_turn_ids=truncated, compaction_performed=did_compact,
                compacted_turn_ids=compacted, has_pending_operations=pending, pending_event_count=open_events,
            )

    def drain(self, *, timeout_s: float | None = None) -> int:
        """Apply every pending event now, in order (whatever the mode), without truncating or
        compacting; returns how many were applied or refused. Raises as :meth:`step`."""
        count = 0
        with self._stepping(timeout_s):
            while self._apply_next() is not None:
                count += 1
        return count

    def _stored_first(self, event: ToolResultEvent) -> ToolResultEvent:
        """A tool result as it is journaled: when its result is to be stored, this processor
        applies at once (auto mode) and the manager knows the call, the result is stored now and
        the event names it (``memory_id``, ``preview``) instead of holding it; else the event as
        it is (see :meth:`dispatch`)."""
        if (event.memory_id is not None or event.is_error or event.inline or self._mode is ExecutionMode.STEPPING
                or self.manager.call_turn(event.tool_call_id) is None):
            return event
        result, call_id = event.result, event.tool_call_id
        with encoded_once(result) as (data, _):  # the store and the preview reuse these bytes
            memory_id = self.manager.store_tool_result(
                call_id, result, name=event.name,
                item_id=result_memory_id(self.manager.agent_id, call_id, sha256_hex(data)),
                **event.store_arguments.given(),
            )
            preview = tool_result_preview(result)
        return ToolResultEvent(tool_call_id=call_id, name=event.name, source_event=event.source_event,
                               memory_id=memory_id, preview=preview)

    # -- the manager's operations, journaled ------------------------------------------------------
    def _result(self, event: JournalEntry, key: str) -> Any:
        if event.status != "applied" or not isinstance(event.result, dict):
            return None
        return event.result.get(key)

    def user_message(self, content: str, *, images: Sequence[str] = (), source_event: str | None = None) -> str | None:
        """:meth:`MemoryManager.ingest_user_message` as an event. Returns the turn id in auto
        mode; ``None`` in stepping mode (the event is only journaled)."""
        event = UserMessageEvent(content=content, images=tuple(images), source_event=source_event)
        return self._result(self.dispatch(event), "turn_id")

    def assistant_response(self, message: Message | str, *, turn_id: str | None = None,
                           source_event: str | None = None) -> None:
        """:meth:`MemoryManager.ingest_assistant_response` as an event (its text and tool calls
        are written together)."""
        answer = message if isinstance(message, Message) else Message(role="assistant", content=message)
        self.dispatch(AssistantResponseEvent(message=answer, turn_id=turn_id, source_event=source_event))

    def tool_intent(self, calls: Sequence[ToolCall], *, turn_id: str | None = None,
                    source_event: str | None = None) -> None:
        """:meth:`MemoryManager.ingest_tool_intent` as an event."""
        self.dispatch(ToolIntentEvent(calls=tuple(calls), turn_id=turn_id, source_event=source_event))

    def tool_result(self, tool_call_id: str, result: Any, *, is_error: bool = False, name: str | None = None,
                    source_event: str | None = None, inline: bool = False, **store_arguments: Any) -> str | None:
        """:meth:`MemoryManager.ingest_tool_result` as an event: in auto mode the result (text,
        JSON data or ``bytes``) is stored, then the event is journaled with its memory id (see
        :meth:`dispatch`); in stepping mode the event is journaled with the result, which a step
        stores under :func:`event_memory_id` of the event. ``inline`` keeps the result in the
        conversation as text, unstored; ``store_arguments`` are ``type``, ``media_type``,
        ``source``, ``title`` (:class:`~agent_memory.models.events.StoreArguments`). Returns the
        memory id in auto mode (``None`` for an error or inline result, and in stepping mode)."""
        event = ToolResultEvent(tool_call_id=tool_call_id, result=result, is_error=is_error, name=name,
                                source_event=source_event, inline=inline,
                                store_arguments=StoreArguments(**store_arguments))
        return self._result(self.dispatch(event), "memory_id")

    def store(self, content: Any, **arguments: Any) -> str | None:
        """:meth:`AgentMemory.store` as an event (same arguments but ``allow_empty``; the id is
        :func:`event_memory_id` of the event unless ``item_id`` is given). Returns the memory id
        in auto mode, ``None`` in stepping mode."""
        return self._result(self.dispatch(MemoryStoreEvent(content=content, **arguments)), "memory_id")

    def forget(self, item_id: str) -> bool | None:
        """:meth:`MemoryManager.forget` as an event. Returns whether the item was still stored
        (auto mode), ``None`` in stepping mode."""
        return self._result(self.dispatch(MemoryForgetEvent(item_id=item_id)), "removed")

    def pin_item(self, item_id: str) -> None:
        """:meth:`MemoryManager.pin_item` as an event (``memory_mark_critical``)."""
        self.dispatch(MemoryMarkCriticalEvent(item_id=item_id))

    def pin_fact(self, fact: str, *, tags: Sequence[str] = ()) -> str | None:
        """:meth:`MemoryManager.pin_fact` as an event (``memory_mark_critical``). Returns the
        fact's id in auto mode, ``None`` in stepping mode."""
        return self._result(self.dispatch(MemoryMarkCriticalEvent(fact=fact, tags=tuple(tags))), "fact_id")

    def request_compaction(self) -> None:
        """:meth:`MemoryManager.request_compaction` as an event (in auto mode the compaction then
        runs at once; in stepping mode a later step runs it)."""
        self.dispatch(CompactionRequestEvent())

    def observe_usage(self, prompt_tokens: int | None, *, estimate: int | None = None) -> BudgetCheck | None:
        """:meth:`MemoryManager.observe_usage` as an event. Returns the check in auto mode,
        ``None`` in stepping mode."""
        event = self.dispatch(UsageReportEvent(prompt_tokens=prompt_tokens, estimate=estimate))
        return BudgetCheck.model_validate(event.result) if event.status == "applied" else None

    # -- processing ----------------------------------------------------------------------------
    @contextmanager
    def _stepping(self, timeout_s: float | None) -> Iterator[str]:
        """Hold the step lock (other threads and processes wait) and check the manager is fresh."""
        wait = self.lock_timeout_s if timeout_s is None else timeout_s
        with self.step_lock.hold(wait) as step_id:
            self._check_fresh()
            self._owner = threading.get_ident()
            try:
                yield step_id
            finally:
                self._owner = None

    def _check_fresh(self) -> None:
        seq, applied_by = self.journal.last_closed()
        if seq > self._known_seq and applied_by not in (None, self._token):
            raise ConfigurationError(
                f"another MemoryManager applied events to {self.manager.agent_id!r} (up to event #{seq}) since this "
                "one was built: its state is stale. Open a new MemoryManager and EventProcessor, and let one "
                "process apply events (others dispatch in stepping mode)."
            )

    def _apply_next(self, held: tuple[JournalEntry, Event] | None = None,
                    ) -> tuple[JournalEntry, BaseException | None] | None:
        """Apply the oldest open event (under the step lock); ``None`` if there is none.

        ``held``: an event this processor just journaled, and its typed form in hand: when it is
        the oldest open one and still ``queued``, it is applied from that form, and the journal
        is asked only for its id and status (the payload, perhaps megabytes, is not read back)."""
        head = self.journal.peek_open() if held is not None else None
        typed: Event | None = None
        if held is not None and head == (held[0].id, "queued"):
            entry: JournalEntry | None = held[0]
            typed = held[1]
        elif held is not None and head is None:
            return None
        else:
            entry = self.journal.next_open()
        if entry is None:
            return None
        try:
            event = typed if typed is not None else read_event(entry.kind, entry.payload)
        except InvalidArgumentError as exc:  # a stored payload its kind no longer reads: never applicable
            return self._refused(entry, exc)
        handler = _HANDLERS[type(event)]
        recovered, result = False, None
        if entry.status == "applying":  # interrupted: its effect may be written already
            recovered, result = handler.effect(self.manager, event, entry.id)
        else:
            self.journal.mark_applying(entry.id)
        if not recovered:
            try:
                result = handler.apply(self.manager, event, entry.id)
            except REFUSALS as exc:
                return self._refused(entry, exc)
        applied = self._close(entry, "applied", result=result)
        self._closed(applied, recovered=recovered)
        return applied, None

    def _refused(self, event: JournalEntry, exc: BaseException) -> tuple[JournalEntry, BaseException]:
        """Mark an event the manager refused ``failed``, with why."""
        failed = self._close(event, "failed", error=f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS])
        self._closed(failed, recovered=False)
        return failed, exc

    def _close(self, event: JournalEntry, status: EventStatus, *, result: Any = None,
               error: str | None = None) -> JournalEntry:
        """Mark ``event`` applied or failed (as :meth:`EventJournal.mark_applied` does, not
        durable at once) and return it as now stored, without reading it back."""
        self.journal.set_status(event.id, status, result=result, error=error, applied_by=self._token, durable=False)
        return event.model_copy(update={"status": status, "result": result, "error": error, "applied_at": time.time()})

    def _closed(self, event: JournalEntry, *, recovered: bool) -> None:
        self._known_seq = max(self._known_seq, event.seq)
        self.manager.observers.notify(EventApplied(
            agent_id=self.manager.agent_id, event_id=event.id, event_kind=event.kind.value, seq=event.seq,
            status="failed" if event.status == "failed" else "applied", recovered=recovered, error=event.error,
        ))
        self._applied_since_prune += 1
        if self.keep_applied is not None and self._applied_since_prune >= PRUNE_EVERY_EVENTS:
            self._applied_since_prune = 0
            self.journal.prune(self.keep_applied)

    def _maintain(self) -> None:
        """Run a pending truncation, then a pending compaction (auto mode, after the pending events)."""
        if self.manager.truncation_required:
            self.manager.truncate_oldest(tool_definitions=self.tool_definitions)
        if self.manager.compaction_required:
            self.manager.compact(tool_definitions=self.tool_definitions)


# -- one handler per kind of event ------------------------------------------------------------------
def _source(event: TraceEvent) -> dict[str, str]:
    """The ``source_event`` keyword of an ingest, when the event names one (else the manager's default)."""
    return {"source_event": event.source_event} if event.source_event else {}


def _traces_of(manager: MemoryManager, event_id: str) -> list[RawTraceItem]:
    """The raw traces (active or archived) an event wrote, by seq."""
    store = manager.traces
    found = {item.id: item for item in (*store.read_archive(), *store.list_raw()) if item.correlation_id == event_id}
    return sorted(found.values(), key=lambda item: (item.turn_id, item.seq))


def _applied_again_safely(manager: MemoryManager, event: Event, event_id: str) -> tuple[bool, Any]:
    """The effect of an idempotent kind: never taken as written (applying it again is safe)."""
    return False, None


def _turn_written(manager: MemoryManager, event: Event, event_id: str) -> tuple[bool, Any]:
    """Whether an ingest's traces are written, and its result (the turn)."""
    traces = _traces_of(manager, event_id)
    return (True, {"turn_id": traces[0].turn_id}) if traces else (False, None)


def _result_written(manager: MemoryManager, event: Event, event_id: str) -> tuple[bool, Any]:
    """Whether a tool result's trace is written, and its result (the memory id it names)."""
    traces = _traces_of(manager, event_id)
    return (True, {"memory_id": traces[0].tool_result_ref}) if traces else (False, None)


def _item_stored(manager: MemoryManager, event: MemoryStoreEvent, event_id: str) -> tuple[bool, Any]:
    """Whether a store's item is stored, and its result (its memory id)."""
    item_id = event.item_id or event_memory_id(event_id)
    return (True, {"memory_id": item_id}) if item_id in manager.memory else (False, None)


def _apply_user_message(manager: MemoryManager, event: UserMessageEvent, event_id: str) -> Any:
    turn = manager.ingest_user_message(event.content, images=event.images, correlation_id=event_id, **_source(event))
    return {"turn_id": turn}


def _apply_assistant_response(manager: MemoryManager, event: AssistantResponseEvent, event_id: str) -> Any:
    manager.ingest_assistant_response(event.message, turn_id=event.turn_id, correlation_id=event_id,
                                      **_source(event))
    return {"turn_id": event.turn_id or manager.tracker.current_turn_id}


def _apply_tool_intent(manager: MemoryManager, event: ToolIntentEvent, event_id: str) -> Any:
    manager.ingest_tool_intent(event.calls, turn_id=event.turn_id, correlation_id=event_id, **_source(event))
    return {"turn_id": event.turn_id or manager.tracker.current_turn_id} if event.calls else None


def _apply_tool_result(manager: MemoryManager, event: ToolResultEvent, event_id: str) -> Any:
    if event.memory_id is not None:  # stored before it was journaled
        stored = manager.ingest_stored_tool_result(event.tool_call_id, event.memory_id, preview=event.preview,
                                                   name=event.name, correlation_id=event_id, **_source(event))
        return {"memory_id": stored}
    item_id = manager.ingest_tool_result(
        event.tool_call_id, event.result, is_error=event.is_error, name=event.name, correlation_id=event_id,
        item_id=event_memory_id(event_id), inline=event.inline, **_source(event), **event.store_arguments.given(),
    )
    return {"memory_id": item_id}


def _apply_memory_store(manager: MemoryManager, event: MemoryStoreEvent, event_id: str) -> Any:
    arguments = {**event.keywords(), "item_id": event.item_id or event_memory_id(event_id)}
    return {"memory_id": manager.memory.store(event.content, **arguments)}


def _apply_memory_forget(manager: MemoryManager, event: MemoryForgetEvent, event_id: str) -> Any:
    return {"removed": manager.forget(event.item_id)}


def _apply_memory_mark_critical(manager: MemoryManager, event: MemoryMarkCriticalEvent, event_id: str) -> Any:
    if event.item_id is not None:
        manager.pin_item(event.item_id)
        return {"item_id": event.item_id}
    assert event.fact is not None  # the model holds one of them
    return {"fact_id": manager.pin_fact(event.fact, tags=event.tags)}


def _apply_compaction_request(manager: MemoryManager, event: CompactionRequestEvent, event_id: str) -> Any:
    manager.request_compaction()
    return None


def _apply_usage_report(manager: MemoryManager, event: UsageReportEvent, event_id: str) -> Any:
    return manager.observe_usage(event.prompt_tokens, estimate=event.estimate).model_dump(mode="json")


class _Handler(NamedTuple):
    """How one kind of event is applied: ``apply(manager, event, event_id)`` writes its effect
    through the manager and returns its result as JSON data; ``effect(manager, event, event_id)``
    says whether an interrupted event's effect is written already, and the result it had."""

    apply: Callable[[MemoryManager, Any, str], Any]
    effect: Callable[[MemoryManager, Any, str], tuple[bool, Any]] = _applied_again_safely


_HANDLERS: dict[type[BaseModel], _Handler] = {
    UserMessageEvent: _Handler(_apply_user_message, _turn_written),
    AssistantResponseEvent: _Handler(_apply_assistant_response, _turn_written),
    ToolIntentEvent: _Handler(_apply_tool_intent, _turn_written),
    ToolResultEvent: _Handler(_apply_tool_result, _result_written),
    MemoryStoreEvent: _Handler(_apply_memory_store, _item_stored),
    MemoryForgetEvent: _Handler(_apply_memory_forget),
    MemoryMarkCriticalEvent: _Handler(_apply_memory_mark_critical),
    CompactionRequestEvent: _Handler(_apply_compaction_request),
    UsageReportEvent: _Handler(_apply_usage_report),
}
"""The handler of each kind of event (:data:`~agent_memory.models.events.Event`): a new kind is
one model there and one entry here."""

_EVENT_TYPES = tuple(_HANDLERS)
