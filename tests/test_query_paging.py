"""query_memory pages: a model (or an MCP client) can walk past the first 20 hits, a page at a
time, and never gets a whole memory in one answer. Real memory, real embedded index."""

from __future__ import annotations

from pathlib import Path

from actions import MemoryToolkit
from actions.query import MAX_QUERY_PAGES
from agent_memory import AgentMemory, MemoryConfig


def test_listing_pages_walk_the_memory_without_repeats(tmp_path: Path) -> None:
    memory = AgentMemory("pages", tmp_path, config=MemoryConfig(hybrid_search=False))
    ids = memory.store_many([{"content": f"note number {n} about herons", "title": f"note {n}"} for n in range(25)])
    toolkit = MemoryToolkit(memory)
    first = toolkit.dispatch("query_memory", {"limit": 10})
    second = toolkit.dispatch("query_memory", {"limit": 10, "page": 2})
    third = toolkit.dispatch("query_memory", {"limit": 10, "page": 3})
    seen = [hit["id"] for result in (first, second, third) for hit in result.data["hits"]]
    assert len(seen) == 25 and set(seen) == set(ids)
    assert 'query_memory(limit=10, page=2)' in first.content and "11. " in second.content
    assert "More hits" not in third.content  # the last page is short
    past = toolkit.dispatch("query_memory", {"limit": 10, "page": 4})
    assert past.ok and "past the last one (25 hits in all)" in past.content
    too_far = toolkit.dispatch("query_memory", {"page": MAX_QUERY_PAGES + 1})
    assert not too_far.ok and too_far.error == "invalid_arguments"
