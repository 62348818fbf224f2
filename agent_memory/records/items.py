"""The item store: an agent's item records and their content, over a backend's item log.

This is the source of truth of an agent's memory; the indexes are derived from it and can be
rebuilt at any time. The records live in a :class:`~agent_memory.storage.contracts.Log`
(``items.jsonl`` + ``content/`` for files, tables for Postgres); the store decodes them, caches
them in the process and refreshes the cache incrementally, so items another process added,
replaced or deleted are seen on the next read without reading every record again. It counts the
records naming each content blob, so a change that drops the last one releases the blob without a
pass over the records: ``remove`` and ``replace`` cost the same at any size. A change that
depends on what was read (forget, rewrite, restore) is written with the token of that read and
retried when another process wrote in between (:class:`~agent_memory.errors.ConflictError`), so
none of them loses the other's write.

Damage is contained by the log (the file log quarantines a line that is not a record and reports
it); a missing or damaged content blob fails only reads of that item's content.

Records of a newer version are not damage. A record whose ``"id"`` is a well-formed memory id but
that this version cannot read (a ``schema_version`` above
:data:`~agent_memory.models.items.ITEM_SCHEMA_VERSION`, or a field or type it does not know:
written by a newer version, or by hand), is an :class:`UnreadableRecord`: it stays exactly where
it is, its id stays taken, it is reported once per process (``on_unreadable``), and reading it
raises :class:`~agent_memory.errors.UnsupportedRecordError`. Every change (``remove``,
``replace``, ``replace_all``) keeps its bytes unchanged and every content blob it names;
forgetting, rewriting or replacing that item is refused.
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent_memory.errors import (
    ConflictError,
    InvalidIdError,
    ItemNotFoundError,
    StoreError,
    UnsupportedRecordError,
    validation_summary,
)
from agent_memory.ids import validate_memory_id
from agent_memory.models.items import (
    ITEM_SCHEMA_VERSION,
    STORED_CONTEXT,
    ItemRecord,
    MemoryItem,
    content_from_bytes,
)
from agent_memory.storage.contracts import ChangeToken, Log, LogChange, LogEntry

__all__ = [
    "CONFLICT_BACKOFF_S",
    "MAX_CONFLICT_BACKOFF_S",
    "MAX_WRITE_ATTEMPTS",
    "ItemStore",
    "UnreadableRecord",
    "decode_record",
    "encode_record",
]

_RECORD_ADAPTER: TypeAdapter[ItemRecord] = TypeAdapter(ItemRecord)
_DIGEST = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


@dataclass(frozen=True)
class UnreadableRecord:
    """A record this version cannot read but must keep: a JSON object with a well-formed memory
    id that does not validate as an :class:`ItemRecord` (a newer ``schema_version``, an unknown
    field or type). Kept byte for byte by every change."""

    id: str
    """The memory id the line carries (taken: no new item gets it)."""
    data: bytes
    """The record's exact bytes (one JSON object, no newline)."""
    reason: str
    """Why it cannot be read (short; never the line's content)."""
    schema_version: int | None
    """The line's ``schema_version`` when it is a whole number, else ``None`` (version 1)."""

    def blob_digests(self) -> set[str]:
        """Every sha256 hex digest the record mentions: the content blobs it may refer to, which
        changes keep (a newer format may name blobs under fields this version does not know)."""
        return {match.decode("ascii") for match in _DIGEST.findall(self.data)}


def decode_record(data: bytes) -> ItemRecord | UnreadableRecord:
    """A record of the log: an :class:`ItemRecord`, or an :class:`UnreadableRecord` for one of a
    newer version (or a record whose id is well formed but whose rest is not a record)."""
    try:
        return _RECORD_ADAPTER.validate_json(data, context=STORED_CONTEXT)
    except ValidationError as exc:
        kept = _unreadable(data, exc)
        if kept is None:  # a log hands out only objects with an id; this one's is not well formed
            return UnreadableRecord(id="", data=bytes(data), reason=validation_summary(exc), schema_version=None)
        return kept


def encode_record(record: ItemRecord | UnreadableRecord) -> bytes:
    """The bytes a record is kept as: an unreadable record's exact bytes."""
    if isinstance(record, UnreadableRecord):
        return record.data
    return _RECORD_ADAPTER.dump_json(record)


