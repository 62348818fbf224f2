"""What agent-memory keeps, as the few shapes a storage backend implements.

A backend is four classes, of which a third party writes nineteen methods: a :class:`Backend` that
hands out, per agent id, **keyed logs** (:class:`Log`: read since a token, write with an ``expect`` token, content
blobs), **named locks** (:class:`Locks`) and a **vector index**
(:class:`~agent_memory.storage.vector.VectorIndex`: the vectors the library embeds, searched by
meaning). Everything else memory keeps is one of these shapes again, and the library builds it on them
(:mod:`~agent_memory.storage.common`), the way LangGraph's ``BaseStore`` builds its API on two
abstract operations (github.com/langchain-ai/langgraph, ``libs/checkpoint/langgraph/store/base``):

=================================  ======================================  =====================
what                               kept as                                 contract
=================================  ======================================  =====================
item records + content blobs       the log ``items``                       :class:`Log`
a document (working context, a     the log ``document.<name>``             :class:`Log`
fork's view, a session)
traces, episodes, facts            the logs ``traces.<kind>``              :class:`Log` + locks
the event journal                  the log ``journal``                     :class:`Log`
search by meaning                  the vector index                        ``VectorIndex``
locks                              named locks                             :class:`Locks`
=================================  ======================================  =====================

The in-process backend (:mod:`~agent_memory.storage.inprocess`, ``memory://``) is a complete
backend in one module of these four classes. The :class:`Backend` contract says everything a
backend offers, the parts with a default too: ``describe(agent_id)`` (where the agent's records
are, for messages), ``read_only(agent_id)`` (the agent's storage cannot be written, a read-only
mount or role: the memory then reads without writing anything), ``keyword_index(agent_id, config,
*, read_only=False, recreate=False)`` (a :class:`~agent_memory.storage.keyword.KeywordIndex`, for
hybrid search; ``None``: a query is searched by meaning alone and filtered by the item records),
``local_dir(agent_id)`` (the agent's directory on this machine, for files kept beside its records;
``None``: none), ``durable`` (what it keeps outlives this process) and ``closed``. A third party
subclasses :class:`BackendDefaults`, which gives those defaults, and writes the seven methods the
contract leaves to it. The built-in backends also keep a ``document`` and a ``journal`` of their
own, in their earlier on-disk formats (the file backend's journal is SQLite), which
:mod:`~agent_memory.storage.common` uses when a backend has them; the file backend's logs
``traces.<kind>`` are AutoByteus' JSONL files.

Two rules every backend keeps, and the conformance suite (:mod:`agent_memory.testing.conformance`)
checks:

- **Nothing acknowledged is lost.** A write that returned is durable (synced to disk, or
  committed); a write that raised left the previous state intact. A process killed at any moment
  loses at most the write it was making, never an earlier one, and leaves no lock held. (An
  in-process backend's durability is its process's: it says so.)
- **Optimistic concurrency where a write depends on what was read.** A :class:`Log` hands out a
  :data:`ChangeToken` with every read; a write that passes it back as ``expect`` is made only if
  nothing changed since, else it raises :class:`~agent_memory.errors.ConflictError` and the caller
  reads again and retries. No lock is held between a read and a write, so a process killed in
  between blocks nobody.
"""

from __future__ import annotations

import hashlib
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from agent_memory.config import MemoryConfig
from agent_memory.errors import InvalidArgumentError
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.vector import VectorIndex
from agent_memory.tokens import TokenCounter

__all__ = [
    "Backend",
    "BackendDefaults",
    "ITEMS_LOG",
    "ChangeToken",
    "DocumentSlot",
    "Log",
    "LockHolder",
    "Locks",
    "LogChange",
    "LogEntry",
    "LogRead",
    "QuarantineHook",
    "checked_log_name",
    "sha256_hex",
]

