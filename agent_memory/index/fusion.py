"""Ranking items for a text query: best chunk per item, near-tie-aware dense ranks, reciprocal rank
fusion with the keyword ranking (:func:`search`).

The determinism contract (what ``restore``, ``rebuild_index`` and another machine promise):
vectors are recomputed, not copied, and the same text embedded in another batch, with another
thread count or on another CPU gives a vector that differs in the last bits of float32. So a
similarity is reproducible within :data:`SCORE_TOLERANCE`, not to the last digit, and two items
whose similarities are that close may change places in a dense-only ranking. In hybrid search
such items share one dense rank (competition ranking, "1224"), so reciprocal rank fusion gives
them the same dense contribution whichever comes first, and the fused scores are reproducible too.
Scores are never rounded (rounding turns a drift of 1e-7 into a jump of 1e-6 at a rounding edge).
"""

from __future__ import annotations

from collections.abc import Callable

from agent_memory.config import MemoryConfig
from agent_memory.errors import ItemNotFoundError
from agent_memory.index.lexical import LexicalIndex
from agent_memory.index.vector import ChunkHit, VectorIndex
from agent_memory.models.items import ItemRecord, MemoryCriteria, QueryHit

__all__ = ["SCORE_TOLERANCE", "SEARCH_CHUNKS_PER_ITEM", "best_per_item", "dense_ranks", "fuse", "newest", "search"]

SCORE_TOLERANCE = 1e-4
"""Largest difference between two cosine similarities that counts as a tie, and the agreement
promised for a similarity recomputed by ``restore`` / ``rebuild_index``.

Measured on this project's 2-core CPU (all-MiniLM-L6-v2, float32): re-embedding 300 HotpotQA
paragraphs with batch sizes 1, 7, 32 and 128 and 1 or 2 torch threads (2,400 re-embeddings, 60
questions each) moved similarities by at most 2.1e-7; end to end, 300 items stored one by one then
``rebuild_index`` three times (900 re-embeddings, 60 queries x 10 hits, through chromadb) by at
most 3.0e-7, with no ranking changed. 1e-4 leaves a margin of ~300x for other CPUs' kernels while
staying far below any difference that matters for retrieval."""


def best_per_item(hits: list[ChunkHit]) -> dict[str, ChunkHit]:
    """The first (best) chunk hit of each item, in ranking order (the dict keeps that order)."""
    best: dict[str, ChunkHit] = {}
    for hit in hits:
        best.setdefault(hit.item_id, hit)
    return best


def dense_ranks(best: dict[str, ChunkHit], tolerance: float = SCORE_TOLERANCE) -> dict[str, int]:
    """1-based ranks of items ordered by score, best first, where an item whose score is within
    ``tolerance`` of the previous item's shares that item's rank (so a chain of near-ties shares
    one rank)."""
    ranks: dict[str, int] = {}
    previous_score = 0.0
    rank = 0
    for position, (item_id, hit) in enumerate(best.items(), start=1):
        if position == 1 or previous_score - hit.score > tolerance:
            rank = position
        ranks[item_id] = rank
        previous_score = hit.score
    return ranks


def fuse(
    dense_best: dict[str, ChunkHit],
    lexical_best: dict[str, ChunkHit] | None,
    *,
    rrf_k: int,
    lexical_weight: float,
) -> list[tuple[str, float]]:
    """``(item_id, score)`` best first.

    ``lexical_best`` ``None`` (dense only): the score is the cosine similarity. Otherwise the
    reciprocal rank fusion of Cormack et al. (2009): ``1 / (k + dense_rank) + lexical_weight /
    (k + lexical_rank)``, summed in that order, with near-tie-aware dense ranks
    (:func:`dense_ranks`). Equal scores keep the dense order, then the keyword order.
    """
    if lexical_best is None:
        return [(item_id, hit.score) for item_id, hit in dense_best.items()]
    fused: dict[str, float] = {}
    for item_id, rank in dense_ranks(dense_best).items():
        fused[item_id] = 1.0 / (rrf_k + rank)
    for rank, item_id in enumerate(lexical_best, start=1):
        fused[item_id] = fused.get(item_id, 0.0) + lexical_weight / (rrf_k + rank)
    order = {item_id: n for n, item_id in enumerate(fused)}
    return sorted(fused.items(), key=lambda pair: (-pair[1], order[pair[0]]))


SEARCH_CHUNKS_PER_ITEM = 8
"""Chunks fetched per wanted item in a text query, so that items with many matching chunks do
not crowd out the others; doubled until ``limit`` distinct items are found or the index is spent."""


def newest(
    criteria: MemoryCriteria,
    *,
    index: VectorIndex,
    lexical: LexicalIndex | None,
    get_record: Callable[[str], ItemRecord],
) -> list[QueryHit]:
    """The ``criteria.limit`` newest items matching ``criteria``'s filters (a query without text).

    With the keyword index (``hybrid_search``, the default) SQLite filters, orders and limits:
    O(limit). Without it the vector index lists every matching item and they are sorted here:
    O(items). Items the index knows but ``get_record`` does not (a store cleared or an item
    forgotten meanwhile) are skipped, fetching more until ``limit`` are found or the index is spent."""
    fetch = criteria.limit
    while True:
        if lexical is not None:
            listed = lexical.list_items(criteria, limit=fetch)
        else:
            listed = sorted(index.list_items(criteria), key=lambda pair: pair[1], reverse=True)
        hits: list[QueryHit] = []
        for item_id, _ in listed:
            try:
                hits.append(QueryHit(item=get_record(item_id)))
            except ItemNotFoundError:
                continue
            if len(hits) >= criteria.limit:
                return hits
        if lexical is None or len(listed) < fetch:
            return hits
        fetch *= 4


def search(
    criteria: MemoryCriteria,
    *,
    index: VectorIndex,
    lexical: LexicalIndex | None,
    config: MemoryConfig,
    get_record: Callable[[str], ItemRecord],
) -> list[QueryHit]:
    """The items best matching ``criteria.text`` (which must be set), best first: dense and keyword
    rankings of items (each by its best chunk) fused by :func:`fuse`; more chunks are fetched
    while fewer than ``limit`` distinct items were found. Items the index knows but
    ``get_record`` does not (a store cleared or restored meanwhile) are skipped."""
    assert criteria.text is not None
    n_chunks = criteria.limit * SEARCH_CHUNKS_PER_ITEM
    while True:
        dense = index.search(criteria.text, criteria, n_chunks=n_chunks)
        keyword = lexical.search(criteria.text, criteria, n_chunks=n_chunks) if lexical else []
        dense_best, lexical_best = best_per_item(dense), best_per_item(keyword)
        exhausted = len(dense) < n_chunks and len(keyword) < n_chunks
        if len(dense_best.keys() | lexical_best.keys()) >= criteria.limit or exhausted:
            break
        n_chunks *= 2
    ranked = fuse(
        dense_best, lexical_best if lexical else None, rrf_k=config.rrf_k, lexical_weight=config.lexical_weight
    )
    hits: list[QueryHit] = []
    for item_id, score in ranked:
        try:
            record = get_record(item_id)
        except ItemNotFoundError:
            continue
        dense_hit = dense_best.get(item_id)
        shown = dense_hit or lexical_best[item_id]
        hits.append(
            QueryHit(
                item=record, score=score, similarity=dense_hit.score if dense_hit else None,
                chunk=shown.body, chunk_index=shown.chunk_index, chunk_start_char=shown.start_char,
            )
        )
        if len(hits) >= criteria.limit:
            break
    return hits
