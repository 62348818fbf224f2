"""Exact-key look-ups: does ``query(key)`` bring back a chunk that holds the key?

Agents query by names, ids, e-mail addresses, error codes and titles they read in an earlier
result. A sentence-embedding model knows little of such strings, so this measures what a user feels
when the dense ranking is noise: real record files stored as an agent's tool results, then each key
queried alone.

Run from the project root::

    .venv/bin/python benchmarks/bench_key_lookup.py --data ../shared/data --out benchmarks/results/key_lookup.json

What is stored, in one memory per backend (files, and ``memory://``):

- the 11 tables of the Chinook database (``sqlite/*.sqlite``), each as one ``database_result``
  (``SELECT * FROM <table>``, rows as JSON objects): 5 to 8,715 rows, up to ~600 KB;
- every distinct tool result of the tau-bench airline runs (``traces/tau_bench/*.json``): user
  profiles, reservations, flight searches (JSON), as ``action_result`` items.

The keys (fixed by the data, no randomness): 20 evenly spaced distinct values of each key-like
column of Chinook (artist names, album and track titles, customer and employee e-mails, last
names, companies, billing addresses, genre and playlist names) and 20 of each key-like string of
the tau-bench results (user ids, reservation ids, e-mails, flight numbers, found by pattern),
each kept only if some stored item's indexed text holds it. A look-up succeeds at *k* when one of the first *k* hits of
``query(key, limit=k)`` shows a chunk that holds the key (case-folded).

Baseline: plain BM25 (bm25s, its defaults, lower case, no stemmer) over the same items' indexed
text cut into 1,500-character chunks, top 3 chunks: what a keyword-only tool finds.

``--previous REV``: also run the same look-ups with the library of git revision ``REV`` (exported
into a temporary directory put first on ``PYTHONPATH``: ``revisions.py``), in the same run, and
report both.
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import json  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from revisions import at_revision, head_revision  # noqa: E402 - a sibling module (benchmarks/ is on sys.path)

PROJECT_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = Path(os.environ.get("AGENT_MEMORY_DATA", PROJECT_ROOT.parent / "shared" / "data"))
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "key_lookup.json"

KEY_COLUMNS: dict[str, tuple[str, ...]] = {
    "Artist": ("Name",),
    "Album": ("Title",),
    "Track": ("Name",),
    "Customer": ("Email", "LastName", "Company"),
    "Employee": ("Email", "LastName"),
    "Invoice": ("BillingAddress",),
    "Genre": ("Name",),
    "Playlist": ("Name",),
}
"""The Chinook columns whose values an agent would look up by name."""


TAU_PATTERNS: dict[str, str] = {
    "user_id": r'"user_id": "([a-z]+_[a-z]+_\d{4})"',
    "reservation_id": r'"reservation_id": "([A-Z0-9]{6})"',
    "email": r'"email": "([^"@]+@example\.com)"',
    "flight_number": r'"flight_number": "([A-Z]{3}\d{3})"',
}
"""Key-like strings of the tau-bench tool results, found by pattern."""

KEYS_PER_KIND = 20
"""Keys taken of each kind (column or pattern), evenly spaced over its distinct values in order."""


def evenly(values: list[str], n: int = KEYS_PER_KIND) -> list[str]:
    """``n`` of ``values`` at evenly spaced positions (all of them when there are fewer)."""
    if len(values) <= n:
        return values
    return [values[position * len(values) // n] for position in range(n)]

MIN_KEY_CHARS = 4
"""Shorter values (``"Pop"``, ``"TV"``) are words, not keys."""

BM25_CHUNK_CHARS = 1_500
"""The baseline's chunk size, in characters."""


@dataclass(frozen=True)
class Item:
    """One stored result: its content (JSON-ready), type and source."""

    content: Any
    type: str
    source: str


def load_items(data: Path) -> list[Item]:
    """The Chinook tables and the distinct tau-bench tool results, in a fixed order."""
    items: list[Item] = []
    for database in sorted(data.glob("sqlite/*.sqlite")):
        conn = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        conn.row_factory = sqlite3.Row
        tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
        for table in tables:
            rows = [dict(row) for row in conn.execute(f'SELECT * FROM "{table}"')]
            items.append(Item(rows, "database_result", f"sqlite://{database.stem}/{table}"))
        conn.close()
    seen: set[str] = set()
    for trace in sorted(data.glob("traces/tau_bench/*.json")):
        for run in json.loads(trace.read_text(encoding="utf-8")):
            for message in run["traj"]:
                content = message.get("content")
                if message.get("role") != "tool" or not isinstance(content, str) or not content.strip() \
                        or content in seen:
                    continue
                seen.add(content)
                try:
                    parsed: Any = json.loads(content)
                except ValueError:
                    parsed = content
                items.append(Item(parsed, "action_result", f"tau_bench:{message.get('name', 'tool')}"))
    return items


def load_keys(data: Path, items: list[Item]) -> list[tuple[str, str]]:
    """``(kind, key)`` pairs, fixed by the data (see the module docstring)."""
    keys: list[tuple[str, str]] = []
    for item in items:
        table = item.source.rpartition("/")[2]
        if item.type != "database_result" or table not in KEY_COLUMNS:
            continue
        for column in KEY_COLUMNS[table]:
            values = list(dict.fromkeys(str(row[column]) for row in item.content if row.get(column)))
            keys += [(f"chinook.{table}.{column}", value) for value in evenly(values)]
    texts = [json.dumps(item.content) for item in items if item.type == "action_result"]
    for kind, pattern in TAU_PATTERNS.items():
        found = list(dict.fromkeys(match for text in texts for match in re.findall(pattern, text)))
        keys += [(f"tau_bench.{kind}", value) for value in evenly(found)]
    return [(kind, key) for kind, key in dict.fromkeys(keys) if len(key) >= MIN_KEY_CHARS]


