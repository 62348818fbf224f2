"""Trace memory items: RAW_TRACE, EPISODIC, SEMANTIC, TOOL_INTERACTION (AutoByteus' memory types
and JSONL records, github.com/AutoByteus/autobyteus, autobyteus/memory/).

- :class:`RawTraceItem`: one user / assistant / tool event of a turn; one line of
  ``raw_traces.jsonl`` (and, once compacted, of ``raw_traces_archive.jsonl``).
- :class:`EpisodicItem`: the summary of a compacted window of turns; a line of ``episodic.jsonl``.
- :class:`SemanticItem`: a stable fact, preference, constraint or decision; a line of
  ``semantic.jsonl``.
- :class:`ToolInteraction`: a derived view (never stored) pairing a tool call with its result,
  made by :func:`build_tool_interactions` (:mod:`agent_memory.models.tool_interactions`).

Lines are AutoByteus' own format (its documented schemas and its code): the required fields always,
optional fields only when set (``None`` and empty optional lists are left out), so a line stays
small and loads in AutoByteus' ``FileMemoryStore``. One ``TypeAdapter`` per file reads and writes
the lines: :data:`RAW_TRACE_ADAPTER`, :data:`EPISODIC_ADAPTER`, :data:`SEMANTIC_ADAPTER`.

**Ids** are derived, never random (:mod:`agent_memory.models.trace_ids`, re-exported here):
``turn_0001``, ``rt_0001_0003``, ``win_0001_0004_9c1e02ab``, ``ep_0001_0004_9c1e02ab``,
``sem_<16 hex>``. Sort turn ids with :func:`turn_number`, never as text.

Bounds: each string and list is bounded (constants below, with their reasons, or
:mod:`agent_memory.limits`); text with a lone surrogate is refused. Building a model with a bad
value raises :class:`~agent_memory.errors.InvalidArgumentError`; unknown fields are refused.
Lines read back are validated with :data:`~agent_memory.models.items.STORED_CONTEXT`: types,
Unicode and id shapes are checked, size bounds are not, and unknown fields of other writers are
kept (and written back unchanged by a rewrite).
"""

from __future__ import annotations

import json
import time
from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    TypeAdapter,
    ValidationInfo,
    field_validator,
    model_serializer,
    model_validator,
)

from agent_memory.errors import InvalidArgumentError
from agent_memory.ids import validate_memory_id
from agent_memory.limits import (
    MAX_JSON_DEPTH,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    check_text,
    json_depth,
    replace_surrogates,
    shorten,
)
from agent_memory.models.bounds import (
    JSON_DEPTH,
    bounded_strings,
    bounded_text,
    bounds_apply,
    check_json_depth,
    check_length,
    check_strings,
)
from agent_memory.models.items import _Model, content_to_bytes
from agent_memory.models.trace_ids import (
    MAX_TRACE_ID_CHARS,
    _check_item_id,
    _check_window_id,
    episodic_id_for,
    format_turn_id,
    normalise_fact,
    raw_trace_id,
    semantic_id_for,
    turn_number,
    window_id_for,
)

__all__ = [
    "EPISODIC_ADAPTER",
    "EpisodicItem",
    "MAX_CALL_ID_CHARS",
    "MAX_FACT_CHARS",
    "MAX_MEDIA_URLS",
    "MAX_NOTES",
    "MAX_NOTE_CHARS",
    "MAX_SOURCE_EVENT_CHARS",
    "MAX_SUMMARY_CHARS",
    "MAX_TOOL_ARGS_CHARS",
    "MAX_TOOL_ERROR_CHARS",
    "MAX_TOOL_NAME_CHARS",
    "MAX_TOOL_RESULT_PREVIEW_CHARS",
    "MAX_TRACE_CONTENT_CHARS",
    "MAX_TRACE_ID_CHARS",
    "MAX_WINDOW_TURNS",
    "RAW_TRACE_ADAPTER",
    "RawTraceItem",
    "SEMANTIC_ADAPTER",
    "SemanticItem",
    "TraceMedia",
    "TraceType",
    "episodic_id_for",
    "format_turn_id",
    "normalise_fact",
    "raw_trace_id",
    "semantic_id_for",
    "tool_result_preview",
    "trace_sort_key",
    "turn_number",
    "window_id_for",
]

