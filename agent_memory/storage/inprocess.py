"""The in-process backend, ``memory://<name>``: everything in this process's memory, nothing on disk.

For a user's unit tests and for notebooks, as LangGraph ships ``InMemoryStore`` (github.com/
langchain-ai/langgraph, ``libs/checkpoint/langgraph/store/memory``): fast, no files, gone when
the process ends. Every :class:`~agent_memory.memory.AgentMemory` of the process that opens the
same URL shares the same data (``memory://`` alone is the name ``default``), so a parent and its
sub-agents, or two memories of one test, see each other as they would on a real backend.

It is also the proof that a backend is small: it implements the contracts of
:mod:`~agent_memory.storage.contracts` (a :class:`~agent_memory.storage.contracts.Backend` handing
out keyed logs, locks and a vector index), in four classes and a keyword index it borrows, and passes the conformance suite
(:mod:`agent_memory.testing.conformance`) but its tests of several processes, which it cannot
take: its data lives in one process. Documents, traces and the event journal are the library's,
built on its logs (:mod:`~agent_memory.storage.common`); its keyword index is the file backend's
SQLite FTS5 index kept in memory (:mod:`~agent_memory.storage.lexical`), so a query is hybrid and
filtered as on files, and it embeds within the same bounds (``max_embedded_chars``).

Nothing is durable: the process is the storage. Use the default files backend (or Postgres) for
anything that must survive the process.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent_memory.config import MemoryConfig
from agent_memory.errors import ConflictError, InvalidArgumentError, LockTimeoutError, StoreError, VectorIndexError
from agent_memory.ids import validate_agent_id
from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.storage.lexical import LexicalIndex
from agent_memory.storage.vector import ChunkHit, ChunkVectors, IndexChunk, ItemFilter, as_rows, has_filters
from agent_memory.models.items import MemoryCriteria
from agent_memory.storage.contracts import BackendDefaults, ChangeToken, LockHolder, LogChange, LogRead, QuarantineHook
from agent_memory.tokens import TokenCounter

__all__ = ["SCHEME", "InProcessBackend", "InProcessLocks", "InProcessLog", "InProcessVectorIndex", "open_inprocess"]

SCHEME = "memory"
"""The URL scheme: ``memory://<name>``."""

DEFAULT_LOCK_TIMEOUT_S = 60.0
"""How long :meth:`InProcessLocks.hold` waits by default, in seconds."""


class InProcessLog:
    """:class:`~agent_memory.storage.contracts.Log` in a dict: records by key in log order, blobs by
    digest, and the list of changes an incremental reader is handed. The token is
    ``<generation>:<version>``: a ``replace_all`` starts a new generation (every reader reads the
    whole log once), every other write takes the next version."""

    def __init__(self) -> None:
        self._records: dict[str, bytes] = {}
        self._blobs: dict[str, bytes] = {}
        self._changes: list[tuple[str, bool]] = []
        """``(key, deleted)`` of every change of this generation, version ``n`` at index ``n - 1``."""
        self._generation = 1
        self._mutex = threading.Lock()

    def _token(self) -> ChangeToken:
        return f"{self._generation}:{len(self._changes)}"

    @property
    def written(self) -> bool:
        """Whether anything was ever written (a claim's test; no copy of the records)."""
        return bool(self._changes) or self._generation > 1

    def read(self, since: ChangeToken | None = None) -> LogRead:
        with self._mutex:
            generation, _, version = (since or "").partition(":")
            if since is None or generation != str(self._generation) or not version.isdigit() \
                    or int(version) > len(self._changes):
                return LogRead(records=list(self._records.items()), token=self._token(), reset=True)
            changed = self._changes[int(version):]
            put = {key for key, deleted in changed if not deleted and key in self._records}
            deleted = list(dict.fromkeys(key for key, was_deleted in changed if was_deleted))
            records = [(key, record) for key, record in self._records.items() if key in put]
            return LogRead(records=records, token=self._token(), reset=False, deleted=deleted)

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        with self._mutex:
            if expect is not None and expect != self._token():
                raise ConflictError("the log changed since it was read")
            for entry in change.put:
                if entry.blob is not None:
                    self._blobs[hashlib.sha256(entry.blob).hexdigest()] = entry.blob
            if change.replace_all:
                self._records = {entry.id: entry.record for entry in change.put}
                self._changes = []
                self._generation += 1
            else:
                for key in change.delete:
                    if self._records.pop(key, None) is not None:
                        self._changes.append((key, True))
                for entry in change.put:
                    self._records[entry.id] = entry.record
                    self._changes.append((entry.id, False))
            for digest in change.release:
                self._blobs.pop(digest, None)
            return self._token()

    def blob(self, digest: str) -> bytes:
        with self._mutex:
            data = self._blobs.get(digest)
        if data is None or hashlib.sha256(data).hexdigest() != digest:
            raise StoreError(f"the content blob {digest} is missing from the in-process log")
        return data


