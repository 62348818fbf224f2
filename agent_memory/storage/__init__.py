"""Where memory lives: storage backends and how to choose one.

``AgentMemory("a")`` keeps everything in files under ``./memory`` (or ``AGENT_MEMORY_DIR``):
nothing to start, one machine. ``AgentMemory("a", store="postgresql://user@host/db")`` (or
``AGENT_MEMORY_URL``) keeps it in Postgres with pgvector, shared by processes on any number of
machines. :func:`open_backend` turns what a caller gives into a :class:`Backend`; the contracts a
backend implements are in :mod:`agent_memory.storage.contracts`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from agent_memory.errors import ConfigurationError
from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.storage.contracts import Backend
from agent_memory.storage.files import FileBackend
from agent_memory.storage.urls import is_database_url, redacted_url

__all__ = ["STORE_URL_ENV", "Backend", "FileBackend", "is_database_url", "open_backend", "redacted_url"]

STORE_URL_ENV = "AGENT_MEMORY_URL"
"""Environment variable naming the backend when the code names none: a ``postgresql://`` URL or a
memory directory. Without it (and without ``AGENT_MEMORY_DIR``) memory is in ``./memory``."""

_OPEN: dict[str, Backend] = {}
_OPEN_LOCK = threading.Lock()


def open_backend(store: str | os.PathLike[str] | Backend | None = None,
                 memory_dir: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> Backend:
    """The backend ``store`` names.

    Args:
        store: a :class:`Backend` (returned as is), a ``postgresql://`` URL, a memory directory
            (a path, or ``file://`` and a path); ``None``: ``memory_dir`` when given, else
            ``AGENT_MEMORY_URL``, else the directory ``AGENT_MEMORY_DIR`` or ``./memory``.
        memory_dir: the memory directory of a caller that names one (the files backend).
        read_only: a memory directory is opened as on a read-only mount
            (:class:`~agent_memory.storage.files.FileBackend`'s ``read_only``); a database, whose
            readers never write, is opened as always.

    One backend object is kept per URL in a process, so every memory of the process that names the
    same database shares its connection pool.

    Raises:
        ConfigurationError: if both ``store`` and ``memory_dir`` are given, or a database URL is
            given and the ``postgres`` extra (psycopg, psycopg-pool, pgvector) is not installed,
            or the database cannot be reached.
    """
    if store is not None and not isinstance(store, str | os.PathLike):
        if isinstance(store, Backend):
            if memory_dir is not None:
                raise ConfigurationError("give a store or a memory_dir, not both")
            return store
        raise ConfigurationError(f"store must be a URL, a path or a Backend, not {type(store).__name__}")
    if store is not None and memory_dir is not None:
        raise ConfigurationError("give a store or a memory_dir, not both")
    target: str | os.PathLike[str] | None = store if store is not None else memory_dir
    if target is None:
        target = os.environ.get(STORE_URL_ENV) or None
    if isinstance(target, str) and is_database_url(target):
        return _shared(target.strip(), _postgres)
    if isinstance(target, str) and target.startswith("file://"):
        target = target[len("file://"):]
    path = Path(target) if target is not None else None
    return FileBackend(path, read_only=read_only)


def _postgres(url: str) -> Backend:
    try:
        with HEAVY_IMPORTS:  # psycopg and pgvector (numpy)
            from agent_memory.storage.postgres import PostgresBackend
    except ImportError as exc:
        raise ConfigurationError(
            f"a postgresql:// store needs the postgres extra: pip install 'agent-memory[postgres]' ({exc})"
        ) from exc
    return PostgresBackend(url)


def _shared(url: str, make: Callable[[str], Backend]) -> Backend:
    """The process's backend for ``url``, made on first use (again after it was closed)."""
    with _OPEN_LOCK:
        backend = _OPEN.get(url)
        if backend is None or getattr(backend, "closed", False):
            backend = _OPEN[url] = make(url)
        return backend


def _forget_after_fork() -> None:
    """A forked child must not use its parent's connections: it opens its own backends."""
    global _OPEN_LOCK
    _OPEN.clear()
    _OPEN_LOCK = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
