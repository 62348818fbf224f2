"""The file backend's documents: one JSON file each in the agent directory, replaced atomically.

``working_context`` is ``working_context_snapshot.json`` (AutoByteus' name and format, which its
reader opens too); ``fork`` is ``fork.json``. A write takes ``<file>.lock`` and checks the token
under it. The token is the file's ``<inode>:<size>:<mtime ns>``: every atomic rewrite makes a new
inode, so a write another process made since a read is seen.
"""

from __future__ import annotations

import os
from pathlib import Path

from filelock import FileLock, Timeout

from agent_memory.errors import ConflictError, LockTimeoutError, StoreError
from agent_memory.fileio import atomic_write_bytes
from agent_memory.storage.contracts import ChangeToken
from agent_memory.storage.files.jsonl import LOCK_TIMEOUT_S

__all__ = ["DOCUMENT_FILES", "FileDocumentSlot", "document_file"]

DOCUMENT_FILES = {"working_context": "working_context_snapshot.json", "fork": "fork.json"}
"""File names of the documents the library keeps; any other name ``n`` is ``n.json``."""

ABSENT: ChangeToken = "absent"
"""The token of a document never written."""


def document_file(name: str) -> str:
    """The file name of document ``name`` in an agent directory."""
    return DOCUMENT_FILES.get(name, f"{name}.json")


class FileDocumentSlot:
    """:class:`~agent_memory.storage.contracts.DocumentSlot` on one file.

    Args:
        path: the document's file (its directory is created on first write).
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = FileLock(str(path) + ".lock", timeout=LOCK_TIMEOUT_S)

    def __repr__(self) -> str:
        return f"FileDocumentSlot({str(self.path)!r})"

    def token(self) -> ChangeToken:
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            return ABSENT
        except OSError as exc:
            raise StoreError(f"cannot read {self.path}: {exc}") from exc
        return f"{info.st_ino}:{info.st_size}:{info.st_mtime_ns}"

    def get(self) -> tuple[bytes | None, ChangeToken]:
        for _ in range(3):  # rewritten between the stat and the read: once more
            before = self.token()
            if before == ABSENT:
                return None, ABSENT
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                continue
            except OSError as exc:
                raise StoreError(f"cannot read {self.path}: {exc}") from exc
            if self.token() == before:
                return data, before
        raise StoreError(f"{self.path} keeps changing while it is read")

    def put(self, data: bytes, *, expect: ChangeToken | None = None) -> ChangeToken:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._lock.acquire()
        except Timeout as exc:
            raise LockTimeoutError(f"timed out after {LOCK_TIMEOUT_S:g} s waiting for the lock on {self.path}") from exc
        except OSError as exc:
            raise StoreError(f"cannot lock {self.path}: {exc}") from exc
        try:
            if expect is not None and self.token() != expect:
                raise ConflictError(f"{self.path} changed since it was read")
            atomic_write_bytes(self.path, data)
            return self.token()
        finally:
            self._lock.release()
