"""Filtered vector search: the unfiltered index over-fetched as ids, with the filters tested by
chunk id in the keyword index's table (the filter authority), answers the same chunks as the exact
answer (every chunk, nearest first, the passing ones kept); a filter too selective for it falls
back to a search restricted to the passing items' ids, and an index no larger than the over-fetch
is answered without one. Chroma never translates the filters itself; a memory without a keyword
index filters with its item records."""

from __future__ import annotations

import functools
from datetime import UTC, datetime, timedelta

import pytest

from agent_memory.index.embedding import index_embedder
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.errors import InvalidArgumentError
from agent_memory.storage.files import chroma
from agent_memory.index.fusion import item_filter
from agent_memory.models.items import MemoryCriteria

CITIES = ["Oslo", "Lima", "Accra", "Hanoi", "Quito", "Perth", "Cairo", "Riga"]


@pytest.fixture(scope="module")
def memory(tmp_path_factory: pytest.TempPathFactory) -> AgentMemory:
    memory = AgentMemory("filters", tmp_path_factory.mktemp("filters"))
    memory.store_many(
        {
            "content": f"Weather report {n} for {CITIES[n % 8]}: rain in the morning, {10 + n % 15} degrees by noon.",
            "title": f"{CITIES[n % 8]} weather", "source": f"station-{n % 2}",
            "tags": [f"g{n % 3}", "weather"] + (["rare"] if n == 47 else []),
        }
        for n in range(48)
    )
    memory.flush_index()  # the tests read the indexes directly
    return memory


def search(
    memory: AgentMemory, criteria: MemoryCriteria, n_chunks: int, *, by_id: bool = True
) -> list[tuple[str, int]]:
    """``(item id, chunk index)`` of the vector search's hits. ``by_id``: the search
    ``AgentMemory.query`` makes (the keyword index's :class:`ItemFilter` as ``passing``);
    ``False``: the exact answer (every chunk of the index, nearest first, the passing ones kept)."""
    passing = item_filter(criteria, lexical=memory.lexical, records=memory.records)
    assert passing is not None
    if by_id:
        hits = memory.index.search(vector_of(memory, criteria), criteria, n_chunks=n_chunks, passing=passing)
        return [(hit.item_id, hit.chunk_index) for hit in hits]
    everything = memory.index.search(vector_of(memory, criteria), MemoryCriteria(), n_chunks=10_000)
    allowed = passing([f"{hit.item_id}:{hit.chunk_index}" for hit in everything])
    return [(hit.item_id, hit.chunk_index) for hit in everything if f"{hit.item_id}:{hit.chunk_index}" in allowed][
        :n_chunks
    ]


def vector_of(memory: AgentMemory, criteria: MemoryCriteria) -> list[float]:
    """The query vector of ``criteria``'s text, as the library embeds it."""
    return index_embedder(memory.config).embed_query(criteria.text or "")


def spy_filtered_queries(monkeypatch: pytest.MonkeyPatch, unfiltered: list[int] | None = None) -> list[dict]:
    """The ``where`` of every Chroma query restricted to item ids, recorded as the searches run (and the
    ``n_results`` of every ids-only unfiltered one into ``unfiltered``)."""
    wheres: list[dict] = []
    real_query, real_nearest = chroma.ChromaVectorIndex._query, chroma.ChromaVectorIndex._nearest

    def query(self, collection, vector, n_results, where):  # noqa: ANN001, ANN202 - a spy
        if where is not None:
            wheres.append(where)
        return real_query(self, collection, vector, n_results, where)

    def nearest(self, collection, vector, n_results):  # noqa: ANN001, ANN202 - a spy
        if unfiltered is not None:
            unfiltered.append(n_results)
        return real_nearest(self, collection, vector, n_results)

    monkeypatch.setattr(chroma.ChromaVectorIndex, "_query", query)
    monkeypatch.setattr(chroma.ChromaVectorIndex, "_nearest", nearest)
    return wheres


@pytest.mark.parametrize(
    "filters",
    [{"tags": ["g1"]}, {"tags": ["g0", "weather"]}, {"source": "station-1"}, {"type": "custom", "tags": ["g2"]}],
)
def test_post_filtered_search_equals_the_exact_answer(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch, filters: dict
) -> None:
    criteria = MemoryCriteria(text="rainy morning in Lima", **filters)
    wheres = spy_filtered_queries(monkeypatch)
    over_fetched = search(memory, criteria, n_chunks=3)  # 48 chunks > 3 * 8: the post-filter path
    assert wheres == []
    assert over_fetched == search(memory, criteria, n_chunks=3, by_id=False) and len(over_fetched) == 3
    with pytest.raises(InvalidArgumentError):  # Chroma does not translate filters
        memory.index.search(vector_of(memory, criteria), criteria, n_chunks=3)
    with pytest.raises(InvalidArgumentError):
        memory.index.list_items(criteria)


