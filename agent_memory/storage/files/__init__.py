"""The default backend: files under one memory directory, nothing to start (``memory/agents/<id>/``).

Per agent: ``items.jsonl`` and ``content/`` (:mod:`~agent_memory.storage.files.items`), the
indexes under ``index/`` (embedded Chroma, or a Chroma server named by the config; the keyword
index ``lexical.sqlite3``), the conversation's JSONL files (the logs ``traces.<kind>``:
:class:`~agent_memory.storage.files.trace_log.FileTraceLog`), ``working_context_snapshot.json`` and
``fork.json`` (:mod:`~agent_memory.storage.files.documents`), ``events.sqlite3``
(:mod:`~agent_memory.storage.files.journal`) and lock files (:mod:`~agent_memory.storage.files.locks`).
Processes on one machine share it safely; for processes on several machines use the Postgres
backend (:mod:`agent_memory.storage.postgres`).
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path

from agent_memory.config import MemoryConfig, resolve_memory_dir
from agent_memory.errors import ConfigurationError, StoreError
from agent_memory.fileio import writable_dir
from agent_memory.ids import validate_agent_id
from agent_memory.storage.keyword import KeywordIndex
from agent_memory.storage.lexical import LexicalIndex
from agent_memory.storage.vector import VectorIndex
from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.storage.contracts import ITEMS_LOG, BackendDefaults, QuarantineHook, checked_log_name
from agent_memory.storage.files.documents import FileDocumentSlot, document_file
from agent_memory.storage.files.items import FileItemLog
from agent_memory.storage.files.journal import FileJournal
from agent_memory.storage.files.locks import FileLocks
from agent_memory.storage.files.trace_log import TRACE_LOGS, FileTraceLog
from agent_memory.tokens import TokenCounter

__all__ = ["AGENTS_DIR", "FileBackend"]

AGENTS_DIR = "agents"
"""The directory of the agents, in the memory directory."""

LOGS_DIR = "logs"
"""The directory of an agent's logs other than ``items`` (each in a directory of its name)."""


