"""The vector index contract: chunks and their vectors in, best chunks out, filtered by the memory's
filter authority.

The library embeds; a backend stores vectors. The library chooses which chunks of an item get a
vector (:func:`~agent_memory.index.chunking.chunks_to_embed`), embeds them with its one embedder
(:mod:`agent_memory.index.embedding`: batched across items, a near-duplicate vector of an item
dropped), and hands the index the chunks with their vectors; a query is embedded by the library
too and searched as a vector. So every backend holds the same vectors for the same items, and a
backend never loads a model.

A query's filters (type, source, tags, time range: :class:`MemoryCriteria`) are translated once
per backend, by the *filter authority*: the keyword index (SQLite on files, SQL on Postgres), or,
for a memory without one, the item records themselves. The vector index is handed the result as
a ``passing`` test (an :class:`ItemFilter` when :mod:`~agent_memory.index.fusion` makes it) and
may filter by it instead of translating the criteria (the built-in Chroma index never does;
Postgres filters in the same SQL statement as its keyword index).

A backend implements :class:`VectorIndex` (a Protocol); the built-in one is
:class:`~agent_memory.storage.files.chroma.ChromaVectorIndex`. The index holds only derived data: it can
be dropped and rebuilt from ``items.jsonl`` at any time (``AgentMemory.rebuild_index``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.models.items import MemoryCriteria, MemoryType

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ChunkHit", "ChunkVectors", "HeldItems", "IndexChunk", "ItemFilter", "VectorIndex", "as_rows", "has_filters"]

ChunkVectors: TypeAlias = "npt.NDArray[np.float32]"
"""The vectors of chunks handed to :meth:`VectorIndex.add`: a float32 numpy array of shape
``(number of chunks, dimensions)``, row ``n`` the vector of chunk ``n``, each row of unit length
(L2 norm 1, so a dot product is the cosine similarity); ``dimensions`` is the embedding model's
(384 for all-MiniLM-L6-v2) and the same for every add to one index."""


@dataclass(frozen=True, slots=True)
class IndexChunk:
    """One chunk to index, with the item facts the index filters on."""

    item_id: str
    """Memory id of the item the chunk belongs to."""
    chunk_index: int
    """0-based position of the chunk in the item; chunk 0 stands for the item in listings."""
    text: str
    """Text that is embedded (header + body); the index keeps it to answer with the body."""
    header_chars: int
    """Length of the header at the start of ``text`` (body = ``text[header_chars:]``)."""
    start_char: int
    """Offset of the body in the item's indexable text, in characters."""
    type: MemoryType
    """The item's type."""
    source: str
    """The item's source."""
    timestamp_s: float
    """The item's store time, Unix time in seconds."""
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


def has_filters(criteria: MemoryCriteria) -> bool:
    """Whether ``criteria`` filters anything (a type, a source, tags or a time bound); its text
    and limit do not count."""
    return (criteria.type is not None or criteria.source is not None or bool(criteria.tags)
            or criteria.since is not None or criteria.until is not None)


@dataclass(frozen=True, slots=True)
class ItemFilter:
    """Which items pass a query's filters, as the filter authority answers it. Callable as a
    ``passing`` test: chunk ids (``<item_id>:<chunk_index>``) in, the ids that pass out."""

    chunks: Callable[[Sequence[str]], set[str]]
    """Which of these chunk ids belong to items that pass (ids of unknown items do not pass);
    O(number of ids)."""
    items: Callable[[], set[str]]
    """Every passing item id (for a search restricted to them when the filter is selective);
    O(passing items)."""

    def __call__(self, chunk_ids: Sequence[str]) -> set[str]:
        return self.chunks(chunk_ids)


@runtime_checkable
class VectorIndex(Protocol):
    """Chunks of memory items with their vectors, searchable by a query vector and filterable by
    item facts. The library embeds (chunks and queries alike); the index stores and compares."""

    def add(self, chunks: Sequence[IndexChunk], vectors: ChunkVectors) -> None:
        """Add or replace chunks with their vectors (the same ``item_id`` + ``chunk_index``
        replaces). Idempotent. ``vectors``: one unit-length row per chunk, in the order of
        ``chunks`` (:data:`ChunkVectors`: float32, shape ``(len(chunks), dimensions)``).

        Raises:
            VectorIndexError: if the index cannot write them (nothing of a failed batch needs to
                stay: the library writes it again, or the item by itself).
        """
        ...

    def search(
        self, vector: Sequence[float], criteria: MemoryCriteria, *, n_chunks: int,
        passing: Callable[[Sequence[str]], set[str]] | None = None,
    ) -> list[ChunkHit]:
        """The ``n_chunks`` chunks closest to ``vector`` (the query's unit-length vector, as many
        floats as the chunks' vectors; closeness is cosine similarity, :attr:`ChunkHit.score`)
        among items matching ``criteria``'s filters (type, source, tags, time range; its text is
        not read), best first. ``passing``: the filter authority's test of those filters by
        chunk id (``<item_id>:<chunk_index>`` in, the ids that pass out; an :class:`ItemFilter`
        from ``AgentMemory.query``, which gives one whenever ``criteria`` filters anything): the
        index may filter by it instead of translating ``criteria``; ``None``: nothing is
        filtered, or the index tests the filters itself (an index that only filters by
        ``passing``, as the built-in Chroma index, raises
        :class:`~agent_memory.errors.InvalidArgumentError` then)."""
        ...

    def chunk_vector(self, item_id: str, chunk_index: int) -> list[float] | None:
        """The stored vector of one chunk (as :meth:`add` was given it, float32 precision);
        ``None`` when the index does not hold it."""
        ...

    def list_items(self, criteria: MemoryCriteria) -> list[tuple[str, float]]:
        """``(item_id, timestamp_s)`` of every item matching ``criteria``'s filters (any order).
        ``AgentMemory`` calls it without filters (a memory without a keyword index lists every
        item and filters with the item records); an index that only filters by ``passing`` may
        raise :class:`~agent_memory.errors.InvalidArgumentError` for criteria with filters."""
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


@runtime_checkable
class HeldItems(Protocol):
    """What a :class:`VectorIndex` may add to be fast at scale (optional, not part of the required
    contract): which of many items it holds, in one call. The indexing thread asks it for every
    batch it writes, under the ``index`` lock, so that an item another process indexed meanwhile
    is not embedded again; an index without it is asked with one :meth:`VectorIndex.chunk_vector`
    per item."""

    def held_items(self, item_ids: Sequence[str]) -> set[str]:
        """Which of ``item_ids`` the index holds (their chunk 0 is there), in O(len(item_ids)),
        whatever the size of the index."""
        ...


def as_rows(vectors: Any) -> ChunkVectors:
    """``vectors`` (a :data:`ChunkVectors` array, or one sequence of floats per chunk) as a
    C-contiguous float32 array of shape ``(number of chunks, dimensions)``: what an index
    stores. An empty input gives shape ``(0, 0)``."""
    with HEAVY_IMPORTS:
        import numpy as np

    rows = np.ascontiguousarray(vectors, dtype=np.float32)
    return rows.reshape(0, 0) if rows.size == 0 else rows
