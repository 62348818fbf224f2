"""Retrieve transforms (MemberJunction's ``MemoryTransform``, github.com/MemberJunction/MJ), token
caps and paging.

A transform turns an item into text: ``full``, ``excerpt`` (char range, line range, or around a
string), ``first_n`` / ``last_n`` (lines or tokens), ``filtered`` (regex or keyword lines, a JSON
key path, rows by column value) or ``summary``. The text is then cut into pages of at most
``max_tokens`` tokens (page ends move back to a line break, else a space, within the last fifth
of the page), and one page is returned with the facts needed to ask for the next one.

Items are read as *readable text*: an HTML page as its extracted main text (``raw=True`` gives
the markup), JSON pretty-printed with 2-space indents, bytes as UTF-8 text or else base64.

Transforms come from models, so nothing they are given may hang, crash or flood the answer:
regular expressions run on the ``regex`` module with a time budget (``limits.REGEX_TIMEOUT_S``
plus ``REGEX_LINE_ALLOWANCE_S`` per line), bounded repetition counts (``limits.MAX_REPEAT``) and
bounded expanded size (``MAX_PATTERN_EXPANSION``); JSON deeper than ``limits.MAX_JSON_DEPTH`` is
refused; every failure is a :class:`TransformError` whose message quotes at most a short prefix
of the bad input.
"""

from __future__ import annotations

import base64
import bisect
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Literal, overload

import regex
from pydantic import BaseModel, ValidationError

from agent_memory.background import CHECKPOINT_ROWS, checkpoint
from agent_memory.errors import InvalidArgumentError, TransformError, quoted, validation_summary
from agent_memory.html import extract_page, looks_like_html
from agent_memory.limits import MAX_JSON_DEPTH, MAX_PATTERN_CHARS, MAX_REPEAT, REGEX_TIMEOUT_S, json_depth, shorten
from agent_memory.models.items import (
    TRANSFORM_ADAPTER,
    ContentEncoding,
    ExcerptTransform,
    FilteredTransform,
    FirstNTransform,
    FullTransform,
    LastNTransform,
    MemoryItem,
    MemoryTransform,
    RetrieveResult,
    SummaryTransform,
    json_bytes,
)
from agent_memory.tokens import TokenCounter

_TRANSFORM_TYPES = (FullTransform, ExcerptTransform, FirstNTransform, LastNTransform, FilteredTransform, SummaryTransform)

__all__ = [
    "MAX_JSON_LINES",
    "MAX_PATTERN_EXPANSION",
    "MIN_MAX_TOKENS",
    "PAGE_NOTICE_TOKENS",
    "JsonFormat",
    "REGEX_LINE_ALLOWANCE_S",
    "Summarizer",
    "apply_transform",
    "compile_pattern",
    "extractive_summary",
    "json_to_lines",
    "parse_transform",
    "raw_text",
    "readable_text",
]

PAGE_NOTICE_TOKENS = 60
"""Tokens kept free on a cut page for the notice that says how to get the next page."""

MIN_MAX_TOKENS = 2 * PAGE_NOTICE_TOKENS
"""Smallest ``max_tokens`` of one answer: the page notice and at least as much content."""

MAX_PATTERN_EXPANSION = 100_000
"""Largest size of a pattern with its repetitions multiplied out (``(a{1000}){100}`` is 100,000).
The ``regex`` module expands nested counted repeats when it compiles: 100,000 compiles in ~0.06 s,
``(a{1000}){1000}`` took 0.5 s and ``((a{1000}){1000}){1000}`` exhausted the memory."""

REGEX_LINE_ALLOWANCE_S = 10e-6
"""Time added to a filtered transform's regex budget per line of text, in seconds. The text is
searched once, with one search per matching line (~4 µs of fixed overhead each); this allowance
keeps a harmless pattern that matches every line of a 100,000-line log within budget, while a
pattern that backtracks is still stopped (the budget stays bounded: 1.25 s for 100,000 lines)."""