class FileBackend(BackendDefaults):
    """:class:`~agent_memory.storage.contracts.Backend` on ``<memory_dir>/agents/<agent_id>/``.

    Args:
        memory_dir: the memory directory; ``None``: ``AGENT_MEMORY_DIR`` or ``./memory``.
            Nothing is created until the first write.
        read_only: open every agent as on a read-only mount (``read_only`` is ``True``): the
            indexes are read without writing and a damaged line of ``items.jsonl`` is only
            skipped, never moved (what the inspector opens a directory with).

    Raises:
        ConfigurationError: if the memory directory is, or lies under, an existing file.
    """

    def __init__(self, memory_dir: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> None:
        self.memory_dir = resolve_memory_dir(memory_dir)
        _check_memory_dir(self.memory_dir)
        self._read_only = read_only
        self.url = str(self.memory_dir)
        self._locks: dict[str, FileLocks] = {}
        self._mutex = threading.Lock()

    def __repr__(self) -> str:
        return f"FileBackend({self.url!r})"

    def agent_dir(self, agent_id: str) -> Path:
        """``<memory_dir>/agents/<agent_id>`` (the id validated first)."""
        return self.memory_dir / AGENTS_DIR / validate_agent_id(agent_id)

    def describe(self, agent_id: str) -> str:
        """Where an agent's records are, for messages: its ``items.jsonl``."""
        return str(self.agent_dir(agent_id) / "items.jsonl")

    def local_dir(self, agent_id: str) -> Path:
        """The agent's directory, :meth:`agent_dir` (it may not exist yet)."""
        return self.agent_dir(agent_id)

    def log(self, agent_id: str, name: str, *, on_quarantine: QuarantineHook | None = None) -> FileItemLog | FileTraceLog:
        """The log ``items`` is ``items.jsonl`` and ``content/`` in the agent directory; the logs
        ``traces.<kind>`` AutoByteus' JSONL trace files there (:class:`FileTraceLog`); any other
        log ``<name>`` the files of ``items`` under ``logs/<name>/`` (keys of any form)."""
        agent_dir = self.agent_dir(agent_id)
        if name in TRACE_LOGS:
            file_name, adapter = TRACE_LOGS[name]
            traces = FileTraceLog(agent_dir / file_name, adapter, move_corrupt=not self._read_only)
            if on_quarantine is not None:
                traces.on_quarantine = lambda line, moved: on_quarantine(
                    str(traces.jsonl.path), line.line_no, line.reason, str(moved) if moved is not None else None)
            return traces
        if name == ITEMS_LOG:
            log = FileItemLog(agent_dir, move_corrupt=not self._read_only)
        else:
            log = FileItemLog(agent_dir / LOGS_DIR / checked_log_name(name), move_corrupt=not self._read_only,
                              memory_ids=False)
        if on_quarantine is not None:
            log.on_quarantine = lambda line, moved: on_quarantine(
                str(log.jsonl.path), line.line_no, line.reason, str(moved) if moved is not None else None)
        return log

    def read_only(self, agent_id: str) -> bool:
        """``True`` when opened ``read_only``, or when the agent's ``index/`` cannot be written (a
        read-only mount)."""
        return self._read_only or not writable_dir(self.agent_dir(agent_id) / "index")

    def keyword_index(self, agent_id: str, config: MemoryConfig, *, read_only: bool = False,
                      recreate: bool = False) -> KeywordIndex | None:
        path = self.agent_dir(agent_id) / "index" / "lexical.sqlite3"
        if recreate:
            LexicalIndex.delete_files(path)
        if read_only and not path.is_file():
            return None
        return LexicalIndex(path, read_only=read_only)

    def vector_index(self, agent_id: str, config: MemoryConfig, tokens: TokenCounter, *,
                     read_only: bool = False) -> VectorIndex:
        with HEAVY_IMPORTS:  # chromadb: heavy, loaded on first use
            from agent_memory.storage.files.chroma import ChromaVectorIndex

        agent_dir = self.agent_dir(agent_id)
        if not read_only:
            agent_dir.mkdir(parents=True, exist_ok=True)
        return ChromaVectorIndex(agent_id, config, path=agent_dir / "index" / "chroma", read_only=read_only)

    def document(self, agent_id: str, name: str) -> FileDocumentSlot:
        return FileDocumentSlot(self.agent_dir(agent_id) / document_file(name))

    def journal(self, agent_id: str) -> FileJournal:
        return FileJournal(self.agent_dir(agent_id))

    def locks(self, agent_id: str) -> FileLocks:
        agent_dir = self.agent_dir(agent_id)
        with self._mutex:  # one object per agent: the locks re-enter in one thread
            locks = self._locks.get(agent_id)
            if locks is None:
                locks = self._locks[agent_id] = FileLocks(agent_dir)
            return locks

    def claim(self, agent_id: str) -> bool:
        agent_dir = self.agent_dir(agent_id)
        try:
            agent_dir.parent.mkdir(parents=True, exist_ok=True)
            agent_dir.mkdir()
        except FileExistsError:
            return False
        except OSError as exc:
            raise StoreError(f"cannot create the agent directory {agent_dir}: {exc}") from exc
        return True

    def release_claim(self, agent_id: str) -> None:
        shutil.rmtree(self.agent_dir(agent_id), ignore_errors=True)

    def agent_ids(self) -> list[str]:
        root = self.memory_dir / AGENTS_DIR
        if not root.is_dir():
            return []
        return sorted(path.name for path in root.iterdir() if path.is_dir())

    def close(self) -> None:
        """Nothing to release: every object it handed out closes its own files."""


def _check_memory_dir(path: Path) -> None:
    """Refuse a memory directory that is (or lies under) an existing file."""
    for candidate in (path / AGENTS_DIR, path, *path.parents):
        if candidate.exists():
            if not candidate.is_dir():
                raise ConfigurationError(f"memory_dir {path} is unusable: {candidate} is not a directory")
            return
