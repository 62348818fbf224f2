"""Provider-neutral conversation messages (AutoByteus' tool-aware message model,
github.com/AutoByteus/autobyteus: tool calls and tool results are messages of their own).

A :class:`Message` is what the Working Context Snapshot holds and what a
:class:`~agent_memory.llm.renderers.PromptRenderer` turns into a provider payload. Tool calls and
tool results are structured, never text hacks: an ``assistant`` message carries its
:class:`ToolCall` s (several for parallel calls), and each result is a ``tool`` message naming the
call it answers (``tool_call_id``).

A tool result in the conversation keeps a reference to its memory item (``tool_result_ref``), not
a copy: the presentation policy decides, each time messages are built for an LLM call, whether
the model sees the full result or its citation. Stored history is never rewritten.

Building a :class:`Message` or :class:`ToolCall` with a bad value raises
:class:`~agent_memory.errors.InvalidArgumentError` (a ``ValueError`` and a ``TypeError``);
``model_validate`` and ``TypeAdapter`` (reading JSON back) raise pydantic's ``ValidationError``.
``model_copy(update=...)`` does not validate (pydantic's rule): use it only for changes that keep
a message valid, such as resolving a ``tool_result_ref`` into ``content``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import ConfigDict, Field, JsonValue, field_validator, model_validator

from agent_memory.errors import InvalidArgumentError
from agent_memory.limits import MAX_JSON_DEPTH, escape_surrogates, json_depth, shorten
from agent_memory.models.items import _Model
from agent_memory.models.tool_arguments import read_tool_arguments

__all__ = [
    "IMAGE_URL_SCHEMES",
    "MAX_KEPT_ARGUMENTS_CHARS",
    "TURN_ID_PATTERN",
    "Media",
    "Message",
    "Role",
    "ToolCall",
    "calls_answered",
    "parse_tool_arguments",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks: the system prompt, the user, the model, or a tool's result."""

TURN_ID_PATTERN = r"^turn_\d{4,}$"
"""Form of a turn id: ``turn_`` and at least four digits (``turn_0001``, ``turn_12345``)."""

IMAGE_URL_SCHEMES = ("http://", "https://", "data:")
"""How a media URL may start: a web address the provider fetches, or an inline ``data:`` URL
(``data:image/png;base64,...``)."""

_TURN_ID = re.compile(TURN_ID_PATTERN)

MAX_KEPT_ARGUMENTS_CHARS = 1_000
"""Characters of a refused call's arguments a conversation keeps (:meth:`ToolCall.kept`): enough
for the model to see what it sent, not the whole of a runaway call."""


def parse_tool_arguments(arguments: str) -> dict[str, JsonValue] | None:
    """The arguments of a tool call as a JSON object, or ``None`` when ``arguments`` is not one a
    tool can take (:func:`~agent_memory.models.tool_arguments.read_tool_arguments` refuses it).

    ``None`` for text that is not JSON, JSON that is not an object (``[1, 2]``, ``"x"``), an
    object nested more than :data:`~agent_memory.limits.MAX_JSON_DEPTH` levels deep or longer than
    :data:`~agent_memory.models.tool_arguments.MAX_TOOL_ARGUMENTS_CHARS`, ``NaN`` / ``Infinity``
    / out-of-range or overlong numbers, or a lone surrogate. Never raises: a model's malformed
    arguments are data to keep, not an error of the caller.
    """
    if not arguments.strip():
        return None  # not JSON (a tool reads it as no arguments)
    try:
        return read_tool_arguments(arguments)
    except InvalidArgumentError:
        return None


def _unreadable(value: Any) -> bool:
    """Whether ``value`` is not an object of tool arguments (``NaN``, a lone surrogate...)."""
    try:
        read_tool_arguments(value)
    except InvalidArgumentError:
        return True
    return False


