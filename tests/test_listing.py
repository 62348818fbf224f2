"""Listing (a query without text) is ordered and limited by the keyword index's SQLite table, and
a query at an unchanged store does not pass over every record to find unindexed ones (issue #9:
cost grows with the answer, not with the memory). Real memory, real indexes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent_memory import AgentMemory, MemoryConfig

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fill(memory: AgentMemory) -> list[str]:
    return memory.store_many([
        {"content": f"entry {n}", "title": f"entry {n}", "tags": ["even"] if n % 2 == 0 else ["odd"],
         "type": "search_results" if n % 3 == 0 else "custom", "timestamp": T0 + timedelta(minutes=n)}
        for n in range(30)
    ])


def test_listing_is_newest_first_filtered_and_limited_like_the_vector_index(tmp_path: Path) -> None:
    hybrid = AgentMemory("h", tmp_path / "a")
    dense_only = AgentMemory("d", tmp_path / "b", config=MemoryConfig(hybrid_search=False))
    ids_h, ids_d = _fill(hybrid), _fill(dense_only)
    for memory, ids in ((hybrid, ids_h), (dense_only, ids_d)):
        assert [h.item.id for h in memory.query(limit=5)] == ids[::-1][:5]
        evens = [h.item.id for h in memory.query(tags=["even"], limit=4)]
        assert evens == [ids[n] for n in (28, 26, 24, 22)]
        window = memory.query(since=T0 + timedelta(minutes=10), until=T0 + timedelta(minutes=12), limit=10)
        assert [h.item.id for h in window] == [ids[12], ids[11], ids[10]]
        typed = memory.query(type="search_results", tags=["odd"], limit=10)
        assert [h.item.id for h in typed] == [ids[n] for n in (27, 21, 15, 9, 3)]
    # forgotten items are skipped, and the listing still fills its limit
    for item_id in ids_h[::-1][:6]:
        hybrid.forget(item_id)
    assert [h.item.id for h in hybrid.query(limit=5)] == ids_h[::-1][6:11]


def test_a_query_at_an_unchanged_store_does_not_scan_the_records(tmp_path: Path) -> None:
    memory = AgentMemory("s", tmp_path)
    _fill(memory)
    memory.query(limit=3)  # indexes everything; the store is now settled
    calls = []
    records = memory._items.records

    def counting() -> list:
        calls.append(1)
        return records()

    memory._items.records = counting  # type: ignore[method-assign]
    memory.query(limit=3)
    memory.query(text="entry 7", limit=3)
    assert calls == []  # nothing changed: no pass over the records
    memory.store("entry 30", title="entry 30")
    assert memory.query(limit=1)[0].item.metadata.title == "entry 30"
