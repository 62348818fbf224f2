"""The MemoryManager: the trace memory kernel of one agent (AutoByteus' MemoryManager,
github.com/AutoByteus/autobyteus, autobyteus/memory/; the soft / hard / truncation thresholds of
team9's agent framework, github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0).

It records what happens (AutoByteus' ingest operations: user message, tool intent, tool result,
assistant response) as RAW_TRACE lines, keeps the Working Context Snapshot the LLM is given, and
keeps it inside the model's budget:

- **ingest**: every event becomes a raw trace of its turn (:class:`~agent_memory.kernel.turns.TurnTracker`)
  and a message of the working context. A tool result's full content goes to the AgentMemory; its
  trace carries ``tool_result_ref`` and a bounded preview, its message the reference (the
  presentation policy shows it in full once, then as a citation). A result keeps its call's turn,
  even when it arrives after the next user message.
- **budget**: after each call :meth:`observe_usage` checks the provider's ``prompt_tokens`` (our
  count only when none is reported) against the soft / hard / over thresholds
  (:class:`~agent_memory.kernel.budget.TokenBudget`); from the hard threshold a compaction is
  requested, and it runs before the next call (:meth:`prepare_compaction`).
- **compaction**: whole turns outside the raw tail (default 4 turns; the current turn never) are
  summarized into an episode and facts and archived (:class:`~agent_memory.kernel.compactor.Compactor`);
  the working context is reset to the Compaction Snapshot (system prompt, memory bundle, raw tail,
  current turn). If the prompt is still above the target (half the budget by default), the oldest
  raw turns are truncated to the archive without a summary, and observers hear of it. Nothing is
  ever deleted: archived turns stay searchable and retrievable by turn id.

The prompt of each call is built by :meth:`build_prompt` (tool pairs intact, stored results resolved
under the presentation policy) and its state committed by :meth:`commit` once the provider answered;
:class:`~agent_memory.kernel.assembler.LLMRequestAssembler` does both around an LLM call.
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agent_memory.errors import InvalidArgumentError, ItemNotFoundError
from agent_memory.ids import validate_agent_id, validate_memory_id
from agent_memory.kernel.budget import BudgetCheck, ModelLimits, Pressure, TokenBudget, model_limits
from agent_memory.kernel.compactor import CompactionRecord, Compactor, merge_records
from agent_memory.kernel.marks import MemoryMarks
from agent_memory.kernel.pairing import pair_tool_messages
from agent_memory.kernel.planner import CompactionPlanner
from agent_memory.kernel.retriever import Retriever
from agent_memory.kernel.snapshot_builder import CompactionSnapshotBuilder
from agent_memory.kernel.summarizer import ExtractiveSummarizer, Summarizer
from agent_memory.kernel.transcript import group_turns, messages_from_traces, render_turn
from agent_memory.kernel.turns import TurnTracker
from agent_memory.kernel.working_context import WORKING_CONTEXT_DOCUMENT, WorkingContextSnapshot
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Media, Message, ToolCall
from agent_memory.models.tool_interactions import ToolInteraction, build_tool_interactions
from agent_memory.models.traces import (
    MAX_TOOL_ERROR_CHARS,
    MAX_TRACE_CONTENT_CHARS,
    RawTraceItem,
    TraceMedia,
    TraceType,
    raw_trace_id,
    tool_result_preview,
)
from agent_memory.observers import (
    Compacted,
    CompactionRequested,
    MemoryNotice,
    MemoryObserver,
    ObserverList,
    TraceIngested,
    Truncated,
)
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import BuiltContext, ContextBuilder
from agent_memory.presentation.llm_citations import LLMCitationWriter
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel
from agent_memory.prompt_tokens import message_tokens, tool_tokens
from agent_memory.records.prepare import result_store_arguments
from agent_memory.storage.traces import TraceStore
from agent_memory.storage import common

__all__ = [
    "ASSISTANT_EVENT",
    "DEFAULT_RAW_TAIL_TURNS",
    "SOFT_PRESSURE_NOTE",
    "TOOL_INTENT_EVENT",
    "TOOL_RESULT_EVENT",
    "USER_EVENT",
    "MemoryManager",
]

FULL_RESULT_SHARE = 0.25
"""Most of the input budget one result's first showing may take (the policy's own cap, 4,000
tokens by default, applies when smaller): with a small context window a fresh 4,000-token result
would leave no room for the conversation."""

MIN_FULL_RESULT_TOKENS = 200
"""Smallest cap of a first showing, in tokens (the citation alone can take 100)."""

COUNT_CACHE_SIZE = 8_192
"""Texts whose token count is remembered (a prompt re-counts the same messages every call)."""

DEFAULT_RAW_TAIL_TURNS = 4
"""Turns kept raw after a compaction (AutoByteus keeps the last 4-6 raw turns; its compaction
snapshot's default is 4)."""

USER_EVENT = "LLMUserMessageReadyEvent"
TOOL_INTENT_EVENT = "PendingToolInvocationEvent"
TOOL_RESULT_EVENT = "ToolResultEvent"
ASSISTANT_EVENT = "LLMCompleteResponseReceivedEvent"
"""AutoByteus' source events of the four ingest operations (``source_event`` of each trace)."""

SOFT_PRESSURE_NOTE = (
    "[Memory note: the conversation uses {percent}% of the context budget. At a task break, call "
    "compact_memory to summarize older turns; nothing is lost, they stay searchable.]"
)
"""The note added to a prompt at the soft threshold (team9: "AI can compact at task break")."""


class MemoryManager(MemoryMarks):
    """The trace memory kernel of one agent.

    Args:
        memory: the agent's AgentMemory (tool results, and the conversation's search items).
        traces: the RAW_TRACE / EPISODIC / SEMANTIC trace store; ``None``: the memory's backend
            keeps them for ``agent_id`` (JSONL files in its directory, Postgres tables, or its logs).
        system_prompt: kept verbatim at the start of every prompt; ``None``: none.
        model: the model's name, for its limits (:func:`~agent_memory.kernel.budget.model_limits`).
        limits: the limits themselves (overrides ``model``).
        summarizer: makes episodes and facts; ``None``: :class:`ExtractiveSummarizer`.
        policy: how stored results are shown; ``None``: ``PresentationPolicy()``.
        citations: makes citations: a ``CitationBuilder`` or an ``LLMCitationWriter`` (goal-aware
            citations by a model); ``None``: the memory's compaction plugins.
        offer_cost_tokens: what offering the memory tools costs per call (see
            :class:`~agent_memory.presentation.context.ContextBuilder`).
        prices: the price model the agent's calls are billed under: swaps of results for their
            citations are then made when they pay with its prompt caching (see
            :class:`~agent_memory.presentation.context.ContextBuilder`); ``None``: tokens decide.
        tail_turns: raw turns kept by a compaction.
        observers: hear notices of ingest, compaction, truncation (and the memory's own).
        agent_id: the agent whose conversation this is: the backend keeps its traces, working
            context and event journal under this id, and it scopes the memory ids of its compacted
            turns, episodes and facts (:func:`~agent_memory.ids.turn_memory_id`); ``None``: the
            memory's agent id. A sub-agent sharing its parent's memory gives its own.

    Raises:
        InvalidArgumentError: if ``tail_turns`` < 1. InvalidIdError: if ``agent_id`` is malformed.
        StoreError: if the stored state cannot be read.
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        traces: TraceStore | None = None,
        system_prompt: str | None = None,
        model: str | None = None,
        limits: ModelLimits | None = None,
        summarizer: Summarizer | None = None,
        policy: PresentationPolicy | None = None,
        citations: CitationBuilder | LLMCitationWriter | None = None,
        offer_cost_tokens: int = 0,
        prices: PriceModel | None = None,
        tail_turns: int = DEFAULT_RAW_TAIL_TURNS,
        observers: Iterable[MemoryObserver] = (),
        agent_id: str | None = None,
    ) -> None:
        if not isinstance(tail_turns, int) or tail_turns < 1:
            raise InvalidArgumentError(f"tail_turns must be an int >= 1, not {tail_turns!r}")
        self.memory = memory
        self.agent_id = validate_agent_id(agent_id) if agent_id is not None else memory.agent_id
        self.observers = ObserverList(observers)
        for observer in self.observers:
            memory.add_observer(observer)
        backend = memory.backend
        self.traces = traces if traces is not None else common.traces(backend, self.agent_id)
        self.system_prompt = system_prompt
        self.budget = TokenBudget(limits if limits is not None else model_limits(model))
        self.summarizer = summarizer if summarizer is not None else ExtractiveSummarizer(counter=memory.tokens)
        self.tail_turns = tail_turns
        self.compactor = Compactor(self.traces, memory, self.summarizer, agent_id=self.agent_id)
        self.retriever = Retriever(self.traces, pinned_items=self._pinned_item_texts, counter=memory.tokens)
        self.snapshot_builder = CompactionSnapshotBuilder()
        self.planner = CompactionPlanner(self)
        self.tracker = TurnTracker(self.traces)
        self.context = WorkingContextSnapshot(common.document(backend, self.agent_id, WORKING_CONTEXT_DOCUMENT),
                                              agent_id=memory.agent_id)
        policy = policy if policy is not None else PresentationPolicy()
        cap = max(MIN_FULL_RESULT_TOKENS, int(FULL_RESULT_SHARE * self.budget.input_budget))
        if policy.full_result_max_tokens > cap:  # a first showing must leave room for the rest
            policy = policy.model_copy(update={"full_result_max_tokens": cap})
        self.presentation = ContextBuilder(
            memory, policy=policy,
            citations=citations if citations is not None else CitationBuilder(memory.plugins, memory.tokens),
            offer_cost_tokens=offer_cost_tokens, state=self.context.presentation, prices=prices,
        )
        self._lock = threading.RLock()
        self._count = functools.lru_cache(maxsize=COUNT_CACHE_SIZE)(memory.tokens.count)
        self._pending: dict[str, ToolCall | None] = {}
        self._call_turns: dict[str, str] = {}
        for item in self.traces.list_raw():  # calls made before a restart and not answered yet
            if item.trace_type == "tool_call" and item.tool_call_id:
                self._call_turns[item.tool_call_id] = item.turn_id
                self._pending[item.tool_call_id] = None
            elif item.trace_type == "tool_result" and item.tool_call_id:
                self._pending.pop(item.tool_call_id, None)
        if len(self.context) == 0 and system_prompt:
            self.context.reset([Message(role="system", content=system_prompt)], new_epoch=False)
        self._catch_up()

    def _catch_up(self) -> None:
        """Append to the working context the messages of raw traces it does not hold: appends are
        saved at checkpoints, the traces at once, so after a crash the snapshot may be behind."""
        held = self.context.build_messages()
        ids = {m.id for m in held if m.id}
        calls = {call.id for m in held for call in m.tool_calls}
        results = {m.tool_call_id for m in held if m.role == "tool"}
        missing = [
            item for item in self.traces.list_raw()
            if item.id not in ids
            and not (item.trace_type == "tool_call" and item.tool_call_id in calls)
            and not (item.trace_type == "tool_result" and item.tool_call_id in results)
        ]
        if missing:
            self.context.extend(messages_from_traces(missing))
            self.context.save()

    def __repr__(self) -> str:
        return f"MemoryManager(agent_id={self.agent_id!r}, epoch={self.context.epoch_id}, {self.budget!r})"

    def _notify(self, notice: MemoryNotice) -> None:
        self.observers.notify(notice)

    # -- ingest (AutoByteus' MemoryManager operations) ------------------------------------------
    def start_turn(self) -> str:
        """Start the next turn and return its id (:meth:`ingest_user_message` does it for you)."""
        return self.tracker.start_turn()

    def _trace(self, turn_id: str, trace_type: TraceType, source_event: str, **fields: Any) -> RawTraceItem:
        """The next raw trace of ``turn_id`` (its next seq), not written yet."""
        seq = self.tracker.next_seq(turn_id)
        return RawTraceItem(id=raw_trace_id(turn_id, seq), turn_id=turn_id, seq=seq, trace_type=trace_type,
                            source_event=source_event, **fields)

    def _write(self, items: list[RawTraceItem]) -> list[RawTraceItem]:
        """Write the traces of one event in one synced append (after a crash: all or none)."""
        self.traces.add_raw(items)
        for item in items:
            self._notify(TraceIngested(agent_id=self.agent_id, turn_id=item.turn_id, trace_id=item.id,
                                     trace_type=item.trace_type, tool_result_ref=item.tool_result_ref))
        return items

    def _record(self, turn_id: str, trace_type: TraceType, source_event: str, **fields: Any) -> RawTraceItem:
        return self._write([self._trace(turn_id, trace_type, source_event, **fields)])[0]

    def ingest_user_message(self, content: str, *, images: Sequence[str] = (), source_event: str = USER_EVENT,
                            correlation_id: str | None = None) -> str:
        """Record a (processed) user message: it starts a new turn. Returns the turn id.

        ``correlation_id`` (every ingest method takes it) is kept on the trace: an id linking it
        to a request or an event (the :class:`~agent_memory.agent.events.EventProcessor` puts its
        event id there, to know after a crash which events are already recorded).

        Raises:
            InvalidArgumentError: for content that is not text, or images that are not URLs.
        """
        with self._lock:
            turn_id = self.tracker.start_turn()
            media = TraceMedia(images=tuple(images)) if images else None
            item = self._record(turn_id, "user", source_event, content=content, media=media,
                                correlation_id=correlation_id)
            self.context.append(Message(role="user", content=content, id=item.id, ts=item.ts, turn_id=turn_id,
                                        seq=item.seq, media=Media(images=tuple(images))))
            return turn_id

    def ingest_assistant_response(self, message: Message | str, *, turn_id: str | None = None,
                                  source_event: str = ASSISTANT_EVENT, correlation_id: str | None = None) -> None:
        """Record the model's answer: its text (and reasoning) and its tool calls (each a pending
        tool intent of the turn), all in one write. One assistant message joins the working context.

        Args:
            message: the assistant message (or its text).
            turn_id: the turn; ``None``: the current one.
            correlation_id: kept on every trace (see :meth:`ingest_user_message`).
        """
        message = Message(role="assistant", content=message) if isinstance(message, str) else message
        with self._lock:
            turn = turn_id or self._current_turn()
            items: list[RawTraceItem] = []
            if message.content or message.reasoning or not message.tool_calls:
                items.append(self._trace(turn, "assistant", source_event, content=message.content or "",
                                         reasoning=message.reasoning, correlation_id=correlation_id))
            items += [self._call_trace(turn, call, TOOL_INTENT_EVENT, correlation_id) for call in message.tool_calls]
            self._write(items)
            self._note_calls(turn, message.tool_calls)
            anchor = items[0]
            self.context.append(message.model_copy(update={
                "id": anchor.id, "ts": anchor.ts, "turn_id": turn, "seq": anchor.seq,
            }))

    def ingest_tool_intent(self, calls: Sequence[ToolCall], *, turn_id: str | None = None,
                           source_event: str = TOOL_INTENT_EVENT, correlation_id: str | None = None) -> None:
        """Record tool calls the model made (when they arrive apart from the answer's text), in one
        write: they keep the turn, and one assistant message with the calls joins the working context."""
        if not calls:
            return
        with self._lock:
            turn = turn_id or self._current_turn()
            items = self._write([self._call_trace(turn, call, source_event, correlation_id) for call in calls])
            self._note_calls(turn, calls)
            self.context.append(Message(role="assistant", tool_calls=tuple(calls), id=items[0].id, ts=items[0].ts,
                                        turn_id=turn, seq=items[0].seq))

    def _call_trace(self, turn: str, call: ToolCall, source_event: str, correlation_id: str | None) -> RawTraceItem:
        return self._trace(turn, "tool_call", source_event, tool_name=call.name, tool_call_id=call.id,
                           tool_args=call.input, correlation_id=correlation_id)

    def _note_calls(self, turn: str, calls: Sequence[ToolCall]) -> None:
        """Remember written calls as pending (awaiting their results) in ``turn``."""
        for call in calls:
            self._pending[call.id] = call
            self._call_turns[call.id] = turn

    def ingest_tool_result(self, tool_call_id: str, result: Any, *, is_error: bool = False,
                           name: str | None = None, source_event: str = TOOL_RESULT_EVENT,
                           correlation_id: str | None = None, item_id: str | None = None,
                           inline: bool = False, **store_arguments: Any) -> str | None:
        """Record a tool's result, in its call's turn. The full content goes to the AgentMemory
        (its type sniffed unless ``store_arguments`` say: ``type``, ``media_type``, ``source``,
        ``title``); its trace keeps the memory id and a bounded preview (:meth:`store_tool_result`,
        then :meth:`ingest_stored_tool_result`). An error result (``is_error``) is kept as text, not
        stored.

        Args:
            correlation_id: kept on the trace (see :meth:`ingest_user_message`).
            inline: keep the result in the conversation as text instead of storing it (the answers
                of memory tools, small results): the trace holds the whole text.
            item_id: the memory id to store the result under (a deterministic one, e.g.
                :func:`~agent_memory.ids.derived_memory_id` of an event id); ``None``: a new
                random id. An item already stored under it is taken as this result, stored by an
                earlier try that did not get to write the trace (a retry after a crash), and is
                not stored again.

        Returns:
            The memory id of the stored result, ``None`` for an error result.

        Raises:
            InvalidArgumentError: if no tool call has this id (a result must answer a call).
            InvalidIdError: if ``item_id`` is malformed.
        """
        with self._lock:
            turn = self._call_turns.get(tool_call_id)
            if turn is None:
                raise InvalidArgumentError(f"no tool call {tool_call_id!r} was ingested: ingest the call first")
            call = self._pending.pop(tool_call_id, None)
            tool = name or (call.name if call is not None else None)
            if is_error:
                error = str(result)[:MAX_TOOL_ERROR_CHARS]
                item = self._record(turn, "tool_result", source_event, tool_name=tool, tool_call_id=tool_call_id,
                                    tool_error=error, correlation_id=correlation_id)
                self.context.append(Message(role="tool", tool_call_id=tool_call_id, name=tool, content=error,
                                            is_error=True, id=item.id, ts=item.ts, turn_id=turn, seq=item.seq))
                return None
            if inline:
                text = result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
                text = text[:MAX_TRACE_CONTENT_CHARS]
                item = self._record(turn, "tool_result", source_event, tool_name=tool, tool_call_id=tool_call_id,
                                    content=text, tool_result=tool_result_preview(text), correlation_id=correlation_id)
                self.context.append(Message(role="tool", tool_call_id=tool_call_id, name=tool, content=text,
                                            id=item.id, ts=item.ts, turn_id=turn, seq=item.seq))
                return None
            item_id = self._store_result(result, tool=tool, call=call, item_id=item_id,
                                         store_arguments=store_arguments)
            return self._record_result(turn, tool_call_id, item_id, preview=tool_result_preview(result), tool=tool,
                                       source_event=source_event, correlation_id=correlation_id)

    def store_tool_result(self, tool_call_id: str, result: Any, *, name: str | None = None, item_id: str | None = None,
                          **store_arguments: Any) -> str:
        """Store a tool's result in the AgentMemory (durable when this returns: on files fsynced,
        in Postgres committed) without recording it in the conversation; record it afterwards with
        :meth:`ingest_stored_tool_result`. This is the first half of :meth:`ingest_tool_result`,
        for a caller that must have the result safe before it journals the event that records it
        (the :class:`~agent_memory.agent.events.EventProcessor`: the journal then holds the memory
        id, not a second copy of the result's bytes).

        Args:
            tool_call_id: the call the result answers (it must have been ingested).
            result: the full result (text, JSON data or ``bytes``).
            name: the tool's name; ``None``: the call's.
            item_id: the memory id to store it under; ``None``: a new random id. An item already
                stored under it is taken as this result (stored by an earlier try) and not stored
                again.
            store_arguments: ``type``, ``media_type``, ``source``, ``title`` (else sniffed and
                derived from the call, as :meth:`ingest_tool_result` does).

        Returns:
            The memory id.

        Raises:
            InvalidArgumentError: if no tool call has this id, or the result cannot be stored.
            InvalidIdError: if ``item_id`` is malformed.
        """
        with self._lock:
            if tool_call_id not in self._call_turns:
                raise InvalidArgumentError(f"no tool call {tool_call_id!r} was ingested: ingest the call first")
            call = self._pending.get(tool_call_id)
        tool = name or (call.name if call is not None else None)
        return self._store_result(result, tool=tool, call=call, item_id=item_id,
                                  store_arguments=store_arguments)

    def _store_result(self, result: Any, *, tool: str | None, call: ToolCall | None,
                      item_id: str | None, store_arguments: dict[str, Any]) -> str:
        arguments = result_store_arguments(result, tool=tool, call_arguments=call.arguments if call else None,
                                           **store_arguments)
        if item_id is not None and validate_memory_id(item_id) in self.memory:
            return validate_memory_id(item_id)  # stored by an interrupted earlier try
        return self.memory.store(arguments.pop("content"), item_id=item_id, **arguments)

    def ingest_stored_tool_result(self, tool_call_id: str, item_id: str, *, preview: Any = None,
                                  name: str | None = None, source_event: str = TOOL_RESULT_EVENT,
                                  correlation_id: str | None = None) -> str:
        """Record a tool's result that is already stored in the AgentMemory (by
        :meth:`store_tool_result`, or by the caller), in its call's turn: the second half of
        :meth:`ingest_tool_result`. Its trace keeps ``item_id`` and ``preview``; nothing is read
        from or written to the item store.

        Args:
            preview: what the trace shows of the result
                (:func:`~agent_memory.models.traces.tool_result_preview` of it; cut to that bound
                here too); ``None``: no preview.
            correlation_id: kept on the trace (see :meth:`ingest_user_message`).

        Returns:
            ``item_id``.

        Raises:
            InvalidArgumentError: if no tool call has this id.
            InvalidIdError: if ``item_id`` is malformed.
            ItemNotFoundError: if no item ``item_id`` is stored (nothing is recorded).
        """
        item_id = validate_memory_id(item_id)
        with self._lock:
            turn = self._call_turns.get(tool_call_id)
            if turn is None:
                raise InvalidArgumentError(f"no tool call {tool_call_id!r} was ingested: ingest the call first")
            if item_id not in self.memory:
                raise ItemNotFoundError(f"no item {item_id} is stored: a stored result is recorded by its memory id",
                                        item_id=item_id)
            call = self._pending.pop(tool_call_id, None)
            tool = name or (call.name if call is not None else None)
            return self._record_result(turn, tool_call_id, item_id, preview=tool_result_preview(preview), tool=tool,
                                       source_event=source_event, correlation_id=correlation_id)

    def _record_result(self, turn: str, tool_call_id: str, item_id: str, *, preview: Any, tool: str | None,
                       source_event: str, correlation_id: str | None) -> str:
        """Write a stored result's trace and append its message to the working context."""
        item = self._record(turn, "tool_result", source_event, tool_name=tool, tool_call_id=tool_call_id,
                            tool_result=preview, tool_result_ref=item_id, correlation_id=correlation_id)
        self.context.append(Message(role="tool", tool_call_id=tool_call_id, name=tool, tool_result_ref=item_id,
                                    id=item.id, ts=item.ts, turn_id=turn, seq=item.seq))
        return item_id

    def _current_turn(self) -> str:
        turn = self.tracker.current_turn_id
        return turn if turn is not None else self.tracker.start_turn()

    # -- views ----------------------------------------------------------------------------------
    @property
    def pending_tool_calls(self) -> list[str]:
        """Ids of tool calls that have no result yet."""
        return list(self._pending)

    def get_working_context_messages(self) -> list[Message]:
        """The working context as stored (tool results as references), oldest first."""
        return self.context.build_messages()

    def get_raw_tail(self, tail_turns: int, exclude_turn_id: str | None = None) -> list[RawTraceItem]:
        """The raw traces of the last ``tail_turns`` active turns (except ``exclude_turn_id``)."""
        turns = [t for t in self.traces.active_turn_ids() if t != exclude_turn_id][-tail_turns:] if tail_turns > 0 else []
        return self.traces.list_raw(turns)

    def get_tool_interactions(self, turn_id: str | None = None) -> list[ToolInteraction]:
        """Tool calls paired with their results (PENDING / SUCCESS / ERROR), of one turn or all active."""
        return build_tool_interactions(self.traces.list_raw([turn_id] if turn_id else None))

    def retrieve_turn(self, turn_id: str) -> str:
        """A turn, active or archived, verbatim (``Turn N:`` as AutoByteus' compaction snapshot).

        Raises:
            ItemNotFoundError: if no trace has this turn id.
        """
        items = self.traces.find_turn(turn_id)
        if not items:
            raise ItemNotFoundError(f"no turn {turn_id!r}", item_id=turn_id)
        return render_turn(turn_id, items)

    # -- prompts --------------------------------------------------------------------------------
    def save(self) -> None:
        """Write the working context's unsaved appends (the assembler does it before each call)."""
        self.context.save()

    def build_prompt(self, *, notes: Sequence[Message] = (), full_cap: int | None = None) -> BuiltContext:
        """The messages of the next call (tool pairs intact; stored results shown per policy, as
        of the last committed call) and the presentation state they imply, not yet committed.
        ``notes`` are appended at the end (e.g. the soft-pressure note); ``full_cap`` caps this
        call's full showings of results (see :meth:`ContextBuilder.prepare`)."""
        messages = pair_tool_messages(self.context.build_messages())
        built = self.presentation.prepare(messages, full_cap=full_cap)
        if notes:
            return BuiltContext(messages=built.messages + list(notes), state=built.state, swapped_now=built.swapped_now)
        return built

    def commit(self, built: BuiltContext) -> None:
        """Record that ``built`` was sent and answered (the presentation state is saved)."""
        with self._lock:
            self.presentation.commit(built)
            self.context.commit_presentation(built.state)

    @property
    def pending_call_ids(self) -> frozenset[str]:
        """Ids of the tool calls made and not answered yet."""
        return frozenset(self._pending)

    def call_turn(self, tool_call_id: str) -> str | None:
        """The turn in which the tool call ``tool_call_id`` was recorded (answered or not);
        ``None``: this manager has recorded no such call (a result for it would be refused)."""
        with self._lock:
            return self._call_turns.get(tool_call_id)

    def count_tokens(self, messages: Sequence[Message], tool_definitions: Sequence[dict[str, Any]] = ()) -> int:
        """Our own count of a prompt (messages and tool definitions, o200k), plus what the provider
        counted beyond our count of the last prompt (its framing, a tokenizer that splits finer),
        when it reported a size: the guard that keeps the next prompt inside the budget."""
        raw = sum(message_tokens(m, self._count) for m in messages) + tool_tokens(tool_definitions, self._count)
        state = self.context.state
        if state.last_prompt_tokens is not None and state.last_estimate_tokens is not None:
            return raw + max(0, state.last_prompt_tokens - state.last_estimate_tokens)
        return raw

    def soft_notes(self) -> list[Message]:
        """The soft-pressure note for the next prompt, when the last prompt passed the soft
        threshold (and no compaction is already due); else none."""
        state = self.context.state
        tokens = state.last_prompt_tokens
        if tokens is None or state.compaction_requested or self.budget.check(tokens).pressure != Pressure.SOFT:
            return []
        percent = round(100 * tokens / self.budget.input_budget)
        return [Message(role="system", content=SOFT_PRESSURE_NOTE.format(percent=percent))]

    # -- budget ---------------------------------------------------------------------------------
    def observe_usage(self, prompt_tokens: int | None, *, estimate: int | None = None) -> BudgetCheck:
        """Check the last call's prompt size: the provider's ``prompt_tokens``, or ``estimate``
        (our count) when it reported none. From the hard threshold, a compaction is requested
        (it runs before the next call).

        Raises:
            InvalidArgumentError: if neither size is given.
        """
        if prompt_tokens is None and estimate is None:
            raise InvalidArgumentError("observe_usage needs the reported prompt_tokens or our estimate")
        reported = prompt_tokens is not None
        tokens = prompt_tokens if prompt_tokens is not None else estimate
        assert tokens is not None
        check = self.budget.check(tokens, reported=reported)
        with self._lock:
            self.context.update(last_prompt_tokens=tokens, last_estimate_tokens=estimate)
            if check.pressure >= Pressure.HARD and not self.context.state.compaction_requested:
                self.context.update(compaction_requested=True)
                self._notify(CompactionRequested(agent_id=self.agent_id, prompt_tokens=tokens, reported=reported,
                                               reason="over" if check.pressure == Pressure.OVER else "hard"))
        return check

    @property
    def compaction_required(self) -> bool:
        """A compaction must run before the next call."""
        return self.context.state.compaction_requested

    def request_compaction(self) -> None:
        """Ask for a compaction before the next call (the agent's ``compact_memory``, a developer)."""
        with self._lock:
            if not self.context.state.compaction_requested:
                self.context.update(compaction_requested=True)
                self._notify(CompactionRequested(agent_id=self.agent_id, prompt_tokens=None, reported=False,
                                               reason="requested"))

    def clear_compaction_request(self) -> None:
        self.context.update(compaction_requested=False)

    # -- compaction -----------------------------------------------------------------------------
    def prepare_compaction(self, tool_definitions: Sequence[dict[str, Any]] = ()) -> CompactionRecord | None:
        """Run the requested compaction, if any, and make sure the next prompt fits the input
        budget (``tool_definitions``: the definitions that go with it). Returns what was compacted, or
        ``None`` when nothing had to be done."""
        built = self.build_prompt()
        if not self.compaction_required and self.count_tokens(built.messages, tool_definitions) <= self.budget.input_budget:
            return None
        return self.compact(tool_definitions=tool_definitions)

    def compact(self, *, tool_definitions: Sequence[dict[str, Any]] = ()) -> CompactionRecord:
        """Compact now: whole turns outside the raw tail (the current turn excluded) become an
        episode and facts; the working context is reset to the Compaction Snapshot; if the prompt
        is still above the target, the oldest raw turns are truncated. See the module docstring.

        Raises:
            StoreError: if writing fails (the next compaction completes it).
        """
        with self._lock:
            before = self.context.state.last_prompt_tokens or self.count_tokens(self.build_prompt().messages, tool_definitions)
            current = self.tracker.current_turn_id
            older, later = self.planner.finished_turns()  # later: the current turn (and any after it)
            tail = self.planner.size_tail(older, later, tool_definitions)
            window = [t for t in older if t not in tail]
            outcome = self.compactor.compact(window) if window else CompactionRecord(turn_ids=())
            compacted = self.planner.reset(tail, later, tool_definitions)  # the prompt after the compaction, our count
            truncated, after = self.planner.truncate_to_target(tail, later, tool_definitions, compacted)
            if after > self.budget.target_tokens and not tail and current is not None:
                steps = self.planner.compact_steps(current, tool_definitions)  # one turn too long: its finished steps
                if steps is not None:
                    after = self.planner.reset(tail, later, tool_definitions)
                    outcome = merge_records(outcome, steps)
            if truncated:
                self._notify(Truncated(agent_id=self.agent_id, turn_ids=tuple(truncated), tokens_before=compacted,
                                     tokens_after=after))
            self.context.update(compaction_requested=False, last_prompt_tokens=None, last_estimate_tokens=None)
            self._notify(Compacted(
                agent_id=self.agent_id, turn_ids=outcome.turn_ids, tail_turn_ids=tuple(tail), tokens_before=before,
                tokens_after=after, epoch_id=self.context.epoch_id, summarizer=outcome.summarizer,
                fallback_reason=outcome.fallback_reason,
            ))
            outcome.turn_ids = outcome.turn_ids + tuple(truncated)
            return outcome

    @property
    def truncation_required(self) -> bool:
        """The last prompt was over the input budget (``Pressure.OVER``) and a compaction has
        nothing to summarize: every finished turn (before the current one) is inside the raw tail,
        so only dropping the oldest of them (:meth:`truncate_oldest`) shrinks the prompt. ``False``
        when no size was reported since the last compaction or truncation, or no finished turn
        is left to drop."""
        tokens = self.context.state.last_prompt_tokens
        if tokens is None or self.budget.check(tokens).pressure != Pressure.OVER:
            return False
        return 0 < len(self.planner.finished_turns()[0]) <= self.tail_turns

    def truncate_oldest(self, *, tool_definitions: Sequence[dict[str, Any]] = ()) -> tuple[str, ...]:
        """Move the oldest finished turns to the archive without a summary (still searchable and
        retrievable by turn id), one at a time, until our count of the next prompt (``tool_definitions``
        included) is at most the post-compaction target or no finished turn is left. The working
        context is reset to the Compaction Snapshot and observers hear :class:`Truncated`; the
        current turn is never dropped. A pending compaction request stays pending.

        Returns:
            The truncated turn ids, oldest first (empty: no finished turn, nothing done).

        Raises:
            StoreError: if writing fails (the next truncation or compaction completes the move).
        """
        with self._lock:
            older, later = self.planner.finished_turns()
            if not older:
                return ()
            counted = self.count_tokens(self.build_prompt().messages, tool_definitions)  # as ``after`` is counted
            before = self.context.state.last_prompt_tokens or counted
            truncated, after = self.planner.truncate_to_target(older, later, tool_definitions, max(before, self.budget.target_tokens + 1))
            self.context.update(last_prompt_tokens=None, last_estimate_tokens=None)
            self._notify(Truncated(agent_id=self.agent_id, turn_ids=tuple(truncated), tokens_before=counted,
                                 tokens_after=after))
            return tuple(truncated)

    # -- lifecycle ------------------------------------------------------------------------------
    def on(self, callback: Callable[[MemoryNotice], None]) -> None:
        """Call ``callback`` with every notice (a function as observer)."""

        class _Callback:
            def on_notice(self, notice: MemoryNotice) -> None:
                callback(notice)

        observer = _Callback()
        self.observers.add(observer)
        self.memory.add_observer(observer)

    def clear(self) -> None:
        """Forget the whole conversation and memory: stored items, traces, episodes, facts, the
        working context and what the model was shown (a new conversation; nothing else invalid
        is left: a cleared memory's citations would name items that no longer exist)."""
        with self._lock:
            self.memory.clear()
            self.traces.clear()
            self.context.clear()
            self.presentation.reset()
            self._pending.clear()
            self._call_turns.clear()
            self.tracker = TurnTracker(self.traces)
            if self.system_prompt:
                self.context.reset([Message(role="system", content=self.system_prompt)], new_epoch=False)

    def turns(self) -> dict[str, list[RawTraceItem]]:
        """Every active turn's raw traces, in order."""
        return group_turns(self.traces.list_raw())
