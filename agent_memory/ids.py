"""Agent ids and memory ids: generation and validation.

Ids come from outside (a developer's agent id, a model's tool call), and agent ids become
directory names, so both are checked against a strict pattern before any use: no separators, no
dots at the start, bounded length. Nothing that fails these checks ever reaches the file system.

Memory ids derived from names (:func:`derived_memory_id`) are keyed by the agent whose conversation
the name belongs to: a compacted turn ``turn_0001`` of agent ``lead`` is
``derived_memory_id("agent:lead/turn:turn_0001")`` (:func:`turn_memory_id`), so a parent and a
sub-agent sharing its memory never take each other's turns, episodes or facts. Memories written
before that keep their turns under the key without an agent (:func:`legacy_turn_memory_id`).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Callable

from agent_memory.errors import InvalidArgumentError, InvalidIdError, StoreError, quoted

__all__ = [
    "MAX_AGENT_ID_CHARS",
    "MEMORY_ID_PREFIX",
    "derived_memory_id",
    "episode_memory_id",
    "fact_memory_id",
    "legacy_turn_memory_id",
    "memory_ids_in",
    "new_memory_id",
    "sub_agent_id",
    "turn_memory_id",
    "turn_part_memory_id",
    "validate_agent_id",
    "validate_memory_id",
]

MEMORY_ID_PREFIX = "mem_"

MAX_AGENT_ID_CHARS = 128
"""Longest agent id, in characters (an agent id is a directory name)."""

_AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,127}")
_NOT_IN_AGENT_ID = re.compile(r"[^A-Za-z0-9_.-]+")
_MEMORY_ID = re.compile(r"mem_[0-9a-f]{12}")
_MEMORY_ID_IN_TEXT = re.compile(rf"(?<![A-Za-z0-9_]){_MEMORY_ID.pattern}(?![A-Za-z0-9_])")

MAX_ID_ATTEMPTS = 100
"""Fresh ids drawn at most before giving up; with 48 random bits a second draw is already rare
(a memory of a million items collides on one draw in about 280 million)."""


def _random_hex(nbytes: int) -> str:
    """Random hex digits (the generator of new ids; tests replace it to force collisions)."""
    return secrets.token_hex(nbytes)


def new_memory_id(taken: Callable[[str], bool] | None = None) -> str:
    """A fresh memory id: ``mem_`` and 12 random hex digits (48 bits), e.g. ``mem_3f9a0c41b2de``.

    Short on purpose: the id is quoted in every citation the model reads. Short ids can collide,
    so a caller that knows the ids in use passes ``taken``: an id for which it returns ``True``
    is drawn again.

    Raises:
        StoreError: if ``MAX_ID_ATTEMPTS`` draws were all taken (a broken random source).
    """
    for _ in range(MAX_ID_ATTEMPTS):
        item_id = f"{MEMORY_ID_PREFIX}{_random_hex(6)}"
        if taken is None or not taken(item_id):
            return item_id
    raise StoreError(f"no free memory id after {MAX_ID_ATTEMPTS} draws; is the random source broken?")


def memory_ids_in(text: str) -> list[str]:
    """The memory ids ``text`` names (``mem_`` + 12 hex digits, not part of a longer word), each
    once, in the order they first appear: what a citation, a capped showing or a note quotes."""
    return list(dict.fromkeys(match.group(0) for match in _MEMORY_ID_IN_TEXT.finditer(text)))


def derived_memory_id(key: str) -> str:
    """A deterministic memory id for something that has its own stable name, such as a compacted
    turn (:func:`turn_memory_id`): ``mem_`` + the first 12 hex digits of the key's sha256. The
    same key always gives the same id (so storing it twice is detectable and a turn id can be
    turned into the id that retrieves it); distinct keys collide with the probability of a random
    id."""
    return MEMORY_ID_PREFIX + hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def _agent_key(agent_id: str, name: str) -> str:
    """The derivation key of ``name`` (``turn:turn_0012``) in the conversation of ``agent_id``:
    ``agent:<agent_id>/<name>``. An agent id holds no ``/``, so no two (agent, name) pairs share
    a key."""
    return f"agent:{validate_agent_id(agent_id)}/{name}"


def turn_memory_id(turn_id: str, *, agent_id: str) -> str:
    """The memory id under which a compacted turn of ``agent_id``'s conversation is kept verbatim
    (``retrieve_memory`` of a turn id reads it).

    The agent is part of the key: a parent and a sub-agent sharing its memory both have a
    ``turn_0001``, and each must keep (and read back) its own. ``agent_id`` is the owner of the
    conversation (``MemoryManager.agent_id``), which for a sub-agent sharing its parent's memory is
    the sub-agent's id, not the memory's.

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
    """
    return derived_memory_id(_agent_key(agent_id, f"turn:{turn_id}"))


def turn_part_memory_id(turn_id: str, first_seq: int, last_seq: int, *, agent_id: str) -> str:
    """The memory id of the finished steps ``first_seq``-``last_seq`` (trace ``seq`` numbers) of a
    turn too long to fit, compacted on their own, in ``agent_id``'s conversation.

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
    """
    return derived_memory_id(_agent_key(agent_id, f"turn:{turn_id}:{first_seq}-{last_seq}"))


def episode_memory_id(episode_id: str, *, agent_id: str) -> str:
    """The memory id of an episodic summary's search item, in ``agent_id``'s conversation.

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
    """
    return derived_memory_id(_agent_key(agent_id, f"episode:{episode_id}"))


def fact_memory_id(fact_id: str, *, agent_id: str) -> str:
    """The memory id of a semantic fact's search item, in ``agent_id``'s conversation.

    Raises:
        InvalidIdError: if ``agent_id`` is malformed.
    """
    return derived_memory_id(_agent_key(agent_id, f"fact:{fact_id}"))


def legacy_turn_memory_id(turn_id: str) -> str:
    """The memory id a compacted turn had before ids were scoped by agent (``turn:<turn id>``,
    no agent in the key). Memories written then keep their turns under it; ``retrieve_memory``
    reads it only for the memory's own agent (see ``actions.retrieve``)."""
    return derived_memory_id(f"turn:{turn_id}")


