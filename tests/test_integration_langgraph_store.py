"""AgentMemoryStore against the behaviour LangGraph's own store tests check for InMemoryStore:
put/get/update/delete, namespace listing with prefix, suffix, wildcards, depth and paging, search
with filters and paging; plus what agent-memory adds: ranking by Query Memory, persistence in the
backend, and use by a real LangGraph graph."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("langgraph")

from langgraph.store.base import InvalidNamespaceError, PutOp  # noqa: E402

from agent_memory import AgentMemory, InvalidArgumentError  # noqa: E402
from agent_memory.index.fusion import SCORE_TOLERANCE  # noqa: E402
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
    for bad in [(), ("a", ""), ("a.b",), ("langgraph", "x"), tuple(f"l{n}" for n in range(31))]:
        with pytest.raises(InvalidNamespaceError):
            store.put(bad, "k", {"v": 1})
    with pytest.raises(InvalidArgumentError):
        store.put(("users", "u1"), "k", {"v": object()})
    assert store.memory.records() == []


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


# -- issue 27 item 2: where the store broke the contract LangGraph users rely on -------------------

@pytest.fixture(params=["files", "postgres"])
def open_memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], AgentMemory]]:
    """Opens a new AgentMemory on one storage each call (each stands for another process), on each
    backend: a memory directory, or a real Postgres database."""
    if request.param == "files":
        def opener() -> AgentMemory:
            return AgentMemory("assistant", tmp_path / "memory")
    else:
        url = request.getfixturevalue("postgres_server").new_database()

        def opener() -> AgentMemory:
            return AgentMemory("assistant", backend=url)
    opened: list[AgentMemory] = []

    def tracked() -> AgentMemory:
        opened.append(opener())
        return opened[-1]

    yield tracked
    for memory in opened:
        memory.close()


def test_a_query_ranks_inside_the_namespace_not_the_whole_memory(open_memory: Callable[[], AgentMemory]) -> None:
    store = AgentMemoryStore(open_memory())
    store.put(("users", "u1"), "trip", {"text": "Flies to Lisbon on Friday, window seat."})
    store.put(("users", "u1"), "drink", {"text": "Black coffee, no sugar, every morning."})
    for i in range(5):  # better matches, in other namespaces (one of them a label that extends "u1")
        store.put(("users", f"u1{i}" if i == 0 else f"other{i}"), "drink",
                  {"text": f"Black coffee every morning: black coffee, cup {i}."})
    top = store.search(("users", "u1"), query="black coffee morning", limit=1)
    assert [item.key for item in top] == ["drink"] and top[0].score is not None
    both = store.search(("users", "u1"), query="black coffee morning", limit=5)
    assert [item.key for item in both] == ["drink", "trip"]
    assert all(item.namespace == ("users", "u1") and item.score is not None for item in both)
    assert [item.key for item in store.search(("users", "u1"), query="black coffee morning", offset=1)] == ["trip"]
    everywhere = store.search(("users",), query="black coffee morning", limit=10)
    assert len(everywhere) == 7 and everywhere[-1].key == "trip"


def test_a_negative_limit_or_offset_is_refused(open_memory: Callable[[], AgentMemory]) -> None:
    """Not taken as a Python slice (which counts from the end)."""
    store = AgentMemoryStore(open_memory())
    for key in ("a", "b", "c"):
        store.put(("users", "u1"), key, {"text": f"Black coffee, cup {key}."})
    for bad in [{"limit": -1}, {"offset": -1}]:
        with pytest.raises(ValueError, match="limit|offset") as raised:
            store.search(("users", "u1"), query="black coffee", **bad)  # type: ignore[arg-type]
        assert isinstance(raised.value, InvalidArgumentError)
        with pytest.raises(InvalidArgumentError):
            store.search(("users", "u1"), **bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError):
            store.list_namespaces(**bad)  # type: ignore[arg-type]
    assert store.search(("users", "u1"), query="black coffee", limit=0) == []


def test_the_score_is_the_cosine_similarity_of_the_document(open_memory: Callable[[], AgentMemory]) -> None:
    store = AgentMemoryStore(open_memory())
    text = "The lighthouse keeper lit the lamp at dusk."
    store.put(("docs", "a"), "note", {"text": text})
    store.put(("docs", "b"), "note", {"text": text})  # the same document elsewhere: a tie
    store.put(("docs", "c"), "note", {"text": "Quarterly VAT returns are due at the end of the month."})
    close = store.search(("docs",), query=text, limit=3)
    scores = {item.namespace: item.score for item in close}
    assert all(score is not None and -1.0 <= score <= 1.0 for score in scores.values())
    assert scores[("docs", "a")] > 0.8  # type: ignore[operator]
    assert abs(scores[("docs", "a")] - scores[("docs", "b")]) <= SCORE_TOLERANCE  # type: ignore[operator]
    assert scores[("docs", "c")] < 0.5  # type: ignore[operator]
    far = store.search(("docs", "a"), query="quarterly value added tax return deadline", limit=1)
    assert far[0].score is not None and far[0].score < scores[("docs", "a")]  # type: ignore[operator]


def test_a_document_put_with_index_false_is_not_ranked_by_a_query(open_memory: Callable[[], AgentMemory]) -> None:
    store = AgentMemoryStore(open_memory())
    ns = ("test",)
    store.put(ns, "doc1", {"text": "zany zebra Xerxes"})
    store.put(ns, "doc2", {"text": "something about dogs"})
    store.put(ns, "doc3", {"text": "text about birds"})
    store.put(ns, "doc4", {"text": "new text about dogs"}, index=False)
    ranked = store.search(ns, query="new text about dogs", limit=3)
    assert "doc4" not in [item.key for item in ranked] and all(item.score is not None for item in ranked)
    filled = store.search(ns, query="new text about dogs", limit=10)  # as InMemoryStore: unranked last
    assert [item.key for item in filled][-1] == "doc4" and filled[-1].score is None
    assert all(item.score is not None for item in filled[:-1]) and len(filled) == 4
    assert store.get(ns, "doc4").value == {"text": "new text about dogs"}  # type: ignore[union-attr]
    assert "doc4" in [item.key for item in store.search(ns)]
    assert "doc4" not in [item.key for item in store.search((), query="new text about dogs", limit=3)]
    store.put(ns, "doc4", {"text": "new text about dogs"})  # indexed again: now it ranks first
    assert store.search(ns, query="new text about dogs", limit=1)[0].key == "doc4"


def test_a_batch_may_put_under_the_langgraph_label(open_memory: Callable[[], AgentMemory]) -> None:
    """LangGraph reserves the root label "langgraph" in put/aput only; batches of its own use it."""
    store = AgentMemoryStore(open_memory())
    store.batch([PutOp(("langgraph", "foo"), "bar", {"v": 1})])
    assert store.get(("langgraph", "foo"), "bar").value == {"v": 1}  # type: ignore[union-attr]
    assert store.search(("langgraph", "foo"))[0].value == {"v": 1}
    asyncio.run(store.abatch([PutOp(("langgraph", "foo"), "baz", {"v": 2})]))
    assert [item.key for item in store.search(("langgraph",))] == ["bar", "baz"]
    store.delete(("langgraph", "foo"), "bar")
    assert store.get(("langgraph", "foo"), "bar") is None
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "foo"), "bar", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("langgraph", ""), "bar", {"v": 1})])


def test_one_store_sees_what_other_processes_change(open_memory: Callable[[], AgentMemory]) -> None:
    """The store keeps an index of its documents in the process; writes by others reach it."""
    store = AgentMemoryStore(open_memory())
    ns = ("users", "u1")
    store.batch([PutOp(ns, "a", {"v": 1}), PutOp(ns, "b", {"v": 2}), PutOp(ns, "c", {"v": 3})])
    assert [item.key for item in store.search(ns)] == ["a", "b", "c"]
    other_memory = open_memory()
    other = AgentMemoryStore(other_memory)
    other.put(ns, "a", {"v": 10, "text": "Prefers green tea in the afternoon."})
    other.delete(ns, "b")
    other.put(("users", "u2"), "d", {"v": 4})
    gone = next(r.id for r in other_memory.records() if r.metadata.extra.get("key") == "c")
    other_memory.forget(gone)  # by the memory's own API, not the store's
    assert store.get(ns, "a").value["v"] == 10  # type: ignore[union-attr]
    assert store.get(ns, "b") is None and store.get(ns, "c") is None
    assert store.get(("users", "u2"), "d").value == {"v": 4}  # type: ignore[union-attr]
    assert store.list_namespaces() == [("users", "u1"), ("users", "u2")]
    assert [(item.key, item.value["v"]) for item in store.search(("users",))] == [("a", 10), ("d", 4)]
    assert store.search(ns, query="green tea", limit=1)[0].value["v"] == 10
    store.put(ns, "a", {"v": 11})  # the store's own update replaces the other's version
    assert [r.metadata.extra["key"] for r in other_memory.records()] == ["d", "a"]
    assert other.get(ns, "a").value == {"v": 11}  # type: ignore[union-attr]


def test_a_crash_between_the_two_writes_of_a_put_heals_on_the_next_put(open_memory: Callable[[], AgentMemory]) -> None:
    """A put stores the new version, then forgets the old: a crash in between leaves both. The
    newer is read, and the next put of the key forgets every older one."""
    store = AgentMemoryStore(open_memory())
    ns = ("users", "u1")
    store.put(ns, "food", {"likes": "tea"})
    old = store.get(ns, "food")
    assert old is not None
    store.memory.store({"likes": "coffee"}, tags=["langgraph_store"], title="food", source="langgraph:users/u1#food",
                       extra={"namespace": list(ns), "key": "food", "created_at": old.created_at.isoformat()})
    assert store.get(ns, "food").value == {"likes": "coffee"}  # type: ignore[union-attr]
    assert [item.value for item in store.search(ns)] == [{"likes": "coffee"}]
    store.put(ns, "food", {"likes": "cocoa"})
    assert [record.metadata.extra["key"] for record in store.memory.records()] == ["food"]
    assert store.get(ns, "food").created_at == old.created_at  # type: ignore[union-attr]
    store.delete(ns, "food")
    assert store.memory.records() == [] and store.get(ns, "food") is None


def test_a_store_on_a_sub_agents_fork_reads_the_parents_documents(tmp_path: Path) -> None:
    from agent_memory.errors import IsolationError
    from agent_memory.fork import MemoryFork

    parent = AgentMemoryStore(AgentMemory("parent", tmp_path))
    parent.put(("users", "u1"), "drink", {"text": "Black coffee, no sugar, every morning."})
    parent.put(("users", "u1"), "trip", {"text": "Flies to Lisbon on Friday, window seat."})
    child = AgentMemoryStore(AgentMemory("child", tmp_path, base=MemoryFork.of(parent.memory)))
    assert child.get(("users", "u1"), "drink").value["text"].startswith("Black coffee")  # type: ignore[union-attr]
    hits = child.search(("users", "u1"), query="black coffee in the morning", limit=1)
    assert [item.key for item in hits] == ["drink"] and hits[0].score is not None and hits[0].score > 0.3
    child.put(("users", "u1"), "drink", {"text": "Green tea."})  # overrides it in the child's memory only
    assert child.get(("users", "u1"), "drink").value == {"text": "Green tea."}  # type: ignore[union-attr]
    assert parent.get(("users", "u1"), "drink").value["text"].startswith("Black coffee")  # type: ignore[union-attr]
    with pytest.raises(IsolationError):
        child.delete(("users", "u1"), "trip")
    assert child.get(("users", "u1"), "trip") is not None
    child.put(("users", "u1"), "note", {"text": "Own note."})
    child.delete(("users", "u1"), "note")
    assert [item.key for item in child.search(("users", "u1"))] == ["trip", "drink"]


def test_memory_changes_hands_out_what_changed_since_a_token(open_memory: Callable[[], AgentMemory]) -> None:
    """``AgentMemory.changes``, which keeps the store's index in step: everything first, then only
    what any process stored or forgot since."""
    memory, other = open_memory(), open_memory()
    zero = memory.store("zero")
    first = memory.changes()
    assert first.reset and [r.id for r in first.records] == [zero]
    a = memory.store("alpha")
    b = other.store("beta")
    step = memory.changes(first.token)
    assert not step.reset and [r.id for r in step.records] == [a, b] and step.deleted == ()
    assert memory.changes(step.token).records == []  # nothing since
    other.forget(a)
    c = memory.store("gamma")
    last = memory.changes(step.token)
    assert a in last.deleted and [r.id for r in last.records] == [c]
    again = memory.changes()  # from scratch: the whole memory as it is
    assert again.reset and [r.id for r in again.records] == [zero, b, c]
    with pytest.raises(InvalidArgumentError):
        memory.changes(42)  # type: ignore[arg-type]


# -- issue 37 item 10: results come in the order of the score they carry ----------------------------

SCORED_DOCS = {
    "doc1": "zany zebra Xerxes", "doc2": "something about dogs", "doc3": "text about birds",
    "invoice": "Invoice INV-4471 for the plumbing repair.", "bill": "The consulting bill was settled in spring.",
    "coffee": "Black coffee, no sugar, every morning.", "cafe": "The cafe on the corner sells pastries.",
}


def test_search_results_come_in_the_order_of_their_score_on_every_page(open_memory: Callable[[], AgentMemory]) -> None:
    """LangGraph's stores sort hits by score (InMemoryStore max-pools a document's vectors and
    sorts; PostgresStore orders by distance), so paging by score works: every page scores at most
    what the page before it did, and the pages are slices of one ranking. A query with words of
    a less similar document ("coffee") once put it first, above a closer one ("cafe")."""
    store = AgentMemoryStore(open_memory())
    for key, text in SCORED_DOCS.items():
        store.put(("test",), key, {"text": text})
    for query in ["coffee shop", "pastries", "when was the consulting bill INV-4471 settled"]:
        whole = store.search(("test",), query=query, limit=len(SCORED_DOCS))
        scores = [item.score for item in whole]
        assert None not in scores and scores == sorted(scores, reverse=True), (query, scores)  # type: ignore[type-var]
        pages = [store.search(("test",), query=query, limit=2, offset=offset) for offset in range(0, 8, 2)]
        assert [item.key for page in pages for item in page] == [item.key for item in whole], query
        for page, after in zip(pages, pages[1:], strict=False):
            if after:
                assert min(i.score for i in page) >= max(i.score for i in after), query  # type: ignore[type-var]
    assert [item.key for item in store.search(("test",), query="coffee shop", limit=2)] == ["cafe", "coffee"]


def test_a_score_reads_the_same_in_every_search(open_memory: Callable[[], AgentMemory]) -> None:
    """LangGraph's own test of an update (test_vector_update_with_embedding, rewritten): scores of
    one document compare across queries, as a cosine does (a fused rank score would not)."""
    store = AgentMemoryStore(open_memory())
    store.put(("test",), "doc1", {"text": "zany zebra Xerxes"})
    store.put(("test",), "doc2", {"text": "something about dogs"})
    store.put(("test",), "doc3", {"text": "text about birds"})
    initial = store.search(("test",), query="Zany Xerxes")
    assert initial[0].key == "doc1" and initial[0].score is not None
    store.put(("test",), "doc1", {"text": "new text about dogs"})
    after = next(item.score for item in store.search(("test",), query="Zany Xerxes") if item.key == "doc1")
    assert after is not None and after < initial[0].score
    renewed = next(item.score for item in store.search(("test",), query="new text about dogs") if item.key == "doc1")
    assert renewed is not None and renewed > after and renewed > 0.8
    # The same document's score in a wider prefix is the same number: it does not depend on the rest.
    wide = next(item.score for item in store.search((), query="new text about dogs") if item.key == "doc1")
    assert abs(wide - renewed) <= SCORE_TOLERANCE  # type: ignore[operator]