# -- bounds ----------------------------------------------------------------------------------

MAX_TRACE_CONTENT_CHARS = 1_000_000
"""Longest ``content`` (and ``reasoning``) of a raw trace, in characters: about 250,000 tokens,
more than the input budget of common models, so no message that can reach a prompt is refused.
Every process re-reads the active file; content that big belongs in AgentMemory, referenced."""

MAX_TOOL_RESULT_PREVIEW_CHARS = 2_000
"""Longest ``tool_result`` of a raw trace, in characters (the text, or the compact JSON): about
500 tokens, enough for a summarizer or a snapshot to see what a result was about. The full result
lives in AgentMemory under ``tool_result_ref``; cut a result with :func:`tool_result_preview`."""

MAX_TOOL_ERROR_CHARS = 4_000
"""Longest ``tool_error``, in characters: an error message with the end of a stack trace. Cut
longer ones with ``tool_result_preview(text, MAX_TOOL_ERROR_CHARS)``."""

MAX_TOOL_ARGS_CHARS = 128_000
"""Longest ``tool_args`` as compact JSON, in characters. Arguments are model output, capped by the
model's ``max_output_tokens`` (32,000 tokens ≈ 128,000 characters for most models), and they are
kept whole: a tool call's arguments are what the model decided."""

MAX_TOOL_NAME_CHARS = 128
"""Longest ``tool_name``, in characters (OpenAI and Anthropic allow 64; 128 leaves room for
namespaced MCP tool names)."""

MAX_SOURCE_EVENT_CHARS = 128
"""Longest ``source_event``, in characters: an event class name such as
``LLMCompleteResponseReceivedEvent``."""

MAX_CALL_ID_CHARS = 256
"""Longest ``tool_call_id`` and ``correlation_id``, in characters (provider call ids are 24-64
characters; a UUID is 36)."""

MAX_MEDIA_URLS = 32
"""Most URLs of each media kind (images, audio, video) on one trace. Media are kept as URLs or
memory references, never inline: a base64 data URL is longer than ``MAX_SOURCE_CHARS``."""

MAX_SUMMARY_CHARS = 20_000
"""Longest episodic ``summary``, in characters (about 5,000 tokens). The newest summaries are
shown in every compaction snapshot (three by default, as AutoByteus), so a summary must stay short."""

MAX_NOTES = 32
"""Most entries of each note list of an episode (``decisions``, ``constraints``,
``open_questions``, ``next_steps``, ``done``)."""

MAX_NOTE_CHARS = 1_000
"""Longest entry of a note list, in characters: one short sentence or a few."""

MAX_FACT_CHARS = 2_000
"""Longest semantic ``fact``, in characters. A fact is one statement; up to 20 are shown in every
compaction snapshot (as in AutoByteus)."""

MAX_WINDOW_TURNS = 10_000
"""Most turn ids of one episode (and of a fact's ``source_turn_ids``): ~120 KB of ids in one line
at most. A compactor covering more turns at once splits them into several windows."""

MAX_SUMMARIZER_CHARS = 64
"""Longest ``summarizer`` name, in characters (``extractive``, ``llm``)."""

MAX_REASON_CHARS = 1_000
"""Longest ``fallback_reason``, in characters."""

# -- previews --------------------------------------------------------------------------------


