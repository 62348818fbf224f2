"""The item store: ``items.jsonl`` (one :class:`ItemRecord` per line) + content blobs.

This is the source of truth of an agent's memory; the vector index is derived from it and can be
rebuilt at any time. Records are cached in the process and refreshed incrementally from the file,
so items another process appended are seen on the next read without re-reading the whole file.

Damage is contained: a line in the middle that does not parse is quarantined (moved to
``items.jsonl.corrupt`` and the file atomically rewritten without it, see
:meth:`JsonlFile.quarantine`) and reported; every other item stays readable. A missing or damaged
content blob fails only reads of that item's content.

Records of a newer version are not damage. A line that is a JSON object whose ``"id"`` is a
well-formed memory id, but that this version cannot read (a ``schema_version`` above
:data:`~agent_memory.models.items.ITEM_SCHEMA_VERSION`, or a field or type it does not know:
written by a newer version, or by hand), is an :class:`UnreadableRecord`: it stays exactly where
it is (no reader moves or rewrites it), its id stays taken, it is reported once per process
(``on_unreadable``), and reading it raises :class:`~agent_memory.errors.UnsupportedRecordError`.
Every rewrite of the file (``remove``, ``replace``, ``replace_all``) writes its bytes back
unchanged and keeps every content blob it names; forgetting, rewriting or replacing that item
is refused. Only lines that are not such an object (not UTF-8, not JSON, cut off, no valid id)
are quarantined.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter, ValidationError

from agent_memory.errors import InvalidIdError, ItemNotFoundError, StoreError, UnsupportedRecordError, validation_summary
from agent_memory.ids import validate_memory_id
from agent_memory.models.items import (
    ITEM_SCHEMA_VERSION,
    STORED_CONTEXT,
    ItemRecord,
    MemoryItem,
    content_from_bytes,
)
from agent_memory.store.content import ContentStore
from agent_memory.store.jsonl import CorruptLine, JsonlFile, JsonlTail

__all__ = ["ItemStore", "UnreadableRecord"]

_RECORD_ADAPTER: TypeAdapter[ItemRecord] = TypeAdapter(ItemRecord)
_DIGEST = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


@dataclass(frozen=True)
class UnreadableRecord:
    """A line of ``items.jsonl`` this version cannot read but must keep: a JSON object with a
    well-formed memory id that does not validate as an :class:`ItemRecord` (a newer
    ``schema_version``, an unknown field or type). Written back byte for byte by every rewrite."""

    id: str
    """The memory id the line carries (taken: no new item gets it)."""
    data: bytes
    """The line's exact bytes, without its newline."""
    reason: str
    """Why it cannot be read (short; never the line's content)."""
    schema_version: int | None
    """The line's ``schema_version`` when it is a whole number, else ``None`` (version 1)."""

    def blob_digests(self) -> set[str]:
        """Every sha256 hex digest the line mentions: the content blobs it may refer to, which
        rewrites keep (a newer format may name blobs under fields this version does not know)."""
        return {match.decode("ascii") for match in _DIGEST.findall(self.data)}


class _ItemCodec:
    """Reads and writes the lines of ``items.jsonl``: an :class:`ItemRecord`, or an
    :class:`UnreadableRecord` for a line of a newer version (see the module docstring)."""

    def validate_json(self, data: bytes, /, *, context: dict[str, Any] | None = None) -> ItemRecord | UnreadableRecord:
        try:
            return _RECORD_ADAPTER.validate_json(data, context=context)
        except ValidationError as exc:
            kept = _unreadable(data, exc)
            if kept is None:
                raise  # garbage: quarantined by the reader
            return kept

    def dump_json(self, instance: ItemRecord | UnreadableRecord, /) -> bytes:
        if isinstance(instance, UnreadableRecord):
            return instance.data
        return _RECORD_ADAPTER.dump_json(instance)


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


