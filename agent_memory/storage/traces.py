"""The trace store: RAW_TRACE (active and archive), EPISODIC and SEMANTIC items of one agent.

:class:`TraceStore` is a small core with everything built on it, as LangGraph's ``BaseStore``:
a backend implements three methods over four *kinds* of records — ``_append(kind, records)``,
``_read(kind)`` and ``_rewrite(kind, records)`` — and may override ``_locked(kind)`` to make a
read-modify-write atomic across processes. The kinds are ``raw`` (the active
``raw_traces.jsonl``), ``archive`` (``raw_traces_archive.jsonl``), ``episodic`` and ``semantic``.
Every backend keeps them on its logs ``traces.<kind>`` (:class:`~agent_memory.storage.common.LogTraceStore`, a record per trace keyed
by :func:`trace_key`): the file backend's are AutoByteus' JSONL files
(:class:`~agent_memory.storage.files.trace_log.FileTraceLog`); on ``memory://`` they live in this
process only, for tests and throwaway agents.

**Crash order of** :meth:`TraceStore.archive_turns`: the turns' lines are appended to the archive
and synced, *then* the active file is atomically rewritten without them. A process killed in
between leaves the lines in both files: readers merge the two and drop the copy (a line is known
by ``(id, turn_id, seq)``; the active copy wins), and the next ``archive_turns`` (whatever turns it
is asked for) finishes the move. Readers read the active file *before* the archive, so a move
running meanwhile can show a line twice (merged) but never hide it.

**Idempotence**: a retried ``add_raw`` of an identical trace, a retried ``add_episodic`` of the
same window and a repeated ``add_semantic`` of the same fact write nothing new.

Every public method maps dependency errors to :mod:`agent_memory.errors`: a bad argument raises
:class:`~agent_memory.errors.InvalidArgumentError`, a file that cannot be read or written
:class:`~agent_memory.errors.StoreError`.
"""

from __future__ import annotations

import functools
import json
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Literal, ParamSpec, TypeGuard, TypeVar

from agent_memory.errors import InvalidArgumentError, ItemNotFoundError, StoreError, map_exceptions
from agent_memory.models.traces import (
    EpisodicItem,
    RawTraceItem,
    SemanticItem,
    normalise_fact,
    trace_sort_key,
    turn_number,
)
from agent_memory.storage.contracts import Locks

__all__ = ["KINDS", "RawKind", "TraceKind", "TraceRecord", "TraceStore", "trace_key", "typed_records"]

TraceKind = Literal["raw", "archive", "episodic", "semantic"]
"""Which records: ``raw`` (active raw traces), ``archive`` (compacted or truncated raw traces),
``episodic`` (summaries), ``semantic`` (facts)."""

RawKind = Literal["raw", "archive"]
"""The kinds that hold :class:`RawTraceItem` records."""

TraceRecord = RawTraceItem | EpisodicItem | SemanticItem
"""A record of one kind: :class:`RawTraceItem` for ``raw`` and ``archive``."""

R = TypeVar("R", RawTraceItem, EpisodicItem, SemanticItem)

KINDS: tuple[TraceKind, ...] = ("raw", "archive", "episodic", "semantic")

CROSS_PROCESS_LOCK_TIMEOUT_S = 60.0
"""How long a read-modify-write of traces waits for another process's, in seconds."""

P = ParamSpec("P")
T = TypeVar("T")


def _public(method: Callable[P, T]) -> Callable[P, T]:
    """A public store method: dependency and builtin errors mapped to library errors."""
    what = f"TraceStore.{method.__name__}"

    @functools.wraps(method)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> T:
        with map_exceptions(what):
            return method(*args, **kwargs)

    return wrapper


def _line_key(item: RawTraceItem) -> tuple[str, str, int]:
    """What makes two raw lines the same line: id, turn and seq (ids of other writers, such as
    AutoByteus' millisecond ids, may repeat across turns)."""
    return (item.id, item.turn_id, item.seq)


def trace_key(record: dict[str, Any], held: dict[str, bytes]) -> str:
    """The key of a trace record in its log (``record``: its JSON, ``held``: the records before it,
    by key): its ``"id"``, or ``<id>#<turn_id>/<seq>`` when a record before it holds that id with
    another turn or seq (ids of other writers, AutoByteus' millisecond ids, may repeat across
    turns). A record with a held id and the same turn and seq is the same line: it replaces it."""
    item_id = str(record.get("id", ""))
    earlier = held.get(item_id)
    if earlier is None:
        return item_id
    first = json.loads(earlier)
    if (first.get("turn_id"), first.get("seq")) == (record.get("turn_id"), record.get("seq")):
        return item_id
    return f"{item_id}#{record.get('turn_id')}/{record.get('seq')}"


