"""Where memory lives: storage backends and how to choose one.

``AgentMemory("a")`` keeps everything in files under ``./memory`` (or ``AGENT_MEMORY_DIR``):
nothing to start, one machine. ``AgentMemory("a", backend="postgresql://user@host/db")`` (or
``AGENT_MEMORY_URL``) keeps it in Postgres with pgvector, shared by processes on any number of
machines. :func:`open_backend` turns what a caller gives into a :class:`Backend`; the contracts a
backend implements are in :mod:`agent_memory.storage.contracts`. Which backend a
``<scheme>://`` URL opens is a registry that installed packages extend through the entry-point
group ``agent_memory.backends`` (:mod:`agent_memory.storage.schemes`, :func:`backend_schemes`).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path

from agent_memory.errors import ConfigurationError
from agent_memory.storage.contracts import Backend, BackendDefaults
from agent_memory.storage.files import FileBackend
from agent_memory.storage.schemes import BACKEND_ENTRY_POINT_GROUP, BackendFactory, backend_schemes, open_url
from agent_memory.storage.urls import checked_url, is_database_url, redacted_url, url_scheme

__all__ = [
    "BACKEND_ENTRY_POINT_GROUP",
    "BACKEND_URL_ENV",
    "Backend",
    "BackendDefaults",
    "BackendFactory",
    "FileBackend",
    "backend_schemes",
    "is_database_url",
    "open_backend",
    "redacted_url",
    "url_scheme",
]

BACKEND_URL_ENV = "AGENT_MEMORY_URL"
"""Environment variable naming the backend when the code names none: a URL (``postgresql://``,
``file://``, or a scheme an installed package registers) or a memory directory. Without it (and
without ``AGENT_MEMORY_DIR``) memory is in ``./memory``."""

_UNSHARED_SCHEMES = frozenset({"file"})
"""Schemes whose backend is made anew on each open: a :class:`FileBackend` holds no connection."""

_OPEN: dict[tuple[str, bool], Backend] = {}
"""The process's backends by ``(URL, read_only)``: one connection pool per database."""
_OPEN_LOCK = threading.RLock()  # re-entrant: a factory may open the backend it wraps


def open_backend(backend: str | os.PathLike[str] | Backend | None = None,
                 memory_dir: str | os.PathLike[str] | None = None, *, read_only: bool = False) -> Backend:
    """The :class:`Backend` that ``backend`` names.

    Args:
        backend: a :class:`Backend` (returned as is); a string ``<scheme>://...``, opened by its
            scheme's factory (:mod:`agent_memory.storage.schemes`): ``postgresql://`` (or
            ``postgres://``) a database, ``file://`` and a path a memory directory, any other
            scheme the one an installed package registers in the entry-point group
            ``agent_memory.backends``; any other string or path-like a memory directory (a
            path-like is always a path; a string with ``://`` and no ``/`` before it is meant as
            a URL, and one whose scheme is misspelt is refused, never opened as a directory). ``None``: ``memory_dir`` when given, else
            ``AGENT_MEMORY_URL``, else the directory ``AGENT_MEMORY_DIR`` or ``./memory``.
        memory_dir: the memory directory of a caller that names one (the files backend).
        read_only: the caller only reads: a memory directory is opened as on a read-only mount
            (:class:`~agent_memory.storage.files.FileBackend`'s ``read_only``); a database, whose
            readers never write, is opened as always; a third party's factory is told.

    A URL's backend (any scheme but ``file``) is kept per URL and ``read_only`` in a process, so
    every memory of the process that names the same database shares its connection pool; one
    that was closed (its ``closed`` is true) is replaced by a new one.

    Raises:
        ConfigurationError: if both ``backend`` and ``memory_dir`` are given; if a string meant as
            a URL is not one (:func:`~agent_memory.storage.urls.checked_url`: ``://x``,
            ``1abc://x``, an unencoded ``@`` in its password); if a URL's scheme is not known (the message lists the known ones, :func:`backend_schemes`); if the
            scheme's factory fails to load or raises (the message names the scheme and the entry
            point); if a database URL is given and the ``postgres`` extra (psycopg, psycopg-pool,
            pgvector) is not installed, or the server refuses the connection.
        BackendUnavailableError: if a database server does not answer.
    """
    if backend is not None and not isinstance(backend, str | os.PathLike):
        if isinstance(backend, Backend):
            if memory_dir is not None:
                raise ConfigurationError("give a backend or a memory_dir, not both")
            return backend
        raise ConfigurationError(f"backend must be a URL, a path or a Backend, not {type(backend).__name__}")
    if backend is not None and memory_dir is not None:
        raise ConfigurationError("give a backend or a memory_dir, not both")
    target: str | os.PathLike[str] | None = backend if backend is not None else memory_dir
    if target is None:
        target = os.environ.get(BACKEND_URL_ENV) or None
    if isinstance(target, str):
        scheme = checked_url(target)
        if scheme in _UNSHARED_SCHEMES:
            return open_url(target, read_only=read_only)
        if scheme is not None:
            url = target.strip()
            return _shared((url, read_only), lambda: open_url(url, read_only=read_only))
    path = Path(target) if target is not None else None
    return FileBackend(path, read_only=read_only)


def _shared(key: tuple[str, bool], make: Callable[[], Backend]) -> Backend:
    """The process's backend for ``key`` (URL, read_only), made on first use (again after it was
    closed)."""
    with _OPEN_LOCK:
        backend = _OPEN.get(key)
        if backend is None or backend.closed:
            backend = _OPEN[key] = make()
        return backend


def _forget_after_fork() -> None:
    """A forked child must not use its parent's connections: it opens its own backends."""
    global _OPEN_LOCK
    _OPEN.clear()
    _OPEN_LOCK = threading.RLock()


os.register_at_fork(after_in_child=_forget_after_fork)
