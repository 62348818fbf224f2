"""The LangGraph store (``AgentMemoryStore``) under batched operations (issue 27, item 2): what
3,000 operations cost, and whether one operation costs more in a larger store.

    python benchmarks/bench_langgraph_store.py [--data DIR] [--ops 3000] [--sizes 300,3000] [--runs 40] [--seed 7]
        [--parts batched,sizes] [--out FILE]

Documents are real texts (HotpotQA paragraphs of ``../shared/data``), ``{"text": …, "kind": …,
"n": …}``, ten to a namespace ``("users", "u<i>", "memories")``, in a fresh memory directory
(files backend, default ``MemoryConfig``: embedded Chroma, all-MiniLM-L6-v2, hybrid search).

- ``batched``: ``--ops`` operations through ``store.batch`` in batches of 50, drawn from a seeded
  generator, into an empty store: 50% puts (one in five updates an existing key), 30% gets, 15%
  searches of one namespace without a query (a ``kind`` filter), 5% searches of one namespace
  with a query. The whole run's wall time (most of it embedding the documents: the machine's
  load shows in it).
- ``sizes``: for each store size of ``--sizes`` (documents, stored first with batched puts):
  ``reads_s``, the wall time of ``--ops`` batched reads that embed nothing (60% gets, 30%
  searches of one namespace without a query, 10% ``list_namespaces`` of one user's prefix), and
  ``per_op_ms``, the p50
  and p95 in milliseconds of one ``get``, one ``put`` of a new key, one ``put`` updating a key,
  one ``search`` of a namespace without a query, and one with a query (each through the public
  API, ``--runs`` calls each). A per-operation cost independent of the store's size shows as
  equal figures at every size.

Writes ``benchmarks/results/langgraph_store.json`` and prints it. It runs the adapter through its
public API only, so the same script measures an older version (``PYTHONPATH`` to its checkout).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.append(str(ROOT))

from langgraph.store.base import GetOp, ListNamespacesOp, MatchCondition, Op, PutOp, SearchOp  # noqa: E402

from agent_memory import AgentMemory  # noqa: E402
from agent_memory.integrations.langgraph_store import AgentMemoryStore  # noqa: E402

PER_NAMESPACE = 10
BATCH = 50
KINDS = ("preference", "travel", "health", "work")


def paragraphs(data: Path, n: int) -> list[str]:
    """Real texts: HotpotQA context paragraphs (repeated with a counter when there are fewer than ``n``)."""
    out: list[str] = []
    for path in sorted((data / "hotpotqa").glob("*.json")):
        for row in json.loads(path.read_text(encoding="utf-8")):
            for title, sentences in row.get("context", []):
                out.append(f"{title}: {' '.join(sentences)}")
    if not out:
        raise SystemExit(f"no HotpotQA paragraphs under {data}")
    return [out[i % len(out)] if i < len(out) else f"{out[i % len(out)]} ({i})" for i in range(n)]


def namespace(n: int) -> tuple[str, ...]:
    """Document ``n``'s namespace: ten documents in each, so a namespace holds as many in a
    larger store."""
    return ("users", f"u{n // PER_NAMESPACE}", "memories")


def document(texts: list[str], n: int) -> dict[str, Any]:
    return {"text": texts[n % len(texts)][:600], "kind": KINDS[n % len(KINDS)], "n": n}


def fill(store: AgentMemoryStore, texts: list[str], start: int, stop: int) -> None:
    """Put documents ``start`` to ``stop`` (keys ``k<n>``), in batches."""
    ops: list[Op] = [PutOp(namespace(n), f"k{n}", document(texts, n)) for n in range(start, stop)]
    for first in range(0, len(ops), BATCH):
        store.batch(ops[first:first + BATCH])


def batched(store: AgentMemoryStore, texts: list[str], queries: list[str], *, ops: int, seed: int) -> dict[str, Any]:
    """``ops`` random operations in batches of :data:`BATCH`; the store starts empty."""
    rng = random.Random(seed)
    stored: list[int] = []
    next_key = 0
    planned: list[tuple[str, Op]] = []
    for _ in range(ops):
        roll = rng.random()
        if roll < 0.5 or not stored:
            if stored and rng.random() < 0.2:
                n = rng.choice(stored)
                planned.append(("update", PutOp(namespace(n), f"k{n}", document(texts, n + 1))))
            else:
                planned.append(("put", PutOp(namespace(next_key), f"k{next_key}", document(texts, next_key))))
                stored.append(next_key)
                next_key += 1
        elif roll < 0.8:
            n = rng.choice(stored)
            planned.append(("get", GetOp(namespace(n), f"k{n}")))
        elif roll < 0.95:
            planned.append(("search", SearchOp(namespace(rng.choice(stored)), filter={"kind": rng.choice(KINDS)},
                                               limit=10)))
        else:
            planned.append(("query", SearchOp(namespace(rng.choice(stored)), query=rng.choice(queries), limit=5)))
    counts: dict[str, int] = {}
    for kind, _ in planned:
        counts[kind] = counts.get(kind, 0) + 1
    started = time.perf_counter()
    for first in range(0, len(planned), BATCH):
        store.batch([op for _, op in planned[first:first + BATCH]])
    return {"ops": ops, "batch": BATCH, "counts": counts, "seconds": round(time.perf_counter() - started, 2),
            "documents_after": len(stored)}


def reads(store: AgentMemoryStore, size: int, *, ops: int, seed: int) -> float:
    """Seconds for ``ops`` batched reads (nothing embedded) in a store of ``size`` documents."""
    rng = random.Random(seed)
    planned: list[Op] = []
    for _ in range(ops):
        roll, n = rng.random(), rng.randrange(size)
        if roll < 0.6:
            planned.append(GetOp(namespace(n), f"k{n}"))
        elif roll < 0.9:
            planned.append(SearchOp(namespace(n), filter={"kind": rng.choice(KINDS)}, limit=10))
        else:
            user = namespace(n)[:2]
            planned.append(ListNamespacesOp(match_conditions=(MatchCondition("prefix", user),), limit=20, offset=0))
    started = time.perf_counter()
    for first in range(0, len(planned), BATCH):
        store.batch(planned[first:first + BATCH])
    return round(time.perf_counter() - started, 3)


def timed(call: Callable[[int], object], runs: int) -> dict[str, float]:
    samples = []
    for i in range(runs):
        started = time.perf_counter()
        call(i)
        samples.append((time.perf_counter() - started) * 1000)
    samples.sort()
    return {"p50": round(statistics.median(samples), 2), "p95": round(samples[int(0.95 * (len(samples) - 1))], 2)}


def per_op(store: AgentMemoryStore, texts: list[str], queries: list[str], size: int, runs: int) -> dict[str, Any]:
    """Per-operation latencies in a store of ``size`` documents (``k0`` … ``k<size-1>``)."""
    base = size + 1_000_000
    return {
        "get": timed(lambda i: store.get(namespace(i * 7919 % size), f"k{i * 7919 % size}"), runs),
        "put_new": timed(lambda i: store.put(namespace(i), f"new{base + i}", document(texts, i)), runs),
        "put_update": timed(lambda i: store.put(namespace(i * 104729 % size), f"k{i * 104729 % size}",
                                                document(texts, i + 3)), runs),
        "search_no_query": timed(lambda i: store.search(namespace(i * 7919 % size), filter={"kind": KINDS[i % 4]},
                                                        limit=10), runs),
        "search_query": timed(lambda i: store.search(namespace(i * 7919 % size), query=queries[i % len(queries)],
                                                     limit=5), runs),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=Path(os.environ.get("AGENT_MEMORY_DATA", ROOT.parent / "shared" / "data")))
    parser.add_argument("--ops", type=int, default=3_000)
    parser.add_argument("--sizes", default="300,3000")
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--parts", default="batched,sizes", help="which parts to run (comma-separated)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "langgraph_store.json")
    args = parser.parse_args()
    sizes = [int(part) for part in args.sizes.split(",") if part]
    texts = paragraphs(args.data, max([args.ops, *sizes]) + 10)
    queries = [" ".join(text.split()[:6]) for text in texts[:200:7]]
    load_before = os.getloadavg()[0]
    result: dict[str, Any] = {"python": platform.python_version(), "cpus": os.cpu_count(),
                              "load_average_1min_before": round(load_before, 2)}
    with tempfile.TemporaryDirectory() as tmp:
        AgentMemory("warmup", Path(tmp) / "warmup").store("Load the embedding model before anything is timed.")
        if "batched" in args.parts:
            store = AgentMemoryStore(AgentMemory("batched", Path(tmp) / "batched"))
            result["batched"] = batched(store, texts, queries, ops=args.ops, seed=args.seed)
            print(f"batched: {result['batched']}", file=sys.stderr)
        if "sizes" not in args.parts:
            sizes = []
        result["sizes"] = {}
        store = AgentMemoryStore(AgentMemory("sizes", Path(tmp) / "sizes"))
        filled = 0
        for size in sizes:
            fill(store, texts, filled, size)
            filled = size
            result["sizes"][str(size)] = {"reads_s": reads(store, size, ops=args.ops, seed=args.seed),
                                          "per_op_ms": per_op(store, texts, queries, size, args.runs)}
            print(f"size {size}: {result['sizes'][str(size)]}", file=sys.stderr)
    result["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