def _unreadable(data: bytes, exc: ValidationError) -> UnreadableRecord | None:
    """The line as an :class:`UnreadableRecord` when it is a JSON object with a well-formed
    memory id, else ``None`` (garbage)."""
    try:
        fields = json.loads(data)
    except (ValueError, RecursionError):  # not UTF-8 / not JSON / absurdly deep
        return None
    if not isinstance(fields, dict) or not isinstance(fields.get("id"), str):
        return None
    item_id = fields["id"]
    try:
        if validate_memory_id(item_id) != item_id:
            return None
    except InvalidIdError:
        return None
    version = fields.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        version = None
    if version is not None and version > ITEM_SCHEMA_VERSION:
        reason = f"record schema version {version}; this version of agent-memory reads up to {ITEM_SCHEMA_VERSION}"
    else:
        reason = f"not a record this version of agent-memory knows: {validation_summary(exc)}"
    line = bytes(data)
    return UnreadableRecord(
        id=item_id, data=line[:-1] if line.endswith(b"\n") else line, reason=reason, schema_version=version
    )


MAX_WRITE_ATTEMPTS = 20
"""How many times a change that depends on a read is retried when another process wrote in between
(each retry reads only what changed); then :class:`~agent_memory.errors.ConflictError` is raised."""

CONFLICT_BACKOFF_S = 0.002
"""The first retry waits up to this long, in seconds; each later one up to twice as long as the one
before (exponential backoff with full jitter: AWS Architecture Blog, "Exponential Backoff And
Jitter", 2015), at most :data:`MAX_CONFLICT_BACKOFF_S`: 20 attempts span up to about 3 s."""

MAX_CONFLICT_BACKOFF_S = 0.2
"""Longest wait before one retry, in seconds."""


