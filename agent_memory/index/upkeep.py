"""Keeping an agent's indexes in step with its item store.

The item store is the source of truth; the vector index and the keyword index (the backend's:
chromadb and SQLite FTS5 for files, pgvector and full-text search for Postgres) are derived and
catch up by themselves. This module holds that upkeep for one
:class:`~agent_memory.memory.AgentMemory`: cutting items into chunks, indexing new items,
finding the items an index lacks (deferred stores, other processes' items, a crash), rebuilding
from scratch, and containing failures:

- Indexing right after a store never raises: the item is safely stored, stays *pending*, is
  retried by the next ``flush_index`` or query, and the failure is reported
  (:class:`~agent_memory.observers.IndexFailed`, ``pending=True``).
- A record over the bounds that keep chromadb working (thousands of tags, written by an older
  version or by hand) never reaches the index: one such upsert broke chromadb's log so that every
  later write failed. It stays stored and readable by id, is skipped by this process until
  ``rebuild_index`` and reported (``IndexFailed``, ``pending=False``); so is an item whose content
  cannot be chunked.
- An item whose text the index refuses (a character a backend cannot keep, a rule of a third-party
  index) while it takes others is indexed by its label only (type, source, title, tags: filters
  and listings still find it) and reported once (``IndexFailed``, ``label_only=True``); one whose
  label is refused too is skipped as above. The index is taken as down (``VectorIndexError``) only
  when it fails a read, or refuses every item of a batch and a probe chunk of the library's own:
  no item, and no number of items, can stop the index for the others.
- An item whose content blob is missing or damaged is skipped and reported
  (:class:`~agent_memory.observers.ContentMissing`).
- A keyword index that SQLite calls "not a database" or "malformed" is dropped and built again
  by ``rebuild_index`` (and by ``clear`` / ``restore``, and the next query), reported as
  :class:`~agent_memory.observers.IndexRecreated`.
- A memory the backend cannot write (a memory directory on a read-only mount, or without write
  permission: :meth:`~agent_memory.storage.files.FileBackend.read_only` decides when an index is
  first opened) is read without writing anything: the Chroma database is opened from a private
  temporary copy (chromadb cannot open one read-only), the keyword index read-only (none at all
  when there is none: dense search only), no lock is taken, and the catch-up indexing of items the
  index lacks is skipped. Each is reported as :class:`~agent_memory.observers.IndexReadOnly`;
  items the index lacks stay readable by id.
"""

from __future__ import annotations

import atexit
import functools
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

from agent_memory.config import MemoryConfig
from agent_memory.errors import (
    AgentMemoryError,
    ItemNotFoundError,
    KeywordIndexError,
    LockTimeoutError,
    StoreError,
    UnsupportedRecordError,
    VectorIndexError,
    outage_behind,
)
from agent_memory.index.foreground import Foreground
from agent_memory.index.chunking import chunks_to_embed, is_table, item_chunks
from agent_memory.index.embedding import index_embedder
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.keyword import is_corruption
from agent_memory.storage.vector import IndexChunk, VectorIndex
from agent_memory.limits import MAX_SOURCE_CHARS, MAX_TAG_CHARS, MAX_TAGS, MAX_TITLE_CHARS, shorten
from agent_memory.models.items import EncodedContent, ItemRecord, MemoryItem
from agent_memory.records.prepare import count_tokens
from agent_memory.observers import ContentMissing, Indexed, IndexFailed, IndexReadOnly, IndexRecreated, MemoryNotice
from agent_memory.storage.contracts import Backend
from agent_memory.records.items import ItemStore
from agent_memory.tokens import TokenCounter
from agent_memory.storage import common
from agent_memory.background import checkpoints

__all__ = ["INDEX_BATCH_ITEMS", "INDEX_LOCK_TIMEOUT_S", "PROBE_ITEM_ID", "IndexUpkeep", "unindexable"]

INDEX_BATCH_ITEMS = 256
"""Items embedded per index write in bulk operations (``store_many``, ``flush_index``)."""


BACK_PRESSURE_POLL_S = 1.0
"""How often a waiting ``store`` (back pressure) or query looks again, in seconds, besides being
woken when a batch ends."""

INDEX_LOCK_TIMEOUT_S = 600.0
"""Longest wait for ``index.lock`` (held by another process while it indexes or rebuilds), in
seconds, before :class:`~agent_memory.errors.LockTimeoutError`."""

MAX_ERROR_CHARS = 300
"""Characters of an index error kept in an event."""

MAX_REPORTED_IDS = 100
"""Item ids listed at most in one :class:`IndexReadOnly` event."""

PROBE_ITEM_ID = "mem_index_probe"
"""The item id of the chunk written to tell an index that is down from items it refuses: never a
memory id (those are ``mem_`` and 12 hex digits), so it cannot touch an item; a query skips it (no
item has it), and ``rebuild_index`` drops one a crash left behind."""

T = TypeVar("T")


@dataclass
class _Pending:
    """An item handed to the indexing thread."""

    record: ItemRecord
    given: Any
    """Its content as ``store`` handed it over: the content, or an :class:`EncodedContent`."""
    chunks: list[IndexChunk] | None = None
    """Its chunks, once a query's keyword stage made them (the thread's batch reuses them)."""
    retry: bool = False
    """Handed over by a catch-up (its indexing failed before, or a crash left it): a batch that
    fails again contains it item by item, instead of leaving it pending once more."""

    @property
    def content(self) -> Any:
        """Its content, decoded on first use when ``store`` handed over the encoded blob."""
        if isinstance(self.given, EncodedContent):
            self.given = self.given.decode()
        return self.given


