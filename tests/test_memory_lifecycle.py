"""AgentMemory conformance, part 2: snapshot, restore, rebuild and deferred indexing, on every
backend (the ``memory`` fixture runs each test on embedded Chroma and on a real Chroma server)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory import AgentMemory, ItemMetadata, MemoryItem, MemorySnapshot
from agent_memory.ids import new_memory_id
from memory_helpers import TOPICS, assert_same_answers, sibling



# -- snapshot and restore ------------------------------------------------------------------------

MIXED = [
    ("Notes on the Apollo 11 mission: Armstrong and Aldrin landed on the Moon in July 1969.", {"type": "custom"}),
    (b"\x00\xffbinary\x80blob", {"type": "file", "source": "upload.bin"}),
    (
        {"results": [{"title": "Moon landing", "url": "https://ex.org/moon"}], "query": "apollo"},
        {"type": "search_results"},
    ),
    (
        "<html><head><title>Saturn V</title></head><body><p>The Saturn V rocket launched Apollo missions.</p>"
        "</body></html>",
        {"type": "web_content", "media_type": "text/html", "title": "Saturn V"},
    ),
    ("Unrelated: a recipe for lentil soup with cumin.", {"type": "custom", "tags": ["food"]}),
]
SNAPSHOT_QUERIES = ["who walked on the moon", "rocket that launched Apollo", "lentil soup", "apollo search"]


@pytest.fixture
def mixed(memory: AgentMemory) -> list[str]:
    ids = [memory.store(content, **kwargs) for content, kwargs in MIXED]
    ids.append(memory.store("Apollo 12 followed in November 1969.", related_to=[ids[0]]))
    return ids


def _assert_same_memory(original: AgentMemory, copy: AgentMemory, ids: list[str]) -> None:
    assert copy.records() == original.records()
    for item_id in ids:
        a, b = original.get(item_id), copy.get(item_id)
        assert b == a
        assert type(b.content) is type(a.content)
        assert copy.retrieve(item_id) == original.retrieve(item_id)
    for question in SNAPSHOT_QUERIES:
        assert_same_answers(original.query(text=question, limit=4), copy.query(text=question, limit=4))
    assert [h.item.id for h in copy.query(limit=10)] == [h.item.id for h in original.query(limit=10)]


def test_snapshot_restores_into_a_fresh_directory(memory: AgentMemory, mixed: list[str], tmp_path: Path) -> None:
    snapshot = memory.snapshot()
    assert [item.id for item in snapshot.items] == mixed
    assert snapshot.agent_id == memory.agent_id

    copy = sibling(memory, tmp_path, "restored")
    copy.store("something the restore must replace")
    copy.restore(snapshot)

    assert copy.memory_dir != memory.memory_dir
    _assert_same_memory(memory, copy, mixed)


def test_snapshot_is_frozen(memory: AgentMemory, mixed: list[str]) -> None:
    snapshot = memory.snapshot()
    memory.store("stored after the snapshot")

    assert len(snapshot.items) == len(mixed)
    with pytest.raises(ValueError):
        snapshot.items = ()  # type: ignore[misc]


def test_snapshot_saved_to_json_and_loaded(memory: AgentMemory, mixed: list[str], tmp_path: Path) -> None:
    snapshot = memory.snapshot()
    path = snapshot.save(tmp_path / "snapshot.json")

    raw = json.loads(path.read_text(encoding="utf-8"))  # plain JSON, bytes as base64
    assert [item["id"] for item in raw["items"]] == mixed
    loaded = MemorySnapshot.load(path)
    assert loaded == snapshot
    assert loaded.items[1].content == MIXED[1][0]

    copy = sibling(memory, tmp_path, "loaded")
    copy.restore(loaded)
    _assert_same_memory(memory, copy, mixed)


def test_restore_of_a_hand_built_snapshot(memory: AgentMemory, tmp_path: Path) -> None:
    """A snapshot made by hand (for a sub-agent) carries no hashes or sizes: restore fills them in."""
    text_id, json_id, bytes_id = new_memory_id(), new_memory_id(), new_memory_id()
    snapshot = MemorySnapshot(
        agent_id="parent",
        items=(
            MemoryItem(id=text_id, content="Sub-agent brief: compare the two Apollo landing sites."),
            MemoryItem(
                id=json_id,
                content={"sites": ["Tranquility Base", "Ocean of Storms"]},
                metadata=ItemMetadata(content_encoding="json"),
            ),
            MemoryItem(id=bytes_id, content=b"\x01\x02\xff", metadata=ItemMetadata(content_encoding="bytes")),
        ),
    )

    memory.restore(snapshot)

    assert memory.get(text_id).content == snapshot.items[0].content
    assert memory.get(json_id).content == {"sites": ["Tranquility Base", "Ocean of Storms"]}
    assert memory.get(bytes_id).content == b"\x01\x02\xff"
    assert memory.get(text_id).metadata.size_bytes == len(snapshot.items[0].content.encode())
    assert memory.query(text="Apollo landing sites", limit=1)[0].item.id == text_id


# -- the index is derived data -------------------------------------------------------------------


def test_rebuild_index_answers_the_same(memory: AgentMemory, mixed: list[str]) -> None:
    before = {q: memory.query(text=q, limit=4) for q in SNAPSHOT_QUERIES}
    listed = [h.item.id for h in memory.query(limit=10)]

    assert memory.rebuild_index() == len(mixed)

    for question, hits in before.items():
        assert_same_answers(hits, memory.query(text=question, limit=4))
    assert [h.item.id for h in memory.query(limit=10)] == listed
    assert memory.flush_index() == 0


def test_deferred_indexing_still_answers_queries(memory: AgentMemory, tmp_path: Path) -> None:
    deferred = sibling(memory, tmp_path, "deferred", index_on_store=False)
    ids = {key: deferred.store(text) for key, text in TOPICS.items()}

    assert deferred.index.item_ids() == set()  # store returned before indexing
    assert deferred.query(text="who designed the iron tower in Paris", limit=1)[0].item.id == ids["eiffel"]
    assert deferred.index.item_ids() == set(ids.values())
    assert deferred.flush_index() == 0

    late = [deferred.store(f"Late note {n} about sailing boats.") for n in range(2)]
    assert deferred.flush_index() == 2
    assert deferred.index.item_ids() == set(ids.values()) | set(late)
    assert deferred.query(text="sailing", limit=1)[0].item.id in late
