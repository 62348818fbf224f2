"""Backend URL schemes: which backend a ``<scheme>://...`` URL opens, and how third parties add one.

:func:`~agent_memory.storage.open_backend` reads the scheme of a URL (``postgresql`` in
``postgresql://user@host/db``) and opens the backend that the scheme's factory makes. Schemes come
from two places:

- **Built in** (:data:`BUILTIN_SCHEMES`): ``file`` (a memory directory), ``memory`` (this
  process's memory, :mod:`~agent_memory.storage.inprocess`) and ``postgresql`` / ``postgres`` (the
  Postgres backend). They are also declared as entry points in agent-memory's
  ``pyproject.toml``, but are found without them: a checkout whose installed metadata is missing
  or predates them still opens files and Postgres. A built-in scheme cannot be replaced.
- **Entry points** of the group :data:`BACKEND_ENTRY_POINT_GROUP` (``agent_memory.backends``), as
  the Python packaging specification defines them
  (https://packaging.python.org/en/latest/specifications/entry-points/): the entry point's *name*
  is the scheme (case-insensitive, an RFC 3986 scheme: a letter, then letters, digits, ``+ - .``)
  and its *object reference* a :class:`BackendFactory`. A package registers one in its
  ``pyproject.toml``::

      [project.entry-points."agent_memory.backends"]
      mybackend = "mybackend.agent_memory:open_backend"

  after which ``AgentMemory("a", backend="mybackend://...")`` (or ``AGENT_MEMORY_URL``) opens it in
  every process that has the package installed. Should two installed packages declare one
  scheme, the one found first on ``sys.path`` is used and the other is logged as ignored.

The entry points are read when a URL's scheme is not built in (and by :func:`backend_schemes`),
each time, never cached: a package installed while the process runs is found. A process keeps the
backend it opened per URL (:func:`~agent_memory.storage.open_backend`), so this costs one
metadata scan per URL, not per memory.
"""

from __future__ import annotations

import logging
import re
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from types import MappingProxyType
from typing import Protocol

from agent_memory.extras import require_extra
from agent_memory.errors import MAX_MESSAGE_CHARS, AgentMemoryError, ConfigurationError, quoted
from agent_memory.lazy_imports import HEAVY_IMPORTS
from agent_memory.limits import shorten
from agent_memory.storage.contracts import Backend
from agent_memory.storage.files import FileBackend
from agent_memory.storage.urls import checked_url, redact_error, redacted_text, redacted_url, url_scheme

__all__ = [
    "BACKEND_ENTRY_POINT_GROUP",
    "BUILTIN_SCHEMES",
    "BackendFactory",
    "backend_schemes",
    "open_files",
    "open_postgres",
    "open_url",
]

logger = logging.getLogger(__name__)

BACKEND_ENTRY_POINT_GROUP = "agent_memory.backends"
"""The entry-point group of backend URL schemes: name = scheme, value = a :class:`BackendFactory`."""

BUILTIN_SCHEMES = MappingProxyType({
    "file": "agent_memory.storage.schemes:open_files",
    "memory": "agent_memory.storage.inprocess:open_inprocess",
    "postgres": "agent_memory.storage.schemes:open_postgres",
    "postgresql": "agent_memory.storage.schemes:open_postgres",
})
"""The schemes agent-memory opens itself, scheme → ``"module:callable"`` (the entry points that
``pyproject.toml`` declares under :data:`BACKEND_ENTRY_POINT_GROUP`, kept here so they work
without installed metadata)."""

_SCHEME_NAME = re.compile(r"[a-z][a-z0-9+.-]*")