def test_a_filter_few_chunks_pass_falls_back_to_the_passing_items(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    rare = memory.query(tags=["rare"], limit=5)
    assert len(rare) == 1
    monkeypatch.setattr(chroma, "MAX_POST_FILTER_FETCH", 3 * chroma.POST_FILTER_FETCH)  # no second fetch
    wheres = spy_filtered_queries(monkeypatch)
    hits = search(memory, MemoryCriteria(text="weather in Accra", tags=["rare"]), n_chunks=3)
    assert [item_id for item_id, _ in hits] == [rare[0].item.id]
    # 24 nearest of 48 fetched, too few passed: a search among the passing item's chunks answered
    assert wheres == [{"item_id": {"$in": [rare[0].item.id]}}]


def test_the_search_among_passing_items_is_paged_and_exact(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chroma, "MAX_POST_FILTER_FETCH", 1)  # always the search among passing items
    monkeypatch.setattr(chroma, "POST_FILTER_FETCH", 1)
    monkeypatch.setattr(chroma, "RESTRICT_PAGE", 5)
    wheres = spy_filtered_queries(monkeypatch)
    criteria = MemoryCriteria(text="rainy morning in Lima", tags=["g1"])  # 16 items: 4 pages
    hits = search(memory, criteria, n_chunks=6)
    assert len(wheres) == 4 and all(len(where["item_id"]["$in"]) <= 5 for where in wheres)
    assert hits == search(memory, criteria, n_chunks=6, by_id=False) and len(hits) == 6


def test_too_few_passing_fetches_as_many_as_their_share_asks(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(chroma, "POST_FILTER_FETCH", 1)  # the first fetch: just the chunks wanted
    fetched: list[int] = []
    wheres = spy_filtered_queries(monkeypatch, fetched)
    # a third of the items, by a filter no other test here used (the index remembers a filter's share)
    criteria = MemoryCriteria(text="rainy morning in Lima", tags=["weather", "g1"])
    hits = search(memory, criteria, n_chunks=6)
    assert wheres == [] and fetched[0] == 6 and len(fetched) >= 2 and fetched[-1] < 48
    assert search(memory, criteria, n_chunks=6, by_id=False) == hits and len(hits) == 6


def test_the_share_a_filter_passed_sizes_the_next_fetch_at_once(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The follow-up of a multi-hop query, or the next query, with the same filter fetches as many
    nearest chunks as that filter's share asks for in one search, not first the usual over-fetch."""
    monkeypatch.setattr(chroma, "POST_FILTER_FETCH", 1)
    fetched: list[int] = []
    wheres = spy_filtered_queries(monkeypatch, fetched)
    criteria = MemoryCriteria(text="rainy morning in Oslo", tags=["g2", "weather"], source="station-0")  # 8 of 48
    first = search(memory, criteria, n_chunks=4)
    assert fetched[0] == 4 and len(fetched) >= 2  # nothing remembered: the usual start, then more
    fetched.clear()
    again = search(memory, MemoryCriteria(text="a dry afternoon in Riga", tags=["weather", "g2"], source="station-0"),
                   n_chunks=4)
    assert wheres == [] and len(fetched) == 1 and fetched[0] > 4  # at once as many as the share asks
    assert first == search(memory, criteria, n_chunks=4, by_id=False) and len(first) == 4
    assert again == search(memory, MemoryCriteria(text="a dry afternoon in Riga", tags=["g2", "weather"],
                                                  source="station-0"), n_chunks=4, by_id=False)


def test_an_index_smaller_than_the_over_fetch_needs_no_second_search(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheres = spy_filtered_queries(monkeypatch)
    criteria = MemoryCriteria(text="weather in Accra", tags=["rare"])
    hits = search(memory, criteria, n_chunks=7)  # 56 wanted of 48 chunks: every chunk was seen
    assert wheres == [] and len(hits) == 1
    assert search(memory, criteria, n_chunks=7, by_id=False) == hits


def test_the_keyword_table_tells_which_chunk_ids_pass(memory: AgentMemory) -> None:
    rare = memory.query(tags=["rare"], limit=1)[0].item.id
    station_1 = {hit.item.id for hit in memory.query(source="station-1", limit=100)}
    ids = [f"{rare}:0", f"{rare}:7", "no-such-item:0", *(f"{item_id}:0" for item_id in sorted(station_1)[:3])]
    assert memory.lexical.passing(ids, MemoryCriteria(tags=["rare"])) == {f"{rare}:0"}
    assert memory.lexical.passing(ids, MemoryCriteria(source="station-1")) == {
        f"{item_id}:0" for item_id in sorted(station_1)[:3]
    } | ({f"{rare}:0"} if rare in station_1 else set())
    assert memory.lexical.passing([], MemoryCriteria(tags=["rare"])) == set()


def test_time_filters_pass_the_same_items(memory: AgentMemory) -> None:
    now = datetime.now(UTC)
    hour = timedelta(hours=1)
    for bounds in ({"since": now - hour}, {"until": now + hour}, {"since": now + hour}):
        criteria = MemoryCriteria(text="cold noon", **bounds)
        assert search(memory, criteria, n_chunks=2) == search(memory, criteria, n_chunks=2, by_id=False)


def test_a_memory_without_a_keyword_index_filters_with_its_records(tmp_path_factory: pytest.TempPathFactory) -> None:
    dense_only = AgentMemory("dense", tmp_path_factory.mktemp("dense"), config=MemoryConfig(hybrid_search=False))
    ids = dense_only.store_many(
        {"content": f"Weather report {n} for {CITIES[n % 8]}: rain by noon.", "source": f"station-{n % 2}",
         "tags": [f"g{n % 3}"]}
        for n in range(12)
    )
    assert dense_only.lexical is None
    g1 = {ids[n] for n in range(12) if n % 3 == 1}
    assert {hit.item.id for hit in dense_only.query("rain in Lima", tags=["g1"], limit=10)} == g1
    assert {hit.item.id for hit in dense_only.query(tags=["g1"], limit=10)} == g1  # a listing
    station = {ids[n] for n in range(12) if n % 3 == 1 and n % 2 == 0}
    assert {hit.item.id for hit in dense_only.query("rain", tags=["g1"], source="station-0", limit=10)} == station
    future = datetime.now(UTC) + timedelta(hours=1)
    assert dense_only.query("rain", since=future) == [] and dense_only.query(since=future) == []
    dense_only.close()
