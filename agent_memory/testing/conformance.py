"""The conformance suite of storage backends: what every backend must do, as pytest tests.

A backend conforms when every test here passes on it. Both built-in backends run it (the file
backend and Postgres, ``tests/test_backend_conformance.py``); a third party runs it on their own::

    # test_my_backend.py
    import pytest
    from agent_memory.testing.conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def new_backend(self, tmp_path):
            return f"mybackend://{tmp_path}/store"   # a new, empty backend, by its URL

Run it with ``pytest test_my_backend.py``. The ``new_backend`` fixture gives each test a new, empty backend,
as :func:`~agent_memory.storage.open_backend` takes it: a memory directory, a URL (a database URL
with its password: the tests that run other processes hand it to them), or a
:class:`~agent_memory.storage.contracts.Backend` object. Give a URL: every test then runs, the
backend of this process opened by the URL and each other process opening the same URL. A URL
whose scheme is a third party's (``mybackend://``) needs the scheme registered as an entry point of
the group ``agent_memory.backends`` (:mod:`agent_memory.storage.schemes`) where the other processes
see it too: they run the current Python with this process's environment (installed packages, and
``PYTHONPATH`` for a package that is not installed). A ``Backend`` object cannot be handed to another
process, so the nine tests that need one (a lock dying with its process, processes writing items,
pushing events, appending and archiving traces or updating one document at once, a ``kill -9``
mid-write, mid-forget and mid-push, a memory seen from another process) are skipped, each with a
reason that says so (``pytest -rs`` lists them); so are they for a backend that is not ``durable``
(``memory://``). The tests load the real embedding
model (all-MiniLM-L6-v2 from its local package) and need nothing else.

What is checked, by group: the parts of the contract with a default (``describe``, ``read_only``,
``keyword_index``, ``local_dir``, ``durable``, ``closed``), the item log (incremental reads, tokens,
optimistic concurrency, blobs), documents, locks (exclusion, timeouts, holders, death with the holder), the event journal,
traces, the vector index (it keeps the vectors the library gives it and ranks chunks by their
cosine to a query vector: a backend never embeds), and AgentMemory on the backend (round trips,
search, filters, listing, paging, forget, rewrite, clear, snapshot and restore, forks without
re-embedding, agent scopes, claims), then concurrency (threads; processes writing items, events,
traces and a document at once) and crashes (``kill -9`` mid-write, mid-forget or mid-push loses
nothing acknowledged and leaves no lock held).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.errors import (
    ConflictError,
    IsolationError,
    ItemNotFoundError,
    LockTimeoutError,
    MemoryClosedError,
    OutsideSnapshotError,
    StoreError,
)
from agent_memory.fork import MemoryFork
from agent_memory.memory import AgentMemory
from agent_memory.config import MemoryConfig
from agent_memory.models.items import MemoryCriteria
from agent_memory.models.traces import EpisodicItem, RawTraceItem, SemanticItem
from agent_memory.storage import open_backend
from agent_memory.storage.contracts import Backend, LogChange, LogEntry, LogRead
from agent_memory.storage.contracts import sha256_hex
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage import common

__all__ = ["BackendConformance", "cross_process_url"]

FAST = MemoryConfig(index_on_store=False)
"""A memory that does not embed on store (the tests that do not search)."""

TEXTS = {
    "danube": "The Danube flows through ten countries, more than any other river in the world.",
    "kernel": "The Linux kernel scheduler picks the task with the smallest virtual runtime.",
    "bread": "Sourdough bread rises through wild yeast and lactic acid bacteria fed every day.",
    "violin": "Antonio Stradivari built violins in Cremona; about 650 of his instruments survive.",
}

VECTOR_DIMENSIONS = 384
"""Length of the vectors the suite hands a vector index: the default model's (all-MiniLM-L6-v2)."""

PROCESS_TIMEOUT_S = 120.0
"""Longest a subprocess of the suite may run, in seconds."""


def _record(item_id: str, text: str) -> bytes:
    return json.dumps({"id": item_id, "text": text}).encode()


def _applied(held: dict[str, bytes], found: LogRead) -> dict[str, bytes]:
    """``held`` with ``found`` applied as :class:`~agent_memory.storage.contracts.LogRead` says a
    reader applies a read."""
    state = {} if found.reset else dict(held)
    for item_id in found.deleted:
        state.pop(item_id, None)
    for item_id, data in found.records:
        state[item_id] = data
    return state


def cross_process_url(backend: Any) -> str:
    """The URL or path another process of a test opens ``backend`` by: ``backend`` itself when it is a
    string or a path-like (a URL keeps its password).

    Raises:
        pytest.skip.Exception: (the test is skipped) when ``backend`` is an object, with a reason
            naming its type, its ``url`` and the remedy: another process cannot be handed an object.
    """
    if isinstance(backend, str | os.PathLike):
        return os.fspath(backend)
    shown = backend.url if isinstance(backend, Backend) else None
    pytest.skip(f"cross-process test: the new_backend fixture gave a {type(backend).__name__} object "
                f"(url {shown!r}), which another process cannot open; return its URL or path from "
                "`new_backend` instead (a third party's scheme registered in the entry-point group "
                "agent_memory.backends) to run it")


