"""Durable file writes: an atomic replace that survives a crash or a power loss, and the checks
around it (used by every file the library writes: JSONL rewrites, content blobs, documents,
snapshots).

A write goes to a temporary file beside the target, is fsynced, renamed over the target and the
directory is fsynced (POSIX rename is atomic: a reader sees the old file or the new one, never a
mix)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

from agent_memory.errors import StoreError

__all__ = ["atomic_write", "atomic_write_bytes", "fsync_dir", "writable_dir"]


def fsync_dir(path: Path) -> None:
    """fsync a directory so a rename or a new file in it survives a power loss (no-op on Windows)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def writable_dir(path: Path) -> bool:
    """Whether files can be created in directory ``path`` (or, when it does not exist yet, in its
    nearest existing ancestor): ``False`` on a read-only mount, or for a user without write
    permission. (``os.access``: root passes permission checks, never a read-only mount.)"""
    for candidate in (path, *path.parents):
        if candidate.exists():
            return candidate.is_dir() and os.access(candidate, os.W_OK)
    return False


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (:func:`atomic_write`).

    Raises:
        StoreError: if writing fails; ``path`` then still holds its previous content (if any).
    """
    atomic_write(path, (data,))


def atomic_write(path: Path, chunks: Iterable[bytes]) -> None:
    """Write ``chunks`` one after another to ``path`` atomically: a temporary file beside it,
    fsync, rename, fsync of the directory. ``chunks`` is consumed as it is written, so a large
    file is never held in memory whole.

    Raises:
        StoreError: if writing fails; ``path`` then still holds its previous content (if any).
        Exception: whatever producing ``chunks`` raised, with ``path`` as it was.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    try:
        with open(tmp, "wb") as handle:
            for chunk in chunks:
                handle.write(chunk)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        fsync_dir(path.parent)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise StoreError(f"cannot write {path}: {exc}") from exc
    except BaseException:  # ``chunks`` failed: nothing written, the temporary file removed
        tmp.unlink(missing_ok=True)
        raise
