"""The file backend's item log: ``items.jsonl`` (one line per change) and ``content/<sha256>``.

A keyed, append-mostly log. Every change but ``replace_all`` is an append under the file's
inter-process lock (whole lines in one ``write``, then fsync): a record put for a new id, a record
put for an id the file holds (it replaces the earlier one in its place), and a *tombstone* for a
deleted id, the line ``{"id": "<memory id>", "$deleted": true}`` (:data:`TOMBSTONE_KEY`). So a
forget writes one short line and an incremental reader reads only that line, whatever the size of
the log (``LogRead.deleted``). A reader folds the lines in order: the last record of an id wins
in the place of the first, a tombstone removes the id (a later record of it comes back last).

Replaced records and tombstones are *dead lines*. Once they make up more than half of the file
(and at least :data:`COMPACT_MIN_DEAD_LINES`), the write that made them compacts the file: an
atomic rewrite (temporary file, fsync, rename) with only the live records, in their order; every
reader then reads the new file whole once (``reset``). ``replace_all`` is such a rewrite too. A
reader or a crash sees the old file or the new one. Until the compaction, a forgotten item's record
line (its metadata; never its content, whose blob is deleted with the forget) stays in the file
behind its tombstone.

Blobs are written (atomically) before the records that name them and deleted after the change
that drops the last record naming them: a crash leaves an unreferenced blob at worst, never a
record without its content. A crash after an append loses nothing it acknowledged (the tombstone
is synced before the forget returns, so a forgotten item never comes back); a crash mid-append
leaves a torn last line, which readers skip and the next append moves away. See
:mod:`agent_memory.storage.files.jsonl` for torn lines and the quarantine of damaged ones. (A version of
agent-memory before tombstones reads a tombstone as a record it cannot read under the forgotten id:
the item stays unreadable there, it does not come back.)

The token of a read is ``<device>:<inode>:<offset>:<line>:<fingerprint>``, the
:class:`~agent_memory.storage.files.jsonl.JsonlPosition` of :meth:`JsonlFile.read_since
<agent_memory.storage.files.jsonl.JsonlFile.read_since>`: a rewrite makes a new file (a new inode, or a
reused inode with other bytes before the offset, which the fingerprint tells), so a reader holding
an older file's token gets the whole new file (``reset``); an append moves the offset, so it gets
only the new lines. A token of another form (an older version's four fields) reads the whole file.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from pydantic_core import PydanticCustomError, ValidationError

from agent_memory.errors import ConflictError
from agent_memory.ids import validate_memory_id
from agent_memory.storage.contracts import ChangeToken, LogChange, LogRead
from agent_memory.storage.files.content import ContentStore
from agent_memory.storage.files.jsonl import JsonlFile, JsonlPosition, QuarantineReport

__all__ = ["COMPACT_MIN_DEAD_LINES", "ITEMS_FILE", "TOMBSTONE_KEY", "FileItemLog"]

ITEMS_FILE = "items.jsonl"
"""The records' file, in the agent directory."""

CONTENT_DIR = "content"
"""The blobs' directory, in the agent directory."""

TOMBSTONE_KEY = "$deleted"
"""The key that makes a line a tombstone: exactly ``{"id": <memory id>, "$deleted": true}`` (an
item record always has more keys, so no record reads as one)."""

COMPACT_MIN_DEAD_LINES = 1024
"""Fewest dead lines (replaced records and tombstones) that make a write compact the file, when
they are also more than half of its lines: a small file is not rewritten for a few forgets, and a
large one at most once per as many dead lines as it has live records (so a forget costs O(1)
amortised; the rewrite's cost is spread over the changes that made it necessary)."""

_DIGEST = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


class _Line:
    """A line of ``items.jsonl`` as the log sees it: a JSON object with a well-formed memory id, a
    record or (``deleted``) a tombstone."""

    __slots__ = ("data", "deleted", "id")

    def __init__(self, item_id: str, data: bytes, deleted: bool = False) -> None:
        self.id = item_id
        self.data = data
        self.deleted = deleted


def _tombstone(item_id: str) -> _Line:
    return _Line(item_id, json.dumps({"id": item_id, TOMBSTONE_KEY: True}, separators=(",", ":")).encode(), True)


class _LineCodec:
    """Reads a line as a :class:`_Line` (anything else is damage, quarantined) and writes its bytes
    back. ``memory_ids``: a key must be a memory id (the log ``items``); else any non-empty text."""

    def __init__(self, memory_ids: bool = True) -> None:
        self.memory_ids = memory_ids

    def validate_json(self, data: bytes, /, *, context: dict[str, Any] | None = None) -> _Line:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise _invalid(f"not JSON: {exc}") from None
        item_id = value.get("id") if isinstance(value, dict) else None
        try:
            if not isinstance(item_id, str) or not item_id or (self.memory_ids and validate_memory_id(item_id) != item_id):
                raise ValueError(item_id)
        except ValueError:
            raise _invalid("not a record with a memory id") from None
        deleted = len(value) == 2 and value.get(TOMBSTONE_KEY) is True
        return _Line(item_id, data.rstrip(b"\r\n"), deleted)

    def dump_json(self, instance: _Line, /) -> bytes:
        return instance.data


def _invalid(reason: str) -> ValidationError:
    return ValidationError.from_exception_data("item record", [
        {"type": PydanticCustomError("record", reason), "loc": (), "input": None}])


