"""What each kind of memory event carries: the payload keys of every :class:`EventKind`, checked
once before an event is journaled."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from agent_memory.errors import InvalidArgumentError, InvalidIdError
from agent_memory.ids import validate_memory_id
from agent_memory.models.messages import Message, ToolCall
from agent_memory.storage.journal import EventKind

__all__ = ["checked_payload"]

_FIELDS: dict[EventKind, tuple[frozenset[str], frozenset[str]]] = {
    EventKind.USER_MESSAGE: (frozenset({"content"}), frozenset({"images", "source_event"})),
    EventKind.ASSISTANT_RESPONSE: (frozenset({"message"}), frozenset({"turn_id", "source_event"})),
    EventKind.TOOL_INTENT: (frozenset({"calls"}), frozenset({"turn_id", "source_event"})),
    EventKind.TOOL_RESULT: (frozenset({"tool_call_id"}),
                            frozenset({"result", "is_error", "name", "source_event", "store_arguments", "memory_id",
                                       "preview"})),
    EventKind.MEMORY_STORE: (frozenset({"content"}), frozenset({"type", "source", "tags", "related_to", "title",
                                                                "media_type", "extra", "timestamp", "item_id"})),
    EventKind.MEMORY_FORGET: (frozenset({"item_id"}), frozenset()),
    EventKind.MEMORY_MARK_CRITICAL: (frozenset(), frozenset({"item_id", "fact", "tags"})),
    EventKind.COMPACTION_REQUEST: (frozenset(), frozenset()),
    EventKind.USAGE_REPORT: (frozenset(), frozenset({"prompt_tokens", "estimate"})),
}
"""Required and optional payload keys of each kind (a ``tool_result`` holds its ``result``, or the
``memory_id`` of the result already stored and its ``preview``: :func:`checked_payload`)."""

_STORE_ARGUMENTS = frozenset({"type", "media_type", "source", "title", "inline"})
"""What a tool result's ``store_arguments`` may say (the rest of ``ingest_tool_result``'s keywords
are the processor's)."""


def _check_tool_result(payload: dict[str, Any]) -> None:
    """A ``tool_result`` payload holds its ``result`` (with any ``is_error``, ``store_arguments``),
    or names a stored result: ``memory_id`` (with its ``preview``), never both."""
    if ("result" in payload) == ("memory_id" in payload):
        raise InvalidArgumentError("a tool_result event holds its result or the memory_id of the stored result "
                                   "(one of them)")
    if "memory_id" in payload:
        if payload.get("is_error") or payload.get("store_arguments"):
            raise InvalidArgumentError("a tool_result event naming a stored result (memory_id) takes no is_error "
                                       "or store_arguments: it was stored with them")
        try:
            validate_memory_id(payload["memory_id"])
        except InvalidIdError as exc:
            raise InvalidArgumentError(f"a tool_result event's memory_id: {exc}") from None
    elif "preview" in payload:
        raise InvalidArgumentError("a tool_result event's preview goes with a memory_id, not with its result")


def checked_payload(kind: EventKind, payload: dict[str, Any]) -> dict[str, Any]:
    """The payload of an event of ``kind``, checked once before it is journaled: every key its
    kind requires and none it does not know, consistent, with a message as an assistant
    :class:`~agent_memory.models.messages.Message` and tool calls as a list of
    :class:`~agent_memory.models.messages.ToolCall` (text and dicts are validated into them). The
    journal writes those models as their JSON data; the processor applies this very payload when
    it applies the event at once, so nothing is validated twice.

    Raises:
        InvalidArgumentError: saying what is wrong (nothing is journaled).
    """
    required, optional = _FIELDS[kind]
    missing = required - payload.keys()
    unknown = payload.keys() - required - optional
    if missing or unknown:
        parts = ([f"missing {sorted(missing)}"] if missing else []) + ([f"unknown {sorted(unknown)}"] if unknown else [])
        raise InvalidArgumentError(f"a {kind.value} event payload: {'; '.join(parts)}")
    if kind is EventKind.MEMORY_MARK_CRITICAL and ("item_id" in payload) == ("fact" in payload):
        raise InvalidArgumentError("a memory_mark_critical event pins an item_id or a fact (one of them)")
    if kind is EventKind.USAGE_REPORT and payload.get("prompt_tokens") is None and payload.get("estimate") is None:
        raise InvalidArgumentError("a usage_report event needs prompt_tokens or estimate")
    if kind is EventKind.TOOL_RESULT:
        _check_tool_result(payload)
    extra = payload.get("store_arguments") or {}
    if not isinstance(extra, dict) or set(extra) - _STORE_ARGUMENTS:
        raise InvalidArgumentError(f"a tool_result event's store_arguments take only {sorted(_STORE_ARGUMENTS)}")
    payload = dict(payload)
    if kind is EventKind.ASSISTANT_RESPONSE:
        message = payload["message"]
        if isinstance(message, str):
            message = Message(role="assistant", content=message)
        elif isinstance(message, dict):
            message = Message.model_validate(message)
        if not isinstance(message, Message) or message.role != "assistant":
            raise InvalidArgumentError("an assistant_response event's message is an assistant Message, a dict or text")
        payload["message"] = message
    elif kind is EventKind.TOOL_INTENT:
        calls = payload["calls"]
        if isinstance(calls, ToolCall | dict | str) or not isinstance(calls, Iterable):
            raise InvalidArgumentError("a tool_intent event's calls are a list of ToolCalls (or dicts)")
        payload["calls"] = [call if isinstance(call, ToolCall) else ToolCall.model_validate(call) for call in calls]
    return payload