def _run_children(script: str, count: int) -> list[str]:
    """Run ``script`` in ``count`` processes at once (``python -c script <n>``, n from 0) and
    return what each printed, in that order; a process that fails fails the test with its stderr."""
    children = [subprocess.Popen([sys.executable, "-c", script, str(n)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=_child_env()) for n in range(count)]
    outputs: list[str] = []
    for child in children:
        out, err = child.communicate(timeout=PROCESS_TIMEOUT_S)
        assert child.returncode == 0, err
        outputs.append(out)
    return outputs


def _acknowledged_until_killed(script: str, count: int) -> list[str]:
    """Run ``script`` (which prints one id per acknowledged write, forever), ``kill -9`` it once it
    printed ``count`` lines, and return every line it printed (the test fails with its stderr if it
    printed fewer)."""
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=_child_env())
    acknowledged: list[str] = []
    assert child.stdout is not None
    while len(acknowledged) < count:
        line = child.stdout.readline()
        if not line:
            break
        acknowledged.append(line.strip())
    os.kill(child.pid, signal.SIGKILL)
    rest, err = child.communicate(timeout=PROCESS_TIMEOUT_S)
    acknowledged += rest.split()
    assert len(acknowledged) >= count, err
    return acknowledged


def _child_env() -> dict[str, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("AGENT_MEMORY_URL", None)
    return env


class BackendConformance:
    """The suite; subclass it with a ``new_backend`` fixture (see the module docstring)."""

    # -- fixtures ---------------------------------------------------------------------------------
    @pytest.fixture
    def new_backend(self) -> Any:
        """A new, empty backend for each test: override in the subclass."""
        raise NotImplementedError("give your conformance class a `new_backend` fixture")

    @pytest.fixture
    def backend(self, new_backend: Any) -> Iterator[Backend]:
        yield open_backend(new_backend)

    @pytest.fixture
    def url(self, new_backend: Any, backend: Backend) -> str:
        """What another process opens the backend by: its URL or path (skips the test, with
        the reason, when the fixture gave an object, see :func:`cross_process_url`, or a backend
        that keeps its data in this process, not ``durable``)."""
        if not backend.durable:
            pytest.skip(f"cross-process test: {backend.url} keeps its data in this process (durable = False); "
                        "another process opening the URL sees none of it")
        return cross_process_url(new_backend)

    def memory(self, backend: Backend, agent_id: str = "agent", **kwargs: Any) -> AgentMemory:
        return AgentMemory(agent_id, backend=backend, **kwargs)

    # -- the contract's parts with a default -------------------------------------------------------
    def test_backend_answers_every_part_of_its_contract(self, backend: Backend) -> None:
        """What the library asks a backend besides its logs, locks and vectors, each of a new
        backend opened to write (``BackendDefaults`` answers them for a backend that leaves them)."""
        assert isinstance(backend, Backend)
        where = backend.describe("agent")
        assert isinstance(where, str) and where
        assert backend.read_only("agent") is False
        assert isinstance(backend.durable, bool) and backend.closed is False
        local = backend.local_dir("agent")
        assert local is None or isinstance(local, Path)
        keyword = backend.keyword_index("agent", FAST)
        assert keyword is None or isinstance(keyword, KeywordIndex)

    def test_a_closed_memory_says_so_naming_where_it_is(self, backend: Backend) -> None:
        memory = self.memory(backend, config=FAST)
        memory.store("kept")
        memory.close()
        with pytest.raises(MemoryClosedError, match="is closed; open a new one on") as raised:
            memory.get("mem_000000000000")
        assert common.describe(backend, "agent") in str(raised.value)

    # -- the item log -----------------------------------------------------------------------------
    def test_item_log_reads_additions_incrementally(self, backend: Backend) -> None:
        log = backend.log("log", "items")
        first = log.read()
        assert first.records == [] and first.reset
        log.write(LogChange(put=[LogEntry("mem_000000000001", _record("mem_000000000001", "a"), b"A"),
                                 LogEntry("mem_000000000002", _record("mem_000000000002", "b"), b"B")]))
        whole = log.read()
        assert [item_id for item_id, _ in whole.records] == ["mem_000000000001", "mem_000000000002"] and whole.reset
        assert json.loads(whole.records[1][1]) == {"id": "mem_000000000002", "text": "b"}
        assert log.read(whole.token).records == [] and not log.read(whole.token).reset  # nothing new
        log.write(LogChange(put=[LogEntry("mem_000000000003", _record("mem_000000000003", "c"), b"C")]))
        added = log.read(whole.token)
        assert not added.reset and [item_id for item_id, _ in added.records] == ["mem_000000000003"]
        assert added.token != whole.token

    def test_item_log_replaces_in_place_and_deletes(self, backend: Backend) -> None:
        log = backend.log("log", "items")
        ids = [f"mem_00000000000{n}" for n in range(1, 4)]
        log.write(LogChange(put=[LogEntry(i, _record(i, "old"), i.encode()) for i in ids]))
        token = log.read().token
        log.write(LogChange(put=[LogEntry(ids[0], _record(ids[0], "new"), b"new blob")]))
        after = log.read(token)
        assert not after.reset and list(after.deleted) == []  # a replacement is read incrementally
        assert [(item_id, json.loads(data)["text"]) for item_id, data in after.records] == [(ids[0], "new")]
        whole = log.read()
        assert [item_id for item_id, _ in whole.records] == ids  # the replaced record kept its place
        assert json.loads(whole.records[0][1])["text"] == "new"
        log.write(LogChange(delete=[ids[1], "mem_00000000dead"]))
        assert [item_id for item_id, _ in log.read().records] == [ids[0], ids[2]]
        log.write(LogChange(put=[LogEntry(ids[2], _record(ids[2], "only"), None)], replace_all=True))
        assert [item_id for item_id, _ in log.read().records] == [ids[2]]

    def test_item_log_reads_deletes_incrementally(self, backend: Backend) -> None:
        log = backend.log("log", "items")
        ids = [f"mem_00000000000{n}" for n in range(1, 5)]
        log.write(LogChange(put=[LogEntry(i, _record(i, "a"), i.encode()) for i in ids]))
        first = log.read()
        log.write(LogChange(delete=[ids[1]]))
        after = log.read(first.token)  # a delete is an appended change, not a new log
        assert not after.reset and after.records == [] and list(after.deleted) == [ids[1]]
        nothing = log.read(after.token)
        assert after.token != first.token and (nothing.records, list(nothing.deleted), nothing.reset) == ([], [], False)
        log.write(LogChange(delete=[ids[0], ids[3]]))
        log.write(LogChange(put=[LogEntry(ids[0], _record(ids[0], "again"), None)]))  # deleted, then put again
        later = log.read(after.token)
        assert not later.reset and sorted(later.deleted) == [ids[0], ids[3]]
        assert [(item_id, json.loads(data)["text"]) for item_id, data in later.records] == [(ids[0], "again")]
        held = _applied(_applied(_applied({}, first), after), later)
        reopened = backend.log("log", "items").read()  # another reader, from scratch
        assert reopened.reset and [item_id for item_id, _ in reopened.records] == [ids[2], ids[0]]
        assert list(_applied({}, reopened)) == list(held) == [ids[2], ids[0]]

    def test_item_log_compaction_keeps_order_and_every_reader_in_step(self, backend: Backend) -> None:
        # enough deletes and replacements to make a backend compact (the file log once dead lines
        # are half the file, Postgres once deletions outnumber records): every reader, whether it
        # followed each change or holds a token from before them all, ends with the same records
        # in the same order as a model of the log.
        log = backend.log("log", "items")
        ids = [f"mem_{n:012x}" for n in range(1, 1601)]
        model: dict[str, bytes] = {}
        follower: dict[str, bytes] = {}
        first = log.read()
        token = first.token
        stale = first.token

        def change(done: LogChange) -> None:
            nonlocal token, follower
            log.write(done)
            for item_id in done.delete:
                model.pop(item_id, None)
            for entry in done.put:
                model[entry.id] = entry.record
            found = log.read(token)
            follower = _applied({} if found.reset else follower, found)
            token = found.token
            assert list(follower.items()) == list(model.items())

        change(LogChange(put=[LogEntry(i, _record(i, "v1"), None) for i in ids]))
        for start in range(0, 1200, 100):  # 1,200 deletes, 100 at a time, every fourth one replaced first
            batch = ids[start:start + 100]
            change(LogChange(put=[LogEntry(i, _record(i, "v2"), None) for i in batch[::4]]))
            change(LogChange(delete=batch[1::4] + batch[2::4] + batch[3::4]))
        change(LogChange(delete=ids[0:1200:4]))
        change(LogChange(put=[LogEntry(ids[5], _record(ids[5], "back"), None)]))  # deleted, put again: last
        whole = log.read()
        assert [(i, d) for i, d in whole.records] == list(model.items())
        assert [i for i, _ in whole.records] == ids[1200:] + [ids[5]]
        late = log.read(stale)
        assert list(_applied({}, late).items()) == list(model.items())
        assert [i for i, _ in backend.log("log", "items").read().records] == ids[1200:] + [ids[5]]

    def test_item_log_refuses_a_write_after_another_one(self, backend: Backend) -> None:
        log = backend.log("log", "items")
        log.write(LogChange(put=[LogEntry("mem_000000000001", _record("mem_000000000001", "a"), b"A")]))
        seen = log.read().token
        log.write(LogChange(put=[LogEntry("mem_000000000002", _record("mem_000000000002", "b"), b"B")]))
        with pytest.raises(ConflictError):
            log.write(LogChange(delete=["mem_000000000001"]), expect=seen)
        assert [item_id for item_id, _ in log.read().records] == ["mem_000000000001", "mem_000000000002"]
        now = log.read().token
        log.write(LogChange(delete=["mem_000000000001"]), expect=now)  # with the fresh token it is made
        assert [item_id for item_id, _ in log.read().records] == ["mem_000000000002"]

    def test_item_log_keeps_blobs_by_digest_until_released(self, backend: Backend) -> None:
        log = backend.log("log", "items")
        data = bytes(range(256)) * 3
        digest = sha256_hex(data)
        log.write(LogChange(put=[LogEntry("mem_000000000001", _record("mem_000000000001", digest), data)]))
        assert log.blob(digest) == data
        log.write(LogChange(delete=["mem_000000000001"], release=[digest]))
        with pytest.raises(StoreError):
            log.blob(digest)
        with pytest.raises(StoreError):
            log.blob(sha256_hex(b"never stored"))

    def test_agents_do_not_see_each_others_items(self, backend: Backend) -> None:
        backend.log("one", "items").write(LogChange(put=[LogEntry("mem_000000000001", _record("mem_000000000001", "x"), b"x")]))
        assert backend.log("two", "items").read().records == []
        with pytest.raises(StoreError):
            backend.log("two", "items").blob(sha256_hex(b"x"))

    # -- documents and locks ------------------------------------------------------------------------
    def test_documents_are_replaced_whole_and_refuse_stale_writes(self, backend: Backend) -> None:
        slot = common.document(backend, "agent", "working_context")
        data, absent = slot.get()
        assert data is None and slot.token() == absent
        first = slot.put(b'{"v": 1}', expect=absent)
        assert slot.get() == (b'{"v": 1}', first) and slot.token() == first
        with pytest.raises(ConflictError):
            slot.put(b'{"v": 2}', expect=absent)  # it exists now
        second = slot.put(b'{"v": 2}', expect=first)
        with pytest.raises(ConflictError):
            slot.put(b'{"v": 3}', expect=first)
        assert slot.get() == (b'{"v": 2}', second)
        assert common.document(backend, "other", "working_context").get()[0] is None

    def test_a_lock_excludes_threads_waits_and_names_its_holder(self, backend: Backend) -> None:
        locks = backend.locks("agent")
        assert locks.probe("kernel") is None
        entered = threading.Event()
        release = threading.Event()

        def holder() -> None:
            with locks.hold("kernel", timeout_s=5, note="step_abc"):
                entered.set()
                release.wait(10)

        thread = threading.Thread(target=holder)
        thread.start()
        assert entered.wait(10)
        found = locks.probe("kernel")
        assert found is not None and found.note == "step_abc" and found.pid == os.getpid()
        with pytest.raises(LockTimeoutError):
            with backend.locks("agent").hold("kernel", timeout_s=0.3):  # another object of the same backend
                pass
        with backend.locks("agent").hold("index", timeout_s=1):  # another name is another lock
            pass
        release.set()
        thread.join(10)
        assert locks.probe("kernel") is None
        with locks.hold("kernel", timeout_s=1):
            pass

    def test_a_hold_may_end_in_another_thread(self, backend: Backend) -> None:
        from contextlib import ExitStack

        locks = backend.locks("agent")
        stack = ExitStack()
        stack.enter_context(locks.hold("step", timeout_s=1))
        closer = threading.Thread(target=stack.close)
        closer.start()
        closer.join(10)
        with locks.hold("step", timeout_s=1):
            pass

    def test_a_lock_dies_with_its_process(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            import sys, time
            from agent_memory.storage import open_backend
            locks = open_backend({url!r}).locks("agent")
            with locks.hold("kernel", timeout_s=30, note="child"):
                print("held", flush=True)
                time.sleep(120)
            """)
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True, env=_child_env())
        try:
            line = child.stdout.readline() if child.stdout else ""
            assert line.strip() == "held", child.stderr.read() if child.stderr and child.poll() is not None else line
            found = backend.locks("agent").probe("kernel")
            assert found is not None and found.note == "child" and found.pid == child.pid
            with pytest.raises(LockTimeoutError):
                with backend.locks("agent").hold("kernel", timeout_s=0.3):
                    pass
        finally:
            child.kill()
            child.communicate(timeout=PROCESS_TIMEOUT_S)
        deadline = time.monotonic() + 10
        while backend.locks("agent").probe("kernel") is not None and time.monotonic() < deadline:
            time.sleep(0.05)  # the server notices the closed connection
        with backend.locks("agent").hold("kernel", timeout_s=5):
            pass

    # -- the event journal --------------------------------------------------------------------------
    def test_the_journal_numbers_applies_and_prunes_events(self, backend: Backend) -> None:
        journal = common.journal(backend, "agent")
        when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
        first = journal.push("user_message", {"content": "hi", "raw": b"\x00\xff", "at": when, "$bytes": "kept"})
        second = journal.push("tool_result", {"tool_call_id": "c1", "result": [1, 2]})
        assert (first.seq, second.seq) == (first.seq, first.seq + 1) and first.status == "queued"
        assert journal.get(first.id).payload == {"content": "hi", "raw": b"\x00\xff", "at": when, "$bytes": "kept"}
        assert journal.next_open() == journal.get(first.id) and journal.open_count() == 2
        assert journal.peek_open() == (first.id, "queued")  # the head without its payload
        journal.mark_applying(first.id)
        assert journal.next_open().status == "applying"  # type: ignore[union-attr]
        assert journal.peek_open() == (first.id, "applying")
        done = journal.mark_applied(first.id, {"turn_id": "turn_0001"}, applied_by="m1")
        assert done.status == "applied" and done.result == {"turn_id": "turn_0001"}
        assert journal.last_closed() == (first.seq, "m1")
        assert journal.mark_failed(second.id, "InvalidArgumentError: no such call").status == "failed"
        assert journal.next_open() is None and journal.peek_open() is None
        assert journal.pending() == [] and journal.count() == 2
        third = journal.push("usage_report", {"prompt_tokens": 10})
        assert third.seq > second.seq and journal.count(status="open") == 1
        assert journal.prune(keep=1) == 1 and [e.id for e in journal.events()] == [second.id, third.id]
        with pytest.raises(ItemNotFoundError):
            journal.get(first.id)
        assert journal.push("usage_report", {}).seq > third.seq  # numbers are never reused
        assert common.journal(backend, "other").count() == 0

    # -- traces ---------------------------------------------------------------------------------------
    def test_traces_append_archive_and_stay_idempotent(self, backend: Backend) -> None:
        traces = common.traces(backend, "agent")
        items = [RawTraceItem(turn_id=f"turn_000{turn}", seq=seq, trace_type="user" if seq == 1 else "assistant",
                              content=f"{turn}.{seq}", source_event="test") for turn in (1, 2) for seq in (1, 2)]
        traces.add_raw(items)
        traces.add_raw(items[:1])  # a retry writes nothing
        assert [t.content for t in traces.list_raw()] == ["1.1", "1.2", "2.1", "2.2"]
        assert traces.archive_turns(["turn_0001"]) == 2
        assert traces.active_turn_ids() == ["turn_0002"] and [t.content for t in traces.read_archive()] == ["1.1", "1.2"]
        episode = traces.add_episodic(EpisodicItem(turn_ids=("turn_0001",), summary="greeted"))
        assert traces.add_episodic(EpisodicItem(turn_ids=("turn_0001",), summary="greeted")).id == episode.id
        facts = traces.add_semantic([SemanticItem(fact="The user likes tea."), SemanticItem(fact="the user likes tea.")])
        assert len(traces.list_semantic()) == 1 and len(traces.list_episodic()) == 1
        traces.set_pinned(facts[0].id, True)
        assert [f.pinned for f in common.traces(backend, "agent").list_semantic()] == [True]  # another object reads it
        assert common.traces(backend, "other").list_raw() == []

    # -- the vector index: vectors in, the nearest chunks by cosine out ------------------------------
    def test_the_vector_index_keeps_the_vectors_it_is_given(self, backend: Backend) -> None:
        """The library embeds and hands the index vectors: the index must keep exactly those
        (float32) and rank chunks by their cosine to the query vector it is given. The vectors
        here are made up (no text embeds to them), so an index that embedded the text itself
        would fail."""
        with HEAVY_IMPORTS:
            import numpy as np

        from agent_memory.storage.vector import IndexChunk, ItemFilter
        from agent_memory.tokens import default_token_counter

        def chunk(item: str, n: int, tags: tuple[str, ...] = ()) -> IndexChunk:
            text = f"header\nbody {item} {n}"
            return IndexChunk(item_id=item, chunk_index=n, text=text, header_chars=7, start_char=10 * n,
                              type="custom", source="conformance", timestamp_s=1_000.0 + n, tags=tags)

        def unit(*weights: tuple[int, float]) -> list[float]:
            vector = np.zeros(VECTOR_DIMENSIONS, dtype=np.float32)
            for axis, weight in weights:
                vector[axis] = weight
            return (vector / np.linalg.norm(vector)).tolist()

        index = backend.vector_index("vectors", MemoryConfig(), default_token_counter())
        try:
            chunks = [chunk("mem_a", 0), chunk("mem_a", 1), chunk("mem_b", 0, ("blue",))]
            vectors = np.asarray([unit((0, 1.0)), unit((1, 1.0)), unit((0, 0.6), (2, 0.8))], dtype=np.float32)
            index.add(chunks, vectors)
            stored = index.chunk_vector("mem_b", 0)
            assert stored is not None and np.allclose(stored, vectors[2], atol=1e-6)
            assert index.chunk_vector("mem_b", 1) is None
            hits = index.search(unit((0, 1.0)), MemoryCriteria(), n_chunks=3)
            assert [(h.item_id, h.chunk_index) for h in hits] == [("mem_a", 0), ("mem_b", 0), ("mem_a", 1)]
            assert [h.score for h in hits] == pytest.approx([1.0, 0.6, 0.0], abs=1e-5)
            assert hits[0].body == "body mem_a 0" and hits[1].start_char == 0
            index.add([chunk("mem_a", 1)], np.asarray([unit((0, 0.8), (1, 0.6))], dtype=np.float32))  # replaces
            hits = index.search(unit((0, 1.0)), MemoryCriteria(), n_chunks=2)
            assert [(h.item_id, h.chunk_index) for h in hits] == [("mem_a", 0), ("mem_a", 1)]
            passing = ItemFilter(chunks=lambda ids: {i for i in ids if i.startswith("mem_b:")}, items=lambda: {"mem_b"})
            tagged = index.search(unit((0, 1.0)), MemoryCriteria(tags=("blue",)), n_chunks=3, passing=passing)
            assert [(h.item_id, h.chunk_index) for h in tagged] == [("mem_b", 0)]
            assert index.item_ids() == {"mem_a", "mem_b"}
            held_items = getattr(index, "held_items", None)  # optional (storage.vector.HeldItems)
            if callable(held_items):
                assert held_items(["mem_c", "mem_b", "mem_a"]) == {"mem_a", "mem_b"} and held_items([]) == set()
            index.delete_items(["mem_a"])
            assert [h.item_id for h in index.search(unit((1, 1.0)), MemoryCriteria(), n_chunks=3)] == ["mem_b"]
        finally:
            close = getattr(index, "close", None)
            if callable(close):
                close()

    # -- AgentMemory on the backend -------------------------------------------------------------------
    @pytest.mark.parametrize("content", [
        "naïve café – Zürich 東京 🚀\nsecond line\r\n", bytes(range(256)), {"b": 1, "a": [1, 2.5, None, True]},
        [{"id": i, "name": f"row {i}"} for i in range(30)],
    ], ids=["text", "bytes", "json", "rows"])
    def test_content_round_trips_exactly(self, backend: Backend, content: Any) -> None:
        memory = self.memory(backend, config=FAST)
        item_id = memory.store(content, source="conformance")
        for reader in (memory, self.memory(backend, config=FAST)):
            item = reader.get(item_id)
            assert item.content == content and type(item.content) is type(content)
        assert memory.get(item_id).metadata.content_sha256 == memory.records()[0].metadata.content_sha256

    def test_search_finds_by_meaning_and_by_keyword_with_filters(self, backend: Backend) -> None:
        memory = self.memory(backend)
        ids = {key: memory.store(text, tags=[key, "fact"], type="custom" if key != "bread" else "file",
                                 source=f"src-{key}") for key, text in TEXTS.items()}
        assert memory.query(text="which river crosses many countries", limit=1)[0].item.id == ids["danube"]
        assert memory.query(text="Stradivari", limit=1)[0].item.id == ids["violin"]  # one exact word
        assert [h.item.id for h in memory.query(text="yeast", type="file", limit=3)] == [ids["bread"]]
        assert [h.item.id for h in memory.query(text="a river", tags=["kernel"], limit=3)] == [ids["kernel"]]
        assert [h.item.id for h in memory.query(text="a river", source="src-violin", limit=3)] == [ids["violin"]]
        future = datetime.now(UTC) + timedelta(days=1)
        assert memory.query(text="river", since=future, limit=3) == []
        assert len(memory.query(text="river", until=future, limit=10)) == 4
        hit = memory.query(text="Danube countries", limit=1)[0]
        assert hit.chunk is not None and "Danube" in hit.chunk and hit.score is not None

    def test_listing_is_newest_first_with_filters_and_pages(self, backend: Backend) -> None:
        memory = self.memory(backend)
        base = datetime(2026, 5, 1, tzinfo=UTC)
        ids = [memory.store(f"note {n}", tags=["even" if n % 2 == 0 else "odd"], timestamp=base + timedelta(hours=n))
               for n in range(8)]
        assert [h.item.id for h in memory.query(limit=3)] == ids[::-1][:3]
        assert [h.item.id for h in memory.query(tags=["even"], limit=10)] == ids[-2::-2]
        window = memory.query(since=base + timedelta(hours=2), until=base + timedelta(hours=4), limit=10)
        assert [h.item.id for h in window] == [ids[4], ids[3], ids[2]]
        page = memory.query(MemoryCriteria(limit=6))
        assert [h.item.id for h in page][3:6] == ids[::-1][3:6]  # the second page of three

    def test_forget_rewrite_clear_snapshot_and_restore(self, backend: Backend) -> None:
        memory = self.memory(backend)
        keep = memory.store(TEXTS["danube"])
        twin = memory.store(TEXTS["danube"])  # the same content: one blob, two items
        gone = memory.store(TEXTS["bread"])
        assert memory.forget(gone) and not memory.forget(gone)
        assert gone not in memory and all(h.item.id != gone for h in memory.query(text="sourdough bread", limit=5))
        assert memory.forget(twin) and memory.get(keep).content == TEXTS["danube"]  # the shared blob stays
        memory.rewrite(keep, "Redacted: nothing about rivers.")
        assert memory.get(keep).content.startswith("Redacted") and memory.get(keep).id == keep
        snapshot = memory.snapshot()
        memory.clear()
        assert len(memory) == 0 and memory.query(limit=5) == []
        memory.restore(snapshot)
        assert [r.id for r in memory.records()] == [keep] and memory.query(text="redacted", limit=1)[0].item.id == keep
        with pytest.raises(ItemNotFoundError):
            memory.get(gone)

    def test_an_isolated_fork_reads_its_snapshot_in_place(self, backend: Backend) -> None:
        parent = self.memory(backend, "parent")
        before = parent.store(TEXTS["violin"], title="before")
        assert backend.claim("parent.sub01")
        MemoryFork.of(parent).save_for(backend, "parent.sub01")
        later = parent.store(TEXTS["kernel"], title="later")
        child = self.memory(backend, "parent.sub01")  # the saved fork: as another process opens it
        assert child.fork is not None and child.get(before).content == TEXTS["violin"]
        with pytest.raises(OutsideSnapshotError):
            child.get(later)
        assert [h.item.id for h in child.query(text="violin maker in Cremona", limit=3)] == [before]
        assert child.index.item_ids() == set()  # nothing was embedded again for the child
        with pytest.raises(IsolationError):
            child.forget(before)
        own = child.store("The child's own note about Cremona.")
        assert own in child and own not in parent and [r.id for r in child.own_records()] == [own]

    def test_claims_are_atomic_and_agents_are_listed(self, backend: Backend) -> None:
        assert backend.claim("new.agent") and not backend.claim("new.agent")
        self.memory(backend, "stored", config=FAST).store("x")
        assert not backend.claim("stored")  # it holds items
        assert {"new.agent", "stored"} <= set(backend.agent_ids())
        backend.release_claim("new.agent")
        assert backend.claim("new.agent")

    def test_two_managers_on_one_agent_keep_each_others_pins(self, backend: Backend) -> None:
        from agent_memory.kernel.manager import MemoryManager

        first = MemoryManager(self.memory(backend, "pins", config=FAST))
        second = MemoryManager(self.memory(backend, "pins", config=FAST))  # built before the first one pins
        notes = [first.memory.store(f"note {n}") for n in range(3)]
        first.pin_item(notes[0])
        second.pin_item(notes[1])  # its working context did not know of the first pin
        first.ingest_user_message("a turn: the working context is written again")
        assert set(first.pinned_items) == set(second.pinned_items) == {notes[0], notes[1]}
        second.unpin_item(notes[0])
        first.pin_item(notes[2])
        assert MemoryManager(self.memory(backend, "pins", config=FAST)).pinned_items == (notes[1], notes[2])

    # -- concurrency and crashes -------------------------------------------------------------------
    def test_threads_sharing_one_memory_lose_nothing(self, backend: Backend) -> None:
        memory = self.memory(backend, config=FAST)
        stored: list[str] = []
        lock = threading.Lock()

        def writer(n: int) -> None:
            for k in range(15):
                item_id = memory.store(f"thread {n} note {k}")
                with lock:
                    stored.append(item_id)

        threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        ids = [r.id for r in self.memory(backend, config=FAST).records()]
        assert sorted(ids) == sorted(stored) and len(set(ids)) == 60

    def test_processes_writing_at_once_lose_nothing(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            import sys
            from agent_memory import AgentMemory, MemoryConfig
            memory = AgentMemory("shared", backend={url!r}, config=MemoryConfig(index_on_store=False))
            ids = [memory.store(f"process {{sys.argv[1]}} note {{k}}") for k in range(25)]
            victim = ids[0]
            memory.forget(victim)
            print("\\n".join(ids[1:]), flush=True)
            """)
        acknowledged = [item_id for out in _run_children(script, 3) for item_id in out.split()]
        ids = [r.id for r in self.memory(backend, "shared", config=FAST).records()]
        assert sorted(ids) == sorted(acknowledged) and len(ids) == 72

    def test_processes_pushing_events_at_once_get_distinct_increasing_seqs(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            import sys
            from agent_memory.storage import common, open_backend
            journal = common.journal(open_backend({url!r}), "journal")
            for k in range(15):
                event = journal.push("user_message", {{"content": f"{{sys.argv[1]}}.{{k}}"}})
                print(event.id, event.seq, flush=True)
            """)
        pushed = [[line.split() for line in out.splitlines()] for out in _run_children(script, 3)]
        for own in pushed:  # each process's events in the order it pushed them
            assert len(own) == 15 and [int(seq) for _, seq in own] == sorted(int(seq) for _, seq in own)
        every = sorted(((int(seq), event_id) for own in pushed for event_id, seq in own))
        assert len({seq for seq, _ in every}) == 45  # no number given twice
        events = common.journal(backend, "journal").events()
        assert [(event.seq, event.id) for event in events] == every  # none lost, in seq order
        assert sorted(event.payload["content"] for event in events) == sorted(f"{n}.{k}" for n in range(3)
                                                                              for k in range(15))

    def test_processes_appending_and_archiving_traces_at_once_lose_nothing(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            import sys
            from agent_memory.models.traces import RawTraceItem
            from agent_memory.storage import common, open_backend
            n = int(sys.argv[1])
            traces = common.traces(open_backend({url!r}), "traces")
            for k in range(12):
                traces.add_raw([RawTraceItem(turn_id=f"turn_{{n + 1}}{{k:03d}}", seq=1, trace_type="user",
                                             content=f"{{n}}.{{k}}", source_event="test")])
                if k % 3 == 2:  # a rewrite of both files while the other processes append
                    traces.archive_turns([f"turn_{{n + 1}}{{k - 2:03d}}"])
            """)
        _run_children(script, 2)
        traces = common.traces(backend, "traces")
        archived = sorted(item.content for item in traces.read_archive())
        assert archived == sorted(f"{n}.{k}" for n in range(2) for k in range(0, 12, 3))
        assert sorted(item.content for item in traces.list_raw()) == sorted(
            f"{n}.{k}" for n in range(2) for k in range(12) if k % 3 != 0)

    def test_processes_updating_one_document_lose_no_update(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            from agent_memory.errors import ConflictError
            from agent_memory.storage import common, open_backend
            slot = common.document(open_backend({url!r}), "agent", "counter")
            conflicts = 0
            for _ in range(20):
                while True:  # read, add one, write if nobody wrote in between, else read again
                    data, token = slot.get()
                    try:
                        slot.put(str(int(data or b"0") + 1).encode(), expect=token)
                        break
                    except ConflictError:
                        conflicts += 1
            print(conflicts)
            """)
        _run_children(script, 2)
        assert common.document(backend, "agent", "counter").get()[0] == b"40"

    def test_a_killed_pusher_loses_no_event_it_acknowledged(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            from agent_memory.storage import common, open_backend
            journal = common.journal(open_backend({url!r}), "pusher")
            k = 0
            while True:
                print(journal.push("tool_result", {{"tool_call_id": f"c{{k}}", "result": "page " * 4000}}).id,
                      flush=True)
                k += 1
            """)
        acknowledged = _acknowledged_until_killed(script, 20)
        journal = common.journal(backend, "pusher")
        events = journal.events()
        assert set(acknowledged) <= {event.id for event in events}
        assert len({event.seq for event in events}) == len(events)
        for event_id in acknowledged:
            assert journal.get(event_id).payload["result"] == "page " * 4000
        after = journal.push("usage_report", {"prompt_tokens": 1})  # nothing is left locked
        assert after.seq > max(event.seq for event in events)

    def test_a_killed_writer_loses_nothing_it_acknowledged(self, backend: Backend, url: str) -> None:
        script = textwrap.dedent(f"""
            from agent_memory import AgentMemory, MemoryConfig
            memory = AgentMemory("crash", backend={url!r}, config=MemoryConfig(index_on_store=False))
            k = 0
            while True:
                print(memory.store(f"note {{k}} " + "payload " * 200), flush=True)
                k += 1
            """)
        acknowledged = _acknowledged_until_killed(script, 30)
        memory = self.memory(backend, "crash", config=FAST)
        ids = [r.id for r in memory.records()]
        assert set(acknowledged) <= set(ids) and len(ids) == len(set(ids))
        for item_id in acknowledged:
            assert memory.get(item_id).content.startswith("note ")
        memory.store("after the crash")  # nothing is left locked
        with backend.locks("crash").hold("kernel", timeout_s=5), backend.locks("crash").hold("index", timeout_s=5):
            pass

    def test_a_killed_forgetter_loses_no_forget_it_acknowledged(self, backend: Backend, url: str) -> None:
        # 1,500 items, forgotten one by one by another process, killed after 1,100 forgets: past the
        # compaction of both built-in backends (the file log rewrites itself at 512 and 1,024
        # forgets here, Postgres prunes its deletions at 1,024). After a restart every acknowledged
        # forget holds, every item not forgotten is there with its content, in its order.
        memory = self.memory(backend, "forgetter", config=FAST)
        ids = memory.store_many([{"content": f"note {n}"} for n in range(1500)])
        script = textwrap.dedent(f"""
            import sys
            from agent_memory import AgentMemory, MemoryConfig
            memory = AgentMemory("forgetter", backend={url!r}, config=MemoryConfig(index_on_store=False))
            for item_id in sys.stdin.read().split():
                memory.forget(item_id)
                print(item_id, flush=True)
            """)
        child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, env=_child_env())
        assert child.stdin is not None and child.stdout is not None
        child.stdin.write("\n".join(ids))
        child.stdin.close()
        acknowledged: list[str] = []
        while len(acknowledged) < 1100:
            line = child.stdout.readline()
            if not line:
                break
            acknowledged.append(line.strip())
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=PROCESS_TIMEOUT_S)
        acknowledged += child.stdout.read().split()
        assert len(acknowledged) >= 1100, child.stderr.read() if child.stderr else ""
        after = self.memory(backend, "forgetter", config=FAST)  # a restart
        held = [record.id for record in after.records()]
        gone = set(acknowledged)
        in_flight = ids[len(acknowledged)] if len(acknowledged) < len(ids) else None  # may or may not be done
        assert [i for i in held if i != in_flight] == [i for i in ids if i not in gone and i != in_flight]
        for item_id in acknowledged[-3:]:
            with pytest.raises(ItemNotFoundError):
                after.get(item_id)
        assert after.get(held[-1]).content == f"note {ids.index(held[-1])}"
        after.forget(held[-1])  # nothing is left locked
        assert held[-1] not in self.memory(backend, "forgetter", config=FAST)

    def test_a_memory_in_another_process_sees_this_ones_items(self, backend: Backend, url: str) -> None:
        memory = self.memory(backend, "seen", config=FAST)
        item_id = memory.store("written here, read there")
        script = textwrap.dedent(f"""
            import sys
            from agent_memory import AgentMemory, MemoryConfig
            memory = AgentMemory("seen", backend={url!r}, config=MemoryConfig(index_on_store=False))
            print(memory.get(sys.argv[1]).content)
            print(memory.store("written there"))
            """)
        done = subprocess.run([sys.executable, "-c", script, item_id], capture_output=True, text=True,
                              env=_child_env(), timeout=PROCESS_TIMEOUT_S)
        assert done.returncode == 0, done.stderr
        read, written = done.stdout.splitlines()
        assert read == "written here, read there" and memory.get(written).content == "written there"
