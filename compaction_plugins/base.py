"""Shared implementation of the built-in compaction plugins.

:class:`BasePlugin` is the small ABC the built-ins share (third parties need only implement the
:class:`~agent_memory.plugins.CompactionPlugin` protocol). The helpers read an item's
content as text or JSON, and pack short pieces into a token budget: plugins rank their facts by
usefulness and :func:`fit` keeps as many as the budget allows, so a 12-token citation gets the
single best fact and a 60-token one gets the next few.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Iterable
from functools import lru_cache
from typing import Any

from agent_memory.limits import shorten
from agent_memory.models.items import MemoryItem
from agent_memory.tokens import TokenCounter
from agent_memory.transforms import raw_text

__all__ = ["NOT_JSON", "BasePlugin", "cap", "fit", "item_json", "item_text", "short"]

NOT_JSON: Any = object()
"""Returned by :func:`item_json` when an item's content is not JSON."""

MAX_SNIFF_CHARS = 2_000_000
"""Text content longer than this (in characters) is not parsed to sniff JSON."""

ELLIPSIS = "…"


class BasePlugin(ABC):
    """A built-in compaction plugin: a name, a priority (lower runs first) and three methods."""

    name: str = ""
    priority: int = 100

    @abstractmethod
    def matches(self, item: MemoryItem) -> bool:
        """Whether this plugin understands ``item``."""

    @abstractmethod
    def key_content(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        """The most useful facts of ``item`` in at most ``max_tokens`` tokens."""

    @abstractmethod
    def summary(self, item: MemoryItem, *, max_tokens: int, counter: TokenCounter) -> str:
        """A readable summary of ``item`` in at most ``max_tokens`` tokens."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, priority={self.priority})"


def item_text(item: MemoryItem) -> str | None:
    """The content as text: text as is, UTF-8 bytes decoded, JSON compact; ``None`` for binary
    (:func:`~agent_memory.transforms.raw_text`)."""
    return raw_text(item.content, item.metadata.content_encoding, json_format="compact", binary=None)


@lru_cache(maxsize=64)
def _parse_json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return NOT_JSON


def item_json(item: MemoryItem) -> Any:
    """The content as JSON data: stored JSON as is, or text (or UTF-8 bytes) that parses as a JSON
    object or array; :data:`NOT_JSON` otherwise (bare JSON scalars in text do not count)."""
    if item.metadata.content_encoding == "json":
        return item.content
    text = item_text(item)
    if not text or len(text) > MAX_SNIFF_CHARS:
        return NOT_JSON
    stripped = text.strip()
    if not stripped or stripped[0] not in "[{" or stripped[-1] not in "]}":
        return NOT_JSON
    return _parse_json(stripped)


def short(value: Any, max_chars: int = 60) -> str:
    """A scalar as short text: strings unquoted and cut to ``max_chars`` with an ellipsis."""
    if isinstance(value, str):
        text = " ".join(value.split())
    elif isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        text = str(int(value))
    elif isinstance(value, float):
        text = f"{value:.10g}"  # 523.0600000000003 -> 523.06
    else:
        text = json.dumps(value, ensure_ascii=False)
    return shorten(text, max_chars, marker=ELLIPSIS)


def cap(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """``text`` cut to at most ``max_tokens`` tokens (an ellipsis marks a cut)."""
    return shorten(text, max_tokens, counter=counter, marker=ELLIPSIS)


def fit(
    pieces: Iterable[str],
    max_tokens: int,
    counter: TokenCounter,
    *,
    sep: str = " · ",
    cut_last: bool = True,
    min_cut_tokens: int = 4,
) -> str:
    """Join ``pieces`` (most useful first) with ``sep`` while the result fits in ``max_tokens``.

    The first piece that does not fit is cut to the room left when ``cut_last`` and at least
    ``min_cut_tokens`` remain (or when it is the first piece); later pieces are dropped.
    """
    out = ""
    for piece in pieces:
        piece = piece.strip()
        if not piece:
            continue
        candidate = f"{out}{sep}{piece}" if out else piece
        if counter.count(candidate) <= max_tokens:
            out = candidate
            continue
        if cut_last:
            room = max_tokens - counter.count(f"{out}{sep}" if out else "")
            if room >= min_cut_tokens or not out:
                cut = cap(piece, room, counter)
                if cut and cut != ELLIPSIS:
                    joined = f"{out}{sep}{cut}" if out else cut
                    if counter.count(joined) <= max_tokens:
                        out = joined
        break
    return out
