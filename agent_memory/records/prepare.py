"""Turning what a caller hands to ``AgentMemory.store`` (or a snapshot) into what the item store
writes: a validated :class:`ItemRecord`, the content blob's bytes, and the content as stored; and,
before that, what a tool result is and how it is stored (:func:`result_store_arguments`).

A tool result's store arguments are decided in one place for the replay, the memory manager, the
framework adapters and the agent loop (so no two callers can type the same result differently).
A result given as text is sniffed: a JSON document is a ``database_result`` (``application/json``),
an HTML page ``web_content`` (``text/html``), anything else an ``action_result`` (``text/plain``).
JSON-able data (not text) is a ``database_result`` stored as JSON. Its title is the call that made
it (``tool(args)``, short), its source the tool's name, unless the caller knows better.

Everything is checked before anything is written, and the cheap checks (types, the bounds of
:mod:`agent_memory.limits`, Unicode) run before the expensive steps (encoding the content,
counting its tokens, extracting a page's text), so a hostile argument costs nothing.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_memory.errors import InvalidArgumentError, StoreError, quoted
from agent_memory.html import looks_like_html
from agent_memory.ids import new_memory_id, validate_memory_id
from agent_memory.limits import MAX_RELATED, MAX_SOURCE_CHARS, MAX_TITLE_CHARS, shorten
from agent_memory.models.items import (
    MEMORY_TYPES,
    EncodedContent,
    ItemMetadata,
    ItemRecord,
    MemoryItem,
    MemorySnapshot,
    MemoryType,
    blank_content,
    content_from_bytes,
    content_to_bytes,
)
from agent_memory.storage.contracts import sha256_hex
from agent_memory.records.items import ItemStore
from agent_memory.tokens import EXACT_ESTIMATE_CHARS, TokenCounter, estimate_tokens
from agent_memory.transforms import raw_text, readable_text

__all__ = [
    "CALL_TITLE_ARGS_CHARS",
    "EAGER_COUNT_BYTES",
    "PreparedItem",
    "classify_result",
    "count_tokens",
    "counted_tokens",
    "prepare_item",
    "readable_tokens",
    "result_store_arguments",
    "snapshot_pairs",
    "str_list",
]


@dataclass(frozen=True)
class PreparedItem:
    """One item ready to be written."""

    record: ItemRecord
    """Its line of ``items.jsonl`` (id, type, metadata with sizes, hash and token counts)."""
    data: bytes
    """The bytes of its content blob."""
    content: Any
    """The content as it will read back (JSON after a round trip: tuples as lists), for indexing;
    a JSON result over :data:`EAGER_COUNT_BYTES` as an
    :class:`~agent_memory.models.items.EncodedContent` the indexing thread decodes."""


def str_list(name: str, value: object) -> tuple[Any, ...]:
    """An iterable of strings as a tuple; a single string is refused, not split into letters.

    Raises:
        InvalidArgumentError: if ``value`` is a string, bytes, or not iterable.
    """
    if isinstance(value, str | bytes):
        raise InvalidArgumentError(f"{name} must be a list of strings, not a single string")
    if not isinstance(value, Iterable):
        raise InvalidArgumentError(f"{name} must be a list of strings, not {type(value).__name__}")
    try:
        return tuple(value)
    except TypeError:
        raise InvalidArgumentError(f"{name} must be a list of strings, not {type(value).__name__}") from None


def prepare_item(
    store: ItemStore,
    counter: TokenCounter,
    content: Any,
    *,
    type: MemoryType = "custom",  # noqa: A002 - MemberJunction's field name
    source: str = "agent",
    tags: Iterable[str] = (),
    related_to: Iterable[str] = (),
    title: str | None = None,
    media_type: str | None = None,
    extra: dict[str, Any] | None = None,
    timestamp: datetime | None = None,
    reserved: set[str] | None = None,
    item_id: str | None = None,
    replacing: bool = False,
    allow_empty: bool = False,
) -> PreparedItem:
    """Validate and describe one result (the arguments of ``AgentMemory.store``).

    ``content`` may be a :class:`MemoryItem` (its type and metadata are used, its id is not).
    Blank content (:func:`~agent_memory.models.items.blank_content`: ``None``, ``""`` or only
    whitespace, ``b""``) is refused unless ``allow_empty``.
    The new id is free in ``store`` and not in ``reserved`` (ids of the same batch), and is
    added to ``reserved``; ``item_id`` chooses it instead (a deterministic id, e.g. of a
    compacted turn), and must be free, unless ``replacing`` (the new content of the stored item
    ``item_id``, :meth:`AgentMemory.rewrite`).

    Raises:
        InvalidArgumentError: for a wrong type, a value over its bound, invalid Unicode, blank
            content.
        InvalidIdError: if a ``related_to`` id is malformed.
        ItemNotFoundError: if a ``related_to`` id does not exist.
    """
    if isinstance(content, MemoryItem):
        meta = content.metadata
        return prepare_item(
            store, counter, content.content, type=content.type, source=meta.source, tags=meta.tags,
            related_to=meta.related_to, title=meta.title, media_type=meta.media_type,
            extra=dict(meta.extra), timestamp=meta.timestamp, reserved=reserved, item_id=item_id,
            allow_empty=allow_empty,
        )
    if not isinstance(allow_empty, bool):
        raise InvalidArgumentError(f"allow_empty must be True or False, not {type(allow_empty).__name__}")
    if not allow_empty and blank_content(content):
        what = "None" if content is None else "empty" if not content else "only whitespace"
        raise InvalidArgumentError(
            f"content is {what}: there is nothing to store (pass allow_empty=True to store an empty result anyway)"
        )
    related_ids = str_list("related_to", related_to)
    if len(related_ids) > MAX_RELATED:
        raise InvalidArgumentError(f"{len(related_ids):,} related ids; at most {MAX_RELATED} are allowed")
    meta_kwargs: dict[str, Any] = {} if timestamp is None else {"timestamp": timestamp}
    metadata = ItemMetadata(
        source=source, tags=str_list("tags", tags), related_to=related_ids, title=title,
        media_type=media_type, extra=extra if extra is not None else {}, **meta_kwargs,
    )
    if not isinstance(type, str) or type not in MEMORY_TYPES:
        raise InvalidArgumentError(f"type must be one of {', '.join(map(repr, MEMORY_TYPES))}; got {quoted(type)}")
    data, encoding = content_to_bytes(content)
    if encoding == "json":
        # From here on use the content as it reads back (tuples as lists, keys as strings), so
        # that token counts and the index are the same as after a rebuild or a restore, which
        # read it from the blob; a large result is read back by the indexing thread.
        content = content_from_bytes(data, encoding) if len(data) <= EAGER_COUNT_BYTES else EncodedContent(data, encoding)
    related = tuple(validate_memory_id(related_id) for related_id in related_ids)
    for related_id in related:
        store.get_record(related_id)
    metadata = metadata.model_copy(
        update={
            "size_bytes": len(data), "tokens": None, "related_to": related,
            "content_sha256": sha256_hex(data), "content_encoding": encoding,
        }
    )
    taken = reserved if reserved is not None else set()
    if item_id is not None:
        item_id = validate_memory_id(item_id)
        if not replacing and (item_id in taken or store.contains(item_id)):
            raise InvalidArgumentError(f"memory id {item_id} is already taken")
    else:
        item_id = new_memory_id(lambda candidate: candidate in taken or store.contains(candidate))
    taken.add(item_id)
    if len(data) <= EAGER_COUNT_BYTES:
        tokens, text_tokens = count_tokens(MemoryItem(id=item_id, type=type, metadata=metadata, content=content),
                                           counter)
        metadata = metadata.model_copy(update={"tokens": tokens, "text_tokens": text_tokens})
    return PreparedItem(ItemRecord(id=item_id, type=type, metadata=metadata), data, content)


EAGER_COUNT_BYTES = 64_000
"""Results up to this size (their blob, in bytes) are counted by ``store`` itself; a larger one is
stored uncounted (``metadata.tokens`` ``None``) and counted by the indexing thread, so that
``store`` never spends on it what counting takes: o200k runs at 2-8 MB/s on real pages and JSON
(``tiktoken`` on 2 cores), and an HTML page's main text needs trafilatura (0.4 s for a 1.6 MB page).
64 KB count in a few milliseconds."""


def count_tokens(item: MemoryItem, counter: TokenCounter) -> tuple[int, int | None]:
    """``(tokens, text_tokens)`` of an item's content, as its metadata holds them: the tokens of
    its raw text, and of its readable text (an HTML page's main text) when that differs
    (``None`` otherwise)."""
    raw = raw_text(item.content, item.metadata.content_encoding)
    readable, _ = readable_text(item)
    return counter.count(raw), (counter.count(readable) if readable != raw else None)


def counted_tokens(item: MemoryItem, counter: TokenCounter) -> tuple[int, int | None]:
    """An item's ``(tokens, text_tokens)``: its metadata's, or counted now when it is not counted
    yet (a large result whose counts the indexing thread has not written)."""
    meta = item.metadata
    if meta.tokens is not None:
        return meta.tokens, meta.text_tokens
    return count_tokens(item, counter)


def readable_tokens(item: MemoryItem, counter: TokenCounter) -> tuple[int, bool]:
    """``(tokens, estimated)`` of an item as a model reads it
    (:func:`~agent_memory.transforms.readable_text`: an HTML page's main text): its metadata's
    count when it is counted; else (a large result the indexing thread has not counted yet) its
    readable text counted now, or estimated (``estimated`` ``True``,
    :func:`~agent_memory.tokens.estimate_tokens`) when it is over
    :data:`~agent_memory.tokens.EXACT_ESTIMATE_CHARS` characters: 2.2 MB of JSON rows take
    0.3-1 s to count. Never counts the raw text of an item read otherwise: a 1.6 MB page is 380k
    tokens of markup for a few hundred of text."""
    meta = item.metadata
    if meta.tokens is not None:
        return (meta.text_tokens if meta.text_tokens is not None else meta.tokens), False
    readable, _ = readable_text(item)
    return estimate_tokens(readable, counter), len(readable) > EXACT_ESTIMATE_CHARS


def snapshot_pairs(snapshot: MemorySnapshot) -> list[tuple[ItemRecord, bytes]]:
    """The records and blob bytes that make a store hold exactly ``snapshot``'s items; a
    hand-built item (no sha256) gets the hash, encoding and size its content gives.

    Raises:
        InvalidArgumentError: if ``snapshot`` is not a :class:`MemorySnapshot`, two items share an
            id, or an item's content cannot be stored.
        InvalidIdError: if an item id is malformed.
        StoreError: if an item's content does not match its recorded sha256.
    """
    if not isinstance(snapshot, MemorySnapshot):
        raise InvalidArgumentError(f"restore takes a MemorySnapshot, not {type(snapshot).__name__}")
    pairs: list[tuple[ItemRecord, bytes]] = []
    seen: set[str] = set()
    for item in snapshot.items:
        if validate_memory_id(item.id) in seen:
            raise InvalidArgumentError(f"the snapshot holds item {item.id} twice")
        seen.add(item.id)
        data, encoding = content_to_bytes(item.content, item.metadata.content_encoding)
        if item.metadata.content_sha256 and sha256_hex(data) != item.metadata.content_sha256:
            raise StoreError(f"snapshot item {item.id}: content does not match its sha256")
        record = item.record
        if not item.metadata.content_sha256:
            derived = {"content_sha256": sha256_hex(data), "content_encoding": encoding, "size_bytes": len(data)}
            record = record.model_copy(update={"metadata": item.metadata.model_copy(update=derived)})
        pairs.append((record, data))
    return pairs


# -- a tool result's store arguments ----------------------------------------------------------------
CALL_TITLE_ARGS_CHARS = 60
"""Arguments longer than this are shown as ``tool(…)`` in a result's title."""


def classify_result(content: Any) -> tuple[MemoryType, str]:
    """``(memory type, media type)`` of a tool result (see the module docstring)."""
    if not isinstance(content, str | bytes):
        return "database_result", "application/json"
    if isinstance(content, bytes):
        return "file", "application/octet-stream"
    if content.lstrip()[:1] in ("[", "{"):
        try:
            json.loads(content)
        except ValueError:
            pass
        else:
            return "database_result", "application/json"
    if looks_like_html(content):
        return "web_content", "text/html"
    return "action_result", "text/plain"


def result_store_arguments(
    content: Any,
    *,
    tool: str | None,
    call_arguments: str | None = None,
    type: MemoryType | None = None,  # noqa: A002 - AgentMemory.store's name
    media_type: str | None = None,
    source: str | None = None,
    title: str | None = None,
) -> dict[str, Any]:
    """The arguments of ``AgentMemory.store`` for one tool result: what the caller knows, the
    rest sniffed (:func:`classify_result`) or derived from the call. A tool that answered nothing
    (``""``) is a result too: ``allow_empty`` is set."""
    if type is None or media_type is None:
        kind, media = classify_result(content)
        type, media_type = type or kind, media_type or media
    name = tool or "tool"
    if title is None and call_arguments:
        title = f"{name}({call_arguments})" if len(call_arguments) <= CALL_TITLE_ARGS_CHARS else f"{name}(…)"
    return {
        "content": content,
        "type": type,
        "media_type": media_type,
        "source": shorten(source or name, MAX_SOURCE_CHARS),
        "title": shorten(title, MAX_TITLE_CHARS) if title else title,
        "allow_empty": True,
    }
