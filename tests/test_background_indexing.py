"""``store`` never waits for embedding: a thread of the memory indexes what was stored (issue 38).

What is checked, with real components (the real embedding model, embedded Chroma on real files,
real processes killed with SIGKILL), and never with a clock:

- ``store`` returns while the vector index is busy (its lock held by another thread), and while
  the indexing thread opens it; the item is readable and citable at once, and a query finds it by
  its keywords at once; by meaning once its vectors are written. A query that finds an item in
  the indexing thread's hands waits for that batch's keyword stage only, and is woken when it
  ends; a query that does an item's keyword stage itself leaves counting its tokens to the
  indexing thread.
- a query waits for the vectors of items stored before it (``query_wait_s``), and not longer;
- back pressure: ``store`` waits when the items still to index weigh more than ``max_unindexed_chars``;
- forget and rewrite take a pending item out (a forgotten item never reaches the index);
- ``close`` finishes the indexing of what was stored;
- kill -9 while the thread embeds loses nothing, and a reopened memory indexes the rest;
- two processes on one memory embed each item once (the ``Indexed`` notices of both, counted).
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.index import foreground, upkeep
from agent_memory.observers import Indexed, NoticeRecorder
from agent_memory.records.prepare import EAGER_COUNT_BYTES
from agent_memory.storage import open_backend
from kills import kill_after

FACTS = [
    "The heron nests in tall reeds beside the river.",
    "Our office wifi password rotates every Monday morning.",
    "The quarterly budget review moved to Thursday afternoon.",
    "Glaciers in the Alps have shrunk by half since 1900.",
    "Honeybees communicate food locations by dancing.",
    "The chess club meets in the basement on Tuesdays.",
]


def _warm(request: pytest.FixtureRequest, agent_id: str, config: MemoryConfig) -> tuple[AgentMemory, Any]:
    """A ``memory://`` memory of ``agent_id`` whose model has embedded once, and its backend's
    locks (holding ``"index"`` keeps the indexing thread from writing vectors)."""
    url = f"memory://{request.node.name}"
    memory = AgentMemory(agent_id, url, config=config)
    memory.store("warm the model up")
    memory.flush_index()
    return memory, open_backend(url).locks(agent_id)


def test_store_returns_while_the_index_is_busy_and_a_query_finds_the_item_by_keyword(request: pytest.FixtureRequest) -> None:
    memory, locks = _warm(request, "busy", MemoryConfig(query_wait_s=0.0))
    stored: list[str] = []
    with locks.hold("index"):  # the indexing thread cannot write vectors now
        storer = threading.Thread(target=lambda: stored.append(memory.store(FACTS[0], source="notes")))
        storer.start()
        storer.join(timeout=60)
        assert not storer.is_alive() and stored  # store did not wait for the index
        assert memory.get(stored[0]).content == FACTS[0]
        hits = memory.query("heron nests", limit=2)  # held verbatim: leads, found by its keywords
        assert hits[0].item.id == stored[0] and hits[0].similarity is None  # by keyword: no vector yet
        assert memory.index.chunk_vector(stored[0], 0) is None
    assert memory.flush_index() >= 0
    hits = memory.query("where does the wading bird build its home", limit=1)
    assert hits[0].item.id == stored[0] and hits[0].similarity is not None
    memory.close()


def chinook_rows(data_dir: Path, table: str) -> list[dict[str, Any]]:
    """Every row of a table of the real Chinook database, as JSON objects (a database result)."""
    db = sqlite3.connect(f"file:{data_dir / 'sqlite' / 'Chinook_Sqlite.sqlite'}?mode=ro", uri=True)
    try:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute(f'SELECT * FROM "{table}"')]
    finally:
        db.close()


def test_a_pending_item_found_by_its_keywords_comes_first_not_below_every_item_with_vectors(
        request: pytest.FixtureRequest, data_dir: Path) -> None:
    """bench_store's one result of 21 not found at once: the Chinook Customer table, asked for by
    the values of one of its rows (in no chunk verbatim: the row's keys stand between them), while
    its vectors are pending. The keyword index ranks it first, and it must come first: fused, an
    item without vectors used to get the keyword half of a score only, below every item that has
    vectors (here six facts that share no word with the query)."""
    memory, locks = _warm(request, "pending-first", MemoryConfig(query_wait_s=0.0))
    facts = memory.store_many({"content": fact, "source": "notes"} for fact in FACTS)
    memory.flush_index()
    rows = chinook_rows(data_dir, "Customer")
    sentence = " ".join(str(value) for value in rows[5].values() if value is not None)
    with locks.hold("index"):  # the indexing thread cannot write the table's vectors
        table = memory.store(rows, type="database_result", source="sqlite://Chinook/Customer")
        hits = memory.query(sentence, limit=3)
        assert memory.index.chunk_vector(table, 0) is None  # still pending
        assert hits[0].item.id == table and hits[0].similarity is None
        assert {hit.item.id for hit in hits[1:]} <= set(facts)
    memory.close()


def test_fusion_ranks_an_item_without_vectors_by_its_keyword_rank_and_leaves_the_others_alone() -> None:
    """An item with no vectors yet is fused as if its dense rank were its keyword rank; every
    item that has vectors keeps its score to the last bit, so their order is the same whatever is
    pending, and with nothing pending (a fully indexed memory: every benchmark) fusion is unchanged."""
    from agent_memory.index.fusion import fuse
    from agent_memory.storage.vector import ChunkHit

    def hits(*ids: str) -> dict[str, ChunkHit]:
        return {item_id: ChunkHit(item_id=item_id, chunk_index=0, body=item_id, start_char=0, score=1.0 - n / 10)
                for n, item_id in enumerate(ids)}

    dense, keyword = hits("a", "b", "c", "d"), hits("d", "pending", "c", "b")
    plain = fuse(dense, keyword, rrf_k=60, lexical_weight=0.5)
    fused = fuse(dense, keyword, rrf_k=60, lexical_weight=0.5, unembedded={"pending"})
    assert dict(fused)["pending"] == 1.0 / 62 + 0.5 / 62
    assert [pair for pair in fused if pair[0] != "pending"] == [pair for pair in plain if pair[0] != "pending"]
    assert [item_id for item_id, _ in fused].index("pending") < [item_id for item_id, _ in plain].index("pending")
    assert fuse(dense, keyword, rrf_k=60, lexical_weight=0.5, unembedded={"b"}) == plain  # found by its vectors
    assert fuse(dense, keyword, rrf_k=60, lexical_weight=0.5, unembedded=set()) == plain


def test_a_query_waiting_for_the_keyword_stage_of_the_threads_batch_is_woken_when_it_ends(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The item is in the indexing thread's batch, which waits for the ``keyword`` lock; a query
    waits for that batch's keyword stage (never for its vectors, held back by the ``index`` lock
    until the end) and is woken by it: no poll could wake it here."""
    monkeypatch.setattr(upkeep, "BACK_PRESSURE_POLL_S", 3_600.0)
    memory, locks = _warm(request, "woken", MemoryConfig(query_wait_s=0.0))
    state = memory._upkeep
    answers: list[list[Any]] = []
    querier = threading.Thread(target=lambda: answers.append(memory.query("heron nests", limit=1)))
    waiting = threading.Event()
    wait = state._changed.wait

    def seen_waiting(timeout: float | None = None) -> bool:
        if threading.current_thread() is querier:
            waiting.set()
        return wait(timeout)

    monkeypatch.setattr(state._changed, "wait", seen_waiting)
    with locks.hold("index"):
        with locks.hold("keyword"):
            item_id = memory.store(FACTS[0], source="notes")
            while True:  # the batch has taken the item (and waits for the keyword lock)
                with state._mutex:
                    if item_id in state._taken:
                        break
                waiting.wait(0.01)
            querier.start()
            assert waiting.wait(60)  # the query waits for the batch's keyword stage
        querier.join(timeout=60)
        assert not querier.is_alive() and answers[0][0].item.id == item_id
        assert memory.index.chunk_vector(item_id, 0) is None  # found by its keywords, no vector yet
    memory.close()


def test_a_querys_keyword_stage_leaves_counting_a_large_items_tokens_to_the_indexing_thread(
        request: pytest.FixtureRequest) -> None:
    """A large result is stored uncounted (``EAGER_COUNT_BYTES``); a query that puts it into the
    keyword index itself (the thread is busy with an earlier batch) does not count it: the query's
    caller never pays for that; the indexing thread does, later."""
    memory, locks = _warm(request, "counting", MemoryConfig(query_wait_s=0.0, max_embedded_chars=1_000))
    first_text, second_text = (" ".join(paragraphs(36, seed=seed)) for seed in (5, 6))
    second_text = f"{FACTS[0]} {second_text}"
    assert min(len(first_text), len(second_text)) > EAGER_COUNT_BYTES
    with locks.hold("index"):  # the batch of the first item (a whole batch's weight) cannot end
        first = memory.store(first_text, source="notes")
        second = memory.store(second_text, source="notes")  # pending behind it, in no batch
        hits = memory.query("heron nests", limit=1)  # the keyword stage of the second item runs here
        assert hits[0].item.id == second and hits[0].similarity is None
        counts = {record.id: record.metadata.tokens for record in memory.records()}
        assert counts[second] is None
    memory.flush_index()
    counts = {record.id: record.metadata.tokens for record in memory.records()}
    assert counts[first] and counts[second]  # counted by the indexing thread
    memory.close()


def test_store_does_not_wait_while_the_indexing_thread_opens_the_vector_index(request: pytest.FixtureRequest) -> None:
    """The indexing thread opens the vector index on its first batch (chromadb's first import, a
    server's connection: seconds); a store meanwhile returns at once. The backend is ``memory://``
    whose index opening is held until released."""
    real = open_backend(f"memory://{request.node.name}")
    opening, release = threading.Event(), threading.Event()

    class SlowToOpen:
        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def vector_index(self, *args: Any, **kwargs: Any) -> Any:
            opening.set()
            release.wait(120)
            return real.vector_index(*args, **kwargs)

    memory = AgentMemory("opening", backend=SlowToOpen(), config=MemoryConfig(query_wait_s=0.0))
    stored: list[str] = []
    try:
        first = memory.store(FACTS[0], source="notes")
        assert opening.wait(60)  # the indexing thread is opening the index
        storer = threading.Thread(target=lambda: stored.append(memory.store(FACTS[1], source="notes")))
        storer.start()
        storer.join(timeout=60)
        assert not storer.is_alive() and stored  # not held until the index is open
        assert memory.get(stored[0]).content == FACTS[1]
    finally:
        release.set()
    memory.flush_index()
    assert memory.index.item_ids() >= {first, *stored}
    memory.close()


def test_a_query_waits_for_the_vectors_of_what_was_stored_before_it(tmp_path: Path) -> None:
    recorder = NoticeRecorder()
    memory = AgentMemory("waits", tmp_path, observers=[recorder])
    ids = [memory.store(fact, source="notes") for fact in FACTS]
    hits = memory.query("which insects dance to show where flowers are", limit=1)  # no shared keyword
    assert hits[0].item.id == ids[4] and hits[0].similarity is not None
    indexed = [item_id for notice in recorder.notices if isinstance(notice, Indexed) for item_id in notice.item_ids]
    assert sorted(indexed) == sorted(ids)  # each embedded once
    memory.close()


def test_back_pressure_holds_store_while_too_much_waits(request: pytest.FixtureRequest) -> None:
    memory, locks = _warm(request, "pressure", MemoryConfig(max_unindexed_chars=1_000))
    done: list[str] = []

    def store_three() -> None:
        for n in range(3):
            done.append(memory.store(f"{FACTS[n]} " * 20, source="notes"))  # ~1,000 characters each

    with locks.hold("index"):
        storer = threading.Thread(target=store_three)
        storer.start()
        storer.join(timeout=3)
        assert storer.is_alive() and len(done) < 3  # waiting for the thread to catch up
    storer.join(timeout=120)
    assert not storer.is_alive() and len(done) == 3
    memory.flush_index()
    assert all(memory.index.chunk_vector(item_id, 0) is not None for item_id in done)
    memory.close()


def test_a_pending_item_forgotten_or_rewritten_is_indexed_as_it_is_now(request: pytest.FixtureRequest) -> None:
    url = f"memory://{request.node.name}"
    memory = AgentMemory("changes", url)
    memory.store("warm the model up")
    memory.flush_index()
    with open_backend(url).locks("changes").hold("index"):  # the thread has read both items, and waits
        gone = memory.store(FACTS[0], source="notes")
        changed = memory.store(FACTS[1], source="notes")
    # forget and rewrite race the thread for the lock: whichever comes first, the end is the same
    assert memory.forget(gone)
    memory.rewrite(changed, FACTS[3])
    memory.flush_index()
    assert memory.index.chunk_vector(gone, 0) is None and gone not in memory.index.item_ids()
    hits = memory.query("ice loss in European mountains", limit=1)
    assert hits[0].item.id == changed and "Glaciers" in (hits[0].chunk or "")
    assert all("wifi" not in (hit.chunk or "") for hit in memory.query("wifi password", limit=3))
    memory.close()


def test_close_finishes_indexing_what_was_stored(tmp_path: Path) -> None:
    memory = AgentMemory("closing", tmp_path)
    ids = [memory.store(fact, source="notes") for fact in FACTS]
    memory.close()
    reopened = AgentMemory("closing", tmp_path, config=MemoryConfig(index_on_store=False))
    assert reopened.index.item_ids() == set(ids)
    reopened.close()


CHILD = """
import json, sys
from agent_memory import AgentMemory
from agent_memory.observers import Indexed

class Say:
    def on_notice(self, notice):
        if isinstance(notice, Indexed):
            print(json.dumps({"indexed": list(notice.item_ids)}), flush=True)

memory = AgentMemory(sys.argv[2], sys.argv[1], observers=[Say()])
texts = json.loads(sys.argv[3])
for text in texts:
    print(json.dumps({"stored": memory.store(text, source="child")}), flush=True)
if sys.argv[4] == "query":
    for _ in range(20):
        memory.query("tides and ships", limit=3)
memory.close()
print(json.dumps({"closed": True}), flush=True)
"""


def paragraphs(n: int, seed: int) -> list[str]:
    """``n`` distinct short texts, several chunks each (so that embedding them takes a while)."""
    words = ("tide harbour ship gull lighthouse anchor rope sail storm keel mast deck wave reef cove quay "
             "pier buoy hull stern bow cabin chart compass lantern").split()
    out = []
    for k in range(n):
        sentences = [f"Log {seed}-{k}-{j}: the {words[(k * 7 + j) % 25]} met the {words[(k * 11 + 3 * j) % 25]} "
                     f"near the {words[(k + 5 * j) % 25]}." for j in range(40)]
        out.append(" ".join(sentences))
    return out


def run_child(root: Path, agent: str, texts: list[str], mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(root), agent, json.dumps(texts), mode],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def events(lines: list[str]) -> list[dict[str, Any]]:
    return [json.loads(line) for line in lines if line.startswith("{")]


def test_kill_while_embedding_loses_nothing_and_the_next_opening_indexes_the_rest(tmp_path: Path) -> None:
    texts = paragraphs(12, seed=1)
    child = run_child(tmp_path, "killed", texts, "store")
    lines = kill_after(child, 1, lambda line: '"indexed"' in line)  # killed once the thread has written vectors
    child.communicate(timeout=60)
    stored = [event["stored"] for event in events(lines) if "stored" in event]
    assert stored  # acknowledged before the kill
    memory = AgentMemory("killed", tmp_path)
    assert set(stored) <= {record.id for record in memory.records()}  # nothing acknowledged is lost
    memory.flush_index()
    assert {record.id for record in memory.records()} <= memory.index.item_ids()
    for item_id in stored:
        text = memory.get(item_id).content
        assert memory.query(text[:200], limit=1)[0].item.id == item_id
    memory.close()


def test_two_processes_on_one_memory_embed_each_item_once(tmp_path: Path) -> None:
    first = run_child(tmp_path, "shared", paragraphs(8, seed=2), "query")
    second = run_child(tmp_path, "shared", paragraphs(8, seed=3), "query")
    outputs = [process.communicate(timeout=900) for process in (first, second)]
    assert [process.returncode for process in (first, second)] == [0, 0], [err[-2000:] for _, err in outputs]
    found = [event for out, _ in outputs for event in events(out.splitlines())]
    stored = [event["stored"] for event in found if "stored" in event]
    indexed = [item_id for event in found if "indexed" in event for item_id in event["indexed"]]
    assert len(stored) == 16 and sorted(indexed) == sorted(stored)  # each item embedded once, by one process
    memory = AgentMemory("shared", tmp_path, config=MemoryConfig(index_on_store=False))
    assert memory.index.item_ids() == set(stored)
    memory.close()


def _until(condition: Any, what: str) -> None:
    """Wait until ``condition()`` holds (a state the code reaches; the minute is only a guard)."""
    done = threading.Event()
    for _ in range(6_000):
        if condition():
            return
        done.wait(0.01)
    raise AssertionError(f"never: {what}")


def test_the_indexing_thread_steps_back_while_a_foreground_stretch_runs(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store, a query or an agent's step is a foreground stretch: the indexing thread pauses at
    its next checkpoint instead of sharing the interpreter with it, and goes on once it ends."""
    monkeypatch.setattr(foreground, "MAX_STEP_BACK_S", 3_600.0)
    memory, _ = _warm(request, "yields", MemoryConfig())
    state = memory._upkeep
    with memory.foreground():
        item_id = memory.store(FACTS[0], source="notes")
        _until(lambda: state.stepping_back, "the indexing thread steps back")
        assert item_id in state._pending and item_id not in state._taken  # no batch works on it
        assert memory.index.chunk_vector(item_id, 0) is None
    assert state.wait(60) and not state.stepping_back
    assert memory.index.chunk_vector(item_id, 0) is not None
    memory.close()


def test_a_query_in_a_foreground_stretch_lets_the_thread_embed_what_it_waits_for(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A query reads its own writes: waiting for the vectors of what was stored before it, it
    steps aside, so the thread embeds them (else the wait would end at its bound, the item found
    by its keywords only: never by the dense ranking alone)."""
    monkeypatch.setattr(foreground, "MAX_STEP_BACK_S", 3_600.0)
    memory, _ = _warm(request, "aside", MemoryConfig(query_wait_s=20.0))
    with memory.foreground():
        item_id = memory.store(FACTS[0], source="notes")
        hits = memory.query("where does the wading bird build its home", limit=1, ranking="similarity")
    assert hits and hits[0].item.id == item_id and hits[0].similarity is not None
    memory.close()


def test_back_pressure_in_a_foreground_stretch_lets_the_thread_catch_up(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stores far ahead of the embedding model wait for it (back pressure) even inside one
    foreground stretch: the wait steps aside, and every store returns."""
    monkeypatch.setattr(foreground, "MAX_STEP_BACK_S", 3_600.0)
    memory, _ = _warm(request, "pressure", MemoryConfig(max_unindexed_chars=1_000))
    stored: list[str] = []
    results = [" ".join([fact] * 30) for fact in FACTS]  # each over the bound alone

    def store_all() -> None:
        with memory.foreground():
            stored.extend(memory.store(result, source="notes") for result in results)

    storer = threading.Thread(target=store_all, daemon=True)
    storer.start()
    storer.join(timeout=40)
    assert not storer.is_alive() and len(stored) == len(FACTS)
    memory.flush_index()
    assert all(memory.index.chunk_vector(item_id, 0) is not None for item_id in stored)
    memory.close()


class _HeldOpening:
    """A ``memory://`` backend whose vector index opening is held until :attr:`release` is set;
    :attr:`openers` names the threads that opened it."""

    def __init__(self, url: str) -> None:
        self.real = open_backend(url)
        self.opening, self.release = threading.Event(), threading.Event()
        self.openers: list[str] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    def vector_index(self, *args: Any, **kwargs: Any) -> Any:
        self.openers.append(threading.current_thread().name)
        self.opening.set()
        self.release.wait(120)
        return self.real.vector_index(*args, **kwargs)


def test_a_memory_agent_starts_opening_the_vector_index_before_its_first_store(request: pytest.FixtureRequest) -> None:
    """Opening the index (chromadb's import and client: hundreds of ms of Python) is begun when a
    MemoryAgent starts, in a thread of its own, not by the indexing thread once the first tool
    result is stored (where it ran beside the agent's next steps); the constructor does not wait."""
    from agent_memory import MemoryAgent, ModelLimits, OpenAIChatModel
    from agent_memory.testing import FakeLLMServer

    backend = _HeldOpening(f"memory://{request.node.name}")
    with FakeLLMServer() as server:
        model = OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)
        agent = MemoryAgent(model, backend=backend, agent_id="early",  # type: ignore[arg-type]
                            limits=ModelLimits(max_context_tokens=200_000, max_output_tokens=4_096))
        try:
            assert backend.opening.wait(60) and agent.memory.records() == []
            assert backend.openers == ["agent-memory-open-early"]
        finally:
            backend.release.set()
        item_id = agent.memory.store(FACTS[0], source="notes")
        agent.memory.flush_index()
        assert item_id in agent.memory.index.item_ids() and len(backend.openers) == 1  # opened once
        agent.close()


def test_opening_the_index_early_waits_for_a_foreground_stretch_and_close_stops_it(
        request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """``open_index_soon`` inside a foreground stretch (an agent's step) does not begin opening
    until the stretch ends; a close meanwhile ends the thread without opening anything, and a
    close while it opens waits for it and closes what it opened."""
    monkeypatch.setattr(foreground, "MAX_STEP_BACK_S", 3_600.0)
    backend = _HeldOpening(f"memory://{request.node.name}")
    memory = AgentMemory("stretch", backend=backend)  # type: ignore[arg-type]
    with memory.foreground():
        memory.open_index_soon()
        assert memory._upkeep.opening
        memory.close()  # the thread was waiting for the stretch: it ends, having opened nothing
    assert not memory._upkeep.opening and backend.openers == []

    backend = _HeldOpening(f"memory://{request.node.name}-2")
    memory = AgentMemory("closing", backend=backend)  # type: ignore[arg-type]
    memory.open_index_soon()
    assert backend.opening.wait(60)
    closer = threading.Thread(target=memory.close)
    closer.start()
    backend.release.set()
    closer.join(60)
    assert not closer.is_alive() and not memory._upkeep.opening
    assert memory._upkeep._index is None  # opened, then closed by close
    memory.open_index_soon()  # closed: nothing starts
    assert not memory._upkeep.opening and backend.openers == ["agent-memory-open-closing"]