def indexed_texts(items: list[Item]) -> list[str]:
    """Each item's text as the memory indexes it (JSON as one line per row or leaf)."""
    from agent_memory.transforms import raw_text

    texts = []
    for item in items:
        if isinstance(item.content, str):
            texts.append(item.content)
        else:
            text = raw_text(item.content, "json", json_format="lines", binary=None)
            texts.append(text or "")
    return texts


def bm25_baseline(texts: list[str], keys: list[tuple[str, str]], k: int) -> dict[str, Any]:
    """Plain BM25 over 1,500-character chunks: the share of keys with a top-``k`` chunk holding it."""
    import bm25s

    chunks = [text[start : start + BM25_CHUNK_CHARS] for text in texts for start in range(0, len(text), BM25_CHUNK_CHARS)]
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(chunks, stopwords="en", show_progress=False), show_progress=False)
    found = 0
    for _, key in keys:
        tokens = bm25s.tokenize([key], stopwords="en", show_progress=False)
        if not tokens.vocab:
            continue
        results, _ = retriever.retrieve(tokens, k=min(k, len(chunks)), show_progress=False)
        found += any(key.casefold() in chunks[int(n)].casefold() for n in results[0])
    return {"found_at_3": found, "keys": len(keys), "chunk_chars": BM25_CHUNK_CHARS}


def run_memory(url: str, items: list[Item], keys: list[tuple[str, str]]) -> dict[str, Any]:
    """Store every item into a fresh memory at ``url``, then look each key up: found at 1 and 3,
    per kind, the misses, the time to store (s) and per look-up (ms)."""
    from agent_memory import AgentMemory

    memory = AgentMemory("key-lookup", url)
    started = time.perf_counter()
    for item in items:
        memory.store(item.content, type=item.type, source=item.source)
    store_s = time.perf_counter() - started
    at_1 = at_3 = 0
    per_kind: dict[str, list[int]] = {}
    misses: list[str] = []
    latencies: list[float] = []
    for kind, key in keys:
        started = time.perf_counter()
        hits = memory.query(key, limit=3)
        latencies.append((time.perf_counter() - started) * 1000)
        holds = [key.casefold() in (hit.chunk or "").casefold() for hit in hits]
        at_1 += bool(holds[:1] and holds[0])
        at_3 += any(holds)
        tally = per_kind.setdefault(kind, [0, 0])
        tally[0] += any(holds)
        tally[1] += 1
        if not any(holds):
            misses.append(key)
    memory.close()
    latencies.sort()
    return {
        "found_at_1": at_1, "found_at_3": at_3, "keys": len(keys),
        "per_kind": {kind: {"found_at_3": found, "keys": n} for kind, (found, n) in sorted(per_kind.items())},
        "store_s": round(store_s, 1),
        "query_ms_p50": round(latencies[len(latencies) // 2], 1),
        "query_ms_p95": round(latencies[int(len(latencies) * 0.95)], 1),
        "misses": misses[:40],
    }


def measure(data: Path, backends: list[str]) -> dict[str, Any]:
    """Every figure of this library (the one on ``sys.path``) for ``backends`` (``files``, ``memory``)."""
    items = load_items(data)
    texts = indexed_texts(items)
    keys = [(kind, key) for kind, key in load_keys(data, items)
            if any(key.casefold() in text.casefold() for text in texts)]
    results: dict[str, Any] = {"items": len(items), "keys": len(keys), "backends": {}}
    for backend in backends:
        with tempfile.TemporaryDirectory(prefix="bench-key-lookup-") as tmp:
            url = tmp if backend == "files" else f"memory://bench-key-lookup-{os.getpid()}"
            print(f"[{backend}] storing {len(items)} items, then {len(keys)} look-ups", file=sys.stderr)
            results["backends"][backend] = run_memory(url, items, keys)
    results["bm25_baseline"] = bm25_baseline(texts, keys, k=3)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--backends", default="files,memory", help="comma-separated: files, memory")
    parser.add_argument("--previous", metavar="REV", help="also measure the library of this git revision")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    current = measure(args.data, backends)
    if args.measure_only:
        args.out.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
        return
    import agent_memory

    report: dict[str, Any] = {"library": str(Path(agent_memory.__file__).parent), "revision": head_revision(),
                              "load_average_1min": round(os.getloadavg()[0], 2), "current": current}
    if args.previous:
        report["previous"] = {"revision": args.previous,
                              **at_revision(__file__, args.previous, ["--data", str(args.data), "--backends", args.backends])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    for label, figures in [("current", current), ("previous", report.get("previous"))]:
        if figures is None:
            continue
        for backend, result in figures["backends"].items():
            print(f"{label:8} {backend:6} found@1 {result['found_at_1']}/{result['keys']}  "
                  f"found@3 {result['found_at_3']}/{result['keys']}  query p50 {result['query_ms_p50']} ms  "
                  f"store {result['store_s']} s")
    baseline = current["bm25_baseline"]
    print(f"bm25 1,500-char chunks found@3 {baseline['found_at_3']}/{baseline['keys']}")


if __name__ == "__main__":
    main()
