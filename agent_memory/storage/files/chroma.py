"""The chromadb vector index: embedded ``PersistentClient`` or a Chroma server (``HttpClient``).

The library embeds (:mod:`agent_memory.index.embedding`): every write hands Chroma the chunks'
vectors (``embeddings=``) and every search a query vector (``query_embeddings=``), so Chroma never
embeds. Each collection still declares :class:`AgentMemoryEmbeddingFunction`, as collections made
before the library embedded (2026-11-28) stored it in their configuration: declaring the same
function keeps such a collection and a new one interchangeable, and registering it lets chromadb
rebuild it from that configuration without a warning (the function itself refuses to embed).
Vectors are compared by cosine distance; scores returned to callers are similarities
(``1 - distance``).

Chunk ids are ``<item_id>:<chunk_index>`` and writes are upserts, so indexing an item twice (after
a crash, or from two processes) leaves one copy.

Embedded chromadb keeps its vector index in memory per process and does not notice writes made
by other processes (chroma-core/chroma#3792); worse, a process that persists its stale in-memory
index can drop vectors another process wrote. So in embedded mode every write is made under
``write.lock`` and bumps a ``generation`` file, and a process whose client saw an older
generation closes it and opens a fresh one before it reads or writes. One client per database
path is shared by every open index object in the process (chromadb shares one System per path);
:meth:`ChromaVectorIndex.close` releases it, and the last index object of a path to close closes
the client (and with it chromadb's SQLite connections).

Filters (type, source, tags, time range) are never translated here: the memory's filter authority
(the keyword index's table, or the item records) hands each filtered search a ``passing`` test
(:class:`~agent_memory.storage.vector.ItemFilter`). A filtered search first over-fetches the
unfiltered HNSW index as ids and keeps the chunks that pass; when too few pass (a selective filter
in a large index) it searches only the chunks of the passing items (``where`` on their ids, in
pages of :data:`RESTRICT_PAGE`). Exact either way. Without a ``passing`` test a search is
unfiltered, and criteria that filter anything are refused (:class:`InvalidArgumentError`).

A read-only database (a memory on a read-only mount, or without write permission) is read
from a private copy: chromadb 1.5's ``PersistentClient`` writes to its SQLite file when it opens
(it fails with "attempt to write a readonly database") and has no read-only mode, so
``ChromaVectorIndex(..., read_only=True)`` copies the database directory to a temporary directory
and opens that; the copy is deleted by :meth:`ChromaVectorIndex.close` (or when the object is
collected, or at exit). The original is never written.
"""

from __future__ import annotations

import hashlib
import math
import re
import shutil
import tempfile
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn

import chromadb
from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
from chromadb.config import Settings
from chromadb.utils.embedding_functions import register_embedding_function
from filelock import FileLock

from agent_memory.config import MemoryConfig
from agent_memory.errors import ConfigurationError, InvalidArgumentError, VectorIndexError
from agent_memory.fileio import atomic_write_bytes
from agent_memory.storage.vector import ChunkHit, ChunkVectors, IndexChunk, ItemFilter, as_rows, has_filters
from agent_memory.limits import MAX_TAGS
from agent_memory.models.items import MemoryCriteria

__all__ = ["AgentMemoryEmbeddingFunction", "ChromaVectorIndex", "collection_name"]

MAX_ADD_BATCH = 5_000
"""Records per chromadb call (chromadb refuses more than 5,461 at once)."""

UPSERT_BATCH = 256
"""Records per chromadb ``upsert`` call. chromadb's Rust bindings hold the interpreter lock for the
whole call (~23 ms for 170 records on 2 cores): in batches of this size, a thread running Python
beside the indexing thread (an agent's step) waits ~30 ms at most. (The indexing thread does not
pause between them: it holds the cross-process ``index`` lock, which a foreground ``forget``
may be waiting for.)"""

DELETE_BY_ID_ITEMS = 16
"""Most items whose chunks a delete looks up by chunk id; a larger batch is deleted by one filter on
``item_id`` (a pass over the collection's metadata, shared by the batch)."""

FIRST_PROBE_CHUNKS = 64
"""Chunk ids of an item a delete asks for first when its chunk 0 does not say which is its last
(``last_chunk``, written since 2026-11-28): an item with all of them is asked for four times as many
more, and so on (exact for an item whose chunks were numbered without gaps, as before the library
dropped near-duplicate chunks)."""

