"""Filtered vector search: the unfiltered index over-fetched and filtered in Python answers the
same chunks as Chroma's filtered search, and a filter too selective for it falls back to Chroma."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from agent_memory import AgentMemory
from agent_memory.index import chroma
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
    return memory


def search(memory: AgentMemory, criteria: MemoryCriteria, n_chunks: int) -> list[tuple[str, int]]:
    hits = memory.index.search(criteria.text or "", criteria, n_chunks=n_chunks)
    return [(hit.item_id, hit.chunk_index) for hit in hits]


@pytest.mark.parametrize(
    "filters",
    [{"tags": ["g1"]}, {"tags": ["g0", "weather"]}, {"source": "station-1"}, {"type": "custom", "tags": ["g2"]}],
)
def test_post_filtered_search_equals_chromas_filtered_search(
    memory: AgentMemory, monkeypatch: pytest.MonkeyPatch, filters: dict
) -> None:
    criteria = MemoryCriteria(text="rainy morning in Lima", **filters)
    over_fetched = search(memory, criteria, n_chunks=3)  # 48 chunks > 3 * 8: the post-filter path
    monkeypatch.setattr(chroma, "POST_FILTER_FETCH", 10_000)  # forces Chroma's own filter
    by_chroma = search(memory, criteria, n_chunks=3)
    assert over_fetched == by_chroma and len(over_fetched) == 3


def test_a_filter_few_chunks_pass_falls_back_to_chromas_filter(memory: AgentMemory) -> None:
    rare = memory.query(tags=["rare"], limit=5)
    assert len(rare) == 1
    hits = search(memory, MemoryCriteria(text="weather in Accra", tags=["rare"]), n_chunks=3)
    assert [item_id for item_id, _ in hits] == [rare[0].item.id]


def test_time_filters_pass_the_same_items(memory: AgentMemory, monkeypatch: pytest.MonkeyPatch) -> None:
    now = datetime.now(UTC)
    hour = timedelta(hours=1)
    for bounds in ({"since": now - hour}, {"until": now + hour}, {"since": now + hour}):
        criteria = MemoryCriteria(text="cold noon", **bounds)
        over_fetched = search(memory, criteria, n_chunks=2)
        monkeypatch.setattr(chroma, "POST_FILTER_FETCH", 10_000)
        assert search(memory, criteria, n_chunks=2) == over_fetched
        monkeypatch.setattr(chroma, "POST_FILTER_FETCH", 8)
