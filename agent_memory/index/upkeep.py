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

import functools
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, TypeVar

from agent_memory.config import MemoryConfig
from agent_memory.errors import (
    AgentMemoryError,
    KeywordIndexError,
    LockTimeoutError,
    StoreError,
    VectorIndexError,
    outage_behind,
)
from agent_memory.index.chunking import chunks_to_embed, item_chunks
from agent_memory.index.embedding import index_embedder
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.keyword import is_corruption
from agent_memory.storage.vector import IndexChunk, VectorIndex
from agent_memory.limits import MAX_SOURCE_CHARS, MAX_TAG_CHARS, MAX_TAGS, MAX_TITLE_CHARS, shorten
from agent_memory.models.items import ItemRecord
from agent_memory.observers import ContentMissing, IndexFailed, IndexReadOnly, IndexRecreated, MemoryNotice
from agent_memory.storage.contracts import Backend
from agent_memory.records.items import ItemStore
from agent_memory.tokens import TokenCounter
from agent_memory.storage import common

__all__ = ["INDEX_BATCH_ITEMS", "INDEX_LOCK_TIMEOUT_S", "PROBE_ITEM_ID", "IndexUpkeep", "unindexable"]

INDEX_BATCH_ITEMS = 256
"""Items embedded per index write in bulk operations (``store_many``, ``flush_index``)."""

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
        self._lexical: KeywordIndex | None = None
        self._indexed: set[str] = set()
        self._refused: set[str] = set()
        self._settled: str | None = None
        """The store's version when every record was last found indexed or refused: a flush at
        the same version has nothing to do (O(1), not a pass over every record)."""
        self._mutex = threading.RLock()
        self._read_only: bool | None = None
        self._no_lexical = getattr(backend, "keyword_index", None) is None
        """No keyword index (a backend without one, or read-only and none was made): dense search
        only, the item records filtering."""
        self.lock_timeout_s = INDEX_LOCK_TIMEOUT_S
        """How long an index write waits for another process's, in seconds."""

    @property
    def read_only(self) -> bool:
        """Whether the agent's storage cannot be written (decided once, when first asked: the
        indexes then open read-only and catch-up indexing is skipped)."""
        with self._mutex:
            if self._read_only is None:
                self._read_only = common.read_only(self.backend, self.agent_id)
            return self._read_only

    # -- the indexes, opened lazily (chromadb and torch are heavy imports) ---------------------
    @property
    def index(self) -> VectorIndex:
        """The vector index (opened on first use).

        Raises:
            ConfigurationError: if it cannot be opened.
        """
        with self._mutex:
            if self._index is None:
                read_only = self.read_only
                index = self.backend.vector_index(self.agent_id, self.config, self.tokens, read_only=read_only)
                copy = getattr(index, "copy_path", None)
                if read_only and copy is not None:
                    detail = (f"vector index read from a private copy in {copy} (chromadb cannot open a database "
                              "without writing to it), deleted on close")
                    self.notify(IndexReadOnly(agent_id=self.agent_id, path=self.where, detail=detail))
                self._index = index
            return self._index

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
            self._no_lexical = True
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
            if refill:
                records = self.items.records()
                for start in range(0, len(records), INDEX_BATCH_ITEMS):
                    ready = self._prepare(records[start : start + INDEX_BATCH_ITEMS])
                    fresh.add([chunk for _, _, chunks in ready for chunk in chunks])
            self._lexical = fresh
            return fresh

    def _locked(self) -> AbstractContextManager[None]:
        """Hold the agent's ``index`` lock (other processes index or rebuild under it).

        Raises:
            LockTimeoutError: if another process holds it longer than :attr:`lock_timeout_s`.
        """
        return self.backend.locks(self.agent_id).hold("index", timeout_s=self.lock_timeout_s)

    # -- indexing ------------------------------------------------------------------------------
    def add(self, pairs: list[tuple[ItemRecord, Any]]) -> None:
        """Index items (record, content) in both indexes and mark them indexed, all or nothing.

        Raises:
            VectorIndexError, LockTimeoutError, ConfigurationError, or any error of chunking.
        """
        if pairs:
            self._write([chunk for record, content in pairs for chunk in self.chunks(record, content)], pairs)

    def _write(self, chunks: list[IndexChunk], pairs: list[tuple[ItemRecord, Any]]) -> None:
        """Every chunk into the keyword index, and into the vector index, with their vectors, the
        ones :func:`~agent_memory.index.chunking.chunks_to_embed` keeps: those that start within
        ``config.max_embedded_chars`` (any start without a keyword index, which is then the only
        way to find the rest) and are not near-duplicates of an earlier chunk of their item, then
        those whose vector is no near-duplicate either
        (:meth:`~agent_memory.index.embedding.IndexEmbedder.embed_chunks`, all items in one model
        call, before the lock is taken). An item's first chunk is always kept, so every item is in
        both."""
        bound = self.config.max_embedded_chars if self.lexical is not None else None
        embedded, vectors = self.embedder.embed_chunks(chunks_to_embed(chunks, max_start_char=bound))
        with self._locked():
            self.index.add(embedded, vectors)
            if self.lexical is not None:
                self.lexical.add(chunks)
        with self._mutex:
            self._indexed.update(record.id for record, _ in pairs)

    def add_stored(self, pairs: list[tuple[ItemRecord, Any]]) -> None:
        """Index items that were just stored; never raises (``Exception``). On failure the items
        stay pending (retried by :meth:`flush`, which contains an item the index still refuses
        then) and :class:`IndexFailed` is reported with ``pending=True``."""
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
            if version == self._settled:
                return 0
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
        with self._locked():
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
            with self._locked():
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
        """Skip an item until :meth:`rebuild` and report it (``IndexFailed``, not pending)."""
        with self._mutex:
            self._refused.add(item_id)
        self.notify(IndexFailed(agent_id=self.agent_id, item_ids=(item_id,), error=error, pending=False))

    @property
    def refused(self) -> frozenset[str]:
        """Ids this process skips until :meth:`rebuild` (unindexable items, missing content)."""
        with self._mutex:
            return frozenset(self._refused)

    def delete(self, item_ids: list[str]) -> None:
        """Remove the items' chunks from both indexes (items already gone from the store).

        Raises:
            VectorIndexError, LockTimeoutError: if an index fails (a query skips hits whose item
                is no longer stored, and :meth:`rebuild` drops them for good).
        """
        if not item_ids:
            return
        with self._locked():
            self.index.delete_items(item_ids)
            if self.lexical is not None:
                self.lexical.delete_items(item_ids)
        with self._mutex:
            self._indexed.difference_update(item_ids)
            self._settled = None
            self._refused.difference_update(item_ids)

    # -- reset and rebuild -----------------------------------------------------------------------
    def reset(self) -> None:
        """Empty both indexes (a damaged keyword index file is deleted and created again) and
        forget what was indexed or refused."""
        with self._locked():
            self.index.reset()
            self._reset_lexical()
        with self._mutex:
            self._indexed.clear()
            self._refused.clear()
            self._settled = None

    def _keyword_index(self, *, read_only: bool = False, recreate: bool = False) -> KeywordIndex | None:
        """The backend's keyword index (``keyword_index`` is optional in the contract: a backend
        without one is never asked, :attr:`_no_lexical` says so first)."""
        opened: KeywordIndex | None = getattr(self.backend, "keyword_index")(
            self.agent_id, self.config, read_only=read_only, recreate=recreate)
        return opened

    def _reset_lexical(self) -> None:
        if not self.config.hybrid_search or self._no_lexical:
            return
        try:
            with self._mutex:
                if self._lexical is None:
                    self._lexical = self._keyword_index()
                lexical = self._lexical
            assert lexical is not None  # not read-only
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
        """Close the keyword index's connections and the vector index this object opened."""
        with self._mutex:
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
