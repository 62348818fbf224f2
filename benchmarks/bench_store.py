"""Storing large real results, measured where users feel it (issue #38, item 6): how long
``AgentMemory.store`` takes, how soon a stored item is found by meaning (and whether by keyword at
once), how fast the model embeds, how fast queries answer, and what one agent step with a 1 MB
result waits for and writes; on files, Postgres and ``memory://``, beside the previous main in the
same run.

Run from the project root (about 40 minutes on 2 shared cores, most of it the previous main
embedding on the store path; ``--max-items 3 --backends memory --agent-steps 0`` is a quick look)::

    .venv/bin/python benchmarks/bench_store.py --data ../shared/data --previous 85c2a0b

What is stored: the real large results of ``../shared/data``, 22 items, one after another, each
into one fresh memory per backend, with the default ``MemoryConfig`` except ``query_wait_s=0``
where the version has it (so the query right after ``store`` shows what is found *at once*,
without waiting for the item's vectors; the previous main has no such wait):

- the 6 largest readability pages (``webpages/readability/*/source.html``, 0.77-1.6 MB) as
  ``web_content`` / ``text/html``;
- the 4 largest tables of the Chinook database (``sqlite/Chinook_Sqlite.sqlite``) that hold words
  (``SELECT * FROM <table>``, rows as JSON objects) as ``database_result`` JSON data;
- a Chinook query result as JSON rows (every playlist's tracks, joined: 8,715 rows, 2.3 MB);
- 3 Chinook query results as CSV text (every track; the invoice lines joined with their invoice,
  customer and track; the tracks joined with album, artist and genre) as ``database_result`` /
  ``text/csv``;
- the 4 largest distinct tool results of the smolagents GAIA runs (``tool-response`` messages) and
  the 4 largest of the TapeAgents tapes (page and search-result observations), as ``action_result``.

**One at a time** (per backend; the figures the ratios compare). Per item:

- ``store``: the call's wall time, in ms;
- ``found at once``: right after ``store`` returns, the default ``query(sentence, limit=10)``
  (keyword and dense rankings fused) returns the item; ``first_query_ms`` is that query's time
  (it puts a pending item's chunks into the keyword index, in this code);
- ``found by meaning``: ``query(sentence, limit=10, ranking="similarity")`` (the dense ranking
  alone: no keyword can find the item there) is asked every 0.2 s until it returns the item; the
  seconds from the start of ``store`` (``null`` when not within 120 s);
- the *sentence* is a sentence of the item's own text near its start (inside the part any version
  embeds): the first sentence of 10-40 words of the page's paragraphs, a row of the table (its
  values), a CSV line, the first sentence of 8-60 words of a trace result.

Then ``flush_index()`` (whatever embedding was still pending), the chunks in the vector index (read
from the index: the Chroma collection, the in-process matrix, Postgres's ``am_vectors``) and the
**embedding throughput**: chunk texts the library's embedder embedded per second of the time it
spent embedding them (:class:`EmbedCounter`: every ``embed`` of the embedder classes of
``agent_memory.embeddings``, on every thread: the previous main's ``SentenceTransformerEmbedder``
run by Chroma's embedding function, Postgres's and ``memory://``'s indexes on the store's thread;
this code's ``OnnxEmbedder`` run by the indexing thread; query texts, embedded by
``embed_query``, left out). This code's ``Indexed`` notices (chunks kept after near-duplicates
are dropped, seconds of embedding and writing) are recorded beside it. Then **query latency**:
every item's sentence with the default ``query(limit=5)``, twice after one warm-up query, p50 /
p95 in ms, and how many found their item.

**Back to back** (this code only: in the previous main ``store`` embeds before it returns, so its
stores are the same one at a time or not): every item stored into a fresh memory without waiting,
while the indexing thread embeds the earlier ones on the same 2 cores; ``store`` p50 / p95 / max,
the seconds until ``flush_index()`` returns from the first ``store`` (everything embedded), the
throughput as above, and how many items the dense ranking alone then finds.

**Agent step**: a ``MemoryAgent`` against the loopback ``FakeLLMServer`` fetches the 3 largest
pages (1.16-1.6 MB), one per step. With the default ``MemoryConfig``: the wall time of each step
(from one LLM call's notice to the next: the tool reading the page, the memory storing it and
journaling the result, the prompt, the loopback call) beside a plain write + fsync of the same
bytes to a file. With ``index_on_store=False`` (the durable path alone): the bytes the process
wrote per step (``wchar`` of ``/proc/self/io``: every ``write``, whatever the thread) and the bytes
the event journal holds for the steps' tool results (``events.sqlite3``'s payloads).

``--previous REV``: the same measurement, in the same run, by this script in a subprocess with the
library of git revision ``REV`` (exported with ``git archive`` into a temporary directory first on
``PYTHONPATH``, ``benchmarks/revisions.py``), interleaved: each backend is measured by this code,
then by ``REV``, then the next backend (the load other jobs put on the machine drifts over a run;
each backend's load average at its start and end is recorded). Postgres is the same server, a new
database each time. Ratios are current / previous; ``targets`` checks issue #38's: ``store`` p95 at most 100 ms for every
result up to 2.5 MB on each backend, a page of 1 MB or more found by meaning within 10 s of its
``store``, and embedding throughput at least 3x the previous main's. Timings are wall-clock on this
machine (2 cores, shared).
"""