class InProcessLocks:
    """:class:`~agent_memory.storage.contracts.Locks` of one agent: a ``threading.Lock`` per name
    (which any thread may release, as the contract allows), and who holds it."""

    def __init__(self) -> None:
        self._locks: dict[str, threading.Lock] = {}
        self._holders: dict[str, LockHolder] = {}
        self._mutex = threading.Lock()

    def _lock(self, name: str) -> threading.Lock:
        with self._mutex:
            return self._locks.setdefault(name, threading.Lock())

    @contextmanager
    def hold(self, name: str, *, timeout_s: float | None = None, note: str = "") -> Iterator[None]:
        lock = self._lock(name)
        wait = DEFAULT_LOCK_TIMEOUT_S if timeout_s is None else timeout_s
        if not lock.acquire(timeout=-1 if math.isinf(wait) else max(0.0, wait)):
            holder = self.probe(name)
            by = f" (held by pid {holder.pid} since {holder.since:.0f}{', ' + holder.note if holder.note else ''})" \
                if holder is not None else ""
            raise LockTimeoutError(f"timed out after {wait:g} s waiting for the in-process lock {name!r}{by}")
        with self._mutex:
            self._holders[name] = LockHolder(pid=os.getpid(), host=socket.gethostname(), since=time.time(), note=note)
        try:
            yield
        finally:
            with self._mutex:
                self._holders.pop(name, None)
            lock.release()

    def probe(self, name: str) -> LockHolder | None:
        with self._mutex:
            return self._holders.get(name)


