"""Memory events, typed: one pydantic model per kind of event an
:class:`~agent_memory.agent.events.EventProcessor` journals and applies (a user message, an answer,
tool calls, a tool result, a store, a forget, a pin, a compaction request, a usage report), and
:data:`Event`, their union discriminated by ``kind`` (as pydantic-ai's ``messages.py`` types its
message parts).

An event is checked once, when it is built (a bad value raises
:class:`~agent_memory.errors.InvalidArgumentError`, before anything is journaled). The journal
holds its kind and :meth:`payload` (its fields, JSON data once the journal's codec has written
``bytes``, ``datetime`` values and models); :func:`read_event` reads a kind and such a payload back
into the event, whether it comes from a caller (``EventProcessor.dispatch(kind, payload)``) or from
a journal, including one written before events were typed (a tool result's ``inline`` then rode
inside its ``store_arguments``: :meth:`ToolResultEvent._legacy_inline`).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator
from pydantic.fields import FieldInfo

from agent_memory.errors import InvalidArgumentError
from agent_memory.ids import validate_memory_id
from agent_memory.models.items import MemoryType, _Model
from agent_memory.models.messages import Message, ToolCall

__all__ = [
    "EVENT_ADAPTER",
    "AssistantResponseEvent",
    "CompactionRequestEvent",
    "Event",
    "MemoryForgetEvent",
    "MemoryMarkCriticalEvent",
    "MemoryStoreEvent",
    "StoreArguments",
    "TraceEvent",
    "ToolIntentEvent",
    "ToolResultEvent",
    "UsageReportEvent",
    "UserMessageEvent",
    "read_event",
]


class _EventModel(_Model):
    """What every event is: frozen, and refusing keys its kind does not know."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    def payload(self) -> dict[str, Any]:
        """Its fields but ``kind``, as the journal holds them: the required ones and those that
        differ from their default, their values as they are (``bytes``, ``datetime`` and models are
        the journal's codec to write). :func:`read_event` of ``kind`` and this payload gives the
        event back."""
        return {name: getattr(self, name) for name, field in type(self).model_fields.items()
                if name != "kind" and _given(getattr(self, name), field)}


def _given(value: Any, field: FieldInfo) -> bool:
    """Whether a field's value is to be journaled: required, or not its default (a content or a
    result is only ever compared with ``None``: it may be any object)."""
    if field.is_required():
        return True
    default = field.get_default(call_default_factory=True)
    return value is not None if default is None else bool(value != default)


class TraceEvent(_EventModel):
    """An event recorded in the conversation's raw traces; each trace carries the event's id as
    its ``correlation_id`` (how a restarted processor sees that an interrupted event took effect)."""

    source_event: str | None = None
    """The trace's ``source_event`` (AutoByteus' name of what caused it); ``None``: the
    manager's default for the kind (``LLM_USER_MESSAGE_READY_EVENT``, ...)."""


class UserMessageEvent(TraceEvent):
    """``MemoryManager.ingest_user_message``: a user message, which starts a turn."""

    kind: Literal["user_message"] = "user_message"
    content: str
    """The message's text."""
    images: tuple[str, ...] = ()
    """Image URLs attached to it (``http(s)://`` or ``data:``), in order; empty: none."""


class AssistantResponseEvent(TraceEvent):
    """``MemoryManager.ingest_assistant_response``: the model's answer and its tool calls, written
    together."""

    kind: Literal["assistant_response"] = "assistant_response"
    message: Message
    """The answer: an ``assistant`` message (given as a Message, its JSON data, or its text)."""
    turn_id: str | None = None
    """The turn it belongs to; ``None``: the current turn."""

    @field_validator("message", mode="before")
    @classmethod
    def _text_is_a_message(cls, value: Any) -> Any:
        return Message(role="assistant", content=value) if isinstance(value, str) else value

    @field_validator("message")
    @classmethod
    def _from_the_assistant(cls, value: Message) -> Message:
        if value.role != "assistant":
            raise ValueError(f"an assistant_response event's message is an assistant message, not a {value.role} one")
        return value


class ToolIntentEvent(TraceEvent):
    """``MemoryManager.ingest_tool_intent``: tool calls that arrive apart from the answer's text."""

    kind: Literal["tool_intent"] = "tool_intent"
    calls: tuple[ToolCall, ...]
    """The calls, in order (a list of ToolCalls or their JSON data); empty: nothing is recorded."""
    turn_id: str | None = None
    """The turn they belong to; ``None``: the current turn."""


