"""The in-process backend, ``memory://<name>``: everything in this process's memory, nothing on disk.

For a user's unit tests and for notebooks, as LangGraph ships ``InMemoryStore`` (github.com/
langchain-ai/langgraph, ``libs/checkpoint/langgraph/store/memory``): fast, no files, gone when
the process ends. Every :class:`~agent_memory.memory.AgentMemory` of the process that opens the
same URL shares the same data (``memory://`` alone is the name ``default``), so a parent and its
sub-agents, or two memories of one test, see each other as they would on a real backend.

It is also the proof that a backend is small: it implements the contracts of
:mod:`~agent_memory.storage.contracts` (a :class:`~agent_memory.storage.contracts.Backend` handing
out keyed logs, locks and a vector index), in four classes, and passes the conformance suite
(:mod:`agent_memory.testing.conformance`) but its tests of several processes, which it cannot
take: its data lives in one process. Documents, traces and the event journal are the library's,
built on its logs (:mod:`~agent_memory.storage.common`); it has no keyword index, so a query is
searched by meaning alone and filtered by the item records.

Nothing is durable: the process is the storage. Use the default files backend (or Postgres) for
anything that must survive the process.
"""

from __future__ import annotations

import hashlib
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from agent_memory.config import MemoryConfig
from agent_memory.errors import ConflictError, InvalidArgumentError, LockTimeoutError, StoreError
from agent_memory.ids import validate_agent_id
from agent_memory.storage.vector import ChunkHit, IndexChunk, has_filters
from agent_memory.models.items import MemoryCriteria
from agent_memory.storage.contracts import ChangeToken, LockHolder, LogChange, LogRead, QuarantineHook
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
    """:class:`~agent_memory.storage.vector.VectorIndex` by exhaustive cosine over unit vectors held
    in a dict, embedded with the memory's model (``config.embedding_model_path``). Filters by the
    ``passing`` test the memory gives (it translates no criteria itself)."""

    def __init__(self, config: MemoryConfig) -> None:
        self.config = config
        self._chunks: dict[str, tuple[IndexChunk, list[float]]] = {}
        self._embedder: Any = None
        self._mutex = threading.Lock()

    def _embed(self, texts: list[str]) -> list[list[float]]:
        if self._embedder is None:
            from agent_memory.embeddings import SentenceTransformerEmbedder

            path = str(self.config.embedding_model_path) if self.config.embedding_model_path else None
            self._embedder = SentenceTransformerEmbedder(path, batch_size=self.config.embedding_batch_size)
        vectors: list[list[float]] = self._embedder.embed(texts)
        return vectors

    def add(self, chunks: Sequence[IndexChunk]) -> None:
        vectors = self._embed([chunk.text for chunk in chunks]) if chunks else []
        with self._mutex:
            for chunk, vector in zip(chunks, vectors, strict=True):
                self._chunks[f"{chunk.item_id}:{chunk.chunk_index}"] = (chunk, [float(x) for x in vector])

    def embed_query(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def search(self, text: str, criteria: MemoryCriteria, *, n_chunks: int, vector: Sequence[float] | None = None,
               passing: Callable[[Sequence[str]], set[str]] | None = None) -> list[ChunkHit]:
        if passing is None and has_filters(criteria):
            raise InvalidArgumentError("the in-process index filters by a passing test: give passing=")
        query = list(vector) if vector is not None else self.embed_query(text)
        with self._mutex:
            held = list(self._chunks.items())
        allowed = passing([chunk_id for chunk_id, _ in held]) if passing is not None else None
        scored = sorted(((sum(a * b for a, b in zip(query, vec, strict=True)), chunk) for chunk_id, (chunk, vec) in held
                         if allowed is None or chunk_id in allowed), key=lambda pair: -pair[0])
        return [ChunkHit(item_id=chunk.item_id, chunk_index=chunk.chunk_index, body=chunk.text[chunk.header_chars:],
                         start_char=chunk.start_char, score=score) for score, chunk in scored[:n_chunks]]

    def chunk_vector(self, item_id: str, chunk_index: int) -> list[float] | None:
        with self._mutex:
            held = self._chunks.get(f"{item_id}:{chunk_index}")
        return list(held[1]) if held is not None else None

    def list_items(self, criteria: MemoryCriteria) -> list[tuple[str, float]]:
        if has_filters(criteria):
            raise InvalidArgumentError("the in-process index lists every item; the item records filter a listing")
        with self._mutex:
            return [(chunk.item_id, chunk.timestamp_s) for chunk, _ in self._chunks.values() if chunk.chunk_index == 0]

    def item_ids(self) -> set[str]:
        with self._mutex:
            return {chunk.item_id for chunk, _ in self._chunks.values()}

    def delete_items(self, item_ids: Sequence[str]) -> None:
        gone = set(item_ids)
        with self._mutex:
            self._chunks = {key: held for key, held in self._chunks.items() if held[0].item_id not in gone}

    def reset(self) -> None:
        with self._mutex:
            self._chunks.clear()


class InProcessBackend:
    """:class:`~agent_memory.storage.contracts.Backend` in this process's memory. Open it by URL
    (``AgentMemory("a", backend="memory://tests")``): every opening of one name shares the data.

    Args:
        name: what the data is shared under; ``""``: ``default``.
    """

    in_process = True
    """Its data lives in this process: another process opening the URL sees none of it (the
    conformance suite skips its tests of several processes so)."""

    def __init__(self, name: str = "") -> None:
        self.name = name or "default"
        self.url = f"{SCHEME}://{self.name}"
        self._logs: dict[tuple[str, str], InProcessLog] = {}
        self._locks: dict[str, InProcessLocks] = {}
        self._vectors: dict[str, InProcessVectorIndex] = {}
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
