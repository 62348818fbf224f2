"""Memory forks: what an isolated sub-agent sees of its parent's memory (seed 002, sub-agent
memory snapshots, "isolated copy-on-write").

A :class:`MemoryFork` names a parent memory (directory and agent id), the ids of the items it held
when the fork was taken, and when. It is a small JSON file (:meth:`MemoryFork.save`), so a child in
another process opens the same view. ``AgentMemory(child_id, memory_dir, base=fork)`` is then a
memory in two layers, as an overlay file system:

- the child's own layer: its own directory, where every write goes (store, forget of its items);
- the parent's layer, read-only: the parent's items of the snapshot, read in place from the
  parent's JSONL, blobs and index (no copy, no re-embedding: a fork costs O(its own writes)).

Isolation is enforced, not advised: an item the parent stored after the fork is refused
(:class:`~agent_memory.errors.OutsideSnapshotError`, an unknown id to a model), and any change to
the parent's layer is refused (:class:`~agent_memory.errors.IsolationError`). The parent takes
chosen items back with ``MemoryAgent.merge`` (a copy into the parent's memory). An item the parent
forgets after the fork is gone for the child too: forgetting is meant to be final.
"""

from __future__ import annotations

import json
import threading
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.config import MemoryConfig
from agent_memory.errors import InvalidArgumentError, OutsideSnapshotError, map_exceptions
from agent_memory.ids import validate_agent_id
from agent_memory.models.items import ItemRecord, MemoryCriteria, MemoryItem, QueryHit, utc_now
from agent_memory.store.jsonl import atomic_write_bytes
from agent_memory.tokens import TokenCounter

if TYPE_CHECKING:
    from agent_memory.memory import AgentMemory

__all__ = ["FORK_FILE", "MemoryFork", "ParentLayer"]

FORK_SCHEMA_VERSION = 1
"""Version of the fork file's JSON layout."""

FORK_FILE = "fork.json"
"""A forked memory's fork, in its agent directory: ``AgentMemory(child_id, memory_dir)`` in any
process opens the same isolated view."""


class MemoryFork(BaseModel):
    """A frozen view of a parent memory for an isolated sub-agent: which items, of which memory.

    Take one with :meth:`of`; hand it to ``AgentMemory(..., base=fork)`` in this process, or
    :meth:`save` it and :meth:`load` it in another.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: int = FORK_SCHEMA_VERSION
    parent_agent_id: str
    """The parent's agent id."""
    parent_memory_dir: str
    """The parent's memory directory (absolute)."""
    item_ids: frozenset[str] = Field(default_factory=frozenset)
    """The parent's items the child may read."""
    created_at: datetime = Field(default_factory=utc_now)
    """When the fork was taken (UTC)."""

    @classmethod
    def of(cls, memory: AgentMemory) -> MemoryFork:
        """A fork of ``memory`` as it is now (every item it holds, its own and those of its own
        base when it is itself a fork). O(items) ids; no content is read."""
        return cls(parent_agent_id=memory.agent_id, parent_memory_dir=str(memory.memory_dir.resolve()),
                   item_ids=frozenset(record.id for record in memory.records()))

    def save(self, path: str | Path) -> Path:
        """Write the fork as JSON, atomically; returns the path (normally ``<child's agent
        directory>/fork.json``, :data:`FORK_FILE`).

        Raises:
            InvalidArgumentError: if ``path`` is in the parent's own agent directory (the parent's
                memory would then be a fork of itself and could not be opened); nothing is written.
            StoreError: if the file cannot be written (an existing file is then unchanged).
        """
        with map_exceptions("MemoryFork.save"):
            target = Path(path)
            parent_dir = Path(self.parent_memory_dir) / "agents" / validate_agent_id(self.parent_agent_id)
            if target.parent.resolve() == parent_dir.resolve():
                raise InvalidArgumentError(
                    f"a fork of {self.parent_agent_id!r} cannot be saved in that agent's own directory ({target}): "
                    "a sub-agent's fork goes in the sub-agent's directory")
            payload = self.model_dump(mode="json")
            payload["item_ids"] = sorted(self.item_ids)
            atomic_write_bytes(target, json.dumps(payload, ensure_ascii=False).encode("utf-8"))
            return target

    @classmethod
    def load(cls, path: str | Path) -> MemoryFork:
        """Read a fork written by :meth:`save`.

        Raises:
            StoreError: if the file cannot be read. InvalidArgumentError: if it is not a fork file.
        """
        with map_exceptions("MemoryFork.load"):
            data = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(data, dict) or data.get("schema_version") != FORK_SCHEMA_VERSION:
                raise InvalidArgumentError(f"{path} is not a memory fork file (schema {FORK_SCHEMA_VERSION})")
            fork = cls.model_validate(data)
            validate_agent_id(fork.parent_agent_id)
            return fork


class ParentLayer:
    """The read-only parent layer of a forked memory (used by ``AgentMemory``; not public API).

    Args:
        fork: which parent, which items.
        config: how to open the parent's index (the child's own config: same Chroma mode).
        tokens: the child's token counter.
    """

    def __init__(self, fork: MemoryFork, *, config: MemoryConfig, tokens: TokenCounter) -> None:
        self.fork = fork
        self.ids = fork.item_ids
        self._config = config
        self._tokens = tokens
        self._memory: AgentMemory | None = None
        self._mutex = threading.Lock()

    @property
    def memory(self) -> AgentMemory:
        """The parent's memory, opened on first use (never written through this object)."""
        with self._mutex:
            if self._memory is None:
                from agent_memory.memory import AgentMemory  # the layer is built by AgentMemory itself

                self._memory = AgentMemory(self.fork.parent_agent_id, self.fork.parent_memory_dir,
                                           config=self._config, token_counter=self._tokens)
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

    def query(self, criteria: MemoryCriteria) -> list[QueryHit]:
        """The parent's hits for ``criteria`` among the snapshot's items, best first: the parent's
        own index answers (its vectors are reused), limited to items stored before the fork and
        then to the snapshot's ids."""
        until = self.fork.created_at if criteria.until is None else min(criteria.until, self.fork.created_at)
        hits = self.memory.query(criteria.model_copy(update={"until": until}))
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