class ItemStore:
    """Item records and their content for one agent directory.

    Args:
        agent_dir: ``memory/agents/<agent_id>``; ``items.jsonl`` and ``content/`` live in it.
        on_quarantine: called with each bad line and where its bytes went (the ``.corrupt``
            file, or ``None`` if moving it failed and it is only skipped); ``None``: not reported.
        on_unreadable: called once per process with each record of a newer version found (kept
            in place, see the module docstring); ``None``: not reported.
    """

    def __init__(
        self,
        agent_dir: Path,
        *,
        on_quarantine: Callable[[CorruptLine, Path | None], None] | None = None,
        on_unreadable: Callable[[UnreadableRecord], None] | None = None,
    ) -> None:
        self.agent_dir = agent_dir
        self.jsonl: JsonlFile[ItemRecord | UnreadableRecord] = JsonlFile(
            agent_dir / "items.jsonl", _ItemCodec(), context=STORED_CONTEXT
        )
        self.content = ContentStore(agent_dir / "content")
        self._on_quarantine = on_quarantine
        self._on_unreadable = on_unreadable
        self._reported: set[tuple[str, bytes]] = set()
        self._records: dict[str, ItemRecord | UnreadableRecord] = {}
        self._offset = 0
        self._line_no = 1
        self._file_id: tuple[int, int] = (0, 0)
        self._mutex = threading.RLock()

    # -- reading ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Pick up records appended (or a rewrite made) by any process since the last read.

        A complete line that does not parse is quarantined and reported (``on_quarantine``); the
        read then goes on with the repaired file.

        Raises:
            StoreError: if the file cannot be read.
        """
        with self._mutex:
            for _ in range(3):  # a quarantine rewrites the file: read the new one
                tail = self._read_new()
                if not tail.corrupt:
                    break
                try:
                    moved = self.jsonl.quarantine()
                except StoreError:  # cannot rewrite (read-only disk...): skip at read time only
                    for line in tail.corrupt:
                        self._report(line, None)
                    break
                for line in moved:
                    self._report(line, self.jsonl.corrupt_path)
            for record in tail.records:
                self._records[record.id] = record
                if isinstance(record, UnreadableRecord):
                    self._report_unreadable(record)
            self._offset = tail.next_offset
            self._line_no = tail.next_line_no
            self._file_id = tail.file_id if tail.file_id != (0, 0) else self.jsonl.file_id()

    def _read_new(self) -> JsonlTail[ItemRecord | UnreadableRecord]:
        """The records past the cached offset (from the start after a rewrite; the cache is then
        emptied). Called under ``_mutex``."""
        file_id = self.jsonl.file_id()
        if file_id != self._file_id:
            self._records.clear()
            self._offset, self._line_no, self._file_id = 0, 1, file_id
        tail = self.jsonl.read_from(self._offset, line_no=self._line_no, skip_corrupt=True)
        if tail.file_id != (0, 0) and tail.file_id != file_id:
            # Rewritten between stat and read: start over from the new file.
            self._records.clear()
            self._offset, self._line_no, self._file_id = 0, 1, tail.file_id
            tail = self.jsonl.read_from(0, skip_corrupt=True)
        return tail

    def _report(self, line: CorruptLine, where: Path | None) -> None:
        if self._on_quarantine is not None:
            self._on_quarantine(line, where)

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
            f"it was written by a newer version or edited by hand, and is kept unchanged in {self.jsonl.path}: "
            "open the memory with the version that wrote it to use this item",
            item_id=record.id, path=str(self.jsonl.path), schema_version=record.schema_version,
        )

    def version(self) -> tuple[tuple[int, int], int]:
        """Changes whenever the records change (an append by any process, a rewrite): the file's
        identity and the offset read to. Refreshes first; O(1) when nothing changed."""
        self.refresh()
        with self._mutex:
            return self._file_id, self._offset

    def records(self) -> list[ItemRecord]:
        """Every item record this version can read, oldest first (records of a newer version are
        left out: :meth:`unreadable` lists them)."""
        self.refresh()
        with self._mutex:
            return [record for record in self._records.values() if isinstance(record, ItemRecord)]

    def unreadable(self) -> list[UnreadableRecord]:
        """The records this version cannot read (a newer version's), in file order."""
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
            data = self.content.get(record.metadata.content_sha256)
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
        """Write the blob, then append the record, both under the file lock (so a concurrent
        ``replace_all`` cannot remove the blob in between). A crash in between leaves an
        unreferenced blob, never a record without content.

        Raises:
            StoreError: if either write fails.
        """
        self.add_many([(record, data)])

    def add_many(self, pairs: list[tuple[ItemRecord, bytes]]) -> None:
        """:meth:`add` for many items: every blob, then all records in one append (one fsync)."""
        with self.jsonl.locked():
            for _, data in pairs:
                self.content.put(data)
            self.jsonl.append(record for record, _ in pairs)
        with self._mutex:
            for record, _ in pairs:
                self._records[record.id] = record

    def remove(self, item_ids: Iterable[str]) -> list[ItemRecord]:
        """Remove the records of ``item_ids`` (one atomic rewrite of the JSONL, under its lock),
        then delete each removed record's blob unless a remaining record shares it (content is
        addressed by its sha256, so two items may hold one blob). Unknown ids are ignored.

        Records this version cannot read are written back unchanged.

        Returns:
            The removed records (``[]``: none of the ids was stored; nothing was written).

        Raises:
            UnsupportedRecordError: if one of the ids is a record this version cannot read
                (nothing is written).
            StoreError: if the rewrite fails (every record is then intact).
        """
        wanted = set(item_ids)
        with self.jsonl.locked():
            self.refresh()
            with self._mutex:
                entries = list(self._records.values())
            for entry in entries:
                if entry.id in wanted and isinstance(entry, UnreadableRecord):
                    raise self.unsupported(entry)
            kept = [record for record in entries if record.id not in wanted]
            removed = [record for record in entries if record.id in wanted and isinstance(record, ItemRecord)]
            if not removed:
                return []
            self.jsonl.rewrite(kept)
            shared = _digests(kept)
            for record in removed:
                digest = record.metadata.content_sha256
                if digest not in shared:
                    self.content.remove(digest)
        self._reload()
        return removed

    def replace(self, record: ItemRecord, data: bytes) -> ItemRecord:
        """Swap the stored record of ``record.id`` for ``record`` with the content ``data``:
        the new blob first, then one atomic rewrite of the JSONL under its lock, then the old
        blob is deleted unless a remaining record shares it. A crash before the rename leaves
        the old item intact.

        Returns:
            The record that was replaced.

        Raises:
            ItemNotFoundError: if no item has ``record.id`` (nothing is written).
            UnsupportedRecordError: if its record is one this version cannot read (nothing is
                written).
            StoreError: if a write fails (the old item is then intact).
        """
        with self.jsonl.locked():
            self.refresh()
            with self._mutex:
                old = self._records.get(record.id)
                entries = list(self._records.values())
            if old is None:
                raise ItemNotFoundError(f"no memory item {record.id!r}", item_id=record.id)
            if isinstance(old, UnreadableRecord):
                raise self.unsupported(old)
            records = [record if kept.id == record.id else kept for kept in entries]
            self.content.put(data)
            self.jsonl.rewrite(records)
            if old.metadata.content_sha256 not in _digests(records):
                self.content.remove(old.metadata.content_sha256)
        self._reload()
        return old

    def replace_all(self, items: Iterable[tuple[ItemRecord, bytes]]) -> None:
        """Make the store hold exactly ``items`` besides the records this version cannot read,
        which are kept (after ``items``, byte for byte, with every blob they name): blobs first,
        then one atomic rewrite of the JSONL.

        Blobs no longer referenced are removed after the rewrite. If the process dies before the
        rename, the old state is intact.

        Raises:
            UnsupportedRecordError: if an item has the id of a record this version cannot read
                (nothing is written).
            StoreError: if a write fails (the old state is then intact).
        """
        pairs = list(items)
        with self.jsonl.locked():
            kept = self.unreadable()
            new_ids = {record.id for record, _ in pairs}
            for entry in kept:
                if entry.id in new_ids:
                    raise self.unsupported(entry)
            for _, data in pairs:
                self.content.put(data)
            lines: list[ItemRecord | UnreadableRecord] = [record for record, _ in pairs]
            lines.extend(kept)
            self.jsonl.rewrite(lines)
            self.content.remove_unreferenced(_digests(lines))
        self._reload()

    def _reload(self) -> None:
        """Forget the cached records and read the (rewritten) file again."""
        with self._mutex:
            self._records.clear()
            self._offset, self._line_no = 0, 1
            self._file_id = (0, 0)
        self.refresh()


def _digests(records: Iterable[ItemRecord | UnreadableRecord]) -> set[str]:
    """The content blobs ``records`` refer to (all the digests a record of a newer version names)."""
    digests: set[str] = set()
    for record in records:
        if isinstance(record, UnreadableRecord):
            digests |= record.blob_digests()
        else:
            digests.add(record.metadata.content_sha256)
    return digests