from __future__ import annotations

import os

os.environ["OPENBLAS_NUM_THREADS"] = "1"
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import argparse  # noqa: E402
import csv  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import re  # noqa: E402
import sqlite3  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Iterator  # noqa: E402
from contextlib import contextmanager  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from html.parser import HTMLParser  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import store_agent_steps  # noqa: E402 - a sibling module
from revisions import PROJECT_ROOT, at_revision, head_revision  # noqa: E402 - a sibling module
from store_agent_steps import agent_steps  # noqa: E402

DEFAULT_DATA = Path(os.environ.get("AGENT_MEMORY_DATA", PROJECT_ROOT.parent / "shared" / "data"))
DEFAULT_OUT = PROJECT_ROOT / "benchmarks" / "results" / "store.json"
BACKENDS = ("files", "postgres", "memory")

PAGES = 6
TABLES = 4
TRACE_RESULTS = 4
STEP_PAGES = 3
"""Items of each kind (see the module docstring)."""

CSV_QUERIES = {
    "tracks": "SELECT * FROM Track",
    "invoice_lines": (
        "SELECT il.InvoiceLineId, i.InvoiceDate, c.FirstName, c.LastName, c.Country, t.Name AS Track, "
        "il.UnitPrice, il.Quantity FROM InvoiceLine il JOIN Invoice i ON i.InvoiceId = il.InvoiceId "
        "JOIN Customer c ON c.CustomerId = i.CustomerId JOIN Track t ON t.TrackId = il.TrackId "
        "ORDER BY il.InvoiceLineId"
    ),
    "tracks_by_artist": (
        "SELECT ar.Name AS Artist, al.Title AS Album, t.Name AS Track, g.Name AS Genre, t.Milliseconds "
        "FROM Track t JOIN Album al ON al.AlbumId = t.AlbumId JOIN Artist ar ON ar.ArtistId = al.ArtistId "
        "JOIN Genre g ON g.GenreId = t.GenreId ORDER BY ar.Name, al.Title, t.TrackId"
    ),
}
"""The CSV query results, by name."""

JSON_QUERIES = {
    "playlist_tracks": (
        "SELECT p.Name AS Playlist, t.TrackId, t.Name AS Track, al.Title AS Album, ar.Name AS Artist, "
        "g.Name AS Genre, m.Name AS MediaType, t.Composer, t.Milliseconds, t.Bytes, t.UnitPrice "
        "FROM PlaylistTrack pt JOIN Playlist p ON p.PlaylistId = pt.PlaylistId JOIN Track t ON t.TrackId = pt.TrackId "
        "JOIN Album al ON al.AlbumId = t.AlbumId JOIN Artist ar ON ar.ArtistId = al.ArtistId "
        "JOIN Genre g ON g.GenreId = t.GenreId JOIN MediaType m ON m.MediaTypeId = t.MediaTypeId "
        "ORDER BY pt.PlaylistId, pt.TrackId"
    ),
}
"""A Chinook query result stored as JSON rows: every playlist's tracks with their album, artist,
genre and media type (8,715 rows, 2.3 MB), the largest real result of the run, near issue #38's
2.5 MB bound."""

SENTENCE_ROW = 5
"""The table row, or CSV line, whose values are an item's sentence: near the start, inside the
part of the item every version embeds."""

POLL_S = 0.2
FOUND_DEADLINE_S = 120.0
"""How often ``found by meaning`` asks, and for how long at most, in seconds."""


@dataclass(frozen=True)
class Item:
    """One real result and how it is stored."""

    name: str
    kind: str
    """``page``, ``table_json``, ``table_csv``, ``trace``."""
    content: Any
    type: str
    media_type: str
    sentence: str
    """A sentence of its own text that a query by meaning should find it by."""

    @property
    def size_bytes(self) -> int:
        text = self.content if isinstance(self.content, str) else json.dumps(self.content, ensure_ascii=False)
        return len(text.encode("utf-8"))


