"""Several real processes on one memory directory: hand-over, a SIGKILL mid-store, concurrent writers.

Each child runs a small snippet with the project's interpreter (``sys.executable``); the test
process is the other party. Embedded Chroma is not multi-process safe (chromadb keeps a per-process
in-memory HNSW index; see ``test_long_lived_process_sees_items_another_process_indexed``), so
concurrent *embedded* writers defer indexing and one process indexes afterwards; concurrent
indexing writers are tested against a Chroma server, the backend made for sharing.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.index.fusion import SCORE_TOLERANCE
from agent_memory.testing import ChromaServer

CHILD_TIMEOUT_S = 120.0
DENSE_ONLY = MemoryConfig(hybrid_search=False)
"""Queries answered by the vector index alone, so that keyword search cannot hide a vector
index that misses items."""

ENV = {
    **os.environ,
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "OMP_NUM_THREADS": "1",  # two children on two cores: no oversubscription
}


def run_child(code: str, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


def start_child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        env=ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(predicate, what: str, timeout_s: float = CHILD_TIMEOUT_S) -> None:  # noqa: ANN001
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def same_hits(hits: list, expected: list) -> bool:  # noqa: ANN001
    """Query hits equal to ``[[id, score, similarity, chunk], ...]`` from another process, within
    the determinism contract (agent_memory.index.fusion): scores are not rounded, another process
    (other thread counts) or a rebuilt index recomputes vectors, so they agree within
    ``SCORE_TOLERANCE``; these items are far apart, so the order is exact."""
    return len(hits) == len(expected) and all(
        h.item.id == e[0] and h.chunk == e[3] and h.score == pytest.approx(e[1], abs=SCORE_TOLERANCE)
        and h.similarity == pytest.approx(e[2], abs=SCORE_TOLERANCE)
        for h, e in zip(hits, expected, strict=True)
    )


def strict_lines(path: Path) -> list[dict]:
    data = path.read_bytes()
    assert data.endswith(b"\n")
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


# -- one process stores, another reads --------------------------------------------------------

STORE_AND_QUERY = """
import json, sys
from agent_memory import AgentMemory
memory = AgentMemory("shared", sys.argv[1])
ids = {key: memory.store(text, type="web_content", source="https://ex.org/" + key, tags=[key])
       for key, text in json.loads(sys.argv[2]).items()}
hits = memory.query(text=sys.argv[3], limit=3)
print(json.dumps({"ids": ids, "hits": [[h.item.id, h.score, h.similarity, h.chunk] for h in hits]}))
"""

PAGES = {
    "lighthouse": (
        "The Bell Rock Lighthouse off the coast of Angus, Scotland, is the world's oldest surviving "
        "sea-washed lighthouse, built between 1807 and 1810 by Robert Stevenson."
    ),
    "glacier": (
        "The Aletsch Glacier is the largest glacier in the Alps, about 23 kilometres long, in the Swiss "
        "canton of Valais."
    ),
    "violin": (
        "Antonio Stradivari was an Italian luthier whose violins, made in Cremona around 1700, are prized "
        "by players and collectors."
    ),
}
QUESTION = "oldest lighthouse standing in the sea"


def test_one_process_stores_another_retrieves_and_queries(tmp_path: Path) -> None:
    base = tmp_path / "memory"
    child = json.loads(run_child(STORE_AND_QUERY, str(base), json.dumps(PAGES), QUESTION))
    ids = child["ids"]
    assert child["hits"][0][0] == ids["lighthouse"]

    memory = AgentMemory("shared", base)
    for key, text in PAGES.items():
        assert memory.get(ids[key]).content == text
        assert memory.retrieve(ids[key]).content == text
    hits = memory.query(text=QUESTION, limit=3)
    assert same_hits(hits, child["hits"])
    assert memory.flush_index() == 0  # the child indexed everything already
    assert [h.item.id for h in memory.query(tags=["violin"])] == [ids["violin"]]

    # The index is derived data: the same memory without its index/ directory (a copy, so no
    # chromadb client of this process has it open) rebuilds it and answers the same.
    copy = tmp_path / "copy"
    shutil.copytree(base, copy, ignore=shutil.ignore_patterns("index"))
    rebuilt = AgentMemory("shared", copy)
    assert same_hits(rebuilt.query(text=QUESTION, limit=3), child["hits"])
    assert rebuilt.flush_index() == 0


# -- SIGKILL in the middle of storing ------------------------------------------------------------

STORE_FOREVER = """
import sys
from agent_memory import AgentMemory
memory = AgentMemory("agent", sys.argv[1])
n = 0
while True:
    body = f"Record {n}. " + "The quick brown fox jumps over the lazy dog. " * (1 + (n % 4) * 120)
    item_id = memory.store(body, source="bulk", tags=[f"n{n}"])
    print(n, item_id, flush=True)
    n += 1
