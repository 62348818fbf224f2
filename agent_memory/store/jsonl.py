"""Append-only JSONL files that survive crashes and concurrent writers.

Rules (DESIGN.md, Storage):

- An append takes an inter-process lock (``<file>.lock``, filelock), writes whole lines in one
  ``write`` call and fsyncs before it returns, so two processes appending at once lose nothing.
- A process killed mid-append can leave a *torn* last line (no newline, or not JSON). Readers skip
  it; the next appender moves it to ``<file>.torn`` (kept for audit, never silently deleted) and
  truncates it before writing, so the file always parses line by line.
- Pruning or clearing is an atomic rewrite: write a temporary file, fsync, rename over the old
  one, fsync the directory. Readers see the old file or the new one, never a mix.
- Files are UTF-8; one pydantic ``TypeAdapter`` reads and writes each file's records.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Generic, TypeVar

from filelock import FileLock
from pydantic import TypeAdapter, ValidationError

from agent_memory.errors import CorruptRecordError, StoreError

__all__ = ["JsonlFile", "JsonlTail", "atomic_write_bytes", "fsync_dir"]

T = TypeVar("T")

LOCK_TIMEOUT_S = 60.0
"""Longest wait for another process's lock before :class:`StoreError`, in seconds."""


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it survives a power loss (no-op on Windows)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: temporary file, fsync, rename, fsync of the directory.

    Raises:
        StoreError: if writing fails; ``path`` then still holds its previous content (if any).
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write {path}: {exc}") from exc


@dataclass(frozen=True)
class JsonlTail(Generic[T]):
    """Records read from a byte offset on, and where the next read should start."""

    records: list[T]
    """Complete records, in file order."""
    next_offset: int
    """Byte offset just past the last complete line that was read."""
    file_id: tuple[int, int]
    """(device, inode) of the file that was read; changes when the file is atomically rewritten."""


class JsonlFile(Generic[T]):
    """One JSONL file of records of one type.

    Args:
        path: the file; its directory is created on first write.
        adapter: reads and writes one record (``TypeAdapter(MyModel)``).
        fsync: fsync after every append (durable against power loss; ~1 ms). Default ``True``.
    """

    def __init__(self, path: Path, adapter: TypeAdapter[T], *, fsync: bool = True) -> None:
        self.path = path
        self.adapter = adapter
        self.fsync = fsync
        self._lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's inter-process lock (re-entrant within a process).

        Raises:
            StoreError: if another process holds it longer than ``LOCK_TIMEOUT_S``.
        """
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            with self._lock:
                yield
        except TimeoutError as exc:  # filelock.Timeout subclasses TimeoutError
            raise StoreError(f"timed out waiting for the lock on {self.path}") from exc

    def _dump(self, record: T) -> bytes:
        return self.adapter.dump_json(record) + b"\n"

    def append(self, records: Iterable[T]) -> None:
        """Append records as whole lines, under the lock, in one write.

        Raises:
            StoreError: if the write fails; earlier lines are untouched.
        """
        payload = b"".join(self._dump(record) for record in records)
        if not payload:
            return
        with self.locked():
            try:
                with open(self.path, "a+b") as handle:
                    self._repair_torn_tail(handle)
                    handle.write(payload)
                    handle.flush()
                    if self.fsync:
                        os.fsync(handle.fileno())
            except OSError as exc:
                raise StoreError(f"cannot append to {self.path}: {exc}") from exc

    def _repair_torn_tail(self, handle) -> None:  # noqa: ANN001 - binary file object
        """If the file does not end with a newline, move its last partial line to ``.torn``."""
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return
        handle.seek(size - 1)
        if handle.read(1) == b"\n":
            return
        # Find the start of the torn line (just after the last newline).
        block = 1 << 16
        pos = size
        start = 0
        while pos > 0:
            step = min(block, pos)
            pos -= step
            handle.seek(pos)
            chunk = handle.read(step)
            idx = chunk.rfind(b"\n")
            if idx >= 0:
                start = pos + idx + 1
                break
        handle.seek(start)
        fragment = handle.read()
        with open(str(self.path) + ".torn", "ab") as torn:
            torn.write(fragment + b"\n")
            torn.flush()
            os.fsync(torn.fileno())
        handle.truncate(start)
        handle.seek(0, os.SEEK_END)

    def read_from(self, offset: int = 0) -> JsonlTail[T]:
        """Read complete records from byte ``offset`` on (0: the whole file).

        A torn last line (no newline yet, or a partial write) is skipped and not consumed.

        Raises:
            CorruptRecordError: if a complete line in the middle does not parse.
            StoreError: if the file cannot be read.
        """
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                handle.seek(offset)
                data = handle.read()
        except FileNotFoundError:
            return JsonlTail([], 0, (0, 0))
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        records: list[T] = []
        consumed = 0
        line_no = 0
        for raw in data.splitlines(keepends=True):
            line_no += 1
            if not raw.endswith(b"\n"):
                break  # torn or still being written: not a record yet
            consumed += len(raw)
            if not raw.strip():
                continue
            try:
                records.append(self.adapter.validate_json(raw))
            except ValidationError as exc:
                raise CorruptRecordError(
                    f"{self.path}: line at byte {offset + consumed - len(raw)} is not a valid record: {exc}",
                    path=str(self.path),
                    line_no=line_no,
                ) from exc
        return JsonlTail(records, offset + consumed, (stat.st_dev, stat.st_ino))

    def read_all(self) -> list[T]:
        """Every complete record, in file order."""
        return self.read_from(0).records

    def rewrite(self, records: Iterable[T]) -> None:
        """Replace the whole file atomically by ``records`` (under the lock).

        Raises:
            StoreError: if writing fails; the old file is then intact.
        """
        payload = b"".join(self._dump(record) for record in records)
        with self.locked():
            atomic_write_bytes(self.path, payload)

    def file_id(self) -> tuple[int, int]:
        """(device, inode) of the file now, or ``(0, 0)`` if it does not exist."""
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return (0, 0)
        return (stat.st_dev, stat.st_ino)