def tool_result_preview(result: Any, max_chars: int = MAX_TOOL_RESULT_PREVIEW_CHARS) -> JsonValue:
    """A bounded preview of a tool result, for :attr:`RawTraceItem.tool_result`. Never raises.

    - ``None`` stays ``None``; text of at most ``max_chars`` characters stays as it is.
    - JSON-able data (dicts, lists, numbers) whose compact JSON has at most ``max_chars``
      characters stays as data (tuples become lists).
    - Anything longer becomes its text (the JSON text for data) cut to ``max_chars`` characters,
      ending in ``… [N chars]`` with the full length.
    - Bytes become ``"<N bytes>"``; other objects their ``str``; lone surrogates become U+FFFD.
    """
    if result is None:
        return None
    if isinstance(result, str):
        return shorten(replace_surrogates(result), max_chars, mark_length=True)
    if isinstance(result, bytes | bytearray | memoryview):
        return shorten(f"<{len(bytes(result)):,} bytes>", max_chars, mark_length=True)
    text: str | None = None
    try:  # the bytes its store writes (serialised once when the caller holds them: encoded_once)
        text = content_to_bytes(result)[0].decode("utf-8")
    except InvalidArgumentError:  # colliding keys, lone surrogates: the preview shows them anyway
        if json_depth(result) <= MAX_JSON_DEPTH:
            try:
                text = replace_surrogates(json.dumps(result, ensure_ascii=False, separators=(",", ":"),
                                                     allow_nan=False))
            except (TypeError, ValueError, RecursionError):
                text = None
    if text is None:
        return shorten(replace_surrogates(str(result)), max_chars, mark_length=True)
    if len(text) <= max_chars:
        return json.loads(text)
    return shorten(text, max_chars, mark_length=True)


def _json_text(value: Any, what: str) -> str:
    """Compact JSON text of ``value`` (depth-checked, valid Unicode), for size checks."""
    check_json_depth(value, what)
    return check_text(json.dumps(value, ensure_ascii=False, separators=(",", ":")), what)


