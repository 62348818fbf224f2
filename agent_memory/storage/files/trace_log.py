"""A :class:`~agent_memory.storage.contracts.Log` on one of AutoByteus' trace files (issue 39, plan
step a2): the file backend's log ``traces.<kind>`` is the JSONL file AutoByteus reads
(``raw_traces.jsonl``, ``raw_traces_archive.jsonl``, ``episodic.jsonl``, ``semantic.jsonl``;
github.com/AutoByteus/autobyteus, ``autobyteus/memory/``), so its on-disk form stays as it is.

A record is one line, the trace record's JSON, keyed by its ``"id"``. AutoByteus' own raw traces
may repeat an id across turns (millisecond ids): a line whose id an earlier line holds with
another turn or seq is keyed ``<id>#<turn_id>/<seq>``. A put of new keys is a locked, fsynced
append; anything else (a put that replaces a record, a delete, ``replace_all``) is an atomic
rewrite of the file under its lock (never a tombstone line: AutoByteus must parse every line), so
a reader of the log then gets it whole once (``reset``). There are no blobs. Damaged lines are
quarantined as :class:`~agent_memory.storage.files.jsonl.JsonlFile` does.

The token is the file's read position (device, inode, offset, line and the fingerprint of the
bytes before the offset): equal tokens mean the same file with the same bytes up to its end.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from agent_memory.errors import ConflictError, StoreError
from agent_memory.fileio import atomic_write_bytes
from agent_memory.models.items import STORED_CONTEXT
from agent_memory.models.traces import EPISODIC_ADAPTER, RAW_TRACE_ADAPTER, SEMANTIC_ADAPTER
from agent_memory.storage.contracts import ChangeToken, LogChange, LogRead
from agent_memory.storage.files.jsonl import JsonlFile, JsonlPosition, QuarantineReport
from agent_memory.storage.traces import trace_key

__all__ = ["TRACE_LOGS", "FileTraceLog"]

TRACE_LOGS: dict[str, tuple[str, TypeAdapter[Any]]] = {
    "traces.raw": ("raw_traces.jsonl", RAW_TRACE_ADAPTER),
    "traces.archive": ("raw_traces_archive.jsonl", RAW_TRACE_ADAPTER),
    "traces.episodic": ("episodic.jsonl", EPISODIC_ADAPTER),
    "traces.semantic": ("semantic.jsonl", SEMANTIC_ADAPTER),
}
"""The file of each trace log in the agent directory, and its record type (AutoByteus' file store
layout, github.com/AutoByteus/autobyteus, autobyteus/memory/)."""


class _LineCodec:
    """A line of the file as its bytes, checked by the kind's adapter (a line the library cannot
    read is damage, quarantined)."""

    def __init__(self, adapter: TypeAdapter[Any]) -> None:
        self.adapter = adapter

    def validate_json(self, data: bytes, /, *, context: dict[str, Any] | None = None) -> bytes:
        self.adapter.validate_json(data, context=context)
        return data.rstrip(b"\r\n")

    def dump_json(self, instance: bytes, /) -> bytes:
        return instance


def _token(position: JsonlPosition) -> ChangeToken:
    dev, ino = position.file_id
    return f"{dev}.{ino}.{position.offset}.{position.line_no}.{position.fingerprint}"


class FileTraceLog:
    """:class:`~agent_memory.storage.contracts.Log` on one trace file.

    Args:
        path: the JSONL file (created, with its directory, on the first write).
        adapter: the record type of the file's kind (``RAW_TRACE_ADAPTER``, ...): a line it does
            not read is quarantined.
        fsync: fsync every append. Default ``True``.
        move_corrupt: move damaged lines to ``<file>.corrupt`` (``False``: only skip them, a
            reader that must never write).
        on_quarantine: told of each damaged line and where it went.
    """

    def __init__(self, path: Path, adapter: TypeAdapter[Any], *, fsync: bool = True, move_corrupt: bool = True,
                 on_quarantine: QuarantineReport | None = None) -> None:
        self.jsonl: JsonlFile[bytes] = JsonlFile(path, _LineCodec(adapter), fsync=fsync, context=STORED_CONTEXT)
        self.move_corrupt = move_corrupt
        self.on_quarantine = on_quarantine
        self._held: dict[str, bytes] = {}
        self._position: JsonlPosition | None = None
        self._mutex = threading.RLock()

    def _refresh(self) -> tuple[list[tuple[str, bytes]], bool]:
        """Read what was appended since this object's position (the whole file when it was
        replaced) into :attr:`_held`; returns the ``(key, record)`` pairs read and whether it
        started over. Called under ``_mutex``."""
        found = self.jsonl.read_since(self._position, on_quarantine=self.on_quarantine,
                                      move_corrupt=self.move_corrupt)
        if found.reset:
            self._held = {}
        pairs: list[tuple[str, bytes]] = []
        for line in found.records:
            try:
                key = trace_key(json.loads(line), self._held)
            except ValueError as exc:  # the adapter read it: not reached unless the file changed under us
                raise StoreError(f"{self.jsonl.path}: a line is not JSON: {exc}") from exc
            self._held[key] = line
            pairs.append((key, line))
        self._position = found.position
        return pairs, found.reset

    def read(self, since: ChangeToken | None = None) -> LogRead:
        with self._mutex:
            continued = since is not None and self._position is not None and since == _token(self._position)
            held_nothing = not self._held
            pairs, reset = self._refresh()
            assert self._position is not None
            if (reset and not held_nothing) or not continued:  # a file made since an empty read: only additions
                return LogRead(list(self._held.items()), _token(self._position), True)
            latest = dict(pairs)  # a key read twice: its last line, in the order of its first
            return LogRead(list(latest.items()), _token(self._position), False)

    def write(self, change: LogChange, *, expect: ChangeToken | None = None) -> ChangeToken:
        with self._mutex, self.jsonl.locked():
            self._refresh()
            assert self._position is not None
            if expect is not None and expect != _token(self._position):
                raise ConflictError(f"{self.jsonl.path} changed since it was read: read it again")
            if any(entry.blob is not None for entry in change.put):
                raise StoreError(f"{self.jsonl.path}: a trace log keeps no blobs")
            puts = {entry.id: entry.record for entry in change.put}
            if change.replace_all:
                records = puts
            elif change.delete or any(key in self._held for key in puts):
                records = {key: record for key, record in self._held.items() if key not in set(change.delete)}
                records.update(puts)  # a held key keeps its place, a new one goes last
            else:
                self.jsonl.append(list(puts.values()))
                self._refresh()
                return _token(self._position)
            atomic_write_bytes(self.jsonl.path, b"".join(record + b"\n" for record in records.values()))
            self._refresh()
            return _token(self._position)

    def blob(self, digest: str) -> bytes:
        raise StoreError(f"{self.jsonl.path}: a trace log keeps no blobs (asked for {digest[:12]})")