"""


def body(n: int) -> str:
    return f"Record {n}. " + "The quick brown fox jumps over the lazy dog. " * (1 + (n % 4) * 120)


def test_sigkill_mid_store_loses_no_acknowledged_item(tmp_path: Path) -> None:
    base = tmp_path / "memory"
    items = base / "agents" / "agent" / "items.jsonl"
    child = start_child(STORE_FOREVER, str(base))
    try:
        wait_for(lambda: items.exists() and items.read_bytes().count(b"\n") >= 12, "12 stored items")
    finally:
        os.kill(child.pid, signal.SIGKILL)
        stdout, _ = child.communicate(timeout=30)
    assert child.returncode == -signal.SIGKILL

    acknowledged = {}
    for line in stdout.splitlines(keepends=True):
        if line.endswith("\n"):
            n, item_id = line.split()
            acknowledged[int(n)] = item_id
    assert len(acknowledged) >= 11

    memory = AgentMemory("agent", base)
    records = {r.id: r for r in memory.records()}
    assert set(acknowledged.values()) <= set(records)
    assert len(records) - len(acknowledged) <= 1  # at most the one being stored when killed
    for n, item_id in acknowledged.items():
        assert memory.get(item_id).content == body(n)
        assert memory.retrieve(item_id, {"type": "first_n", "n": 1, "unit": "lines"}).content.startswith(f"Record {n}.")
    for item_id in records:  # an item on disk is whole, acknowledged or not
        assert memory.get(item_id).content.startswith("Record ")

    memory.flush_index()  # items the kill left unindexed
    assert memory.index.item_ids() == set(records)
    for n, item_id in acknowledged.items():
        assert [h.item.id for h in memory.query(tags=[f"n{n}"])] == [item_id]

    later = memory.store("After the crash: a note about lighthouses on rocky coasts.")
    assert memory.query(text="lighthouse", limit=1)[0].item.id == later
    assert [line["id"] for line in strict_lines(items)] == [*records, later]
    blobs = {p.name for p in (base / "agents" / "agent" / "content").iterdir() if not p.name.startswith(".")}
    assert {memory.get(i).metadata.content_sha256 for i in [*records, later]} <= blobs


# -- two processes storing at once ---------------------------------------------------------------

WRITER = """
import json, os, sys, time
from agent_memory import AgentMemory, MemoryConfig
memory_dir, tag, count, ready, go, chroma_port = sys.argv[1:7]
if chroma_port:
    config = MemoryConfig(chroma_mode="server", chroma_port=int(chroma_port))
else:
    config = MemoryConfig(index_on_store=False)
memory = AgentMemory("shared", memory_dir, config=config)
memory.tokens.count("warm up")
if chroma_port:
    memory.flush_index()  # opens the index and loads the model before the start line
open(ready, "w").close()
while not os.path.exists(go):
    time.sleep(0.002)
ids = []
for i in range(int(count)):
    ids.append(memory.store(f"Writer {tag} entry {i}: codeword {tag}{i:03d} in the logbook.", tags=[tag]))
