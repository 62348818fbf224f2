"""The Working Context Snapshot: the message list the LLM gets on each call (AutoByteus' working
context snapshot, github.com/AutoByteus/autobyteus, autobyteus/memory/).

Append-only within a compaction *epoch*; a compaction resets it to the Compaction Snapshot (the new
base) and opens the next epoch. It also carries the presentation state (which stored results the
model has seen, which are cited: :class:`~agent_memory.presentation.context.PresentationState`),
committed only after the provider answered. Everything is data, persisted atomically with a schema
version and the epoch id, so a restarted agent resumes its epoch, its prompt prefix and what it has
shown.

It is kept as the agent's ``working_context`` document in the backend
(:class:`~agent_memory.storage.contracts.DocumentSlot`). Its JSON is AutoByteus' own (the file
backend's ``agents/<id>/working_context_snapshot.json``: ``schema_version``,
``agent_id``, ``epoch_id``, ``last_compaction_ts``, ``messages`` with ``role``, ``content``,
``reasoning_content``, ``image_urls``, ``audio_urls``, ``video_urls``, ``tool_payload``), so its
``WorkingContextSnapshotSerializer`` reads ours; each message also carries our full message under
``"agent_memory"`` (memory references, turn ids), and the file our bookkeeping under the same key.
A snapshot AutoByteus wrote loads too (from its keys).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent_memory.errors import ConflictError, StoreError
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.context import PresentationState
from agent_memory.storage.contracts import ChangeToken, DocumentSlot

__all__ = ["SCHEMA_VERSION", "WORKING_CONTEXT_DOCUMENT", "WorkingContextSnapshot", "WorkingContextState",
           "from_payload", "to_payload"]

SCHEMA_VERSION = 1
"""Version of the file's layout (AutoByteus' version 1); a newer file is refused, not misread."""

WORKING_CONTEXT_DOCUMENT = "working_context"
"""The snapshot's name among the agent's documents (the file backend's
``working_context_snapshot.json``, AutoByteus' name)."""

MAX_SAVE_ATTEMPTS = 20
"""Saves retried when another process wrote the snapshot in between (each merges its pins)."""

OWN_KEY = "agent_memory"
"""Key under which the file keeps what AutoByteus' format has no place for."""


class WorkingContextState(BaseModel):
    """The persisted form of a working context snapshot."""

    model_config = ConfigDict(frozen=True)

    schema_version: int = SCHEMA_VERSION
    epoch_id: int = Field(default=1, ge=1)
    """1 before the first compaction, then +1 per compaction (AutoByteus counts the same way)."""
    last_compaction_ts: float | None = None
    """When the last compaction reset the snapshot, Unix time in seconds; ``None``: never."""
    base_size: int = Field(default=0, ge=0)
    """How many leading messages are the epoch's base (the Compaction Snapshot, or the system
    prompt in epoch 0); the rest was appended during the epoch."""
    messages: tuple[Message, ...] = ()
    """The messages, oldest first; tool results keep ``tool_result_ref`` (resolved per call)."""
    presentation: PresentationState = Field(default_factory=PresentationState)
    """What the model has been shown, as of the last committed call."""
    last_prompt_tokens: int | None = None
    """Size of the last prompt: the provider's ``prompt_tokens`` when reported, else our count."""
    last_estimate_tokens: int | None = None
    """Our own count of that same prompt (with ``last_prompt_tokens``, calibrates our counts)."""
    compaction_requested: bool = False
    """A compaction must run before the next call (kept across a restart)."""
    pinned_items: tuple[str, ...] = ()
    """Memory ids shown verbatim in every compaction snapshot."""
    updated_at: float = Field(default_factory=time.time)
    """When it was last saved, Unix time in seconds."""


class WorkingContextSnapshot:
    """The working context of one agent.

    Args:
        slot: where it is persisted (the backend's ``working_context`` document of the agent);
            ``None``: in memory only. An existing document is loaded.
        agent_id: written into the document (AutoByteus' reader requires it).

    Raises:
        StoreError: if the document exists but cannot be read, or has a newer schema version.
    """

    def __init__(self, slot: DocumentSlot | None = None, *, agent_id: str = "agent") -> None:
        self.slot = slot
        self.agent_id = agent_id
        self._dirty = False
        self._mutex = threading.RLock()
        self._seen: ChangeToken | None = None
        """The document's token as this object last read or wrote it (another process changed it if not)."""
        self._state, self._seen = self._load() if slot is not None else (WorkingContextState(), None)
        self._seen_pins = self._state.pinned_items
        """The pinned ids in the document as this object last read or wrote it: the base of the merge."""

    # -- reading ---------------------------------------------------------------------------------
    @property
    def state(self) -> WorkingContextState:
        return self._state

    @property
    def epoch_id(self) -> int:
        return self._state.epoch_id

    @property
    def presentation(self) -> PresentationState:
        return self._state.presentation

    def build_messages(self) -> list[Message]:
        """The messages for the next call, oldest first (a copy; refs not yet resolved)."""
        return list(self._state.messages)

    def __len__(self) -> int:
        return len(self._state.messages)

    # -- writing ---------------------------------------------------------------------------------
    def append(self, message: Message) -> None:
        """Append one message to the epoch (saved at the next checkpoint, see :meth:`save`)."""
        self.extend([message])

    def extend(self, messages: Iterable[Message]) -> None:
        """Append messages to the epoch, in order (saved at the next checkpoint).

        Appends are not written one by one: the raw traces are the durable record of each event,
        and a snapshot file behind them is caught up from them when it is loaded
        (``MemoryManager`` does this). Every other change is a checkpoint, saved at once.
        """
        added = tuple(messages)
        if not added:
            return
        with self._mutex:
            self._state = self._state.model_copy(update={"messages": self._state.messages + added})
            self._dirty = True

    def save(self) -> None:
        """Write the snapshot if appends are not saved yet (atomically)."""
        with self._mutex:
            if self._dirty:
                self._set(self._state)

    def reset(self, base: Sequence[Message], *, presentation: PresentationState | None = None,
              new_epoch: bool = True) -> None:
        """Start from ``base`` (the Compaction Snapshot): the next epoch, unless ``new_epoch`` is
        false (the very first base: the system prompt). The presentation state is kept (results
        the model has seen stay cited) unless one is given."""
        with self._mutex:
            epoch = self._state.epoch_id + (1 if new_epoch else 0)
            self._set(self._state.model_copy(update={
                "epoch_id": epoch, "base_size": len(base), "messages": tuple(base),
                "presentation": presentation if presentation is not None else self._state.presentation,
                "last_compaction_ts": time.time() if new_epoch else self._state.last_compaction_ts,
            }))

    def commit_presentation(self, state: PresentationState) -> None:
        """Record what the last call showed, once the provider answered (saved at once)."""
        with self._mutex:
            self._set(self._state.model_copy(update={"presentation": state}))

    def update(self, **fields: object) -> None:
        """Set the bookkeeping fields (``last_prompt_tokens``, ``last_estimate_tokens``,
        ``compaction_requested``, ``pinned_items``) and save.

        Raises:
            ValueError: for any other field.
        """
        allowed = {"last_prompt_tokens", "last_estimate_tokens", "compaction_requested", "pinned_items"}
        if set(fields) - allowed:
            raise ValueError(f"cannot update {sorted(set(fields) - allowed)} this way")
        with self._mutex:
            self._set(self._state.model_copy(update=fields))

    def clear(self) -> None:
        """Forget everything: no messages, epoch 1, nothing shown."""
        with self._mutex:
            self._set(WorkingContextState())

    def refresh_pins(self) -> tuple[str, ...]:
        """The pinned item ids, with the pins and unpins another process (an MCP server, a second
        manager on this agent) wrote since this object last read or wrote the document."""
        with self._mutex:
            if self.slot is None or self.slot.token() == self._seen:
                return self._state.pinned_items
            merged, theirs, token = self._merged_pins(self._state.pinned_items)
            self._seen, self._seen_pins = token, theirs
            self._state = self._state.model_copy(update={"pinned_items": merged})
            return merged

    # -- persistence -----------------------------------------------------------------------------
    def _set(self, state: WorkingContextState) -> None:
        state = state.model_copy(update={"updated_at": time.time()})
        if self.slot is not None:
            for _ in range(MAX_SAVE_ATTEMPTS):
                pins, theirs, token = self._merged_pins(state.pinned_items)
                merged = state.model_copy(update={"pinned_items": pins})
                payload = json.dumps(to_payload(merged, self.agent_id), ensure_ascii=False).encode("utf-8")
                try:
                    self._seen = self.slot.put(payload, expect=token)
                except ConflictError:
                    continue  # another process wrote in between: merge its pins again
                self._seen_pins, state = pins, merged
                break
            else:
                raise ConflictError(f"{self.slot!r} kept changing: gave up after {MAX_SAVE_ATTEMPTS} attempts")
        self._state = state
        self._dirty = False

    def _merged_pins(self, ours: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...], ChangeToken]:
        """``ours`` with what another process changed in the document's pins since this object last
        saw it: a three-way merge of id sets (base: the pins last seen), so that neither side's
        pin or unpin is lost; ours first, in order. Returns the merge, the pins in the document and
        the document's token."""
        assert self.slot is not None
        token = self.slot.token()
        if token == self._seen:
            return ours, self._seen_pins, token
        try:
            theirs_state, token = self._load()
        except StoreError:  # unreadable now: the next write replaces it with ours
            return ours, self._seen_pins, token
        theirs = theirs_state.pinned_items
        base = set(self._seen_pins)
        unpinned = base - set(theirs)
        merged = [pin for pin in ours if pin not in unpinned]
        merged += [pin for pin in theirs if pin not in base and pin not in merged]
        return tuple(merged), theirs, token

    def _load(self) -> tuple[WorkingContextState, ChangeToken]:
        assert self.slot is not None
        raw, token = self.slot.get()
        if raw is None:
            return WorkingContextState(), token
        where = repr(self.slot)
        try:
            payload = json.loads(raw)
        except ValueError as exc:
            raise StoreError(f"{where} is not a working context snapshot: {exc}") from exc
        version = payload.get("schema_version") if isinstance(payload, dict) else None
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise StoreError(f"{where} has schema version {version!r}; this library reads up to {SCHEMA_VERSION}")
        try:
            return from_payload(payload), token
        except (ValidationError, ValueError, TypeError) as exc:
            raise StoreError(f"{where} is not a valid working context snapshot: {exc}") from exc


