"""What agent-memory keeps, as the few operations a storage backend implements.

A backend (:class:`Backend`) hands out, per agent id, one object for each kind of thing memory
keeps. Each is a small Protocol; everything else (caching, codecs, damage containment, the
search fusion, the kernel) is built on them by the library, the way LangGraph's ``BaseStore``
builds its API on two abstract operations:

============================  =====================================================  ==========
what                          contract                                               operations
============================  =====================================================  ==========
item records + content blobs  :class:`ItemLog`                                       read, write, blob
keyword search (BM25 / FTS)   :class:`~agent_memory.index.keyword.KeywordIndex`      8
vector search                 :class:`~agent_memory.index.vector.VectorIndex`        8
traces, episodes, facts       :class:`~agent_memory.store.traces.TraceStore`         append, read, rewrite, locked
one document (working context,
a fork's view)                :class:`DocumentSlot`                                  token, get, put
the event journal             :class:`~agent_memory.storage.journal.EventJournal`   push, get, next_open,
                                                                                     set_status, ... (9)
locks                         :class:`Locks`                                         hold, probe
============================  =====================================================  ==========

Two rules every backend keeps, and the conformance suite (:mod:`agent_memory.testing.conformance`)
checks:

- **Nothing acknowledged is lost.** A write that returned is durable (synced to disk, or
  committed); a write that raised left the previous state intact. A process killed at any moment
  loses at most the write it was making, never an earlier one, and leaves no lock held.
- **Optimistic concurrency where a write depends on what was read.** An :class:`ItemLog` or a
  :class:`DocumentSlot` hands out a :data:`ChangeToken` with every read; a write that passes it
  back as ``expect`` is made only if nothing changed since, else it raises
  :class:`~agent_memory.errors.ConflictError` and the caller reads again and retries. No lock is
  held between a read and a write, so a process killed in between blocks nobody.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from agent_memory.config import MemoryConfig
from agent_memory.index.keyword import KeywordIndex
from agent_memory.index.vector import VectorIndex
from agent_memory.storage.journal import EventJournal
from agent_memory.store.traces import TraceStore
from agent_memory.tokens import TokenCounter

__all__ = [
    "Backend",
    "ChangeToken",
    "DocumentSlot",
    "ItemLog",
    "LockHolder",
    "Locks",
    "LogChange",
    "LogEntry",
    "LogRead",
    "QuarantineHook",
]

ChangeToken = str
"""Opaque: names the state of an :class:`ItemLog` or a :class:`DocumentSlot` as of a read. Equal
tokens mean nothing changed in between."""

QuarantineHook = Callable[[str, int, str, "str | None"], None]
"""Told of a damaged record a log took out of its way so every other record stays readable:
``(where, line number, reason, where its bytes went)`` (``None``: only skipped). Only logs that can
hold damage call it (a file edited by hand or by a disk error)."""


@dataclass(frozen=True, slots=True)
class LogRead:
    """What :meth:`ItemLog.read` found.

    A reader applies it to what it holds (a dict by id, in insertion order) in this order: with
    ``reset``, drop everything; remove the ids of ``deleted``; then set each of ``records`` by id
    (a held id keeps its place, a new one goes last)."""

    records: list[tuple[str, bytes]]
    """``(memory id, record)``, one per id, in log order; a record is one JSON object (UTF-8, no
    newline). With ``reset``, every record the log holds; else each id put since ``since`` with
    its latest record (an id replaced in place keeps its place; a new one, or one deleted and put
    again since, is ordered by when it was put last)."""
    token: ChangeToken
    """The log's state after these records: pass it to the next ``read`` or as ``expect``."""
    reset: bool
    """``True``: ``records`` is the whole log (drop what you held); ``False``: the changes made
    after the ``since`` token (none when nothing changed)."""
    deleted: Sequence[str] = ()
    """Ids deleted since ``since`` (``()`` with ``reset``): remove them *before* applying
    ``records`` (an id deleted and put again since is in both)."""


@dataclass(frozen=True, slots=True)
class LogEntry:
    """One record to write, with the content blob it names."""

    id: str
    """The memory id (the key)."""
    record: bytes
    """The record: one JSON object, UTF-8, no newline."""
    blob: bytes | None = None
    """The content, kept under its sha256 (hex) as key; ``None``: the blob it names is kept
    already (a record written back unchanged)."""


@dataclass(frozen=True, slots=True)
class LogChange:
    """One atomic change of an :class:`ItemLog`: all of it is visible, or none (also after a crash)."""

    put: Sequence[LogEntry] = ()
    """Records to add after the others; a record whose id the log holds replaces that record in
    its place. Blobs are written before the records that name them."""
    delete: Sequence[str] = ()
    """Ids whose records leave the log (unknown ids are ignored); applied before ``put``."""
    replace_all: bool = False
    """The log holds exactly ``put`` afterwards (``delete`` is then ignored)."""
    release: Sequence[str] = field(default=())
    """Blob digests no record names after the change: deleted once the records are written."""