def sub_agent_id(parent_id: str, n: int) -> str:
    """The generated id of a parent's ``n``-th sub-agent: ``<parent>.sub<n:02d>``, always a valid
    agent id of at most :data:`MAX_AGENT_ID_CHARS` characters.

    Characters an agent id cannot hold (a parent's display name may have spaces) become ``-``.
    When the result would be too long, the parent part is cut and followed by ``-`` and 8 hex
    digits of the sha256 of the whole parent id, so two long parents that share a prefix still
    give distinct ids: ``<first 110 chars of parent>-3f9a0c41.sub01``.

    Raises:
        InvalidArgumentError: if ``n`` < 1.
    """
    if not isinstance(n, int) or n < 1:
        raise InvalidArgumentError(f"n must be an int >= 1, not {n!r}")
    suffix = f".sub{n:02d}"
    base = _NOT_IN_AGENT_ID.sub("-", str(parent_id)).lstrip("._-") or "agent"
    if len(base) + len(suffix) > MAX_AGENT_ID_CHARS:
        digest = hashlib.sha256(str(parent_id).encode("utf-8")).hexdigest()[:8]
        base = f"{base[:MAX_AGENT_ID_CHARS - len(suffix) - len(digest) - 1]}-{digest}"
    return validate_agent_id(base + suffix)


def validate_agent_id(agent_id: str) -> str:
    """Return ``agent_id`` if it is a safe directory name, else raise.

    Allowed: 1-128 characters of ``A-Z a-z 0-9 _ . -``, starting with a letter or digit, and not
    made only of dots.

    Raises:
        InvalidIdError: if the id is malformed.
    """
    if not isinstance(agent_id, str) or not _AGENT_ID.fullmatch(agent_id) or set(agent_id) <= {"."}:
        raise InvalidIdError(
            f"invalid agent id {quoted(agent_id)}: use 1-128 of A-Z a-z 0-9 _ . - starting with a letter or digit",
            value=agent_id if isinstance(agent_id, str) else str(agent_id),
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
        f"invalid memory id {quoted(memory_id)}: memory ids look like 'mem_3f9a0c41b2de'",
        value=memory_id if isinstance(memory_id, str) else str(memory_id),
    )