def _canonical(value: Any) -> str:
    """One spelling of a JSON value, to compare two (NaN equals NaN here, unlike ``==``)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


class ToolCall(_Model):
    """One tool call the model made.

    Give ``arguments`` (the raw JSON string, as providers return it) or ``input`` (the parsed
    object, as Anthropic's ``tool_use`` block has it), or both; the other one is derived:
    ``input`` only → ``arguments = json.dumps(input, ensure_ascii=False)``; ``arguments`` only →
    ``input`` is :func:`parse_tool_arguments` of it (``None`` when malformed). Neither → ``"{}"`` and
    ``{}``. Both → they must agree (parsing ``arguments`` gives ``input``). ``None`` counts as not
    given.

    A call holds only valid Unicode, so every record of it can be written: a lone surrogate in
    ``arguments`` (or in the JSON of ``input``) is kept as its JSON escape ``\\udXXX``, which a
    JSON parser reads as the same string (:func:`~agent_memory.limits.escape_surrogates`;
    ``input`` is then ``None`` and the tool refuses the call), and one in ``id`` or ``name`` the same way.

    Equality compares every field; the hash uses ``id``, ``name`` and ``arguments`` (``input`` is
    derived from ``arguments``), so a call stays usable in sets and as a dict key.

    Raises:
        InvalidArgumentError: an empty ``id``, ``arguments`` that is not a string, ``input`` that
            is not JSON data, or ``input`` and ``arguments`` that disagree.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)
    """The provider's call id; the tool message answering it carries the same ``tool_call_id``."""
    name: str
    """Tool name."""
    arguments: str = "{}"
    """Arguments as the JSON string the provider returned, verbatim (possibly malformed) but for
    lone surrogates, kept as their escapes."""
    input: dict[str, JsonValue] | None = None
    """Arguments parsed as a JSON object; ``None`` when ``arguments`` is not a JSON object a tool
    can take (malformed JSON, ``NaN``, a lone surrogate...: see :func:`parse_tool_arguments`).
    Anthropic's name for the field."""

    @model_validator(mode="before")
    @classmethod
    def _derive(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = {**data, **{key: escape_surrogates(value) for key in ("id", "name")
                           if isinstance(value := data.get(key), str)}}
        has_arguments = data.get("arguments") is not None
        has_input = data.get("input") is not None
        if has_input and not has_arguments:
            if not isinstance(data["input"], dict):
                raise ValueError("input must be a JSON object (a dict); the raw string goes in arguments")
            if json_depth(data["input"]) > MAX_JSON_DEPTH:
                raise ValueError(f"input is nested more than {MAX_JSON_DEPTH} levels deep")
            try:
                arguments = json.dumps(data["input"], ensure_ascii=False)
            except (TypeError, ValueError) as exc:
                raise ValueError(f"input must be JSON data ({shorten(str(exc), 100)})") from None
            arguments = escape_surrogates(arguments)
            return {**data, "arguments": arguments, "input": parse_tool_arguments(arguments)}
        if not has_arguments:
            return {**data, "arguments": "{}", "input": {}}
        if not isinstance(data["arguments"], str):
            raise ValueError(
                f"arguments must be the raw JSON string, not {type(data['arguments']).__name__}; "
                "pass a parsed object as input="
            )
        arguments = escape_surrogates(data["arguments"])
        parsed = parse_tool_arguments(arguments)
        unreadable_input = parsed is None and has_input and _unreadable(data["input"])  # NaN in both: agreed
        if has_input and not unreadable_input and _canonical(data["input"]) != _canonical(parsed):
            raise ValueError("arguments and input disagree: parsing arguments does not give input")
        return {**data, "arguments": arguments, "input": parsed}

    def kept(self, max_chars: int = MAX_KEPT_ARGUMENTS_CHARS) -> ToolCall:
        """This call as a conversation keeps it: itself when its arguments are a JSON object a
        tool can take (``input`` is not ``None``) or at most ``max_chars`` characters long; else
        a copy whose ``arguments`` are cut to ``max_chars`` characters, ending ``… [N chars]``.

        A tool refuses such a call and its error says why; the model needs no copy of 400 KB of
        ``[`` sent back with every later call (it overflowed the context window, issue #37).
        """
        if self.input is not None or len(self.arguments) <= max_chars:
            return self
        return ToolCall(id=self.id, name=self.name, arguments=shorten(self.arguments, max_chars, mark_length=True))

    def __hash__(self) -> int:
        return hash((self.id, self.name, self.arguments))


class Media(_Model):
    """Media attached to a ``user`` or ``tool`` message, as URLs (AutoByteus' ``media`` field).

    Each URL is an ``http(s)://`` address or a ``data:`` URL (``data:image/png;base64,...``).
    Renderers send ``images``; no renderer sends ``audio`` or ``video`` yet (they raise
    :class:`~agent_memory.errors.InvalidArgumentError` rather than drop them).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    images: tuple[str, ...] = ()
    """Image URLs, in the order the model should see them."""
    audio: tuple[str, ...] = ()
    """Audio URLs (kept and stored; not rendered yet)."""
    video: tuple[str, ...] = ()
    """Video URLs (kept and stored; not rendered yet)."""

    @field_validator("images", "audio", "video")
    @classmethod
    def _urls(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for url in value:
            if not url.startswith(IMAGE_URL_SCHEMES):
                raise ValueError(f"media URL {url[:60]!r} must start with one of {', '.join(IMAGE_URL_SCHEMES)}")
        return value

    def __bool__(self) -> bool:
        return bool(self.images or self.audio or self.video)


class Message(_Model):
    """One message of a conversation, provider-neutral.

    A ``tool`` message answers one call (``tool_call_id``) and either holds its result in
    ``content`` or, once the result is in memory, names it with ``tool_result_ref`` (``content``
    is then ``None`` until the presentation resolves it; renderers refuse an unresolved one).

    Rules (checked when a message is built):

    - a ``tool`` message has a ``tool_call_id`` and a result (``content`` or ``tool_result_ref``);
    - ``tool_call_id``, ``tool_result_ref`` and ``is_error`` belong to ``tool`` messages only;
    - ``tool_calls`` and ``reasoning`` belong to ``assistant`` messages only, and the calls of one
      message have distinct ids;
    - ``media`` belongs to ``user`` and ``tool`` messages only.

    Raises:
        InvalidArgumentError: when a rule above or a field's bound is broken.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: Role
    """Who speaks."""
    content: str | None = None
    """Text of the message; ``None`` for an assistant message that only calls tools, or a tool
    message whose result is referenced by ``tool_result_ref``."""
    tool_calls: tuple[ToolCall, ...] = Field(default=())
    """Tool calls of an assistant message (several for parallel calls), in order."""
    tool_call_id: str | None = None
    """For a ``tool`` message: the id of the call it answers."""
    name: str | None = None
    """For a ``tool`` message: the tool's name (renderers do not send it; the call id pairs)."""
    tool_result_ref: str | None = None
    """For a ``tool`` message: the memory id of the full result."""
    is_error: bool = False
    """For a ``tool`` message: the tool failed and ``content`` says why. Sent natively to
    Anthropic (``tool_result.is_error``); the OpenAI APIs have no such flag and get the text only."""
    reasoning: str | None = None
    """For an ``assistant`` message: the model's reasoning ("thinking") text as the provider
    returned it; ``None`` when there was none. Kept for the record; renderers do not send it back
    (see :mod:`agent_memory.llm.renderers`)."""
    media: Media = Field(default_factory=Media)
    """Images (and audio/video URLs) attached to a ``user`` or ``tool`` message; empty: none."""
    id: str | None = Field(default=None, min_length=1)
    """A stable id of the message (the trace id that recorded it); ``None`` when not assigned."""
    ts: float | None = None
    """When the message was made, in Unix time, seconds; ``None`` when unknown."""
    turn_id: str | None = None
    """The turn it belongs to, ``turn_0001`` form (:data:`TURN_ID_PATTERN`); ``None`` when the
    message is not tied to a turn (a system prompt, a snapshot's summary)."""
    seq: int | None = Field(default=None, ge=0)
    """Order within its turn (as AutoByteus: 1 for the user message, then 2, 3, ...); ``None`` when
    not assigned."""

    @field_validator("ts")
    @classmethod
    def _finite_ts(cls, value: float | None) -> float | None:
        if value is not None and (not math.isfinite(value) or value < 0):
            raise ValueError("ts must be a finite, non-negative number (Unix time, seconds)")
        return value

    @field_validator("turn_id")
    @classmethod
    def _turn_form(cls, value: str | None) -> str | None:
        if value is not None and not _TURN_ID.match(value):
            raise ValueError(f"turn_id {value[:40]!r} is not of the form turn_0001")
        return value

    @model_validator(mode="after")
    def _roles(self) -> Message:
        role = self.role
        if role == "tool":
            if not self.tool_call_id:
                raise ValueError("a tool message needs the tool_call_id of the call it answers")
            if self.content is None and not self.tool_result_ref:
                raise ValueError("a tool message needs its result: content or tool_result_ref")
        else:
            for field, value in (("tool_call_id", self.tool_call_id), ("tool_result_ref", self.tool_result_ref),
                                 ("is_error", self.is_error)):
                if value:
                    raise ValueError(f"{field} belongs to tool messages, not to a {role} message")
        if role != "assistant":
            if self.tool_calls:
                raise ValueError(f"tool_calls belong to assistant messages, not to a {role} message")
            if self.reasoning is not None:
                raise ValueError(f"reasoning belongs to assistant messages, not to a {role} message")
        if self.media and role not in ("user", "tool"):
            raise ValueError(f"media belongs to user and tool messages, not to a {role} message")
        ids = [call.id for call in self.tool_calls]
        if len(set(ids)) != len(ids):
            duplicate = next(i for i in ids if ids.count(i) > 1)
            raise ValueError(f"tool call id {duplicate[:40]!r} appears twice in one message")
        return self


def calls_answered(messages: Sequence[Message]) -> dict[int, ToolCall]:
    """Index of each ``tool`` message in ``messages`` → the call it answers: the last call with its
    ``tool_call_id`` made before it. Ids can repeat within a conversation (some models and servers
    number their calls afresh each turn: 45 of the 140 tau-bench runs reuse one), and a result
    answers the latest call of its id, as the provider reads the conversation. A result with no such
    call before it has no entry."""
    latest: dict[str, ToolCall] = {}
    out: dict[int, ToolCall] = {}
    for index, message in enumerate(messages):
        latest.update((call.id, call) for call in message.tool_calls)
        answered = latest.get(message.tool_call_id or "") if message.role == "tool" else None
        if answered is not None:
            out[index] = answered
    return out