def _merged(*sources: Iterable[RawTraceItem]) -> list[RawTraceItem]:
    """The raw lines of ``sources``, one per line key (a later source wins), chronological."""
    lines: dict[tuple[str, str, int], RawTraceItem] = {}
    for source in sources:
        for item in source:
            lines[_line_key(item)] = item
    return sorted(lines.values(), key=trace_sort_key)


def _turn_set(turn_ids: Iterable[str] | None) -> set[str] | None:
    """Validated turn ids as a set; ``None`` stays ``None`` (all turns)."""
    if turn_ids is None:
        return None
    if isinstance(turn_ids, str):
        raise InvalidArgumentError("turn_ids must be a list of turn ids, not one string")
    wanted = set(turn_ids)
    for turn_id in wanted:
        turn_number(turn_id)
    return wanted


def _limit(limit: int | None) -> int | None:
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise InvalidArgumentError(f"limit must be an int >= 0 or None, not {limit!r}")
    return limit


def _newest(records: list[T], limit: int | None) -> list[T]:
    """The last ``limit`` records (all for ``None``), oldest first."""
    return records if limit is None else records[len(records) - limit :] if limit else []


def _all_of(records: Sequence[TraceRecord], model: type[R]) -> TypeGuard[Sequence[R]]:
    return all(isinstance(record, model) for record in records)


def typed_records(model: type[R], records: Sequence[TraceRecord], kind: TraceKind) -> list[R]:
    """``records`` as a list of ``model``, the record type of ``kind`` (a new list).

    Raises:
        StoreError: if a record is of another type (a backend broke its contract).
    """
    if _all_of(records, model):
        return list(records)
    other = next(record for record in records if not isinstance(record, model))
    raise StoreError(f"the {kind} records hold a {type(other).__name__}, not only {model.__name__}")


def _check_type(items: Sequence[Any], model: type, what: str) -> None:
    for item in items:
        if not isinstance(item, model):
            raise InvalidArgumentError(f"{what} takes {model.__name__} objects, not {type(item).__name__}")


