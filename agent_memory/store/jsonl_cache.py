"""Incremental reading of a JSONL file: the records of a file are cached, and only the bytes past
the last read are parsed while the file is the same one (used by the trace store for its four
files)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from agent_memory.errors import StoreError
from agent_memory.store.jsonl import CorruptLine, JsonlFile

__all__ = ["CachedJsonl"]

T = TypeVar("T")

_FINGERPRINT_BYTES = 64
"""Bytes before the read offset remembered to recognise the same file (an atomic rewrite can get
the inode number of a file it replaced before, so the inode alone does not tell)."""


class CachedJsonl(Generic[T]):
    """The records of one JSONL file, read incrementally: only bytes past the last read are parsed
    while the file is the same one (same inode, same bytes just before the offset). ``T`` is the
    record type of ``jsonl``."""

    def __init__(self, jsonl: JsonlFile[T], on_quarantine: Callable[[CorruptLine, Path | None], None] | None) -> None:
        self.jsonl = jsonl
        self._on_quarantine = on_quarantine
        self._mutex = threading.Lock()
        self.invalidate()

    def invalidate(self) -> None:
        """Forget the cache: the next read starts from the beginning of the file."""
        self._records: list[T] = []
        self._offset, self._line_no = 0, 1
        self._file_id: tuple[int, int] = (0, 0)
        self._fingerprint = b""

    def records(self) -> list[T]:
        """Every record, in file order (quarantining corrupt lines first).

        Raises:
            StoreError: if the file cannot be read.
        """
        with self._mutex:
            for _ in range(3):  # a quarantine rewrites the file: read the new one
                if not self._same_file():
                    self.invalidate()
                tail = self.jsonl.read_from(self._offset, line_no=self._line_no, skip_corrupt=True)
                if tail.file_id not in ((0, 0), self._file_id) and self._offset:
                    self.invalidate()  # replaced between the check and the read
                    tail = self.jsonl.read_from(0, skip_corrupt=True)
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
            self._records.extend(tail.records)
            self._offset, self._line_no, self._file_id = tail.next_offset, tail.next_line_no, tail.file_id
            self._fingerprint = self._bytes_before(self._offset)
            return list(self._records)

    def _bytes_before(self, offset: int) -> bytes:
        if offset == 0:
            return b""
        start = max(0, offset - _FINGERPRINT_BYTES)
        try:
            with open(self.jsonl.path, "rb") as handle:
                handle.seek(start)
                return handle.read(offset - start)
        except FileNotFoundError:
            return b""
        except OSError as exc:
            raise StoreError(f"cannot read {self.jsonl.path}: {exc}") from exc

    def _same_file(self) -> bool:
        if self._offset == 0:
            return True
        return self.jsonl.file_id() == self._file_id and self._bytes_before(self._offset) == self._fingerprint

    def _report(self, line: CorruptLine, where: Path | None) -> None:
        if self._on_quarantine is not None:
            self._on_quarantine(line, where)
