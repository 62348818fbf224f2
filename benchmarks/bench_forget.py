"""Forget as memory grows (issue 27, item 3): ``AgentMemory.forget`` at N = 1k, 10k and 100k items
on each backend (the file backend: JSONL + embedded Chroma + SQLite FTS5; Postgres with pgvector,
pgserver's server started here or the database ``--postgres-url`` names), and the ``delete`` of a
directory of 1,000 files through Claude's memory tool (``AgentMemoryTool``).

Building the memory is not what is measured. It grows in place (1k items, then 9k more, then 90k
more) through the real paths: ``store_many`` (each item's blob, then its records in one append or
transaction per batch of 2,000) with ``index_on_store=False``, then ``flush_index`` (every item
chunked, embedded and written to the vector index and the keyword index). The texts are the real
corpus of ``bench_scale.py`` (HotpotQA paragraphs, Cranfield abstracts, LoCoMo turns: 5,433
unique texts, repeated with distinct ids up to N), and, as there, the embeddings of the unique
texts are computed once by the real model and reused for their copies (a cache in front of it):
embedding 100k items would take about 2.5 minutes more per backend at ~670 short texts/s on 2
cores, and a forget never embeds. At each size, after one untimed forget (the first opens the
indexes), :data:`SAMPLES` items chosen at random are forgotten one by one, each call timed (wall
clock): the item log's delete, the blob's release and
the delete of its chunks from both indexes. On the file backend the bytes each forget adds to
``items.jsonl`` and whether the file was rewritten (a new inode) are recorded too. The item log's
own share (``item_log_delete_ms``: a delete written through the ``Log`` contract, and read by a
second reader that had read the log before) is timed on :data:`SAMPLES` more items; the rest of a
forget is the indexes' delete and the blob's. At the largest size, on files, the time of one
compaction (the rewrite with the live records only, which the log makes once dead lines are half
of it: once per as many forgets as it holds records).

The directory delete: 1,000 files created with the tool's ``create`` in a memory of their own (on
each backend, indexed by one ``flush_index``), then one ``delete`` of their directory, timed: it
forgets them in one batch (``AgentMemory.forget_many``).

    python benchmarks/bench_forget.py [--data DIR] [--sizes 1000 10000 100000] [--backends files postgres]
                                      [--postgres-url URL] [--out FILE]

Writes ``benchmarks/results/forget.json`` and prints the table. About 40 minutes on 2 cores shared
with other jobs (load 7), nearly all of it building: writing the blobs and the indexes of 100k
items, once per backend.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from bench_scale import CachedEmbedder, load_corpus, percentiles_ms  # noqa: E402 - a sibling script

from agent_memory import AgentMemory, MemoryConfig  # noqa: E402
from agent_memory.index.embedding import index_embedder  # noqa: E402
from agent_memory.integrations.anthropic_memory import AgentMemoryTool  # noqa: E402
from agent_memory.storage import FileBackend  # noqa: E402
from agent_memory.storage.contracts import LogChange  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = PROJECT_ROOT.parent / "shared" / "data"
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "forget.json"
DEFAULT_SIZES = (1_000, 10_000, 100_000)
SAMPLES = 200
"""Forgets timed at each size (of items chosen at random with a fixed seed)."""
DIRECTORY_FILES = 1_000
"""Files in the directory deleted through the memory tool."""
BATCH = 2_000
"""Items per ``store_many`` call while building."""
DEFERRED = MemoryConfig(index_on_store=False)


def _cache_embeddings(memory: AgentMemory, cached: CachedEmbedder) -> Any:
    """Put ``cached`` in front of the memory's real embedding model; returns the model."""
    function = index_embedder(memory.config)  # the library's embedder, shared by the process's memories
    real = function.embedder
    cached.embedder = real
    function.embedder = cached
    return real