# -- the items ---------------------------------------------------------------------------------
class _Paragraphs(HTMLParser):
    """The text of a page's ``<p>`` elements, in order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.paragraphs: list[str] = []
        self._depth = 0
        self._parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag == "p":
            self._depth += 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self._depth:
            self._depth -= 1
            if not self._depth:
                self.paragraphs.append(" ".join("".join(self._parts).split()))
                self._parts = []

    def handle_data(self, data: str) -> None:
        if self._depth:
            self._parts.append(data)


def first_sentence(text: str, *, min_words: int, max_words: int) -> str | None:
    """The first sentence of ``text`` with ``min_words`` to ``max_words`` words that reads as prose
    (no link, at least 85% letters and spaces), or ``None``."""
    for sentence in re.split(r"(?<=[.!?])\s+", " ".join(text.split())):
        letters = sum(ch.isalpha() or ch == " " for ch in sentence)
        if (min_words <= len(sentence.split()) <= max_words and "http" not in sentence and "](" not in sentence
                and letters >= 0.85 * len(sentence)):
            return sentence
    return None


def pages(data: Path, count: int) -> list[Item]:
    """The ``count`` largest readability pages, largest first."""
    paths = sorted((data / "webpages" / "readability").glob("*/source.html"), key=lambda p: (-p.stat().st_size, p))
    items = []
    for path in paths[:count]:
        html = path.read_text(encoding="utf-8", errors="replace")
        parser = _Paragraphs()
        parser.feed(html)
        sentence = next(filter(None, (first_sentence(p, min_words=10, max_words=40) for p in parser.paragraphs)), None)
        if sentence is None:
            raise SystemExit(f"{path}: no sentence of 10-40 words in its paragraphs")
        items.append(Item(f"page:{path.parent.name}", "page", html, "web_content", "text/html", sentence))
    return items


def _rows(db: sqlite3.Connection, sql: str) -> tuple[list[str], list[tuple[Any, ...]]]:
    cursor = db.execute(sql)
    return [column[0] for column in cursor.description], cursor.fetchall()


def _values(row: tuple[Any, ...]) -> str:
    return " ".join(str(value) for value in row if value is not None)


def tables(data: Path, count: int) -> list[Item]:
    """The ``count`` largest Chinook tables with text in their rows (not the tables of ids alone,
    which no query by meaning could find) as JSON rows, largest first; then the CSV query results."""
    db = sqlite3.connect(f"file:{data / 'sqlite' / 'Chinook_Sqlite.sqlite'}?mode=ro", uri=True)
    try:
        names = [name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        tables = {name: _rows(db, f'SELECT * FROM "{name}"') for name in names}
        worded = {name: [dict(zip(columns, row)) for row in rows] for name, (columns, rows) in tables.items()
                  if rows and any(isinstance(value, str) and re.search(r"[A-Za-z]{3}", value) for value in rows[0])}
        size = {name: len(json.dumps(content, ensure_ascii=False)) for name, content in worded.items()}
        items = []
        for name in sorted(worded, key=lambda n: (-size[n], n))[:count]:
            items.append(Item(f"json:{name}", "table_json", worded[name], "database_result", "application/json",
                              _values(tables[name][1][SENTENCE_ROW])))
        for name, sql in JSON_QUERIES.items():
            columns, rows = _rows(db, sql)
            items.append(Item(f"json:{name}", "table_json", [dict(zip(columns, row)) for row in rows],
                              "database_result", "application/json", _values(rows[SENTENCE_ROW])))
        for name, sql in CSV_QUERIES.items():
            columns, rows = _rows(db, sql)
            out = io.StringIO()
            writer = csv.writer(out, lineterminator="\n")
            writer.writerow(columns)
            writer.writerows(rows)
            items.append(Item(f"csv:{name}", "table_csv", out.getvalue(), "database_result", "text/csv",
                              _values(rows[SENTENCE_ROW])))
        return items
    finally:
        db.close()


def _smolagents_results(data: Path) -> Iterator[str]:
    for path in sorted((data / "traces" / "smolagents_gaia").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines():
            for message in json.loads(line)["intermediate_steps"]:
                if message.get("role") == "tool-response":
                    yield "".join(part.get("text", "") for part in message.get("content") or [])


def _tapeagents_results(data: Path) -> Iterator[str]:
    for path in sorted((data / "traces" / "tapeagents_gaia_workarena").rglob("*.json")):
        for step in json.loads(path.read_text(encoding="utf-8")).get("steps", []):
            if step.get("kind") == "page_observation":
                yield step.get("text") or ""
            elif step.get("kind") == "search_results_observation":
                yield "\n\n".join(f"{r.get('title')}\n{r.get('url')}\n{r.get('content')}"
                                  for r in step.get("serp") or [])


def trace_results(data: Path, count: int) -> list[Item]:
    """The ``count`` largest distinct tool results of each agent framework's traces that have a
    sentence to find them by."""
    items = []
    for source, results in (("smolagents", _smolagents_results(data)), ("tapeagents", _tapeagents_results(data))):
        chosen = 0
        for n, text in enumerate(sorted(set(results), key=lambda t: (-len(t), t))):
            sentence = first_sentence(text[:20_000], min_words=8, max_words=60)
            if sentence is None:
                continue
            items.append(Item(f"{source}:{n}", "trace", text, "action_result", "text/plain", sentence))
            chosen += 1
            if chosen == count:
                break
    return items


def load_items(data: Path) -> list[Item]:
    return [*pages(data, PAGES), *tables(data, TABLES), *trace_results(data, TRACE_RESULTS)]


# -- what the library embeds -------------------------------------------------------------------
EMBEDDER_CLASSES = ("SentenceTransformerEmbedder", "OnnxEmbedder")
"""The embedder classes of ``agent_memory.embeddings`` whose ``embed`` is counted (the ones a
version lacks are skipped: the previous main has only the first)."""


class EmbedCounter:
    """Counts and times the library's embedder on every thread of this process: each ``embed`` of
    the classes :data:`EMBEDDER_CLASSES`, the outermost call only (an ``OnnxEmbedder`` that hands
    its texts to its torch fallback is counted once), and none made inside ``embed_query`` (query
    texts, counted apart). So ``texts`` are the chunk texts the model embedded and ``seconds`` the
    wall time of those calls, whichever runtime ran them and on whichever thread (the caller's in
    the previous main, the indexing thread's in this code)."""

    def __init__(self) -> None:
        self.texts = 0
        self.seconds = 0.0
        self.query_texts = 0
        self.classes: list[str] = []
        self._lock = threading.Lock()
        self._local = threading.local()

    def install(self) -> None:
        """Wrap the classes (once per process)."""
        import agent_memory.embeddings as embeddings

        if self.classes:
            return

        for name in EMBEDDER_CLASSES:
            cls = getattr(embeddings, name, None)
            if cls is not None:
                self._wrap(cls)
                self.classes.append(name)
        if not self.classes:
            raise SystemExit(f"agent_memory.embeddings has none of {EMBEDDER_CLASSES}: nothing to count")

    def _wrap(self, cls: Any) -> None:
        embed, embed_query = cls.embed, cls.embed_query
        counter, local = self, self._local

        def counted_embed(embedder: Any, texts: Any, *args: Any, **kwargs: Any) -> Any:
            depth, querying = getattr(local, "depth", 0), getattr(local, "querying", 0)
            local.depth = depth + 1
            started = time.perf_counter()
            try:
                return embed(embedder, texts, *args, **kwargs)
            finally:
                local.depth = depth
                if not depth:
                    counter._add(len(texts), time.perf_counter() - started, query=bool(querying))

        def counted_query(embedder: Any, text: str, *args: Any, **kwargs: Any) -> Any:
            local.querying = getattr(local, "querying", 0) + 1
            try:
                return embed_query(embedder, text, *args, **kwargs)
            finally:
                local.querying -= 1

        cls.embed, cls.embed_query = counted_embed, counted_query

    def _add(self, texts: int, seconds: float, *, query: bool) -> None:
        with self._lock:
            if query:
                self.query_texts += texts
            else:
                self.texts += texts
                self.seconds += seconds

    def snapshot(self) -> tuple[int, float]:
        """(chunk texts embedded, seconds spent embedding them) so far."""
        with self._lock:
            return self.texts, self.seconds


EMBEDS = EmbedCounter()


class IndexedNotices:
    """An observer summing this code's ``Indexed`` notices (the previous main sends none)."""

    def __init__(self) -> None:
        self.batches = 0
        self.chunks = 0
        self.seconds = 0.0
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget what was heard so far (the warm-up's notice is not the items')."""
        with self._lock:
            self.batches, self.chunks, self.seconds = 0, 0, 0.0

    def on_notice(self, notice: Any) -> None:
        if getattr(notice, "kind", None) == "indexed":
            with self._lock:
                self.batches += 1
                self.chunks += int(notice.chunks_embedded)
                self.seconds += float(notice.seconds)

    def figures(self) -> dict[str, Any] | None:
        with self._lock:
            if not self.batches:
                return None
            return {"batches": self.batches, "chunks_kept": self.chunks, "seconds": round(self.seconds, 2)}


def background_indexing() -> bool:
    """Whether the library on ``sys.path`` indexes in the background (``store`` never embeds):
    its ``MemoryConfig`` has ``query_wait_s``."""
    from agent_memory import MemoryConfig

    return "query_wait_s" in MemoryConfig.model_fields


def bench_config() -> Any:
    """The default ``MemoryConfig``, with ``query_wait_s=0`` where the version has it."""
    from agent_memory import MemoryConfig

    return MemoryConfig(query_wait_s=0.0) if background_indexing() else MemoryConfig()


def chunks_in_index(memory: Any, backend: str, url: str | None) -> int | None:
    """The chunks the vector index holds, read from the index itself (``None`` when this version's
    index cannot be read that way). Reaches into internals: diagnostics only."""
    try:
        if backend == "postgres" and url is not None:
            import psycopg

            with psycopg.connect(url) as conn:
                row = conn.execute("SELECT count(*) FROM am_vectors").fetchone()
            return int(row[0]) if row else None
        index = memory.index
        if backend == "memory":
            live = getattr(index, "_live", None)
            if live is not None:
                return int(live.sum())
            rows = getattr(index, "_rows", None)
            return len(rows) if rows is not None else None
        collection = getattr(index, "collection", None)
        if collection is None and callable(getattr(index, "_using", None)):
            with index._using() as current:
                collection = current
        return int(collection.count()) if collection is not None else None
    except Exception as exc:  # noqa: BLE001 - another version's internals: not readable this way
        print(f"  (chunks in the {backend} index not readable: {type(exc).__name__}: {exc})", file=sys.stderr)
        return None


# -- measuring one backend ---------------------------------------------------------------------
def percentiles(samples_s: list[float]) -> dict[str, float | None]:
    """p50 / p95 / max of durations in seconds, in ms (nearest rank); ``None`` when there are none."""
    if not samples_s:
        return {"p50": None, "p95": None, "max": None}
    ordered = sorted(samples_s)

    def pick(q: float) -> float:
        return round(1000 * ordered[max(0, math.ceil(q * len(ordered)) - 1)], 1)

    return {"p50": pick(0.50), "p95": pick(0.95), "max": round(1000 * ordered[-1], 1)}


def _hit(memory: Any, item_id: str, sentence: str, *, limit: int, dense: bool) -> bool:
    options: dict[str, Any] = {"ranking": "similarity"} if dense else {}
    hits = memory.query(text=sentence, limit=limit, **options)
    return any(hit.item.id == item_id for hit in hits)


def found_by_meaning(memory: Any, item_id: str, sentence: str, started: float) -> float | None:
    """Seconds from ``started`` until the dense ranking alone returns the item (``None``: not
    within :data:`FOUND_DEADLINE_S`)."""
    while True:
        if _hit(memory, item_id, sentence, limit=10, dense=True):
            return round(time.perf_counter() - started, 3)
        if time.perf_counter() - started > FOUND_DEADLINE_S:
            return None
        time.sleep(POLL_S)


@contextmanager
def opened(backend: str, tmp: Path, postgres: Any, phase: str,
           observers: list[Any]) -> Iterator[tuple[Any, str | None]]:
    """A fresh memory on ``backend`` (:func:`bench_config`) for ``phase``, and its database URL
    (Postgres)."""
    from agent_memory import AgentMemory

    url: str | None = None
    config = bench_config()
    if backend == "files":
        memory = AgentMemory("bench", tmp / f"files-{phase}", config=config, observers=observers)
    elif backend == "postgres":
        url = postgres.new_database(f"bench_store_{phase.replace('-', '_')}")
        memory = AgentMemory("bench", backend=url, config=config, observers=observers)
    else:
        memory = AgentMemory("bench", backend=f"memory://bench-store-{os.getpid()}-{phase}", config=config,
                             observers=observers)
    try:
        yield memory, url
    finally:
        memory.close()


def _warm(memory: Any) -> float:
    """Open the index and load the model (the first use of each), apart from every timed figure;
    the seconds it took."""
    started = time.perf_counter()
    warm = memory.store("A short note to open the index and load the model.", type="custom", source="warm-up")
    _hit(memory, warm, "open the index", limit=5, dense=False)
    memory.flush_index()
    return round(time.perf_counter() - started, 2)


def _store(memory: Any, item: Item) -> tuple[str, float]:
    started = time.perf_counter()
    item_id = memory.store(item.content, type=item.type, media_type=item.media_type, source=item.kind, title=item.name)
    return item_id, time.perf_counter() - started


def _throughput(texts: int, seconds: float, chunks: int | None, notices: IndexedNotices) -> dict[str, Any]:
    return {
        "chunks_embedded": texts, "embed_s": round(seconds, 2),
        "chunks_per_s": round(texts / seconds, 1) if texts and seconds else None,
        "chunks_in_index": chunks, "indexed_notices": notices.figures(),
    }


def one_at_a_time(backend: str, items: list[Item], tmp: Path, postgres: Any) -> dict[str, Any]:
    """The items stored one after another, each found by meaning before the next is stored; then
    the throughput and query latency (see the module docstring)."""
    notices = IndexedNotices()
    with opened(backend, tmp, postgres, "one", [notices]) as (memory, url):
        warmup_s = _warm(memory)
        texts_before, embed_before = EMBEDS.snapshot()
        notices.reset()
        rows: list[dict[str, Any]] = []
        first_store = time.perf_counter()
        for item in items:
            started = time.perf_counter()
            item_id, store_s = _store(memory, item)
            asked = time.perf_counter()
            at_once = _hit(memory, item_id, item.sentence, limit=10, dense=False)
            first_query_s = time.perf_counter() - asked
            meaning = found_by_meaning(memory, item_id, item.sentence, started)
            rows.append({"item": item.name, "id": item_id, "size_bytes": item.size_bytes,
                         "store_ms": round(1000 * store_s, 1), "found_at_once": at_once,
                         "first_query_ms": round(1000 * first_query_s, 1), "found_by_meaning_s": meaning})
            print(f"  [{backend}] {item.name:34} {item.size_bytes / 1e6:5.2f} MB  store {1000 * store_s:9.1f} ms  "
                  f"at once {'yes' if at_once else 'no ':3} ({1000 * first_query_s:6.0f} ms)  by meaning "
                  f"{meaning if meaning is not None else '-'} s", file=sys.stderr, flush=True)
        flushing = time.perf_counter()
        memory.flush_index()
        flush_s = time.perf_counter() - flushing
        stored_s = time.perf_counter() - first_store
        texts_after, embed_after = EMBEDS.snapshot()
        throughput = _throughput(texts_after - texts_before, embed_after - embed_before,
                                 chunks_in_index(memory, backend, url), notices)
        memory.query(text="warm-up query before the timed passes", limit=5)
        latencies, found = [], 0
        for _ in range(2):
            for item, row in zip(items, rows):
                asked = time.perf_counter()
                found += _hit(memory, row["id"], item.sentence, limit=5, dense=False)
                latencies.append(time.perf_counter() - asked)
    found_s = sorted(row["found_by_meaning_s"] for row in rows if row["found_by_meaning_s"] is not None)
    return {
        "items": len(items),
        "warmup_s": warmup_s,
        "store_ms": percentiles([row["store_ms"] / 1000 for row in rows]),
        "found_at_once": sum(row["found_at_once"] for row in rows),
        "first_query_ms": percentiles([row["first_query_ms"] / 1000 for row in rows]),
        "found_by_meaning": len(found_s),
        "found_by_meaning_s": {"p50": found_s[(len(found_s) - 1) // 2] if found_s else None,
                               "max": found_s[-1] if found_s else None},
        "flush_index_s": round(flush_s, 2),
        "stored_and_indexed_s": round(stored_s, 2),
        "embedding": throughput,
        "query_ms": percentiles(latencies),
        "query_found_at_5": f"{found}/{len(latencies)}",
        "per_item": rows,
    }


def back_to_back(backend: str, items: list[Item], tmp: Path, postgres: Any) -> dict[str, Any]:
    """Every item stored without waiting while the indexing thread embeds the earlier ones; then
    everything flushed (see the module docstring)."""
    notices = IndexedNotices()
    with opened(backend, tmp, postgres, "burst", [notices]) as (memory, url):
        _warm(memory)
        texts_before, embed_before = EMBEDS.snapshot()
        notices.reset()
        first_store = time.perf_counter()
        stored = [_store(memory, item) for item in items]
        memory.flush_index()
        indexed_s = time.perf_counter() - first_store
        texts_after, embed_after = EMBEDS.snapshot()
        throughput = _throughput(texts_after - texts_before, embed_after - embed_before,
                                 chunks_in_index(memory, backend, url), notices)
        found = sum(_hit(memory, item_id, item.sentence, limit=10, dense=True)
                    for item, (item_id, _) in zip(items, stored))
    times = [seconds for _, seconds in stored]
    print(f"  [{backend}] back to back: store p95 {percentiles(times)['p95']} ms, max {percentiles(times)['max']} ms; "
          f"all embedded {indexed_s:.1f} s after the first store", file=sys.stderr, flush=True)
    return {
        "store_ms": percentiles(times),
        "store_ms_per_item": {item.name: round(1000 * seconds, 1) for item, (_, seconds) in zip(items, stored)},
        "all_indexed_s": round(indexed_s, 2),
        "embedding": throughput,
        "found_by_meaning_after_flush": f"{found}/{len(items)}",
    }


def measure_backend(backend: str, items: list[Item], postgres: Any) -> dict[str, Any]:
    load = round(os.getloadavg()[0], 2)
    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        figures = one_at_a_time(backend, items, Path(tmp), postgres)
        if background_indexing():
            figures["back_to_back"] = back_to_back(backend, items, Path(tmp), postgres)
    figures["load_average_1min"] = {"start": load, "end": round(os.getloadavg()[0], 2)}
    return figures


# -- one agent step with a large result (store_agent_steps) ----------------------------------------
def json_agent_steps(data: Path) -> dict[str, Any]:
    """:func:`store_agent_steps.json_agent_steps` on ``JSON_QUERIES["playlist_tracks"]``' rows."""
    db = sqlite3.connect(f"file:{data / 'sqlite' / 'Chinook_Sqlite.sqlite'}?mode=ro", uri=True)
    try:
        columns, rows = _rows(db, JSON_QUERIES["playlist_tracks"])
    finally:
        db.close()
    return store_agent_steps.json_agent_steps(columns, rows)


# -- the whole measurement -----------------------------------------------------------------------
def measure(data: Path, backends: list[str], max_items: int | None = None, steps: int = STEP_PAGES) -> dict[str, Any]:
    """Every figure of the library on ``sys.path`` for ``backends`` (the first ``max_items`` items:
    a quick look; ``None``: all), and the agent step over ``steps`` pages (0: none)."""
    import agent_memory

    EMBEDS.install()
    items = load_items(data)[:max_items]
    print(f"{len(items)} items, {sum(i.size_bytes for i in items) / 1e6:.1f} MB; library "
          f"{Path(agent_memory.__file__).parent}", file=sys.stderr)
    results: dict[str, Any] = {"library": str(Path(agent_memory.__file__).parent),
                               "config": repr(bench_config()), "background_indexing": background_indexing(),
                               "embedder_classes_counted": EMBEDS.classes,
                               "items": [{"name": i.name, "kind": i.kind, "size_bytes": i.size_bytes,
                                          "sentence": i.sentence} for i in items],
                               "backends": {}}
    postgres = None
    if "postgres" in backends:
        from agent_memory.testing import PostgresServer

        postgres = PostgresServer().start()
    try:
        for backend in backends:
            results["backends"][backend] = measure_backend(backend, items, postgres)
    finally:
        if postgres is not None:
            postgres.close()
    if steps:
        results["agent_step"] = agent_steps(data, steps)
        results["agent_step_json"] = json_agent_steps(data)
    return results


def _ratio(current: float | None, previous: float | None) -> float | None:
    return round(current / previous, 3) if current is not None and previous else None


RATIO_FIGURES: dict[str, Callable[[dict[str, Any]], float | None]] = {
    "store_p50": lambda b: b["store_ms"]["p50"],
    "store_p95": lambda b: b["store_ms"]["p95"],
    "store_max": lambda b: b["store_ms"]["max"],
    "found_by_meaning_p50": lambda b: b["found_by_meaning_s"]["p50"],
    "found_by_meaning_max": lambda b: b["found_by_meaning_s"]["max"],
    "chunks_per_s": lambda b: b["embedding"]["chunks_per_s"],
    "chunks_embedded": lambda b: b["embedding"]["chunks_embedded"],
    "query_p50": lambda b: b["query_ms"]["p50"],
    "query_p95": lambda b: b["query_ms"]["p95"],
}
"""The figures compared with the previous revision (current / previous), of the one-at-a-time phase."""


def ratios(current: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for backend, figures in current["backends"].items():
        before = previous["backends"].get(backend)
        if before is not None:
            out[backend] = {name: _ratio(pick(figures), pick(before)) for name, pick in RATIO_FIGURES.items()}
    now, then = current.get("agent_step"), previous.get("agent_step")
    if now and then:
        out["agent_step_ms"] = [_ratio(a, b) for a, b in zip(now["step_ms"], then["step_ms"])]
        out["agent_step_written_bytes"] = [_ratio(a, b) for a, b in zip(now["written_bytes_per_step"],
                                                                        then["written_bytes_per_step"])]
    now, then = current.get("agent_step_json"), previous.get("agent_step_json")
    if now and then and "step_ms" not in then:  # (a previous run before the 1 MB result was added had one size)
        out["agent_step_json_ms"] = {label: [_ratio(a, b) for a, b in zip(now[label]["step_ms"], then[label]["step_ms"])]
                                     for label in now if label in then}
    return out


STORE_TARGET_MS = 100.0
STORE_TARGET_MAX_BYTES = 2_500_000
MEANING_TARGET_S = 10.0
MEANING_TARGET_MIN_BYTES = 1_000_000
THROUGHPUT_TARGET = 3.0
STEP_TARGET_MS = 100.0
STEP_TARGET_MAX_BYTES = 1_100_000
"""Issue #38's targets (see the module docstring); an agent step with a result of about 1 MB (up
to 1.1 MB) waits on memory at most its write and fsync plus ``STEP_TARGET_MS``: the step's time
without the tool's own and the LLM call's (``memory_ms``; the gross step is reported beside);
larger results are reported beside."""


def targets(report: dict[str, Any]) -> dict[str, Any]:
    """Each of issue #38's targets, per backend, met or not, with the figure that decides it."""
    current = report["current"]
    sizes = {item["name"]: item["size_bytes"] for item in current["items"]}
    out: dict[str, Any] = {}
    for backend, figures in current["backends"].items():
        rows = [row for row in figures["per_item"] if row["size_bytes"] <= STORE_TARGET_MAX_BYTES]
        slow = {row["item"]: row["store_ms"] for row in rows if row["store_ms"] > STORE_TARGET_MS}
        burst = figures.get("back_to_back")
        slow_burst = {name: ms for name, ms in (burst or {}).get("store_ms_per_item", {}).items()
                      if sizes[name] <= STORE_TARGET_MAX_BYTES and ms > STORE_TARGET_MS}
        pages = [row["found_by_meaning_s"] for row in figures["per_item"]
                 if row["item"].startswith("page:") and row["size_bytes"] >= MEANING_TARGET_MIN_BYTES]
        ratio = report.get("ratios_current_over_previous", {}).get(backend, {}).get("chunks_per_s")
        out[backend] = {
            "store_p95_ms": figures["store_ms"]["p95"],
            "store_p95_met": figures["store_ms"]["p95"] is not None and figures["store_ms"]["p95"] <= STORE_TARGET_MS,
            "stores_over_100_ms": slow,
            "back_to_back_store_p95_ms": burst["store_ms"]["p95"] if burst else None,
            "back_to_back_stores_over_100_ms": slow_burst,
            "pages_of_1mb_found_by_meaning_s": pages,
            "found_by_meaning_met": bool(pages) and all(s is not None and s <= MEANING_TARGET_S for s in pages),
            "throughput_ratio": ratio,
            "throughput_met": ratio is not None and ratio >= THROUGHPUT_TARGET,
        }
    steps = []
    page_steps = current.get("agent_step")
    if page_steps:
        steps += [(f"page:{name}", size, ms, write) for name, size, ms, write in zip(
            page_steps["pages"], page_steps["page_bytes"], page_steps["memory_ms"], page_steps["write_and_fsync_ms"])]
    for label, rows in (current.get("agent_step_json") or {}).items():
        steps += [(f"json:{label}", rows["result_bytes"], ms, rows["write_and_fsync_ms"]) for ms in rows["memory_ms"]]
    if steps:
        over = [{"result": name, "bytes": size, "memory_ms": ms, "limit_ms": round(write + STEP_TARGET_MS, 1)}
                for name, size, ms, write in steps if ms > write + STEP_TARGET_MS]
        out["agent_step"] = {
            "steps": len(steps), "steps_up_to_1mb": sum(size <= STEP_TARGET_MAX_BYTES for _, size, _, _ in steps),
            "over_write_plus_100_ms": over,
            "met_up_to_1mb": not any(row["bytes"] <= STEP_TARGET_MAX_BYTES for row in over),
            "met_up_to_2_5mb": not over,
        }
    return out


def print_table(report: dict[str, Any]) -> None:
    for label in ("current", "previous"):
        figures = report.get(label)
        if figures is None:
            continue
        for backend, b in figures["backends"].items():
            e = b["embedding"]
            print(f"{label:8} {backend:8} store p50/p95/max {b['store_ms']['p50']}/{b['store_ms']['p95']}/"
                  f"{b['store_ms']['max']} ms  found at once {b['found_at_once']}/{b['items']}  by meaning "
                  f"{b['found_by_meaning']}/{b['items']} (p50 {b['found_by_meaning_s']['p50']} s, max "
                  f"{b['found_by_meaning_s']['max']} s)  {e['chunks_embedded']} chunks embedded, {e['chunks_per_s']} "
                  f"chunks/s  query p50/p95 {b['query_ms']['p50']}/{b['query_ms']['p95']} ms")
            burst = b.get("back_to_back")
            if burst:
                print(f"{'':8} {'':8} back to back: store p50/p95/max {burst['store_ms']['p50']}/"
                      f"{burst['store_ms']['p95']}/{burst['store_ms']['max']} ms, all embedded in "
                      f"{burst['all_indexed_s']} s, {burst['embedding']['chunks_per_s']} chunks/s")
        step = figures.get("agent_step")
        if step:
            print(f"{label:8} agent steps with pages of {', '.join(f'{s / 1e6:.2f}' for s in step['page_bytes'])} MB: "
                  f"{step['step_ms']} ms, of which the LLM call {step['model_call_ms']} ms, memory "
                  f"{step['memory_ms']} ms (write + fsync {step['write_and_fsync_ms']} ms); wrote "
                  f"{step['written_bytes_per_step']} bytes; the journal holds {step['journal_tool_result_bytes']:,} "
                  "bytes of tool results")
        for rows in (figures.get("agent_step_json") or {}).values():
            print(f"{label:8} agent steps with a {rows['result_bytes'] / 1e6:.2f} MB JSON query result "
                  f"({rows['rows']:,} rows): {rows['step_ms']} ms, of which the tool {rows['tool_ms']} ms, "
                  f"the LLM call {rows['model_call_ms']} ms, memory {rows['memory_ms']} ms "
                  f"(write + fsync {rows['write_and_fsync_ms']} ms); the agent thread's CPU but the tool's "
                  f"{rows.get('agent_thread_cpu_ms_without_tool')} ms")
    for backend, met in report.get("targets", {}).items():
        print(f"target   {backend:8} {met}")


def _merge(report: dict[str, Any], label: str, figures: dict[str, Any]) -> None:
    """Add the figures of one part of the run (a backend, or the agent step) to ``report[label]``."""
    into = report.setdefault(label, {"backends": {}})
    backends = figures.pop("backends")
    into["backends"].update(backends)
    into.update(figures)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--backends", default=",".join(BACKENDS), help="comma-separated: files, postgres, memory")
    parser.add_argument("--previous", metavar="REV", help="also measure the library of this git revision")
    parser.add_argument("--max-items", type=int, metavar="N", help="store only the first N items (a quick look)")
    parser.add_argument("--agent-steps", type=int, default=STEP_PAGES, metavar="N",
                        help=f"pages fetched by the agent-step measurement (0: none; default {STEP_PAGES})")
    parser.add_argument("--measure-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    backends = [name.strip() for name in args.backends.split(",") if name.strip()]
    unknown = set(backends) - set(BACKENDS)
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}; choose from {', '.join(BACKENDS)}")
    if args.measure_only:
        figures = measure(args.data, backends, args.max_items, args.agent_steps)
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
        return
    report: dict[str, Any] = {"revision": head_revision(), "load_average_1min": round(os.getloadavg()[0], 2),
                              "command": " ".join(["benchmarks/bench_store.py", *sys.argv[1:]]),
                              "cpus": os.cpu_count()}
    env: dict[str, str] = {}
    server = None
    if "postgres" in backends and args.previous:  # one server for both revisions, a database each
        from agent_memory.testing import POSTGRES_URL_ENV, PostgresServer

        server = PostgresServer().start()
        env[POSTGRES_URL_ENV] = os.environ[POSTGRES_URL_ENV] = str(server.url)
    try:
        # each backend measured by this code, then by the previous revision, then the next backend:
        # the machine's load (other jobs) drifts over the run, and would otherwise favour one side
        for part in [[backend] for backend in backends] + [[]]:
            steps = 0 if part else args.agent_steps
            if not part and not steps:
                continue
            _merge(report, "current", measure(args.data, part, args.max_items, steps))
            if args.previous:
                argv = ["--data", str(args.data), f"--backends={','.join(part)}", "--agent-steps", str(steps)]
                argv += ["--max-items", str(args.max_items)] if args.max_items else []
                _merge(report, "previous", {"revision": args.previous,
                                            **at_revision(__file__, args.previous, argv, env=env)})
        if args.previous:
            report["ratios_current_over_previous"] = ratios(report["current"], report["previous"])
    finally:
        if server is not None:
            server.close()
    report["targets"] = targets(report)
    report["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print_table(report)


if __name__ == "__main__":
    main()
