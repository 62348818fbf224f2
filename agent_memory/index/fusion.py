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

Filters are translated once, by the filter authority (:func:`item_filter`): the keyword index
when the memory has one, else the item records; the vector index gets its answer as ``passing``.
"""

from __future__ import annotations

import functools
import math
import os
import sys
import threading
from collections.abc import Callable, Sequence, Set as AbstractSet
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass

import regex

from agent_memory.config import MemoryConfig
from agent_memory.errors import ItemNotFoundError, UnsupportedRecordError
from agent_memory.index.embedding import index_embedder
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.vector import ChunkHit, ItemFilter, VectorIndex, has_filters
from agent_memory.limits import MAX_QUERY_CHARS
from agent_memory.models.items import ItemRecord, MemoryCriteria, QueryHit, QueryRanking

__all__ = [
    "MULTI_HOP_MAX_QUERY_CHARS", "ROCCHIO_BETA", "SCORE_TOLERANCE", "SEARCH_CHUNKS_PER_ITEM", "Ranking",
    "best_per_item", "dense_ranks", "follow_up_keywords", "follow_up_text", "fuse", "item_filter", "newest", "rank",
    "rocchio", "round_robin", "search", "verbatim_matches",
]

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
    unembedded: AbstractSet[str] = frozenset(),
) -> list[tuple[str, float]]:
    """``(item_id, score)`` best first.

    ``lexical_best`` ``None`` (dense only): the score is the cosine similarity. Otherwise the
    reciprocal rank fusion of Cormack et al. (2009): ``1 / (k + dense_rank) + lexical_weight /
    (k + lexical_rank)``, summed in that order, with near-tie-aware dense ranks
    (:func:`dense_ranks`). Equal scores keep the dense order, then the keyword order.

    ``unembedded``: items that have no vectors yet (stored, in the keyword index, waiting for the
    indexing thread: :meth:`~agent_memory.index.upkeep.IndexUpkeep.unembedded`). Such an item
    cannot be in the dense ranking, and fusion would give it the keyword half of a score only,
    ranking it below items that have both (at ``lexical_weight`` 0.5 a first keyword hit weighs
    0.5/61, less than the 61st dense hit). So it is fused over the ranking it can have: its
    keyword rank stands for its dense rank too, ``(1 + lexical_weight) / (k + lexical_rank)``.
    Every other item's score is the sum above, term for term, so the order of the items that
    have vectors is the same whatever is pending; with nothing pending the result is unchanged.
    """
    if lexical_best is None:
        return [(item_id, hit.score) for item_id, hit in dense_best.items()]
    fused: dict[str, float] = {}
    for item_id, rank in dense_ranks(dense_best).items():
        fused[item_id] = 1.0 / (rrf_k + rank)
    for rank, item_id in enumerate(lexical_best, start=1):
        if item_id in unembedded and item_id not in dense_best:  # no vectors yet: its keyword rank for both
            fused[item_id] = 1.0 / (rrf_k + rank) + lexical_weight / (rrf_k + rank)
            continue
        fused[item_id] = fused.get(item_id, 0.0) + lexical_weight / (rrf_k + rank)
    order = {item_id: n for n, item_id in enumerate(fused)}
    return sorted(fused.items(), key=lambda pair: (-pair[1], order[pair[0]]))


SEARCH_CHUNKS_PER_ITEM = 8
"""Chunks fetched per wanted item in a text query, so that items with many matching chunks do
not crowd out the others; doubled until ``limit`` distinct items are found or the index is spent."""


def item_filter(
    criteria: MemoryCriteria, *, lexical: KeywordIndex | None, records: Callable[[], list[ItemRecord]]
) -> ItemFilter | None:
    """Which items pass ``criteria``'s filters, answered by the filter authority: the keyword index
    (its table, SQL), or, for a memory without one (hybrid search off, a read-only memory with
    no keyword index to read), the item records, tested here (read when first asked). ``None``:
    ``criteria`` filters nothing. Nothing is asked here: the returned filter's calls raise
    :class:`~agent_memory.errors.KeywordIndexError` if the keyword index fails, or
    :class:`~agent_memory.errors.StoreError` if the records cannot be read.
    """
    if not has_filters(criteria):
        return None
    if lexical is not None:
        index = lexical
        return ItemFilter(
            chunks=functools.partial(index.passing, criteria=criteria),
            items=lambda: {item_id for item_id, _ in index.list_items(criteria, limit=LIST_ALL)},
        )

    @functools.cache
    def passing() -> frozenset[str]:  # read when first asked (a vector index may filter itself)
        return frozenset(record.id for record in records() if _passes(record, criteria))

    return ItemFilter(
        chunks=lambda chunk_ids: {chunk_id for chunk_id in chunk_ids if chunk_id.rpartition(":")[0] in passing()},
        items=lambda: set(passing()),
    )


LIST_ALL = sys.maxsize
"""The ``limit`` of a keyword index listing meant to return every item that passes."""


def _passes(record: ItemRecord, criteria: MemoryCriteria) -> bool:
    """Whether ``record`` passes ``criteria``'s filters: the test of a memory without a keyword
    index (the facts compared are the ones indexed with each chunk, timestamps in seconds)."""
    meta = record.metadata
    stamp = meta.timestamp.timestamp()
    return (
        (criteria.type is None or record.type == criteria.type)
        and (criteria.source is None or meta.source == criteria.source)
        and set(criteria.tags) <= set(meta.tags)
        and (criteria.since is None or stamp >= criteria.since.timestamp())
        and (criteria.until is None or stamp <= criteria.until.timestamp())
    )


def newest(
    criteria: MemoryCriteria,
    *,
    index: VectorIndex,
    lexical: KeywordIndex | None,
    get_record: Callable[[str], ItemRecord],
    records: Callable[[], list[ItemRecord]],
) -> list[QueryHit]:
    """The ``criteria.limit`` newest items matching ``criteria``'s filters (a query without text).

    With the keyword index (``hybrid_search``, the default) SQLite filters, orders and limits:
    O(limit). Without it the vector index lists every item, the item records filter them
    (:func:`item_filter`) and they are sorted here: O(items). Items the index knows but
    ``get_record`` does not (a store cleared or an item forgotten meanwhile, a record of a newer
    version) are skipped, fetching more until ``limit`` are found or the index is spent."""
    fetch = criteria.limit
    while True:
        if lexical is not None:
            listed = lexical.list_items(criteria, limit=fetch)
        else:
            listed = sorted(index.list_items(MemoryCriteria()), key=lambda pair: pair[1], reverse=True)
            passing = item_filter(criteria, lexical=None, records=records)
            if passing is not None:
                kept = passing.items()
                listed = [pair for pair in listed if pair[0] in kept]
        hits: list[QueryHit] = []
        for item_id, _ in listed:
            try:
                hits.append(QueryHit(item=get_record(item_id)))
            except (ItemNotFoundError, UnsupportedRecordError):
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
    lexical: KeywordIndex | None,
    config: MemoryConfig,
    get_record: Callable[[str], ItemRecord],
    records: Callable[[], list[ItemRecord]],
    n_items: int | None = None,
    ranking: QueryRanking = "default",
    vector: Sequence[float] | None = None,
    unembedded: AbstractSet[str] = frozenset(),
) -> list[QueryHit]:
    """The items best matching ``criteria.text`` (which must be set), best first.

    One query ranks items by their best chunk, dense and keyword rankings fused by :func:`fuse`
    (:func:`rank`). With ``config.multi_hop`` (the default) a second query follows: the text plus
    the first ``config.multi_hop_words`` words of the best hit's matching chunk, so that a
    question whose answer lies one hop away (the film named in the director's paragraph) finds
    that second document too; the two rankings are merged by :func:`round_robin`. Then ``score``
    is ``1 / (rrf_k + merged rank)`` and ``similarity`` the cosine to the query that found the
    item. A text longer than :data:`MULTI_HOP_MAX_QUERY_CHARS` gets no follow-up, nor one that
    items hold verbatim (:func:`verbatim_matches`: those items lead, a look-up of what the text
    names, scored ``1 / (rrf_k + rank)`` as well). Items the
    index knows but ``get_record`` does not (a store cleared or restored meanwhile, a record of a
    newer version) are skipped. ``records``: every item record, for the filters of a memory
    without a keyword index (:func:`item_filter`). ``n_items``: how many items the memory holds
    at most (a search that found that many distinct items stops widening); ``None``: unknown.
    ``vector``: ``criteria.text``'s vector, embedded already (``None``: embedded here).
    ``unembedded``: items whose vectors are not written yet, ranked by their keyword rank in
    both rankings (:func:`fuse`).

    ``ranking="similarity"``: the dense ranking alone (no keyword ranking, no follow-up query, no
    verbatim lead), ``score`` = ``similarity`` = the cosine of each item's best chunk to
    ``criteria.text``, best first; the keyword index still answers the filters.
    """
    assert criteria.text is not None
    passing = item_filter(criteria, lexical=lexical, records=records)
    dense_only = ranking == "similarity"
    first = rank(criteria.text, criteria, index=index, lexical=None if dense_only else lexical, config=config,
                 passing=passing, n_items=n_items, vector=vector, unembedded=unembedded)
    merged = first.order
    found_by = {item_id: first for item_id, _ in first.order}
    if first.exact:  # a look-up of what the text names: no second hop; scores follow the order
        merged = [(item_id, 1.0 / (config.rrf_k + position)) for position, (item_id, _) in enumerate(first.order, 1)]
    elif (not dense_only and config.multi_hop and first.order and criteria.limit > 1
            and len(criteria.text) <= MULTI_HOP_MAX_QUERY_CHARS):
        lead = first.chunk(first.order[0][0])
        follow_up = follow_up_text(criteria.text, lead.body, words=config.multi_hop_words)
        keywords = (
            follow_up_keywords(criteria.text, lead.body, words=config.multi_hop_words)
            if config.multi_hop_keywords == "entities" else follow_up
        )
        vector = None
        if config.multi_hop_vector == "rocchio":
            stored = index.chunk_vector(lead.item_id, lead.chunk_index)
            query = index_embedder(config).embed_query(criteria.text)
            vector = rocchio(query, stored) if stored is not None else None
        second = rank(
            follow_up, criteria, index=index, lexical=lexical, config=config, keyword_text=keywords, vector=vector,
            passing=passing, n_items=n_items, unembedded=unembedded,
        )
        ids = round_robin([i for i, _ in first.order], [i for i, _ in second.order])
        merged = [(item_id, 1.0 / (config.rrf_k + position)) for position, item_id in enumerate(ids, start=1)]
        found_by = {item_id: first if first.found(item_id) else second for item_id in ids}
    hits: list[QueryHit] = []
    for item_id, score in merged:
        try:
            record = get_record(item_id)
        except (ItemNotFoundError, UnsupportedRecordError):
            continue
        found = found_by[item_id]
        dense_hit, shown = found.dense.get(item_id), found.chunk(item_id)
        hits.append(
            QueryHit(
                item=record, score=score, similarity=dense_hit.score if dense_hit else None,
                chunk=shown.body, chunk_index=shown.chunk_index, chunk_start_char=shown.start_char,
            )
        )
        if len(hits) >= criteria.limit:
            break
    return hits


@dataclass(frozen=True, slots=True)
class Ranking:
    """The items one query text found: ``order`` is ``(item_id, fused score)`` best first;
    ``dense`` and ``lexical`` the best chunk of each item in either ranking."""

    order: list[tuple[str, float]]
    dense: dict[str, ChunkHit]
    lexical: dict[str, ChunkHit]
    exact: dict[str, ChunkHit]
    """Items that hold the query text verbatim (:func:`verbatim_matches`), with that chunk; they
    lead ``order``."""

    def found(self, item_id: str) -> bool:
        """Whether this query found the item (in either ranking)."""
        return item_id in self.dense or item_id in self.lexical

    def chunk(self, item_id: str) -> ChunkHit:
        """The chunk to show for an item: the one that holds the query verbatim, else its best
        dense chunk, else its best keyword chunk."""
        return self.exact.get(item_id) or self.dense.get(item_id) or self.lexical[item_id]


def rank(
    text: str,
    criteria: MemoryCriteria,
    *,
    index: VectorIndex,
    lexical: KeywordIndex | None,
    config: MemoryConfig,
    keyword_text: str | None = None,
    vector: Sequence[float] | None = None,
    passing: ItemFilter | None = None,
    n_items: int | None = None,
    unembedded: AbstractSet[str] = frozenset(),
) -> Ranking:
    """Items matching ``criteria``'s filters ranked for ``text``: dense and keyword rankings of
    items (each by its best chunk) fused by :func:`fuse`; the keyword ranking searches
    ``keyword_text`` instead when it is given (within ``config.keyword_max_postings``), the
    dense ranking ``vector`` instead of ``text``'s embedding when it is given. More chunks are
    fetched (doubling from ``limit * SEARCH_CHUNKS_PER_ITEM``) while fewer than
    ``criteria.limit`` distinct items were found and the indexes have more. ``passing``: the
    filter authority's answer for ``criteria``'s filters (:func:`item_filter`), handed to the
    vector index; ``None``: none (``criteria`` must then filter nothing, or the vector index
    translate its filters itself). The query is embedded once, by the library
    (:func:`~agent_memory.index.embedding.index_embedder` of ``config``), however often the search
    widens; it stops widening once ``n_items`` (the most items the memory holds) are found.
    ``unembedded``: items whose vectors are not written yet (:func:`fuse`)."""
    n_chunks = criteria.limit * SEARCH_CHUNKS_PER_ITEM
    wanted = criteria.limit if n_items is None else max(1, min(criteria.limit, n_items))
    while True:
        # BM25 runs in a worker thread while the query is embedded (with one torch thread by
        # default) and the vector index searched: SQLite and torch release the GIL, so on 2
        # cores the two searches overlap.
        pending = (
            _keyword_pool().submit(
                lexical.search, keyword_text or text, criteria, n_chunks=n_chunks,
                max_postings=config.keyword_max_postings,
            )
            if lexical else None
        )
        try:
            if vector is None:
                vector = index_embedder(config).embed_query(text)
            dense = index.search(vector, criteria, n_chunks=n_chunks, passing=passing)
        except BaseException:
            if pending is not None:
                wait([pending])  # the search must not outlive a failed query (or a closed memory)
            raise
        keyword = pending.result() if pending else []
        dense_best, lexical_best = best_per_item(dense), best_per_item(keyword)
        exhausted = len(dense) < n_chunks and len(keyword) < n_chunks
        if len(dense_best.keys() | lexical_best.keys()) >= wanted or exhausted:
            break
        n_chunks *= 2
    order = fuse(
        dense_best, lexical_best if lexical else None, rrf_k=config.rrf_k, lexical_weight=config.lexical_weight,
        unembedded=unembedded,
    )
    exact = verbatim_matches(keyword_text or text, keyword)
    if exact:
        order = [pair for pair in order if pair[0] in exact] + [pair for pair in order if pair[0] not in exact]
    return Ranking(order=order, dense=dense_best, lexical=lexical_best, exact=exact)


def verbatim_matches(text: str, hits: Sequence[ChunkHit]) -> dict[str, ChunkHit]:
    """The items among keyword ``hits`` (best first) with a chunk that holds ``text`` verbatim,
    each with its best such chunk: ``text``'s words, in order, case-folded, separated by anything
    but a word character (so the query ``zz-0001`` matches ``ZZ-0001`` and ``ZZ 0001``, never
    ``ZZ-00012``).

    An exact identifier (a name, an id, an error code, a SKU, a function name) is what agents
    look up most, and what a sentence-embedding model knows least: its dense ranking of such a
    query is noise, and reciprocal rank fusion puts a keyword-only first hit (weight 0.5 at
    rank 1: 0.5/61) below the 61st dense hit. So items that hold the query verbatim lead the
    ranking, as a phrase match leads a search engine's; a question never appears verbatim in
    what it asks about, so questions are ranked by fusion alone.

    Both sides are compared case-folded (``str.casefold``): the words of the folded text in the
    folded chunk. The pattern is compiled only when a chunk holds every word (a necessary
    condition, checked first): compiling one for a multi-hop follow-up of seventy words took
    ~4 ms a query (benchmarks/bench_scale.py's profile), and a question's words are almost never
    all in one chunk."""
    words = _WORDS.findall(text.casefold())
    if not words or not hits:
        return {}
    pattern: regex.Pattern[str] | None = None
    found: dict[str, ChunkHit] = {}
    for hit in hits:
        if hit.item_id in found:
            continue
        folded = hit.body.casefold()
        if not all(word in folded for word in words):
            continue
        if pattern is None:
            pattern = regex.compile(r"(?<!\w)" + r"\W+".join(regex.escape(word) for word in words) + r"(?!\w)", regex.V1)
        if pattern.search(folded) is not None:
            found[hit.item_id] = hit
    return found


_WORDS = regex.compile(r"\w+")


MULTI_HOP_MAX_QUERY_CHARS = 1_000
"""Longest query text that gets a follow-up query, in characters. A longer text (a pasted
paragraph) already carries its context, and the embedding model reads only its first 256 word
pieces, so words added at its end would not reach the dense search."""

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
KEYWORD_WORKERS = 4
"""Threads that run keyword searches beside vector searches (shared by every memory of the
process; more than one so that queries from several threads do not queue behind each other)."""


def _keyword_pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=KEYWORD_WORKERS, thread_name_prefix="agent-memory-bm25")
        return _POOL


def _forget_pool_after_fork() -> None:
    """A forked child has none of the parent's threads: it must start its own pool."""
    global _POOL, _POOL_LOCK
    _POOL, _POOL_LOCK = None, threading.Lock()


os.register_at_fork(after_in_child=_forget_pool_after_fork)


def follow_up_text(text: str, lead: str, *, words: int) -> str:
    """The second query of multi-hop search: ``text``, a space, then the first ``words`` words of
    ``lead`` (the best hit's chunk), within ``MAX_QUERY_CHARS`` characters."""
    expansion = " ".join(lead.split()[:words])
    return f"{text} {expansion}"[:MAX_QUERY_CHARS] if expansion else text


MAX_FOLLOW_UP_KEYWORDS = 16
"""Words of the best hit a follow-up's keyword search adds to the query text. BM25 scores every
chunk that matches any term, so sixty common words would make the follow-up match most of a
large memory; the named entities and numbers that lead to the next hop are few."""

_ENTITY_WORD = regex.compile(r"(?:\p{Lu}|\p{N})[\p{L}\p{N}\p{M}'’.-]*")


def follow_up_keywords(text: str, lead: str, *, words: int) -> str:
    """The keyword side of the follow-up query: ``text`` plus the names and numbers (words that
    start with a capital letter or a digit) among the first ``words`` words of ``lead`` that
    ``text`` does not already contain, at most :data:`MAX_FOLLOW_UP_KEYWORDS`, in order."""
    known = {word.lower() for word in regex.findall(r"\w+", text)}
    picked: list[str] = []
    for word in lead.split()[:words]:
        match = _ENTITY_WORD.match(word)
        if match is None:
            continue
        entity = match.group().rstrip(".'’-")
        if entity and entity.lower() not in known and entity not in picked:
            picked.append(entity)
            if len(picked) == MAX_FOLLOW_UP_KEYWORDS:
                break
    return f"{text} {' '.join(picked)}"[:MAX_QUERY_CHARS] if picked else text


ROCCHIO_BETA = 0.75
"""Weight of the fed-back document's vector against the query's (α = 1): Salton & Buckley (1990),
"Improving retrieval performance by relevance feedback", the values the SMART experiments used."""


def rocchio(query: Sequence[float], document: Sequence[float], *, beta: float = ROCCHIO_BETA) -> list[float]:
    """Rocchio's relevance feedback with one relevant document: ``query + beta * document``,
    scaled to unit length (cosine search ignores length; the zero vector comes back as is)."""
    combined = [q + beta * d for q, d in zip(query, document, strict=True)]
    norm = math.sqrt(sum(x * x for x in combined))
    return [x / norm for x in combined] if norm > 0 else combined


def round_robin(first: list[str], second: list[str]) -> list[str]:
    """``first[0]``, then alternately the next item of ``first`` and of ``second`` not yet taken,
    until both are spent. The best hit of the first query leads (it is what the follow-up was
    built from) and its runner-up follows, so the two items a comparison question names keep the
    top 2; the follow-up's best new item comes third, so the second hop of a bridge question
    reaches the top 3 whenever the follow-up ranks it first.

    Measured on the HotpotQA dev questions (benchmarks/bench_retrieval.py), this order beat
    reciprocal rank fusion of the two rankings, which lets the first query's near misses crowd
    out the second hop."""
    if not first:
        return list(dict.fromkeys(second))
    merged: dict[str, None] = {first[0]: None}
    rest = [iter(first[1:]), iter(second)]
    while rest:
        for source in list(rest):
            for item_id in source:
                if item_id not in merged:
                    merged[item_id] = None
                    break
            else:
                rest.remove(source)
    return list(merged)
