"""Memory forks: what an isolated sub-agent sees of its parent's memory (sub-agent memory snapshots,
after MemberJunction's agent memory scoping, github.com/MemberJunction/MJ: "isolated
copy-on-write").

A :class:`MemoryFork` names a parent memory (its backend's URL and its agent id), the ids of the
items it held when the fork was taken, and when. It is a small JSON document the spawn saves for
the child in the backend (:meth:`MemoryFork.save_for`: ``fork.json`` in the child's directory, or a
row in Postgres), so a child in another process, or on another machine with only the URL, opens
the same view. ``AgentMemory(child_id, backend=..., base=fork)`` is then a memory in two layers, as an
overlay file system:

- the child's own layer: where every write goes (store, forget of its items);
- the parent's layer, read-only: the parent's items of the snapshot, read in place from the
  parent's records, blobs and index (no copy, no re-embedding: a fork costs O(its own writes)).

Isolation is enforced, not advised: an item the parent stored after the fork is refused
(:class:`~agent_memory.errors.OutsideSnapshotError`, an unknown id to a model), and any change to
the parent's layer is refused (:class:`~agent_memory.errors.IsolationError`). The parent takes
chosen items back with ``MemoryAgent.merge`` (a copy into the parent's memory). An item the parent
forgets after the fork is gone for the child too: forgetting is meant to be final.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from agent_memory.errors import InvalidArgumentError, OutsideSnapshotError, StoreError, map_exceptions
from agent_memory.ids import validate_agent_id
from agent_memory.models.items import ItemRecord, MemoryCriteria, MemoryItem, QueryHit, QueryRanking, utc_now
from agent_memory.storage.contracts import Backend
from agent_memory.storage import common

__all__ = ["FORK_DOCUMENT", "FORK_FILE", "SPAWN_DOCUMENT", "ForkableMemory", "MemoryFork", "ParentLayer", "SpawnRecord"]

FORK_SCHEMA_VERSION = 3
"""Version of the fork document's JSON layout (1: the parent named by ``parent_memory_dir``, 2: by
``parent_store``, 3: by ``parent_backend``); every earlier version is read."""

FORK_DOCUMENT = "fork"
"""The name of a forked memory's fork among the child's documents in the backend."""

FORK_FILE = "fork.json"
"""The fork's file in the child's agent directory (the file backend's document ``fork``)."""

SPAWN_DOCUMENT = "spawn"
"""The name of a sub-agent's :class:`SpawnRecord` among its documents (``spawn.json`` on files)."""


class ForkableMemory(Protocol):
    """What a fork reads of a memory (an :class:`~agent_memory.memory.AgentMemory`): who it is,
    where it lives, its records, and its items by id and by query. A fork never writes through it."""

    @property
    def agent_id(self) -> str: ...

    @property
    def backend(self) -> Backend: ...

    def __contains__(self, item_id: object, /) -> bool: ...

    def records(self) -> list[ItemRecord]: ...

    def get(self, item_id: str, /) -> MemoryItem: ...

    def query(self, criteria: MemoryCriteria, /, *, ranking: QueryRanking = ...) -> list[QueryHit]: ...

    def close(self) -> None: ...


class MemoryFork(BaseModel):
    """A frozen view of a parent memory for an isolated sub-agent: which items, of which memory.

    Take one with :meth:`of`; hand it to ``AgentMemory(..., base=fork)`` in this process, or
    :meth:`save_for` the child, and any process that opens the child's memory reads through it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = FORK_SCHEMA_VERSION
    parent_agent_id: str
    """The parent's agent id."""
    parent_backend: str
    """The parent's backend, as :func:`~agent_memory.storage.open_backend` takes it: the memory
    directory (absolute) or the database URL (without its password)."""
    item_ids: frozenset[str] = Field(default_factory=frozenset)
    """The parent's items the child may read."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the fork was taken (UTC)."""

    @model_validator(mode="before")
    @classmethod
    def _earlier_layout(cls, data: Any) -> Any:
        """A fork written by version 1 named the parent's backend ``parent_memory_dir``, by version 2
        ``parent_store``."""
        if isinstance(data, dict) and "parent_backend" not in data:
            for old in ("parent_store", "parent_memory_dir"):
                if old in data:
                    data = {**data, "parent_backend": data[old], "schema_version": FORK_SCHEMA_VERSION}
                    del data[old]
                    break
        return data

    @classmethod
    def of(cls, memory: ForkableMemory) -> MemoryFork:
        """A fork of ``memory`` as it is now (every item it holds, its own and those of its own
        base when it is itself a fork). O(items) ids; no content is read."""
        return cls(parent_agent_id=memory.agent_id, parent_backend=memory.backend.url,
                   item_ids=frozenset(record.id for record in memory.records()))

    def to_json(self) -> bytes:
        """The document: JSON, ids sorted."""
        payload = self.model_dump(mode="json")
        payload["item_ids"] = sorted(self.item_ids)
        return json.dumps(payload, ensure_ascii=False).encode("utf-8")

    @classmethod
    def from_json(cls, data: bytes, *, where: str = "fork") -> MemoryFork:
        """Read a fork document (of this version or the first).

        Raises:
            StoreError: if ``data`` is not a fork document (``where`` names it in the message).
        """
        try:
            payload = json.loads(data)
            if not isinstance(payload, dict) or payload.get("schema_version") not in range(1, FORK_SCHEMA_VERSION + 1):
                raise ValueError(f"schema version {payload.get('schema_version') if isinstance(payload, dict) else None}")
            fork = cls.model_validate(payload)
            validate_agent_id(fork.parent_agent_id)
        except (ValueError, ValidationError) as exc:
            raise StoreError(f"{where} is not a memory fork (schema 1-{FORK_SCHEMA_VERSION}): {exc}") from exc
        return fork

    def save_for(self, backend: Backend, child_id: str) -> None:
        """Keep the fork as ``child_id``'s ``fork`` document in ``backend``, atomically; any
        process that opens the child's memory then reads through it.

        Raises:
            InvalidArgumentError: if ``child_id`` is the parent itself in the parent's own store
                (the parent's memory would be a fork of itself); nothing is written.
            StoreError: if the document cannot be written (an earlier one is then unchanged).
        """
        with map_exceptions("MemoryFork.save_for"):
            if validate_agent_id(child_id) == self.parent_agent_id and backend.url == self.parent_backend:
                raise InvalidArgumentError(
                    f"a fork of {self.parent_agent_id!r} cannot be saved for that agent itself: a sub-agent's "
                    "fork goes with the sub-agent")
            common.document(backend, child_id, FORK_DOCUMENT).put(self.to_json())


class SpawnRecord(BaseModel):
    """Who spawned a sub-agent and with which memory: the child's ``spawn`` document, written by
    ``spawn`` right after the child's id is claimed, so a reader (the inspector) can tell a
    sub-agent's parent and scope from what the backend keeps, in any process, on either backend."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    parent_agent_id: str
    """The spawning agent's conversation id (its traces are kept under it)."""
    memory_agent_id: str
    """Whose items the child's stored results are: the parent's memory when ``shared``, the child's
    own id otherwise."""
    memory_mode: str
    """``shared``, ``isolated`` or ``none`` (:data:`~agent_memory.agent.config.MemoryMode`)."""
    task: str = ""
    """The task the child was given, cut to 500 characters."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the child was spawned (UTC)."""

    @classmethod
    def from_json(cls, data: bytes, *, where: str = "spawn record") -> SpawnRecord:
        """Read a spawn document.

        Raises:
            StoreError: if ``data`` is not one (``where`` names it in the message).
        """
        try:
            return cls.model_validate_json(data)
        except ValidationError as exc:
            raise StoreError(f"{where} is not a spawn record: {exc}") from exc


class ParentLayer:
    """The read-only parent layer of a forked memory (used by ``AgentMemory``; not public API).

    Args:
        fork: which parent, which items.
        open_parent: opens the parent's memory (on first use; never written through this object).
    """

    def __init__(self, fork: MemoryFork, *, open_parent: Callable[[], ForkableMemory]) -> None:
        self.fork = fork
        self.ids = fork.item_ids
        self._open = open_parent
        self._memory: ForkableMemory | None = None
        self._mutex = threading.Lock()

    @property
    def memory(self) -> ForkableMemory:
        """The parent's memory, opened on first use."""
        with self._mutex:
            if self._memory is None:
                self._memory = self._open()
            return self._memory

    def contains(self, item_id: str) -> bool:
        """Whether ``item_id`` is in the snapshot and the parent still holds it."""
        return item_id in self.ids and item_id in self.memory

    def load_item(self, item_id: str) -> MemoryItem:
        """The parent's item ``item_id``.

        Raises:
            OutsideSnapshotError: if it is not in the snapshot (the refused read).
            ItemNotFoundError: if the parent forgot it since.
        """
        if item_id not in self.ids:
            raise OutsideSnapshotError(
                f"no memory item {item_id!r} in this sub-agent's memory (the parent's items stored after the "
                "fork are outside its snapshot)", item_id=item_id)
        return self.memory.get(item_id)

    def records(self) -> list[ItemRecord]:
        """The snapshot's records the parent still holds, oldest first."""
        return [record for record in self.memory.records() if record.id in self.ids]

    def query(self, criteria: MemoryCriteria, *, ranking: QueryRanking = "default") -> list[QueryHit]:
        """The parent's hits for ``criteria`` among the snapshot's items, best first (ranked as
        ``ranking`` says): the parent's own index answers (its vectors are reused), limited to
        items stored before the fork and then to the snapshot's ids."""
        until = self.fork.created_at if criteria.until is None else min(criteria.until, self.fork.created_at)
        hits = self.memory.query(criteria.model_copy(update={"until": until}), ranking=ranking)
        return [hit for hit in hits if hit.item.id in self.ids]

    def close(self) -> None:
        with self._mutex:
            if self._memory is not None:
                self._memory.close()
                self._memory = None


def merge_hits(own: list[QueryHit], parent: list[QueryHit], limit: int, *, by_score: bool) -> list[QueryHit]:
    """One ranking of a forked memory's two layers: by score when both were ranked by text (the
    same fusion on both sides), else newest first; at most ``limit`` hits."""
    key: Any = (lambda hit: hit.score or 0.0) if by_score else (lambda hit: hit.item.metadata.timestamp)
    return sorted([*own, *parent], key=key, reverse=True)[:limit]