# -- the file format (AutoByteus' serializer, plus our own keys) -----------------------------------
def _message_payload(message: Message) -> dict[str, Any]:
    tool_payload: dict[str, Any] | None = None
    if message.tool_calls:
        tool_payload = {"tool_calls": [
            {"id": call.id, "name": call.name, "arguments": call.input if call.input is not None else call.arguments}
            for call in message.tool_calls
        ]}
    elif message.role == "tool":
        result: Any = message.content
        if message.tool_result_ref and result is None:
            result = f"[stored in memory as {message.tool_result_ref}]"
        tool_payload = {"tool_call_id": message.tool_call_id, "tool_name": message.name,
                        "tool_result": None if message.is_error else result,
                        "tool_error": result if message.is_error else None}
    return {
        "role": message.role,
        "content": message.content if message.role != "tool" else None,
        "reasoning_content": message.reasoning,
        "image_urls": list(message.media.images),
        "audio_urls": list(message.media.audio),
        "video_urls": list(message.media.video),
        "tool_payload": tool_payload,
        OWN_KEY: message.model_dump(mode="json", exclude_defaults=True),
    }


def _message_from_payload(data: dict[str, Any]) -> Message:
    own = data.get(OWN_KEY)
    if isinstance(own, dict):
        return Message.model_validate(own)
    payload = data.get("tool_payload") or {}
    media = {"images": tuple(data.get("image_urls") or ()), "audio": tuple(data.get("audio_urls") or ()),
             "video": tuple(data.get("video_urls") or ())}
    extra: dict[str, Any] = {"media": media} if any(media.values()) else {}
    if data.get("reasoning_content"):
        extra["reasoning"] = data["reasoning_content"]
    if "tool_calls" in payload:
        calls = []
        for call in payload.get("tool_calls") or []:
            args = call.get("arguments")
            spec = {"input": args} if isinstance(args, dict) else {"arguments": str(args or "{}")}
            calls.append(ToolCall(id=str(call.get("id")), name=str(call.get("name")), **spec))
        return Message(role="assistant", content=data.get("content"), tool_calls=tuple(calls), **extra)
    if "tool_call_id" in payload:
        error = payload.get("tool_error")
        body = error if error is not None else payload.get("tool_result")
        text = body if isinstance(body, str) else json.dumps(body, ensure_ascii=False)
        return Message(role="tool", tool_call_id=str(payload["tool_call_id"]), name=payload.get("tool_name"),
                       content=text, is_error=error is not None)
    return Message(role=data["role"], content=data.get("content"), **extra)


def to_payload(state: WorkingContextState, agent_id: str) -> dict[str, Any]:
    """The file's JSON object for ``state`` (AutoByteus' keys first, ours under ``agent_memory``)."""
    own = state.model_dump(mode="json", exclude={"schema_version", "epoch_id", "last_compaction_ts", "messages"})
    return {
        "schema_version": state.schema_version,
        "agent_id": agent_id,
        "epoch_id": state.epoch_id,
        "last_compaction_ts": state.last_compaction_ts,
        "messages": [_message_payload(message) for message in state.messages],
        OWN_KEY: own,
    }


def from_payload(payload: dict[str, Any]) -> WorkingContextState:
    """The state a file holds (ours, or one AutoByteus wrote)."""
    stored = payload.get(OWN_KEY)
    own = stored if isinstance(stored, dict) else {}
    messages = tuple(_message_from_payload(m) for m in payload.get("messages") or [] if isinstance(m, dict))
    return WorkingContextState.model_validate({
        **own,
        "schema_version": payload["schema_version"],
        "epoch_id": payload.get("epoch_id") or 1,
        "last_compaction_ts": payload.get("last_compaction_ts"),
        "messages": messages,
    })