class StoreArguments(_Model):
    """What a caller may say about how a tool's result is stored (``MemoryManager.ingest_tool_result``'s
    ``store_arguments``); each ``None`` is sniffed from the result or derived from its call
    (``records.prepare.result_store_arguments``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: MemoryType | None = None
    """The item's type; ``None``: sniffed from the result."""
    media_type: str | None = None
    """The result's MIME type (``text/html`` makes the index read it as a page); ``None``: sniffed."""
    source: str | None = None
    """Where it came from (a tool name, a URL); ``None``: the tool's name."""
    title: str | None = None
    """Its title; ``None``: derived from the call (``fetch({"url": ...})``) or the content."""

    def given(self) -> dict[str, Any]:
        """The arguments given (not ``None``), as keywords of ``ingest_tool_result``."""
        return self.model_dump(exclude_none=True)


class ToolResultEvent(TraceEvent):
    """``MemoryManager.ingest_tool_result``: a tool's result, in its call's turn. It holds the
    result (stored in memory when applied, unless ``is_error`` or ``inline``), or names a result
    already stored (``memory_id``, with its ``preview``): one of them.

    Raises:
        InvalidArgumentError: for both or neither of ``result`` and ``memory_id``, a malformed
            ``memory_id``, a ``memory_id`` with ``is_error``, ``inline`` or ``store_arguments`` (it
            was stored with them), or a ``preview`` without a ``memory_id``.
    """

    kind: Literal["tool_result"] = "tool_result"
    tool_call_id: str
    """The call it answers (the call must have been recorded)."""
    result: Any = None
    """The full result: text, JSON data or ``bytes`` (``None`` is a result too: the tool returned
    nothing); unused when ``memory_id`` names a stored one."""
    is_error: bool = False
    """The tool failed: ``result`` says why, kept as text in the trace, not stored."""
    name: str | None = None
    """The tool's name; ``None``: the call's."""
    inline: bool = False
    """Keep the result in the conversation as text instead of storing it (memory tools' answers,
    small results)."""
    store_arguments: StoreArguments = Field(default_factory=StoreArguments)
    """How the result is stored (its type, media type, source, title), where the caller knows."""
    memory_id: str | None = None
    """The memory id of the result, stored before the event was journaled; ``None``: the event
    holds ``result``."""
    preview: Any = None
    """With ``memory_id``: the bounded preview its trace keeps (``models.traces.tool_result_preview``
    of the result: text or small JSON data); ``None``: none."""

    @model_validator(mode="before")
    @classmethod
    def _legacy_inline(cls, data: Any) -> Any:
        """A journal written before events were typed holds ``inline`` inside ``store_arguments``:
        it is read as the event's own ``inline``. Also checks that ``result`` or ``memory_id`` is
        given (a ``result`` of ``None`` counts as given)."""
        if not isinstance(data, dict):
            return data
        arguments = data.get("store_arguments")
        if isinstance(arguments, dict) and "inline" in arguments:
            data = {**data, "store_arguments": {k: v for k, v in arguments.items() if k != "inline"}}
            data.setdefault("inline", arguments["inline"])
        if ("result" in data) == (data.get("memory_id") is not None):
            raise ValueError("a tool_result event holds its result or the memory_id of the stored result (one of them)")
        return data

    @field_validator("memory_id")
    @classmethod
    def _memory_id_form(cls, value: str | None) -> str | None:
        return validate_memory_id(value) if value is not None else None

    @model_validator(mode="after")
    def _consistent(self) -> ToolResultEvent:
        if self.memory_id is not None and (self.is_error or self.inline or self.store_arguments.given()):
            raise ValueError("a tool_result event naming a stored result (memory_id) takes no is_error, inline or "
                             "store_arguments: it was stored with them")
        if self.memory_id is None and self.preview is not None:
            raise ValueError("a tool_result event's preview goes with a memory_id, not with its result")
        return self

    def payload(self) -> dict[str, Any]:
        """As :meth:`_EventModel.payload`, with ``result`` whenever the event holds one (a
        ``None`` result too)."""
        payload = super().payload()
        if self.memory_id is None:
            payload["result"] = self.result
        return payload


