"""Issue 27, item 3: a forget costs the same at any size of the memory, on both backends, and many
forgets are one batch. Nothing here is timed (benchmarks/bench_forget.py measures the latency):
each test asserts what a forget writes and what a reader then reads, which grow with the memory
when a forget rewrites the log (the fault: an atomic rewrite of items.jsonl per forget, and a
whole re-read of the log by every reader after it)."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.errors import InvalidArgumentError, InvalidIdError, IsolationError, ItemNotFoundError, StoreError
from agent_memory.fork import MemoryFork
from agent_memory.storage import open_backend
from agent_memory.storage.files.items import COMPACT_MIN_DEAD_LINES, TOMBSTONE_KEY
from agent_memory.testing import PostgresServer

FAST = MemoryConfig(index_on_store=False)


def _filled(backend: str, n: int, agent_id: str = "agent") -> tuple[AgentMemory, list[str]]:
    memory = AgentMemory(agent_id, backend=backend, config=FAST)
    return memory, memory.store_many([{"content": f"note number {k}"} for k in range(n)])


def _tombstone(item_id: str) -> bytes:
    return json.dumps({"id": item_id, TOMBSTONE_KEY: True}, separators=(",", ":")).encode() + b"\n"


@pytest.mark.parametrize("n", [50, 2_000])
def test_a_forget_appends_one_line_and_rewrites_nothing(tmp_path: Path, n: int) -> None:
    memory, ids = _filled(str(tmp_path), n)
    items = memory.agent_dir / "items.jsonl"
    with open(items, "rb") as held:  # opened before the forget: it keeps the file it opened
        data = held.read()
        assert memory.forget(ids[n // 2])
        grown = held.read()
    # the same file grown by the tombstone only, whatever the size of the memory (an atomic rewrite
    # renames a new file over the path: the handle would still read the old one, unchanged)
    assert grown == _tombstone(ids[n // 2]) and items.read_bytes() == data + grown


@pytest.mark.parametrize("backend_name", ["files", "postgres"])
def test_a_reader_reads_only_the_forget(tmp_path: Path, backend_name: str, request: pytest.FixtureRequest) -> None:
    backend = str(tmp_path) if backend_name == "files" else request.getfixturevalue("postgres_server").new_database()
    memory, ids = _filled(backend, 300)
    log = open_backend(backend).log("agent", "items")  # another reader (another process, as far as the log knows)
    seen = log.read()
    assert memory.forget(ids[7]) and memory.forget_many([ids[8], ids[9]]) == [ids[8], ids[9]]
    found = log.read(seen.token)
    # not the whole log again (reset): the deletes alone, whatever the size
    assert not found.reset and found.records == [] and sorted(found.deleted) == sorted(ids[7:10])
    other = AgentMemory("agent", backend=backend, config=FAST)  # a restart: the forgotten items stay forgotten
    assert [r.id for r in other.records()] == ids[:7] + ids[10:]
    for item_id in ids[7:10]:
        with pytest.raises(ItemNotFoundError):
            other.get(item_id)


def test_forget_many_is_one_append_and_keeps_shared_content(tmp_path: Path) -> None:
    memory, ids = _filled(str(tmp_path), 200)
    twin = memory.store("note number 5")  # the content of ids[5]: one blob for both
    items = memory.agent_dir / "items.jsonl"
    doomed = [ids[5], ids[50], "mem_00000000dead", ids[5], ids[60]]  # a twin, an unknown id, a duplicate
    with open(items, "rb") as held:  # appended to in place: this handle sees the tombstones
        data = held.read()
        assert memory.forget_many(doomed) == [ids[5], ids[50], ids[60]]
        grown = held.read()
    assert grown == b"".join(_tombstone(i) for i in (ids[5], ids[50], ids[60])) and items.read_bytes() == data + grown
    assert memory.get(twin).content == "note number 5"  # its blob stays: another item names it
    digest = memory.get(ids[51]).metadata.content_sha256
    assert memory.forget_many([ids[51]]) == [ids[51]]
    with pytest.raises(StoreError):
        memory.backend.log("agent", "items").blob(digest)  # no other item named it: released
    assert memory.forget_many([]) == [] and memory.forget_many([ids[51]]) == []


def test_forget_many_refuses_bad_input_before_writing_anything(tmp_path: Path) -> None:
    parent, ids = _filled(str(tmp_path), 5, "parent")
    backend = parent.backend
    assert backend.claim("parent.sub01")
    MemoryFork.of(parent).save_for(backend, "parent.sub01")
    child = AgentMemory("parent.sub01", backend=backend, config=FAST)
    own = child.store("the child's own note")
    with pytest.raises(IsolationError):
        child.forget_many([own, ids[0]])
    with pytest.raises(InvalidIdError):
        child.forget_many([own, "not an id"])
    with pytest.raises(InvalidArgumentError):
        child.forget_many(own)  # a single id, not a list of them
    assert own in child and [r.id for r in parent.records()] == ids  # nothing was removed
    assert child.forget_many([own]) == [own] and own not in child


def test_the_file_log_compacts_itself_in_place_of_growing(tmp_path: Path) -> None:
    n = 3 * COMPACT_MIN_DEAD_LINES
    memory, ids = _filled(str(tmp_path), n)
    items = memory.agent_dir / "items.jsonl"
    reader = memory.backend.log("agent", "items")  # another reader, holding its place in the log
    seen = reader.read().token
    doomed = ids[1::3] + ids[2::3]  # two thirds, in batches and one by one
    memory.forget_many(doomed[:1000])
    for item_id in doomed[1000:1100]:
        memory.forget(item_id)
    memory.forget_many(doomed[1100:])
    kept = ids[::3]
    lines = items.read_bytes().splitlines()
    # rewritten once dead lines were over half of the file: fewer lines than it held before any
    # forget (appends alone only add lines), the live records first, in their order; a reader that
    # held a place in the old file reads the new one whole
    assert len(lines) < n
    assert [json.loads(line)["id"] for line in lines[: len(kept)]] == kept
    again = reader.read(seen)
    assert again.reset and [item_id for item_id, _ in again.records] == kept
    reopened = AgentMemory("agent", str(tmp_path), config=FAST)
    assert [r.id for r in reopened.records()] == kept
    assert reopened.get(kept[-1]).content == f"note number {n - 3}"


def test_a_database_of_schema_1_is_migrated_with_its_items(tmp_path: Path, postgres_server: PostgresServer) -> None:
    import psycopg

    from agent_memory.storage.postgres.database import MIGRATIONS

    # a database as version 1 of the schema left it, holding three items of agent "old"
    source, ids = _filled(str(tmp_path), 3)
    log = source.backend.log("agent", "items")
    rows = log.read().records
    url = postgres_server.new_database()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE am_schema (version integer NOT NULL)")
        with conn.transaction():
            conn.execute(MIGRATIONS[0])
            conn.execute("INSERT INTO am_schema (version) VALUES (1)")
            conn.execute("INSERT INTO am_item_logs (agent_id, generation, last_seq) VALUES ('old', 1, 3)")
            for seq, (item_id, record) in enumerate(rows, 1):
                conn.execute("INSERT INTO am_items (agent_id, item_id, position, seq, record) VALUES ('old', %s, %s, %s, %s)",
                             (item_id, seq, seq, record))
                digest = json.loads(record)["metadata"]["content_sha256"]
                conn.execute("INSERT INTO am_blobs (agent_id, digest, data) VALUES ('old', %s, %s)",
                             (digest, log.blob(digest)))
    memory = AgentMemory("old", backend=url, config=FAST)  # migrates to the current schema
    assert [r.id for r in memory.records()] == ids and memory.get(ids[1]).content == "note number 1"
    assert memory.forget(ids[1]) and [r.id for r in AgentMemory("old", backend=url, config=FAST).records()] == [ids[0], ids[2]]
    with psycopg.connect(url, autocommit=True) as conn:
        counts = conn.execute("SELECT live, tombstones FROM am_item_logs WHERE agent_id = 'old'").fetchone()
        version = conn.execute("SELECT max(version) FROM am_schema").fetchone()
    assert counts == (2, 1) and version == (len(MIGRATIONS),)


def test_forget_takes_every_chunk_out_of_the_vector_index(tmp_path: Path) -> None:
    # One item of about 100 chunks (its chunk ids are looked up in two rounds: 64, then 256 more),
    # a batch over DELETE_BY_ID_ITEMS (deleted by one filter), and neighbours that must stay.
    from agent_memory.storage.files.chroma import DELETE_BY_ID_ITEMS, FIRST_PROBE_CHUNKS

    memory = AgentMemory("agent", str(tmp_path))
    # distinct paragraphs (two ship names of 100 drawn by a seeded generator), so that no chunk is a
    # near-duplicate of another and every one of them is embedded
    ships = [a + b for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze")
             for b in ("bar", "den", "fik", "gor", "hul", "jam", "kes", "lim", "mor", "nap")]
    draw = random.Random(7)
    long_text = " ".join(f"Paragraph {n} records the {draw.choice(ships)} and the {draw.choice(ships)} passing the "
                         "lighthouse." for n in range(800))
    big = memory.store(long_text)
    small = memory.store_many([{"content": f"short note {n} about a harbour"} for n in range(DELETE_BY_ID_ITEMS + 4)])
    memory.flush_index()  # the test reads the vector index directly
    last = next(n for n in range(FIRST_PROBE_CHUNKS, 1000) if memory.index.chunk_vector(big, n + 1) is None)
    assert memory.index.chunk_vector(big, last) is not None and last > FIRST_PROBE_CHUNKS
    assert memory.forget(big) and memory.forget(small[0])
    assert all(memory.index.chunk_vector(big, n) is None for n in range(last + 1))
    assert memory.forget_many(small[1:]) == small[1:]
    assert memory.index.item_ids() == set()
    assert all(memory.index.chunk_vector(item_id, 0) is None for item_id in small)


def test_forget_takes_out_the_chunks_after_a_gap(tmp_path: Path) -> None:
    """Near-duplicate chunks get no vector, so an item's chunks in the vector index are numbered
    with gaps; forgetting it must still take out every one (a delete that stopped at the first
    window with a gap left the later chunks in the index)."""
    draw = random.Random(7)
    log = "".join(f"commit {draw.getrandbits(160):040x}\nAuthor: bot <bot@example.com>\n    Bump dependency\n\n"
                  for _ in range(300))  # ~100 chunks, many of them near-duplicates by their vectors
    memory = AgentMemory("agent", str(tmp_path))
    log_id = memory.store(log, source="git log")
    memory.flush_index()  # the indexing thread's vectors, written
    held = [n for n in range(200) if memory.index.chunk_vector(log_id, n) is not None]
    assert max(held) > 64 and len(held) < max(held) + 1  # a gap, and chunks past the first window
    assert memory.forget(log_id)
    assert [n for n in range(200) if memory.index.chunk_vector(log_id, n) is not None] == []
