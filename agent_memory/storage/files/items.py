"""The file backend's item log: ``items.jsonl`` (one record per line) and ``content/<sha256>``.

Appends take the file's inter-process lock, write whole lines in one ``write`` and fsync; every
other change is an atomic rewrite (temporary file, fsync, rename), so a reader or a crash sees the
old file or the new one. Blobs are written (atomically) before the records that name them and
deleted after the rewrite that drops the last record naming them: a crash leaves an unreferenced
blob at worst, never a record without its content. See :mod:`agent_memory.store.jsonl` for torn
lines and the quarantine of damaged ones.

The token of a read is ``<device>:<inode>:<offset>:<line>:<fingerprint>``, the
:class:`~agent_memory.store.jsonl.JsonlPosition` of :meth:`JsonlFile.read_since
<agent_memory.store.jsonl.JsonlFile.read_since>`: a rewrite makes a new file (a new inode, or a
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
from agent_memory.store.content import ContentStore
from agent_memory.store.jsonl import JsonlFile, JsonlPosition, QuarantineReport

__all__ = ["ITEMS_FILE", "FileItemLog"]

ITEMS_FILE = "items.jsonl"
"""The records' file, in the agent directory."""

CONTENT_DIR = "content"
"""The blobs' directory, in the agent directory."""

_DIGEST = re.compile(rb"(?<![0-9a-f])[0-9a-f]{64}(?![0-9a-f])")


class _Line:
    """A line of ``items.jsonl`` as the log sees it: a JSON object with a well-formed memory id."""

    __slots__ = ("data", "id")

    def __init__(self, item_id: str, data: bytes) -> None:
        self.id = item_id
        self.data = data


class _LineCodec:
    """Reads a line as a :class:`_Line` (anything else is damage, quarantined) and writes its bytes back."""

    def validate_json(self, data: bytes, /, *, context: dict[str, Any] | None = None) -> _Line:
        try:
            value = json.loads(data)
        except (ValueError, RecursionError) as exc:
            raise _invalid(f"not JSON: {exc}") from None
        item_id = value.get("id") if isinstance(value, dict) else None
        try:
            if not isinstance(item_id, str) or validate_memory_id(item_id) != item_id:
                raise ValueError(item_id)
        except ValueError:
            raise _invalid("not a record with a memory id") from None
        return _Line(item_id, data.rstrip(b"\r\n"))

    def dump_json(self, instance: _Line, /) -> bytes:
        return instance.data


def _invalid(reason: str) -> ValidationError:
    return ValidationError.from_exception_data("item record", [
        {"type": PydanticCustomError("record", reason), "loc": (), "input": None}])


class FileItemLog:
    """:class:`~agent_memory.storage.contracts.ItemLog` on ``<agent_dir>/items.jsonl`` and
    ``<agent_dir>/content/``.

    Args:
        agent_dir: the agent's directory (created on first write).
        on_quarantine: called with each damaged line moved to ``items.jsonl.corrupt`` (or only
            skipped, ``None`` as the second argument, when the file cannot be rewritten).
        move_corrupt: whether a read moves damaged lines out of the file (``False``: a reader that
            never writes only skips them).

    A write knows which ids the file holds from its own incremental read of the file (only the
    lines appended since its last write are read), so an append never reads the whole file.
    """

    def __init__(self, agent_dir: Path, on_quarantine: QuarantineReport | None = None, *,
                 move_corrupt: bool = True) -> None:
        self.agent_dir = agent_dir
        self.move_corrupt = move_corrupt
        self.jsonl: JsonlFile[_Line] = JsonlFile(agent_dir / ITEMS_FILE, _LineCodec())
        self.content = ContentStore(agent_dir / CONTENT_DIR)
        self.on_quarantine = on_quarantine
        self._mutex = threading.Lock()
        self._ids: set[str] = set()
        self._token: ChangeToken | None = None

    def __repr__(self) -> str:
        return f"FileItemLog({str(self.jsonl.path)!r})"

    # -- reading -------------------------------------------------------------------------------
    def read(self, since: ChangeToken | None = None) -> LogRead:
        found = self.jsonl.read_since(_parse_token(since), on_quarantine=self.on_quarantine,
                                      move_corrupt=self.move_corrupt)
        return LogRead([(line.id, line.data) for line in found.records], _token(found.position), found.reset)

    def blob(self, digest: str) -> bytes:
        return self.content.get(digest)

    # -- writing -------------------------------------------------------------------------------
    def _held_ids(self) -> tuple[set[str], ChangeToken]:
        """The ids the file holds and its token, read incrementally (called under the file lock)."""
        with self._mutex:
            found = self.read(self._token)
            if found.reset:
                self._ids = set()
            self._ids.update(item_id for item_id, _ in found.records)
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
            updates = {entry.id: entry for entry in change.put}
            if not change.replace_all and not change.delete and not (updates.keys() & held):
                self.jsonl.append(_Line(entry.id, entry.record) for entry in change.put)
            else:
                lines = [] if change.replace_all else self.jsonl.read_from(0, skip_corrupt=True).records
                gone = set() if change.replace_all else set(change.delete)
                kept = [_Line(line.id, updates.pop(line.id).record) if line.id in updates else line
                        for line in lines if line.id not in gone]
                kept += [_Line(entry.id, entry.record) for entry in change.put if entry.id in updates]
                self.jsonl.rewrite(kept)
                if change.replace_all:  # also blobs a crash left without a record
                    self.content.remove_unreferenced({d.decode() for line in kept for d in _DIGEST.findall(line.data)})
            for digest in change.release:
                self.content.remove(digest)
            return self._held_ids()[1]


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
