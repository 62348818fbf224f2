"""The item store: ``items.jsonl`` (one :class:`ItemRecord` per line) + content blobs.

This is the source of truth of an agent's memory; the vector index is derived from it and can be
rebuilt at any time. Records are cached in the process and refreshed incrementally from the file,
so items another process appended are seen on the next read without re-reading the whole file.

Damage is contained: a line in the middle that does not parse is quarantined (moved to
``items.jsonl.corrupt`` and the file atomically rewritten without it, see
:meth:`JsonlFile.quarantine`) and reported; every other item stays readable. A missing or damaged
content blob fails only reads of that item's content.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from agent_memory.errors import ItemNotFoundError, StoreError
from agent_memory.models.items import STORED_CONTEXT, ItemRecord, MemoryItem, content_from_bytes
from agent_memory.store.content import ContentStore
from agent_memory.store.jsonl import CorruptLine, JsonlFile

__all__ = ["ItemStore"]

_RECORD_ADAPTER: TypeAdapter[ItemRecord] = TypeAdapter(ItemRecord)


class ItemStore:
    """Item records and their content for one agent directory.

    Args:
        agent_dir: ``memory/agents/<agent_id>``; ``items.jsonl`` and ``content/`` live in it.
        on_quarantine: called with each bad line and where its bytes went (the ``.corrupt``
            file, or ``None`` if moving it failed and it is only skipped); ``None``: not reported.
    """

    def __init__(
        self, agent_dir: Path, *, on_quarantine: Callable[[CorruptLine, Path | None], None] | None = None
    ) -> None:
        self.agent_dir = agent_dir
        self.jsonl = JsonlFile(agent_dir / "items.jsonl", _RECORD_ADAPTER, context=STORED_CONTEXT)
        self.content = ContentStore(agent_dir / "content")
        self._on_quarantine = on_quarantine
        self._records: dict[str, ItemRecord] = {}
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
            self._offset = tail.next_offset
            self._line_no = tail.next_line_no
            self._file_id = tail.file_id if tail.file_id != (0, 0) else self.jsonl.file_id()

    def _read_new(self):  # noqa: ANN202 - JsonlTail[ItemRecord]
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

    def version(self) -> tuple[tuple[int, int], int]:
        """Changes whenever the records change (an append by any process, a rewrite): the file's
        identity and the offset read to. Refreshes first; O(1) when nothing changed."""
        self.refresh()
        with self._mutex:
            return self._file_id, self._offset

    def records(self) -> list[ItemRecord]:
        """Every item record, oldest first."""
        self.refresh()
        with self._mutex:
            return list(self._records.values())

    def get_record(self, item_id: str) -> ItemRecord:
        """The record of ``item_id`` (id already validated).

        Raises:
            ItemNotFoundError: if there is no such item.
        """
        with self._mutex:
            record = self._records.get(item_id)
        if record is None:
            self.refresh()
            with self._mutex:
                record = self._records.get(item_id)
        if record is None:
            raise ItemNotFoundError(f"no memory item {item_id!r}", item_id=item_id)
        return record

    def contains(self, item_id: str) -> bool:
        """Whether ``item_id`` is stored."""
        try:
            self.get_record(item_id)
        except ItemNotFoundError:
            return False
        return True

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

        Returns:
            The removed records (``[]``: none of the ids was stored; nothing was written).

        Raises:
            StoreError: if the rewrite fails (every record is then intact).
        """
        wanted = set(item_ids)
        with self.jsonl.locked():
            self.refresh()
            with self._mutex:
                kept = [record for record in self._records.values() if record.id not in wanted]
                removed = [record for record in self._records.values() if record.id in wanted]
            if not removed:
                return []
            self.jsonl.rewrite(kept)
            shared = {record.metadata.content_sha256 for record in kept}
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
            StoreError: if a write fails (the old item is then intact).
        """
        with self.jsonl.locked():
            self.refresh()
            with self._mutex:
                old = self._records.get(record.id)
                if old is None:
                    raise ItemNotFoundError(f"no memory item {record.id!r}", item_id=record.id)
                records = [record if kept.id == record.id else kept for kept in self._records.values()]
            self.content.put(data)
            self.jsonl.rewrite(records)
            if old.metadata.content_sha256 not in {kept.metadata.content_sha256 for kept in records}:
                self.content.remove(old.metadata.content_sha256)
        self._reload()
        return old

    def replace_all(self, items: Iterable[tuple[ItemRecord, bytes]]) -> None:
        """Make the store hold exactly ``items``: blobs first, then one atomic rewrite of the JSONL.

        Blobs no longer referenced are removed after the rewrite. If the process dies before the
        rename, the old state is intact.
        """
        pairs = list(items)
        for _, data in pairs:
            self.content.put(data)
        with self.jsonl.locked():
            self.jsonl.rewrite(record for record, _ in pairs)
            self.content.remove_unreferenced({record.metadata.content_sha256 for record, _ in pairs})
        self._reload()

    def _reload(self) -> None:
        """Forget the cached records and read the (rewritten) file again."""
        with self._mutex:
            self._records.clear()
            self._offset, self._line_no = 0, 1
            self._file_id = (0, 0)
        self.refresh()
