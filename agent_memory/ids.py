"""Agent ids and memory ids: generation and validation.

Ids come from outside (a developer's agent id, a model's tool call), and agent ids become
directory names, so both are checked against a strict pattern before any use: no separators, no
dots at the start, bounded length. Nothing that fails these checks ever reaches the file system.
"""

from __future__ import annotations

import re
import secrets

from agent_memory.errors import InvalidIdError

__all__ = ["MEMORY_ID_PREFIX", "new_memory_id", "validate_agent_id", "validate_memory_id"]

MEMORY_ID_PREFIX = "mem_"
_AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_MEMORY_ID = re.compile(r"mem_[0-9a-f]{12}")


def new_memory_id() -> str:
    """A fresh memory id: ``mem_`` and 12 random hex digits (48 bits), e.g. ``mem_3f9a0c41b2de``.

    Short on purpose: the id is quoted in every citation the model reads.
    """
    return f"{MEMORY_ID_PREFIX}{secrets.token_hex(6)}"


def validate_agent_id(agent_id: str) -> str:
    """Return ``agent_id`` if it is a safe directory name, else raise.

    Allowed: 1-128 characters of ``A-Z a-z 0-9 _ . -``, starting with a letter or digit, and not
    made only of dots.

    Raises:
        InvalidIdError: if the id is malformed.
    """
    if not isinstance(agent_id, str) or not _AGENT_ID.fullmatch(agent_id) or set(agent_id) <= {"."}:
        raise InvalidIdError(
            f"invalid agent id {agent_id!r}: use 1-128 of A-Z a-z 0-9 _ . - starting with a letter or digit",
            value=str(agent_id),
        )
    return agent_id


def validate_memory_id(memory_id: str) -> str:
    """Return ``memory_id`` if it has the form ``mem_`` + 12 hex digits, else raise.

    Surrounding whitespace and quotes (frequent in model output) are stripped first.

    Raises:
        InvalidIdError: if the id is malformed.
    """
    if isinstance(memory_id, str):
        cleaned = memory_id.strip().strip("'\"`")
        if _MEMORY_ID.fullmatch(cleaned):
            return cleaned
    raise InvalidIdError(
        f"invalid memory id {memory_id!r}: memory ids look like 'mem_3f9a0c41b2de'",
        value=str(memory_id),
    )