LAST_CHUNK_KEY = "last_chunk"
"""Metadata of an item's chunk 0: the highest chunk index written for the item with it. Chunks are
numbered with gaps (a near-duplicate chunk gets no vector), so a delete asks for the ids up to it."""

_TAG_PREFIX = "tag:"
_SAFE_COLLECTION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]{1,200}[A-Za-z0-9]")


@register_embedding_function
class AgentMemoryEmbeddingFunction(EmbeddingFunction[Documents]):
    """The embedding function every collection of this library declares; it never embeds.

    Collections made before the library embedded (2026-11-28) carry it in their stored
    configuration under :meth:`name`, with its config (``model_path``, ``batch_size``): this
    registered class lets chromadb rebuild it when such a collection opens, and new collections
    declare it too, so a collection opens the same in this version and an older one (which
    registers its own, embedding class under the name). This library hands Chroma every vector
    (``embeddings=``, ``query_embeddings=``), so calling it is a mistake.

    Args:
        model_path: the model directory recorded in the collection's configuration; ``None``:
            the default model.
        batch_size: recorded in the configuration (not used).
    """

    def __init__(self, model_path: str | None = None, batch_size: int = 32) -> None:
        self._model_path = model_path
        self._batch_size = batch_size

    def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - chromadb's parameter name
        raise VectorIndexError("the library embeds: give Chroma embeddings= / query_embeddings=, not texts")

    @staticmethod
    def name() -> str:
        return "agent_memory_sentence_transformer"

    def get_config(self) -> dict[str, Any]:
        return {"model_path": self._model_path, "batch_size": self._batch_size}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> AgentMemoryEmbeddingFunction:
        return AgentMemoryEmbeddingFunction(config.get("model_path"), int(config.get("batch_size") or 32))

    def default_space(self) -> str:  # type: ignore[override]
        return "cosine"

    def supported_spaces(self) -> list[str]:  # type: ignore[override]
        return ["cosine", "l2", "ip"]


def collection_name(agent_id: str) -> str:
    """The Chroma collection of an agent: ``am-<agent_id>``, or a hash when the id has characters
    Chroma does not allow in names."""
    name = f"am-{agent_id}-items"
    if _SAFE_COLLECTION.fullmatch(name):
        return name
    return f"am-{hashlib.sha256(agent_id.encode()).hexdigest()[:24]}-items"


GET_PAGE = 5_000
"""Chunks per ``get`` when listing the whole index: a single ``get`` of 100k chunks raised
"too many SQL variables" in chromadb 1.5 (a memory of that size could not be reopened)."""

POST_FILTER_FETCH = 8
"""A filtered search first asks the unfiltered HNSW index for this many times the chunks wanted
and keeps those that pass: when at least the wanted number pass, or the index held no more chunks
than were asked for, they are exactly the best passing chunks. Otherwise (a filter that keeps
under about 1/8 of the nearest chunks of a larger index) it fetches more, up to
:data:`MAX_POST_FILTER_FETCH`, then searches only the passing items' chunks (a filtered search
in Chroma took ~10x longer than an unfiltered one at 100k chunks, benchmarks/bench_scale.py)."""


MAX_POST_FILTER_FETCH = 1_000
"""Most chunks a filtered search fetches from the unfiltered index before it searches only the
chunks of the passing items. Unfiltered HNSW searches at 100k chunks took ~27 ms for 320 chunks
and ~100 ms for 1,280, Chroma's filtered search of a tag kept by a tenth of the items ~250 ms
(benchmarks/bench_scale.py's memory)."""

REMEMBERED_FILTERS = 64
"""Filters (type, source, tags, time range) whose share of passing chunks an index remembers, the
most recently used kept: the next filtered search with one of them fetches at once as many
nearest chunks as that share asks for (:meth:`ChromaVectorIndex._post_filtered`), so a filter that
keeps a tenth of the memory costs one HNSW search instead of two (the follow-up query of a
multi-hop search repeats its question's filter)."""

RESTRICT_PAGE = 5_000
"""Item ids per Chroma query of a search restricted to the passing items (``where`` on
``item_id``): chromadb 1.5 fails with "too many SQL variables" past ~32k."""