def grow(memory: AgentMemory, start: int, count: int, corpus: list[tuple[str, str, str]]) -> float:
    """Store ``count`` items (the corpus's texts from number ``start`` on, with distinct copy
    numbers) and index them; the seconds it took."""
    began = time.perf_counter()
    end = start + count
    for first in range(start, end, BATCH):
        entries = []
        for i in range(first, min(end, first + BATCH)):
            kind, title, text = corpus[i % len(corpus)]
            entries.append({"content": text, "title": title, "type": "custom", "source": kind, "tags": [kind],
                            "extra": {"copy": i // len(corpus)}})
        memory.store_many(entries)
    memory.flush_index()
    return time.perf_counter() - began


def forgets(memory: AgentMemory, rng: random.Random) -> dict[str, Any]:
    """Forget :data:`SAMPLES` random items one by one: latency and, on files, what each wrote."""
    ids = [record.id for record in memory.records()]
    doomed = rng.sample(ids, SAMPLES + 1)
    assert memory.forget(doomed.pop())  # warm-up, untimed: the first forget opens the indexes
    ids = [record.id for record in memory.records()]
    items = memory.agent_dir / "items.jsonl" if isinstance(memory.backend, FileBackend) else None
    samples: list[float] = []
    grown: list[int] = []
    inodes = set()
    for item_id in doomed:
        size = items.stat().st_size if items is not None else 0
        started = time.perf_counter()
        assert memory.forget(item_id)
        samples.append(time.perf_counter() - started)
        if items is not None:
            stat = items.stat()
            grown.append(stat.st_size - size)
            inodes.add(stat.st_ino)
    result: dict[str, Any] = {"forget_ms": percentiles_ms(samples), "items_before": len(ids)}
    if items is not None:
        result["bytes_appended_per_forget"] = sorted(set(grown))
        result["items_jsonl_rewritten"] = len(inodes) > 1
    result["item_log_delete_ms"] = log_deletes(memory, [i for i in ids if i not in set(doomed)], rng)
    return result


def log_deletes(memory: AgentMemory, ids: list[str], rng: random.Random) -> dict[str, Any]:
    """The item log's share of a forget, through its contract (``Log``): a delete written, and
    read by another reader that had read everything before it, for :data:`SAMPLES` more random
    items. (Their chunks stay in the indexes, where a query skips an item no longer stored.)"""
    log = memory.backend.log(memory.agent_id, "items")
    reader = memory.backend.log(memory.agent_id, "items")
    token = reader.read().token
    write: list[float] = []
    read: list[float] = []
    for item_id in rng.sample(ids, SAMPLES):
        started = time.perf_counter()
        log.write(LogChange(delete=[item_id]))
        write.append(time.perf_counter() - started)
        started = time.perf_counter()
        found = reader.read(token)
        read.append(time.perf_counter() - started)
        assert not found.reset and list(found.deleted) == [item_id]
        token = found.token
    return {"write": percentiles_ms(write), "read_by_another": percentiles_ms(read)}


def compaction_s(memory: AgentMemory) -> float:
    """Seconds of one compaction of the file log as it stands (a rewrite with its live records)."""
    log = memory.backend.log(memory.agent_id, "items")
    with log.jsonl.locked():  # type: ignore[attr-defined] - the file backend's log
        log._held_ids()  # type: ignore[attr-defined]
        started = time.perf_counter()
        log._compact()  # type: ignore[attr-defined]
        return time.perf_counter() - started


def directory_delete(backend: str, corpus: list[tuple[str, str, str]], cached: CachedEmbedder) -> dict[str, Any]:
    """Create :data:`DIRECTORY_FILES` files through the memory tool, index them, time the delete."""
    memory = AgentMemory("claude", backend=backend, config=DEFERRED)
    real = _cache_embeddings(memory, cached)
    tool = AgentMemoryTool(memory)
    for n in range(DIRECTORY_FILES):
        _, _, text = corpus[n % len(corpus)]
        answer = tool.tool_result({"type": "tool_use", "id": f"c{n}", "name": "memory", "input": {
            "command": "create", "path": f"/memories/project/note_{n:04d}.md", "file_text": text}})
        assert not answer.get("is_error"), answer
    memory.flush_index()
    index_embedder(memory.config).embedder = real  # a delete embeds nothing
    started = time.perf_counter()
    answer = tool.tool_result({"type": "tool_use", "id": "d", "name": "memory",
                               "input": {"command": "delete", "path": "/memories/project"}})
    seconds = time.perf_counter() - started
    assert answer["content"] == "Successfully deleted /memories/project", answer
    assert tool.files() == {} and len(memory) == 0
    memory.close()
    return {"files": DIRECTORY_FILES, "delete_s": round(seconds, 3),
            "per_file_ms": round(1000 * seconds / DIRECTORY_FILES, 3)}


def run_backend(name: str, backend: str, sizes: Sequence[int], corpus: list[tuple[str, str, str]],
                cached: CachedEmbedder) -> dict[str, Any]:
    rng = random.Random(27)
    memory = AgentMemory("forget", backend=backend, config=DEFERRED)
    real = _cache_embeddings(memory, cached)
    rows: dict[str, Any] = {}
    stored = 0
    for n in sizes:
        count = n - len(memory)  # the forgets of the size before left fewer than it had
        build_s = grow(memory, stored, count, corpus)
        stored += count
        row = {"build_s": round(build_s, 1), **forgets(memory, rng)}
        rows[str(n)] = row
        print(f"{name}: {n:,} items, forget p50 {row['forget_ms']['p50']} ms (built in {build_s:.0f} s)",
              file=sys.stderr)
    result: dict[str, Any] = {"sizes": rows}
    if name == "files":
        result["compaction_s_at_largest"] = round(compaction_s(memory), 3)
    index_embedder(memory.config).embedder = real
    memory.clear()
    memory.close()
    result["directory_delete"] = directory_delete(backend, corpus, cached)
    print(f"{name}: delete of a directory of {DIRECTORY_FILES:,} files: {result['directory_delete']['delete_s']} s",
          file=sys.stderr)
    return result


def print_table(results: dict[str, Any]) -> None:
    for name, backend in results["backends"].items():
        rows = backend["sizes"]
        sizes = sorted(rows, key=int)
        print(f"{name}\nms, p50 / p95 / max          " + "  ".join(f"{int(n):>22,}" for n in sizes) + "   items")
        for label, key in (("forget", ("forget_ms",)), ("item log: delete", ("item_log_delete_ms", "write")),
                           ("item log: another reader", ("item_log_delete_ms", "read_by_another"))):
            cells = []
            for n in sizes:
                figure = rows[n]
                for part in key:
                    figure = figure[part]
                cells.append(f"{figure['p50']:>6.1f} / {figure['p95']:>6.1f} / {figure['max']:>6.1f}")
            print(f"{label:<29}" + "  ".join(cells))
        delete = backend["directory_delete"]
        print(f"delete of a directory of {delete['files']:,} files: {delete['delete_s']} s "
              f"({delete['per_file_ms']} ms a file)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", DEFAULT_DATA)))
    parser.add_argument("--sizes", type=int, nargs="+", default=list(DEFAULT_SIZES))
    parser.add_argument("--backends", nargs="+", choices=("files", "postgres"), default=["files", "postgres"])
    parser.add_argument("--postgres-url", default=None,
                        help="A database to measure in (its agents 'forget' and 'claude' are emptied); "
                             "default: a pgserver started here.")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args(argv)
    corpus = load_corpus(args.data)
    cached = CachedEmbedder(None)
    results: dict[str, Any] = {"date": datetime.now(UTC).date().isoformat(), "samples": SAMPLES,
                               "corpus_unique_texts": len(corpus), "load_average_start": os.getloadavg()[0],
                               "backends": {}}
    root = Path(tempfile.mkdtemp(prefix="agent-memory-forget-"))
    server = None
    try:
        for name in args.backends:
            if name == "files":
                backend = str(root / "memory")
            elif args.postgres_url:
                backend = args.postgres_url
            else:
                from agent_memory.testing import PostgresServer

                server = PostgresServer(root / "postgres").start()
                backend = server.new_database("am_forget")
            results["backends"][name] = run_backend(name, backend, sorted(args.sizes), corpus, cached)
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(root, ignore_errors=True)
    results["load_average_end"] = os.getloadavg()[0]
    results["embeddings_computed"] = cached.computed
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print_table(results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
