"""The Postgres backend (extra ``postgres``): not in this commit yet (issue 16 in progress)."""

from __future__ import annotations

from typing import NoReturn

from agent_memory.errors import ConfigurationError

__all__ = ["PostgresBackend"]


def PostgresBackend(url: str) -> NoReturn:  # noqa: N802 - the class's name, to come
    """Refuses: the Postgres backend lands with issue 16."""
    raise ConfigurationError(f"this version of agent-memory cannot open {url!r} yet: use a memory directory")