print(json.dumps(ids))
"""


def run_writers(base: Path, tmp_path: Path, *, per_writer: int, chroma_port: str) -> dict[str, list[str]]:
    go = tmp_path / "go"
    children = {}
    for tag in ("alpha", "bravo"):
        ready = tmp_path / f"ready-{tag}"
        children[tag] = (ready, start_child(WRITER, str(base), tag, str(per_writer), str(ready), str(go), chroma_port))
    try:
        wait_for(lambda: all(r.exists() or c.poll() is not None for r, c in children.values()), "writers ready")
        go.touch()
        results = {}
        for tag, (_, child) in children.items():
            stdout, stderr = child.communicate(timeout=CHILD_TIMEOUT_S)
            assert child.returncode == 0, stderr[-3000:]
            results[tag] = json.loads(stdout)
    finally:
        for _, child in children.values():
            if child.poll() is None:
                child.kill()
                child.wait()
    return results


def assert_all_present(memory: AgentMemory, written: dict[str, list[str]]) -> None:
    everything = [item_id for ids in written.values() for item_id in ids]
    assert len(set(everything)) == 100
    on_disk = [line["id"] for line in strict_lines(memory.path / "items.jsonl")]
    assert sorted(on_disk) == sorted(everything)
    for tag, ids in written.items():
        # Each writer's own items are in its order; the two writers interleave.
        assert [i for i in on_disk if i in set(ids)] == ids
        for n, item_id in enumerate(ids):
            assert memory.get(item_id).content == f"Writer {tag} entry {n}: codeword {tag}{n:03d} in the logbook."


def assert_all_findable(memory: AgentMemory, written: dict[str, list[str]]) -> None:
    assert memory.index.item_ids() == {i for ids in written.values() for i in ids}
    for tag, ids in written.items():
        assert {h.item.id for h in memory.query(tags=[tag], limit=100)} == set(ids)
        for n in (0, 17, 49):
            text = f"Writer {tag} entry {n}: codeword {tag}{n:03d} in the logbook."
            assert ids[n] in [h.item.id for h in memory.query(text=text, limit=3)]


def test_two_processes_storing_at_once_lose_nothing(tmp_path: Path) -> None:
    base = tmp_path / "memory"
    written = run_writers(base, tmp_path, per_writer=50, chroma_port="")

    dense = AgentMemory("shared", base, config=DENSE_ONLY)
    assert_all_present(dense, written)
    assert dense.flush_index() == 100  # the writers deferred indexing; one process indexes
    assert_all_findable(dense, written)
    assert_all_findable(AgentMemory("shared", base), written)  # hybrid: the keyword index too


@pytest.mark.server
def test_two_processes_indexing_into_one_chroma_server_lose_nothing(
    tmp_path: Path, chroma_server: ChromaServer
) -> None:
    base = tmp_path / "memory"
    config = MemoryConfig(chroma_mode="server", chroma_port=chroma_server.port, hybrid_search=False)
    AgentMemory("shared", base, config=config).clear()
    written = run_writers(base, tmp_path, per_writer=50, chroma_port=str(chroma_server.port))

    memory = AgentMemory("shared", base, config=config)
    assert_all_present(memory, written)
    assert memory.flush_index() == 0  # both writers indexed on store
    assert_all_findable(memory, written)


# -- a long-lived reader beside a writer -----------------------------------------------------------

STORE_ITEMS = """
import json, sys
from agent_memory import AgentMemory
memory = AgentMemory("shared", sys.argv[1])
print(json.dumps([memory.store(text) for text in json.loads(sys.argv[2])]))
"""


def test_long_lived_process_sees_items_another_process_indexed(tmp_path: Path) -> None:
    base = tmp_path / "memory"
    reader = AgentMemory("shared", base, config=DENSE_ONLY)
    own = reader.store("The reader's own note about violins from Cremona.")
    assert reader.query(text="violin", limit=1)[0].item.id == own  # the reader has the index open

    texts = [PAGES["lighthouse"], PAGES["glacier"]]
    ids = json.loads(run_child(STORE_ITEMS, str(base), json.dumps(texts)))

    assert {r.id for r in reader.records()} == {own, *ids}
    assert reader.query(text=QUESTION, limit=1)[0].item.id == ids[0]
    assert reader.query(text="largest glacier in the Alps", limit=1)[0].item.id == ids[1]
