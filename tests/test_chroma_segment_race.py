"""A query that races the first write of a collection's vectors on a Chroma server gets
"Error creating hnsw segment reader: Nothing found on disk" (chroma-core/chroma#4212; seen once in
the conformance suite's server variant): the index tries again, a little later, before it reports
the index as failed. The race is the server's and cannot be produced on demand, so chromadb's
``Collection.query`` is wrapped here to answer with that error first (the one stand-in: it stands
for the server's transient answer), then to run as is on a real embedded Chroma."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import chromadb.api.models.Collection as collection_module
import pytest
from chromadb.errors import InternalError

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.errors import VectorIndexError
from agent_memory.storage.files import chroma

RACE = "Error executing plan: Internal error: Error creating hnsw segment reader: Nothing found on disk"


def _answer_with_the_race(monkeypatch: pytest.MonkeyPatch, times: int) -> list[int]:
    calls: list[int] = []
    real = collection_module.Collection.query

    def query(self: Any, *args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) <= times:
            raise InternalError(RACE)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(collection_module.Collection, "query", query)
    monkeypatch.setattr(chroma, "SEGMENT_RETRY_WAITS_S", (0.0,) * len(chroma.SEGMENT_RETRY_WAITS_S))
    return calls


def test_a_query_racing_the_first_write_is_tried_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with AgentMemory("race", tmp_path, config=MemoryConfig(hybrid_search=False)) as memory:
        item_id = memory.store("The heron stands in the shallow water of the estuary at dawn.")
        memory.flush_index()
        calls = _answer_with_the_race(monkeypatch, times=2)
        hits = memory.query("a bird standing in water")
    assert [hit.item.id for hit in hits] == [item_id] and len(calls) >= 3


def test_a_segment_that_stays_missing_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with AgentMemory("race", tmp_path, config=MemoryConfig(hybrid_search=False)) as memory:
        memory.store("The heron stands in the shallow water of the estuary at dawn.")
        memory.flush_index()
        calls = _answer_with_the_race(monkeypatch, times=10**6)
        with pytest.raises(VectorIndexError, match="Nothing found on disk"):
            memory.query("a bird standing in water")
    assert len(calls) == len(chroma.SEGMENT_RETRY_WAITS_S) + 1