class _EmbeddedClients:
    """One ``PersistentClient`` per database path in this process, reopened when the path's
    ``generation`` file shows that another process wrote since the client was opened.

    A client is closed (to reopen it, or by the last index object on its path) only while no call
    is in flight on it (:meth:`using`): closing stops chromadb's system and drops its Rust bindings,
    and a thread still inside a call on it would fail (``'RustBindingsAPI' object has no attribute
    'bindings'``, seen with 8 threads sharing one memory). A thread that finds the client stale
    waits for the calls in flight to end, and no new call starts on the stale client meanwhile.
    """

    _cond = threading.Condition(threading.RLock())
    _clients: dict[str, tuple[Any, int]] = {}
    _users: dict[str, int] = {}
    _busy: dict[str, int] = {}
    """Path -> calls in flight on its client."""

    @staticmethod
    def generation(path: Path) -> int:
        try:
            return int((path / "generation").read_text(encoding="utf-8") or 0)
        except (FileNotFoundError, ValueError):
            return 0

    @classmethod
    @contextmanager
    def using(cls, path: Path, settings: Settings) -> Iterator[tuple[Any, int]]:
        """The process's client for ``path`` and the generation it has seen, held for one call
        (the ``with`` block): fresh as of every other process's writes, and not closed before the
        block ends. Blocks must not nest in one thread."""
        key = str(path.resolve())
        with cls._cond:
            while True:
                current = cls.generation(path)
                entry = cls._clients.get(key)
                if entry is not None and entry[1] == current:
                    break
                if not cls._busy.get(key):
                    if entry is not None:
                        entry[0].close()
                    entry = cls._clients[key] = (chromadb.PersistentClient(path=key, settings=settings), current)
                    break
                cls._cond.wait()
            cls._busy[key] = cls._busy.get(key, 0) + 1
        try:
            yield entry
        finally:
            with cls._cond:
                cls._busy[key] -= 1
                if not cls._busy[key]:
                    del cls._busy[key]
                cls._cond.notify_all()

    @classmethod
    def acquire(cls, path: Path) -> None:
        """Count one more open index object on ``path``."""
        key = str(path.resolve())
        with cls._cond:
            cls._users[key] = cls._users.get(key, 0) + 1

    @classmethod
    def release(cls, path: Path) -> None:
        """Count one index object on ``path`` closed; the last one closes the shared client (once
        no call is in flight on it)."""
        key = str(path.resolve())
        with cls._cond:
            users = cls._users.get(key, 0) - 1
            if users > 0:
                cls._users[key] = users
                return
            cls._users.pop(key, None)
            while cls._busy.get(key):
                cls._cond.wait()
            entry = cls._clients.pop(key, None)
            if entry is not None:
                entry[0].close()

    @classmethod
    def wrote(cls, path: Path, client: Any) -> int:
        """Record a write by this process (call under ``write.lock``, inside :meth:`using`): bump
        the generation, mark this process's client as current, and return the new generation."""
        key = str(path.resolve())
        with cls._cond:
            new = cls.generation(path) + 1
            atomic_write_bytes(path / "generation", str(new).encode())
            if cls._clients.get(key, (None, 0))[0] is client:
                cls._clients[key] = (client, new)
        return new


SEGMENT_RETRY_WAITS_S = (0.05, 0.1, 0.2, 0.4, 0.8)
"""Waits between the tries of a chromadb call that found the collection's vector segment not
written yet ("Error creating hnsw segment reader: Nothing found on disk": a query racing the first
add to a collection on a Chroma server, chroma-core/chroma#4212), in seconds: 1.55 s in all,
then the error is raised as any other."""
_SEGMENT_NOT_WRITTEN = "Nothing found on disk"