class IndexUpkeep:
    """The vector and keyword indexes of one agent, kept in step with its item store.

    Args:
        agent_id: the agent (names the indexes; stamped on events).
        backend: where the indexes and the ``index`` lock live.
        config: chunking, hybrid search and Chroma settings.
        tokens: counts tokens for chunking.
        items: the item store the indexes derive from.
        index: a vector index to use (not closed by :meth:`close`); ``None``: the backend's,
            opened on first use and closed by :meth:`close`.
        notify: reports a notice (never raises).
    """

    def __init__(
        self,
        *,
        agent_id: str,
        backend: Backend,
        config: MemoryConfig,
        tokens: TokenCounter,
        items: ItemStore,
        index: VectorIndex | None,
        notify: Callable[[MemoryNotice], None],
    ) -> None:
        self.agent_id = agent_id
        self.backend = backend
        self.where = common.describe(backend, agent_id)
        self.config = config
        self.tokens = tokens
        self.items = items
        self.notify = notify
        self.chunks: Callable[[ItemRecord, Any], list[IndexChunk]] = functools.partial(
            item_chunks, counter=tokens, max_chars=config.max_index_chars, chunk_tokens=config.chunk_tokens,
            overlap_tokens=config.chunk_overlap_tokens)
        """The chunks of one item (record, content) under this memory's settings
        (:func:`~agent_memory.index.chunking.item_chunks`)."""
        self.embedder = index_embedder(config)
        """Embeds the chunks handed to the vector index (the process's, for this config's model)."""
        self._index = index
        self._owns_index = index is None
        self._opening = threading.Lock()
        """Held while the vector index is opened (taken before the mutex, never after it)."""
        self._lexical: KeywordIndex | None = None
        self._indexed: set[str] = set()
        self._refused: set[str] = set()
        self._settled: str | None = None
        """The store's version when every record was last found indexed or refused: a flush at
        the same version has nothing to do (O(1), not a pass over every record)."""
        self._mutex = threading.RLock()
        self._keyworded: set[str] = set()
        """Items known to be in the keyword index (a subset of what it holds)."""
        self._pending: dict[str, _Pending] = {}
        """Items handed to the indexing thread and not in the vector index yet, in store order."""
        self._taken: set[str] = set()
        """Pending items a batch of the indexing thread is working on."""
        self._pending_chars = 0
        """What the pending items will cost to index, in characters (:meth:`_weight`)."""
        self._changed = threading.Condition(self._mutex)
        """Notified whenever an item leaves (or joins) the pending ones."""
        self._worker: threading.Thread | None = None
        self._stopping = False
        self._scanned: str | None = None
        """The store's version when a query last caught up with every item the indexes lacked."""
        self._read_only: bool | None = None
        self._no_lexical = False
        """No keyword index (the backend answered it has none, or read-only and none was made):
        dense search only, the item records filtering."""
        self.lock_timeout_s = INDEX_LOCK_TIMEOUT_S
        """How long an index write waits for another process's, in seconds."""
        self._foreground = Foreground()
        self._opener: threading.Thread | None = None
        """The thread of :meth:`open_soon`, if one was started."""

    @property
    def read_only(self) -> bool:
        """Whether the agent's storage cannot be written (decided once, when first asked: the
        indexes then open read-only and catch-up indexing is skipped)."""
        with self._mutex:
            if self._read_only is None:
                self._read_only = bool(self.backend.read_only(self.agent_id))
            return self._read_only

    # -- the indexes, opened lazily (chromadb and torch are heavy imports) ---------------------
    @property
    def index(self) -> VectorIndex:
        """The vector index (opened on first use, under a lock of its own: opening takes seconds
        the first time, chromadb's import or a server's connection, and ``store`` and queries,
        which take the mutex, must not wait for it).

        Raises:
            ConfigurationError: if it cannot be opened.
        """
        opened = self._index
        if opened is not None:
            return opened
        with self._opening:
            return self._index if self._index is not None else self._open_index()

    def _open_index(self) -> VectorIndex:
        """Open the vector index (under :attr:`_opening`, with none open)."""
        read_only = self.read_only
        index = self.backend.vector_index(self.agent_id, self.config, self.tokens, read_only=read_only)
        copy = getattr(index, "copy_path", None)
        if read_only and copy is not None:
            detail = (f"vector index read from a private copy in {copy} (chromadb cannot open a database "
                      "without writing to it), deleted on close")
            self.notify(IndexReadOnly(agent_id=self.agent_id, path=self.where, detail=detail))
        self._index = index
        return index

    def open_soon(self) -> None:
        """Start opening the vector index in a thread of its own (``agent-memory-open-<agent>``),
        so that it is open before the first store hands it an item: opening takes from a few
        hundred ms (chromadb's import and client) to seconds, one long stretch of Python that
        cannot step back for a foreground call once begun. The thread waits while a foreground call
        runs (:meth:`foreground`) before it begins, and does nothing when the index is open or
        being opened, or the upkeep is closing. Returns at once; never raises (a failure to open
        is the first use's to raise, as without this call)."""
        with self._mutex:
            if self._index is not None or self._stopping or (self._opener is not None and self._opener.is_alive()):
                return
            self._opener = threading.Thread(target=self._open_early, name=f"agent-memory-open-{self.agent_id}",
                                            daemon=True)
            _LIVE.add(self)
            self._opener.start()

    def _open_early(self) -> None:
        """:meth:`open_soon`'s thread."""
        self._foreground.step_back(lambda: self._stopping, paused=False)
        with self._opening:
            if self._index is not None or self._stopping:
                return
            try:
                self._open_index()
            except Exception:  # noqa: BLE001 - left closed: the first use opens it again and raises
                return

    @property
    def opening(self) -> bool:
        """Whether :meth:`open_soon`'s thread is opening the vector index (or waiting to) now."""
        opener = self._opener
        return opener is not None and opener.is_alive()

    @property
    def lexical(self) -> KeywordIndex | None:
        """The keyword index, or ``None`` if hybrid search is off (opened on first use). One too
        damaged to open is recreated and filled from the store (as in :meth:`repairing`).

        Raises:
            KeywordIndexError: if it cannot be opened for another reason (locked, disk full).
        """
        if not self.config.hybrid_search or self._no_lexical:
            return None
        with self._mutex:
            if self._lexical is None:
                if self.read_only:
                    return self._open_lexical_read_only()
                try:
                    self._lexical = self._keyword_index()
                except KeywordIndexError as exc:
                    if not is_corruption(exc):
                        raise
                    return self._recreate_lexical(exc, refill=True)
            return self._lexical

    def _open_lexical_read_only(self) -> KeywordIndex | None:
        """The keyword index of a read-only memory, opened without writing; ``None`` (and dense
        search only from then on) when there is none. Called under ``_mutex``."""
        self._lexical = self._keyword_index(read_only=True)
        if self._lexical is None:
            detail = "there is no keyword index to read: dense search only"
        else:
            detail = "keyword index opened read-only"
        self.notify(IndexReadOnly(agent_id=self.agent_id, path=self.where, detail=detail))
        return self._lexical

    def repairing(self, call: Callable[[], T]) -> T:
        """``call()``; if the keyword index proves damaged meanwhile (a :class:`KeywordIndexError`
        that ``is_corruption``: SQLite says the file is not a database or is malformed), the
        index is recreated from the store and ``call()`` runs once more (not in a read-only memory,
        where the error is raised)."""
        try:
            return call()
        except KeywordIndexError as exc:
            if not is_corruption(exc) or self.read_only:
                raise
            self._recreate_lexical(exc, refill=True)
            return call()

    def _recreate_lexical(self, exc: BaseException, *, refill: bool) -> KeywordIndex:
        """Drop a damaged keyword index, create it again and report it (:class:`IndexRecreated`);
        with ``refill``, fill it from the store: chunks only, since the vector index is intact,
        so nothing is embedded again."""
        with self._mutex:
            if self._lexical is not None:
                self._lexical.close()
            self._lexical = None
            fresh = self._keyword_index(recreate=True)
            assert fresh is not None  # not read-only
            where = str(getattr(fresh, "path", self.where))  # the file, for the file backend
            self.notify(IndexRecreated(agent_id=self.agent_id, path=where, reason=_describe(exc)))
            self._keyworded.clear()
            self._scanned = None
            if refill:
                records = self.items.records()
                for start in range(0, len(records), INDEX_BATCH_ITEMS):
                    ready = self._prepare(records[start : start + INDEX_BATCH_ITEMS])
                    fresh.add([chunk for _, _, chunks in ready for chunk in chunks])
                    self._keyworded.update(record.id for record, _, _ in ready)
            self._lexical = fresh
            return fresh

    def _locked(self, name: str = "index") -> AbstractContextManager[None]:
        """Hold one of the agent's index locks: ``index`` (vector writes, embedding included, and
        rebuilds) or ``keyword`` (keyword writes). Other processes write under the same locks.

        Raises:
            LockTimeoutError: if another process holds it longer than :attr:`lock_timeout_s`.
        """
        return self.backend.locks(self.agent_id).hold(name, timeout_s=self.lock_timeout_s)

    @contextmanager
    def _both_locked(self) -> Iterator[None]:
        """Hold the ``index`` lock, then the ``keyword`` lock (a reset or a label rewrite changes both)."""
        with self._locked(), self._locked("keyword"):
            yield

    # -- indexing ------------------------------------------------------------------------------
    def add(self, pairs: list[tuple[ItemRecord, Any]]) -> None:
        """Index items (record, content) in both indexes and mark them indexed, all or nothing.

        Raises:
            VectorIndexError, LockTimeoutError, ConfigurationError, or any error of chunking.
        """
        if pairs:
            self._write([chunk for record, content in pairs for chunk in self.chunks(record, content)], pairs)

    def _write(self, chunks: list[IndexChunk], pairs: list[tuple[ItemRecord, Any]], *,
               keyword: bool = True) -> None:
        """Every chunk into the keyword index (unless ``keyword`` is ``False``: already there), then
        into the vector index the ones :func:`~agent_memory.index.chunking.chunks_to_embed` keeps:
        those that start within ``config.max_embedded_chars`` (any start without a keyword
        index, which is then the only way to find the rest), of a table
        (:func:`~agent_memory.index.chunking.is_table`) a spread sample only (every chunk without
        a keyword index), and not near-duplicates of an
        earlier chunk of their item, then those whose vector is no near-duplicate either
        (:meth:`~agent_memory.index.embedding.IndexEmbedder.embed_chunks`, all items in one model
        call). An item's first chunk is always kept, so every item is in both."""
        if keyword:
            self._write_keyword(chunks, pairs)
        self._write_vectors(chunks, pairs)

    def _write_keyword(self, chunks: list[IndexChunk], pairs: list[tuple[ItemRecord, Any]]) -> None:
        """The keyword stage: every chunk into the keyword index (a replace: idempotent), under the
        ``keyword`` lock, which no embedding ever holds, so a query's catch-up never waits for one."""
        if self.lexical is not None:
            with self._locked("keyword"):
                current = self._current(pairs)
                self.lexical.add([chunk for chunk in chunks if chunk.item_id in current])
        with self._changed:
            self._keyworded.update(record.id for record, _ in pairs)
            self._changed.notify_all()  # a query waiting for this stage of a batch goes on now

    def _write_vectors(self, chunks: list[IndexChunk], pairs: list[tuple[ItemRecord, Any]]) -> None:
        """The vector stage, under the ``index`` lock: the chunks of the items the vector index
        does not hold yet are embedded and written. The check and the write are under one lock
        held across processes, so an item another process (or this one's flush) indexed meanwhile
        is never embedded twice (a query never takes this lock: it waits for no embedding)."""
        bound = self.config.max_embedded_chars if self.lexical is not None else None
        tables = (frozenset(record.id for record, content in pairs if is_table(record, content))
                  if bound is not None else frozenset())
        with self._locked():
            started = time.perf_counter()
            current = self._current(pairs)
            held = self._held(current) | ({record.id for record, _ in pairs} - current)
            if held:
                chunks = [chunk for chunk in chunks if chunk.item_id not in held]
            embedded, vectors = self.embedder.embed_chunks(chunks_to_embed(chunks, max_start_char=bound, tables=tables))
            if embedded:
                self.index.add(embedded, vectors)
            seconds = time.perf_counter() - started
        with self._mutex:
            self._indexed.update(record.id for record, _ in pairs)
        written = tuple(record.id for record, _ in pairs if record.id not in held)
        if written:
            self.notify(Indexed(agent_id=self.agent_id, item_ids=written, chunks_embedded=len(embedded),
                                seconds=round(seconds, 3)))

    def _current(self, pairs: list[tuple[ItemRecord, Any]]) -> set[str]:
        """Which of these items are still stored with this content (read under an index lock, which
        ``forget`` and ``rewrite`` take too: a batch that read an item before it was forgotten or
        rewritten never writes it after)."""
        current = set()
        for record, _ in pairs:
            try:
                stored = self.items.get_record(record.id)
            except (ItemNotFoundError, UnsupportedRecordError):
                continue
            if stored.metadata.content_sha256 == record.metadata.content_sha256:
                current.add(record.id)
        return current

    def _held(self, item_ids: set[str]) -> set[str]:
        """Which of ``item_ids`` the vector index holds already (its chunk 0 is there): one call of
        the index's optional :meth:`~agent_memory.storage.vector.HeldItems.held_items` when it
        has one (every built-in index does), else one ``chunk_vector`` lookup each. Either costs
        O(len(item_ids)), never a listing of the whole index: a batch of a flush asks this under
        the ``index`` lock, and a listing per batch made building a memory quadratic (a 100k-item
        memory took hours, benchmarks/bench_scale.py)."""
        if not item_ids:
            return set()
        held_items = getattr(self.index, "held_items", None)
        if callable(held_items):
            return item_ids & set(held_items(sorted(item_ids)))
        return {item_id for item_id in item_ids if self.index.chunk_vector(item_id, 0) is not None}

    def add_stored(self, pairs: list[tuple[ItemRecord, Any]], *, background: bool = True) -> None:
        """Index items that were just stored; never raises (``Exception``). ``background`` (the
        default): hand them to this memory's indexing thread and return at once (waiting only
        when it is :data:`~agent_memory.config.MemoryConfig.max_unindexed_chars` behind: back
        pressure); ``False``: index them here. On failure the items stay pending (retried by
        :meth:`flush` or the next query, which contain an item the index still refuses then)
        and :class:`IndexFailed` is reported with ``pending=True``."""
        if background and pairs:
            self._enqueue(pairs)
            return
        pairs = [(record, content.decode() if isinstance(content, EncodedContent) else content)
                 for record, content in pairs]
        for start in range(0, len(pairs), INDEX_BATCH_ITEMS):
            batch = pairs[start : start + INDEX_BATCH_ITEMS]
            try:
                self.add(batch)
            except Exception as exc:  # noqa: BLE001 - the items are stored; indexing is retried
                self.notify(
                    IndexFailed(
                        agent_id=self.agent_id,
                        item_ids=tuple(record.id for record, _ in batch),
                        error=_describe(exc),
                        pending=True,
                    )
                )

    def flush(self) -> int:
        """Index every stored item the indexes lack, except items this process found unindexable.
        Returns how many items were indexed.

        In a read-only memory nothing is indexed: items the indexes lack are reported
        (:class:`IndexReadOnly`, once per state of the store) and 0 is returned.

        Raises:
            VectorIndexError: if the index fails as a whole: it is down, or it refuses every item
                of a batch (``rebuild_index`` recreates it).
            LockTimeoutError: if another process holds ``index.lock`` too long.
        """
        version = self.items.version()
        with self._mutex:
            if version == self._settled and not self._pending:
                return 0
            for item_id in [item_id for item_id in self._pending if item_id not in self._taken]:
                self._drop_pending(item_id)  # indexed below, here
        try:
            return self._flush(version)
        finally:
            self._wait_pending(None, timeout_s=None)  # and what the indexing thread is doing now

    def _flush(self, version: str) -> int:
        """:meth:`flush`'s catch-up, in the caller's thread."""
        records = self.items.records()
        with self._mutex:
            missing = [r for r in records if r.id not in self._indexed and r.id not in self._refused]
        if not missing:
            with self._mutex:
                self._settled = version
            return 0
        present = self.index.item_ids()
        if self.lexical is not None:
            present &= self.lexical.item_ids()
        with self._mutex:
            self._indexed |= present
            self._keyworded |= present
        todo = [r for r in missing if r.id not in present]
        if todo and self.read_only:
            self.notify(
                IndexReadOnly(
                    agent_id=self.agent_id, path=self.where,
                    detail=f"{len(todo):,} stored items are not in the index and cannot be indexed in a read-only "
                    "memory: text queries and listings miss them; get and retrieve read them",
                    unindexed_ids=tuple(r.id for r in todo[:MAX_REPORTED_IDS]), unindexed_count=len(todo),
                )
            )
            with self._mutex:
                self._settled = version
            return 0
        done = 0
        for start in range(0, len(todo), INDEX_BATCH_ITEMS):
            done += self._index_records(todo[start : start + INDEX_BATCH_ITEMS])
        return done

    def _prepare(self, records: list[ItemRecord]) -> list[tuple[ItemRecord, Any, list[IndexChunk]]]:
        """Content and chunks of each record; a record over the index's bounds, with missing
        content, or whose content cannot be chunked is refused and reported (nothing of it
        reaches the index: one bad record could break chromadb's log for every later write)."""
        ready = []
        for record in records:
            reason = unindexable(record)
            if reason is not None:
                self._refuse(record.id, reason)
                continue
            try:
                content = self.items.load_content(record)
            except StoreError as exc:
                if outage_behind(exc) is not None:
                    raise  # the server is down, not the item's content missing: indexed when it is back
                with self._mutex:
                    self._refused.add(record.id)
                self.notify(ContentMissing(agent_id=self.agent_id, item_id=record.id, error=_describe(exc)))
                continue
            try:
                ready.append((record, content, self.chunks(record, content)))
            except Exception as exc:  # noqa: BLE001 - RecursionError, a page extractor's error...
                self._refuse(record.id, _describe(exc))
                continue
            self._count(record, content)
        return ready

    def _index_records(self, records: list[ItemRecord]) -> int:
        """Index stored records in one batch; if the batch fails and the index still answers, item
        by item (:meth:`_contain`). Returns how many items are in the index now (fully or by
        their label).

        Raises:
            VectorIndexError (or the library error the index raised): if the index fails as a
                whole: a read fails, or it refuses every item and a probe chunk too.
            LockTimeoutError: if another process holds ``index.lock`` too long.
        """
        ready = self._prepare(records)
        if not ready:
            return 0
        try:
            self._write([chunk for _, _, chunks in ready for chunk in chunks], [(r, c) for r, c, _ in ready])
            return len(ready)
        except LockTimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - find out whether the items or the index fail
            self._raise_if_down(exc)
            return self._contain(ready, exc)

    def _contain(self, ready: list[tuple[ItemRecord, Any, list[IndexChunk]]], first: Exception) -> int:
        """After a batch write failed while the index answers reads: each item on its own (a
        second try for a batch of one: a passing failure is not taken for the item's). An item the
        index refuses is indexed by its label only (:meth:`label_chunk`: its type, source,
        title and tags, so filters and listings still find it; its text is not searchable) and
        reported once, :class:`IndexFailed` with ``label_only=True``: being in the index, it is
        never retried. An item whose label is refused too is skipped by this process until
        ``rebuild_index`` (``label_only=False``). Only when every item and a probe chunk of the
        library's own (:data:`PROBE_ITEM_ID`) are refused is the index taken as down
        (``VectorIndexError``): one item, or any number, can never stop it for the others."""
        done = 0
        skipped: list[tuple[str, Exception]] = []
        for record, content, chunks in ready:
            try:
                self._write(chunks, [(record, content)])
                done += 1
                continue
            except LockTimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - this item only, or every item
                error = exc
            try:
                self._write_label(record, content)
            except LockTimeoutError:
                raise
            except Exception:  # noqa: BLE001 - not even its label: skipped, or the index is down
                skipped.append((record.id, error))
                continue
            done += 1
            self.notify(IndexFailed(
                agent_id=self.agent_id, item_ids=(record.id,), pending=False, label_only=True,
                error=shorten(f"{_describe(error)}; the item is indexed by its label only (type, source, title, "
                              "tags): filters and listings find it, its text is not searched", MAX_ERROR_CHARS)))
        if skipped and not done:
            probe_error = self._probe_write()
            if probe_error is not None:
                raise VectorIndexError(
                    f"the index refuses every item and a probe chunk ({probe_error}); AgentMemory.rebuild_index() "
                    "recreates it") from first
        for item_id, failure in skipped:
            self._refuse(item_id, _describe(failure))
        return done

    # -- indexing in the background -----------------------------------------------------------
    def foreground(self) -> AbstractContextManager[None]:
        """A foreground call (``store``, ``query``, an agent's step): while one runs, the indexing
        thread steps back at its next checkpoint (:class:`~agent_memory.index.foreground.Foreground`); waiting for the thread
        inside it lets it work. Nested and concurrent calls are fine."""
        return self._foreground.call()

    @property
    def stepping_back(self) -> bool:
        """Whether the indexing thread is paused for a foreground call now."""
        return self._foreground.paused

    def _step_back(self) -> None:
        """A checkpoint of the indexing thread (no-op on any other thread: a flush indexing in the
        caller's thread is the caller's own work)."""
        if threading.current_thread() is self._worker:
            self._foreground.step_back(lambda: self._stopping)

    def _weight(self, record: ItemRecord) -> int:
        """What indexing an item costs, in characters: its size, of which at most
        ``max_embedded_chars`` are embedded (the rest is chunked and keyword-indexed only)."""
        return min(record.metadata.size_bytes, self.config.max_embedded_chars) + 1

    def _enqueue(self, pairs: list[tuple[ItemRecord, Any]], *, retry: bool = False) -> None:
        """Hand items to the indexing thread (started on first use). Waits while the pending items
        weigh more than ``config.max_unindexed_chars`` (back pressure: a producer far ahead of
        the embedding model is slowed to its pace instead of growing memory without bound)."""
        with self._changed:
            for record, content in pairs:
                if record.id in self._pending:
                    self._drop_pending(record.id)
                self._pending[record.id] = _Pending(record, content, retry=retry)
                self._pending_chars += self._weight(record)
            self._settled = None
            if self._stopping:  # a store racing close: indexed by the next opening's catch-up
                for record, _ in pairs:
                    self._drop_pending(record.id)
                return
            if self._worker is None or not self._worker.is_alive():
                self._start_worker()
            self._changed.notify_all()
            if self._pending_chars > self.config.max_unindexed_chars:
                with self._foreground.aside():
                    while self._pending_chars > self.config.max_unindexed_chars and not self._stopping \
                            and self._worker is not None and threading.current_thread() is not self._worker:
                        self._changed.wait(BACK_PRESSURE_POLL_S)

    def _start_worker(self) -> None:
        """Start the indexing thread (under the mutex). It ends when nothing is pending; at
        interpreter exit, :func:`_finish_indexing` lets it index what is pending first."""
        self._worker = threading.Thread(target=self._work, name=f"agent-memory-index-{self.agent_id}", daemon=True)
        _LIVE.add(self)
        self._worker.start()

    def _drop_pending(self, item_id: str) -> None:
        """Forget a pending item (under the mutex)."""
        entry = self._pending.pop(item_id, None)
        if entry is not None:
            self._pending_chars -= self._weight(entry.record)
            self._taken.discard(item_id)

    def _unqueue(self, item_ids: list[str] | None) -> None:
        """Take items (``None``: all) out of the pending ones: forgotten, rewritten or reset; a
        batch already working on one re-checks that it is still stored before writing it."""
        with self._changed:
            for item_id in list(self._pending) if item_ids is None else item_ids:
                self._drop_pending(item_id)
            self._changed.notify_all()

    def _work(self) -> None:
        """The indexing thread: pending items in store order, a batch at a time (at most
        ``INDEX_BATCH_ITEMS`` items and ``max_embedded_chars`` characters of them to embed), until
        nothing is pending. It steps back for foreground calls between batches, items and stages
        (:meth:`_step_back`), and inside a stage's long loops (:func:`~agent_memory.background.checkpoint`)."""
        with checkpoints(self._step_back):
            self._work_until_idle()

    def _work_until_idle(self) -> None:
        """:meth:`_work`'s batches."""
        while True:
            self._step_back()
            with self._changed:
                batch = self._untaken()
                if not batch:
                    if self._worker is threading.current_thread():
                        self._worker = None  # idle: the next store starts a thread again
                    self._changed.notify_all()
                    return
                budget, chosen = self.config.max_embedded_chars, list[_Pending]()
                for entry in batch[:INDEX_BATCH_ITEMS]:
                    if chosen and budget <= 0:
                        break
                    chosen.append(entry)
                    budget -= self._weight(entry.record)
                self._taken.update(entry.record.id for entry in chosen)
            try:
                self._index_pending(chosen)
            except Exception as exc:  # noqa: BLE001 - the items stay stored; the next query or flush retries
                with self._mutex:
                    self._settled = self._scanned = None  # the next query looks for them again
                self.notify(IndexFailed(agent_id=self.agent_id, item_ids=tuple(e.record.id for e in chosen),
                                        error=_describe(exc), pending=True))
            finally:
                with self._changed:
                    for entry in chosen:
                        if self._pending.get(entry.record.id) is entry:
                            self._drop_pending(entry.record.id)
                    self._changed.notify_all()

    def _untaken(self) -> list[_Pending]:
        """Pending items no batch works on (under the mutex), in store order."""
        return [entry for item_id, entry in self._pending.items() if item_id not in self._taken]

    def _index_pending(self, batch: list[_Pending]) -> None:
        """Index a batch of pending items: their chunks (kept from a query's keyword stage when
        one ran), the keyword stage for those not in the keyword index yet, the token counts of
        those stored uncounted (:meth:`_count`), the vector stage; a
        batch that fails while the index answers is contained item by item (:meth:`_contain`).
        Items forgotten meanwhile are skipped."""
        ready: list[tuple[ItemRecord, Any, list[IndexChunk]]] = []
        for entry in batch:
            self._step_back()
            if not self.items.contains(entry.record.id):
                continue
            chunks = entry.chunks if entry.chunks is not None else self._chunks_of(entry.record, entry.content)
            if chunks is not None:
                ready.append((entry.record, entry.content, chunks))
        if not ready:
            return
        with self._mutex:
            fresh = [(r, c, k) for r, c, k in ready if r.id not in self._keyworded]
        try:
            try:
                if fresh:
                    self._step_back()
                    self._write_keyword([chunk for _, _, chunks in fresh for chunk in chunks],
                                        [(r, c) for r, c, _ in fresh])
            finally:  # after the keyword stage, which a query may be waiting for
                for record, content, _ in ready:
                    self._step_back()
                    self._count(record, content)
            self._step_back()
            self._write_vectors([chunk for _, _, chunks in ready for chunk in chunks], [(r, c) for r, c, _ in ready])
        except LockTimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - find out whether the items or the index fail
            if not any(entry.retry for entry in batch):
                raise  # reported as pending: the next query or flush tries again, and contains
            self._raise_if_down(exc)
            self._contain(ready, exc)

    def _chunks_of(self, record: ItemRecord, content: Any) -> list[IndexChunk] | None:
        """An item's chunks; ``None`` (and the item refused, reported) when it cannot be chunked.
        Its token counts are not written here: the indexing thread's batch writes them after its
        keyword stage (:meth:`_index_pending`), so neither a query's keyword stage (which calls
        this in the caller's thread) nor a query waiting for the batch's pays for them."""
        reason = unindexable(record)
        if reason is not None:
            self._refuse(record.id, reason)
            return None
        try:
            return self.chunks(record, content)
        except Exception as exc:  # noqa: BLE001 - RecursionError, a page extractor's error...
            self._refuse(record.id, _describe(exc))
            return None

    def _count(self, record: ItemRecord, content: Any) -> None:
        """Write the token counts of an item stored uncounted (a large result: ``store`` leaves
        them to this thread, :data:`~agent_memory.records.prepare.EAGER_COUNT_BYTES`). A failed
        write leaves it uncounted, counted on demand until the next indexing counts it."""
        if record.metadata.tokens is not None or self.read_only:
            return
        tokens, text_tokens = count_tokens(
            MemoryItem(id=record.id, type=record.type, metadata=record.metadata, content=content), self.tokens)
        try:
            self.items.set_counts(record.id, record.metadata.content_sha256, tokens, text_tokens)
        except StoreError as exc:
            self.notify(IndexFailed(agent_id=self.agent_id, item_ids=(record.id,), pending=True,
                                    error=f"counting its tokens: {_describe(exc)}"))

    def _wait_pending(self, item_ids: set[str] | None, *, timeout_s: float | None) -> bool:
        """Wait until none of ``item_ids`` (``None``: no item at all) is pending, at most
        ``timeout_s`` seconds (``None``: no bound). Whether they all left."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._foreground.aside(), self._changed:
            while True:
                waiting = self._pending.keys() if item_ids is None else self._pending.keys() & item_ids
                if not waiting:
                    return True
                if self._worker is None or not self._worker.is_alive():
                    if not self._stopping and self._untaken():  # a store raced the thread's end
                        self._start_worker()
                        continue
                    return False  # nothing will index them: a query or flush catches up
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return False
                self._changed.wait(left)

    def unembedded(self) -> frozenset[str]:
        """Items handed to the indexing thread whose vectors are not written yet (a query's
        keyword stage has put them into the keyword index: :meth:`for_query`). A query ranks each
        by its keyword rank in both rankings (:func:`~agent_memory.index.fusion.fuse`); one whose
        vectors a batch writes meanwhile and the dense search finds is ranked by its vectors."""
        with self._mutex:
            return frozenset(item_id for item_id in self._pending if item_id not in self._indexed)

    def wait(self, timeout_s: float | None = None) -> bool:
        """Wait until the indexing thread has done what it was handed (indexing nothing in this
        thread, retrying nothing: :meth:`flush` does both), at most ``timeout_s`` seconds
        (``None``: no bound). Whether nothing is pending now."""
        return self._wait_pending(None, timeout_s=timeout_s)

    def for_query(self, wait_s: float, *, before_wait: Callable[[], object] | None = None) -> None:
        """Make a query read its own writes: every stored item in the keyword index now (the items
        of other processes and of a crash too: their keyword stage runs here, in the caller's
        thread, and never waits for an embedding), and the vectors of every item stored before
        this call, waited for at most ``wait_s`` seconds (``MemoryConfig.query_wait_s``): an item
        not embedded by then is found by its keywords only. Items no indexing thread holds
        (another process's, a crash's) are handed to this memory's.

        ``before_wait`` is called once, in this thread, right before the wait for pending vectors,
        and never when none is pending (the indexes in step: one read of the store's change
        token, then nothing): a query embeds its text there, so that the wait counts from a
        loaded model, and otherwise embeds it beside its keyword search.

        Raises:
            KeywordIndexError, VectorIndexError, LockTimeoutError: if an index fails as a whole.
        """
        if self.read_only:
            self.flush()  # reports what cannot be indexed
            return
        version = self.items.version()
        with self._mutex:
            if version == self._settled and not self._pending:
                return
            if version == self._scanned:  # nothing stored since the last scan: only this thread's items wait
                waiting = set(self._pending)
        if version == self._scanned:
            if self._wait_for_query(waiting, wait_s, before_wait):
                with self._mutex:
                    if not self._pending:
                        self._settled = version
            return
        records = self.items.records()
        with self._mutex:
            keyword_missing = [r for r in records if r.id not in self._keyworded and r.id not in self._refused]
        if keyword_missing and self.lexical is not None:
            self._catch_up_keywords(keyword_missing)
        with self._mutex:
            vector_missing = [r for r in records if r.id not in self._indexed and r.id not in self._refused]
            unknown = [r for r in vector_missing if r.id not in self._pending]
        if unknown:
            present = self.index.item_ids()
            with self._mutex:
                self._indexed |= present & {r.id for r in unknown}
            lost = [r for r in unknown if r.id not in present]
            if lost:
                self._enqueue([(r, self.items.load_content(r)) for r in lost if self._loadable(r)], retry=True)
        with self._mutex:
            self._scanned = version
        if vector_missing and not self._wait_for_query({r.id for r in vector_missing}, wait_s, before_wait):
            return
        with self._mutex:
            if not self._pending:
                self._settled = version

    def _wait_for_query(self, item_ids: set[str], wait_s: float, before_wait: Callable[[], object] | None) -> bool:
        """:meth:`_wait_pending` for a query, calling ``before_wait`` first when one of
        ``item_ids`` is pending."""
        with self._mutex:
            pending = bool(self._pending.keys() & item_ids)
        if pending and before_wait is not None:
            before_wait()
        return self._wait_pending(item_ids, timeout_s=wait_s)

    def _loadable(self, record: ItemRecord) -> bool:
        """Whether an item's content can be read (a missing blob is refused and reported)."""
        try:
            self.items.load_content(record)
            return True
        except StoreError as exc:
            if outage_behind(exc) is not None:
                raise
            with self._mutex:
                self._refused.add(record.id)
            self.notify(ContentMissing(agent_id=self.agent_id, item_id=record.id, error=_describe(exc)))
            return False

    def _catch_up_keywords(self, missing: list[ItemRecord]) -> None:
        """The keyword stage, here, of the items the keyword index lacks: pending ones whose batch
        has not started (their chunks are kept for it) and items no thread of this process holds
        (checked against the index first); pending items a batch works on are waited for (the
        batch writes keywords before it embeds)."""
        with self._mutex:
            mine = {r.id: self._pending[r.id] for r in missing if r.id in self._pending and r.id not in self._taken}
            busy = {r.id for r in missing if r.id in self._taken}
            others = [r for r in missing if r.id not in self._pending]
        if others:
            assert self.lexical is not None
            present = self.lexical.item_ids()
            with self._mutex:
                self._keyworded |= present & {r.id for r in others}
            others = [r for r in others if r.id not in present]
        work: list[tuple[ItemRecord, Any, list[IndexChunk]]] = []
        for entry in mine.values():
            entry.chunks = entry.chunks if entry.chunks is not None else self._chunks_of(entry.record, entry.content)
            if entry.chunks is not None:
                work.append((entry.record, entry.content, entry.chunks))
        work += self._prepare(others)
        if work:
            try:
                self._write_keyword([chunk for _, _, chunks in work for chunk in chunks], [(r, c) for r, c, _ in work])
            except LockTimeoutError:
                raise
            except Exception as exc:  # noqa: BLE001 - an item the keyword index refuses: contained here
                self._raise_if_down(exc)
                self._contain(work, exc)
        if busy:
            deadline = time.monotonic() + self.lock_timeout_s
            with self._changed:
                while busy - self._keyworded and busy & self._pending.keys() and time.monotonic() < deadline:
                    self._changed.wait(BACK_PRESSURE_POLL_S)

    def label_chunk(self, record: ItemRecord) -> IndexChunk:
        """The one chunk that stands for an item whose text the index cannot take: its type,
        source, title and tags as text (no content), carrying the item's filter facts."""
        meta = record.metadata
        label = f"{record.type} from {meta.source}" + (f": {meta.title}" if meta.title else "")
        if meta.tags:
            label += f" [{', '.join(meta.tags)}]"
        label += "\n"
        return IndexChunk(item_id=record.id, chunk_index=0, text=label, header_chars=len(label), start_char=0,
                          type=record.type, source=meta.source, timestamp_s=meta.timestamp.timestamp(), tags=meta.tags)

    def _write_label(self, record: ItemRecord, content: Any) -> None:
        """Index ``record`` by its label only, after taking out what a failed write left of it."""
        with self._both_locked():
            self.index.delete_items([record.id])
            if self.lexical is not None:
                self.lexical.delete_items([record.id])
        self._write([self.label_chunk(record)], [(record, content)])

    def _probe_write(self) -> str | None:
        """Write a chunk of the library's own and take it out again: ``None`` if the index took
        it (it works; the items are at fault), else what it said."""
        probe = IndexChunk(item_id=PROBE_ITEM_ID, chunk_index=0, text="index probe\n", header_chars=0, start_char=0,
                           type="custom", source="agent", timestamp_s=0.0, tags=())
        try:
            _, vector = self.embedder.embed_chunks([probe])
            with self._both_locked():
                self.index.add([probe], vector)
                if self.lexical is not None:
                    self.lexical.add([probe])
                self.index.delete_items([PROBE_ITEM_ID])
                if self.lexical is not None:
                    self.lexical.delete_items([PROBE_ITEM_ID])
        except LockTimeoutError:
            raise
        except Exception as exc:  # noqa: BLE001 - the answer is the error
            return _describe(exc)
        return None

    def _raise_if_down(self, exc: Exception) -> None:
        """Re-raise ``exc`` (a library error: ``VectorIndexError``, ``ConfigurationError``) when
        the indexes fail as a whole, not only for the items at hand: a health probe fails too."""
        if not isinstance(exc, AgentMemoryError):
            return
        try:
            self.index.item_ids()
            if self.lexical is not None:
                self.lexical.item_ids()
        except Exception:  # noqa: BLE001 - the index is down, not the items
            raise exc from exc.__cause__

    def _refuse(self, item_id: str, error: str) -> None:
        """Skip an item until :meth:`rebuild` and report it (``IndexFailed``, not pending), once."""
        with self._mutex:
            if item_id in self._refused:
                return
            self._refused.add(item_id)
        self.notify(IndexFailed(agent_id=self.agent_id, item_ids=(item_id,), error=error, pending=False))

    @property
    def refused(self) -> frozenset[str]:
        """Ids this process skips until :meth:`rebuild` (unindexable items, missing content)."""
        with self._mutex:
            return frozenset(self._refused)

    @contextmanager
    def replacing(self, item_ids: list[str]) -> Iterator[None]:
        """Take items out of both indexes and keep every index write out until the body (which
        replaces them in the store: a rewrite) is done, so that no batch can write their old
        content after it, nor take the new content's vectors for written already; then hand the
        items' new content to :meth:`add_stored`.

        Raises:
            VectorIndexError, KeywordIndexError, LockTimeoutError: if an index fails (nothing
                replaced then).
        """
        self._unqueue(item_ids)
        with self._both_locked():
            self._remove(item_ids)
            yield

    def delete(self, item_ids: list[str]) -> None:
        """Remove the items' chunks from both indexes (items already gone from the store).

        Raises:
            VectorIndexError, LockTimeoutError: if an index fails (a query skips hits whose item
                is no longer stored, and :meth:`rebuild` drops them for good).
        """
        if not item_ids:
            return
        self._unqueue(item_ids)
        with self._both_locked():
            self._remove(item_ids)

    def _remove(self, item_ids: list[str]) -> None:
        """The items' chunks out of both indexes and out of what this memory knows was indexed
        or refused (under both locks)."""
        self.index.delete_items(item_ids)
        if self.lexical is not None:
            self.lexical.delete_items(item_ids)
        with self._mutex:
            self._indexed.difference_update(item_ids)
            self._keyworded.difference_update(item_ids)
            self._refused.difference_update(item_ids)
            self._settled = self._scanned = None

    # -- reset and rebuild -----------------------------------------------------------------------
    def reset(self) -> None:
        """Empty both indexes (a damaged keyword index file is deleted and created again) and
        forget what was indexed or refused."""
        self._unqueue(None)
        with self._both_locked():
            self.index.reset()
            self._reset_lexical()
        with self._mutex:
            self._indexed.clear()
            self._keyworded.clear()
            self._refused.clear()
            self._settled = self._scanned = None

    def _keyword_index(self, *, read_only: bool = False, recreate: bool = False) -> KeywordIndex | None:
        """The backend's keyword index; ``None`` when it has none (to read), and then it is not
        asked again (:attr:`_no_lexical`)."""
        opened = self.backend.keyword_index(self.agent_id, self.config, read_only=read_only, recreate=recreate)
        if opened is None:
            self._no_lexical = True
        return opened

    def _reset_lexical(self) -> None:
        if not self.config.hybrid_search or self._no_lexical:
            return
        try:
            with self._mutex:
                if self._lexical is None:
                    self._lexical = self._keyword_index()
                lexical = self._lexical
            if lexical is not None:  # None: the backend has no keyword index
                lexical.reset()
        except KeywordIndexError as exc:
            if not is_corruption(exc):
                raise
            self._recreate_lexical(exc, refill=False)  # the caller indexes every item next

    def rebuild(self) -> int:
        """Drop both indexes and index every item again; returns the number indexed."""
        self.reset()
        return self.flush()

    def close(self) -> None:
        """Let the indexing thread finish what was stored (it indexes every pending item first),
        then close the keyword index's connections and the vector index this object opened."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
            worker = self._worker
        self._foreground.wake()
        if worker is not None and worker is not threading.current_thread():
            worker.join()
        opener = self._opener
        if opener is not None:
            opener.join()  # an index it is opening now is closed below; one not begun is never opened
        with self._opening, self._mutex:  # an index being opened now is closed too
            lexical, self._lexical = self._lexical, None
            index = self._index if self._owns_index else None
            if self._owns_index:
                self._index = None
        if lexical is not None:
            lexical.close()
        close = getattr(index, "close", None)
        if callable(close):
            close()


def unindexable(record: ItemRecord) -> str | None:
    """Why a record must not reach the index (it exceeds the bounds of :mod:`agent_memory.limits`
    that keep chromadb working: a record written by an older version, or by hand), or ``None``."""
    meta = record.metadata
    problems = []
    if len(meta.tags) > MAX_TAGS or any(len(tag) > MAX_TAG_CHARS for tag in meta.tags):
        problems.append(f"{len(meta.tags):,} tags (at most {MAX_TAGS} of {MAX_TAG_CHARS} characters)")
    if len(meta.source) > MAX_SOURCE_CHARS:
        problems.append(f"a source of {len(meta.source):,} characters (at most {MAX_SOURCE_CHARS:,})")
    if meta.title is not None and len(meta.title) > MAX_TITLE_CHARS:
        problems.append(f"a title of {len(meta.title):,} characters (at most {MAX_TITLE_CHARS:,})")
    return f"the record has {' and '.join(problems)}; it is stored but cannot be indexed" if problems else None


def _describe(exc: BaseException) -> str:
    return shorten(f"{type(exc).__name__}: {exc}", MAX_ERROR_CHARS)


_LIVE: weakref.WeakSet[IndexUpkeep] = weakref.WeakSet()
"""Every upkeep that started an indexing thread in this process."""


def _finish_indexing() -> None:
    """At interpreter exit, before Python stops letting threads start thread pools (chromadb's
    writes start one) and before it kills daemon threads (one killed inside torch aborts the
    process): let every indexing thread index what was stored, so a script that stores and ends
    without ``close`` leaves a complete index."""
    for upkeep in list(_LIVE):
        upkeep.wait()
        opener = upkeep._opener
        if opener is not None:
            opener.join()  # never killed inside chromadb's import


# Both modules register a callback of their own when first imported, which Python refuses once the
# main thread has ended; the embedding model's imports (joblib) import them: imported here, so the
# indexing thread can load the model while the interpreter waits for it at exit.
import concurrent.futures.process  # noqa: E402,F401
import concurrent.futures.thread  # noqa: E402,F401

# ``threading._register_atexit`` runs its callbacks when the main thread ends, in reverse order,
# before ``concurrent.futures`` refuses new pools (its own callback, registered at its import,
# earlier than this one); ``atexit`` would run too late for that. Fall back to ``atexit`` where it
# is missing (it is private to CPython).
getattr(threading, "_register_atexit", atexit.register)(_finish_indexing)