def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data`` (64 lower-case characters): the key of a content blob in a :class:`Log`.
    The last large ``bytes`` object hashed is remembered by identity (``bytes`` never change):
    a tool result's bytes are hashed for its id, its record and its blob, 1.5 ms per MB each."""
    global _last_digest
    last = _last_digest
    if last is not None and last[0] is data:
        return last[1]
    digest = hashlib.sha256(data).hexdigest()
    if type(data) is bytes and len(data) >= REMEMBERED_DIGEST_BYTES:
        _last_digest = (data, digest)
    return digest


REMEMBERED_DIGEST_BYTES = 64 * 1024
"""Smallest ``bytes`` whose digest :func:`sha256_hex` remembers (smaller ones hash in microseconds)."""
_last_digest: tuple[bytes, str] | None = None


ITEMS_LOG = "items"
"""The log of an agent's item records and their content (:class:`~agent_memory.records.items.ItemStore`)."""

_LOG_NAME = re.compile(r"[a-z][A-Za-z0-9_.-]{0,159}")


def checked_log_name(name: str) -> str:
    """``name`` if it is a log name a backend can use as a file or key name: ASCII letters, digits,
    ``_``, ``-`` and dots, a lower-case letter first, at most 160 characters (``traces.raw``,
    ``document.session.s-1``; never ``/``, ``..`` or a space).

    Raises:
        InvalidArgumentError: otherwise.
    """
    if not isinstance(name, str) or not _LOG_NAME.fullmatch(name) or ".." in name:
        raise InvalidArgumentError(f"invalid log name {name!r}: ASCII letters, digits, '_', '-' and dots, "
                                   "such as 'traces.raw'")
    return name


ChangeToken = str
"""Opaque: names the state of a :class:`Log` (or a :class:`DocumentSlot`) as of a read. Equal
tokens mean nothing changed in between."""

QuarantineHook = Callable[[str, int, str, "str | None"], None]
"""Told of a damaged record a log took out of its way so every other record stays readable:
``(where, line number, reason, where its bytes went)`` (``None``: only skipped). Only logs that can
hold damage call it (a file edited by hand or by a disk error)."""