class BackendFactory(Protocol):
    """What an entry point of :data:`BACKEND_ENTRY_POINT_GROUP` names: a callable that opens the
    store ``url`` names.

    Args:
        url: the whole URL as the caller gave it (its scheme is the entry point's name, in any
            case; blanks around it removed), password included: the factory parses it.
        read_only: the caller only reads (the inspector): open the backend without writing
            anything, if the backend can; a backend whose readers never write may ignore it.

    Returns:
        The :class:`~agent_memory.storage.contracts.Backend`. Its ``url`` should be a URL that
        opens the same backend in another process (a fork records it for its child), without a
        password: it is shown in messages, and a backend whose ``url`` holds one is refused. The process
        keeps it for later opens of the same URL (one per ``url`` and ``read_only``); give it a
        ``closed`` attribute that turns true on ``close()`` for a closed one to be replaced.

    Raises:
        Anything: an :class:`~agent_memory.errors.AgentMemoryError` reaches the caller as it is
        (with a note naming the scheme and the entry point); any other exception is raised as a
        :class:`~agent_memory.errors.ConfigurationError` that names them. Either way its message
        and the exceptions chained to it are shown with the URL's password masked
        (:func:`~agent_memory.storage.urls.redact_error`), so a message may quote the URL.
    """

    def __call__(self, url: str, *, read_only: bool) -> Backend: ...


def open_files(url: str, *, read_only: bool) -> FileBackend:
    """The built-in factory of ``file://``: the memory directory after ``file://``, as written
    (``file:///srv/memory`` → ``/srv/memory``, ``file://memory`` → ``./memory``; nothing is
    percent-decoded, and a ``file://localhost/`` host is not understood).

    Raises:
        ConfigurationError: if ``url`` is not a ``file://`` URL, or the directory is (or lies
            under) a file.
    """
    if url_scheme(url) != "file":
        raise ConfigurationError(f"not a file:// URL: {quoted(url)}")
    path = url.strip()[len("file://"):]
    return FileBackend(Path(path) if path else None, read_only=read_only)


def open_postgres(url: str, *, read_only: bool) -> Backend:
    """The built-in factory of ``postgresql://`` and ``postgres://``: the Postgres backend
    (:class:`~agent_memory.storage.postgres.PostgresBackend`). ``read_only`` is ignored: a
    database's readers never write.

    Raises:
        ConfigurationError: if the ``postgres`` extra (psycopg, psycopg-pool, pgvector) is not
            installed, or the server refuses the connection or the database cannot be prepared.
        BackendUnavailableError: if the server does not answer.
    """
    require_extra("postgres", "a postgresql:// backend")
    with HEAVY_IMPORTS:  # psycopg and pgvector (numpy)
        from agent_memory.storage.postgres import PostgresBackend
    return PostgresBackend(url)


def backend_schemes() -> dict[str, str]:
    """Every backend URL scheme this process can open, sorted: scheme → the ``"module:callable"``
    of its factory. The built-in ones (:data:`BUILTIN_SCHEMES`) are always there, whatever is
    installed; the others are the installed entry points of :data:`BACKEND_ENTRY_POINT_GROUP`,
    read now (not loaded: nothing is imported)."""
    known = {**_installed(), **{scheme: _builtin(scheme) for scheme in BUILTIN_SCHEMES}}
    return {scheme: known[scheme].value for scheme in sorted(known)}