class ItemStore:
    """Item records and their content for one agent.

    Args:
        log: the backend's item log of the agent.
        where: names the log in messages (a path, or a URL and agent id).
        on_unreadable: called once per process with each record of a newer version found (kept
            in place, see the module docstring); ``None``: not reported.
    """

    def __init__(
        self,
        log: Log,
        *,
        where: str,
        on_unreadable: Callable[[UnreadableRecord], None] | None = None,
    ) -> None:
        self.log = log
        self.where = where
        self._on_unreadable = on_unreadable
        self._reported: set[tuple[str, bytes]] = set()
        self._records: dict[str, ItemRecord | UnreadableRecord] = {}
        self._refs: Counter[str] = Counter()
        """How many held records name each content blob (sha256): a change releases a blob when
        it drops the last one, without a pass over every record."""
        self._token: ChangeToken | None = None
        self._mutex = threading.RLock()

    def __repr__(self) -> str:
        return f"ItemStore({self.where!r})"

    # -- reading ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Pick up what any process wrote since the last read: only the records put and the ids
        deleted since then, unless the log started over (``replace_all``, a compaction).

        Raises:
            StoreError: if the log cannot be read.
        """
        with self._mutex:
            found = self.log.read(self._token)
            if found.reset:
                self._records.clear()
                self._refs.clear()
            for item_id in found.deleted:
                self._drop(item_id)
            for _, data in found.records:
                record = decode_record(data)
                if not record.id:
                    continue
                self._drop(record.id, keep_place=True)
                self._records[record.id] = record
                self._refs.update(_digests([record]))
                if isinstance(record, UnreadableRecord):
                    self._report_unreadable(record)
            self._token = found.token

    def _drop(self, item_id: str, *, keep_place: bool = False) -> None:
        """Forget the held record of ``item_id`` and its blob references (``keep_place``: the
        caller puts a record in its place next). Called under ``_mutex``."""
        old = self._records.get(item_id) if keep_place else self._records.pop(item_id, None)
        if old is not None:
            for digest in _digests([old]):
                self._refs[digest] -= 1
                if self._refs[digest] <= 0:
                    del self._refs[digest]

    def _report_unreadable(self, record: UnreadableRecord) -> None:
        """Report a record of a newer version, once per process (a rewrite re-reads it)."""
        key = (record.id, record.data)
        if key in self._reported:
            return
        self._reported.add(key)
        if self._on_unreadable is not None:
            self._on_unreadable(record)

    def unsupported(self, record: UnreadableRecord) -> UnsupportedRecordError:
        """The error that refuses ``record`` (for a read, a change or a copy of its item)."""
        return UnsupportedRecordError(
            f"memory item {record.id} cannot be read by this version of agent-memory ({record.reason}); "
            f"it was written by a newer version or edited by hand, and is kept unchanged in {self.where}: "
            "open the memory with the version that wrote it to use this item",
            item_id=record.id, path=self.where, schema_version=record.schema_version,
        )

    def version(self) -> ChangeToken:
        """Changes whenever the records change (an addition by any process, a rewrite): the log's
        token. Refreshes first; cheap when nothing changed."""
        self.refresh()
        with self._mutex:
            return self._token or ""

    def count(self) -> int:
        """How many records the log holds (those this version cannot read included): O(1) after
        a refresh, cheap when nothing changed."""
        self.refresh()
        with self._mutex:
            return len(self._records)

    def records(self) -> list[ItemRecord]:
        """Every item record this version can read, oldest first (records of a newer version are
        left out: :meth:`unreadable` lists them)."""
        self.refresh()
        with self._mutex:
            return [record for record in self._records.values() if isinstance(record, ItemRecord)]

    def unreadable(self) -> list[UnreadableRecord]:
        """The records this version cannot read (a newer version's), in log order."""
        self.refresh()
        with self._mutex:
            return [record for record in self._records.values() if isinstance(record, UnreadableRecord)]

    def _entry(self, item_id: str) -> ItemRecord | UnreadableRecord | None:
        with self._mutex:
            record = self._records.get(item_id)
        if record is None:
            self.refresh()
            with self._mutex:
                record = self._records.get(item_id)
        return record

    def get_record(self, item_id: str) -> ItemRecord:
        """The record of ``item_id`` (id already validated).

        Raises:
            ItemNotFoundError: if there is no such item.
            UnsupportedRecordError: if its record is one this version cannot read.
        """
        record = self._entry(item_id)
        if record is None:
            raise ItemNotFoundError(f"no memory item {item_id!r}", item_id=item_id)
        if isinstance(record, UnreadableRecord):
            raise self.unsupported(record)
        return record

    def contains(self, item_id: str) -> bool:
        """Whether ``item_id`` is stored (also when its record is one this version cannot read:
        the id is taken)."""
        return self._entry(item_id) is not None

    def load_content(self, record: ItemRecord) -> Any:
        """The content of ``record`` as the Python value it was stored with.

        Raises:
            StoreError: if its blob is missing or damaged.
        """
        try:
            data = self.log.blob(record.metadata.content_sha256)
            return content_from_bytes(data, record.metadata.content_encoding)
        except StoreError as exc:
            raise StoreError(f"item {record.id}: {exc}") from exc

    def load_item(self, item_id: str) -> MemoryItem:
        """The full item (record + content).

        Raises:
            ItemNotFoundError: if there is no such item.
            StoreError: if its blob is missing or damaged.
        """
        record = self.get_record(item_id)
        return MemoryItem(id=record.id, type=record.type, metadata=record.metadata, content=self.load_content(record))

    # -- writing ---------------------------------------------------------------------------
    def add(self, record: ItemRecord, data: bytes) -> None:
        """Keep the blob, then the record (atomically in the log's order: a crash in between
        leaves an unreferenced blob at worst, never a record without content).

        Raises:
            StoreError: if the write fails (the item is then absent).
        """
        self.add_many([(record, data)])

    def add_many(self, pairs: list[tuple[ItemRecord, bytes]]) -> None:
        """:meth:`add` for many items: every blob, then every record in one write."""
        if not pairs:
            return
        self.log.write(LogChange(put=[LogEntry(record.id, encode_record(record), data) for record, data in pairs]))
        with self._mutex:
            for record, _ in pairs:
                self._drop(record.id, keep_place=True)
                self._records[record.id] = record
                self._refs.update(_digests([record]))

    def _change(self, plan: Callable[[], LogChange | None]) -> None:
        """Write the change ``plan`` makes of the current records (it reads ``_records`` and
        ``_refs``, under ``_mutex``), with the token of the read it was made from; when another
        process wrote in between, wait a little (exponential backoff with full jitter,
        :data:`CONFLICT_BACKOFF_S`), read again and plan again: processes that store in a burst
        would otherwise win every race against a forget that retries at once."""
        for attempt in range(MAX_WRITE_ATTEMPTS):
            if attempt:
                time.sleep(random.uniform(0.0, min(MAX_CONFLICT_BACKOFF_S, CONFLICT_BACKOFF_S * 2 ** attempt)))
            self.refresh()
            with self._mutex:
                token = self._token
                change = plan()
            if change is None:
                return
            try:
                self.log.write(change, expect=token)
            except ConflictError:
                continue
            self.refresh()
            return
        raise ConflictError(f"{self.where} kept changing: gave up after {MAX_WRITE_ATTEMPTS} attempts")

    def remove(self, item_ids: Iterable[str]) -> list[ItemRecord]:
        """Remove the records of ``item_ids`` (one atomic change), then each removed record's blob
        unless a remaining record shares it (content is addressed by its sha256, so two items may
        hold one blob: a count of references per blob tells, without a pass over the records).
        Unknown ids are ignored. Costs what ``item_ids`` holds, not what the store holds.

        Returns:
            The removed records (``[]``: none of the ids was stored; nothing was written).

        Raises:
            UnsupportedRecordError: if one of the ids is a record this version cannot read
                (nothing is written).
            StoreError: if the write fails (every record is then intact).
        """
        wanted = list(dict.fromkeys(item_ids))
        removed: list[ItemRecord] = []

        def plan() -> LogChange | None:
            found = [entry for entry in map(self._records.get, wanted) if entry is not None]
            for entry in found:
                if isinstance(entry, UnreadableRecord):
                    raise self.unsupported(entry)
            removed[:] = [entry for entry in found if isinstance(entry, ItemRecord)]
            if not removed:
                return None
            dropped = Counter(record.metadata.content_sha256 for record in removed)
            released = [digest for digest, count in dropped.items() if self._refs[digest] <= count]
            return LogChange(delete=[record.id for record in removed], release=sorted(released))

        self._change(plan)
        return removed

    def replace(self, record: ItemRecord, data: bytes) -> ItemRecord:
        """Swap the stored record of ``record.id`` for ``record`` with the content ``data``, in
        its place: the new blob first, then the record, then the old blob is deleted unless a
        remaining record shares it. A crash before the change leaves the old item intact.

        Returns:
            The record that was replaced.

        Raises:
            ItemNotFoundError: if no item has ``record.id`` (nothing is written).
            UnsupportedRecordError: if its record is one this version cannot read (nothing is
                written).
            StoreError: if a write fails (the old item is then intact).
        """
        replaced: list[ItemRecord] = []

        def plan() -> LogChange:
            old = self._records.get(record.id)
            if old is None:
                raise ItemNotFoundError(f"no memory item {record.id!r}", item_id=record.id)
            if isinstance(old, UnreadableRecord):
                raise self.unsupported(old)
            replaced[:] = [old]
            digest = old.metadata.content_sha256
            released = [digest] if digest != record.metadata.content_sha256 and self._refs[digest] <= 1 else []
            return LogChange(put=[LogEntry(record.id, encode_record(record), data)], release=released)

        self._change(plan)
        return replaced[0]

    def set_counts(self, item_id: str, content_sha256: str, tokens: int, text_tokens: int | None) -> bool:
        """Write the token counts of an item stored uncounted (``metadata.tokens`` ``None``: a large
        result, counted by the indexing thread after ``store`` returned), as a new version of its
        record (its blob is not written again). Nothing is written when the item is gone, holds
        other content now (``content_sha256`` differs: rewritten), or is counted already.

        Returns:
            Whether the counts were written.

        Raises:
            StoreError: if the write fails (the record stays uncounted; the next indexing counts it).
        """
        written: list[bool] = []

        def plan() -> LogChange | None:
            old = self._records.get(item_id)
            written[:] = [False]
            if not isinstance(old, ItemRecord) or old.metadata.content_sha256 != content_sha256 \
                    or old.metadata.tokens is not None:
                return None
            meta = old.metadata.model_copy(update={"tokens": tokens, "text_tokens": text_tokens})
            written[:] = [True]
            return LogChange(put=[LogEntry(item_id, encode_record(old.model_copy(update={"metadata": meta})), None)])

        self._change(plan)
        return bool(written and written[0])

    def replace_all(self, items: Iterable[tuple[ItemRecord, bytes]]) -> None:
        """Make the store hold exactly ``items`` besides the records this version cannot read,
        which are kept (after ``items``, byte for byte, with every blob they name): one atomic
        change; blobs no longer named are removed after it.

        Raises:
            UnsupportedRecordError: if an item has the id of a record this version cannot read
                (nothing is written).
            StoreError: if a write fails (the old state is then intact).
        """
        pairs = list(items)
        new_ids = {record.id for record, _ in pairs}

        def plan() -> LogChange:
            entries = list(self._records.values())
            kept = [entry for entry in entries if isinstance(entry, UnreadableRecord)]
            for entry in kept:
                if entry.id in new_ids:
                    raise self.unsupported(entry)
            put = [LogEntry(record.id, encode_record(record), data) for record, data in pairs]
            put += [LogEntry(entry.id, entry.data) for entry in kept]
            named = _digests([*(record for record, _ in pairs), *kept])
            return LogChange(put=put, replace_all=True, release=sorted(_digests(entries) - named))

        self._change(plan)


def _digests(records: Iterable[ItemRecord | UnreadableRecord]) -> set[str]:
    """The content blobs ``records`` refer to (all the digests a record of a newer version names)."""
    digests: set[str] = set()
    for record in records:
        if isinstance(record, UnreadableRecord):
            digests |= record.blob_digests()
        else:
            digests.add(record.metadata.content_sha256)
    return digests