def _fold(lines: list[_Line]) -> tuple[dict[str, bytes], dict[str, None]]:
    """The net effect of ``lines``, in order: each id's last record (in the place of its first
    record since it was last deleted), and the ids a tombstone deleted (an ordered set)."""
    live: dict[str, bytes] = {}
    deleted: dict[str, None] = {}
    for line in lines:
        if line.deleted:
            live.pop(line.id, None)
            deleted[line.id] = None
        else:
            live[line.id] = line.data
    return live, deleted


class FileItemLog:
    """:class:`~agent_memory.storage.contracts.Log` on ``<agent_dir>/items.jsonl`` and
    ``<agent_dir>/content/`` (see the module docstring).

    Args:
        agent_dir: the agent's directory (created on first write).
        on_quarantine: called with each damaged line moved to ``items.jsonl.corrupt`` (or only
            skipped, ``None`` as the second argument, when the file cannot be rewritten).
        move_corrupt: whether a read moves damaged lines out of the file (``False``: a reader that
            never writes only skips them).
        memory_ids: keys are memory ids (the log ``items``; a line under another key is damage);
            ``False``: any non-empty text (the other logs).

    A write knows which ids the file holds, and how many of its lines are dead, from its own
    incremental read of the file (only the lines appended since its last write are read), so a
    write reads and writes only what the change holds (a compaction excepted).
    """

    def __init__(self, agent_dir: Path, on_quarantine: QuarantineReport | None = None, *,
                 move_corrupt: bool = True, memory_ids: bool = True) -> None:
        self.agent_dir = agent_dir
        self.move_corrupt = move_corrupt
        self.jsonl: JsonlFile[_Line] = JsonlFile(agent_dir / ITEMS_FILE, _LineCodec(memory_ids))
        self.content = ContentStore(agent_dir / CONTENT_DIR)
        self.on_quarantine = on_quarantine
        self._mutex = threading.Lock()
        self._ids: set[str] = set()
        self._lines = 0
        """Lines (records and tombstones) of the file as of ``_token``."""
        self._token: ChangeToken | None = None

    def __repr__(self) -> str:
        return f"FileItemLog({str(self.jsonl.path)!r})"

    # -- reading -------------------------------------------------------------------------------
    def read(self, since: ChangeToken | None = None) -> LogRead:
        return self._read(since)[0]

    def _read(self, since: ChangeToken | None) -> tuple[LogRead, int]:
        """The read, and how many lines it went through."""
        found = self.jsonl.read_since(_parse_token(since), on_quarantine=self.on_quarantine,
                                      move_corrupt=self.move_corrupt)
        live, deleted = _fold(found.records)
        return LogRead(list(live.items()), _token(found.position), found.reset,
                       () if found.reset else list(deleted)), len(found.records)

    def blob(self, digest: str) -> bytes:
        return self.content.get(digest)

    # -- writing -------------------------------------------------------------------------------
    def _held_ids(self) -> tuple[set[str], ChangeToken]:
        """The ids the file holds and its token, read incrementally (called under the file lock)."""
        with self._mutex:
            found, lines = self._read(self._token)
            if found.reset:
                self._ids = set()
                self._lines = 0
            self._ids.difference_update(found.deleted)
            self._ids.update(item_id for item_id, _ in found.records)
            self._lines += lines
            self._token = found.token
            return self._ids, found.token

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        with self.jsonl.locked():
            held, current = self._held_ids()
            if expect is not None and expect != current:
                raise ConflictError(f"{self.jsonl.path} changed since it was read")
            for entry in change.put:
                if entry.blob is not None:
                    self.content.put(entry.blob)
            if change.replace_all:
                kept = [_Line(entry.id, entry.record) for entry in change.put]
                self.jsonl.rewrite(kept)
                # also blobs a crash left without a record
                self.content.remove_unreferenced({d.decode() for line in kept for d in _DIGEST.findall(line.data)})
            else:
                gone = [item_id for item_id in dict.fromkeys(change.delete) if item_id in held]
                self.jsonl.append([*map(_tombstone, gone), *(_Line(entry.id, entry.record) for entry in change.put)])
            for digest in change.release:
                self.content.remove(digest)
            token = self._held_ids()[1]
            if self._needs_compaction():
                self._compact()
                token = self._held_ids()[1]
            return token

    def _needs_compaction(self) -> bool:
        """Whether dead lines are more than half of the file, and at least
        :data:`COMPACT_MIN_DEAD_LINES`."""
        with self._mutex:
            dead = self._lines - len(self._ids)
            return dead >= COMPACT_MIN_DEAD_LINES and 2 * dead > self._lines

    def _compact(self) -> None:
        """Rewrite the file atomically with only its live records, in their order (under the
        file lock; a damaged line was quarantined by the read just before)."""
        live, _ = _fold(self.jsonl.read_from(0, skip_corrupt=True).records)
        self.jsonl.rewrite(_Line(item_id, data) for item_id, data in live.items())


def _token(position: JsonlPosition) -> ChangeToken:
    device, inode = position.file_id
    return f"{device}:{inode}:{position.offset}:{position.line_no}:{position.fingerprint}"


def _parse_token(token: ChangeToken | None) -> JsonlPosition | None:
    """The position a token names; ``None`` (read the whole file) for no token or one of another
    form (an older version's ``<device>:<inode>:<offset>:<line>``, which cannot tell a reused inode)."""
    if not token:
        return None
    parts = token.split(":")
    if len(parts) != 5:
        return None
    try:
        device, inode, offset, line_no = (int(part) for part in parts[:4])
    except ValueError:
        return None
    if offset < 0 or line_no < 1:
        return None
    return JsonlPosition((device, inode), offset, line_no, parts[4])
