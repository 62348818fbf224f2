"""Bounds on what a caller (a developer or, through the memory tools, a model) may pass in.

Every string and list argument of the public API has a documented bound, enforced by the models
that carry it (:class:`~agent_memory.models.items.ItemMetadata`,
:class:`~agent_memory.models.items.MemoryCriteria`, the transform models) before anything is
written, so the JSON schema of a tool built on those models tells the model the limits. An
argument over its bound raises :class:`~agent_memory.errors.InvalidArgumentError`.

The values guard three things: the index (chromadb turns every tag into a metadata key and every
query tag into a clause of one expression; thousands of them fail or crash its Rust bindings),
the JSONL store (every process re-reads ``items.jsonl``; one line must stay small), and the time
of one call (embedding, regular expressions, recursion over nested JSON).

The helpers :func:`check_text` (refuse), :func:`replace_surrogates` and
:func:`escape_surrogates` (keep) and :func:`json_depth` apply the Unicode and nesting rules.
"""

from __future__ import annotations

import re
from typing import Any, Protocol

__all__ = [
    "MAX_AROUND_CHARS",
    "MAX_EXTRA_CHARS",
    "MAX_JSON_DEPTH",
    "MAX_JSON_PATH_CHARS",
    "MAX_KEYWORDS",
    "MAX_MEDIA_TYPE_CHARS",
    "MAX_PATTERN_CHARS",
    "MAX_QUERY_CHARS",
    "MAX_RELATED",
    "MAX_REPEAT",
    "MAX_SOURCE_CHARS",
    "MAX_TAGS",
    "MAX_TAG_CHARS",
    "MAX_TITLE_CHARS",
    "REGEX_TIMEOUT_S",
    "check_text",
    "escape_surrogates",
    "json_depth",
    "replace_surrogates",
    "shorten",
]

MAX_TAGS = 32
"""Most tags on an item, and in one query. Each tag is one chromadb metadata key of every chunk
and one clause of a query's filter: 6,000 tags made chromadb fail after the item was written,
~1,000 query tags hit "Expression tree is too large" and 10,000 crashed the process. Labels are
few; 32 is generous."""

MAX_TAG_CHARS = 64
"""Longest tag, in characters (after trimming). A tag is a label, not a sentence."""

MAX_TITLE_CHARS = 500
"""Longest title, in characters. The title is repeated in front of every index chunk (a 100 KB
title made storing take 48 s) and shown in citations; real page titles are under 200."""

MAX_SOURCE_CHARS = 2_000
"""Longest source, in characters: a tool name, a file path or a URL (browsers and CDNs cap URLs
at about 2,000 characters)."""

MAX_MEDIA_TYPE_CHARS = 255
"""Longest media (MIME) type, in characters (RFC 6838 caps type and subtype at 127 each)."""

MAX_RELATED = 64
"""Most ``related_to`` ids on one item; each is checked to exist when the item is stored."""

MAX_EXTRA_CHARS = 16_000
"""Longest ``extra`` metadata, as compact JSON, in characters. ``extra`` lives in the item's line
of ``items.jsonl``, which every process re-reads; bulky data belongs in the content."""

MAX_QUERY_CHARS = 4_000
"""Longest query text, in characters. The embedding model reads 256 word pieces (about 1,000
characters of English) and the keyword search its first 64 terms; a 10 MB query took 64 s and
came back whole in the answer."""

MAX_PATTERN_CHARS = 500
"""Longest regular expression of a ``filtered`` transform, in characters (also bounds a keyword
and a ``value`` written as JSON). Bounds compile time and the depth of the pattern's parse."""

MAX_KEYWORDS = 32
"""Most keywords of one ``filtered`` transform (as many as tags)."""

MAX_AROUND_CHARS = 500
"""Longest ``around`` search string of an ``excerpt`` transform, in characters."""

MAX_JSON_PATH_CHARS = 500
"""Longest ``json_path`` (and ``column`` name) of a ``filtered`` transform, in characters."""

MAX_JSON_DEPTH = 100
"""Deepest nesting of JSON content, ``extra`` and ``value`` (a scalar is depth 0, ``[1]`` depth
1). Python's JSON encoder and every walk over the data recurse; 1,000 levels raise
``RecursionError``. Real documents stay under 20."""

REGEX_TIMEOUT_S = 0.25
"""Total time budget, in seconds, of the regular expression of one ``filtered`` transform over
all lines of the item. A pattern that needs more is refused as too slow (the ``regex`` module
stops the match; ``re`` could backtrack for hours holding the GIL)."""

MAX_REPEAT = 1_000
"""Largest repetition count ``{n}`` / ``{n,m}`` accepted in a pattern. ``re`` raises
``OverflowError`` for ``a{99999999999}``; large counts also multiply matching time."""

_SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone surrogate: UTF-16 code units Python keeps in a ``str`` (from ``"\\ud800"`` in JSON) and
UTF-8 cannot write."""


class _TokenCounter(Protocol):
    """What :func:`shorten` needs of a token counter (:class:`~agent_memory.tokens.TokenCounter`)."""

    def count(self, text: str) -> int: ...

    def token_char_offsets(self, text: str) -> list[int]: ...


HEAD_MARGIN_TOKENS = 16
"""Tokens past the cut that :func:`shorten` tokenizes in a long text: a tokenizer splits text into
words and punctuation before it merges bytes into tokens, so the tokens of a head that runs this
far past the cut are, up to the cut, the tokens of the whole text."""


def _head_offsets(text: str, limit: int, counter: _TokenCounter) -> list[int] | None:
    """The token offsets (:meth:`~agent_memory.tokens.TokenCounter.token_char_offsets`) of a head
    of ``text`` holding more than ``limit`` + :data:`HEAD_MARGIN_TOKENS` tokens, or of the whole
    text when it has more than ``limit`` tokens but no shorter head does; ``None`` when the whole
    text has at most ``limit`` tokens. Tokenizes heads of 4, 8, 16... characters per token of
    ``limit`` (o200k: ~3 on JSON, ~4.5 on English prose), once each: a 2 MB result cut to 6,000
    tokens is tokenized ~25-50 KB deep, not whole (o200k runs at 2-8 MB/s)."""
    size = (limit + HEAD_MARGIN_TOKENS + 1) * 4
    while size < len(text):
        offsets = counter.token_char_offsets(text[:size])
        if len(offsets) - 1 > limit + HEAD_MARGIN_TOKENS:
            return offsets
        size *= 2
    if counter.count(text) <= limit:
        return None
    return counter.token_char_offsets(text)


def shorten(text: str, limit: int, *, counter: _TokenCounter | None = None, marker: str = "…",
            mark_length: bool = False, one_line: bool = False) -> str:
    """``text`` cut to at most ``limit`` characters, or ``limit`` tokens of ``counter`` when one is
    given: the library's one text cutter (titles and sources fitted to their bounds, text quoted
    in errors and tables, a result's head in a prompt, a summary fitted to its budget).

    Args:
        text: what to cut.
        limit: characters, or tokens when ``counter`` is given (``<= 0``: ``""``).
        counter: counts tokens; ``None``: ``limit`` is in characters.
        marker: ends a cut text and counts against ``limit`` (``""``: none). When the limit cannot
            hold it, the text is cut to the limit without it.
        mark_length: in characters, the marker also gives the text's length (``… [12,345 chars]``).
        one_line: every run of whitespace becomes one space first.

    Returns:
        ``text`` unchanged when it fits; else its first characters and the marker, or its first
        whole tokens (trailing spaces dropped) and the marker.
    """
    if one_line:
        text = " ".join(text.split())
    if limit <= 0:
        return ""
    if counter is None:
        if len(text) <= limit:
            return text
        mark = f"{marker} [{len(text):,} chars]" if mark_length else marker
        if limit < len(mark):
            return text[:limit]
        return text[: limit - len(mark)] + mark
    offsets = _head_offsets(text, limit, counter)
    if offsets is None:
        return text
    for keep in range(min(limit, len(offsets) - 1), 0, -1):
        cut = text[: offsets[keep]].rstrip() + marker
        if counter.count(cut) <= limit:
            return cut
    return ""


def check_text(value: str, what: str) -> str:
    """Return ``value`` if it is valid Unicode text (no lone surrogates U+D800-U+DFFF).

    Lone surrogates come from broken JSON escapes (``"\\ud800"``); they cannot be written as
    UTF-8, so every file, the index and the tokenizer refuse them.

    Raises:
        ValueError: if ``value`` holds a lone surrogate (inside pydantic validators this becomes a
            validation error; elsewhere callers turn it into ``InvalidArgumentError``).
    """
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(
            f"{what} contains a lone surrogate (U+{ord(value[exc.start]):04X} at position {exc.start}), "
            "which is not valid Unicode text"
        ) from None
    return value


def replace_surrogates(text: str) -> str:
    """``text`` with every lone surrogate replaced by U+FFFD, the replacement character: for text
    that must be kept whatever it holds (a model's answer, a preview), never for a value a caller
    chose (:func:`check_text` refuses those)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def escape_surrogates(text: str) -> str:
    """``text`` with every lone surrogate written as its JSON escape ``\\udXXX`` (six ASCII
    characters). In JSON text this changes nothing a parser reads (a surrogate inside a string and
    its escape are the same string; outside one both are invalid), and the result can be written
    as UTF-8; in a message it shows the surrogate instead of failing to print it."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub(lambda match: f"\\u{ord(match.group()):04x}", text)
    return text


def json_depth(value: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of JSON-like data (dicts and lists/tuples; a scalar is 0), counted without
    recursion and given up at ``limit + 1``: a result above ``limit`` means "too deep" (and
    ends on cyclic data too)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list | tuple):
            children = node
        else:
            continue
        depth += 1
        if depth > deepest:
            deepest = depth
            if deepest > limit:
                return deepest
        stack.extend((child, depth) for child in children)
    return deepest
