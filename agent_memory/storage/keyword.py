"""The keyword index contract: the same chunks as the vector index, ranked by BM25-like scores.

A backend implements :class:`KeywordIndex` (a Protocol); the built-in ones are SQLite FTS5
(:class:`~agent_memory.storage.lexical.LexicalIndex`, the file backend's) and Postgres full-text
search (:mod:`agent_memory.storage.postgres`). Like the vector index it holds only derived data,
rebuilt from the item log at any time (``AgentMemory.rebuild_index``). Query Memory fuses its
ranking with the vector index's (:mod:`agent_memory.index.fusion`).
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agent_memory.storage.vector import ChunkHit, IndexChunk
from agent_memory.models.items import MemoryCriteria

__all__ = ["MAX_QUERY_WORDS", "KeywordIndex", "is_corruption", "query_words", "within_budget"]


@runtime_checkable
class KeywordIndex(Protocol):
    """Chunks of memory items, searchable by their words and filterable by item facts."""

    def add(self, chunks: Sequence[IndexChunk]) -> None:
        """Add or replace chunks (the same ``item_id`` + ``chunk_index`` replaces)."""
        ...

    def search(
        self, text: str, criteria: MemoryCriteria, *, n_chunks: int, max_postings: int | None = None
    ) -> list[ChunkHit]:
        """The ``n_chunks`` chunks that match ``text``'s words best among items matching
        ``criteria``'s filters, best first (``score``: higher is better; only the order counts).
        ``max_postings``: leave out the commonest words until the words searched appear in at
        most this many chunks together (a bound on the work); ``None``: every word."""
        ...

    def passing(self, chunk_ids: Sequence[str], criteria: MemoryCriteria) -> set[str]:
        """Which of ``chunk_ids`` (``<item_id>:<chunk_index>``) belong to items matching
        ``criteria``'s filters (its text ignored); ids the index lacks do not pass."""
        ...

    def list_items(self, criteria: MemoryCriteria, *, limit: int) -> list[tuple[str, float]]:
        """Up to ``limit`` items matching the filters, newest first, as ``(item id, timestamp in
        Unix time in seconds)``."""
        ...

    def item_ids(self) -> set[str]:
        """Ids of the items that have chunks in the index."""
        ...

    def delete_items(self, item_ids: Sequence[str]) -> None:
        """Remove every chunk of these items."""
        ...

    def reset(self) -> None:
        """Remove everything."""
        ...

    def close(self) -> None:
        """Release connections (the index reopens on next use). Idempotent."""
        ...


def is_corruption(exc: BaseException) -> bool:
    """Whether ``exc`` (or its cause) says the keyword index is damaged, as opposed to a passing
    problem (locked, disk full): SQLite saying its file is not a database or is malformed (the
    file backend's index; the library then recreates the index from the item records)."""
    while exc is not None:
        if isinstance(exc, sqlite3.DatabaseError):
            name = getattr(exc, "sqlite_errorname", "") or ""
            if name == "SQLITE_NOTADB" or name.startswith("SQLITE_CORRUPT"):
                return True
            text = str(exc).lower()
            if "not a database" in text or "malformed" in text:
                return True
        exc = exc.__cause__  # type: ignore[assignment]
    return False


# -- what every keyword index does with a query's words ----------------------------------------
_WORD = re.compile(r"\w+", re.UNICODE)
_STOPWORDS = frozenset(
    "a an and are as at be but by for from has have he her his i in is it its of on or she that the their "
    "them they this to was were what when where which who whom why with you your how did do does "
    "than then there these those which while will would can could should into about after before".split()
)
MAX_QUERY_WORDS = 64
"""Distinct words of a query text the keyword search considers (the first ones)."""


def query_words(text: str) -> list[str]:
    """The distinct non-stopword words of ``text``, lower case, in order, at most
    :data:`MAX_QUERY_WORDS`."""
    words: list[str] = []
    for word in _WORD.findall(text.lower()):
        if word not in _STOPWORDS and word not in words:
            words.append(word)
            if len(words) == MAX_QUERY_WORDS:
                break
    return words


def within_budget(costs: Sequence[tuple[str, int]], budget: int | None) -> list[str]:
    """The words a keyword search keeps: ``costs`` are ``(word, postings)`` (the document
    frequencies of the word's terms in the index). Words that match nothing are dropped; the
    rest are taken rarest first while their postings sum to at most ``budget``, and the rarest
    is always kept. The kept words come back in their original order. ``None``: no budget.

    This is the cutoff of Lucene's ``CommonTermsQuery``, made a budget: FTS5 scores every chunk
    that contains any query term (~2 µs per posting measured at 123k chunks), so the commonest
    terms cost the most time and, by BM25's IDF, add the least to a score."""
    present = [(n, word, postings) for n, (word, postings) in enumerate(costs) if postings > 0]
    if budget is None:
        return [word for _, word, _ in present]
    kept: set[int] = set()
    spent = 0
    for n, _, postings in sorted(present, key=lambda entry: (entry[2], entry[0])):
        if kept and spent + postings > budget:
            break
        kept.add(n)
        spent += postings
    return [word for n, word, _ in present if n in kept]
