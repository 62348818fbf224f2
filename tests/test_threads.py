"""One AgentMemory shared by threads (a web service's pattern): nothing lost, no error, also while
another process writes the same memory, which makes this process reopen its Chroma client (the
probe of issue 18 saw ``'RustBindingsAPI' object has no attribute 'bindings'`` when a client was
closed under a thread's query), on both backends: 8 threads on one memory for 60 s, the file
backend's and the Postgres backend's at the same time (so the suite pays one minute, not two).
``benchmarks/bench_threads.py --postgres`` runs the same workload one backend at a time and
measures the throughput."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from agent_memory import AgentMemory
from agent_memory.testing import PostgresServer

SEED = 18
THREADS = 8
SECONDS = 60.0
NOTES = 25
"""What the other process stores, one note every 0.2 s."""

WRITER = textwrap.dedent(f"""
    import sys, time
    from pathlib import Path
    from agent_memory import AgentMemory
    with AgentMemory("service", backend=sys.argv[1]) as memory:
        for n in range({NOTES}):
            memory.store(f"Another process noted lighthouse keeper log entry number {{n}}.")
            time.sleep(0.2)
""")

TEXTS = [f"Heron colony {n} nests near the lighthouse at cape {n % 7}; keepers counted {n * 3} birds."
         for n in range(200)]


@dataclass
class Outcome:
    """What the threads on one memory did: acknowledged ids per thread, calls by kind, errors."""

    stored: list[list[str]] = field(default_factory=lambda: [[] for _ in range(THREADS)])
    counts: list[int] = field(default_factory=lambda: [0, 0, 0])
    """Stores, queries, retrieves."""
    errors: list[str] = field(default_factory=list)
    writer_status: int | None = None


def hammer(memory: AgentMemory, backend: str, outcome: Outcome) -> None:
    """8 threads storing (40%), querying (40%) and retrieving (20%) on ``memory`` for SECONDS
    (longer, at most 10x, until every kind of call was made), while another process stores NOTES
    notes into the same backend. Each thread's choices come from its own seeded generator."""
    memory.query("warm-up: the embedding model loads before the clock starts", limit=1)
    start = time.monotonic()

    def running() -> bool:
        elapsed = time.monotonic() - start
        return elapsed < SECONDS or (min(outcome.counts) == 0 and elapsed < 10 * SECONDS)

    def work(n: int) -> None:
        rng = random.Random(SEED * 100 + n)
        mine = outcome.stored[n]
        while running():
            roll = rng.random()
            try:
                if roll < 0.4 or not mine:
                    mine.append(memory.store(rng.choice(TEXTS), tags=[f"t{n}"]))
                    outcome.counts[0] += 1
                elif roll < 0.8:
                    memory.query("heron lighthouse keepers", limit=5)
                    outcome.counts[1] += 1
                else:
                    assert "Heron colony" in memory.retrieve(rng.choice(mine), "full", max_tokens=200).content
                    outcome.counts[2] += 1
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                outcome.errors.append(f"{type(exc).__name__}: {exc}")

    writer = subprocess.Popen([sys.executable, "-c", WRITER, backend])
    workers = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    outcome.writer_status = writer.wait(timeout=120)


def test_eight_threads_a_minute_on_each_backend_lose_nothing_and_raise_nothing(
        tmp_path: Path, postgres_server: PostgresServer) -> None:
    stores = {"files": str(tmp_path / "memory"), "postgres": postgres_server.new_database("threads")}
    memories = {name: AgentMemory("service", backend=backend) for name, backend in stores.items()}
    outcomes = {name: Outcome() for name in stores}
    runs = [threading.Thread(target=hammer, args=(memories[name], stores[name], outcomes[name])) for name in stores]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    for name, memory in memories.items():
        outcome = outcomes[name]
        assert (name, outcome.writer_status, outcome.errors) == (name, 0, [])
        assert min(outcome.counts) > 0, (name, outcome.counts)
        acknowledged = [item for items in outcome.stored for item in items]
        listed = {record.id for record in memory.records()}
        assert all(item in listed and item in memory for item in acknowledged), name
        assert len(listed) == len(acknowledged) + NOTES, name  # the other process's notes too, each once
        hits = memory.query(f"lighthouse keeper log entry number {NOTES - 1}", limit=3)
        assert any(f"number {NOTES - 1}" in str(memory.get(hit.item.id).content) for hit in hits), name  # searchable here
        memory.close()


FIRST_USE = textwrap.dedent("""
    import sys, threading
    from agent_memory import AgentMemory
    errors = []
    barrier = threading.Barrier(2)
    def first_use(backend):
        try:
            memory = AgentMemory("first", backend=backend)
            barrier.wait()  # both threads import chromadb / pgvector / torch for the first time now
            stored = memory.store("Herons nest near the lighthouse.")
            assert [hit.item.id for hit in memory.query("where do herons nest", limit=1)] == [stored]
            memory.close()
        except BaseException as exc:
            errors.append(repr(exc)[:500])
    threads = [threading.Thread(target=first_use, args=(backend,)) for backend in sys.argv[1:]]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(errors)
    sys.exit(1 if errors else 0)
""")


def test_two_memories_used_first_in_two_threads_at_once_both_work(tmp_path: Path,
                                                                   postgres_server: PostgresServer) -> None:
    """A fresh process whose first two requests open a memory on files and one on Postgres, in two
    threads at once: both import numpy (through chromadb, through pgvector) for the first time.
    Without one lock over the library's lazy heavy imports, Python handed one thread a partially
    initialised ``numpy._typing`` in 4 of 5 runs (``cannot import name 'NDArray'``), and every
    index write of that process failed after it."""
    stores = [str(tmp_path / "memory"), postgres_server.new_database("first_use")]
    done = subprocess.run([sys.executable, "-c", FIRST_USE, *stores], capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == 0, (done.stdout[-1500:], done.stderr[-1500:])


def test_a_client_is_not_closed_under_a_call_in_flight(tmp_path: Path) -> None:
    """Deterministic: a call holds the Chroma client (inside ``_using``); another process's write
    makes the client stale; a second thread's call waits until the first ends instead of closing
    the client under it (what raised ``'RustBindingsAPI' object has no attribute 'bindings'``)."""
    from agent_memory.storage.files.chroma import ChromaVectorIndex, _EmbeddedClients

    memory = AgentMemory("service", tmp_path)
    memory.store("Herons nest near the lighthouse.")
    memory.flush_index()  # in the index before the first call holds the client
    index = memory.index
    assert isinstance(index, ChromaVectorIndex) and index.path is not None
    entered, release, second_done = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, object] = {}

    def first() -> None:
        with index._using() as collection:
            entered.set()
            release.wait(timeout=30)
            seen["count"] = collection.count()  # still usable: nobody closed its client

    def second() -> None:
        seen["hits"] = len(memory.query("heron", limit=1))
        second_done.set()

    holder = threading.Thread(target=first)
    holder.start()
    assert entered.wait(timeout=30)
    generation = index.path / "generation"
    generation.write_text(str(_EmbeddedClients.generation(index.path) + 1))  # as another process's write does
    waiter = threading.Thread(target=second)
    waiter.start()
    assert not second_done.wait(timeout=1.0)  # the stale client is not reopened under the first call
    release.set()
    holder.join(timeout=30)
    waiter.join(timeout=30)
    assert seen == {"count": 1, "hits": 1}
    memory.close()
