"""AgentMemory: the content store an agent holds (the memory interface of MemberJunction's agent
memory design, github.com/MemberJunction/MJ).

``store`` puts a full result out of the context and returns its memory id; ``retrieve`` gives it
back shaped by a transform and capped in tokens; ``query`` finds items by meaning and filters;
``clear``, ``snapshot`` and ``restore`` manage its life. The item log of the storage backend
(:mod:`agent_memory.storage`: files by default, or Postgres) is the source of truth; the vector and
keyword indexes are derived and catch up by themselves (after a crash, a deferred store, or items
another process added), and ``rebuild_index`` recreates them from the items
(:mod:`agent_memory.index.upkeep`).

Every public method converts errors at the boundary (:func:`agent_memory.errors.map_exceptions`):
callers see :class:`~agent_memory.errors.AgentMemoryError` subclasses only. Failures that are
not the caller's (indexing after a successful store, a damaged line of ``items.jsonl``, a
missing content blob) are reported to observers (:mod:`agent_memory.observers`), not raised.

A record of a newer version is kept as it is (never moved or rewritten), reported
(:class:`~agent_memory.observers.RecordUnsupported`) and refused when its item is read
(:class:`~agent_memory.errors.UnsupportedRecordError`); every other item stays readable. A
memory directory that cannot be written (a read-only mount, a snapshot shipped to another
machine) opens, and ``get``, ``retrieve``, ``query``, ``records`` work without writing to it
(:mod:`agent_memory.index.upkeep`); writes raise :class:`~agent_memory.errors.StoreError`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal, get_args

from agent_memory.boundary import int_arg as _int_arg
from agent_memory.boundary import mapped_init as _mapped_init
from agent_memory.boundary import public as _public
from agent_memory.config import MAX_RETRIEVE_MAX_TOKENS, MemoryConfig
from agent_memory.errors import ConfigurationError, InvalidArgumentError, IsolationError, MemoryClosedError
from agent_memory.fork import FORK_DOCUMENT, MemoryFork, ParentLayer, merge_hits
from agent_memory.ids import validate_agent_id, validate_memory_id
from agent_memory.index.fusion import newest, search
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.index.upkeep import IndexUpkeep
from agent_memory.storage.vector import VectorIndex
from agent_memory.models.items import (
    ItemRecord,
    MemoryCriteria,
    MemoryItem,
    MemorySnapshot,
    MemoryTransform,
    MemoryType,
    QueryHit,
    QueryRanking,
    RetrieveResult,
)
from agent_memory.observers import (
    IndexFailed,
    MemoryObserver,
    ObserverList,
    RecordQuarantined,
    RecordUnsupported,
    Retrieved,
    logger,
)
from agent_memory.plugins import PluginRegistry
from agent_memory.storage import Backend, common, open_backend
from agent_memory.storage.contracts import ITEMS_LOG
from agent_memory.records.items import ItemStore, UnreadableRecord, decode_record
from agent_memory.records.prepare import prepare_item, snapshot_pairs, str_list
from agent_memory.tokens import TiktokenCounter, TokenCounter
from agent_memory.transforms import MIN_MAX_TOKENS, apply_transform, extractive_summary, parse_transform

__all__ = ["AgentMemory", "ItemChanges"]

DEFAULT_AGENT_ID = "default"
"""Agent id used when none is given."""


@dataclass(frozen=True, slots=True)
class ItemChanges:
    """What changed among a memory's own items between two reads (:meth:`AgentMemory.changes`)."""

    records: list[ItemRecord]
    """The records put since (new items, and items rewritten in place), oldest first; with
    ``reset``, every record."""
    deleted: tuple[str, ...]
    """Ids whose items left since (forgotten, or replaced by a record of a newer version this
    version cannot read); ``()`` with ``reset``. Apply them before ``records``: an id deleted and
    stored again since is in both."""
    reset: bool
    """``True``: ``records`` is every item (drop what you held)."""
    token: str
    """Pass it to the next :meth:`AgentMemory.changes` call."""

