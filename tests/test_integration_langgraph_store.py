"""AgentMemoryStore against the behaviour LangGraph's own store tests check for InMemoryStore:
put/get/update/delete, namespace listing with prefix, suffix, wildcards, depth and paging, search
with filters and paging; plus what agent-memory adds: ranking by Query Memory, persistence in the
backend, and use by a real LangGraph graph."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import InvalidNamespaceError  # noqa: E402

from agent_memory import AgentMemory  # noqa: E402
from agent_memory.integrations.langgraph_store import AgentMemoryStore  # noqa: E402


@pytest.fixture
def store(tmp_path: Path) -> AgentMemoryStore:
    return AgentMemoryStore(AgentMemory("assistant", tmp_path))


def _fill(store: AgentMemoryStore, namespaces: list[tuple[str, ...]]) -> None:
    for i, ns in enumerate(namespaces):
        store.put(ns, f"id_{i}", {"data": f"value_{i:02d}"})


def test_put_get_update_delete(store: AgentMemoryStore) -> None:
    store.put(("users", "u1"), "food", {"likes": "coffee"})
    first = store.get(("users", "u1"), "food")
    assert first is not None and first.value == {"likes": "coffee"} and first.namespace == ("users", "u1")
    store.put(("users", "u1"), "food", {"likes": "tea"})
    second = store.get(("users", "u1"), "food")
    assert second is not None and second.value == {"likes": "tea"}
    assert second.created_at == first.created_at and second.updated_at >= first.updated_at
    assert store.get(("users", "u2"), "food") is None
    store.delete(("users", "u1"), "food")
    assert store.get(("users", "u1"), "food") is None
    assert store.memory.records() == []  # nothing left behind
    for bad in [(), ("a", ""), ("a.b",), ("langgraph", "x")]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})


def test_list_namespaces(store: AgentMemoryStore) -> None:
    _fill(store, [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"),
                  ("b", "a", "f"), ("users", "123"), ("users", "456", "settings"), ("admin", "users", "789")])
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"),
                                                        ("a", "b", "f")]
    assert store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("a",), suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "b"), limit=2) == [("a", "b", "c"), ("a", "b", "d", "e")]
    assert store.list_namespaces(prefix=("a", "b"), offset=2) == [("a", "b", "d", "i"), ("a", "b", "f")]
    assert store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert store.list_namespaces(suffix=("*", "f")) == [("a", "b", "f"), ("a", "c", "f"), ("b", "a", "f")]
    assert store.list_namespaces(prefix=("nonexistent",)) == []
    assert store.list_namespaces(prefix=("users", "123")) == [("users", "123")]
    assert store.list_namespaces(prefix=("*", "users"), suffix=("*", "settings")) == []
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "c"), ("admin", "users"), ("b", "a"),
                                                  ("users", "123"), ("users", "456")]


def test_search_filters_pages_and_ranks(store: AgentMemoryStore) -> None:
    docs = {
        "d1": {"text": "The user drinks black coffee every morning.", "kind": "preference", "score": 3},
        "d2": {"text": "The user's flight to Lisbon leaves on Friday.", "kind": "travel", "score": 5},
        "d3": {"text": "The user is allergic to peanuts.", "kind": "health", "score": 4},
        "d4": {"text": "Prefers window seats on long flights.", "kind": "travel", "score": 1},
    }
    for key, value in docs.items():
        store.put(("users", "u1", "memories"), key, value)
    store.put(("users", "u2", "memories"), "x", {"text": "Someone else drinks coffee.", "kind": "preference"})
    everything = store.search(("users", "u1"))
    assert [item.key for item in everything] == ["d1", "d2", "d3", "d4"] and everything[0].score is None
    assert [i.key for i in store.search(("users", "u1"), filter={"kind": "travel"})] == ["d2", "d4"]
    assert [i.key for i in store.search(("users",), filter={"score": {"$gte": 4}})] == ["d2", "d3"]
    assert [i.key for i in store.search(("users", "u1"), limit=2, offset=1)] == ["d2", "d3"]
    ranked = store.search(("users", "u1"), query="what does the user drink in the morning?", limit=2)
    assert ranked[0].key == "d1" and ranked[0].score is not None
    assert all(item.namespace[:2] == ("users", "u1") for item in ranked)  # u2's coffee stays out
    flights = store.search(("users", "u1"), query="air travel plans", filter={"kind": "travel"})
    assert {item.key for item in flights} == {"d2", "d4"}


def test_the_store_persists_and_serves_a_langgraph_graph(tmp_path: Path) -> None:
    from langgraph.graph import START, StateGraph
    from langgraph.store.base import BaseStore
    from typing_extensions import TypedDict

    class State(TypedDict):
        question: str
        answer: str

    def remember(state: State, *, store: BaseStore) -> dict[str, str]:
        store.put(("users", "u1"), "drink", {"text": "black coffee"})
        return {}

    def recall(state: State, *, store: BaseStore) -> dict[str, str]:
        hits = store.search(("users", "u1"), query=state["question"], limit=1)
        return {"answer": hits[0].value["text"] if hits else "unknown"}

    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    app = graph.compile(store=AgentMemoryStore(AgentMemory("assistant", tmp_path)))
    assert app.invoke({"question": "what does the user drink?"})["answer"] == "black coffee"
    again = AgentMemoryStore(AgentMemory("assistant", tmp_path))  # another process, same memory
    assert asyncio.run(again.aget(("users", "u1"), "drink")).value == {"text": "black coffee"}  # type: ignore[union-attr]
