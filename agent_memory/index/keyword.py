"""The keyword index contract: the same chunks as the vector index, ranked by BM25-like scores.

A backend implements :class:`KeywordIndex` (a Protocol); the built-in ones are SQLite FTS5
(:class:`~agent_memory.index.lexical.LexicalIndex`, the file backend's) and Postgres full-text
search (:mod:`agent_memory.storage.postgres`). Like the vector index it holds only derived data,
rebuilt from the item log at any time (``AgentMemory.rebuild_index``). Query Memory fuses its
ranking with the vector index's (:mod:`agent_memory.index.fusion`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from agent_memory.index.vector import ChunkHit, IndexChunk
from agent_memory.models.items import MemoryCriteria

__all__ = ["KeywordIndex"]


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
        seconds since the epoch)``."""
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
