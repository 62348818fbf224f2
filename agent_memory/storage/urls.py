"""Naming a store: URLs and their schemes, database URLs, and how they are shown."""

from __future__ import annotations

import re

__all__ = ["is_database_url", "redacted_url", "url_scheme"]

_POSTGRES_SCHEMES = ("postgresql", "postgres")

_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
"""``<scheme>://`` at the start of a URL: a scheme as RFC 3986 section 3.1 spells one
(https://www.rfc-editor.org/rfc/rfc3986#section-3.1): a letter, then letters, digits, ``+ - .``."""


def url_scheme(value: str) -> str | None:
    """The scheme of ``value`` when it is a ``<scheme>://...`` URL, lowercased (schemes are
    case-insensitive): ``"postgresql"`` for ``" PostgreSQL://h/db"`` (surrounding blanks are
    ignored), ``"file"`` for ``file:///srv/memory``. ``None``: ``value`` is not such a URL, but a
    path (``./memory``, ``/srv/memory``, ``memory``; a path whose first component ends in ``:``,
    such as ``a:/b``, has no ``//`` after the colon and is a path too)."""
    match = _SCHEME.match(value.strip())
    return match.group(1).lower() if match else None


def is_database_url(value: str) -> bool:
    """Whether ``value`` names a Postgres database (``postgresql://``, ``postgres://``, in any case)."""
    return url_scheme(value) in _POSTGRES_SCHEMES


def redacted_url(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``), for messages and reports."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"
