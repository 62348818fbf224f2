"""The vector index contract: chunks in, best chunks out, filters applied inside the index.

A backend implements :class:`VectorIndex` (a Protocol); the built-in one is
:class:`~agent_memory.index.chroma.ChromaVectorIndex`. The index holds only derived data: it can
be dropped and rebuilt from ``items.jsonl`` at any time (``AgentMemory.rebuild_index``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agent_memory.models.items import MemoryCriteria, MemoryType

__all__ = ["ChunkHit", "IndexChunk", "VectorIndex"]


@dataclass(frozen=True, slots=True)
class IndexChunk:
    """One chunk to index, with the item facts the index filters on."""

    item_id: str
    """Memory id of the item the chunk belongs to."""
    chunk_index: int
    """0-based position of the chunk in the item; chunk 0 stands for the item in listings."""
    text: str
    """Text that is embedded (header + body)."""
    header_chars: int
    """Length of the header at the start of ``text`` (body = ``text[header_chars:]``)."""
    start_char: int
    """Offset of the body in the item's indexable text, in characters."""
    type: MemoryType
    """The item's type."""
    source: str
    """The item's source."""
    timestamp_s: float
    """The item's store time, seconds since the Unix epoch."""
    tags: tuple[str, ...] = field(default=())
    """The item's tags (normalised, lower case)."""


@dataclass(frozen=True, slots=True)
class ChunkHit:
    """A chunk found by a search."""

    item_id: str
    chunk_index: int
    body: str
    """The chunk's text without its header."""
    start_char: int
    score: float
    """Cosine similarity to the query, in [-1, 1]; higher is closer."""


@runtime_checkable
class VectorIndex(Protocol):
    """Chunks of memory items, searchable by meaning and filterable by item facts."""

    def add(self, chunks: Sequence[IndexChunk]) -> None:
        """Add or replace chunks (the same ``item_id`` + ``chunk_index`` replaces). Idempotent."""
        ...

    def search(
        self, text: str, criteria: MemoryCriteria, *, n_chunks: int, vector: Sequence[float] | None = None,
        passing: Callable[[Sequence[str]], set[str]] | None = None,
    ) -> list[ChunkHit]:
        """The ``n_chunks`` chunks closest to ``text`` among items matching ``criteria``'s
        filters (type, source, tags, time range), best first. ``vector``: search with this
        query vector instead of embedding ``text``. ``passing``: a fast test of the filters
        by chunk id (``<item_id>:<chunk_index>`` in, the ids that pass out) the index may use
        instead of reading each chunk's metadata; ``None``: the index tests them itself."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The vector ``search`` compares chunks with for ``text`` (unit length)."""
        ...

    def chunk_vector(self, item_id: str, chunk_index: int) -> list[float] | None:
        """The stored vector of one chunk; ``None`` when the index does not hold it."""
        ...

    def list_items(self, criteria: MemoryCriteria) -> list[tuple[str, float]]:
        """``(item_id, timestamp_s)`` of every item matching ``criteria``'s filters (any order)."""
        ...

    def item_ids(self) -> set[str]:
        """Ids of every item that has at least one chunk in the index."""
        ...

    def delete_items(self, item_ids: Sequence[str]) -> None:
        """Remove every chunk of these items."""
        ...

    def reset(self) -> None:
        """Remove everything."""
        ...
