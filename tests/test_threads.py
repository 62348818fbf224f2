"""One AgentMemory shared by threads (a web service's pattern): nothing lost, no error, also while
another process writes the same memory, which makes this process reopen its Chroma client (the
probe of issue 18 saw ``'RustBindingsAPI' object has no attribute 'bindings'`` when a client was
closed under a thread's query), on both backends. ``benchmarks/bench_threads.py --postgres`` runs the
same for 60 s per backend and measures the throughput; here each backend gets 12 s, to keep the
suite short."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agent_memory import AgentMemory
from agent_memory.testing import PostgresServer

SEED = 18
THREADS = 8
SECONDS = 12.0

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from agent_memory import AgentMemory
    with AgentMemory("service", store=sys.argv[1]) as memory:
        for n in range(25):
            memory.store(f"Another process noted lighthouse keeper log entry number {n}.")
            time.sleep(0.2)
""")


@pytest.fixture(params=["files", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where the shared memory lives: a directory, or a database of the session's Postgres."""
    if request.param == "postgres":
        server: PostgresServer = request.getfixturevalue("postgres_server")
        return server.new_database("threads")
    return str(tmp_path / "memory")


def test_eight_threads_and_another_process_lose_nothing_and_raise_nothing(store: str) -> None:
    memory = AgentMemory("service", store=store)
    texts = [f"Heron colony {n} nests near the lighthouse at cape {n % 7}; keepers counted {n * 3} birds."
             for n in range(200)]
    stored: list[list[str]] = [[] for _ in range(THREADS)]
    errors: list[str] = []
    counts = [0, 0, 0]
    memory.query("warm-up: the embedding model loads before the clock starts", limit=1)
    start = time.monotonic()

    def running() -> bool:
        """Until SECONDS have passed and every kind of call was made (a slow machine runs longer,
        at most 10x)."""
        elapsed = time.monotonic() - start
        return elapsed < SECONDS or (min(counts) == 0 and elapsed < 10 * SECONDS)

    def work(n: int) -> None:
        rng = random.Random(SEED * 100 + n)
        while running():
            roll = rng.random()
            try:
                if roll < 0.4 or not stored[n]:
                    stored[n].append(memory.store(rng.choice(texts), tags=[f"t{n}"]))
                    counts[0] += 1
                elif roll < 0.8:
                    memory.query("heron lighthouse keepers", limit=5)
                    counts[1] += 1
                else:
                    assert "Heron colony" in memory.retrieve(rng.choice(stored[n]), "full", max_tokens=200).content
                    counts[2] += 1
            except Exception as exc:  # noqa: BLE001 - every failure is the finding
                errors.append(f"{type(exc).__name__}: {exc}")

    writer = subprocess.Popen([sys.executable, "-c", WRITER, store])
    workers = [threading.Thread(target=work, args=(n,)) for n in range(THREADS)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert writer.wait(timeout=120) == 0
    assert errors == []
    assert min(counts) > 0
    acknowledged = [item for items in stored for item in items]
    listed = {record.id for record in memory.records()}
    assert all(item in listed and item in memory for item in acknowledged)
    assert len(listed) == len(acknowledged) + 25  # the other process's 25 notes too, each once
    hits = memory.query("lighthouse keeper log entry number 24", limit=3)
    assert any("number 24" in str(memory.get(hit.item.id).content) for hit in hits)  # its writes are searchable here
    memory.close()


def test_a_client_is_not_closed_under_a_call_in_flight(tmp_path: Path) -> None:
    """Deterministic: a call holds the Chroma client (inside ``_using``); another process's write
    makes the client stale; a second thread's call waits until the first ends instead of closing
    the client under it (what raised ``'RustBindingsAPI' object has no attribute 'bindings'``)."""
    from agent_memory.index.chroma import ChromaVectorIndex, _EmbeddedClients

    memory = AgentMemory("service", tmp_path)
    memory.store("Herons nest near the lighthouse.")
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
