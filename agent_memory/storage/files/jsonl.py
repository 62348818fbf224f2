"""Append-only JSONL files that survive crashes and concurrent writers.

Rules:

- An append takes an inter-process lock (``<file>.lock``, filelock), writes whole lines in one
  ``write`` call and fsyncs before it returns, so two processes appending at once lose nothing.
- A process killed mid-append can leave a *torn* last line (no newline, or not JSON). Readers skip
  it; the next appender moves it to ``<file>.torn`` (kept for audit, never silently deleted) and
  truncates it before writing, so the file always parses line by line.
- Pruning or clearing is an atomic rewrite: write a temporary file, fsync, rename over the old
  one, fsync the directory. Readers see the old file or the new one, never a mix.
- A complete line in the middle that does not parse (a disk error, a hand edit, a foreign writer)
  is *quarantined*: :meth:`JsonlFile.quarantine` moves it, under the lock, to ``<file>.corrupt``
  (one JSON line per bad line: line number, byte offset, reason, the bytes as base64) and
  atomically rewrites the file without it, byte for byte otherwise. The main file then parses
  again for every process, and the bad bytes are kept for audit. If the rewrite fails (read-only
  disk), readers that ask for it (``skip_corrupt=True``) skip the line at read time instead.
- Readers read incrementally (:meth:`JsonlFile.read_since`): from where the last read stopped
  while the file is the same one, the whole file when it was replaced. "The same one" is the same
  (device, inode) *and* the same bytes just before the offset (a digest of them is part of the
  :class:`JsonlPosition`): an atomic rewrite can get the inode number of a file it replaced
  before, so the inode alone does not tell.
- Files are UTF-8; one pydantic ``TypeAdapter`` (or another :class:`RecordCodec`) reads and
  writes each file's records. A codec may turn a line it cannot fully read into a placeholder
  that writes back the same bytes (the item store does so for records of a newer version): such
  a line parses, so it is never quarantined, and rewrites keep it byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, Protocol, TypeVar

from filelock import FileLock
from pydantic import TypeAdapter, ValidationError

from agent_memory.errors import CorruptRecordError, LockTimeoutError, StoreError, validation_summary
from agent_memory.fileio import atomic_write_bytes

__all__ = ["CorruptLine", "JsonlFile", "JsonlPosition", "JsonlRead", "JsonlTail", "QuarantineReport", "RecordCodec"]

T = TypeVar("T")


class RecordCodec(Protocol[T]):
    """Reads and writes one record of a JSONL file (a pydantic ``TypeAdapter`` is one)."""

    def validate_json(self, data: bytes, /, *, context: dict[str, Any] | None = None) -> T:
        """The record a line holds (without its newline).

        Raises:
            pydantic.ValidationError: if the line is not a record (it is then quarantined).
        """
        ...

    def dump_json(self, instance: T, /) -> bytes:
        """The line of a record, without its newline."""
        ...

LOCK_TIMEOUT_S = 60.0
"""Longest wait for another process's lock before :class:`LockTimeoutError`, in seconds."""

FINGERPRINT_BYTES = 64
"""Bytes just before a read's offset whose digest :class:`JsonlPosition` keeps, to recognise the
same file (an atomic rewrite can get the inode number of a file it replaced before)."""

QUARANTINE_ROUNDS = 3
"""Reads :meth:`JsonlFile.read_since` makes at most when it finds damaged lines: each one that
finds some moves them out (:meth:`JsonlFile.quarantine`) and reads the repaired file again."""


@dataclass(frozen=True)
class CorruptLine:
    """A complete line of a JSONL file that does not parse as a record."""

    line_no: int
    """1-based line number in the file."""
    offset: int
    """Byte offset of the line's start in the file."""
    data: bytes
    """The line's bytes, without its newline."""
    reason: str
    """Why it does not parse (short; never the line's content)."""


