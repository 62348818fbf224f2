"""AgentMemory: the content store an agent holds (seed 002, "Memory Interface").

``store`` puts a full result out of the context and returns its memory id; ``retrieve`` gives it
back shaped by a transform and capped in tokens; ``query`` finds items by meaning and filters;
``clear``, ``snapshot`` and ``restore`` manage its life. The JSONL item store is the source of
truth; the Chroma index is derived and catches up by itself (after a crash, a deferred store, or
items another process added), and ``rebuild_index`` recreates it from the JSONL.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from filelock import FileLock

from agent_memory.config import MemoryConfig, resolve_memory_dir
from agent_memory.errors import ItemNotFoundError, StoreError
from agent_memory.ids import new_memory_id, validate_agent_id, validate_memory_id
from agent_memory.index.chunking import chunk_text
from agent_memory.index.lexical import LexicalIndex
from agent_memory.index.text import chunk_header, indexable_text
from agent_memory.index.vector import ChunkHit, IndexChunk, VectorIndex
from agent_memory.models.items import (
    ItemMetadata,
    ItemRecord,
    MemoryCriteria,
    MemoryItem,
    MemorySnapshot,
    MemoryTransform,
    MemoryType,
    QueryHit,
    RetrieveResult,
    content_from_bytes,
    content_to_bytes,
)
from agent_memory.presentation.plugins import PluginRegistry
from agent_memory.store.content import sha256_hex
from agent_memory.store.items import ItemStore
from agent_memory.tokens import TiktokenCounter, TokenCounter
from agent_memory.transforms import apply_transform, extractive_summary, raw_text, readable_text

__all__ = ["AgentMemory"]

DEFAULT_AGENT_ID = "default"
"""Agent id used when none is given."""

INDEX_BATCH_ITEMS = 256
"""Items embedded per index write in bulk operations (``store_many``, ``flush_index``)."""

SEARCH_CHUNKS_PER_ITEM = 8
"""Chunks fetched per wanted item in a text query, so that items with many matching chunks do
not crowd out the others; doubled until ``limit`` distinct items are found or the index is spent."""


class AgentMemory:
    """The memory of one agent, under ``<memory_dir>/agents/<agent_id>/``.

    Args:
        agent_id: names the agent's directory; 1-128 of ``A-Z a-z 0-9 _ . -``.
        memory_dir: base directory; ``None``: ``AGENT_MEMORY_DIR`` or ``./memory``.
        config: storage and index settings; ``None``: ``MemoryConfig()``.
        token_counter: counts tokens; ``None``: tiktoken with ``config.token_encoding``.
        index: a vector index to use instead of the Chroma one ``config`` describes.
        plugins: compaction plugins; the first that matches an item makes its ``summary``
            retrieve transform. ``None``: the installed ones
            (``PluginRegistry.from_entry_points()``), loaded on first use.

    Raises:
        InvalidIdError: if ``agent_id`` is not a safe directory name.
        ConfigurationError: if the index cannot be opened (lazily, on first index use).

    Thread-safe within a process. Several processes may share one memory directory: appends to
    ``items.jsonl`` are locked and lose nothing, and a process sees items another one stored on
    its next read. The embedded Chroma index is reopened when another process wrote to it, so
    readers always see every vector; but embedded chromadb can still drop a vector when two
    processes *index* at the same moment (measured: 1 of 1,200 with two concurrent writers), so
    for concurrent writers use ``chroma_mode="server"`` (tested lossless), or let writers store
    with ``index_on_store=False`` and one process index (``flush_index``). ``rebuild_index``
    repairs an index from the JSONL at any time.
    """

    def __init__(
        self,
        agent_id: str = DEFAULT_AGENT_ID,
        memory_dir: str | os.PathLike[str] | None = None,
        *,
        config: MemoryConfig | None = None,
        token_counter: TokenCounter | None = None,
        index: VectorIndex | None = None,
        plugins: PluginRegistry | None = None,
    ) -> None:
        self.agent_id = validate_agent_id(agent_id)
        self.memory_dir = resolve_memory_dir(memory_dir)
        self.agent_dir = self.memory_dir / "agents" / self.agent_id
        self.config = config if config is not None else MemoryConfig()
        self.tokens = token_counter if token_counter is not None else TiktokenCounter(self.config.token_encoding)
        self._store = ItemStore(self.agent_dir)
        self._index = index
        self._lexical: LexicalIndex | None = None
        self._indexed: set[str] = set()
        self._mutex = threading.RLock()
        self._index_lock = FileLock(str(self.agent_dir / "index.lock"), timeout=600)
        self._plugins = plugins

    def __repr__(self) -> str:
        return f"AgentMemory(agent_id={self.agent_id!r}, memory_dir={str(self.memory_dir)!r})"

    # -- the index, opened lazily (chromadb and torch are heavy imports) ---------------------
    @property
    def index(self) -> VectorIndex:
        """The vector index (opened on first use)."""
        with self._mutex:
            if self._index is None:
                from agent_memory.index.chroma import ChromaVectorIndex

                self.agent_dir.mkdir(parents=True, exist_ok=True)
                self._index = ChromaVectorIndex(self.agent_id, self.config, path=self.agent_dir / "index" / "chroma")
            return self._index

    @property
    def lexical(self) -> LexicalIndex | None:
        """The BM25 keyword index (``index/lexical.sqlite3``), or ``None`` if hybrid search is off."""
        if not self.config.hybrid_search:
            return None
        with self._mutex:
            if self._lexical is None:
                self._lexical = LexicalIndex(self.agent_dir / "index" / "lexical.sqlite3")
            return self._lexical

    # -- store ---------------------------------------------------------------------------------
    def store(
        self,
        content: Any,
        *,
        type: MemoryType = "custom",  # noqa: A002 - the seed's field name
        source: str = "agent",
        tags: Iterable[str] = (),
        related_to: Iterable[str] = (),
        title: str | None = None,
        media_type: str | None = None,
        extra: dict[str, Any] | None = None,
        timestamp: datetime | None = None,
    ) -> str:
        """Store a full result and return its new memory id (``mem_`` + 12 hex digits).

        Args:
            content: ``str``, ``bytes``, or JSON-able data (dicts, lists, numbers; kept as JSON),
                or a :class:`MemoryItem` (its type and metadata are used; its id is replaced).
            type: kind of content (chooses citation plugins; a query filter).
            source: where it came from: a tool name, a URL.
            tags: labels for filtering (lower-cased).
            related_to: memory ids this item relates to (each must exist).
            title: human title; ``None``: unknown.
            media_type: MIME type (``text/html`` makes the index extract the page's text).
            extra: more JSON-able facts.
            timestamp: store time; ``None``: now.

        Raises:
            TypeError: if ``content`` is not text, bytes or JSON-able.
            InvalidIdError: if a ``related_to`` id is malformed.
            ItemNotFoundError: if a ``related_to`` id does not exist.
            StoreError: if writing fails (nothing is half-written: the item is absent).
            VectorIndexError: if indexing fails (the item is stored and will be indexed later).
        """
        record, data, stored = self._prepare(
            content, type=type, source=source, tags=tags, related_to=related_to, title=title,
            media_type=media_type, extra=extra, timestamp=timestamp,
        )
        self._store.add(record, data)
        if self.config.index_on_store:
            self._index_items([(record, stored)])
        return record.id

    def store_many(self, entries: Iterable[MemoryItem | dict[str, Any]]) -> list[str]:
        """Store many results at once; returns their new ids in order.

        Each entry is a :class:`MemoryItem` or a dict of :meth:`store`'s arguments
        (``{"content": ..., "type": ..., "title": ...}``). Blobs are written first, then all
        records in one locked append, then the index embeds every chunk in batches: several
        times faster than calling :meth:`store` in a loop. Raises as :meth:`store`; if an entry is
        invalid, nothing of the batch is stored.
        """
        prepared = []
        for entry in entries:
            if isinstance(entry, MemoryItem):
                prepared.append(self._prepare(entry))
            else:
                kwargs = dict(entry)
                prepared.append(self._prepare(kwargs.pop("content"), **kwargs))
        self._store.add_many([(record, data) for record, data, _ in prepared])
        if self.config.index_on_store:
            for start in range(0, len(prepared), INDEX_BATCH_ITEMS):
                self._index_items([(record, stored) for record, _, stored in prepared[start : start + INDEX_BATCH_ITEMS]])
        return [record.id for record, _, _ in prepared]

    def _prepare(
        self,
        content: Any,
        *,
        type: MemoryType = "custom",  # noqa: A002
        source: str = "agent",
        tags: Iterable[str] = (),
        related_to: Iterable[str] = (),
        title: str | None = None,
        media_type: str | None = None,
        extra: dict[str, Any] | None = None,
        timestamp: datetime | None = None,
    ) -> tuple[ItemRecord, bytes, Any]:
        """Validate and describe one result: its record, blob bytes and content as stored."""
        if isinstance(content, MemoryItem):
            meta = content.metadata
            return self._prepare(
                content.content, type=content.type, source=meta.source, tags=meta.tags,
                related_to=meta.related_to, title=meta.title, media_type=meta.media_type,
                extra=dict(meta.extra), timestamp=meta.timestamp,
            )
        data, encoding = content_to_bytes(content)
        if encoding == "json":
            # From here on use the content as stored (keys sorted), so that token counts and the
            # index are the same as after a rebuild or a restore, which read it from the blob.
            content = content_from_bytes(data, encoding)
        related = tuple(validate_memory_id(ref) for ref in related_to)
        for ref in related:
            self._store.get_record(ref)
        meta_kwargs: dict[str, Any] = {} if timestamp is None else {"timestamp": timestamp}
        raw = raw_text(content, encoding)
        metadata = ItemMetadata(
            source=source,
            size_bytes=len(data),
            tokens=self.tokens.count(raw),
            tags=tuple(tags),
            related_to=related,
            content_sha256=sha256_hex(data),
            content_encoding=encoding,
            title=title,
            media_type=media_type,
            extra=extra or {},
            **meta_kwargs,
        )
        item_id = new_memory_id()
        readable, _ = readable_text(MemoryItem(id=item_id, type=type, metadata=metadata, content=content))
        if readable != raw:
            metadata = metadata.model_copy(update={"text_tokens": self.tokens.count(readable)})
        return ItemRecord(id=item_id, type=type, metadata=metadata), data, content

    # -- read ----------------------------------------------------------------------------------
    def get(self, item_id: str) -> MemoryItem:
        """The whole item, content as stored (byte-identical for bytes, equal for text/JSON).

        Raises:
            InvalidIdError: if the id is malformed.
            ItemNotFoundError: if no item has this id.
            StoreError: if its content blob is missing or damaged.
        """
        return self._store.load_item(validate_memory_id(item_id))

    def __contains__(self, item_id: object) -> bool:
        if not isinstance(item_id, str):
            return False
        try:
            return self._store.contains(validate_memory_id(item_id))
        except ValueError:
            return False

    def __len__(self) -> int:
        return len(self._store.records())

    def records(self) -> list[ItemRecord]:
        """Every item record (no content), oldest first."""
        return self._store.records()

    def retrieve(
        self,
        item_id: str,
        transform: MemoryTransform | dict[str, Any] | str | None = None,
        *,
        max_tokens: int | None = None,
        page: int = 1,
        raw: bool = False,
    ) -> RetrieveResult:
        """Content of an item shaped by ``transform``, capped at ``max_tokens``, one page at a time.

        Args:
            item_id: the memory id.
            transform: a transform model, a dict like ``{"type": "first_n", "n": 20}``, a type
                name like ``"summary"``, or ``None`` for ``full``.
            max_tokens: cap of this answer in tokens; ``None``: ``config.retrieve_max_tokens``.
            page: which page (1-based) of a transformed text longer than ``max_tokens``.
            raw: ``True`` shows HTML pages as markup; ``False`` (default) as their main text.

        Raises:
            InvalidIdError, ItemNotFoundError: for a bad or unknown id.
            TransformError: if the transform does not apply (bad regex, JSON path on text, page
                past the end).
        """
        item = self.get(item_id)
        return apply_transform(
            item,
            transform,
            counter=self.tokens,
            max_tokens=max_tokens if max_tokens is not None else self.config.retrieve_max_tokens,
            page=page,
            raw=raw,
            summarizer=self._summarize,
        )

    @property
    def plugins(self) -> PluginRegistry:
        """The compaction plugins (the installed ones are loaded on first use)."""
        with self._mutex:
            if self._plugins is None:
                self._plugins = PluginRegistry.from_entry_points()
            return self._plugins

    def _summarize(self, item: MemoryItem, text: str, max_tokens: int) -> str:
        """The ``summary`` transform: the matching plugin's summary, else an extractive one."""
        plugin = self.plugins.for_item(item)
        summary = plugin.summary(item, max_tokens=max_tokens, counter=self.tokens) if plugin is not None else ""
        return summary or extractive_summary(text, max_tokens, self.tokens)

    # -- query ---------------------------------------------------------------------------------
    def query(self, criteria: MemoryCriteria | None = None, /, **filters: Any) -> list[QueryHit]:
        """Items matching ``criteria`` (or the same fields as keywords), best first.

        With ``text``: each item is ranked by its best chunk in the dense (cosine) ranking and,
        with ``config.hybrid_search``, in the BM25 keyword ranking; the two rankings are fused by
        reciprocal rank fusion (``QueryHit.score``; ``QueryHit.similarity`` keeps the cosine).
        Without ``text``: the newest items first. Filters run inside the indexes.

        Raises:
            pydantic.ValidationError: if keyword filters are invalid.
            VectorIndexError: if the index fails.
        """
        if criteria is None:
            criteria = MemoryCriteria(**filters)
        elif filters:
            criteria = criteria.model_copy(update=filters)
        self.flush_index()
        if criteria.text is None:
            listed = sorted(self.index.list_items(criteria), key=lambda pair: pair[1], reverse=True)
            hits = []
            for item_id, _ in listed:
                try:
                    hits.append(QueryHit(item=self._store.get_record(item_id)))
                except ItemNotFoundError:
                    continue  # index ahead of a cleared store: skip
                if len(hits) >= criteria.limit:
                    break
            return hits
        return self._search(criteria)

    def _search(self, criteria: MemoryCriteria) -> list[QueryHit]:
        """Dense and keyword rankings of items (each by its best chunk), fused by reciprocal rank
        fusion; fetches more chunks while fewer than ``limit`` distinct items were found."""
        assert criteria.text is not None
        n_chunks = criteria.limit * SEARCH_CHUNKS_PER_ITEM
        while True:
            dense = self.index.search(criteria.text, criteria, n_chunks=n_chunks)
            lexical = self.lexical.search(criteria.text, criteria, n_chunks=n_chunks) if self.lexical else []
            dense_best, lexical_best = _best_per_item(dense), _best_per_item(lexical)
            exhausted = len(dense) < n_chunks and len(lexical) < n_chunks
            if len(dense_best.keys() | lexical_best.keys()) >= criteria.limit or exhausted:
                break
            n_chunks *= 2
        fused: dict[str, float] = {}
        if self.lexical is None:
            fused = {item_id: hit.score for item_id, hit in dense_best.items()}
        else:
            k = self.config.rrf_k
            for rank, item_id in enumerate(dense_best, start=1):
                fused[item_id] = 1.0 / (k + rank)
            for rank, item_id in enumerate(lexical_best, start=1):
                fused[item_id] = fused.get(item_id, 0.0) + self.config.lexical_weight / (k + rank)
        hits: list[QueryHit] = []
        for item_id in sorted(fused, key=lambda key: -fused[key]):
            try:
                record = self._store.get_record(item_id)
            except ItemNotFoundError:
                continue  # index ahead of a cleared or restored store
            dense_hit = dense_best.get(item_id)
            shown = dense_hit or lexical_best[item_id]
            hits.append(
                QueryHit(
                    item=record,
                    score=round(fused[item_id], 6),
                    similarity=round(dense_hit.score, 6) if dense_hit else None,
                    chunk=shown.body,
                    chunk_index=shown.chunk_index,
                    chunk_start_char=shown.start_char,
                )
            )
            if len(hits) >= criteria.limit:
                break
        return hits

    # -- the index -----------------------------------------------------------------------------
    def _chunks_for(self, record: ItemRecord, content: Any) -> list[IndexChunk]:
        text = indexable_text(record, content)[: self.config.max_index_chars]
        header = chunk_header(record)
        pieces = chunk_text(
            text,
            self.tokens,
            chunk_tokens=self.config.chunk_tokens,
            overlap_tokens=self.config.chunk_overlap_tokens,
        )
        common = {
            "item_id": record.id,
            "header_chars": len(header),
            "type": record.type,
            "source": record.metadata.source,
            "timestamp_s": record.metadata.timestamp.timestamp(),
            "tags": record.metadata.tags,
        }
        if not pieces:  # every item gets a head chunk, so filters and listings find it
            label = header or f"{record.type} from {record.metadata.source}\n"
            return [IndexChunk(chunk_index=0, text=label, start_char=0, **{**common, "header_chars": len(label)})]
        return [
            IndexChunk(chunk_index=piece.index, text=header + piece.text, start_char=piece.start_char, **common)
            for piece in pieces
        ]

    def _index_items(self, pairs: list[tuple[ItemRecord, Any]]) -> None:
        chunks = [chunk for record, content in pairs for chunk in self._chunks_for(record, content)]
        with self._index_lock:
            self.index.add(chunks)
            if self.lexical is not None:
                self.lexical.add(chunks)
        with self._mutex:
            self._indexed.update(record.id for record, _ in pairs)

    def flush_index(self) -> int:
        """Index every stored item the index lacks (deferred stores, other processes' items,
        items a crash left unindexed). Returns how many items were indexed."""
        records = self._store.records()
        with self._mutex:
            missing = [r for r in records if r.id not in self._indexed]
        if not missing:
            return 0
        present = self.index.item_ids()
        if self.lexical is not None:
            present &= self.lexical.item_ids()
        with self._mutex:
            self._indexed |= present
        todo = [r for r in missing if r.id not in present]
        for start in range(0, len(todo), INDEX_BATCH_ITEMS):
            batch = todo[start : start + INDEX_BATCH_ITEMS]
            self._index_items([(r, self._store.load_content(r)) for r in batch])
        return len(todo)

    def rebuild_index(self) -> int:
        """Drop the index and rebuild it from ``items.jsonl``; returns the number of items indexed."""
        with self._index_lock:
            self.index.reset()
            if self.lexical is not None:
                self.lexical.reset()
        with self._mutex:
            self._indexed.clear()
        return self.flush_index()

    # -- lifecycle -----------------------------------------------------------------------------
    def clear(self) -> None:
        """Remove every item, its content and its index entries.

        Raises:
            StoreError: if the rewrite fails (the old items are then intact).
        """
        self._store.replace_all([])
        with self._index_lock:
            self.index.reset()
            if self.lexical is not None:
                self.lexical.reset()
        with self._mutex:
            self._indexed.clear()

    def snapshot(self) -> MemorySnapshot:
        """A frozen copy of every item with its content, oldest first (serialisable as JSON)."""
        items = tuple(self._store.load_item(record.id) for record in self._store.records())
        return MemorySnapshot(agent_id=self.agent_id, items=items)

    def restore(self, snapshot: MemorySnapshot) -> None:
        """Make this memory hold exactly the snapshot's items (ids, metadata, content), then
        re-index them. The previous items are replaced atomically.

        Raises:
            StoreError: if a snapshot item's content does not match its recorded sha256.
        """
        pairs: list[tuple[ItemRecord, bytes]] = []
        for item in snapshot.items:
            validate_memory_id(item.id)
            data, encoding = content_to_bytes(item.content, item.metadata.content_encoding)
            if item.metadata.content_sha256 and sha256_hex(data) != item.metadata.content_sha256:
                raise StoreError(f"snapshot item {item.id}: content does not match its sha256")
            record = item.record()
            if not item.metadata.content_sha256:  # a hand-built item: derive what its content says
                derived = {"content_sha256": sha256_hex(data), "content_encoding": encoding, "size_bytes": len(data)}
                record = record.model_copy(update={"metadata": item.metadata.model_copy(update=derived)})
            pairs.append((record, data))
        self._store.replace_all(pairs)
        with self._index_lock:
            self.index.reset()
            if self.lexical is not None:
                self.lexical.reset()
        with self._mutex:
            self._indexed.clear()
        self.flush_index()

    @property
    def path(self) -> Path:
        """The agent's directory (``<memory_dir>/agents/<agent_id>``)."""
        return self.agent_dir


def _best_per_item(hits: list[ChunkHit]) -> dict[str, ChunkHit]:
    """The first (best) chunk hit of each item, in ranking order."""
    best: dict[str, ChunkHit] = {}
    for hit in hits:
        best.setdefault(hit.item_id, hit)
    return best