Summarizer = Callable[[MemoryItem, str, int], str]
"""``(item, readable_text, max_tokens) -> summary``: how the ``summary`` transform is made."""


def parse_transform(transform: MemoryTransform | dict[str, Any] | str | None, **params: Any) -> MemoryTransform:
    """A transform model from a model, a dict (``{"type": "first_n", "n": 20}``), a type name, or
    ``None`` (``full``); ``params`` are the transform's fields as keywords, with a type name
    (``parse_transform("excerpt", around="ACLU")``) or without one, when they name one transform
    only (``around`` an excerpt, ``pattern`` a filter: ``parse_transform(None, around="ACLU")``).

    Raises:
        TransformError: if the value does not describe a valid transform, the keywords fit several
            transforms and no type name is given, or a dict or model is given with keywords too.
        InvalidArgumentError: if a keyword is no field of any transform (a typo).
    """
    if params:
        transform = {"type": _type_of(transform, params), **params}
    if transform is None:
        return FullTransform()
    if isinstance(transform, str):
        transform = {"type": transform}
    if isinstance(transform, dict):
        try:
            return TRANSFORM_ADAPTER.validate_python(transform)
        except ValidationError as exc:
            raise TransformError(f"invalid transform {quoted(transform)}: {validation_summary(exc)}") from exc
        except RecursionError as exc:
            raise TransformError("invalid transform: nested too deeply") from exc
    if isinstance(transform, BaseModel) and isinstance(transform, _TRANSFORM_TYPES):
        return transform
    raise TransformError(
        f"invalid transform {quoted(transform)}: give a transform model, a dict like "
        '{"type": "first_n", "n": 20}, a type name like "summary", or None'
    )


def _type_of(transform: object, params: dict[str, Any]) -> str:
    """The transform type that keyword ``params`` belong to: ``transform`` when it is a type name,
    else the one transform that has every one of them as a field."""
    if isinstance(transform, str):
        return transform
    if transform is not None:
        raise TransformError(
            f"give the transform's fields in it or as keywords after a type name, not both: {quoted(transform)} "
            f"and {', '.join(params)}")
    fields = {model.model_fields["type"].default: set(model.model_fields) - {"type"} for model in _TRANSFORM_TYPES}
    unknown = sorted(set(params) - set().union(*fields.values()))
    if unknown:
        raise InvalidArgumentError(
            f"no transform has {', '.join(map(repr, unknown))}; the fields are: "
            + "; ".join(f"{name}: {', '.join(sorted(names))}" for name, names in fields.items() if names))
    fitting = [name for name, names in fields.items() if set(params) <= names]
    if len(fitting) != 1:
        raise TransformError(
            f"{', '.join(map(repr, params))} fit{'s' if len(params) == 1 else ''} "
            f"{' and '.join(fitting) if fitting else 'no single transform'}: name the transform, e.g. "
            f"retrieve(id, {fitting[0] if fitting else 'excerpt'!r}, {next(iter(params))}=...)")
    return fitting[0]


JsonFormat = Literal["indented", "compact", "lines"]
"""How :func:`raw_text` writes JSON content."""

MAX_JSON_LINES = 20_000
"""Leaves of a JSON document turned into lines at most (:func:`json_to_lines`)."""


@overload
def raw_text(content: Any, encoding: ContentEncoding, *, json_format: JsonFormat = ...,
             binary: Literal["base64"] = ...) -> str: ...


@overload
def raw_text(content: Any, encoding: ContentEncoding, *, json_format: JsonFormat = ...,
             binary: None) -> str | None: ...