class ChromaVectorIndex:
    """A :class:`~agent_memory.storage.vector.VectorIndex` in one chromadb collection per agent.

    Args:
        agent_id: the agent (names the collection).
        config: ``chroma_mode`` chooses embedded or server (its host and port); the model path
            is recorded in a new collection's configuration.
        path: directory of the embedded database (``memory/agents/<id>/index/chroma``); unused
            for a server.
        read_only: the embedded database at ``path`` must not be written (a read-only mount): it
            is copied to a private temporary directory (``copy_path``) and the copy is opened; a
            missing database gives an empty index there. Writes then change the copy only. Unused
            for a server.

    Raises:
        ConfigurationError: if the Chroma server cannot be reached or the database cannot open
            (or, read-only, cannot be copied: no space in the temporary directory).
    """

    def __init__(
        self, agent_id: str, config: MemoryConfig, *, path: Path | None = None, read_only: bool = False
    ) -> None:
        self.agent_id = agent_id
        self.config = config
        self.name = collection_name(agent_id)
        self.path = path
        self.copy_path: Path | None = None
        """The private copy opened in place of a read-only database, or ``None``."""
        self._remove_copy: weakref.finalize[Any, Any] | None = None
        model_path = str(config.embedding_model_path) if config.embedding_model_path else None
        self.embedding_function = AgentMemoryEmbeddingFunction(model_path, config.embedding_batch_size)
        self._settings = Settings(anonymized_telemetry=False, allow_reset=True)
        self._client: Any = None
        self._collection: Any = None
        self._generation = -1
        self._write_lock: FileLock | None = None
        self._state_lock = threading.Lock()
        """Guards ``_client``, ``_generation``, ``_collection`` and ``_shares`` between threads."""
        self._shares: OrderedDict[tuple[Any, ...], float] = OrderedDict()
        """The share of the nearest chunks that passed each recent filter (:data:`REMEMBERED_FILTERS`)."""
        self._closed = False
        acquired = False
        try:
            if config.chroma_mode == "server":
                self._client = chromadb.HttpClient(
                    host=config.chroma_host, port=config.chroma_port, settings=self._settings
                )
            else:
                if path is None:
                    raise ConfigurationError("an embedded Chroma index needs a path")
                if read_only:
                    path = self._private_copy(path)
                path.mkdir(parents=True, exist_ok=True)
                self._write_lock = FileLock(str(path / "write.lock"), timeout=600)
                _EmbeddedClients.acquire(path)
                acquired = True
            with self._using():
                pass  # open the collection now: a broken database fails here, not at the first call
        except Exception as exc:  # noqa: BLE001 - chromadb and httpx raise many types
            if acquired:
                assert path is not None
                _EmbeddedClients.release(path)
            elif self._client is not None:
                self._client.close()
            if self._remove_copy is not None:
                self._remove_copy()
            if isinstance(exc, ConfigurationError):
                raise
            where = f"{config.chroma_host}:{config.chroma_port}" if config.chroma_mode == "server" else str(path)
            raise ConfigurationError(f"cannot open the Chroma index at {where}: {exc}") from exc

    def _private_copy(self, source: Path) -> Path:
        """Copy the read-only database at ``source`` into a new temporary directory (deleted by
        :meth:`close`) and return the copy's path."""
        root = Path(tempfile.mkdtemp(prefix="agent-memory-readonly-index-"))
        self._remove_copy = weakref.finalize(self, shutil.rmtree, root, True)
        target = root / "chroma"
        if source.is_dir():
            # contents only: the source's read-only permission bits would make the copy unwritable
            shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.lock"), copy_function=shutil.copyfile)
            for copied in (target, *target.rglob("*")):
                copied.chmod(0o700 if copied.is_dir() else 0o600)
        self.path = self.copy_path = target
        return target

    def close(self) -> None:
        """Release the chromadb client (idempotent). Embedded: the process-shared client of the
        path is closed when no other open index object uses it. Server: the HTTP client closes.
        A private copy of a read-only database is deleted. The object must not be used
        afterwards."""
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
            self._collection = None
        if self._write_lock is not None and self.path is not None:
            _EmbeddedClients.release(self.path)
        elif self._client is not None:
            self._client.close()
        self._client = None
        if self._remove_copy is not None:
            self._remove_copy()

    @contextmanager
    def _using(self) -> Iterator[Any]:
        """The collection for one call (the ``with`` block), through a client that has seen every
        other process's writes and is not closed before the block ends."""
        if self.path is not None and self._write_lock is not None:
            with _EmbeddedClients.using(self.path, self._settings) as (client, generation):
                with self._state_lock:
                    if client is not self._client or generation != self._generation or self._collection is None:
                        self._client, self._generation = client, generation
                        self._collection = self._open()
                    collection = self._collection
                yield collection
            return
        with self._state_lock:
            if self._collection is None:
                self._collection = self._open()
            collection = self._collection
        yield collection

    def _open(self) -> Any:
        return self._client.get_or_create_collection(
            self.name,
            embedding_function=self.embedding_function,
            configuration={"hnsw": {"space": "cosine"}},
            metadata={"agent_id": self.agent_id},
        )

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        for wait_s in (*SEGMENT_RETRY_WAITS_S, None):
            try:
                return fn(*args, **kwargs)
            except VectorIndexError:
                raise
            except Exception as exc:  # noqa: BLE001 - convert at the boundary
                if wait_s is not None and _SEGMENT_NOT_WRITTEN in str(exc):
                    time.sleep(wait_s)  # a read racing the first write of the collection's vectors
                    continue
                self._raise(what, exc)
        raise AssertionError("unreachable: the last try raises or returns")

    @staticmethod
    def _raise(what: str, exc: Exception) -> NoReturn:
        message = str(exc)[:300]
        raise VectorIndexError(
            f"chromadb {what} failed: {message} (if this persists, AgentMemory.rebuild_index() "
            "recreates the index from items.jsonl)"
        ) from exc

    def _write(self, what: str, fn: Any) -> Any:
        """Run ``fn(collection)`` as a write: under ``write.lock`` in embedded mode, on a fresh
        view, then bump the generation so other processes reopen."""
        if self._write_lock is None:
            with self._using() as collection:
                return self._call(what, fn, collection)
        with self._write_lock, self._using() as collection:
            result = self._call(what, fn, collection)
            assert self.path is not None
            self._generation = _EmbeddedClients.wrote(self.path, self._client)
            return result

    def add(self, chunks: Sequence[IndexChunk], vectors: ChunkVectors) -> None:
        """Upsert chunks with their vectors (one row of ``vectors`` per chunk).

        Raises:
            VectorIndexError: if chromadb fails, if ``vectors`` has not one row per chunk, or
                (before anything is written) a chunk carries more than ``limits.MAX_TAGS`` tags:
                one such write breaks chromadb's log so that every later write fails until the
                collection is recreated.
        """
        rows = as_rows(vectors)
        if len(rows) != len(chunks):
            raise VectorIndexError(f"{len(chunks)} chunks came with {len(rows)} vectors")
        last: dict[str, int] = {}
        for chunk in chunks:
            last[chunk.item_id] = max(last.get(chunk.item_id, 0), chunk.chunk_index)
            if len(chunk.tags) > MAX_TAGS:
                raise VectorIndexError(f"item {chunk.item_id} has {len(chunk.tags):,} tags; the index takes {MAX_TAGS}")
        for start in range(0, len(chunks), UPSERT_BATCH):
            batch = chunks[start : start + UPSERT_BATCH]
            metadatas = []
            for chunk in batch:
                meta: dict[str, Any] = {
                    "item_id": chunk.item_id,
                    "chunk_index": chunk.chunk_index,
                    "header_chars": chunk.header_chars,
                    "start_char": chunk.start_char,
                    "type": chunk.type,
                    "source": chunk.source,
                    "timestamp_s": chunk.timestamp_s,
                }
                if chunk.chunk_index == 0:
                    meta[LAST_CHUNK_KEY] = last[chunk.item_id]
                meta.update({_TAG_PREFIX + tag: True for tag in chunk.tags})
                metadatas.append(meta)
            ids = [f"{c.item_id}:{c.chunk_index}" for c in batch]
            documents = [c.text for c in batch]
            embeddings = rows[start : start + UPSERT_BATCH]
            self._write("upsert", lambda col: col.upsert(ids=ids, embeddings=embeddings, documents=documents,
                                                         metadatas=metadatas))

    def search(
        self, vector: Sequence[float], criteria: MemoryCriteria, *, n_chunks: int,
        passing: Callable[[Sequence[str]], set[str]] | None = None,
    ) -> list[ChunkHit]:
        """The ``n_chunks`` chunks closest to ``vector`` that ``passing`` keeps, best first;
        ``criteria``'s filters are not read (``passing`` is their test).

        Raises:
            InvalidArgumentError: if ``criteria`` filters anything and no ``passing`` is given.
            VectorIndexError: if chromadb fails.
        """
        if passing is None and has_filters(criteria):
            raise InvalidArgumentError(
                "the Chroma index filters by a passing test: give passing= (AgentMemory.query gives the keyword "
                "index's, or the item records')"
            )
        query = [float(x) for x in vector]
        with self._using() as collection:
            rows: list[Any] | None = None
            if passing is not None:
                rows = self._post_filtered(collection, query, n_chunks, passing, _filter_key(criteria))
                if rows is None:
                    rows = self._restricted(collection, query, n_chunks, passing)
            if rows is None:
                rows = self._query(collection, query, n_chunks, None)
        hits: list[ChunkHit] = []
        for doc, meta, distance in rows:
            header = int(meta.get("header_chars", 0))
            hits.append(
                ChunkHit(
                    item_id=str(meta["item_id"]),
                    chunk_index=int(meta["chunk_index"]),
                    body=(doc or "")[header:],
                    start_char=int(meta.get("start_char", 0)),
                    score=1.0 - float(distance),
                )
            )
        return hits

    def _post_filtered(
        self, collection: Any, query: list[float], n_chunks: int, passing: Callable[[Sequence[str]], set[str]],
        key: tuple[Any, ...] | None = None,
    ) -> list[Any] | None:
        """The ``n_chunks`` nearest chunks that ``passing`` keeps, found among the nearest chunks
        of the unfiltered index, fetched as ids only: first ``n_chunks * POST_FILTER_FETCH`` of
        them, or more when the share of chunks that passed the filter ``key`` last time asks for
        more (1.5x what that share needs), then, when too few passed, as many as the share that
        passed says are needed (1.5x, at most :data:`MAX_POST_FILTER_FETCH`); Chroma reads
        documents and metadata for the kept chunks alone (chromadb 1.5 reads ~70 us of metadata
        per row: 1,000 rows with metadata took 74 ms, as ids 9 ms). ``None`` when that is not
        sure to be the answer (still too few passed, and the index holds more chunks), at once
        when the remembered share asks for more than :data:`MAX_POST_FILTER_FETCH`. The share
        only sizes the fetch: the answer is the same, exact either way."""
        fetch = n_chunks * POST_FILTER_FETCH
        with self._state_lock:
            remembered = self._shares.get(key) if key is not None else None
        if remembered is not None:
            needed = math.ceil(1.5 * n_chunks / remembered)
            if needed > MAX_POST_FILTER_FETCH:
                return None
            fetch = max(fetch, needed)
        while True:
            nearest = self._nearest(collection, query, fetch)
            allowed = passing([chunk_id for chunk_id, _ in nearest])
            kept = [pair for pair in nearest if pair[0] in allowed]
            share = max(len(kept), 1) / max(len(nearest), 1)
            if key is not None and nearest:
                self._remember(key, share)
            if len(kept) >= n_chunks or len(nearest) < fetch:
                return self._rows(collection, kept[:n_chunks])
            if fetch >= MAX_POST_FILTER_FETCH:
                return None
            fetch = min(MAX_POST_FILTER_FETCH, max(2 * fetch, math.ceil(1.5 * n_chunks / share)))

    def _remember(self, key: tuple[Any, ...], share: float) -> None:
        """Keep the share of the nearest chunks that passed the filter ``key`` (the
        :data:`REMEMBERED_FILTERS` most recently used filters)."""
        with self._state_lock:
            self._shares[key] = share
            self._shares.move_to_end(key)
            while len(self._shares) > REMEMBERED_FILTERS:
                self._shares.popitem(last=False)

    def _restricted(
        self, collection: Any, query: list[float], n_chunks: int, passing: Callable[[Sequence[str]], set[str]]
    ) -> list[Any]:
        """The ``n_chunks`` nearest chunks that ``passing`` keeps, searched among the chunks of
        the passing items only (an :class:`ItemFilter` names them; pages of
        :data:`RESTRICT_PAGE` ids), or, for a bare test, among every chunk of the index."""
        if not isinstance(passing, ItemFilter):
            nearest = self._nearest(collection, query, max(1, self._call("count", collection.count)))
            allowed = passing([chunk_id for chunk_id, _ in nearest])
            return self._rows(collection, [pair for pair in nearest if pair[0] in allowed][:n_chunks])
        ids = sorted(passing.items())
        rows: list[Any] = []
        for start in range(0, len(ids), RESTRICT_PAGE):
            rows += self._query(collection, query, n_chunks, {"item_id": {"$in": ids[start : start + RESTRICT_PAGE]}})
        return sorted(rows, key=lambda row: row[2])[:n_chunks]

    def _nearest(self, collection: Any, vector: list[float], n_results: int) -> list[tuple[str, float]]:
        """``(chunk id, distance)`` of the ``n_results`` nearest chunks, unfiltered."""
        result = self._call(
            "query", collection.query, query_embeddings=[vector], n_results=n_results, include=["distances"]
        )
        return list(zip(result["ids"][0], result["distances"][0], strict=True))

    def _rows(self, collection: Any, pairs: list[tuple[str, float]]) -> list[Any]:
        """``(document, metadata, distance)`` of these ``(chunk id, distance)`` pairs, in their
        order (a chunk deleted meanwhile is left out)."""
        if not pairs:
            return []
        found = self._call(
            "get", collection.get, ids=[chunk_id for chunk_id, _ in pairs], include=["documents", "metadatas"]
        )
        by_id = dict(zip(found["ids"], zip(found["documents"], found["metadatas"], strict=True), strict=True))
        return [(*by_id[chunk_id], distance) for chunk_id, distance in pairs if chunk_id in by_id]

    def _query(self, collection: Any, vector: list[float], n_results: int, where: dict[str, Any] | None) -> list[Any]:
        """``(document, metadata, distance)`` of the ``n_results`` nearest chunks passing ``where``
        (``None``: every chunk; else a restriction to item ids, never a translation of filters)."""
        result = self._call(
            "query", collection.query, query_embeddings=[vector], n_results=n_results, where=where,
            include=["documents", "metadatas", "distances"],
        )
        return list(zip(result["documents"][0], result["metadatas"][0], result["distances"][0], strict=True))

    def chunk_vector(self, item_id: str, chunk_index: int) -> list[float] | None:
        with self._using() as collection:
            found = self._call("get", collection.get, ids=[f"{item_id}:{chunk_index}"], include=["embeddings"])["embeddings"]
        return [float(x) for x in found[0]] if found is not None and len(found) else None

    def list_items(self, criteria: MemoryCriteria) -> list[tuple[str, float]]:
        """``(item_id, timestamp_s)`` of every item in the index (any order).

        Raises:
            InvalidArgumentError: if ``criteria`` filters anything: this index does not translate
                filters (the keyword index, or the item records, filter a listing).
            VectorIndexError: if chromadb fails.
        """
        if has_filters(criteria):
            raise InvalidArgumentError("the Chroma index lists every item; filter with the keyword index or the records")
        heads = self._metadatas({"chunk_index": 0})
        return [(str(m["item_id"]), float(m["timestamp_s"])) for m in heads]

    def item_ids(self) -> set[str]:
        """Ids of every item in the index, read from the ids of their chunks 0 (``<item_id>:0``),
        not from their metadata: chromadb 1.5 took 1.7 s for the metadata of 10k chunks 0 and 64
        ms for their ids (benchmarks/bench_scale.py's memory, the machine loaded), so the first
        query or flush of a process on a large memory does not wait seconds."""
        found: set[str] = set()
        offset = 0
        with self._using() as collection:
            while True:
                page = self._call("get", collection.get, where={"chunk_index": 0}, include=[], limit=GET_PAGE,
                                  offset=offset)["ids"]
                found.update(chunk_id.rpartition(":")[0] for chunk_id in page)
                if len(page) < GET_PAGE:
                    return found
                offset += GET_PAGE

    def held_items(self, item_ids: Sequence[str]) -> set[str]:
        """Which of ``item_ids`` have their chunk 0 here (:class:`~agent_memory.storage.vector.HeldItems`):
        looked up by chunk id, in pages of :data:`GET_PAGE` (the same cost at any size of the
        collection)."""
        asked = [f"{item_id}:0" for item_id in dict.fromkeys(item_ids)]
        found: set[str] = set()
        with self._using() as collection:
            for start in range(0, len(asked), GET_PAGE):
                page = self._call("get", collection.get, ids=asked[start : start + GET_PAGE], include=[])["ids"]
                found.update(chunk_id.rpartition(":")[0] for chunk_id in page)
        return found

    def _metadatas(self, where: dict[str, Any]) -> list[dict[str, Any]]:
        """Metadata of every chunk passing ``where``, fetched in pages of :data:`GET_PAGE`: one
        ``get`` of all of them fails past ~32k chunks ("too many SQL variables" inside Chroma)."""
        found: list[dict[str, Any]] = []
        offset = 0
        with self._using() as collection:
            while True:
                page = self._call("get", collection.get, where=where, include=["metadatas"], limit=GET_PAGE,
                                  offset=offset)
                found.extend(page["metadatas"])
                if len(page["metadatas"]) < GET_PAGE:
                    return found
                offset += GET_PAGE

    def delete_items(self, item_ids: Sequence[str]) -> None:
        """Delete every chunk of ``item_ids``. Up to :data:`DELETE_BY_ID_ITEMS` items are found by
        their chunk ids (``<item id>:<chunk index>``, looked up by id: the same cost at any size of
        the collection); more at once by one filter on their ``item_id``, which Chroma answers by
        a pass over the metadata of every chunk (9 ms at 123k chunks), once for the whole batch."""
        if not item_ids:
            return
        if len(item_ids) > DELETE_BY_ID_ITEMS:
            where = {"item_id": {"$in": list(item_ids)}}
            self._write("delete", lambda col: col.delete(where=where))
            return

        def delete(collection: Any) -> None:
            found = _chunk_ids(collection, item_ids)
            for start in range(0, len(found), MAX_ADD_BATCH):
                collection.delete(ids=found[start : start + MAX_ADD_BATCH])

        self._write("delete", delete)

    def reset(self) -> None:
        def recreate(_: Any) -> None:
            try:
                self._client.delete_collection(self.name)
            except Exception:  # noqa: BLE001 - absent collection is fine
                pass
            with self._state_lock:
                self._collection = self._open()

        self._write("reset", recreate)


