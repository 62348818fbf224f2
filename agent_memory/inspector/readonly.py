"""A storage backend that only reads: what the inspector opens a memory through.

:class:`ReadOnlyBackend` wraps any :class:`~agent_memory.storage.contracts.Backend` (files or
Postgres) and hands out the same objects with every write refused
(:class:`~agent_memory.errors.StoreError`), and it answers ``read_only`` with ``True``, so an
:class:`~agent_memory.memory.AgentMemory` opened on it reads as it reads a memory on a read-only
mount (:mod:`agent_memory.index.upkeep`): the Chroma index from a private temporary copy (deleted
on ``close``), the keyword index through SQLite's read-only URI, no lock taken, no catch-up
indexing of items the index lacks (they stay readable by id). A damaged line of ``items.jsonl``
is skipped instead of being moved to ``items.jsonl.corrupt`` (``open_backend(store, read_only=True)``).

What it cannot stop: SQLite makes its reader companions of the keyword index
(``lexical.sqlite3-shm`` and an empty ``-wal``) when they are missing, as for any reader of a WAL
database, so that a reader beside a live writer reads a consistent index (no data is written);
opening a Postgres URL runs the library's schema migrations
(:class:`~agent_memory.storage.postgres.database.Database`), as every process that opens the URL
does; a database already at this version is not written.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path

from agent_memory.config import MemoryConfig
from agent_memory.errors import StoreError
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.vector import VectorIndex
from agent_memory.storage.contracts import (
    Backend,
    ChangeToken,
    DocumentSlot,
    Log,
    LockHolder,
    Locks,
    LogChange,
    LogRead,
    QuarantineHook,
)
from agent_memory.storage import common
from agent_memory.storage.journal import EventJournal
from agent_memory.tokens import TokenCounter

__all__ = ["ReadOnlyBackend"]


def _refused(what: str) -> StoreError:
    return StoreError(f"{what}: this memory is open read-only (the inspector never writes)")


class _ReadOnlyLog:
    """Any :class:`~agent_memory.storage.contracts.Log` with ``write`` refused."""

    def __init__(self, inner: Log) -> None:
        self._inner = inner

    def read(self, since: ChangeToken | None = None) -> LogRead:
        return self._inner.read(since)

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        raise _refused("write to a log")

    def blob(self, digest: str) -> bytes:
        return self._inner.blob(digest)


class _ReadOnlyDocument:
    """A :class:`~agent_memory.storage.contracts.DocumentSlot` with ``put`` refused."""

    def __init__(self, inner: DocumentSlot) -> None:
        self._inner = inner

    def token(self) -> ChangeToken:
        return self._inner.token()

    def get(self) -> tuple[bytes | None, ChangeToken]:
        return self._inner.get()

    def put(self, data: bytes, *, expect: ChangeToken | None = None) -> ChangeToken:
        raise _refused("write of a document")


class _ReadOnlyLocks:
    """:class:`~agent_memory.storage.contracts.Locks` that can be probed, never held."""

    def __init__(self, inner: Locks) -> None:
        self._inner = inner

    def hold(self, name: str, *, timeout_s: float | None = None, note: str = "") -> AbstractContextManager[None]:
        raise _refused(f"lock {name!r}")

    def probe(self, name: str) -> LockHolder | None:
        return self._inner.probe(name)


class ReadOnlyBackend:
    """``inner`` (a :class:`~agent_memory.storage.contracts.Backend`), read only.

    Every object it hands out reads as ``inner``'s does; every write raises
    :class:`~agent_memory.errors.StoreError` with nothing written. ``read_only`` is always ``True``,
    so the indexes open without writing (module docstring).

    Args:
        inner: the backend to read, opened read-only (``open_backend(store, read_only=True)``:
            a directory's damaged lines are then skipped, not moved); its ``url`` is this
            backend's, so a fork's parent in the same backend is opened through this one, read only
            too.
    """

    def __init__(self, inner: Backend) -> None:
        self.inner = inner
        self.url = inner.url

    def __repr__(self) -> str:
        return f"ReadOnlyBackend({self.inner!r})"

    @property
    def durable(self) -> bool:
        return self.inner.durable

    @property
    def closed(self) -> bool:
        return self.inner.closed

    def describe(self, agent_id: str) -> str:
        return self.inner.describe(agent_id)

    def local_dir(self, agent_id: str) -> Path | None:
        return self.inner.local_dir(agent_id)

    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> Log:
        return _ReadOnlyLog(self.inner.log(agent_id, name, on_quarantine=on_quarantine))

    def read_only(self, agent_id: str) -> bool:
        return True

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> KeywordIndex | None:
        if recreate:
            raise _refused("recreating the keyword index")
        return self.inner.keyword_index(agent_id, config, read_only=True)

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        return self.inner.vector_index(agent_id, config, tokens, read_only=True)

    def document(self, agent_id: str, name: str) -> DocumentSlot:
        return _ReadOnlyDocument(common.document(self.inner, agent_id, name))

    def journal(self, agent_id: str) -> EventJournal:
        raise _refused("the event journal")

    def locks(self, agent_id: str) -> Locks:
        return _ReadOnlyLocks(self.inner.locks(agent_id))

    def claim(self, agent_id: str) -> bool:
        raise _refused(f"claiming agent id {agent_id!r}")

    def release_claim(self, agent_id: str) -> None:
        raise _refused(f"releasing agent id {agent_id!r}")

    def agent_ids(self) -> list[str]:
        return self.inner.agent_ids()

    def close(self) -> None:
        self.inner.close()

