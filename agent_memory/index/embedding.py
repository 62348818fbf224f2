"""The library's embedding, once for every backend: chunk vectors for the vector index, query vectors
for a search.

A backend's vector index stores and compares vectors (:class:`~agent_memory.storage.vector.VectorIndex`);
what gets a vector, and which vector, is decided here, the same for files, Postgres and ``memory://``:

- **Chunks** (:meth:`IndexEmbedder.embed_chunks`): the chunks that
  :func:`~agent_memory.index.chunking.chunks_to_embed` chose, of one or more items, are embedded in
  one call of the model (batched across items), then, within each item, a chunk whose vector has
  cosine at least :data:`NEAR_DUPLICATE_COSINE` with a chunk of that item already kept is dropped
  (it stays in the keyword index). That is a second line of defence after the text check of
  ``chunks_to_embed``: rows that differ only in an id, a hash or a timestamp share few word
  shingles but embed to nearly one point, and an HNSW graph (Chroma's, pgvector's) full of
  near-identical points loses the items stored after them (see :mod:`agent_memory.index.chunking`).
- **Queries** (:meth:`IndexEmbedder.embed_query`): a query text is embedded once and kept in a
  cache of the :data:`QUERY_CACHE_SIZE` most recent texts, so a search that widens, a follow-up
  query that repeats the first one's vector, or the same question asked again does not embed again.

One :class:`IndexEmbedder` serves every memory of a process with the same embedding settings
(:func:`index_embedder`): the model is loaded once per process anyway, and a query vector depends
only on the model and the text.

Vectors made by different runtimes of one model (:data:`~agent_memory.embeddings.EmbeddingRuntime`)
are comparable but not equal: float32 ONNX and torch agree to float rounding, int8 ONNX and torch
have cosine ~0.993 (at least 0.98 on real chunks). An index built by an earlier version (torch)
is searched with this version's query vectors as it is, without re-embedding;
``AgentMemory.rebuild_index()`` re-embeds it under the current runtime, and
``MemoryConfig(embedding_runtime="onnx")`` keeps float32 vectors (benchmarks/results/embedding.json
has the figures of both).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

from agent_memory.config import MemoryConfig
from agent_memory.embeddings import Embedder, local_embedder
from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.storage.vector import ChunkVectors, IndexChunk, as_rows

__all__ = ["NEAR_DUPLICATE_COSINE", "QUERY_CACHE_SIZE", "IndexEmbedder", "distinct_vectors", "index_embedder"]

QUERY_CACHE_SIZE = 256
"""Query texts whose vectors are kept (least recently used dropped first): a multi-hop query
embeds its text and its follow-up, and an agent repeats questions."""

NEAR_DUPLICATE_COSINE = 0.98
"""Cosine similarity from which a chunk's vector is a near-duplicate of an already-kept chunk of
the same item and is not stored. Distinct passages of real text stay far below it: the chunks of
the readability pages and HotpotQA paragraphs of ../shared/data (2,047 chunks) have no pair within
an item above 0.93 (benchmarks/bench_embedding.py); rows of a log that differ only in a request id
or a timestamp are above 0.98."""


def distinct_vectors(chunks: Sequence[IndexChunk], vectors: ChunkVectors,
                     threshold: float = NEAR_DUPLICATE_COSINE) -> list[int]:
    """Positions (ascending) of the chunks to keep: within each item (consecutive chunks of one
    ``item_id``), a chunk is kept unless its vector has cosine at least ``threshold`` with a chunk
    of that item kept before it; an item's first chunk is always kept. ``vectors``: unit rows, one
    per chunk. O(kept chunks of an item) dot products per chunk."""
    with HEAVY_IMPORTS:
        import numpy as np

    keep: list[int] = []
    first = 0
    for position, chunk in enumerate(chunks):
        if position == 0 or chunk.item_id != chunks[position - 1].item_id:
            first = len(keep)
        kept = keep[first:]
        if kept and float(np.max(vectors[kept] @ vectors[position])) >= threshold:
            continue
        keep.append(position)
    return keep


class IndexEmbedder:
    """An :class:`~agent_memory.embeddings.Embedder` as the index uses it: chunks in, the chunks
    that get a vector and their vectors out; a query text in, its vector out (cached).

    Args:
        embedder: the model (:func:`~agent_memory.embeddings.local_embedder`, or any
            :class:`~agent_memory.embeddings.Embedder`).
    """

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._queries: OrderedDict[str, list[float]] = OrderedDict()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"IndexEmbedder({self.embedder!r})"

    def embed_chunks(self, chunks: Sequence[IndexChunk]) -> tuple[list[IndexChunk], ChunkVectors]:
        """The chunks that get a vector, and their vectors (unit rows, float32, one per kept
        chunk, in order): every chunk embedded in one model call, then near-duplicates within an
        item dropped (:func:`distinct_vectors`).

        Raises:
            EmbeddingError: if the model fails; ConfigurationError: if it cannot load.
        """
        if not chunks:
            return [], as_rows([])
        vectors = as_rows(self.embedder.embed([chunk.text for chunk in chunks]))
        keep = distinct_vectors(chunks, vectors)
        if len(keep) == len(chunks):
            return list(chunks), vectors
        return [chunks[n] for n in keep], vectors[keep]

    def clear(self) -> None:
        """Forget the cached query vectors (the next query of each text is embedded again)."""
        with self._lock:
            self._queries.clear()

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of a query text, from the cache when the text was embedded recently
        (the model's ``embed_query`` when it has one: torch embeds a query with its query threads).

        Raises:
            EmbeddingError: if the model fails; ConfigurationError: if it cannot load.
        """
        with self._lock:
            vector = self._queries.get(text)
            if vector is not None:
                self._queries.move_to_end(text)
                return vector
        embed_query = getattr(self.embedder, "embed_query", None)
        vector = list(embed_query(text) if callable(embed_query) else self.embedder.embed([text])[0])
        with self._lock:
            self._queries[text] = vector
            while len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector


_SHARED: dict[tuple[object, ...], IndexEmbedder] = {}
_SHARED_LOCK = threading.Lock()


def index_embedder(config: MemoryConfig) -> IndexEmbedder:
    """The process's :class:`IndexEmbedder` for ``config``'s embedding settings (model path,
    runtime, batch size, query threads): one per distinct settings, shared by every memory."""
    key = (str(config.embedding_model_path or ""), config.embedding_runtime, config.embedding_batch_size,
           config.query_embedding_threads)
    with _SHARED_LOCK:
        found = _SHARED.get(key)
        if found is None:
            found = _SHARED[key] = IndexEmbedder(local_embedder(
                config.embedding_model_path, runtime=config.embedding_runtime, batch_size=config.embedding_batch_size,
                query_threads=config.query_embedding_threads))
        return found