def raw_text(content: Any, encoding: ContentEncoding, *, json_format: JsonFormat = "indented",
             binary: Literal["base64"] | None = "base64") -> str | None:
    """Stored content as text, without interpretation: the library's one content-to-text (what a
    model is shown before citing starts, what is embedded and keyword-indexed, what the compaction
    plugins read).

    Args:
        content: an item's content as stored (``str``, JSON-able data, or ``bytes``).
        encoding: its ``metadata.content_encoding``.
        json_format: JSON as ``"indented"`` (2 spaces), ``"compact"`` (``json.dumps`` defaults)
            or ``"lines"`` (:func:`json_to_lines`: one readable line per row or leaf).
        binary: bytes that are not UTF-8: ``"base64"`` (their base64 text) or ``None`` (then the
            result is ``None``).

    Returns:
        The text; text content as is (``None`` content: ``""``), bytes decoded as UTF-8.
    """
    if encoding == "json":
        if json_format == "lines":
            return "\n".join(json_to_lines(content))
        if json_format == "indented":
            return _indented_json(content)
        return json.dumps(content, ensure_ascii=False)
    if encoding == "bytes" or isinstance(content, bytes | bytearray | memoryview):
        try:
            return bytes(content).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(content)).decode("ascii") if binary == "base64" else None
    return "" if content is None else str(content)


def _indented_json(content: Any) -> str:
    """``json.dumps(content, ensure_ascii=False, indent=2)``, by orjson where that is the same
    text (:func:`~agent_memory.models.items.json_bytes`; 6x faster on 2 MB of rows). Content read
    back from a blob holds only ``json``'s own types and finite floats."""
    data = json_bytes(content, indent=True)
    return data.decode("utf-8") if data is not None else json.dumps(content, ensure_ascii=False, indent=2)


_SCALAR_TEXT: dict[type, Callable[[Any], str]] = {
    int: int.__repr__,
    float: lambda value: float.__repr__(value) if math.isfinite(value) else json.dumps(value),
    bool: lambda value: "true" if value else "false",
    type(None): lambda value: "null",
}
"""``json.dumps`` of a scalar of exactly these types, without its call (the ``json`` module writes
ints and finite floats by their ``repr``): a table's cells are mostly numbers."""

_ROW_VALUE_TYPES = frozenset(_SCALAR_TEXT) | {str}
"""A dict whose values are all of these types is a row (one line), found at C speed."""


def json_to_lines(data: Any, *, limit: int = MAX_JSON_LINES) -> list[str]:
    """Flatten JSON into readable lines: rows (objects in a list) one per line, other leaves as
    ``path: value``. Stops after ``limit`` lines."""
    lines: list[str] = []

    def scalar(value: Any) -> str:
        kind = type(value)
        if kind is str:
            return value
        write = _SCALAR_TEXT.get(kind)
        return write(value) if write is not None else json.dumps(value, ensure_ascii=False)

    def walk(value: Any, path: str) -> None:
        if len(lines) >= limit:
            return
        if isinstance(value, dict):
            values = value.values()
            if value and (_ROW_VALUE_TYPES.issuperset(map(type, values))
                          or all(not isinstance(v, dict | list) for v in values)):
                prefix = f"{path}: " if path else ""
                lines.append(prefix + "; ".join([f"{k}: {scalar(v)}" for k, v in value.items()]))
                if len(lines) % CHECKPOINT_ROWS == 0:
                    checkpoint()  # an indexing thread may pause here for the agent's step
                return
            for key, child in value.items():
                walk(child, f"{path}.{key}" if path else str(key))
        elif isinstance(value, list):
            for i, child in enumerate(value):
                walk(child, f"{path}.{i}" if path else str(i))
        else:
            lines.append(f"{path}: {scalar(value)}" if path else scalar(value))

    walk(data, "")
    return lines


def readable_text(item: MemoryItem, *, raw: bool = False) -> tuple[str, list[str]]:
    """The text an item is read as, and notes on how it was made.

    HTML pages (``media_type`` ``text/html`` or sniffed) become their main text behind a title
    line unless ``raw``; binary content that is not UTF-8 becomes base64.
    """
    notes: list[str] = []
    encoding = item.metadata.content_encoding
    text = raw_text(item.content, encoding)
    if encoding == "bytes" and isinstance(item.content, bytes):
        try:
            item.content.decode("utf-8")
        except UnicodeDecodeError:
            notes.append(f"binary content ({item.metadata.size_bytes} bytes) shown as base64")
            return text, notes
    if not raw and encoding != "json" and (item.metadata.media_type == "text/html" or looks_like_html(text)):
        page = extract_page(text)
        head = [f"Title: {page.title}"] if page.title else []
        if page.url:
            head.append(f"URL: {page.url}")
        text = "\n".join(head) + ("\n\n" if head else "") + page.text
        notes.append("HTML page shown as its main text")
    return text, notes


