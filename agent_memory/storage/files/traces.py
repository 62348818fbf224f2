"""The file backend's traces: AutoByteus' four JSONL files in the agent directory (``TRACE_FILES``),
read and written with :class:`~agent_memory.storage.files.jsonl.JsonlFile` (locked, fsynced
appends, atomic rewrites, torn-line repair, quarantine of corrupt lines), so that AutoByteus' own
reader reads them (github.com/AutoByteus/autobyteus, ``autobyteus/memory/``)."""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Generic

from pydantic import TypeAdapter

from agent_memory.config import resolve_memory_dir
from agent_memory.ids import validate_agent_id
from agent_memory.models.items import STORED_CONTEXT
from agent_memory.models.traces import EPISODIC_ADAPTER, RAW_TRACE_ADAPTER, SEMANTIC_ADAPTER, EpisodicItem, RawTraceItem, SemanticItem
from agent_memory.storage.files.jsonl import JsonlFile, JsonlPosition, QuarantineReport
from agent_memory.storage.traces import R, RawKind, TraceKind, TraceRecord, TraceStore, typed_records

__all__ = ["TRACE_FILES", "FileTraceStore"]

TRACE_FILES: dict[TraceKind, str] = {
    "raw": "raw_traces.jsonl",
    "archive": "raw_traces_archive.jsonl",
    "episodic": "episodic.jsonl",
    "semantic": "semantic.jsonl",
}
"""File name of each kind in the agent directory (AutoByteus' file store layout,
github.com/AutoByteus/autobyteus, autobyteus/memory/)."""


class _CachedJsonl(Generic[R]):
    """The records of one JSONL file, kept in the process and refreshed by
    :meth:`JsonlFile.read_since` (only what was appended since the last read, the whole file when
    it was replaced)."""

    def __init__(self, jsonl: JsonlFile[R], on_quarantine: QuarantineReport | None) -> None:
        self.jsonl: JsonlFile[R] = jsonl
        self._on_quarantine = on_quarantine
        self._mutex = threading.Lock()
        self._records: list[R] = []
        self._position: JsonlPosition | None = None

    def invalidate(self) -> None:
        """Forget the cache: the next read starts from the beginning of the file."""
        with self._mutex:
            self._records, self._position = [], None

    def records(self) -> list[R]:
        """Every record, in file order (quarantining damaged lines first).

        Raises:
            StoreError: if the file cannot be read.
        """
        with self._mutex:
            found = self.jsonl.read_since(self._position, on_quarantine=self._on_quarantine)
            if found.reset:
                self._records = []
            self._records.extend(found.records)
            self._position = found.position
            return list(self._records)


class FileTraceStore(TraceStore):
    """The default store: four JSONL files in the agent directory (``TRACE_FILES``).

    Records are cached per file and refreshed incrementally, so lines another process appended
    are seen on the next read without re-reading the file, and a rewrite by another process
    (a new file) is read whole. A line that does not parse is quarantined to ``<file>.corrupt``
    (see :meth:`JsonlFile.quarantine`) and reported; the other lines stay readable.

    Args:
        agent_dir: ``memory/agents/<agent_id>``; created on first write.
        fsync: fsync every append (durable against power loss). Default ``True``.
        on_quarantine: called with each bad line and where its bytes went (the ``.corrupt``
            file, or ``None`` if moving it failed and it is only skipped); ``None``: not reported.
    """

    def __init__(
        self,
        agent_dir: str | os.PathLike[str],
        *,
        fsync: bool = True,
        on_quarantine: QuarantineReport | None = None,
    ) -> None:
        super().__init__()
        self.agent_dir = Path(agent_dir)

        def cached(kind: TraceKind, adapter: TypeAdapter[R]) -> _CachedJsonl[R]:
            jsonl = JsonlFile(self.agent_dir / TRACE_FILES[kind], adapter, fsync=fsync, context=STORED_CONTEXT)
            return _CachedJsonl(jsonl, on_quarantine)

        self._raw_files: dict[RawKind, _CachedJsonl[RawTraceItem]] = {
            "raw": cached("raw", RAW_TRACE_ADAPTER),
            "archive": cached("archive", RAW_TRACE_ADAPTER),
        }
        self._episodic_file = cached("episodic", EPISODIC_ADAPTER)
        self._semantic_file = cached("semantic", SEMANTIC_ADAPTER)
        self._files: dict[TraceKind, _CachedJsonl[RawTraceItem] | _CachedJsonl[EpisodicItem] | _CachedJsonl[SemanticItem]]
        self._files = {
            "raw": self._raw_files["raw"],
            "archive": self._raw_files["archive"],
            "episodic": self._episodic_file,
            "semantic": self._semantic_file,
        }

    @classmethod
    def for_agent(
        cls, agent_id: str, memory_dir: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> FileTraceStore:
        """The store of ``agent_id`` under ``<memory_dir>/agents/<agent_id>/``, beside its
        AgentMemory files. ``memory_dir`` ``None``: ``AGENT_MEMORY_DIR`` or ``./memory``.

        Raises:
            InvalidIdError: if ``agent_id`` is not a safe directory name.
        """
        return cls(resolve_memory_dir(memory_dir) / "agents" / validate_agent_id(agent_id), **kwargs)

    def path(self, kind: TraceKind) -> Path:
        """The file of ``kind``."""
        return self._files[kind].jsonl.path

    def _append(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        if kind == "raw" or kind == "archive":
            self._raw_files[kind].jsonl.append(typed_records(RawTraceItem, records, kind))
        elif kind == "episodic":
            self._episodic_file.jsonl.append(typed_records(EpisodicItem, records, kind))
        else:
            self._semantic_file.jsonl.append(typed_records(SemanticItem, records, kind))

    def _read(self, kind: TraceKind) -> list[TraceRecord]:
        return [*self._files[kind].records()]

    def _read_raw(self, kind: RawKind) -> list[RawTraceItem]:
        return self._raw_files[kind].records()

    def _read_episodic(self) -> list[EpisodicItem]:
        return self._episodic_file.records()

    def _read_semantic(self) -> list[SemanticItem]:
        return self._semantic_file.records()

    def _rewrite(self, kind: TraceKind, records: Sequence[TraceRecord]) -> None:
        if kind == "raw" or kind == "archive":
            self._raw_files[kind].jsonl.rewrite(typed_records(RawTraceItem, records, kind))
        elif kind == "episodic":
            self._episodic_file.jsonl.rewrite(typed_records(EpisodicItem, records, kind))
        else:
            self._semantic_file.jsonl.rewrite(typed_records(SemanticItem, records, kind))
        self._files[kind].invalidate()

    def _locked(self, kind: TraceKind) -> AbstractContextManager[Any]:
        return self._files[kind].jsonl.locked()