class AgentMemory:
    """The memory of one agent: its items, their indexes, and (for the kernel above it) its
    conversation, in a storage backend.

    Args:
        agent_id: names the agent; 1-128 of ``A-Z a-z 0-9 _ . -``.
        memory_dir: the memory directory of the default file backend (``<memory_dir>/agents/<agent_id>/``);
            ``None``: ``backend``, else ``AGENT_MEMORY_URL``, else ``AGENT_MEMORY_DIR`` or ``./memory``.
        backend: where memory lives instead: a ``postgresql://`` URL (the ``postgres`` extra; one
            database serves many agents and machines), a URL of a scheme an installed package
            registers (:mod:`agent_memory.storage.schemes`), a memory directory, or a
            :class:`~agent_memory.storage.contracts.Backend`; see :func:`~agent_memory.storage.open_backend`.
            Give ``memory_dir`` or ``backend``, not both.
        config: storage and index settings; ``None``: ``MemoryConfig()``.
        token_counter: counts tokens; ``None``: tiktoken with ``config.token_encoding``.
        index: a vector index to use instead of the backend's (the caller keeps it: :meth:`close`
            does not close it).
        plugins: compaction plugins; the first that matches an item makes its ``summary``
            retrieve transform. ``None``: the installed ones
            (``PluginRegistry.from_entry_points()``), loaded on first use.
        observers: receive the events the memory reports instead of raising (indexing that
            failed after a store, quarantined records, missing content); see
            :mod:`agent_memory.observers`. Events are also logged on the ``agent_memory`` logger.
        base: a fork of a parent memory (:class:`~agent_memory.fork.MemoryFork`) this memory
            reads through, read-only, beside its own items: an isolated sub-agent's memory (see
            :mod:`agent_memory.fork`). ``None``: the fork saved for this agent in the backend (by a
            spawn) if there is one, else none.

    Raises:
        InvalidIdError: if ``agent_id`` is not a safe name.
        InvalidArgumentError: if an argument has the wrong type.
        ConfigurationError: if ``memory_dir`` is (or lies under) a file; if both ``memory_dir``
            and ``backend`` are given; if a URL's scheme is not known (the message lists the known
            ones) or its backend's factory fails; if a database cannot be reached; if the index cannot be
            opened (lazily, on first index use).

    Nothing is written until the first write. A memory holds connections and clients once used:
    :meth:`close` releases them, and a memory is a context manager (``with AgentMemory(...) as
    memory:``). A closed memory raises :class:`~agent_memory.errors.MemoryClosedError` on every use
    (it does not reopen: a closed object that silently reopened would leak what ``close``
    released).

    Thread-safe: one AgentMemory may serve many threads. Several processes may share one memory:
    every write is atomic and durable and loses nothing another process wrote, and a process sees
    items another one stored on its next read. With files, processes on one machine share a
    memory directory; the embedded Chroma index is reopened when another process wrote to it, but
    embedded chromadb can drop a vector when two processes *index* at the same moment (measured: 1
    of 1,200 with two concurrent writers), so for concurrent writers use ``chroma_mode="server"``
    (tested lossless), or the Postgres backend, which processes on any number of machines share.
    ``rebuild_index`` repairs an index from the stored items at any time.
    """

    @_mapped_init
    def __init__(
        self,
        agent_id: str = DEFAULT_AGENT_ID,
        memory_dir: str | os.PathLike[str] | None = None,
        *,
        backend: str | os.PathLike[str] | Backend | None = None,
        config: MemoryConfig | None = None,
        token_counter: TokenCounter | None = None,
        index: VectorIndex | None = None,
        plugins: PluginRegistry | None = None,
        observers: Sequence[MemoryObserver] = (),
        base: MemoryFork | None = None,
    ) -> None:
        """Open the memory of ``agent_id`` in a backend (nothing is written until the first
        write). The arguments and the errors raised are the class's (:class:`AgentMemory`)."""
        self._closed = False
        self.agent_id = validate_agent_id(agent_id)
        if memory_dir is not None and not isinstance(memory_dir, str | os.PathLike):
            raise InvalidArgumentError(f"memory_dir must be a path, not {type(memory_dir).__name__}")
        self.backend: Backend = open_backend(backend, memory_dir)
        for name, value, kind in (
            ("config", config, MemoryConfig),
            ("token_counter", token_counter, TokenCounter),
            ("index", index, VectorIndex),
            ("plugins", plugins, PluginRegistry),
            ("base", base, MemoryFork),
        ):
            if value is not None and not isinstance(value, kind):
                raise InvalidArgumentError(f"{name} must be a {kind.__name__}, not {type(value).__name__}")
        self.config = config if config is not None else MemoryConfig()
        self.tokens = token_counter if token_counter is not None else TiktokenCounter(self.config.token_encoding)
        if isinstance(observers, str | bytes) or not isinstance(observers, Iterable):
            raise InvalidArgumentError(f"observers must be a list of observers, not {type(observers).__name__}")
        self._observers = ObserverList(observers)
        log = self.backend.log(self.agent_id, ITEMS_LOG, on_quarantine=self._quarantined)
        self._items = ItemStore(log, where=common.describe(self.backend, self.agent_id), on_unreadable=self._unreadable)
        self._upkeep = IndexUpkeep(
            agent_id=self.agent_id, backend=self.backend, config=self.config, tokens=self.tokens,
            items=self._items, index=index, notify=self._observers.notify,
        )
        self._mutex = threading.RLock()
        self._plugins = plugins
        if base is None:  # a fork made elsewhere (a spawn in another process): the same view
            data, _ = common.document(self.backend, self.agent_id, FORK_DOCUMENT).get()
            base = MemoryFork.from_json(data, where=common.describe(self.backend, self.agent_id)) if data is not None else None
        self._base = ParentLayer(base, open_parent=self._parent_opener(base)) if base is not None else None

    def _parent_opener(self, fork: MemoryFork) -> Callable[[], AgentMemory]:
        """Opens the parent's memory of ``fork``: through this memory's backend when the parent is in
        the same store (its connection, password included), else by the fork's URL or path."""
        parent: str | Backend = self.backend if fork.parent_backend == self.backend.url else fork.parent_backend
        return lambda: AgentMemory(fork.parent_agent_id, backend=parent, config=self.config, token_counter=self.tokens)

    @property
    def memory_dir(self) -> Path:
        """The memory directory of a file backend (the agent directory's grandparent:
        ``<memory_dir>/agents/<agent_id>``).

        Raises:
            ConfigurationError: for a memory in a database (it has no directory: use
                :attr:`backend`).
        """
        return self.agent_dir.parent.parent

    @property
    def agent_dir(self) -> Path:
        """The agent's directory of a file backend (``<memory_dir>/agents/<agent_id>``): the
        backend's ``local_dir``.

        Raises:
            ConfigurationError: for a memory in a database.
        """
        local = self.backend.local_dir(self.agent_id)
        if local is None:
            raise ConfigurationError(f"the memory of {self.agent_id!r} is in {self.backend.url}, not in a directory")
        return local

    def __repr__(self) -> str:
        state = ", closed" if self._closed else ""
        return f"AgentMemory(agent_id={self.agent_id!r}, backend={self.backend.url!r}{state})"

    # -- life cycle and observers ----------------------------------------------------------------
    def close(self) -> None:
        """Release what the memory holds: every thread's SQLite connection of the keyword index
        and the Chroma client (embedded: the process-shared client of the directory, once no
        other open memory uses it). Idempotent. Files stay; open a new AgentMemory to go on."""
        with self._mutex:
            if self._closed:
                return
            self._closed = True
        self._upkeep.close()
        if self._base is not None:
            self._base.close()

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called."""
        return self._closed

    def __enter__(self) -> AgentMemory:
        if self._closed:
            raise MemoryClosedError(f"this AgentMemory is closed; open a new one on {self._items.where}")
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @_public
    def add_observer(self, observer: MemoryObserver) -> None:
        """Report this memory's events to ``observer`` too (see :mod:`agent_memory.observers`).

        Raises:
            InvalidArgumentError: if it has no ``on_notice`` method.
        """
        self._observers.add(observer)

    def _quarantined(self, where: str, line_no: int, reason: str, moved_to: str | None) -> None:
        self._observers.notify(
            RecordQuarantined(agent_id=self.agent_id, path=where, line_no=line_no, reason=reason,
                              quarantine_path=moved_to)
        )

    def _unreadable(self, record: UnreadableRecord) -> None:
        self._observers.notify(
            RecordUnsupported(
                agent_id=self.agent_id, path=self._items.where, item_id=record.id,
                schema_version=record.schema_version, reason=record.reason,
            )
        )

    @property
    def read_only(self) -> bool:
        """Whether the memory directory cannot be written (a read-only mount, no write permission;
        decided when first asked). A read-only memory reads without writing anything into its
        directory: the Chroma index from a private temporary copy, the keyword index through
        SQLite's read-only URI, no catch-up indexing (items the index lacks are reported as
        :class:`~agent_memory.observers.IndexReadOnly` and still read by ``get`` / ``retrieve``)."""
        return self._upkeep.read_only

    # -- the indexes -----------------------------------------------------------------------------
    @property
    def index(self) -> VectorIndex:
        """The vector index (opened on first use)."""
        if self._closed:
            raise MemoryClosedError(f"this AgentMemory is closed; open a new one on {self._items.where}")
        return self._upkeep.index

    def open_index_soon(self) -> None:
        """Start opening the vector index in a background thread, so that the first ``store``'s
        indexing finds it open (opening is chromadb's import and client, or a server's
        connection: from a few hundred ms to seconds, which the indexing thread would otherwise
        spend beside the caller's next steps). Returns at once, never raises, and does nothing if
        the index is open or opening, or the memory is closed; the thread waits while a
        :meth:`foreground` stretch runs before it begins, and :meth:`close` waits for it.
        ``MemoryAgent`` calls it when it starts."""
        if not self._closed:
            self._upkeep.open_soon()

    @property
    def lexical(self) -> KeywordIndex | None:
        """The keyword index (the file backend's ``index/lexical.sqlite3``, SQLite FTS5), or
        ``None`` if hybrid search is off."""
        if self._closed:
            raise MemoryClosedError(f"this AgentMemory is closed; open a new one on {self._items.where}")
        return self._upkeep.lexical

    # -- store -----------------------------------------------------------------------------------
    @_public
    def store(
        self,
        content: Any,
        *,
        type: MemoryType = "custom",  # noqa: A002 - MemberJunction's field name
        source: str = "agent",
        tags: Iterable[str] = (),
        related_to: Iterable[str] = (),
        title: str | None = None,
        media_type: str | None = None,
        extra: dict[str, Any] | None = None,
        timestamp: datetime | None = None,
        item_id: str | None = None,
        allow_empty: bool = False,
    ) -> str:
        """Store a full result and return its new memory id (``mem_`` + 12 hex digits).

        Args:
            content: ``str``, ``bytes``, or JSON-able data (dicts, lists, numbers; kept as JSON,
                at most ``limits.MAX_JSON_DEPTH`` deep), or a :class:`MemoryItem` (its type and
                metadata are used; its id is replaced). Text and bytes are kept exactly; JSON
                data keeps its values and key order (see :meth:`get` for what JSON cannot keep).
                Blank content (``""`` or only whitespace, ``b""``, ``None``) is refused unless
                ``allow_empty``; ``{}`` and ``[]`` are data and are stored.
            type: kind of content (chooses citation plugins; a query filter).
            source: where it came from: a tool name, a URL (``limits.MAX_SOURCE_CHARS``).
            tags: labels for filtering (lower-cased; ``limits.MAX_TAGS`` of at most
                ``limits.MAX_TAG_CHARS``).
            related_to: memory ids this item relates to (each must exist; ``limits.MAX_RELATED``).
            title: human title (``limits.MAX_TITLE_CHARS``); ``None``: unknown.
            media_type: MIME type (``text/html`` makes the index extract the page's text).
            extra: more JSON-able facts (``limits.MAX_EXTRA_CHARS`` as JSON).
            timestamp: store time; ``None``: now.
            item_id: the id to give the item (a deterministic one, such as a compacted turn's,
                :func:`~agent_memory.ids.derived_memory_id`); ``None``: a new random id. It must
                be free (``InvalidArgumentError`` otherwise).
            allow_empty: store blank content anyway (a tool that answered nothing: the kernel
                stores such tool results this way); ``False`` (default) refuses it.

        Returns:
            The new id. Once the item is written this never raises: if indexing then fails, the
            item stays pending (indexed by the next ``flush_index`` or query) and the failure is
            logged and reported to observers as :class:`~agent_memory.observers.IndexFailed`.

        Raises:
            InvalidArgumentError: (a ``TypeError`` and ``ValueError``) if an argument is of the
                wrong type, over its bound, or not valid Unicode, or the content is blank (without
                ``allow_empty``); nothing is written.
            InvalidIdError: if a ``related_to`` id is malformed.
            ItemNotFoundError: if a ``related_to`` id does not exist.
            StoreError: if writing fails (nothing is half-written: the item is absent);
                ``LockTimeoutError`` if another process held the store's lock too long.
        """
        if item_id is not None and self._base is not None and item_id in self._base.ids:
            raise IsolationError(f"{item_id} is an item of the parent's memory: a sub-agent cannot overwrite it")
        with self._upkeep.foreground():  # the indexing thread steps back meanwhile
            item = prepare_item(
                self._items, self.tokens, content, type=type, source=source, tags=tags, related_to=related_to,
                title=title, media_type=media_type, extra=extra, timestamp=timestamp, item_id=item_id,
                allow_empty=allow_empty,
            )
            self._items.add(item.record, item.data)
            if self.config.index_on_store:
                self._upkeep.add_stored([(item.record, item.content)])
        return item.record.id

    @_public
    def store_many(self, entries: Iterable[MemoryItem | dict[str, Any]]) -> list[str]:
        """Store many results at once; returns their new ids in order.

        Each entry is a :class:`MemoryItem` or a dict of :meth:`store`'s arguments
        (``{"content": ..., "type": ..., "title": ...}``; blank content is refused as by
        :meth:`store`, unless the entry says ``"allow_empty": True``). Blobs are written first, then all
        records in one locked append, then the index embeds every chunk in batches: several
        times faster than calling :meth:`store` in a loop. Raises as :meth:`store`; if an entry is
        invalid, nothing of the batch is stored; indexing failures are reported, not raised.
        """
        if isinstance(entries, dict | str | bytes | MemoryItem):
            raise InvalidArgumentError("store_many takes a list of entries (MemoryItems or dicts of store arguments)")
        prepared = []
        reserved: set[str] = set()
        for n, entry in enumerate(entries):
            if isinstance(entry, MemoryItem):
                prepared.append(prepare_item(self._items, self.tokens, entry, reserved=reserved))
            elif isinstance(entry, dict):
                if "content" not in entry:
                    raise InvalidArgumentError(f"entry {n} of store_many has no 'content'")
                kwargs = dict(entry)
                prepared.append(prepare_item(self._items, self.tokens, kwargs.pop("content"), reserved=reserved, **kwargs))
            else:
                raise InvalidArgumentError(f"entry {n} of store_many must be a MemoryItem or a dict, not {type(entry).__name__}")
        self._items.add_many([(item.record, item.data) for item in prepared])
        if self.config.index_on_store:
            self._upkeep.add_stored([(item.record, item.content) for item in prepared])
        return [item.record.id for item in prepared]

    # -- read ------------------------------------------------------------------------------------
    @_public
    def get(self, item_id: str) -> MemoryItem:
        """The whole item, its content exactly as stored: text and bytes identical; JSON data with
        the same values, nesting and key order. Only what JSON itself cannot hold is normalised:
        tuples come back as lists, and non-string dict keys as their JSON strings (``{1: "a"}`` →
        ``{"1": "a"}``). (Items stored by versions before this one had their keys sorted when
        stored; they read back in that order.)

        Raises:
            InvalidIdError: if the id is malformed.
            ItemNotFoundError: if no item has this id.
            UnsupportedRecordError: if its record was written by a newer version (or by hand) in a
                form this version cannot read; the record is kept unchanged.
            StoreError: if its content blob is missing or damaged (only this item fails).
        """
        return self._load_item(validate_memory_id(item_id))

    def _load_item(self, item_id: str) -> MemoryItem:
        """An item of the own layer, else of the parent's (a fork's read-only layer)."""
        if self._base is None or self._items.contains(item_id):
            return self._items.load_item(item_id)
        return self._base.load_item(item_id)

    @property
    def fork(self) -> MemoryFork | None:
        """The parent fork this memory reads through (``None``: not a fork)."""
        return self._base.fork if self._base is not None else None

    @_public
    def own_records(self) -> list[ItemRecord]:
        """The records of this memory's own items (a fork's writes), oldest first."""
        return self._items.records()

    @_public
    def __contains__(self, item_id: object) -> bool:
        if not isinstance(item_id, str):
            return False
        try:
            item_id = validate_memory_id(item_id)
            return self._items.contains(item_id) or (self._base is not None and self._base.contains(item_id))
        except ValueError:
            return False

    @_public
    def __len__(self) -> int:
        return len(self.records())

    @_public
    def changes(self, since: str | None = None) -> ItemChanges:
        """What changed among this memory's own items since an earlier call, read from the item
        log: for a reader that keeps its own view of the items in step with every process's
        writes (the LangGraph store's index of its documents by namespace and key,
        :mod:`agent_memory.integrations.langgraph_store`) at the cost of the changes, not of the
        memory's size. The log answers everything again (``reset``) only when it started over
        (``restore``, ``clear``, a compaction of the file log); see
        :class:`~agent_memory.storage.contracts.Log`.

        Args:
            since: the ``token`` of the previous answer; ``None``: every item (``reset``).

        Returns:
            :class:`ItemChanges`. Records of a newer version (unreadable here) are left out, and
            reported as deleted when they replaced a record. A fork's parent items are not
            included (:meth:`records` has them).

        Raises:
            InvalidArgumentError: if ``since`` is not a string.
            StoreError: if the item log cannot be read.
        """
        if since is not None and not isinstance(since, str):
            raise InvalidArgumentError(f"since must be the token of an earlier answer (a str), not {type(since).__name__}")
        found = self._items.log.read(since)
        records: list[ItemRecord] = []
        unreadable: list[str] = []
        for _, data in found.records:
            record = decode_record(data)
            if isinstance(record, ItemRecord):
                records.append(record)
            elif record.id and not found.reset:
                unreadable.append(record.id)
        return ItemChanges(records=records, deleted=(*found.deleted, *unreadable), reset=found.reset,
                           token=found.token)

    @_public
    def records(self) -> list[ItemRecord]:
        """Every item record (no content), oldest first (a fork: the parent's snapshot, then its own).
        Records of a newer version this version cannot read are left out (and reported)."""
        own = self._items.records()
        return own if self._base is None else [*self._base.records(), *own]

    @_public
    def retrieve(
        self,
        item_id: str,
        transform: MemoryTransform | dict[str, Any] | str | None = None,
        *,
        max_tokens: int | None = None,
        page: int = 1,
        raw: bool = False,
        around: str | None = None,
        context_chars: int | None = None,
        max_matches: int | None = None,
        start_line: int | None = None,
        end_line: int | None = None,
        start_char: int | None = None,
        end_char: int | None = None,
        n: int | None = None,
        unit: Literal["lines", "tokens"] | None = None,
        pattern: str | None = None,
        keywords: Sequence[str] | None = None,
        context_lines: int | None = None,
        json_path: str | None = None,
        column: str | None = None,
    ) -> RetrieveResult:
        """Content of an item shaped by ``transform``, capped at ``max_tokens``, one page at a time:
        ``memory.retrieve(id, "excerpt", around="ACLU")``, ``memory.retrieve(id, around="ACLU")``,
        ``memory.retrieve(id, "first_n", n=20)``, ``memory.retrieve(id, pattern="^Total")``.

        Args:
            item_id: the memory id.
            transform: a transform model, a dict like ``{"type": "first_n", "n": 20}``, a type
                name like ``"summary"``, or ``None`` for ``full`` (or, with ``transform_fields``,
                the one transform they are fields of).
            around, context_chars, max_matches, start_line, end_line, start_char, end_char, n,
                unit, pattern, keywords, context_lines, json_path, column: the transform's
                fields as keywords (:class:`~agent_memory.models.items.ExcerptTransform` and its
                siblings), after a type name or alone when they name one transform; ``None``:
                not given (the transform's default). A filter's ``value`` goes in a dict.
            max_tokens: cap of this answer in tokens, ``transforms.MIN_MAX_TOKENS`` (120) to
                ``MAX_RETRIEVE_MAX_TOKENS``; ``None``: ``config.retrieve_max_tokens``.
            page: which page (1-based) of a transformed text longer than ``max_tokens``.
            raw: ``True`` shows HTML pages as markup; ``False`` (default) as their main text.

        Raises:
            InvalidIdError, ItemNotFoundError: for a bad or unknown id.
            UnsupportedRecordError: if the item's record was written by a newer version.
            InvalidArgumentError: if ``max_tokens``, ``page`` or ``raw`` is of the wrong type or
                out of range.
            TransformError: if the transform is invalid or does not apply (bad or too slow regex,
                JSON path on text, page past the end).
            StoreError: if the item's content blob is missing or damaged.
        """
        item_id = validate_memory_id(item_id)
        given = {"around": around, "context_chars": context_chars, "max_matches": max_matches,
                 "start_line": start_line, "end_line": end_line, "start_char": start_char, "end_char": end_char,
                 "n": n, "unit": unit, "pattern": pattern, "keywords": keywords, "context_lines": context_lines,
                 "json_path": json_path, "column": column}
        spec = parse_transform(transform, **{key: value for key, value in given.items() if value is not None})
        cap = (
            self.config.retrieve_max_tokens
            if max_tokens is None
            else _int_arg("max_tokens", max_tokens, MIN_MAX_TOKENS, MAX_RETRIEVE_MAX_TOKENS)
        )
        page = _int_arg("page", page, 1)
        if not isinstance(raw, bool):
            raise InvalidArgumentError(f"raw must be True or False, not {type(raw).__name__}")
        item = self._load_item(item_id)
        result = apply_transform(
            item, spec, counter=self.tokens, max_tokens=cap, page=page, raw=raw, summarizer=self._summarize
        )
        self._observers.notify(Retrieved(agent_id=self.agent_id, operation="retrieve", item_ids=(item.id,),
                                       tokens=result.tokens))
        return result

    @property
    def plugins(self) -> PluginRegistry:
        """The compaction plugins (the installed ones are loaded on first use)."""
        with self._mutex:
            if self._plugins is None:
                self._plugins = PluginRegistry.from_entry_points()
            return self._plugins

    def _summarize(self, item: MemoryItem, text: str, max_tokens: int) -> str:
        """The ``summary`` transform: the matching plugin's summary, else (also when the plugin
        fails, which is logged) an extractive one."""
        summary = ""
        try:
            plugin = self.plugins.for_item(item)
            if plugin is not None:
                summary = plugin.summary(item, max_tokens=max_tokens, counter=self.tokens)
        except Exception:  # noqa: BLE001 - a third-party plugin must not break retrieve
            logger.exception("compaction plugin failed to summarise %s; using an extractive summary", item.id)
            summary = ""
        if not isinstance(summary, str):
            summary = ""
        return summary or extractive_summary(text, max_tokens, self.tokens)

    # -- query -----------------------------------------------------------------------------------
    @_public
    def query(
        self,
        criteria: MemoryCriteria | str | None = None,
        /,
        *,
        text: str | None = None,
        type: MemoryType | None = None,  # noqa: A002 - MemberJunction's field name
        source: str | None = None,
        tags: Iterable[str] | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        ranking: QueryRanking = "default",
    ) -> list[QueryHit]:
        """Items matching ``criteria`` (or the same fields as keywords), best first:
        ``memory.query("heron")`` searches for that text, as ``memory.query(text="heron")`` does.

        With ``text``: each item is ranked by its best chunk in the dense (cosine) ranking and,
        with ``config.hybrid_search``, in the BM25 keyword ranking; the two rankings are fused by
        reciprocal rank fusion (``QueryHit.score``; ``QueryHit.similarity`` keeps the cosine).
        Without ``text`` (``None``): a listing, the newest items first. Filters run inside the
        indexes. The query text is embedded once per query. Items the index refuses are skipped
        (and reported).

        Args:
            criteria: the text to look for (a ``str``, as ``text``), or all the filters as one
                :class:`MemoryCriteria`; ``None``: from the keywords.
            text: what to look for, in words (at most ``limits.MAX_QUERY_CHARS``); ``None``: list
                newest first. An empty or whitespace-only text is refused, not taken as a listing.
            type: only items of this type; ``None``: any type.
            source: only items whose source is exactly this; ``None``: any source.
            tags: only items carrying every one of these tags (case-insensitive); ``None``: no
                tag filter.
            since, until: only items stored at or after / at or before this time (naive = UTC);
                ``None``: no bound.
            limit: most items returned (1 to ``MAX_QUERY_LIMIT``, 100); ``None``:
                ``DEFAULT_QUERY_LIMIT`` (5).
            ranking: how a text is ranked (:data:`~agent_memory.models.items.QueryRanking`):
                ``"default"`` as above; ``"similarity"`` by the cosine similarity of each item's
                best chunk to the text alone (one dense search, no keyword fusion, no follow-up
                query), which is then ``QueryHit.score``. Ignored without ``text``.

        With ``criteria``, each keyword that is not ``None`` replaces that field of it.

        Raises:
            InvalidArgumentError: if ``criteria`` is neither a text nor a :class:`MemoryCriteria`,
                a text is given both ways, a keyword is
                unknown, ``ranking`` is neither ranking, or a filter is invalid (see the bounds on :class:`MemoryCriteria`), or
                ``text`` is blank.
            VectorIndexError: if the index fails as a whole (``rebuild_index`` repairs a damaged
                one; a damaged keyword index file is recreated from the store without it);
                ``ConfigurationError`` if it cannot be opened (a Chroma server is down).
        """
        if ranking not in get_args(QueryRanking):
            raise InvalidArgumentError(f"ranking must be one of {', '.join(get_args(QueryRanking))}, not {ranking!r}")
        if isinstance(criteria, str):
            if text is not None:
                raise InvalidArgumentError("give the query text once: memory.query('…') or memory.query(text='…')")
            criteria, text = None, criteria
        given = {"text": text, "type": type, "source": source, "since": since, "until": until, "limit": limit}
        filters: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
        if tags is not None:
            filters["tags"] = str_list("tags", tags)
        if criteria is None:
            wanted = MemoryCriteria(**filters)
        elif not isinstance(criteria, MemoryCriteria):
            raise InvalidArgumentError(
                f"criteria must be the text to look for (a str: memory.query('heron')) or a MemoryCriteria, not "
                f"{criteria.__class__.__name__}")
        else:
            wanted = MemoryCriteria(**{**dict(criteria), **filters}) if filters else criteria

        def find() -> list[QueryHit]:
            # When the query must wait for the vectors of what was stored before it, the text's
            # vector first (the model loads then if it must), so that the wait counts from a ready
            # model; otherwise the search embeds it while the keyword search runs beside it.
            vectors: list[list[float]] = []
            text = wanted.text
            self._upkeep.for_query(self.config.query_wait_s, before_wait=None if text is None else (
                lambda: vectors.append(self._upkeep.embedder.embed_query(text))))
            if wanted.text is None:
                return newest(wanted, index=self.index, lexical=self.lexical, get_record=self._items.get_record,
                              records=self._items.records)
            return search(wanted, index=self.index, lexical=self.lexical, config=self.config,
                          get_record=self._items.get_record, records=self._items.records, n_items=self._items.count(),
                          ranking=ranking, vector=vectors[0] if vectors else None,
                          unembedded=self._upkeep.unembedded())

        with self._upkeep.foreground():  # the indexing thread steps back, except while the query waits for it
            hits = self._upkeep.repairing(find)  # a damaged keyword index is recreated from the store
        if self._base is not None:
            hits = merge_hits(hits, self._base.query(wanted, ranking=ranking), wanted.limit, by_score=wanted.text is not None)
        self._observers.notify(Retrieved(agent_id=self.agent_id, operation="query", item_ids=tuple(h.item.id for h in hits),
                                       tokens=0, query=wanted.text[:200] if wanted.text else None))
        return hits

    # -- the index -------------------------------------------------------------------------------
    def foreground(self) -> AbstractContextManager[None]:
        """A latency-critical stretch of the caller's: while one runs, this memory's indexing thread
        (embedding what was stored) steps back at its next checkpoint, between items and stages,
        instead of sharing the interpreter with it. ``store`` and ``query`` are such stretches by
        themselves; ``MemoryAgent`` makes one of each step, from a tool's result to the next LLM
        request (the thread works while the model answers). A wait for the index inside (a query
        reading its own writes, back pressure, :meth:`flush_index`) lets it work. Nested and
        concurrent use are fine; one stretch holds the thread back at most
        ``index.foreground.MAX_STEP_BACK_S`` seconds per checkpoint. Use it as ``with
        memory.foreground(): ...``."""
        return self._upkeep.foreground()

    @_public
    def flush_index(self) -> int:
        """Index every stored item the index lacks (deferred stores, other processes' items,
        items a crash or a failed index left pending). Returns how many items were indexed.

        An item the index refuses while it works for others (or whose content blob is missing)
        is skipped by this process until :meth:`rebuild_index` and reported to observers.

        Raises:
            VectorIndexError: if the index fails as a whole.
            LockTimeoutError: if another process holds ``index.lock`` too long.
        """
        return self._upkeep.flush()

    @_public
    def rebuild_index(self) -> int:
        """Drop the indexes and rebuild them from ``items.jsonl``; returns the number of items
        indexed. A keyword index file SQLite cannot read ("not a database", "malformed") is
        deleted and created again (reported as ``IndexRecreated``).

        Vectors are recomputed, so queries afterwards give the same hits in the same order up to
        near-ties: items whose similarities differ by less than ``SCORE_TOLERANCE`` (1e-4) may
        change places in a dense-only ranking (hybrid search gives them one shared dense rank),
        and every similarity agrees within ``SCORE_TOLERANCE`` (see
        :mod:`agent_memory.index.fusion`).
        """
        return self._upkeep.rebuild()

    # -- lifecycle -------------------------------------------------------------------------------
    @_public
    def forget(self, item_id: str) -> bool:
        """Remove one item for good (team9's ``MEMORY_FORGET``): its record leaves the item log
        (a delete appended to it, durably, before this returns: the same cost at any size of the
        memory, see :class:`~agent_memory.storage.contracts.Log`), its chunks leave both
        indexes, and its content blob is deleted unless another item shares it (identical
        content). Idempotent. To forget many items, :meth:`forget_many` does it in one batch.

        The store is changed first: if the index then fails, the item is already unreachable
        (a query skips hits whose item is gone) and ``rebuild_index`` drops its chunks; the
        failure is reported to observers (``IndexFailed``), not raised. A conversation that cited
        the item shows a "forgotten" note in its place (``MemoryManager.forget`` also removes it
        from the conversation's traces).

        Returns:
            ``True`` if the item was removed; ``False`` if no item has this id.

        Raises:
            InvalidIdError: if the id is malformed.
            IsolationError: if the item belongs to the parent's memory of a fork.
            UnsupportedRecordError: if the item's record was written by a newer version (this
                version does not know what else belongs to it; nothing is changed).
            StoreError: if the write fails (the item is then intact).
        """
        return bool(self._forget([validate_memory_id(item_id)]))

    @_public
    def forget_many(self, item_ids: Iterable[str]) -> list[str]:
        """Remove many items for good in one batch, as :meth:`forget` does one: one change of the
        item log (every delete in one durable append), one delete from each index, and each
        content blob deleted unless an item that stays shares it. All of the batch is removed, or
        (when the write fails) none of it.

        Args:
            item_ids: memory ids; an id given twice counts once, an id no item has is skipped.

        Returns:
            The ids removed, in the order given (``[]``: none of them was stored).

        Raises:
            InvalidArgumentError: if ``item_ids`` is a single string or not iterable.
            InvalidIdError: if an id is malformed (nothing is removed).
            IsolationError: if an id belongs to the parent's memory of a fork (nothing is removed).
            UnsupportedRecordError: if an item's record was written by a newer version (nothing
                is removed).
            StoreError: if the write fails (every item is then intact).
        """
        if isinstance(item_ids, str | bytes) or not isinstance(item_ids, Iterable):
            raise InvalidArgumentError(f"item_ids must be a list of memory ids, not {type(item_ids).__name__}")
        return self._forget(list(dict.fromkeys(validate_memory_id(item_id) for item_id in item_ids)))

    def _forget(self, wanted: list[str]) -> list[str]:
        """Remove the items ``wanted`` (validated, distinct) in one change; the ids removed."""
        if not wanted:
            return []
        with self._mutex:
            if self._base is not None:
                parents = [item_id for item_id in wanted
                           if not self._items.contains(item_id) and self._base.contains(item_id)]
                if len(parents) == 1:
                    raise IsolationError(f"{parents[0]} belongs to the parent's memory: a sub-agent cannot forget it")
                if parents:
                    shown = ", ".join(parents[:5]) + (f" and {len(parents) - 5:,} more" if len(parents) > 5 else "")
                    raise IsolationError(f"{shown} belong to the parent's memory: a sub-agent cannot forget them")
            gone = {record.id for record in self._items.remove(wanted)}
            removed = [item_id for item_id in wanted if item_id in gone]
            if not removed:
                return []
            try:
                self._upkeep.delete(removed)
            except Exception as exc:  # noqa: BLE001 - the items are gone; their stale chunks are skipped
                self._observers.notify(IndexFailed(agent_id=self.agent_id, item_ids=tuple(removed),
                                                 error=f"forget: {type(exc).__name__}: {exc}"[:300], pending=False))
            return removed

    @_public
    def rewrite(self, item_id: str, content: Any) -> None:
        """Replace an item's content in place, keeping its id, type and metadata (a redaction, as
        ``MemoryManager.forget`` does to compacted turns); sizes, hash and tokens follow the content,
        and ``related_to`` ids of items forgotten since are dropped.
        Its chunks leave both indexes, the store is rewritten atomically, the new content is
        indexed: after a crash in between, the next query indexes whatever is stored.

        Raises:
            InvalidIdError, ItemNotFoundError: for a bad or unknown id.
            IsolationError: if the item belongs to a parent's memory (a fork cannot change it).
            UnsupportedRecordError: if the item's record was written by a newer version.
            InvalidArgumentError: if ``content`` cannot be stored (as :meth:`store`; blank
                content is refused).
            VectorIndexError: if the index fails before the store is touched (nothing changed).
            StoreError: if the rewrite fails (the old item is then intact, and indexed by the next
                query).
        """
        item_id = validate_memory_id(item_id)
        with self._mutex:
            if self._base is not None and item_id in self._base.ids:
                raise IsolationError(f"{item_id} belongs to the parent's memory: a sub-agent cannot rewrite it")
            record = self._items.get_record(item_id)
            meta = record.metadata
            item = prepare_item(
                self._items, self.tokens, content, type=record.type, source=meta.source, tags=meta.tags,
                related_to=[related_id for related_id in meta.related_to if self._items.contains(related_id)], title=meta.title,
                media_type=meta.media_type, extra=dict(meta.extra), timestamp=meta.timestamp, item_id=item_id,
                replacing=True,
            )
            with self._upkeep.replacing([item_id]):
                self._items.replace(item.record, item.data)
            self._upkeep.add_stored([(item.record, item.content)])

    @_public
    def clear(self) -> None:
        """Remove every item, its content and its index entries. Records of a newer version that
        this version cannot read are kept, byte for byte, with their content blobs.

        Raises:
            StoreError: if the rewrite fails (the old items are then intact).
        """
        self._items.replace_all([])
        self._reindex_after_replace()

    def _reindex_after_replace(self) -> None:
        """Empty the indexes and index the store's items again after the store was replaced;
        the new items are on disk, so a failure here is reported (``IndexFailed``), not raised."""
        try:
            self._upkeep.reset()
            self._upkeep.flush()
        except Exception as exc:  # noqa: BLE001 - the store is replaced; the index catches up later
            ids = tuple(record.id for record in self._items.records())
            self._observers.notify(
                IndexFailed(agent_id=self.agent_id, item_ids=ids, error=f"{type(exc).__name__}: {exc}"[:300], pending=True)
            )

    @_public
    def snapshot(self) -> MemorySnapshot:
        """A frozen copy of every item with its content, oldest first (serialisable as JSON).

        Raises:
            StoreError: if an item's content blob is missing or damaged (the message names the
                item): a snapshot is a faithful copy or none. ``UnsupportedRecordError`` if a
                record was written by a newer version (it cannot be copied faithfully).
        """
        unreadable = self._items.unreadable()
        if unreadable:
            raise self._items.unsupported(unreadable[0])
        items = tuple(self._load_item(record.id) for record in self.records())
        return MemorySnapshot(agent_id=self.agent_id, items=items)

    @_public
    def restore(self, snapshot: MemorySnapshot) -> None:
        """Make this memory hold exactly the snapshot's items (ids, metadata, content), then
        re-index them. The previous items are replaced atomically; records of a newer version
        that this version cannot read are kept unchanged.

        Vectors are recomputed, not copied: queries give the same hits in the same order up to
        near-ties, with similarities within ``SCORE_TOLERANCE`` (see :meth:`rebuild_index`).
        Indexing failures after the replace are reported, not raised (the items are stored).

        Raises:
            InvalidArgumentError: if ``snapshot`` is not a :class:`MemorySnapshot`, two items share
                an id, or an item's content cannot be stored.
            InvalidIdError: if an item id is malformed.
            UnsupportedRecordError: if a snapshot item has the id of a record of a newer version
                (nothing is written).
            StoreError: if a snapshot item's content does not match its recorded sha256, or
                writing fails (the previous items are then intact).
        """
        pairs = snapshot_pairs(snapshot)
        self._items.replace_all(pairs)
        self._reindex_after_replace()

    @property
    def path(self) -> Path:
        """The agent's directory of a file backend (``<memory_dir>/agents/<agent_id>``).

        Raises:
            ConfigurationError: for a memory in a database.
        """
        return self.agent_dir