def apply_transform(
    item: MemoryItem,
    transform: MemoryTransform | dict[str, Any] | str | None,
    *,
    counter: TokenCounter,
    max_tokens: int,
    page: int = 1,
    raw: bool = False,
    summarizer: Summarizer | None = None,
) -> RetrieveResult:
    """Shape ``item`` by ``transform`` and return page ``page`` of at most ``max_tokens`` tokens.

    Args:
        item: the item with its content.
        transform: see :func:`parse_transform`.
        counter: counts tokens for the cap.
        max_tokens: cap of the returned page, in tokens (a cut page keeps
            ``PAGE_NOTICE_TOKENS`` of it free for the continuation notice).
        page: 1-based page number.
        raw: HTML as markup instead of main text.
        summarizer: makes ``summary`` text; ``None``: :func:`extractive_summary`.

    Raises:
        TransformError: if the transform does not apply, or ``page`` is past the last page.
    """
    spec = parse_transform(transform)
    if max_tokens < PAGE_NOTICE_TOKENS * 2:
        raise TransformError(f"max_tokens must be at least {PAGE_NOTICE_TOKENS * 2}")
    if page < 1:
        raise TransformError("page numbers start at 1")
    try:
        text, notes = readable_text(item, raw=raw)
    except RecursionError as exc:
        raise TransformError("the content is nested too deeply to show as text") from exc
    match spec:
        case FullTransform():
            shaped = text
        case ExcerptTransform():
            shaped = _excerpt(text, spec, notes)
        case FirstNTransform() | LastNTransform():
            shaped = _ends(text, spec, counter)
        case FilteredTransform():
            shaped = _filtered(item, text, spec, notes)
        case SummaryTransform():
            make = summarizer or (lambda it, txt, n: extractive_summary(txt, n, counter))
            shaped = make(item, text, min(spec.max_tokens, max_tokens))
    total = counter.count(shaped)
    if total <= max_tokens:
        if page != 1:
            raise TransformError(f"page {page} does not exist: the answer has 1 page")
        return RetrieveResult(
            item=item.record, transform=spec, content=shaped, tokens=total, total_tokens=total,
            page=1, pages=1, max_tokens=max_tokens, notes=tuple(notes),
        )
    bounds = _page_bounds(shaped, counter, max_tokens - PAGE_NOTICE_TOKENS)
    if page > len(bounds):
        raise TransformError(f"page {page} does not exist: the answer has {len(bounds)} pages")
    start, end = bounds[page - 1]
    content = shaped[start:end]
    return RetrieveResult(
        item=item.record, transform=spec, content=content, tokens=counter.count(content), total_tokens=total,
        page=page, pages=len(bounds), max_tokens=max_tokens, notes=tuple(notes),
    )


def _page_bounds(text: str, counter: TokenCounter, budget: int) -> list[tuple[int, int]]:
    """Character ranges of consecutive pages of at most ``budget`` tokens covering ``text``."""
    offsets = counter.token_char_offsets(text)
    n_tokens = len(offsets) - 1
    bounds: list[tuple[int, int]] = []
    start_tok = 0
    while start_tok < n_tokens:
        end_tok = min(start_tok + budget, n_tokens)
        if end_tok < n_tokens:
            end_tok = _soft_end(text, offsets, start_tok, end_tok, budget)
        bounds.append((offsets[start_tok], offsets[end_tok]))
        start_tok = end_tok
    return bounds