class InProcessVectorIndex:
    """:class:`~agent_memory.storage.vector.VectorIndex` by exact (exhaustive) cosine search in
    numpy: the vectors the library hands it in the rows of one float32 matrix, a query one
    matrix-vector product and a partial sort (``numpy.argpartition``). Filters by the ``passing``
    test the memory gives (it
    translates no criteria itself): an :class:`~agent_memory.storage.vector.ItemFilter`'s passing
    items mask the rows at once; a bare test is asked about the nearest chunks, more until enough
    pass. Exact search cannot miss a chunk, however many near-identical vectors it holds."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self._rows: dict[str, int] = {}
        """Chunk id (``<item_id>:<chunk_index>``) → its row of :attr:`_matrix`."""
        self._chunks: list[IndexChunk | None] = []
        """The chunk of each row; ``None`` for a row freed by a delete (reused by the next add)."""
        self._free: list[int] = []
        self._matrix: Any = None
        """float32 array of shape (capacity, dimensions); rows past ``len(_chunks)`` are unused."""
        self._live: Any = None
        """bool array of shape (capacity,): which rows hold a chunk."""
        self._mutex = threading.Lock()

    def add(self, chunks: Sequence[IndexChunk], vectors: ChunkVectors) -> None:
        """Add or replace chunks with their vectors.

        Raises:
            VectorIndexError: if ``vectors`` has not one row per chunk, or rows of another length
                than the vectors already held (nothing is written then).
        """
        if not chunks:
            return
        with HEAVY_IMPORTS:
            import numpy as np
        vectors = as_rows(vectors)
        if len(vectors) != len(chunks):
            raise VectorIndexError(f"{len(chunks)} chunks came with {len(vectors)} vectors")
        with self._mutex:
            if self._matrix is not None and vectors.shape[1] != self._matrix.shape[1]:
                raise VectorIndexError(f"vectors of {vectors.shape[1]} dimensions; the index holds "
                                       f"{self._matrix.shape[1]}")
            for chunk, vector in zip(chunks, vectors, strict=True):
                chunk_id = f"{chunk.item_id}:{chunk.chunk_index}"
                row = self._rows.get(chunk_id)
                if row is None:
                    row = self._free.pop() if self._free else len(self._chunks)
                    if row == len(self._chunks):
                        self._chunks.append(None)
                    self._rows[chunk_id] = row
                if self._matrix is None:
                    self._matrix = np.zeros((64, vectors.shape[1]), dtype=np.float32)
                    self._live = np.zeros(64, dtype=bool)
                elif row >= self._matrix.shape[0]:
                    capacity = 2 * self._matrix.shape[0]
                    self._matrix = np.concatenate([self._matrix, np.zeros_like(self._matrix)])
                    self._live = np.concatenate([self._live, np.zeros(capacity // 2, dtype=bool)])
                self._matrix[row] = vector
                self._live[row] = True
                self._chunks[row] = chunk

    def search(self, vector: Sequence[float], criteria: MemoryCriteria, *, n_chunks: int,
               passing: Callable[[Sequence[str]], set[str]] | None = None) -> list[ChunkHit]:
        if passing is None and has_filters(criteria):
            raise InvalidArgumentError("the in-process index filters by a passing test: give passing=")
        with HEAVY_IMPORTS:
            import numpy as np

        query = np.asarray(vector, dtype=np.float32)
        with self._mutex:
            chunks = list(self._chunks)
            rows = np.flatnonzero(self._live[: len(chunks)]) if chunks else np.zeros(0, dtype=np.int64)
            scores = self._matrix[rows] @ query if len(rows) else np.zeros(0, dtype=np.float32)
        if passing is not None:  # an ItemFilter names its items; a bare test is asked about every chunk
            held = [chunk for row in rows if (chunk := chunks[int(row)]) is not None]  # live rows hold one
            keys = [chunk.item_id for chunk in held] if isinstance(passing, ItemFilter) else [_id(c) for c in held]
            allowed = passing.items() if isinstance(passing, ItemFilter) else passing(keys)
            keep = np.fromiter((key in allowed for key in keys), dtype=np.bool_, count=len(keys))
            rows, scores = rows[keep], scores[keep]
        if 0 < n_chunks < len(rows):
            top = np.argpartition(-scores, n_chunks - 1)[:n_chunks]
            rows, scores = rows[top], scores[top]
        order = np.lexsort((rows, -scores))[: max(n_chunks, 0)]  # best first; equal scores in row order
        return [ChunkHit(item_id=chunk.item_id, chunk_index=chunk.chunk_index, body=chunk.text[chunk.header_chars:],
                         start_char=chunk.start_char, score=float(scores[n]))
                for n in order if (chunk := chunks[int(rows[n])]) is not None]

    def chunk_vector(self, item_id: str, chunk_index: int) -> list[float] | None:
        with self._mutex:
            row = self._rows.get(f"{item_id}:{chunk_index}")
            return None if row is None else [float(x) for x in self._matrix[row]]

    def held_items(self, item_ids: Sequence[str]) -> set[str]:
        with self._mutex:
            return {item_id for item_id in item_ids if f"{item_id}:0" in self._rows}

    def list_items(self, criteria: MemoryCriteria) -> list[tuple[str, float]]:
        if has_filters(criteria):
            raise InvalidArgumentError("the in-process index lists every item; the item records filter a listing")
        with self._mutex:
            return [(chunk.item_id, chunk.timestamp_s) for chunk in self._chunks
                    if chunk is not None and chunk.chunk_index == 0]

    def item_ids(self) -> set[str]:
        with self._mutex:
            return {chunk.item_id for chunk in self._chunks if chunk is not None}

    def delete_items(self, item_ids: Sequence[str]) -> None:
        gone = set(item_ids)
        with self._mutex:
            for row, chunk in enumerate(self._chunks):
                if chunk is not None and chunk.item_id in gone:
                    del self._rows[_id(chunk)]
                    self._chunks[row] = None
                    self._live[row] = False
                    self._free.append(row)

    def reset(self) -> None:
        with self._mutex:
            self._rows.clear()
            self._chunks.clear()
            self._free.clear()
            self._matrix = self._live = None


def _id(chunk: IndexChunk | None) -> str:
    return f"{chunk.item_id}:{chunk.chunk_index}" if chunk is not None else ""


class InProcessBackend(BackendDefaults):
    """:class:`~agent_memory.storage.contracts.Backend` in this process's memory. Open it by URL
    (``AgentMemory("a", backend="memory://tests")``): every opening of one name shares the data.

    Args:
        name: what the data is shared under; ``""``: ``default``.
    """

    durable = False
    """Its data lives in this process: another process opening the URL sees none of it (the
    conformance suite skips its tests of several processes so)."""

    def __init__(self, name: str = "") -> None:
        self.name = name or "default"
        self.url = f"{SCHEME}://{self.name}"
        self._logs: dict[tuple[str, str], InProcessLog] = {}
        self._locks: dict[str, InProcessLocks] = {}
        self._vectors: dict[str, InProcessVectorIndex] = {}
        self._keywords: dict[str, tuple[LexicalIndex, sqlite3.Connection]] = {}
        """Each agent's keyword index and the connection that keeps its in-memory database alive."""
        self._space = uuid.uuid4().hex
        """Names this backend's in-memory SQLite databases apart from every other backend's."""
        self._claimed: set[str] = set()
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"InProcessBackend({self.url!r})"

    def describe(self, agent_id: str) -> str:
        return f"{self.url} (agent {agent_id}, in this process only)"

    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> InProcessLog:
        key = (validate_agent_id(agent_id), name)
        with self._mutex:
            return self._logs.setdefault(key, InProcessLog())

    def _stored(self, agent_id: str) -> bool:
        """Whether anything was written under ``agent_id`` (called under the mutex)."""
        return any(log.written for (agent, _), log in self._logs.items() if agent == agent_id)

    def locks(self, agent_id: str) -> InProcessLocks:
        with self._mutex:
            return self._locks.setdefault(validate_agent_id(agent_id), InProcessLocks())

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> InProcessVectorIndex:
        with self._mutex:
            return self._vectors.setdefault(validate_agent_id(agent_id), InProcessVectorIndex(config))

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> LexicalIndex:
        """The agent's BM25 keyword index: SQLite FTS5 in this process's memory
        (:meth:`~agent_memory.storage.lexical.LexicalIndex.in_memory`), the same index and
        scoring as the file backend's. ``recreate`` empties it.

        Raises:
            KeywordIndexError: if this Python's SQLite cannot keep a database in memory (before
                3.36) or lacks FTS5.
        """
        agent_id = validate_agent_id(agent_id)
        with self._mutex:
            held = self._keywords.get(agent_id)
            if held is None:
                held = self._keywords[agent_id] = LexicalIndex.in_memory(f"agent-memory/{self._space}/{agent_id}")
        if recreate:
            held[0].reset()
        return held[0]

    def claim(self, agent_id: str) -> bool:
        agent_id = validate_agent_id(agent_id)
        with self._mutex:
            if agent_id in self._claimed or self._stored(agent_id):
                return False
            self._claimed.add(agent_id)
            return True

    def release_claim(self, agent_id: str) -> None:
        with self._mutex:
            self._claimed.discard(agent_id)
            for key in [key for key in self._logs if key[0] == agent_id]:
                del self._logs[key]
            self._vectors.pop(agent_id, None)
            keyword = self._keywords.pop(agent_id, None)
        if keyword is not None:
            keyword[0].close()
            keyword[1].close()

    def agent_ids(self) -> list[str]:
        with self._mutex:
            return sorted(self._claimed | {agent for agent, _ in self._logs if self._stored(agent)})

    def close(self) -> None:
        """Nothing to release; the data stays for the next opening of the same name."""


_OPENED: dict[str, InProcessBackend] = {}
_OPENED_MUTEX = threading.Lock()


def open_inprocess(url: str, *, read_only: bool = False) -> InProcessBackend:
    """The in-process backend ``url`` (``memory://<name>``) names: the same object for the same
    name in one process. ``read_only`` changes nothing (nothing here is a read-only mount).

    Raises:
        ConfigurationError: never; an unknown scheme is refused before this is called.
    """
    name = url.partition("://")[2].strip("/")
    with _OPENED_MUTEX:
        return _OPENED.setdefault(name or "default", InProcessBackend(name))
