"""Memory items and the shapes of store / retrieve / query (seed 002, "Memory Interface").

A :class:`MemoryItem` is one stored piece of content. On disk it is split in two: its
:class:`ItemRecord` (id, type, metadata) is one line of ``items.jsonl`` and its content is a
content-addressed blob ``content/<sha256>``. Content is text (``str``), binary (``bytes``) or
JSON-able data (dicts, lists, numbers, ...), kept as JSON and given back as the same Python value.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, TypeAdapter, field_validator, model_validator

from agent_memory.config import DEFAULT_QUERY_LIMIT, MAX_QUERY_LIMIT
from agent_memory.errors import StoreError

__all__ = [
    "ContentEncoding",
    "ExcerptTransform",
    "FilteredTransform",
    "FirstNTransform",
    "FullTransform",
    "ItemMetadata",
    "ItemRecord",
    "LastNTransform",
    "MemoryCriteria",
    "MemoryItem",
    "MemorySnapshot",
    "MemoryTransform",
    "MemoryType",
    "QueryHit",
    "RetrieveResult",
    "SummaryTransform",
    "TRANSFORM_ADAPTER",
    "content_to_bytes",
    "content_from_bytes",
    "utc_now",
]

MemoryType = Literal["action_result", "web_content", "database_result", "search_results", "file", "custom"]
"""What kind of result an item holds; chooses its compaction plugin and is a query filter."""

ContentEncoding = Literal["text", "bytes", "json"]
"""How the content blob decodes: UTF-8 text, raw bytes, or UTF-8 JSON."""


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


def content_to_bytes(content: Any, encoding: ContentEncoding | None = None) -> tuple[bytes, ContentEncoding]:
    """Serialise content for its blob: ``str`` → UTF-8, ``bytes`` as is, anything else → JSON.

    JSON is written with sorted keys and no extra whitespace, so identical data gives an
    identical blob (and one sha256) whatever the key order it was built with. ``encoding="json"``
    forces JSON (a JSON document that is a bare string); ``None`` chooses by type.

    Raises:
        TypeError: if the content is neither text, bytes nor JSON-able.
    """
    if isinstance(content, str) and encoding != "json":
        return content.encode("utf-8"), "text"
    if isinstance(content, bytes | bytearray | memoryview):
        return bytes(content), "bytes"
    try:
        text = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise TypeError(
            f"content must be str, bytes or JSON-able data, not {type(content).__name__}: {exc}"
        ) from exc
    return text.encode("utf-8"), "json"


def content_from_bytes(data: bytes, encoding: ContentEncoding) -> Any:
    """Inverse of :func:`content_to_bytes`.

    Raises:
        StoreError: if the blob does not decode as its encoding says.
    """
    try:
        if encoding == "text":
            return data.decode("utf-8")
        if encoding == "json":
            return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"content blob does not decode as {encoding}: {exc}") from exc
    return data


class ItemMetadata(BaseModel):
    """What is known about an item besides its content (seed 002 ``MemoryItem.metadata``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str = "agent"
    """Where the content came from: a tool name, a URL, ``"user"``, ``"agent"``."""
    timestamp: datetime = Field(default_factory=utc_now)
    """When the item was stored (timezone-aware; naive datetimes are taken as UTC)."""
    size_bytes: int = Field(default=0, ge=0)
    """Size of the content blob in bytes (UTF-8 text, raw bytes, or compact JSON)."""
    tokens: int = Field(default=0, ge=0)
    """Size of the content as text, in tokens of the memory's encoding (o200k_base by default)."""
    text_tokens: int | None = Field(default=None, ge=0)
    """Size of the content as retrieve shows it by default (an HTML page as its main text), in
    tokens; ``None`` when it equals ``tokens``."""
    tags: tuple[str, ...] = ()
    """Free labels for filtering; lower-cased, deduplicated, sorted."""
    related_to: tuple[str, ...] = ()
    """Ids of other memory items this one relates to (e.g. the search that led to a page)."""
    content_sha256: str = ""
    """Hex sha256 of the content blob; names the blob file ``content/<sha256>``."""
    content_encoding: ContentEncoding = "text"
    """How the blob decodes: ``text``, ``bytes`` or ``json``."""
    title: str | None = None
    """A human title (page title, tool call), or ``None`` when unknown."""
    media_type: str | None = None
    """MIME type when known (``text/html``, ``application/json``), or ``None``."""
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Any further JSON-able facts (tool arguments, HTTP status, ...)."""

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @field_validator("tags")
    @classmethod
    def _normalise_tags(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        tags = {tag.strip().lower() for tag in value if tag and tag.strip()}
        return tuple(sorted(tags))


class ItemRecord(BaseModel):
    """One line of ``items.jsonl``: an item without its content (the content is in its blob)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str
    """The memory id, ``mem_`` + 12 hex digits."""
    type: MemoryType = "custom"
    """Kind of content."""
    metadata: ItemMetadata = Field(default_factory=ItemMetadata)
    """Source, time, sizes, tags, links, content hash."""


class MemoryItem(ItemRecord):
    """One stored piece of content: an :class:`ItemRecord` plus the content itself.

    ``content`` is the value that was stored: ``str``, ``bytes``, or JSON-able data. In JSON
    form (snapshots) bytes are base64; ``metadata.content_encoding`` says how to read them back.
    """

    content: Any = None
    """The full content, of the Python type it was stored with."""

    @model_validator(mode="after")
    def _decode_base64(self) -> MemoryItem:
        if self.metadata.content_encoding == "bytes" and isinstance(self.content, str):
            object.__setattr__(self, "content", base64.b64decode(self.content))
        return self

    def record(self) -> ItemRecord:
        """The item without its content."""
        return ItemRecord(id=self.id, type=self.type, metadata=self.metadata)

    def model_dump_json_safe(self) -> dict[str, Any]:
        """A JSON-able dict of the item; bytes content as base64."""
        data = self.model_dump(mode="json", exclude={"content"})
        if isinstance(self.content, bytes):
            data["content"] = base64.b64encode(self.content).decode("ascii")
        else:
            data["content"] = self.content
        return data


class _TransformBase(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class FullTransform(_TransformBase):
    """The whole content, as text (paged when it is longer than the answer's token cap)."""

    type: Literal["full"] = "full"


class ExcerptTransform(_TransformBase):
    """A part of the content: a character range, a line range, or the text around a query string.

    Exactly one way must be given: ``start_char``/``end_char`` (0-based, end exclusive),
    ``start_line``/``end_line`` (1-based, inclusive), or ``around`` (case-insensitive search;
    each match with ``context_chars`` on both sides).
    """

    type: Literal["excerpt"] = "excerpt"
    start_char: int | None = Field(default=None, ge=0)
    """First character, 0-based; ``None`` with ``end_char`` set means 0."""
    end_char: int | None = Field(default=None, ge=0)
    """One past the last character; ``None`` means the end."""
    start_line: int | None = Field(default=None, ge=1)
    """First line, 1-based; ``None`` with ``end_line`` set means 1."""
    end_line: int | None = Field(default=None, ge=1)
    """Last line, 1-based, inclusive; ``None`` means the last line."""
    around: str | None = Field(default=None, min_length=1)
    """A string to find (case-insensitive); every match is shown with its context."""
    context_chars: int = Field(default=400, ge=0, le=20_000)
    """Characters shown before and after each ``around`` match."""
    max_matches: int = Field(default=5, ge=1, le=50)
    """Matches of ``around`` shown at most, first ones first."""


class FirstNTransform(_TransformBase):
    """The first ``n`` lines or tokens."""

    type: Literal["first_n"] = "first_n"
    n: int = Field(default=50, ge=1)
    unit: Literal["lines", "tokens"] = "lines"


class LastNTransform(_TransformBase):
    """The last ``n`` lines or tokens."""

    type: Literal["last_n"] = "last_n"
    n: int = Field(default=50, ge=1)
    unit: Literal["lines", "tokens"] = "lines"


class FilteredTransform(_TransformBase):
    """Only what matches: lines by regex ``pattern`` or ``keywords``, JSON by ``json_path``, or
    rows (a list of objects, or ``{"columns": [...], "rows": [[...]]}``) whose ``column`` equals
    ``value``. At least one filter must be given; several combine in that order.
    """

    type: Literal["filtered"] = "filtered"
    pattern: str | None = Field(default=None, min_length=1)
    """A Python regular expression; lines that match are kept (case-insensitive)."""
    keywords: tuple[str, ...] = ()
    """Lines that contain any of these words (case-insensitive) are kept."""
    context_lines: int = Field(default=0, ge=0, le=50)
    """Lines shown before and after each matching line."""
    json_path: str | None = Field(default=None, min_length=1)
    """Dotted path into JSON content: ``a.b.0.c``; ``*`` maps over a list (``results.*.url``)."""
    column: str | None = Field(default=None, min_length=1)
    """Column (key) compared with ``value`` in tabular content."""
    value: JsonValue = None
    """Value the ``column`` must equal (compared as text, so ``3`` matches ``"3"``)."""


class SummaryTransform(_TransformBase):
    """A short deterministic extractive summary (lead, headings, highest-scoring sentences)."""

    type: Literal["summary"] = "summary"
    max_tokens: int = Field(default=400, ge=20, le=4_000)
    """Length of the summary, in tokens."""


MemoryTransform = Annotated[
    FullTransform | ExcerptTransform | FirstNTransform | LastNTransform | FilteredTransform | SummaryTransform,
    Field(discriminator="type"),
]
"""How retrieve shapes content (seed 002 ``MemoryTransform``), discriminated by ``type``."""

TRANSFORM_ADAPTER: TypeAdapter[MemoryTransform] = TypeAdapter(MemoryTransform)
"""Validates a dict such as ``{"type": "first_n", "n": 20}`` into a transform."""


class MemoryCriteria(BaseModel):
    """Filters of a query (seed 002 ``MemoryCriteria``). All given filters must hold (AND).

    Without ``text`` the newest matching items come first; with ``text`` the items whose best
    chunk is most similar come first.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str | None = None
    """Semantic search text; ``None`` lists items by time, newest first."""
    type: MemoryType | None = None
    """Only items of this type; ``None``: any type."""
    source: str | None = None
    """Only items whose source equals this string exactly; ``None``: any source."""
    tags: tuple[str, ...] = ()
    """Only items carrying every one of these tags (case-insensitive)."""
    since: datetime | None = None
    """Only items stored at or after this time; ``None``: no lower bound."""
    until: datetime | None = None
    """Only items stored at or before this time; ``None``: no upper bound."""
    limit: int = Field(default=DEFAULT_QUERY_LIMIT, ge=1, le=MAX_QUERY_LIMIT)
    """Most items returned."""

    @field_validator("since", "until")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value

    @field_validator("tags")
    @classmethod
    def _lower(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted({tag.strip().lower() for tag in value if tag.strip()}))

    @field_validator("text")
    @classmethod
    def _blank_is_none(cls, value: str | None) -> str | None:
        return value if value and value.strip() else None


class QueryHit(BaseModel):
    """One item found by a query, with the chunk of it that matched best."""

    model_config = ConfigDict(frozen=True)

    item: ItemRecord
    """The item (without content; retrieve it by ``item.id``)."""
    score: float | None = None
    """Relevance that orders the hits, higher is better: the reciprocal-rank-fusion score in
    hybrid search (sum of weight / (k + rank) over dense and keyword rankings), the cosine
    similarity in dense-only search. Compare it within one query only. ``None`` without text."""
    similarity: float | None = None
    """Cosine similarity in [-1, 1] of the item's best chunk to the query text, ``None`` when the
    item was found by keywords only or the query had no text."""
    chunk: str | None = None
    """Text of the best-matching chunk (``None`` when the query had no text)."""
    chunk_index: int | None = None
    """0-based position of that chunk in the item."""
    chunk_start_char: int | None = None
    """Offset of the chunk in the item's indexed text, in characters."""


class RetrieveResult(BaseModel):
    """What retrieve gives back: the shaped content as text, capped, with paging facts."""

    model_config = ConfigDict(frozen=True)

    item: ItemRecord
    """The item that was read."""
    transform: MemoryTransform
    """The transform that was applied."""
    content: str
    """The shaped content of this page, as text."""
    tokens: int
    """Tokens in ``content``."""
    total_tokens: int
    """Tokens of the whole transformed text (all pages)."""
    page: int = 1
    """This page, 1-based."""
    pages: int = 1
    """Number of pages of the transformed text under this ``max_tokens``."""
    max_tokens: int
    """The cap that was applied, in tokens."""
    notes: tuple[str, ...] = ()
    """Facts about how the answer was made (no match found, binary shown as base64, ...)."""

    @property
    def truncated(self) -> bool:
        """``True`` when more pages follow this one."""
        return self.page < self.pages


class MemorySnapshot(BaseModel):
    """A frozen, serialisable copy of an AgentMemory: every item with its content.

    Hand it to a sub-agent, or save it with :meth:`save` and load it elsewhere with :meth:`load`;
    ``AgentMemory.restore`` turns it back into a memory (in any directory).
    """

    model_config = ConfigDict(frozen=True)

    agent_id: str
    """The agent whose memory was copied."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the snapshot was taken."""
    items: tuple[MemoryItem, ...] = ()
    """Every item, oldest first, with its content."""

    def save(self, path: str | Path) -> Path:
        """Write the snapshot as one JSON file (bytes content as base64); returns the path."""
        target = Path(path)
        payload = {
            "agent_id": self.agent_id,
            "created_at": self.created_at.isoformat(),
            "items": [item.model_dump_json_safe() for item in self.items],
        }
        target.write_text(json.dumps(payload, ensure_ascii=False), encoding="utf-8")
        return target

    @classmethod
    def load(cls, path: str | Path) -> MemorySnapshot:
        """Read a snapshot written by :meth:`save`.

        Raises:
            StoreError: if the file is missing or not a snapshot.
        """
        try:
            return cls.model_validate_json(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise StoreError(f"cannot read snapshot {path}: {exc}") from exc