@dataclass(frozen=True)
class JsonlTail(Generic[T]):
    """Records read from a byte offset on, and where the next read should start."""

    records: list[T]
    """Complete records, in file order."""
    next_offset: int
    """Byte offset just past the last complete line that was read."""
    file_id: tuple[int, int]
    """(device, inode) of the file that was read; changes when the file is atomically rewritten."""
    next_line_no: int = 1
    """1-based number of the line that starts at ``next_offset``."""
    corrupt: list[CorruptLine] = field(default_factory=list)
    """Complete lines that did not parse and were skipped (only with ``skip_corrupt=True``)."""


@dataclass(frozen=True)
class JsonlPosition:
    """Where an incremental read of a JSONL file stopped (:meth:`JsonlFile.read_since`)."""

    file_id: tuple[int, int]
    """(device, inode) of the file that was read; ``(0, 0)``: it did not exist."""
    offset: int
    """Byte offset just past the last complete line that was read."""
    line_no: int
    """1-based number of the line that starts at ``offset``."""
    fingerprint: str
    """Hex digest of the (up to :data:`FINGERPRINT_BYTES`) bytes just before ``offset``: a file
    with the same inode but other bytes there is another file."""


@dataclass(frozen=True)
class JsonlRead(Generic[T]):
    """What :meth:`JsonlFile.read_since` found."""

    records: list[T]
    """Complete records, in file order."""
    position: JsonlPosition
    """Where the next ``read_since`` should start."""
    reset: bool
    """``True``: ``records`` are the whole file (drop what you held: the file was replaced, or
    no position was given); ``False``: only the records after the position given."""


QuarantineReport = Callable[[CorruptLine, "Path | None"], None]
"""Told of each damaged line :meth:`JsonlFile.read_since` took out of the way: the line and the
file its bytes went to (``<file>.corrupt``), or ``None`` when the file cannot be rewritten (a
read-only disk) and the line is only skipped."""


