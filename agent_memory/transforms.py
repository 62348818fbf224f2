"""Retrieve transforms (seed 002 ``MemoryTransform``), token caps and paging.

A transform turns an item into text: ``full``, ``excerpt`` (char range, line range, or around a
string), ``first_n`` / ``last_n`` (lines or tokens), ``filtered`` (regex or keyword lines, a JSON
key path, rows by column value) or ``summary``. The text is then cut into pages of at most
``max_tokens`` tokens (page ends move back to a line break, else a space, within the last fifth
of the page), and one page is returned with the facts needed to ask for the next one.

Items are read as *readable text*: an HTML page as its extracted main text (``raw=True`` gives
the markup), JSON pretty-printed with 2-space indents, bytes as UTF-8 text or else base64.
"""

from __future__ import annotations

import base64
import json
import re
from collections import Counter
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from agent_memory.errors import TransformError
from agent_memory.html import extract_page, looks_like_html
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
)
from agent_memory.tokens import TokenCounter, truncate_tokens

__all__ = [
    "PAGE_NOTICE_TOKENS",
    "Summarizer",
    "apply_transform",
    "extractive_summary",
    "parse_transform",
    "raw_text",
    "readable_text",
]

PAGE_NOTICE_TOKENS = 60
"""Tokens kept free on a cut page for the notice that says how to get the next page."""

Summarizer = Callable[[MemoryItem, str, int], str]
"""``(item, readable_text, max_tokens) -> summary``: how the ``summary`` transform is made."""


def parse_transform(transform: MemoryTransform | dict[str, Any] | str | None) -> MemoryTransform:
    """A transform model from a model, a dict (``{"type": "first_n", "n": 20}``), a type name, or
    ``None`` (``full``).

    Raises:
        TransformError: if the value does not describe a valid transform.
    """
    if transform is None:
        return FullTransform()
    if isinstance(transform, str):
        transform = {"type": transform}
    if isinstance(transform, dict):
        try:
            return TRANSFORM_ADAPTER.validate_python(transform)
        except ValidationError as exc:
            raise TransformError(f"invalid transform {transform!r}: {exc.errors()[0]['msg']}") from exc
    return transform


def raw_text(content: Any, encoding: ContentEncoding) -> str:
    """Content as text without interpretation: text as is, JSON with 2-space indents, bytes as
    UTF-8 when they decode, else base64."""
    if encoding == "json":
        return json.dumps(content, ensure_ascii=False, indent=2)
    if encoding == "bytes":
        try:
            return bytes(content).decode("utf-8")
        except UnicodeDecodeError:
            return base64.b64encode(bytes(content)).decode("ascii")
    return str(content)


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
        notes.append("HTML page shown as its main text; raw=true gives the markup")
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
    text, notes = readable_text(item, raw=raw)
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
            item=item.record(), transform=spec, content=shaped, tokens=total, total_tokens=total,
            page=1, pages=1, max_tokens=max_tokens, notes=tuple(notes),
        )
    bounds = _page_bounds(shaped, counter, max_tokens - PAGE_NOTICE_TOKENS)
    if page > len(bounds):
        raise TransformError(f"page {page} does not exist: the answer has {len(bounds)} pages")
    start, end = bounds[page - 1]
    content = shaped[start:end]
    return RetrieveResult(
        item=item.record(), transform=spec, content=content, tokens=counter.count(content), total_tokens=total,
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
        lo, hi = max(0, match.start() - spec.context_chars), min(len(text), match.end() + spec.context_chars)
        if windows and lo <= windows[-1][1]:
            windows[-1] = (windows[-1][0], hi)
        else:
            if len(windows) >= spec.max_matches:
                notes.append(f"more matches of {spec.around!r} follow; showing the first {spec.max_matches}")
                break
            windows.append((lo, hi))
    if not windows:
        notes.append(f"no match for {spec.around!r}")
        return ""
    return "\n…\n".join(f"[chars {lo}-{hi}]\n{text[lo:hi]}" for lo, hi in windows)


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
    if item.metadata.content_encoding == "json":
        return item.content
    try:
        return json.loads(raw_text(item.content, item.metadata.content_encoding))
    except (json.JSONDecodeError, TypeError) as exc:
        raise TransformError("json_path and column filters need JSON content; this item is text") from exc


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
            if not key.lstrip("-").isdigit() or not -len(node) <= int(key) < len(node):
                raise TransformError(f"{where or '$'} is a list of {len(node)}; use an index 0-{len(node) - 1} or '*'")
            return walk(node[int(key)], tail, f"{where}.{key}")
        if isinstance(node, dict):
            if key not in node:
                keys = ", ".join(list(node)[:20])
                raise TransformError(f"no key {key!r} at {where or '$'}; keys there: {keys}")
            return walk(node[key], tail, f"{where}.{key}")
        raise TransformError(f"{where or '$'} is a {type(node).__name__}, not an object or list")
    return walk(data, parts, "")


def _rows_where(data: Any, column: str, value: Any, notes: list[str]) -> Any:
    want = value if isinstance(value, str) else json.dumps(value)
    def same(cell: Any) -> bool:
        return (cell if isinstance(cell, str) else json.dumps(cell)) == want
    if isinstance(data, dict) and isinstance(data.get("columns"), list) and isinstance(data.get("rows"), list):
        columns = data["columns"]
        if column not in columns:
            raise TransformError(f"no column {column!r}; columns: {', '.join(map(str, columns))}")
        col = columns.index(column)
        rows = [row for row in data["rows"] if isinstance(row, list) and col < len(row) and same(row[col])]
        notes.append(f"{len(rows)} of {len(data['rows'])} rows have {column} = {want}")
        return {**data, "rows": rows}
    if isinstance(data, list) and all(isinstance(row, dict) for row in data):
        if data and not any(column in row for row in data):
            raise TransformError(f"no column {column!r}; columns: {', '.join(map(str, data[0]))}")
        rows = [row for row in data if column in row and same(row[column])]
        notes.append(f"{len(rows)} of {len(data)} rows have {column} = {want}")
        return rows
    raise TransformError("column filters need rows: a list of objects, or {'columns': [...], 'rows': [[...]]}; "
                         "point json_path at them")


def _matching_lines(text: str, spec: FilteredTransform, notes: list[str]) -> str:
    try:
        regex = re.compile(spec.pattern, re.IGNORECASE) if spec.pattern else None
    except re.error as exc:
        raise TransformError(f"invalid regular expression {spec.pattern!r}: {exc}") from exc
    words = [word.lower() for word in spec.keywords if word.strip()]
    lines = text.splitlines()
    keep: set[int] = set()
    hits = 0
    for i, line in enumerate(lines):
        low = line.lower()
        if (regex is not None and regex.search(line)) or any(word in low for word in words):
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
    return truncate_tokens(summary, max_tokens, counter)  # a single huge lead sentence