def open_url(url: str, *, read_only: bool = False) -> Backend:
    """The backend of the ``<scheme>://`` URL ``url``, made now by its scheme's factory (no
    process-wide sharing: :func:`~agent_memory.storage.open_backend` keeps one per URL).

    No message, note or chained exception shows the URL's password: what the factory raises is
    redacted (:func:`~agent_memory.storage.urls.redact_error`) before it is noted, wrapped or
    raised.

    Raises:
        ConfigurationError: if ``url`` has no ``<scheme>://``, or is not a URL
            (:func:`~agent_memory.storage.urls.checked_url`: a misspelt scheme, an unencoded ``@``
            in its user info); if its scheme is not known (the message lists the known ones); if
            the scheme's entry point does not load, is not callable, raises anything but an
            :class:`~agent_memory.errors.AgentMemoryError`, returns no
            :class:`~agent_memory.storage.contracts.Backend`, or a third party's backend whose
            ``url`` holds a password (the message names the scheme and the entry point).
        AgentMemoryError: what the factory raised (a
            :class:`~agent_memory.errors.BackendUnavailableError` for a server that does not
            answer, ...), with a note (PEP 678, ``__notes__``) naming the scheme and the entry point.
    """
    url = url.strip()
    scheme = checked_url(url)
    shown = quoted(redacted_url(url))
    if scheme is None:
        raise ConfigurationError(f"not a <scheme>:// URL: {shown}")
    point = _builtin(scheme) if scheme in BUILTIN_SCHEMES else _installed().get(scheme)
    if point is None:
        known = ", ".join(backend_schemes())
        raise ConfigurationError(
            f"unknown backend URL scheme {scheme!r} in {shown}; known: {known} (a package adds one as an entry "
            f"point of the group {BACKEND_ENTRY_POINT_GROUP!r}; a directory whose name holds '://' is opened "
            "with file:// before it)")
    where = _describe(point)
    try:
        factory = point.load()
    except Exception as exc:  # noqa: BLE001 - a third party's import error, reported with its entry point
        raise ConfigurationError(f"backend URL scheme {scheme!r}: {where} failed to load: "
                                 f"{type(exc).__name__}: {shorten(str(exc), MAX_MESSAGE_CHARS)}") from exc
    if not callable(factory):
        raise ConfigurationError(f"backend URL scheme {scheme!r}: {where} is a {type(factory).__name__}, "
                                 "not a callable factory(url, *, read_only)")
    try:
        backend = factory(url, read_only=read_only)
    except AgentMemoryError as exc:
        redact_error(exc, url)  # the factory's message and its causes may quote the URL, or its password
        exc.add_note(f"while opening {shown} with backend URL scheme {scheme!r} ({where})")
        raise
    except Exception as exc:  # noqa: BLE001 - a third party's backend, named in the error
        redact_error(exc, url)
        said = shorten(redacted_text(str(exc), url), MAX_MESSAGE_CHARS)
        raise ConfigurationError(f"backend URL scheme {scheme!r}: {where} failed to open {shown}: "
                                 f"{type(exc).__name__}: {said}") from exc
    if not isinstance(backend, Backend):
        raise ConfigurationError(f"backend URL scheme {scheme!r}: {where} returned a {type(backend).__name__}, "
                                 "not a Backend (agent_memory.storage.contracts.Backend)")
    if scheme not in BUILTIN_SCHEMES and redacted_url(str(backend.url)) != backend.url:
        backend.close()
        raise ConfigurationError(f"backend URL scheme {scheme!r}: {where} returned a backend whose url "
                                 f"{quoted(redacted_url(str(backend.url)))} holds a password; a Backend's url "
                                 "is shown in messages and must leave it out")
    return backend


def _builtin(scheme: str) -> EntryPoint:
    return EntryPoint(name=scheme, value=BUILTIN_SCHEMES[scheme], group=BACKEND_ENTRY_POINT_GROUP)


def _installed() -> dict[str, EntryPoint]:
    """The installed entry points of the group that add a scheme, by lowercased name: the first
    found (on ``sys.path``) wins a name; a built-in scheme or an invalid name is logged and
    ignored."""
    found: dict[str, EntryPoint] = {}
    for point in entry_points(group=BACKEND_ENTRY_POINT_GROUP):
        scheme = point.name.strip().lower()
        if not _SCHEME_NAME.fullmatch(scheme):
            logger.warning("ignored %s: %r is not a URL scheme (a letter, then letters, digits, + - .)",
                           _describe(point), point.name)
        elif scheme in BUILTIN_SCHEMES:
            if point.value.replace(" ", "") != BUILTIN_SCHEMES[scheme]:
                logger.warning("ignored %s: the scheme %r is built in", _describe(point), scheme)
        elif scheme in found:
            if point.value != found[scheme].value:
                logger.warning("ignored %s: the scheme %r is %s", _describe(point), scheme, _describe(found[scheme]))
        else:
            found[scheme] = point
    return found


def _describe(point: EntryPoint) -> str:
    """``entry point 'name = module:callable' (distribution 1.0)``, or ``(built in)``."""
    dist = getattr(point, "dist", None)
    origin = f"{dist.name} {dist.version}" if dist is not None else "built in"
    return f"entry point '{point.name} = {point.value}' ({origin})"