def _soft_end(text: str, offsets: list[int], start_tok: int, end_tok: int, budget: int) -> int:
    floor = max(start_tok + 1, end_tok - budget // 5)
    for want_newline in (True, False):
        for tok in range(end_tok, floor - 1, -1):
            before = text[offsets[tok] - 1] if offsets[tok] > 0 else ""
            if (before == "\n") if want_newline else before.isspace():
                return tok
    return end_tok


def _excerpt(text: str, spec: ExcerptTransform, notes: list[str]) -> str:
    by_char = spec.start_char is not None or spec.end_char is not None
    by_line = spec.start_line is not None or spec.end_line is not None
    modes = sum((by_char, by_line, spec.around is not None))
    if modes != 1:
        raise TransformError("excerpt needs exactly one of: start_char/end_char, start_line/end_line, or around")
    if by_char:
        start, end = spec.start_char or 0, len(text) if spec.end_char is None else spec.end_char
        if start >= len(text) and text:
            raise TransformError(f"start_char {start} is past the end: the text has {len(text)} characters")
        if end <= start:
            raise TransformError("end_char must be greater than start_char")
        return text[start:end]
    if by_line:
        lines = text.splitlines()
        first, last = (spec.start_line or 1), (spec.end_line or len(lines))
        if first > len(lines):
            raise TransformError(f"start_line {first} is past the end: the text has {len(lines)} lines")
        if last < first:
            raise TransformError("end_line must not be less than start_line")
        return "\n".join(lines[first - 1 : last])
    assert spec.around is not None
    windows: list[tuple[int, int]] = []
    for match in re.finditer(re.escape(spec.around), text, flags=re.IGNORECASE):
        lo, hi = _whole_words(text, max(0, match.start() - spec.context_chars), match.start(), match.end(),
                              min(len(text), match.end() + spec.context_chars))
        if windows and lo <= windows[-1][1]:
            windows[-1] = (windows[-1][0], hi)
        else:
            if len(windows) >= spec.max_matches:
                notes.append(f"more matches of {quoted(spec.around)} follow; showing the first {spec.max_matches}")
                break
            windows.append((lo, hi))
    if not windows:
        notes.append(f"no match for {quoted(spec.around)}")
        return ""
    return "\n…\n".join(f"[chars {lo}-{hi}]\n{text[lo:hi]}" for lo, hi in windows)


_SPACE = re.compile(r"\s")

WORD_REACH_CHARS = 40
"""Farthest an excerpt's window is widened to the edge of the word it would cut, in characters (a
longer run of characters, a hash or a base64 blob, is cut where the window ends)."""


def _whole_words(text: str, lo: int, start: int, end: int, hi: int) -> tuple[int, int]:
    """The window ``text[lo:hi]`` around a match at ``start:end``, widened so that it neither
    starts nor ends inside a word: ``lo`` back to the whitespace before the word it falls in,
    ``hi`` on to the whitespace after, each by at most :data:`WORD_REACH_CHARS`."""
    if 0 < lo < start and not text[lo - 1].isspace() and not text[lo].isspace():
        reach = max(0, lo - WORD_REACH_CHARS)
        before = max(text.rfind(" ", reach, lo), text.rfind("\n", reach, lo))
        if before >= 0:
            lo = before + 1
    if end < hi < len(text) and not text[hi - 1].isspace() and not text[hi].isspace():
        after = _SPACE.search(text, hi, hi + WORD_REACH_CHARS)
        if after is not None:
            hi = after.start()
    return lo, hi


def _ends(text: str, spec: FirstNTransform | LastNTransform, counter: TokenCounter) -> str:
    first = isinstance(spec, FirstNTransform)
    if spec.unit == "lines":
        lines = text.splitlines()
        return "\n".join(lines[: spec.n] if first else lines[-spec.n :])
    offsets = counter.token_char_offsets(text)
    n_tokens = len(offsets) - 1
    if spec.n >= n_tokens:
        return text
    return text[: offsets[spec.n]] if first else text[offsets[n_tokens - spec.n] :]


def _filtered(item: MemoryItem, text: str, spec: FilteredTransform, notes: list[str]) -> str:
    if spec.pattern is None and not spec.keywords and spec.json_path is None and spec.column is None:
        raise TransformError("filtered needs at least one of: pattern, keywords, json_path, column")
    if spec.json_path is not None or spec.column is not None:
        data = _json_data(item)
        if spec.json_path is not None:
            data = _select_path(data, spec.json_path)
        if spec.column is not None:
            data = _rows_where(data, spec.column, spec.value, notes)
        text = json.dumps(data, ensure_ascii=False, indent=2)
        if spec.pattern is None and not spec.keywords:
            return text
    return _matching_lines(text, spec, notes)


def _json_data(item: MemoryItem) -> Any:
    """The item's content as JSON data (text content is parsed), at most ``MAX_JSON_DEPTH`` deep."""
    if item.metadata.content_encoding == "json":
        data = item.content
    else:
        try:
            data = json.loads(raw_text(item.content, item.metadata.content_encoding))
        except (json.JSONDecodeError, TypeError, ValueError) as exc:
            raise TransformError("json_path and column filters need JSON content; this item is text") from exc
        except RecursionError as exc:
            raise TransformError(
                f"json_path and column filters need JSON at most {MAX_JSON_DEPTH} levels deep; this item is deeper"
            ) from exc
    if json_depth(data) > MAX_JSON_DEPTH:
        raise TransformError(
            f"json_path and column filters need JSON at most {MAX_JSON_DEPTH} levels deep; this item is deeper"
        )
    return data


def _select_path(data: Any, path: str) -> Any:
    parts = [part for part in path.strip().lstrip("$").strip(".").split(".") if part]
    def walk(node: Any, rest: list[str], where: str) -> Any:
        if not rest:
            return node
        key, tail = rest[0], rest[1:]
        if key == "*":
            if isinstance(node, list):
                return [walk(child, tail, f"{where}.{i}") for i, child in enumerate(node)]
            if isinstance(node, dict):
                return {k: walk(v, tail, f"{where}.{k}") for k, v in node.items()}
            raise TransformError(f"'*' at {where or '$'} needs a list or an object")
        if isinstance(node, list):
            if not key.lstrip("-").isdigit() or len(key) > 18 or not -len(node) <= int(key) < len(node):
                raise TransformError(
                    f"{_where(where)} is a list of {len(node)}; use an index 0-{len(node) - 1} or '*'"
                )
            return walk(node[int(key)], tail, f"{where}.{key}")
        if isinstance(node, dict):
            if key not in node:
                keys = ", ".join(quoted(k, 40)[1:-1] for k in list(node)[:20])
                raise TransformError(f"no key {quoted(key)} at {_where(where)}; keys there: {keys}")
            return walk(node[key], tail, f"{where}.{key}")
        raise TransformError(f"{_where(where)} is a {type(node).__name__}, not an object or list")
    return walk(data, parts, "")


def _where(path: str) -> str:
    """A JSON path for a message: ``$`` for the root, long paths cut to their end."""
    if not path:
        return "$"
    return path if len(path) <= 60 else "…" + path[-59:]


def _columns(names: Any) -> str:
    """At most 20 column names, each cut short, for a message."""
    shown = [quoted(str(name), 40)[1:-1] for name in list(names)[:20]]
    return ", ".join(shown) + (", …" if len(names) > 20 else "")


def _rows_where(data: Any, column: str, value: Any, notes: list[str]) -> Any:
    want = value if isinstance(value, str) else json.dumps(value)
    def same(cell: Any) -> bool:
        return (cell if isinstance(cell, str) else json.dumps(cell)) == want
    if isinstance(data, dict) and isinstance(data.get("columns"), list) and isinstance(data.get("rows"), list):
        columns = data["columns"]
        if column not in columns:
            raise TransformError(f"no column {quoted(column)}; columns: {_columns(columns)}")
        col = columns.index(column)
        rows = [row for row in data["rows"] if isinstance(row, list) and col < len(row) and same(row[col])]
        notes.append(f"{len(rows)} of {len(data['rows'])} rows have {quoted(column)[1:-1]} = {quoted(want)[1:-1]}")
        return {**data, "rows": rows}
    if isinstance(data, list) and all(isinstance(row, dict) for row in data):
        if data and not any(column in row for row in data):
            raise TransformError(f"no column {quoted(column)}; columns: {_columns(data[0])}")
        rows = [row for row in data if column in row and same(row[column])]
        notes.append(f"{len(rows)} of {len(data)} rows have {quoted(column)[1:-1]} = {quoted(want)[1:-1]}")
        return rows
    raise TransformError("column filters need rows: a list of objects, or {'columns': [...], 'rows': [[...]]}; "
                         "point json_path at them")


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """Compile a model's regular expression (Python syntax, case-insensitive) with the ``regex``
    module, after checking its size, its repetition counts and its expanded size.

    Raises:
        TransformError: if the pattern is too long, repeats more than ``MAX_REPEAT`` times or
            expands beyond ``MAX_PATTERN_EXPANSION``, or does not compile (any error, also
            ``RecursionError`` or ``OverflowError``); the message quotes a short prefix.
    """
    if len(pattern) > MAX_PATTERN_CHARS:
        raise TransformError(
            f"the pattern has {len(pattern):,} characters; at most {MAX_PATTERN_CHARS} are allowed"
        )
    size = _expanded_size(pattern)
    if size > MAX_PATTERN_EXPANSION:
        raise TransformError(
            f"the pattern {quoted(pattern)} is too large with its repetitions multiplied out "
            f"(~{size:,} > {MAX_PATTERN_EXPANSION:,}); use smaller counts"
        )
    try:
        return regex.compile(pattern, regex.IGNORECASE | regex.MULTILINE | regex.V0)
    except Exception as exc:  # noqa: BLE001 - regex.error, OverflowError, RecursionError, ...
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise TransformError(f"invalid regular expression {quoted(pattern)}: {reason[:120]}") from exc


_QUANTIFIER = re.compile(r"\{(\d*)(?:,(\d*))?\}")
_BRACED_ESCAPES = frozenset("pPNxgkuU")


def _expanded_size(pattern: str) -> int:
    """Rough size of ``pattern`` with counted repetitions multiplied out (each atom counts 1, a
    group the sum of its parts, ``X{m,n}`` the size of X times max(m, n)).

    Raises:
        TransformError: if a repetition count exceeds ``MAX_REPEAT``.
    """
    frames: list[list[int]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i]
        if char == "\\":
            j = i + 2
            if i + 1 < n and pattern[i + 1] in _BRACED_ESCAPES and j < n and pattern[j] in "{<":
                close = pattern.find("}" if pattern[j] == "{" else ">", j)
                j = close + 1 if close >= 0 else n
            frames[-1].append(1)
            i = j
        elif char == "[":
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 2 if pattern[j] == "\\" else 1
            frames[-1].append(1)
            i = j + 1
        elif char == "(":
            frames.append([])
            i += 1
        elif char == ")":
            inner = sum(frames.pop()) if len(frames) > 1 else 0
            frames[-1].append(max(inner, 1))
            i += 1
        elif char == "{" and (match := _QUANTIFIER.match(pattern, i)) and (match.group(1) or match.group(2)):
            counts = [int(part) for part in match.groups() if part]
            if max(counts) > MAX_REPEAT:
                raise TransformError(
                    f"the pattern repeats {max(counts):,} times at position {i}; at most {MAX_REPEAT:,} are allowed"
                )
            if frames[-1]:
                frames[-1][-1] *= max(max(counts), 1)
            i = match.end()
        else:
            frames[-1].append(1)
            i += 1
    while len(frames) > 1:
        inner = sum(frames.pop())
        frames[-1].append(inner)
    return sum(frames[0])


def _matching_lines(text: str, spec: FilteredTransform, notes: list[str]) -> str:
    pattern = compile_pattern(spec.pattern) if spec.pattern else None
    words = [word.lower() for word in spec.keywords if word.strip()]
    lines = text.splitlines()
    matched = _pattern_lines(pattern, lines) if pattern is not None else set()
    keep: set[int] = set()
    hits = 0
    for i, line in enumerate(lines):
        if i in matched or (words and any(word in line.lower() for word in words)):
            hits += 1
            keep.update(range(max(0, i - spec.context_lines), min(len(lines), i + spec.context_lines + 1)))
    if not hits:
        notes.append("no line matches")
        return ""
    notes.append(f"{hits} of {len(lines)} lines match (shown as L<line number>)")
    out: list[str] = []
    previous = -2
    for i in sorted(keep):
        if i != previous + 1 and out:
            out.append("…")
        out.append(f"L{i + 1}: {lines[i]}")
        previous = i
    return "\n".join(out)


def _pattern_lines(pattern: regex.Pattern[str], lines: list[str]) -> set[int]:
    """Indices of the lines ``pattern`` matches in, within the transform's time budget.

    The lines are searched as one text (joined by newlines, ``^``/``$`` at line ends), one search
    per *matching* line: after a match the search resumes at the next line. So a harmless pattern
    costs one scan of the text whatever its length, and a pattern that backtracks is stopped by
    the ``regex`` module's timeout. A match that runs over a line end counts for the line it
    starts in.

    Raises:
        TransformError: when the budget (``REGEX_TIMEOUT_S`` + ``REGEX_LINE_ALLOWANCE_S`` per
            line) is spent: a pattern that backtracks too much.
    """
    joined = "\n".join(lines)
    starts = [0]
    for line in lines[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    deadline = time.monotonic() + REGEX_TIMEOUT_S + REGEX_LINE_ALLOWANCE_S * len(lines)
    found: set[int] = set()
    pos = 0
    while pos <= len(joined):
        remaining = deadline - time.monotonic()
        try:
            if remaining <= 0:
                raise TimeoutError
            match = pattern.search(joined, pos, timeout=remaining)
        except TimeoutError:
            raise TransformError(
                f"the pattern {quoted(pattern.pattern)} is too slow on this content (it backtracks too much); "
                "use a simpler pattern, or keywords"
            ) from None
        if match is None:
            break
        hit = bisect.bisect_right(starts, match.start()) - 1
        found.add(hit)
        if hit + 1 >= len(starts):
            break
        pos = starts[hit + 1]
    return found


_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])|\n+")
_WORD = re.compile(r"[A-Za-z][A-Za-z'-]{2,}")
_STOP = frozenset(
    "the and for that with this from are was were have has had not but they their them his her its "
    "you your our can will would could should also into than then there these those which who whom "
    "what when where why how all any each more most other some such only own same very been being "
    "about after before over under again further once here both few nor off out too just".split()
)


def extractive_summary(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """A deterministic extractive summary of at most ``max_tokens`` tokens.

    The lead sentence, then the sentences richest in the text's most frequent content words
    (Luhn 1958, "The automatic creation of literature abstracts"), in their original order.
    """
    sentences = [s.strip() for s in _SENTENCE.split(text) if s and len(s.strip()) > 1]
    if not sentences:
        return ""
    freq = Counter(w for w in _WORD.findall(text.lower()) if w not in _STOP)
    top = {w for w, _ in freq.most_common(30)}
    def score(sentence: str) -> float:
        words = [w for w in _WORD.findall(sentence.lower()) if w not in _STOP]
        return sum(freq[w] for w in words if w in top) / (len(words) ** 0.5 or 1.0)
    ranked = sorted(range(1, len(sentences)), key=lambda i: (-score(sentences[i]), i))
    chosen = [0]
    used = counter.count(sentences[0])
    for i in ranked:
        cost = counter.count(sentences[i]) + 1
        if used + cost > max_tokens:
            continue
        chosen.append(i)
        used += cost
    summary = " ".join(sentences[i] for i in sorted(chosen))
    return shorten(summary, max_tokens, counter=counter)  # a single huge lead sentence