class MemoryStoreEvent(_EventModel):
    """``AgentMemory.store``: content stored by the agent or the developer, under ``item_id`` or
    else an id derived from the event's id (``agent.events.event_memory_id``). Each ``None``
    field takes ``AgentMemory.store``'s default."""

    kind: Literal["memory_store"] = "memory_store"
    content: Any
    """What to store: text, ``bytes``, JSON data, or a MemoryItem (as ``AgentMemory.store`` takes it)."""
    type: MemoryType | None = None
    """The item's type."""
    source: str | None = None
    """Where it came from (a tool name, a URL)."""
    tags: tuple[str, ...] | None = None
    """Labels for filtering."""
    related_to: tuple[str, ...] | None = None
    """Memory ids it relates to (each must exist when the event is applied)."""
    title: str | None = None
    """Its title."""
    media_type: str | None = None
    """Its MIME type."""
    extra: dict[str, Any] | None = None
    """More JSON-able facts."""
    timestamp: datetime | None = None
    """When it was stored; ``None``: when the event is applied."""
    item_id: str | None = None
    """The id to store it under; ``None``: derived from the event's id, so a retried event finds it."""

    def keywords(self) -> dict[str, Any]:
        """The keywords of ``AgentMemory.store`` this event gives: its fields but ``content``, those
        not ``None``."""
        return {name: value for name, value in self.payload().items() if name != "content"}


class MemoryForgetEvent(_EventModel):
    """``MemoryManager.forget``: an item forgotten everywhere (team9's ``MEMORY_FORGET``)."""

    kind: Literal["memory_forget"] = "memory_forget"
    item_id: str
    """The item to forget (forgetting an unknown one does nothing)."""


class MemoryMarkCriticalEvent(_EventModel):
    """``MemoryManager.pin_item`` or ``pin_fact`` (team9's ``MEMORY_MARK_CRITICAL``): an item or a
    fact kept in every compaction snapshot; one of ``item_id`` and ``fact``."""

    kind: Literal["memory_mark_critical"] = "memory_mark_critical"
    item_id: str | None = None
    """The item to pin."""
    fact: str | None = None
    """The fact to pin (stored as a pinned semantic fact)."""
    tags: tuple[str, ...] = ()
    """The fact's tags."""

    @model_validator(mode="after")
    def _one_of_them(self) -> MemoryMarkCriticalEvent:
        if (self.item_id is None) == (self.fact is None):
            raise ValueError("a memory_mark_critical event pins an item_id or a fact (one of them)")
        return self


class CompactionRequestEvent(_EventModel):
    """``MemoryManager.request_compaction``: compact before the next call."""

    kind: Literal["compaction_request"] = "compaction_request"


class UsageReportEvent(_EventModel):
    """``MemoryManager.observe_usage``: the size of the last prompt (may request a compaction);
    ``prompt_tokens``, ``estimate`` or both."""

    kind: Literal["usage_report"] = "usage_report"
    prompt_tokens: int | None = None
    """The provider's count of the last prompt's tokens; ``None``: it reported none."""
    estimate: int | None = None
    """Our own count of it, used when the provider reported none."""

    @model_validator(mode="after")
    def _a_size(self) -> UsageReportEvent:
        if self.prompt_tokens is None and self.estimate is None:
            raise ValueError("a usage_report event needs prompt_tokens or estimate")
        return self


Event = Annotated[
    UserMessageEvent | AssistantResponseEvent | ToolIntentEvent | ToolResultEvent | MemoryStoreEvent
    | MemoryForgetEvent | MemoryMarkCriticalEvent | CompactionRequestEvent | UsageReportEvent,
    Field(discriminator="kind"),
]
"""A memory event of any kind, discriminated by ``kind`` (the journal's ``EventKind`` values)."""

EVENT_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
"""Validates ``{"kind": ..., **payload}`` into the event of that kind (:func:`read_event`)."""


def read_event(kind: str | Enum, payload: Mapping[str, Any]) -> Event:
    """The event of ``kind`` with ``payload``: a caller's arguments
    (``EventProcessor.dispatch("user_message", {"content": "hi"})``) or a payload the journal
    holds, decoded (models as their JSON data; ``bytes`` and ``datetime`` values restored), in the
    format of today or of a journal written before events were typed.

    Raises:
        InvalidArgumentError: for an unknown kind, a payload that is not a mapping, or one its
            kind refuses (a missing or unknown key, a wrong value), saying which and why.
    """
    if not isinstance(payload, Mapping):
        raise InvalidArgumentError(f"an event payload is a dict, not {type(payload).__name__}")
    if "kind" in payload:
        raise InvalidArgumentError("an event payload holds the event's fields; its kind is given apart")
    tag = kind.value if isinstance(kind, Enum) else kind  # the journal's EventKind
    try:
        return EVENT_ADAPTER.validate_python({**payload, "kind": tag})
    except ValidationError as exc:
        raise InvalidArgumentError.from_validation_error(exc, f"{tag} event") from exc