class JsonlFile(Generic[T]):
    """One JSONL file of records of one type.

    Args:
        path: the file; its directory is created on first write.
        adapter: reads and writes one record (``TypeAdapter(MyModel)``, or any :class:`RecordCodec`).
        fsync: fsync after every append (durable against power loss; ~1 ms). Default ``True``.
        context: pydantic validation context used when reading records; ``None``: none.
    """

    def __init__(
        self,
        path: Path,
        adapter: TypeAdapter[T] | RecordCodec[T],
        *,
        fsync: bool = True,
        context: dict[str, Any] | None = None,
    ) -> None:
        self.path = path
        self.adapter = adapter
        self.fsync = fsync
        self.context = context
        self._lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)

    @contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the file's inter-process lock (re-entrant within a process).

        Raises:
            LockTimeoutError: if another process holds it longer than ``LOCK_TIMEOUT_S``.
            StoreError: if the directory cannot be created.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(f"cannot create {self.path.parent}: {exc}") from exc
        try:
            self._lock.acquire()
        except TimeoutError as exc:  # filelock.Timeout subclasses TimeoutError
            raise LockTimeoutError(f"timed out after {LOCK_TIMEOUT_S:g} s waiting for the lock on {self.path}") from exc
        except OSError as exc:
            raise StoreError(f"cannot lock {self.path}: {exc}") from exc
        try:
            yield
        finally:
            self._lock.release()

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

    def _parse(self, raw: bytes) -> T:
        return self.adapter.validate_json(raw, context=self.context)

    def read_from(self, offset: int = 0, *, line_no: int = 1, skip_corrupt: bool = False) -> JsonlTail[T]:
        """Read complete records from byte ``offset`` on (0: the whole file).

        A torn last line (no newline yet, or a partial write) is skipped and not consumed.

        Args:
            offset: byte offset of a line start.
            line_no: 1-based number of the line at ``offset`` (for error reports).
            skip_corrupt: ``True``: a complete line that does not parse is skipped and listed in
                ``JsonlTail.corrupt``; ``False``: it raises.

        Raises:
            CorruptRecordError: if a complete line does not parse (unless ``skip_corrupt``).
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
        return self._scan(data, offset, line_no, (stat.st_dev, stat.st_ino), skip_corrupt=skip_corrupt)

    def _scan(
        self, data: bytes, offset: int, line_no: int, file_id: tuple[int, int], *, skip_corrupt: bool
    ) -> JsonlTail[T]:
        """The records of ``data``, the bytes of the file ``file_id`` from ``offset`` (the start
        of line ``line_no``) to its end."""
        records: list[T] = []
        corrupt: list[CorruptLine] = []
        consumed = 0
        line_no -= 1
        for raw in _lines(data):
            if not raw.endswith(b"\n"):
                break  # torn or still being written: not a record yet
            line_no += 1
            consumed += len(raw)
            if not raw.strip():
                continue
            try:
                records.append(self._parse(raw))
            except ValidationError as exc:
                bad = CorruptLine(line_no, offset + consumed - len(raw), raw[:-1], validation_summary(exc))
                if not skip_corrupt:
                    raise CorruptRecordError(
                        f"{self.path}: line {line_no} (byte {bad.offset}) is not a valid record: {bad.reason}",
                        path=str(self.path),
                        line_no=line_no,
                    ) from exc
                corrupt.append(bad)
        return JsonlTail(records, offset + consumed, file_id, line_no + 1, corrupt)

    def read_since(
        self, since: JsonlPosition | None = None, *, on_quarantine: QuarantineReport | None = None,
        move_corrupt: bool = True,
    ) -> JsonlRead[T]:
        """The records added after ``since`` (``None``: every record), read incrementally: only
        the bytes past ``since`` are read while the file is the same one (same device and inode,
        same bytes just before the offset); a file replaced meanwhile (an atomic rewrite, a
        quarantine) is read whole, with ``reset=True``.

        A complete line that does not parse is quarantined (:meth:`quarantine`) and reported to
        ``on_quarantine``, and the repaired file read again (at most :data:`QUARANTINE_ROUNDS`
        reads); when the file cannot be rewritten (a read-only disk), or with ``move_corrupt=False``
        (a reader that must never write), such lines are only skipped (reported with ``None``). A
        torn last line is skipped and not consumed.

        Raises:
            StoreError: if the file cannot be read.
        """
        position = since
        for _ in range(QUARANTINE_ROUNDS):
            tail, fingerprint, continued = self._tail(position)
            if not tail.corrupt or not self._move_corrupt(tail.corrupt, on_quarantine, move=move_corrupt):
                break
            position = None  # the file was rewritten without them: read the new one whole
        return JsonlRead(
            tail.records, JsonlPosition(tail.file_id, tail.next_offset, tail.next_line_no, fingerprint), not continued
        )

    def _tail(self, since: JsonlPosition | None) -> tuple[JsonlTail[T], str, bool]:
        """The records past ``since`` if the file is still the one ``since`` was read from, else
        every record; with the fingerprint of the new offset and whether it continued ``since``.
        The file is opened once, so a rename in between cannot mix two files."""
        try:
            with open(self.path, "rb") as handle:
                stat = os.fstat(handle.fileno())
                file_id = (stat.st_dev, stat.st_ino)
                before = b""
                continued = False
                if since is not None and since.file_id == file_id and since.offset <= stat.st_size:
                    start = max(0, since.offset - FINGERPRINT_BYTES)
                    handle.seek(start)
                    before = handle.read(since.offset - start)
                    continued = _digest(before) == since.fingerprint
                if not continued:
                    before = b""
                    handle.seek(0)
                data = handle.read()
        except FileNotFoundError:
            missing = since is not None and since.file_id == (0, 0)
            return JsonlTail([], 0, (0, 0)), _digest(b""), missing
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        offset, line_no = (since.offset, since.line_no) if since is not None and continued else (0, 1)
        tail = self._scan(data, offset, line_no, file_id, skip_corrupt=True)
        consumed = tail.next_offset - offset
        return tail, _digest((before + data[:consumed])[-FINGERPRINT_BYTES:]), continued

    def _move_corrupt(self, seen: list[CorruptLine], report: QuarantineReport | None, *, move: bool) -> bool:
        """Quarantine the damaged lines a read found, reporting each; ``False`` when they are not
        to be moved (``move``) or the file cannot be rewritten (a read-only disk): they are then
        reported as only skipped."""
        moved: list[CorruptLine] | None = None
        if move:
            try:
                moved = self.quarantine()
            except StoreError:
                moved = None
        if report is not None:
            for line in seen if moved is None else moved:
                report(line, None if moved is None else self.corrupt_path)
        return moved is not None

    def read_all(self) -> list[T]:
        """Every complete record, in file order."""
        return self.read_from(0).records

    def quarantine(self) -> list[CorruptLine]:
        """Move every complete line that does not parse to ``<file>.corrupt`` and atomically
        rewrite the file without them; every other byte (and a torn last line) is kept as is.

        Runs under the lock and re-reads the whole file, so it is safe while other processes
        append or quarantine too (the second one finds nothing left to move). The ``.corrupt``
        file gets one JSON object per line: ``line_no``, ``offset``, ``reason``, ``quarantined_at``
        (UTC, ISO 8601) and ``data_base64`` (the exact bytes); it is written and fsynced before the
        rewrite, so a crash in between leaves the line in both files, never in neither.

        Returns:
            The lines moved, in file order (empty when there were none).

        Raises:
            StoreError: if a file cannot be read or written; the main file is then unchanged.
        """
        with self.locked():
            try:
                with open(self.path, "rb") as handle:
                    data = handle.read()
            except FileNotFoundError:
                return []
            except OSError as exc:
                raise StoreError(f"cannot read {self.path}: {exc}") from exc
            kept: list[bytes] = []
            moved: list[CorruptLine] = []
            offset = 0
            for line_no, raw in enumerate(_lines(data), start=1):
                if raw.endswith(b"\n") and raw.strip():
                    try:
                        self._parse(raw)
                    except ValidationError as exc:
                        moved.append(CorruptLine(line_no, offset, raw[:-1], validation_summary(exc)))
                        offset += len(raw)
                        continue
                kept.append(raw)
                offset += len(raw)
            if not moved:
                return []
            now = datetime.now(UTC).isoformat()
            entries = b"".join(
                json.dumps(
                    {
                        "line_no": line.line_no,
                        "offset": line.offset,
                        "reason": line.reason,
                        "quarantined_at": now,
                        "data_base64": base64.b64encode(line.data).decode("ascii"),
                    }
                ).encode("utf-8")
                + b"\n"
                for line in moved
            )
            try:
                with open(self.corrupt_path, "ab") as out:
                    out.write(entries)
                    out.flush()
                    os.fsync(out.fileno())
            except OSError as exc:
                raise StoreError(f"cannot write {self.corrupt_path}: {exc}") from exc
            atomic_write_bytes(self.path, b"".join(kept))
            return moved

    @property
    def corrupt_path(self) -> Path:
        """Where :meth:`quarantine` keeps the lines it moved: ``<file>.corrupt``."""
        return Path(str(self.path) + ".corrupt")

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


def _digest(data: bytes) -> str:
    """The fingerprint of the bytes before an offset (16 hex digits)."""
    return hashlib.blake2b(data, digest_size=8).hexdigest()


def _lines(data: bytes) -> list[bytes]:
    """``data`` split after each ``\\n`` only (``bytes.splitlines`` also splits at ``\\r``, which
    may occur inside a record as a raw byte of a damaged line)."""
    lines = data.split(b"\n")
    out = [line + b"\n" for line in lines[:-1]]
    if lines[-1]:
        out.append(lines[-1])
    return out