def _turn_ids(value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
    if bounds_apply(info) and len(value) > MAX_WINDOW_TURNS:
        raise ValueError(f"{len(value):,} turn ids; at most {MAX_WINDOW_TURNS:,} are allowed")
    for turn_id in value:
        turn_number(turn_id)
    return value


_TurnIds = Annotated[tuple[str, ...], AfterValidator(_turn_ids)]
"""Turn ids (``turn_0001``), oldest first: at most ``MAX_WINDOW_TURNS``."""

_WindowId = Annotated[str, AfterValidator(lambda value: _check_window_id(value) if value else value)]
"""A window id made by :func:`window_id_for`, or ``""``."""

_Tags = Annotated[tuple[str, ...], bounded_strings(MAX_TAGS, MAX_TAG_CHARS)]
"""Free labels, in order: at most ``MAX_TAGS`` of at most ``MAX_TAG_CHARS`` characters."""

_TraceText = Annotated[str, bounded_text(MAX_TRACE_CONTENT_CHARS)]
"""A trace's ``content`` or ``reasoning``: at most ``MAX_TRACE_CONTENT_CHARS`` characters."""

_CallId = Annotated[str, bounded_text(MAX_CALL_ID_CHARS)]
"""A ``tool_call_id`` or ``correlation_id``: at most ``MAX_CALL_ID_CHARS`` characters."""

_Notes = Annotated[tuple[str, ...], bounded_strings(MAX_NOTES, MAX_NOTE_CHARS)]
"""An episode's note list: at most ``MAX_NOTES`` entries of at most ``MAX_NOTE_CHARS`` characters."""

# -- models ----------------------------------------------------------------------------------


class _TraceModel(_Model):
    """Base of the stored trace models: frozen; on construction unknown fields are refused, in
    lines read back (``STORED_CONTEXT``) they are kept; ``None`` fields and the empty lists named
    in ``_omit_empty`` are left out of the JSON line."""

    model_config = ConfigDict(frozen=True, extra="allow", allow_inf_nan=False)

    _omit_empty: ClassVar[frozenset[str]] = frozenset()

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_fields(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, dict) and bounds_apply(info):
            unknown = sorted(str(key) for key in data if key not in cls.model_fields)
            if unknown:
                raise ValueError(f"unknown field(s): {', '.join(unknown[:5])}")
        return data

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data = handler(self)
        omit = self._omit_empty
        return {key: value for key, value in data.items() if value is not None and not (key in omit and not value)}


class TraceMedia(_TraceModel):
    """Media attached to a user message, as URLs (or memory references), by kind."""

    images: tuple[str, ...] = ()
    """Image URLs, in message order (at most ``MAX_MEDIA_URLS``, each at most ``MAX_SOURCE_CHARS``)."""
    audio: tuple[str, ...] = ()
    """Audio URLs, in message order."""
    video: tuple[str, ...] = ()
    """Video URLs, in message order."""

    @model_serializer(mode="wrap")
    def _compact(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        return handler(self)  # AutoByteus writes all three lists, empty or not

    @field_validator("images", "audio", "video")
    @classmethod
    def _bound_urls(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return check_strings(value, f"{info.field_name} URLs", MAX_MEDIA_URLS, MAX_SOURCE_CHARS, info)


TraceType = Literal["user", "assistant", "tool_call", "tool_result"]
"""What a raw trace records: the user's message, the model's answer, a tool call it made, or a
tool's result."""


class RawTraceItem(_TraceModel):
    """One event of a turn (AutoByteus' RAW_TRACE): a line of ``raw_traces.jsonl``.

    Example line (AutoByteus' documented example, with a derived id)::

        {"id":"rt_0001_0001","ts":1738100000.12,"turn_id":"turn_0001","seq":1,"trace_type":"user",
         "content":"Please refactor the parser.","source_event":"LLMUserMessageReadyEvent",
         "media":{"images":[],"audio":[],"video":[]},"tags":["processed"]}

    ``id`` may be left out: it is then :func:`raw_trace_id` of ``turn_id`` and ``seq``. ``ts``
    defaults to now. A ``tool_call`` or ``tool_result`` needs a ``tool_call_id`` (lines read
    back may lack it, as AutoByteus' documented examples do; they then pair with nothing).
    """

    _omit_empty: ClassVar[frozenset[str]] = frozenset({"tags"})

    id: str = ""
    """Unique trace id; ``rt_<turn>_<seq>`` for traces this library makes (``""``: derive it)."""
    ts: float = Field(default_factory=time.time, ge=0)
    """When the event happened, in Unix time, seconds."""
    turn_id: str
    """The turn the event belongs to (``turn_0001``); a tool result keeps its call's turn."""
    seq: int = Field(ge=1)
    """Order of the event within its turn, from 1."""
    trace_type: TraceType
    """``user``, ``assistant``, ``tool_call`` or ``tool_result``."""
    content: _TraceText = ""
    """The text: the user's message, the model's answer; often ``""`` for tool events (at most
    ``MAX_TRACE_CONTENT_CHARS``)."""
    source_event: Annotated[str, bounded_text(MAX_SOURCE_EVENT_CHARS, blank="must not be empty")]
    """The event that produced the trace, e.g. ``LLMUserMessageReadyEvent``,
    ``PendingToolInvocationEvent``, ``ToolResultEvent``, ``LLMCompleteResponseReceivedEvent``."""
    media: TraceMedia | None = None
    """Images, audio and video of a user message; ``None``: none (left out of the line)."""
    tool_name: Annotated[str, bounded_text(MAX_TOOL_NAME_CHARS)] | None = None
    """For tool events: the tool's name."""
    tool_call_id: _CallId | None = None
    """For tool events: the provider's call id, shared by a call and its result."""
    tool_args: Annotated[dict[str, JsonValue] | None, JSON_DEPTH] = None
    """For a ``tool_call`` (and optionally its result): the arguments as parsed JSON (at most
    ``MAX_TOOL_ARGS_CHARS`` as compact JSON)."""
    tool_result: Annotated[JsonValue, JSON_DEPTH] = None
    """For a ``tool_result``: a bounded preview of the result (text or small JSON, at most
    ``MAX_TOOL_RESULT_PREVIEW_CHARS``; see :func:`tool_result_preview`), never the full result."""
    tool_error: Annotated[str, bounded_text(MAX_TOOL_ERROR_CHARS)] | None = None
    """For a failed ``tool_result``: the error message (at most ``MAX_TOOL_ERROR_CHARS``);
    ``None``: the tool succeeded."""
    correlation_id: _CallId | None = None
    """An id linking events across systems (a request id), or ``None``."""
    tags: _Tags = ()
    """Free labels such as ``processed`` or ``final``, in order (at most ``MAX_TAGS``)."""
    tool_result_ref: str | None = None
    """For a ``tool_result``: the AgentMemory id (``mem_…``) holding the full result."""
    reasoning: _TraceText | None = None
    """For an ``assistant`` trace: the model's reasoning text, when the provider returns it."""

    @field_validator("turn_id")
    @classmethod
    def _turn_id(cls, value: str) -> str:
        turn_number(value)
        return value

    @field_validator("tool_args")
    @classmethod
    def _bound_args(cls, value: dict[str, Any] | None, info: ValidationInfo) -> dict[str, Any] | None:
        if value is not None:
            check_length(_json_text(value, "tool_args"), "tool_args (as JSON)", MAX_TOOL_ARGS_CHARS, info)
        return value

    @field_validator("tool_result")
    @classmethod
    def _bound_result(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            check_length(value, "tool_result", MAX_TOOL_RESULT_PREVIEW_CHARS, info)
        elif value is not None:
            text = _json_text(value, "tool_result")
            what = "tool_result (as JSON; cut it with tool_result_preview)"
            check_length(text, what, MAX_TOOL_RESULT_PREVIEW_CHARS, info)
        return value

    @field_validator("tool_result_ref")
    @classmethod
    def _memory_id(cls, value: str | None) -> str | None:
        return None if value is None else validate_memory_id(value)

    @model_validator(mode="after")
    def _derive_id(self, info: ValidationInfo) -> RawTraceItem:
        if not self.id:
            object.__setattr__(self, "id", raw_trace_id(self.turn_id, self.seq))
        else:
            _check_item_id(self.id, "rt_")
        if bounds_apply(info) and self.trace_type in ("tool_call", "tool_result") and not self.tool_call_id:
            raise ValueError(f"a {self.trace_type} trace needs its tool_call_id")
        return self


class EpisodicItem(_TraceModel):
    """The summary of a compacted window of turns (AutoByteus' EPISODIC): a line of ``episodic.jsonl``.

    ``window_id`` defaults to :func:`window_id_for` of ``turn_ids`` and ``id`` to
    :func:`episodic_id_for` of the window, so a retried compaction of the same turns makes the
    same item, which the store keeps once.
    """

    _omit_empty: ClassVar[frozenset[str]] = frozenset(
        {"decisions", "constraints", "open_questions", "next_steps", "done"}
    )

    id: str = ""
    """Episode id, ``ep_…`` (``""``: derive it from the window)."""
    ts: float = Field(default_factory=time.time, ge=0)
    """When the summary was made, in Unix time (seconds)."""
    turn_ids: _TurnIds = Field(min_length=1)
    """The turns summarised, oldest first (at most ``MAX_WINDOW_TURNS``)."""
    summary: Annotated[str, bounded_text(MAX_SUMMARY_CHARS)]
    """The narrative summary of those turns (at most ``MAX_SUMMARY_CHARS``)."""
    tags: _Tags = ()
    """Free labels (at most ``MAX_TAGS``)."""
    salience: float = Field(default=0.0, ge=0.0, le=1.0)
    """How much the episode matters for later turns, 0 (not at all) to 1."""
    window_id: _WindowId = ""
    """Deterministic id of the window of turns (``""``: derive it from ``turn_ids``)."""
    decisions: _Notes = ()
    """Decisions made in these turns."""
    constraints: _Notes = ()
    """Constraints the user or the task set."""
    open_questions: _Notes = ()
    """Questions still unanswered."""
    next_steps: _Notes = ()
    """What was planned next."""
    done: _Notes = ()
    """Work already finished, so that it is not planned again."""
    summarizer: Annotated[str, bounded_text(MAX_SUMMARIZER_CHARS)] | None = None
    """Which summarizer made the item (``extractive``, ``llm``); ``None``: unknown."""
    fallback_reason: Annotated[str, bounded_text(MAX_REASON_CHARS)] | None = None
    """Why the fallback summarizer was used (timeout, HTTP error, invalid output); ``None``: the
    summarizer asked for made it."""

    @model_validator(mode="after")
    def _derive_ids(self) -> EpisodicItem:
        if not self.window_id:
            object.__setattr__(self, "window_id", window_id_for(self.turn_ids))
        if not self.id:
            object.__setattr__(self, "id", episodic_id_for(self.window_id))
        else:
            _check_item_id(self.id, "ep_")
        return self


class SemanticItem(_TraceModel):
    """A stable fact, preference, constraint or decision (AutoByteus' SEMANTIC): a line of
    ``semantic.jsonl``.

    ``id`` defaults to :func:`semantic_id_for` of the fact, so the same fact is stored once.
    """

    _omit_empty: ClassVar[frozenset[str]] = frozenset({"source_turn_ids", "pinned"})

    id: str = ""
    """Fact id, ``sem_…`` (``""``: derive it from the fact)."""
    ts: float = Field(default_factory=time.time, ge=0)
    """When the fact was recorded, in Unix time (seconds)."""
    fact: Annotated[str, bounded_text(MAX_FACT_CHARS, blank="must not be blank")]
    """The fact, one statement, not blank (at most ``MAX_FACT_CHARS``)."""
    tags: _Tags = ()
    """Free labels such as ``preference``, ``decision`` (at most ``MAX_TAGS``)."""
    confidence: float = Field(default=0.0, ge=0.0, le=1.0)
    """How sure the summarizer is that the fact holds, 0 to 1."""
    salience: float = Field(default=0.0, ge=0.0, le=1.0)
    """How much the fact matters for later turns, 0 to 1."""
    source_turn_ids: _TurnIds = ()
    """The turns the fact was taken from, oldest first; empty when unknown."""
    pinned: bool = False
    """``True``: the fact is shown in every compaction snapshot, whatever the limits."""
    window_id: _WindowId | None = None
    """The compaction window the fact came from; ``None``: added outside a compaction."""

    @model_validator(mode="after")
    def _derive_id(self) -> SemanticItem:
        if not self.id:
            object.__setattr__(self, "id", semantic_id_for(self.fact))
        else:
            _check_item_id(self.id, "sem_")
        return self


RAW_TRACE_ADAPTER: TypeAdapter[RawTraceItem] = TypeAdapter(RawTraceItem)
"""Reads and writes the lines of ``raw_traces.jsonl`` and ``raw_traces_archive.jsonl``."""

EPISODIC_ADAPTER: TypeAdapter[EpisodicItem] = TypeAdapter(EpisodicItem)
"""Reads and writes the lines of ``episodic.jsonl``."""

SEMANTIC_ADAPTER: TypeAdapter[SemanticItem] = TypeAdapter(SemanticItem)
"""Reads and writes the lines of ``semantic.jsonl``."""


def trace_sort_key(item: RawTraceItem) -> tuple[int, int]:
    """Chronological order of traces: by turn number, then by ``seq`` within the turn."""
    return (turn_number(item.turn_id), item.seq)