class TraceStore(ABC):
    """RAW_TRACE, EPISODIC and SEMANTIC records of one agent (AutoByteus' memory store).

    Subclasses implement :meth:`_append`, :meth:`_read` and :meth:`_rewrite`, may override
    :meth:`_locked` (and the typed reads :meth:`_read_raw`, :meth:`_read_episodic`,
    :meth:`_read_semantic`), and call ``super().__init__()``. Public methods are thread-safe.
    """

    def __init__(self) -> None:
        self._kind_locks = {kind: threading.RLock() for kind in KINDS}
        self._depth = threading.local()

    @contextmanager
    def _locked_across(self, locks: Locks, kind: TraceKind, *, timeout_s: float = CROSS_PROCESS_LOCK_TIMEOUT_S) -> Iterator[None]:
        """A :meth:`_locked` for a backend shared by processes: this process's lock of ``kind``,
        then the backend's lock ``traces.<kind>`` (held once per thread however deep the calls
        nest, as :meth:`_locked` must be re-entrant)."""
        depth: dict[str, int] = self._depth.__dict__.setdefault("by_kind", {})
        with self._kind_locks[kind]:
            if depth.get(kind, 0):
                depth[kind] += 1
                try:
                    yield
                finally:
                    depth[kind] -= 1
                return
            with locks.hold(f"traces.{kind}", timeout_s=timeout_s):
                depth[kind] = 1
                try:
                    yield
                finally:
                    depth[kind] = 0

    # -- the backend ------------------------------------------------------------------------
    @abstractmethod
    def _append(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        """Add ``records`` after the existing ones, durably (synced) before returning; all or
        none of them are visible after a crash, except that a torn last record is dropped."""

    @abstractmethod
    def _read(self, kind: TraceKind) -> list[TraceRecord]:
        """Every record of ``kind``, in the order they were written (a new list each call)."""

    @abstractmethod
    def _rewrite(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        """Replace every record of ``kind`` by ``records`` atomically: a reader or a crash sees
        the old records or the new ones, never a mix."""

    def _locked(self, kind: TraceKind) -> AbstractContextManager[Any]:
        """A re-entrant lock for a read-modify-write of ``kind``. Default: one per kind in this
        process; a backend shared by processes overrides it. Locks are taken in the order of
        ``KINDS`` (``raw`` before ``archive``)."""
        return self._kind_locks[kind]

    # Typed reads for the methods below: :meth:`_read` checked against the kind's record type. A
    # backend that keeps the kinds apart may override them to skip the check.
    def _read_raw(self, kind: RawKind) -> list[RawTraceItem]:
        """:meth:`_read` of ``raw`` or ``archive``, typed."""
        return typed_records(RawTraceItem, self._read(kind), kind)

    def _read_episodic(self) -> list[EpisodicItem]:
        """:meth:`_read` of ``episodic``, typed."""
        return typed_records(EpisodicItem, self._read("episodic"), "episodic")

    def _read_semantic(self) -> list[SemanticItem]:
        """:meth:`_read` of ``semantic``, typed."""
        return typed_records(SemanticItem, self._read("semantic"), "semantic")

    # -- raw traces -------------------------------------------------------------------------
    @_public
    def add_raw(self, items: Iterable[RawTraceItem]) -> list[RawTraceItem]:
        """Append raw traces to the active file, in the order given, in one synced write.

        A trace whose id is already stored (active or archive) with equal content is skipped
        (a retried ingest); with other content it is refused.

        Returns:
            The traces written (without the skipped ones).

        Raises:
            InvalidArgumentError: if an item is not a :class:`RawTraceItem`, or its id is taken
                by a different trace (nothing is written then).
            StoreError: if the write fails.
        """
        batch = list(items)
        _check_type(batch, RawTraceItem, "add_raw")
        with self._locked("raw"):
            known: dict[str, RawTraceItem] = {item.id: item for item in self._read_raw("archive")}
            known.update((item.id, item) for item in self._read_raw("raw"))
            new: list[RawTraceItem] = []
            for item in batch:
                stored = known.get(item.id)
                if stored is not None:
                    if stored == item:
                        continue
                    raise InvalidArgumentError(
                        f"trace id {item.id!r} is already stored for another trace ({stored.turn_id} seq "
                        f"{stored.seq}); ask the TurnTracker for the next seq of the turn"
                    )
                known[item.id] = item
                new.append(item)
            if new:
                self._append("raw", new)
        return new

    @_public
    def list_raw(self, turn_ids: Iterable[str] | None = None) -> list[RawTraceItem]:
        """The active raw traces (not the archive), chronological (by turn number, then seq).

        Args:
            turn_ids: only these turns; ``None``: every active turn.

        Raises:
            InvalidArgumentError: if a turn id is malformed.
        """
        wanted = _turn_set(turn_ids)
        return [item for item in _merged(self._read_raw("raw")) if wanted is None or item.turn_id in wanted]

    @_public
    def active_turn_ids(self) -> list[str]:
        """Turn ids with lines in the active file, oldest first (the candidates of compaction)."""
        return sorted({item.turn_id for item in self._read_raw("raw")}, key=turn_number)

    @_public
    def archive_turns(self, turn_ids: Iterable[str]) -> int:
        """Move every active line of ``turn_ids`` to the archive.

        The lines are appended to the archive and synced first (lines already there are not
        written twice), then the active file is atomically rewritten without them. Active lines
        left over by an interrupted earlier move (already in the archive) are removed too.

        Returns:
            The number of lines removed from the active file (0: nothing to move).

        Raises:
            InvalidArgumentError: if a turn id is malformed.
            StoreError: if a write fails; the active file then still holds every line.
        """
        wanted = _turn_set(turn_ids) or set()
        return self._archive(lambda item: item.turn_id in wanted)

    @_public
    def archive_traces(self, trace_ids: Iterable[str]) -> int:
        """Move the active lines with these ids to the archive, as :meth:`archive_turns` moves
        whole turns (same order of writes): for compacting the finished steps of a long turn.

        Returns:
            The number of lines removed from the active file.

        Raises:
            StoreError: if a write fails; the active file then still holds every line.
        """
        wanted = {str(trace_id) for trace_id in trace_ids}
        return self._archive(lambda item: item.id in wanted)

    def _archive(self, chosen: Callable[[RawTraceItem], bool]) -> int:
        with self._locked("raw"):
            active = self._read_raw("raw")
            with self._locked("archive"):
                archived = {_line_key(item) for item in self._read_raw("archive")}
                moving = [item for item in active if chosen(item) or _line_key(item) in archived]
                if not moving:
                    return 0
                fresh: dict[tuple[str, str, int], RawTraceItem] = {}
                for item in moving:
                    if _line_key(item) not in archived:
                        fresh.setdefault(_line_key(item), item)
                if fresh:
                    self._append("archive", list(fresh.values()))
            gone = {_line_key(item) for item in moving}
            self._rewrite("raw", [item for item in active if _line_key(item) not in gone])
        return len(moving)

    @_public
    def read_archive(self, turn_ids: Iterable[str] | None = None) -> list[RawTraceItem]:
        """The archived raw traces, chronological, each line once.

        Args:
            turn_ids: only these turns; ``None``: every archived turn.

        Raises:
            InvalidArgumentError: if a turn id is malformed.
        """
        wanted = _turn_set(turn_ids)
        return [item for item in _merged(self._read_raw("archive")) if wanted is None or item.turn_id in wanted]

    @_public
    def turn_ids(self) -> list[str]:
        """Every turn id with lines in the active file or the archive, oldest first (by number)."""
        active = self._read_raw("raw")  # active first: a concurrent move cannot hide a turn
        archived = self._read_raw("archive")
        return sorted({item.turn_id for item in (*active, *archived)}, key=turn_number)

    @_public
    def find_turn(self, turn_id: str) -> list[RawTraceItem]:
        """The lines of one turn as they were stored, from the active file and the archive
        (each line once, the active copy winning), by seq; ``[]`` if the turn is unknown.

        Raises:
            InvalidArgumentError: if ``turn_id`` is malformed.
        """
        turn_number(turn_id)
        active = [item for item in self._read_raw("raw") if item.turn_id == turn_id]
        archived = [item for item in self._read_raw("archive") if item.turn_id == turn_id]
        return _merged(archived, active)

    @_public
    def highest_turn_number(self) -> int:
        """The highest turn number anywhere in the store (active, archive, episodes' ``turn_ids``,
        facts' ``source_turn_ids``); 0 when there is none. Turn ids continue after it."""
        numbers = [turn_number(item.turn_id) for item in (*self._read_raw("raw"), *self._read_raw("archive"))]
        for episode in self._read_episodic():
            numbers.extend(turn_number(turn_id) for turn_id in episode.turn_ids)
        for fact in self._read_semantic():
            numbers.extend(turn_number(turn_id) for turn_id in fact.source_turn_ids)
        return max(numbers, default=0)

    # -- episodic ---------------------------------------------------------------------------
    @_public
    def add_episodic(self, item: EpisodicItem) -> EpisodicItem:
        """Store the summary of a window, once per ``window_id``.

        Returns:
            ``item``, or the episode already stored for its window (a retried compaction keeps
            the first summary).

        Raises:
            InvalidArgumentError: if ``item`` is not an :class:`EpisodicItem`, or its id is taken
                by an episode of another window.
            StoreError: if the write fails.
        """
        _check_type([item], EpisodicItem, "add_episodic")
        with self._locked("episodic"):
            for stored in self._read_episodic():
                if stored.window_id == item.window_id:
                    return stored
                if stored.id == item.id:
                    raise InvalidArgumentError(
                        f"episode id {item.id!r} is already stored for window {stored.window_id}"
                    )
            self._append("episodic", [item])
        return item

    @_public
    def list_episodic(self, limit: int | None = None) -> list[EpisodicItem]:
        """The newest ``limit`` episodes (all for ``None``), oldest first."""
        return _newest(self._read_episodic(), _limit(limit))

    # -- semantic ---------------------------------------------------------------------------
    @_public
    def add_semantic(self, items: Iterable[SemanticItem]) -> list[SemanticItem]:
        """Store facts; a fact already stored (same text up to case and spacing) is not stored
        again. Adding a stored fact with ``pinned=True`` pins the stored one.

        Returns:
            For each item given, the fact as stored now (the earlier one for a repeat).

        Raises:
            InvalidArgumentError: if an item is not a :class:`SemanticItem`, or its id is taken
                by another fact.
            StoreError: if the write fails.
        """
        batch = list(items)
        _check_type(batch, SemanticItem, "add_semantic")
        with self._locked("semantic"):
            stored = self._read_semantic()
            by_fact = {normalise_fact(fact.fact): index for index, fact in enumerate(stored)}
            by_id = {fact.id: fact for fact in stored}
            out_index: list[int] = []
            pinned_old = False
            count_old = len(stored)
            for item in batch:
                index = by_fact.get(normalise_fact(item.fact))
                if index is None:
                    other = by_id.get(item.id)
                    if other is not None:
                        raise InvalidArgumentError(f"fact id {item.id!r} is already stored for another fact")
                    index = by_fact[normalise_fact(item.fact)] = len(stored)
                    by_id[item.id] = item
                    stored.append(item)
                elif item.pinned and not stored[index].pinned:
                    stored[index] = stored[index].model_copy(update={"pinned": True})
                    pinned_old = pinned_old or index < count_old
                out_index.append(index)
            if pinned_old:
                self._rewrite("semantic", stored)
            elif len(stored) > count_old:
                self._append("semantic", stored[count_old:])
            return [stored[index] for index in out_index]

    @_public
    def list_semantic(self, limit: int | None = None, *, pinned: bool | None = None) -> list[SemanticItem]:
        """The newest ``limit`` facts (all for ``None``), oldest first.

        Args:
            limit: most facts returned.
            pinned: ``True``: only pinned facts; ``False``: only unpinned ones; ``None``: both.
        """
        facts = [fact for fact in self._read_semantic() if pinned is None or fact.pinned is pinned]
        return _newest(facts, _limit(limit))

    @_public
    def set_pinned(self, fact_id: str, pinned: bool = True) -> SemanticItem:
        """Pin (or unpin) a stored fact; pinned facts are shown in every compaction snapshot.

        Raises:
            ItemNotFoundError: if no fact has the id ``fact_id``.
            StoreError: if the rewrite fails.
        """
        with self._locked("semantic"):
            facts = self._read_semantic()
            for index, fact in enumerate(facts):
                if fact.id == fact_id:
                    if fact.pinned is not bool(pinned):
                        facts[index] = fact.model_copy(update={"pinned": bool(pinned)})
                        self._rewrite("semantic", facts)
                    return facts[index]
        raise ItemNotFoundError(f"no semantic fact {fact_id!r}", item_id=str(fact_id))

    @_public
    def redact_result(self, item_id: str, note: str) -> int:
        """Replace the preview of every tool result holding memory item ``item_id`` (active and
        archived traces) with ``note``: what ``forget`` does to the conversation. The trace stays
        (its call keeps its answer; the turn keeps its shape) with ``tool_result_ref`` unchanged,
        so the history says an item was there.

        Returns:
            How many traces were rewritten.

        Raises:
            StoreError: if a rewrite fails (the file is then intact).
        """
        changed = 0
        raw_kinds: tuple[RawKind, ...] = ("raw", "archive")
        for kind in raw_kinds:
            with self._locked(kind):
                items = self._read_raw(kind)
                hits = [n for n, item in enumerate(items) if item.tool_result_ref == item_id and item.tool_result != note]
                for n in hits:
                    items[n] = items[n].model_copy(update={"tool_result": note})
                if hits:
                    self._rewrite(kind, items)
                changed += len(hits)
        return changed

    # -- all --------------------------------------------------------------------------------
    @_public
    def records(self, kind: TraceKind) -> list[TraceRecord]:
        """Every record of ``kind`` as stored, in write order (a copy to another store: see
        :func:`agent_memory.storage.migrate.migrate`).

        Raises:
            InvalidArgumentError: for an unknown kind.
        """
        if kind not in KINDS:
            raise InvalidArgumentError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        return self._read(kind)

    @_public
    def replace_records(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        """Make ``kind`` hold exactly ``records``, atomically (a reader sees the old ones or these).

        Raises:
            InvalidArgumentError: for an unknown kind, or a record of another kind's type.
        """
        if kind not in KINDS:
            raise InvalidArgumentError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        expected = RawTraceItem if kind in ("raw", "archive") else EpisodicItem if kind == "episodic" else SemanticItem
        _check_type(records, expected, f"{kind} records")
        with self._locked(kind):
            self._rewrite(kind, list(records))

    @_public
    def clear(self) -> None:
        """Remove every record of every kind (active, archive, episodic, semantic).

        Raises:
            StoreError: if a rewrite fails (kinds cleared before it stay cleared).
        """
        for kind in KINDS:
            with self._locked(kind):
                self._rewrite(kind, [])