@dataclass(frozen=True, slots=True)
class LogRead:
    """What :meth:`Log.read` found.

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
    """The key (the memory id, in the log ``items``): any non-empty text without a newline."""
    record: bytes
    """The record: one JSON object, UTF-8, no newline, whose ``"id"`` member is :attr:`id` (a
    backend may read the key from it)."""
    blob: bytes | None = None
    """The content, kept under its sha256 (hex) as key; ``None``: the blob it names is kept
    already (a record written back unchanged)."""


@dataclass(frozen=True, slots=True)
class LogChange:
    """One atomic change of a :class:`Log`: all of it is visible, or none (also after a crash)."""

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
class Log(Protocol):
    """A keyed log of one agent: records (opaque JSON, keyed, in write order) and the content
    blobs they name (keyed by sha256). The library reads records incrementally (``since``) and
    keeps them in the process; what a record means is its business, not the log's. An agent has
    one log per name (``items``, ``journal``, ``traces.raw``, ``document.fork``, ...), each apart
    from the others, blobs included.

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
    whole on each write. Not a backend's to implement: the library builds it on a :class:`Log`
    (:class:`~agent_memory.storage.common.LogDocument`) unless the backend has its own
    ``document(agent_id, name)``."""

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
    """When it took the lock, Unix time in seconds (0.0: unknown)."""
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
    (:class:`~agent_memory.storage.files.FileBackend`), a Postgres database
    (:class:`~agent_memory.storage.postgres.PostgresBackend`) that processes on many machines
    share, this process's memory (:class:`~agent_memory.storage.inprocess.InProcessBackend`), or a
    third party's, opened by URL (:mod:`~agent_memory.storage.schemes`). Every method takes a
    validated agent id; one backend serves any number of agents.

    Everything the library asks of a backend is here. A third party writes the seven methods
    from :meth:`log` on and :attr:`url`; :class:`BackendDefaults` gives the rest a default."""

    url: str
    """How another process opens the same backend (:func:`~agent_memory.storage.open_backend`):
    the memory directory's absolute path, or a URL (a database's without its password)."""

    @property
    def durable(self) -> bool:
        """Whether what it keeps outlives this process, so that another process opening
        :attr:`url` sees it (files, a database); ``False`` for ``memory://``, whose data lives in
        this process (the conformance suite skips its tests of several processes so). Default
        ``True``."""
        ...

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: the process's next
        :func:`~agent_memory.storage.open_backend` of the URL then opens a new one. Default
        ``False`` (a backend whose ``close`` releases nothing for good)."""
        ...

    def describe(self, agent_id: str) -> str:
        """Where the agent's records are, for messages and notices (a path; the URL and the agent
        id). The library hides any password in it before it shows it
        (:func:`~agent_memory.storage.common.describe`). Default: ``"<url> (agent <agent_id>)"``."""
        ...

    def read_only(self, agent_id: str) -> bool:
        """Whether the agent's storage cannot be written (a read-only mount, a read-only role):
        the memory then reads without writing anything, indexes included. Default ``False``."""
        ...

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> KeywordIndex | None:
        """The agent's keyword index, for hybrid search; ``None``: the backend has none (or, with
        ``read_only``, none to read yet), and a query is searched by meaning alone, filtered by the
        item records. ``read_only``: open it without writing; ``recreate``: empty it first (a
        damaged one). Default ``None``."""
        ...

    def local_dir(self, agent_id: str) -> Path | None:
        """The agent's directory on this machine, where files that belong beside its records are
        kept (a memory tool's uploads in progress); ``None``: the backend keeps none (a database,
        ``memory://``). Default ``None``."""
        ...

    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> Log:
        """The agent's log ``name`` (created empty on first write). Names are short ASCII words
        with dots (``items``, ``journal``, ``traces.raw``, ``document.fork``). ``on_quarantine``:
        told of a damaged record the log took out of its way (a log that cannot hold damage never
        calls it)."""
        ...

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        """The agent's vector index (``config``: the memory's settings, for files which Chroma;
        the index is handed vectors, never asked to embed). ``read_only``: open it without
        writing to the backend."""
        ...

    def locks(self, agent_id: str) -> Locks:
        """The agent's named locks (``items``, ``index``, ``kernel``, ``step``, ``traces.<kind>``)."""
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


class BackendDefaults(ABC):
    """The defaults of a :class:`Backend`'s parts that a backend may leave as they are: subclass it
    and write :attr:`url` and the seven abstract methods (STYLE 2: the contract is a Protocol,
    the shared implementation a small ABC, as the OpenAI Agents SDK's ``SessionABC`` beside its
    ``Session`` protocol). Every built-in backend is one."""

    url: str

    durable: bool = True
    """See :attr:`Backend.durable`."""

    @property
    def closed(self) -> bool:
        """``False``: see :attr:`Backend.closed`."""
        return False

    def describe(self, agent_id: str) -> str:
        """``"<url> (agent <agent_id>)"``: see :meth:`Backend.describe`."""
        return f"{self.url} (agent {agent_id})"

    def read_only(self, agent_id: str) -> bool:
        """``False``: see :meth:`Backend.read_only`."""
        return False

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> KeywordIndex | None:
        """``None``, no keyword index: see :meth:`Backend.keyword_index`."""
        return None

    def local_dir(self, agent_id: str) -> Path | None:
        """``None``, no directory: see :meth:`Backend.local_dir`."""
        return None

    @abstractmethod
    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> Log:
        """See :meth:`Backend.log`."""

    @abstractmethod
    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        """See :meth:`Backend.vector_index`."""

    @abstractmethod
    def locks(self, agent_id: str) -> Locks:
        """See :meth:`Backend.locks`."""

    @abstractmethod
    def claim(self, agent_id: str) -> bool:
        """See :meth:`Backend.claim`."""

    @abstractmethod
    def release_claim(self, agent_id: str) -> None:
        """See :meth:`Backend.release_claim`."""

    @abstractmethod
    def agent_ids(self) -> list[str]:
        """See :meth:`Backend.agent_ids`."""

    @abstractmethod
    def close(self) -> None:
        """See :meth:`Backend.close`."""
