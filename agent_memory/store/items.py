"""The item store: ``items.jsonl`` (one :class:`ItemRecord` per line) + content blobs.

This is the source of truth of an agent's memory; the vector index is derived from it and can be
rebuilt at any time. Records are cached in the process and refreshed incrementally from the file,
so items another process appended are seen on the next read without re-reading the whole file.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from agent_memory.errors import ItemNotFoundError
from agent_memory.models.items import ItemRecord, MemoryItem, content_from_bytes
from agent_memory.store.content import ContentStore
from agent_memory.store.jsonl import JsonlFile

__all__ = ["ItemStore"]

_RECORD_ADAPTER: TypeAdapter[ItemRecord] = TypeAdapter(ItemRecord)


class ItemStore:
    """Item records and their content for one agent directory.

    Args:
        agent_dir: ``memory/agents/<agent_id>``; ``items.jsonl`` and ``content/`` live in it.
    """

    def __init__(self, agent_dir: Path) -> None:
        self.agent_dir = agent_dir
        self.jsonl = JsonlFile(agent_dir / "items.jsonl", _RECORD_ADAPTER)
        self.content = ContentStore(agent_dir / "content")
        self._records: dict[str, ItemRecord] = {}
        self._offset = 0
        self._file_id: tuple[int, int] = (0, 0)
        self._mutex = threading.RLock()

    # -- reading ---------------------------------------------------------------------------
    def refresh(self) -> None:
        """Pick up records appended (or a rewrite made) by any process since the last read."""
        with self._mutex:
            file_id = self.jsonl.file_id()
            if file_id != self._file_id:
                self._records.clear()
                self._offset = 0
            tail = self.jsonl.read_from(self._offset)
            if tail.file_id != (0, 0) and tail.file_id != file_id:
                # Rewritten between stat and read: start over from the new file.
                self._records.clear()
                tail = self.jsonl.read_from(0)
            for record in tail.records:
                self._records[record.id] = record
            self._offset = tail.next_offset
            self._file_id = tail.file_id if tail.file_id != (0, 0) else file_id

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
        data = self.content.get(record.metadata.content_sha256)
        return content_from_bytes(data, record.metadata.content_encoding)

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
        with self._mutex:
            self._records.clear()
            self._offset = 0
            self._file_id = (0, 0)
        self.refresh()