@runtime_checkable
class ItemLog(Protocol):
    """An agent's item records (opaque JSON, keyed by memory id, in write order) and the content
    blobs they name (keyed by sha256). The library reads records incrementally (``since``) and
    keeps them in the process; what a record means is its business, not the log's.

    A keyed, append-mostly log: a put of a new id, a put that replaces an id's record and a
    delete are all appended changes that an incremental :meth:`read` hands out (``records`` and
    ``deleted``), so none of them costs more, for the writer or for a reader, in a larger log.
    Only ``replace_all``, and a backend's own compaction (the file log rewrites itself once dead
    lines make up half of it), start over: a reader then gets the whole log once (``reset``).
    """

    def read(self, since: ChangeToken | None = None) -> LogRead:
        """The changes made after ``since``: the records put and the ids deleted since then
        (``None``: the whole log, ``reset=True``). A log that started over since then
        (``replace_all``, a compaction) answers the whole log with ``reset=True``."""
        ...

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        """Make ``change``, durably, and return the new token. ``expect``: make it only if the log
        is still in that state, else raise :class:`~agent_memory.errors.ConflictError` (nothing
        written); ``None``: unconditionally (appends of new ids). Costs what ``change`` holds, not
        what the log holds (except ``replace_all``)."""
        ...

    def blob(self, digest: str) -> bytes:
        """The content blob ``digest`` (sha256 hex). Raises :class:`~agent_memory.errors.StoreError`
        if it is missing or its bytes do not hash to ``digest``."""
        ...


@runtime_checkable
class DocumentSlot(Protocol):
    """One small document of an agent (the working context snapshot, a fork's view), replaced
    whole on each write."""

    def token(self) -> ChangeToken:
        """The document's token now, without reading it (a cheap test whether it changed)."""
        ...

    def get(self) -> tuple[bytes | None, ChangeToken]:
        """The document (``None``: never written) and its token."""
        ...

    def put(self, data: bytes, *, expect: ChangeToken | None = None) -> ChangeToken:
        """Replace the document atomically and durably; with ``expect``, only if it is still in
        that state (else :class:`~agent_memory.errors.ConflictError`, nothing written)."""
        ...


@dataclass(frozen=True, slots=True)
class LockHolder:
    """Who holds a lock, as far as the backend can tell (for error messages and ``status``)."""

    pid: int
    """Process id of the holder (0: unknown)."""
    host: str
    """Host name of the holder ("": unknown)."""
    since: float
    """When it took the lock, epoch seconds (0.0: unknown)."""
    note: str = ""
    """What the holder said it holds the lock for (a step id), or ""."""


@runtime_checkable
class Locks(Protocol):
    """Named locks of one agent, shared by every process (and host) that opens the backend. A lock
    dies with the process (or connection) that holds it: a killed holder never blocks anyone."""

    def hold(self, name: str, *, timeout_s: float | None = None, note: str = "") -> AbstractContextManager[None]:
        """Hold lock ``name`` for the ``with`` block: exclusive between threads and processes
        (whichever object each took it through), not re-entrant, and the block may end in another
        thread than the one that began it. ``timeout_s``: wait at most this long (``None``: the
        backend's default; ``inf``: for ever) before :class:`~agent_memory.errors.LockTimeoutError`.
        ``note`` is what :meth:`probe` reports (a step id)."""
        ...

    def probe(self, name: str) -> LockHolder | None:
        """Who holds lock ``name`` now (another process or thread), without taking it; ``None``:
        free."""
        ...


@runtime_checkable
class Backend(Protocol):
    """Where every memory of one installation lives: the default files under a memory directory
    (:class:`~agent_memory.storage.files.FileBackend`), or a Postgres database
    (:class:`~agent_memory.storage.postgres.PostgresBackend`) that processes on many machines
    share. Every method takes a validated agent id; one backend serves any number of agents."""

    url: str
    """How another process opens the same backend (:func:`~agent_memory.storage.open_backend`):
    the memory directory's absolute path, the database URL without its password, or a URL of the
    scheme a third party's backend registers (:mod:`agent_memory.storage.schemes`). A fork records
    it for its child (:class:`~agent_memory.fork.MemoryFork`'s ``parent_store``)."""

    def describe(self, agent_id: str) -> str:
        """Where the agent's records are, for messages (a path, or the URL and the agent id)."""
        ...

    def items(self, agent_id: str, *, on_quarantine: QuarantineHook | None = None) -> ItemLog:
        """The agent's item log."""
        ...

    def read_only(self, agent_id: str) -> bool:
        """Whether the agent's storage cannot be written (a read-only mount, a read-only role):
        the memory then reads without writing anything."""
        ...

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> KeywordIndex | None:
        """The agent's keyword index. ``read_only``: open it without writing (``None`` when there
        is none to open). ``recreate``: drop what is stored first (a damaged index), empty."""
        ...

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        """The agent's vector index (``config``: which embedding model and, for files, which
        Chroma). ``read_only``: open it without writing to the backend."""
        ...

    def traces(self, agent_id: str) -> TraceStore:
        """The agent's conversation traces (raw, archive, episodes, facts)."""
        ...

    def document(self, agent_id: str, name: str) -> DocumentSlot:
        """The agent's document ``name`` (``working_context``, ``fork``)."""
        ...

    def journal(self, agent_id: str) -> EventJournal:
        """The agent's event journal."""
        ...

    def locks(self, agent_id: str) -> Locks:
        """The agent's named locks (``items``, ``index``, ``kernel``, ``step``)."""
        ...

    def claim(self, agent_id: str) -> bool:
        """Take ``agent_id`` for a new agent, atomically: ``True`` if nothing was stored under it
        and it is now taken, ``False`` if it was taken (by an earlier agent or a racing process)."""
        ...

    def release_claim(self, agent_id: str) -> None:
        """Undo a :meth:`claim` whose agent stored nothing (a spawn that failed)."""
        ...

    def agent_ids(self) -> list[str]:
        """The agents that stored anything, sorted."""
        ...

    def close(self) -> None:
        """Release connections and clients. Idempotent."""
        ...