def _filter_key(criteria: MemoryCriteria) -> tuple[Any, ...]:
    """What of ``criteria`` decides which chunks pass: its filters, not its text or limit."""
    return (criteria.type, criteria.source, tuple(sorted(criteria.tags)), criteria.since, criteria.until)


def _chunk_ids(collection: Any, item_ids: Sequence[str]) -> list[str]:
    """The ids of the chunks of ``item_ids`` in ``collection``, found by id: an item whose chunk 0
    names its last chunk (:data:`LAST_CHUNK_KEY`) by the ids up to it, others by chunk indexes
    ``0..FIRST_PROBE_CHUNKS-1`` in one ``get``, then, for each item that had all of them, the next
    four times as many, until an item runs out (see :data:`FIRST_PROBE_CHUNKS`)."""
    heads = collection.get(ids=[f"{item_id}:0" for item_id in dict.fromkeys(item_ids)], include=["metadatas"])
    ranged = {str(meta["item_id"]): int(meta[LAST_CHUNK_KEY]) for meta in heads["metadatas"]
              if meta is not None and LAST_CHUNK_KEY in meta}
    found: list[str] = []
    if ranged:
        asked = [f"{item_id}:{n}" for item_id, last in ranged.items() for n in range(last + 1)]
        for start in range(0, len(asked), MAX_ADD_BATCH):
            found += collection.get(ids=asked[start : start + MAX_ADD_BATCH], include=[])["ids"]
    pending = {item_id: 0 for item_id in dict.fromkeys(item_ids) if item_id not in ranged}
    size = FIRST_PROBE_CHUNKS
    while pending:
        asked = [f"{item_id}:{n}" for item_id, start in pending.items() for n in range(start, start + size)]
        got = collection.get(ids=asked, include=[])["ids"]
        found += got
        per_item: dict[str, int] = {}
        for chunk_id in got:
            item_id = chunk_id.rpartition(":")[0]
            per_item[item_id] = per_item.get(item_id, 0) + 1
        pending = {item_id: start + size for item_id, start in pending.items() if per_item.get(item_id, 0) == size}
        size *= 4
    return found
