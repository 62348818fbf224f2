"""Naming a store: database URLs, and how they are shown."""

from __future__ import annotations

__all__ = ["is_database_url", "redacted_url"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_database_url(value: str) -> bool:
    """Whether ``value`` names a Postgres database (``postgresql://``, ``postgres://``)."""
    return value.strip().lower().startswith(_POSTGRES_SCHEMES)


def redacted_url(url: str) -> str:
    """``url`` without its password (``postgresql://user:***@host/db``), for messages and reports."""
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url
    credentials, _, host = rest.rpartition("@")
    user, colon, _ = credentials.partition(":")
    return f"{scheme}://{user}{':***' if colon else ''}@{host}"
