"""Memory items and the shapes of store / retrieve / query (the memory interface of MemberJunction's
agent memory design, github.com/MemberJunction/MJ).

A :class:`MemoryItem` is one stored piece of content. On disk it is split in two: its
:class:`ItemRecord` (id, type, metadata) is one line of ``items.jsonl`` and its content is a
content-addressed blob ``content/<sha256>``. Content is text (``str``), binary (``bytes``) or
JSON-able data (dicts, lists, numbers, ...), kept as JSON and given back as the same Python value.

Every model a developer builds raises :class:`~agent_memory.errors.InvalidArgumentError` (a
``ValueError``) for bad values; strings and lists are bounded by :mod:`agent_memory.limits`.
Records read back from ``items.jsonl`` are validated with :data:`STORED_CONTEXT`, which keeps
the type checks but not the size bounds, so a record stored under other bounds stays readable.

Records carry a schema version (:attr:`ItemRecord.schema_version`, :data:`ITEM_SCHEMA_VERSION`);
a record from a newer version is kept as it is and refused when read
(:class:`~agent_memory.errors.UnsupportedRecordError`, see :mod:`agent_memory.records.items`).
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from itertools import chain, repeat
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple, get_args

import orjson
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)

from agent_memory.config import DEFAULT_QUERY_LIMIT, MAX_QUERY_LIMIT
from agent_memory.errors import InvalidArgumentError, StoreError, map_exceptions, quoted, validation_summary
from agent_memory.fileio import atomic_write_bytes
from agent_memory.limits import (
    MAX_AROUND_CHARS,
    MAX_EXTRA_CHARS,
    MAX_JSON_DEPTH,
    MAX_JSON_PATH_CHARS,
    MAX_KEYWORDS,
    MAX_MEDIA_TYPE_CHARS,
    MAX_PATTERN_CHARS,
    MAX_QUERY_CHARS,
    MAX_RELATED,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TITLE_CHARS,
    check_text,
    json_depth,
    shorten,
)
from agent_memory.models.bounds import JSON_DEPTH, STORED_CONTEXT, bounded_json, bounded_text, bounds_apply, check_length

__all__ = [
    "ContentEncoding",
    "ExcerptTransform",
    "FilteredTransform",
    "FirstNTransform",
    "FullTransform",
    "ITEM_SCHEMA_VERSION",
    "ItemMetadata",
    "ItemRecord",
    "LastNTransform",
    "MemoryCriteria",
    "MemoryItem",
    "MemorySnapshot",
    "MemoryTransform",
    "MEMORY_TYPES",
    "MemoryType",
    "QueryHit",
    "QueryRanking",
    "RetrieveResult",
    "STORED_CONTEXT",
    "SummaryTransform",
    "TRANSFORM_ADAPTER",
    "blank_content",
    "content_to_bytes",
    "content_from_bytes",
    "json_bytes",
    "utc_now",
]

MemoryType = Literal[
    "action_result", "web_content", "database_result", "search_results", "file", "custom",
    "conversation_turn", "episode", "fact",
]
"""What kind of result an item holds; chooses its compaction plugin and is a query filter. The
last three are the conversation's own memory, indexed when turns are compacted
(:mod:`agent_memory.kernel`): a compacted turn verbatim, an episodic summary, a semantic fact."""

MEMORY_TYPES: tuple[str, ...] = get_args(MemoryType)
"""Every :data:`MemoryType`, in the order above."""

REPR_CHARS = 80
"""Characters of a title, source, chunk or content that ``repr`` and ``print`` show of a record,
a hit or a retrieve answer."""

ContentEncoding = Literal["text", "bytes", "json"]
"""How the content blob decodes: UTF-8 text, raw bytes, or UTF-8 JSON."""


ITEM_SCHEMA_VERSION = 1
"""The newest item record format this version reads and writes (:attr:`ItemRecord.schema_version`).
Version 1 is the format of every release before the field existed; a version that changes what a
record means (a new field, a new type) raises it, and this version refuses such records loudly
instead of misreading or moving them."""

def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class _Model(BaseModel):
    """Base of the public models: a bad value raises :class:`InvalidArgumentError` (with
    pydantic's error list and the ``ValidationError`` as ``__cause__``) instead of pydantic's
    ``ValidationError``. ``model_validate`` and ``TypeAdapter`` keep raising ``ValidationError``."""

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise InvalidArgumentError.from_validation_error(exc, type(self).__name__) from exc

    # Only direct construction goes through this __init__: marked as pydantic's own, so validation
    # (model_validate, TypeAdapter, nested models) keeps its validation context and error type.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


def blank_content(content: Any) -> bool:
    """Whether ``content`` holds nothing to store: ``None``, an empty or whitespace-only ``str``,
    empty ``bytes``. Empty JSON containers (``{}``, ``[]``) are data (a search that found
    nothing), not blank."""
    if content is None:
        return True
    if isinstance(content, str):
        return not content.strip()
    if isinstance(content, bytes | bytearray | memoryview):
        return len(content) == 0
    return False


_ENCODED: ContextVar[tuple[Any, bytes, ContentEncoding] | None] = ContextVar("agent_memory_encoded", default=None)


@contextmanager
def encoded_once(content: Any) -> Iterator[tuple[bytes, ContentEncoding]]:
    """Serialise ``content`` (:func:`content_to_bytes`) and, inside the ``with`` block, in this
    thread (or task), answer :func:`content_to_bytes` of that same object (by identity, encoding
    chosen by type) with those bytes instead of serialising it again: one pass over a large
    result whose bytes the caller needs before ``store`` does (a tool result's id derived from
    them, ``EventProcessor``). The object must not change inside the block.

    Raises:
        InvalidArgumentError: as :func:`content_to_bytes`.
    """
    data, encoding = content_to_bytes(content)
    token = _ENCODED.set((content, data, encoding))
    try:
        yield data, encoding
    finally:
        _ENCODED.reset(token)


def content_to_bytes(content: Any, encoding: ContentEncoding | None = None) -> tuple[bytes, ContentEncoding]:
    """Serialise content for its blob: ``str`` → UTF-8, ``bytes`` as is, anything else → JSON.

    JSON is written compactly (no whitespace between tokens, ``ensure_ascii=False``) in the order
    it was built: the keys of a dict keep their insertion order, so ``{"zeta": 1, "alpha": 2}``
    reads back in that order. What JSON cannot keep is normalised: tuples come back as lists and
    non-string keys (``int``, ``float``, ``bool``, ``None``) as their JSON strings (``1`` → ``"1"``);
    two keys of one dict that would become the same string are refused. Blobs are addressed by
    the sha256 of these bytes, so equal data built in another key order is a second blob. (Blobs
    written by earlier versions, which sorted the keys, read back sorted, as they were written.)
    ``encoding="json"`` forces JSON (a JSON document that is a bare string); ``None`` chooses by
    type.

    Raises:
        InvalidArgumentError: (a ``TypeError``) if the content is neither text, bytes nor JSON-able,
            holds a lone surrogate, has colliding keys, or is JSON nested deeper than
            ``MAX_JSON_DEPTH``.
    """
    encoded = _ENCODED.get()
    if encoded is not None and encoded[0] is content and encoding is None:
        return encoded[1], encoded[2]
    if isinstance(content, str) and encoding != "json":
        try:
            return check_text(content, "content").encode("utf-8"), "text"
        except ValueError as exc:
            raise InvalidArgumentError(str(exc)) from None
    if isinstance(content, bytes | bytearray | memoryview):
        return bytes(content), "bytes"
    shape = _json_shape(content)
    if shape.plain and shape.string_keys and shape.depth <= MAX_JSON_DEPTH:
        data = json_bytes(content, floats=shape.floats)
        if data is not None:
            return data, "json"
    try:
        text = json.dumps(content, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        if isinstance(exc, RecursionError) or json_depth(content) > MAX_JSON_DEPTH:
            raise InvalidArgumentError(f"content is nested more than {MAX_JSON_DEPTH} levels deep") from None
        raise InvalidArgumentError(
            f"content must be str, bytes or JSON-able data, not {type(content).__name__}: {str(exc)[:200]}"
        ) from exc
    if shape.depth > MAX_JSON_DEPTH:
        raise InvalidArgumentError(f"content is nested more than {MAX_JSON_DEPTH} levels deep")
    try:
        check_text(text, "content")
        if not shape.string_keys:
            json.loads(text, object_pairs_hook=_unique_keys)
    except ValueError as exc:
        raise InvalidArgumentError(str(exc)) from None
    return text.encode("utf-8"), "json"


def json_bytes(content: Any, *, indent: bool = False, floats: bool = True) -> bytes | None:
    """``json.dumps(content, ensure_ascii=False, separators=(",", ":"))`` (``indent``: with
    ``indent=2`` and ``json``'s default separators) as UTF-8, written by orjson (~15x faster:
    2.4 MB of rows in ~2 ms instead of ~30), or ``None`` where orjson's text may differ from
    ``json``'s, for the caller to write with ``json``: content orjson refuses (integers beyond
    64 bits, lone surrogates, non-``str`` keys, nesting past 255), and, where the content holds
    floats (``floats=False``: the caller knows it holds none), any number in exponent form or
    ``0.0000`` in the text (orjson writes ``1e-05`` as ``0.00001`` and ``1e+16`` as ``1e16``;
    both write a finite float's shortest round-trip digits otherwise, github.com/ijl/orjson,
    README "Serialize": "float"). The caller must know the content holds only ``json``'s own
    types (``dict``, ``list``, ``tuple``, ``str``, ``int``, ``float``, ``bool``, ``None``,
    no subclass) and finite floats: orjson writes NaN as ``null`` and an enum, a UUID, a
    datetime or a dataclass where ``json`` refuses them."""
    try:
        data = orjson.dumps(content, option=orjson.OPT_INDENT_2 if indent else 0)
    except (orjson.JSONEncodeError, TypeError):
        return None
    if floats and (b"0.0000" in data or _exponent(data)):
        return None
    return data


def _exponent(data: bytes) -> bool:
    """Whether ``data`` may hold a number in exponent form: a digit, ``e``, then a sign or a digit
    (inside strings too, which only costs ``json``'s writer). The pattern starts with a literal,
    which is found faster than a class (2.5 ms for 2.2 MB of rows, against 11 ms for
    ``[0-9]e[-+0-9]``); the digit before it is checked apart."""
    return any(data[m.start() - 1 : m.start()].isdigit() for m in _EXPONENT.finditer(data, 1))


_EXPONENT = re.compile(rb"e[-+0-9]")
"""What follows the digits of a number in exponent form."""


_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_NUMBER = b"0" * 19
"""19 digits in a row (found in the text with every digit written as ``0``: ~3 ms for 2.2 MB,
where the regular expression ``[0-9]{19}`` took ~50): an integer that may lie beyond 64 bits
(9,223,372,036,854,775,807 has 19 digits), which orjson would read as a float (inside a string or
a float's digits it only costs ``json``'s slower reading)."""

_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types ``json.dumps`` writes as scalars: a container holding only these has no child to visit."""
_JSON_CONTAINERS = frozenset({dict, list, tuple})
_JSON_TYPES = _JSON_SCALARS | _JSON_CONTAINERS


class _Shape(NamedTuple):
    depth: int
    """Nesting depth (a scalar is 0); past ``MAX_JSON_DEPTH`` the walk stops (cyclic data too)."""
    string_keys: bool
    """Every key of every dict is exactly a ``str`` (no two keys can collide in JSON)."""
    plain: bool
    """Every value is exactly one of ``json``'s own types and every float is finite."""
    floats: bool
    """Some value is a float."""


def _json_shape(content: Any) -> _Shape:
    """The :class:`_Shape` of ``content``: one walk over the containers, without recursion, that
    looks at the set of types in each (a C-level pass) and descends only where one is not a plain
    scalar; a list of dicts (rows) is looked at all at once, its values chained: 8,715 rows of 11
    columns take ~3 ms, where parsing the 2.2 MB text back took ~40 ms and a depth scan of it ~80 ms.
    Given up past ``MAX_JSON_DEPTH`` (then ``depth`` is ``MAX_JSON_DEPTH + 1``), so cyclic data ends
    it too."""
    kind = type(content)
    if kind not in _JSON_CONTAINERS:
        return _Shape(0, True, kind in _JSON_SCALARS and _finite([content]), kind is float)
    deepest = 0
    string_keys = plain = True
    floats = False
    stack: list[tuple[Any, int]] = [(content, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
            if deepest > MAX_JSON_DEPTH:
                break
        if isinstance(node, dict):
            if string_keys and set(map(type, node)) - {str}:
                string_keys = False
            children: Any = node.values()
        else:
            children = node
        kinds = set(map(type, children))
        if kinds == {dict} and len(children) > 1:  # rows: their keys and values, chained at C speed
            if string_keys and set(map(type, chain.from_iterable(set(map(tuple, children))))) - {str}:
                string_keys = False
            values = list(chain.from_iterable(map(dict.values, children)))
            value_kinds = set(map(type, values))
            if value_kinds <= _JSON_SCALARS:
                deepest = max(deepest, depth + 1)  # the rows themselves, empty or not
                if float in value_kinds:
                    floats = True
                    plain = plain and _finite(values)
                continue
        if float in kinds:
            floats = True
            plain = plain and _finite(children)
        if kinds <= _JSON_SCALARS:
            continue
        if plain and not kinds <= _JSON_TYPES:
            plain = False
        if kinds <= _JSON_CONTAINERS:  # every child is visited, paired at C speed
            stack.extend(zip(children, repeat(depth + 1)))
        else:
            stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list | tuple))
    return _Shape(deepest, string_keys, plain, floats)


def _finite(values: Iterable[Any]) -> bool:
    """Whether every float among ``values`` is finite: their sum is (NaN or an infinity makes it
    NaN or infinite; finite floats whose sum overflows answer ``False`` too, which only sends the
    content to ``json``'s writer)."""
    return math.isfinite(sum([value for value in values if type(value) is float], 0.0))


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' object hook that refuses an object two of whose keys are the same JSON string
    (``{1: "a", "1": "b"}`` dumped: JSON would keep one of them, the other lost without a word)."""
    built = dict(pairs)
    if len(built) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise ValueError(f"two keys of one object are both written as the JSON key {quoted(key)}")
            seen.add(key)
    return built


def content_from_bytes(data: bytes, encoding: ContentEncoding) -> Any:
    """Inverse of :func:`content_to_bytes`.

    Raises:
        StoreError: if the blob does not decode as its encoding says.
    """
    try:
        if encoding == "text":
            return data.decode("utf-8")
        if encoding == "json":
            if _LONG_NUMBER not in data.translate(_DIGITS_AS_ZERO):  # orjson reads an integer past 64 bits as a float
                try:  # ~3x faster than json's; the same values (duplicate keys: the last wins in both)
                    return orjson.loads(data)
                except orjson.JSONDecodeError:  # NaN, written by hand: json's reading
                    pass
            return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise StoreError(f"content blob does not decode as {encoding}: {exc}") from exc
    except RecursionError as exc:
        raise StoreError(f"content blob is JSON nested too deeply to decode: {exc}") from exc
    return data


class EncodedContent:
    """A JSON result's content as its blob holds it, decoded when first read: what ``store``
    hands the indexing thread for a large result, so that reading the data back (~20 ms for
    2.2 MB of rows) happens there, not on the agent's path, and the index sees the stored bytes
    whatever the caller later does to the object it passed.

    Args:
        data: the blob's bytes (shared, never copied).
        encoding: its :data:`ContentEncoding`.
    """

    __slots__ = ("data", "encoding")

    def __init__(self, data: bytes, encoding: ContentEncoding) -> None:
        self.data = data
        self.encoding = encoding

    def decode(self) -> Any:
        """The content (:func:`content_from_bytes`); a new object on every call.

        Raises:
            StoreError: if the bytes do not decode as their encoding says.
        """
        return content_from_bytes(self.data, self.encoding)


class ItemMetadata(_Model):
    """What is known about an item besides its content (MemberJunction's ``MemoryItem.metadata``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Annotated[str, bounded_text(MAX_SOURCE_CHARS)] = "agent"
    """Where the content came from: a tool name, a URL, ``"user"``, ``"agent"``."""
    timestamp: datetime = Field(default_factory=utc_now)
    """When the item was stored (timezone-aware; naive datetimes are taken as UTC)."""
    size_bytes: int = Field(default=0, ge=0)
    """Size of the content blob in bytes (UTF-8 text, raw bytes, or compact JSON)."""
    tokens: int | None = Field(default=0, ge=0)
    """Size of the content as text, in tokens of the memory's encoding (o200k_base by default).
    ``None``: not counted yet: a result over ``records.prepare.EAGER_COUNT_BYTES`` is counted by
    the indexing thread after ``store`` returns, which then writes the counts into its record
    (:func:`~agent_memory.records.prepare.counted_tokens` counts one on demand meanwhile)."""
    text_tokens: int | None = Field(default=None, ge=0)
    """Size of the content as retrieve shows it by default (an HTML page as its main text), in
    tokens; ``None`` when it equals ``tokens`` (or when ``tokens`` is not counted yet)."""
    tags: tuple[str, ...] = ()
    """Free labels for filtering; lower-cased, deduplicated, sorted."""
    related_to: tuple[str, ...] = ()
    """Ids of other memory items this one relates to (e.g. the search that led to a page)."""
    content_sha256: str = ""
    """Hex sha256 of the content blob; names the blob file ``content/<sha256>``."""
    content_encoding: ContentEncoding = "text"
    """How the blob decodes: ``text``, ``bytes`` or ``json``."""
    title: Annotated[str, bounded_text(MAX_TITLE_CHARS)] | None = None
    """A human title (page title, tool call), or ``None`` when unknown."""
    media_type: Annotated[str, bounded_text(MAX_MEDIA_TYPE_CHARS)] | None = None
    """MIME type when known (``text/html``, ``application/json``), or ``None``."""
    extra: Annotated[dict[str, JsonValue], JSON_DEPTH, bounded_json(MAX_EXTRA_CHARS)] = Field(default_factory=dict)
    """Any further JSON-able facts (tool arguments, HTTP status, ...)."""

    @field_validator("timestamp")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        return value if value.tzinfo else value.replace(tzinfo=UTC)

    @field_validator("tags")
    @classmethod
    def _normalise_tags(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        tags = sorted({tag.strip().lower() for tag in value if tag and tag.strip()})
        if bounds_apply(info) and len(tags) > MAX_TAGS:
            raise ValueError(f"{len(tags):,} tags; at most {MAX_TAGS} are allowed")
        for tag in tags:
            check_length(tag, "a tag", MAX_TAG_CHARS, info)
        return tuple(tags)

    @field_validator("related_to")
    @classmethod
    def _bound_related(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if bounds_apply(info) and len(value) > MAX_RELATED:
            raise ValueError(f"{len(value):,} related ids; at most {MAX_RELATED} are allowed")
        return value


class ItemRecord(_Model):
    """One line of ``items.jsonl``: an item without its content (the content is in its blob)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = Field(
        default=ITEM_SCHEMA_VERSION, ge=1, le=ITEM_SCHEMA_VERSION, exclude_if=lambda version: version == 1
    )
    """The record format (:data:`ITEM_SCHEMA_VERSION`). Version 1 is not written out (a record
    without the field is version 1), so every line stays readable by versions before the field
    existed, which refuse fields they do not know; a higher version is written. A record of a
    version newer than this one is refused (``UnsupportedRecordError`` when the item is read)."""
    id: str
    """The memory id, ``mem_`` + 12 hex digits."""
    type: MemoryType = "custom"
    """Kind of content."""
    metadata: ItemMetadata = Field(default_factory=ItemMetadata)
    """Source, time, sizes, tags, links, content hash."""

    @property
    def title(self) -> str | None:
        """``metadata.title``: the item's human title, ``None`` when unknown."""
        return self.metadata.title

    @property
    def source(self) -> str:
        """``metadata.source``: where the content came from (a tool name, a URL)."""
        return self.metadata.source

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        """What ``repr`` and ``print`` show: the id, type, title (else source) and size, not every
        metadata field (``model_dump()`` gives them all)."""
        yield "id", self.id
        yield "type", self.type
        if self.metadata.title:
            yield "title", shorten(self.metadata.title, REPR_CHARS)
        else:
            yield "source", shorten(self.metadata.source, REPR_CHARS)
        yield "tokens", self.metadata.tokens


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

    @property
    def record(self) -> ItemRecord:
        """The item without its content (a new :class:`ItemRecord` at each read)."""
        return ItemRecord(id=self.id, type=self.type, metadata=self.metadata)

    def model_dump_json_safe(self) -> dict[str, Any]:
        """A JSON-able dict of the item; bytes content as base64."""
        data = self.model_dump(mode="json", exclude={"content"})
        if isinstance(self.content, bytes):
            data["content"] = base64.b64encode(self.content).decode("ascii")
        else:
            data["content"] = self.content
        return data


class _TransformBase(_Model):
    model_config = ConfigDict(frozen=True, extra="forbid")

    @field_validator("*")
    @classmethod
    def _valid_unicode(cls, value: Any, info: ValidationInfo) -> Any:
        if isinstance(value, str):
            check_text(value, info.field_name or "a value")
        elif isinstance(value, tuple):
            for part in value:
                if isinstance(part, str):
                    check_text(part, info.field_name or "a value")
        return value


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
    around: str | None = Field(default=None, min_length=1, max_length=MAX_AROUND_CHARS)
    """A string to find (case-insensitive, at most ``MAX_AROUND_CHARS``); every match is shown
    with its context."""
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
    pattern: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN_CHARS)
    """A regular expression (Python syntax, run by the ``regex`` module with a time budget of
    ``REGEX_TIMEOUT_S``; repetition counts up to ``MAX_REPEAT``); lines that match are kept
    (case-insensitive)."""
    keywords: tuple[Annotated[str, Field(max_length=MAX_PATTERN_CHARS)], ...] = Field(
        default=(), max_length=MAX_KEYWORDS
    )
    """Lines that contain any of these words (case-insensitive) are kept."""
    context_lines: int = Field(default=0, ge=0, le=50)
    """Lines shown before and after each matching line."""
    json_path: str | None = Field(default=None, min_length=1, max_length=MAX_JSON_PATH_CHARS)
    """Dotted path into JSON content: ``a.b.0.c``; ``*`` maps over a list (``results.*.url``)."""
    column: str | None = Field(default=None, min_length=1, max_length=MAX_JSON_PATH_CHARS)
    """Column (key) compared with ``value`` in tabular content."""
    value: Annotated[JsonValue, JSON_DEPTH, bounded_json(MAX_PATTERN_CHARS)] = None
    """Value the ``column`` must equal (compared as text, so ``3`` matches ``"3"``); at most
    ``MAX_PATTERN_CHARS`` as JSON."""


class SummaryTransform(_TransformBase):
    """A short deterministic extractive summary (lead, headings, highest-scoring sentences)."""

    type: Literal["summary"] = "summary"
    max_tokens: int = Field(default=400, ge=20, le=4_000)
    """Length of the summary, in tokens."""


MemoryTransform = Annotated[
    FullTransform | ExcerptTransform | FirstNTransform | LastNTransform | FilteredTransform | SummaryTransform,
    Field(discriminator="type"),
]
"""How retrieve shapes content (MemberJunction's ``MemoryTransform``), discriminated by ``type``."""

TRANSFORM_ADAPTER: TypeAdapter[MemoryTransform] = TypeAdapter(MemoryTransform)
"""Validates a dict such as ``{"type": "first_n", "n": 20}`` into a transform."""


class MemoryCriteria(_Model):
    """Filters of a query (MemberJunction's ``MemoryCriteria``). All given filters must hold (AND).

    Without ``text`` (``None``) the newest matching items come first: a listing. With ``text`` the
    items whose best chunk is most similar come first. An empty or whitespace-only ``text`` is
    refused (``InvalidArgumentError``) rather than taken as a listing: leave ``text`` out to list.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    text: str | None = Field(default=None, max_length=MAX_QUERY_CHARS)
    """Search text (at most ``MAX_QUERY_CHARS``, not blank); ``None`` lists items by time, newest
    first."""
    type: MemoryType | None = None
    """Only items of this type; ``None``: any type."""
    source: str | None = Field(default=None, max_length=MAX_SOURCE_CHARS)
    """Only items whose source equals this string exactly; ``None``: any source."""
    tags: tuple[Annotated[str, Field(max_length=MAX_TAG_CHARS)], ...] = Field(default=(), max_length=MAX_TAGS)
    """Only items carrying every one of these tags (case-insensitive; at most ``MAX_TAGS``)."""
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
        for tag in value:
            check_text(tag, "a tag")
        return tuple(sorted({tag.strip().lower() for tag in value if tag.strip()}))

    @field_validator("source")
    @classmethod
    def _valid_source(cls, value: str | None) -> str | None:
        return None if value is None else check_text(value, "source")

    @field_validator("text")
    @classmethod
    def _not_blank(cls, value: str | None) -> str | None:
        if value is not None:
            check_text(value, "text")
            if not value.strip():
                raise ValueError(
                    "text is empty or only whitespace; give words to search for, or leave text out "
                    "(text=None) to list items newest first"
                )
        return value


QueryRanking = Literal["default", "similarity"]
"""How a text query ranks items: ``default``, as the memory's config says (hybrid fusion and
multi-hop search, ``MemoryConfig.hybrid_search`` / ``multi_hop``); ``similarity``, by the cosine
similarity of each item's best chunk to the text alone (one dense search), which is then the
hit's ``score``: an absolute relevance, comparable across queries, as vector stores report it."""


class QueryHit(_Model):
    """One item found by a query, with the chunk of it that matched best."""

    model_config = ConfigDict(frozen=True)

    item: ItemRecord
    """The item (without content; retrieve it by ``item.id``)."""
    score: float | None = None
    """Relevance that orders the hits, higher is better: with multi-hop search (the default)
    ``1 / (rrf_k + rank)`` of the hit's rank in the merged ranking of the query and its
    follow-up; else the reciprocal-rank-fusion score in hybrid search (sum of weight / (k + rank)
    over dense and keyword rankings; items whose similarities are within ``SCORE_TOLERANCE``
    share a dense rank), the cosine similarity in dense-only search and with ``ranking="similarity"``
    (:data:`QueryRanking`). Compare a fused score within one query only. ``None`` without text.
    Not rounded."""
    similarity: float | None = None
    """Cosine similarity in [-1, 1] of the item's best chunk to the query text, ``None`` when the
    item was found by keywords only or the query had no text. Not rounded; vectors recomputed by
    ``restore`` or ``rebuild_index`` (or on another machine) give a similarity that agrees within
    ``agent_memory.SCORE_TOLERANCE`` (1e-4), not to the last digit."""
    chunk: str | None = None
    """Text of the best-matching chunk (``None`` when the query had no text)."""
    chunk_index: int | None = None
    """0-based position of that chunk in the item."""
    chunk_start_char: int | None = None
    """Offset of the chunk in the item's indexed text, in characters."""

    @property
    def match(self) -> str | None:
        """How well the hit matches, as the memory tools, the CLI and the inspector show it:
        ``"similarity 0.80"`` (:attr:`similarity`, 2 decimals), ``"keyword match"`` (found by its
        keywords only), ``None`` (a query without text). :attr:`score` only orders one query's
        hits (a fused score is ~0.016 for the best hit of any query)."""
        if self.similarity is not None:
            return f"similarity {self.similarity:.2f}"
        return "keyword match" if self.score is not None else None

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        """What ``repr`` and ``print`` show: the item in short, the scores, the chunk's start."""
        yield "item", self.item
        yield "score", self.score
        yield "similarity", self.similarity
        if self.chunk is not None:
            yield "chunk", shorten(self.chunk, REPR_CHARS)


class RetrieveResult(_Model):
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

    def __repr_args__(self) -> Iterable[tuple[str | None, Any]]:
        """What ``repr`` and ``print`` show: the item in short, the transform, the page, the start
        of the content (``.content`` holds all of it)."""
        yield "item", self.item
        yield "transform", self.transform.type
        yield "page", f"{self.page}/{self.pages}"
        yield "tokens", self.tokens
        yield "content", shorten(self.content, REPR_CHARS)

    @property
    def truncated(self) -> bool:
        """``True`` when more pages follow this one."""
        return self.page < self.pages


class MemorySnapshot(_Model):
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
        """Write the snapshot as one UTF-8 JSON file (bytes content as base64), atomically (a
        temporary file renamed over ``path``: a crash leaves the old file or the new one, never
        half of one); returns the path.

        Raises:
            InvalidArgumentError: if ``path`` is not a path, or an item's content cannot be written
                as JSON (a lone surrogate, nesting deeper than Python's JSON encoder allows).
            StoreError: if the file cannot be written (missing directory, no space); an existing
                file at ``path`` is then unchanged.
        """
        with map_exceptions("MemorySnapshot.save"):
            target = Path(path)
            payload = {
                "agent_id": self.agent_id,
                "created_at": self.created_at.isoformat(),
                "items": [item.model_dump_json_safe() for item in self.items],
            }
            data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            atomic_write_bytes(target, data)
            return target

    @classmethod
    def load(cls, path: str | Path) -> MemorySnapshot:
        """Read a snapshot written by :meth:`save`.

        Raises:
            InvalidArgumentError: if ``path`` is not a path.
            StoreError: if the file is missing, unreadable, or not a snapshot.
        """
        with map_exceptions("MemorySnapshot.load"):
            target = Path(path)
            try:
                data = target.read_bytes()
            except OSError as exc:
                raise StoreError(f"cannot read snapshot {target}: {exc}") from exc
            try:
                return cls.model_validate_json(data)
            except ValidationError as exc:
                raise StoreError(f"{target} is not a valid snapshot: {validation_summary(exc)}") from exc
