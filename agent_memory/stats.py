"""What a memory holds, in figures: items, content bytes and tokens in total and by type, items not
yet indexed, pinned items, tags, dates and disk use (``agent-memory stats``)."""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from agent_memory.errors import AgentMemoryError
from agent_memory.memory import AgentMemory

__all__ = ["MemoryStats", "TypeStats", "disk_bytes", "holds_anything", "memory_stats"]

TOP_TAGS = 10
"""How many of the most used tags :class:`MemoryStats` names."""


class TypeStats(BaseModel):
    """The items of one content type."""

    model_config = ConfigDict(frozen=True)

    items: int = 0
    size_bytes: int = 0
    """Their content, in bytes (as stored: UTF-8 text, JSON text or the raw bytes)."""
    tokens: int = 0
    """Their content, in tokens of the memory's counter (the counted items')."""
    uncounted: int = 0
    """Those not counted yet (see :attr:`MemoryStats.uncounted`)."""


class MemoryStats(BaseModel):
    """The figures of one agent's memory (``model_dump(mode="json")`` is ``stats --json``)."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    path: str | None
    """The agent's directory; ``None`` on a database backend."""
    backend: str
    """Where the memory lives: the memory directory's path, or the database URL without its
    password."""
    items: int
    size_bytes: int
    """Every item's content, in bytes."""
    tokens: int
    """Every counted item's content, in tokens."""
    uncounted: int = 0
    """Items whose tokens are not counted yet (large results the indexing thread counts after
    ``store``): their tokens are not in ``tokens``."""
    by_type: dict[str, TypeStats]
    """The same figures per content type (``text``, ``html``, ``json``, ...), by type name."""
    pending_index: int | None
    """Items not yet in the vector and keyword indexes (embedded by the next query); ``None`` when
    the index cannot be opened."""
    pinned_items: tuple[str, ...]
    """The ids the conversation kernel pins (as given to :func:`memory_stats`)."""
    top_tags: dict[str, int]
    """The most used tags (at most :data:`TOP_TAGS`), with how many items carry each."""
    oldest: str | None
    """The oldest item's timestamp (ISO 8601); ``None`` when the memory is empty."""
    newest: str | None
    """The newest item's timestamp (ISO 8601)."""
    disk_bytes: int | None
    """Bytes of every file in the agent's directory (content, records, indexes, conversation);
    ``None`` on a database backend."""


def disk_bytes(path: Path) -> int:
    """Bytes of every file under ``path`` (0 if it does not exist; files removed meanwhile are
    skipped)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                continue
    return total


def holds_anything(memory: AgentMemory) -> bool:
    """Whether the agent may hold anything: its directory exists (files), or always (a database,
    whose empty answers cost nothing). Lets a command on a directory never made answer without
    creating it or loading the embedding model."""
    local = memory.backend.local_dir(memory.agent_id)
    return local is None or local.exists()


def memory_stats(memory: AgentMemory, *, pinned_items: Sequence[str] = ()) -> MemoryStats:
    """The figures of ``memory``: one read of its item log, plus the indexes' item ids when the
    memory holds anything (never building an index that does not exist yet).

    Args:
        memory: an open memory (a read-only one works).
        pinned_items: the kernel's pinned item ids, reported as given (the memory does not keep
            pins: :attr:`MemoryManager.pinned_items <agent_memory.kernel.manager.MemoryManager>` does).

    Raises:
        StoreError: if the item log cannot be read.
    """
    records = memory.records()
    by_type: dict[str, Counter[str]] = {}
    for record in records:
        row = by_type.setdefault(record.type, Counter())
        row.update(items=1, size_bytes=record.metadata.size_bytes, tokens=record.metadata.tokens or 0,
                   uncounted=record.metadata.tokens is None)
    pending: int | None = len(records)
    local = memory.backend.local_dir(memory.agent_id)
    if holds_anything(memory) and (local is None or (local / "index").exists()):
        try:
            indexed = memory.index.item_ids()
            if memory.lexical is not None:
                indexed &= memory.lexical.item_ids()
            pending = sum(record.id not in indexed for record in records)
        except AgentMemoryError:  # an index that cannot be opened: unknown, not an error here
            pending = None
    stamps = [record.metadata.timestamp for record in records]
    tags = Counter(tag for record in records for tag in record.metadata.tags)
    return MemoryStats(
        agent_id=memory.agent_id,
        path=str(local) if local is not None else None,
        backend=memory.backend.url,
        items=len(records),
        size_bytes=sum(row["size_bytes"] for row in by_type.values()),
        tokens=sum(row["tokens"] for row in by_type.values()),
        uncounted=sum(row["uncounted"] for row in by_type.values()),
        by_type={kind: TypeStats(**row) for kind, row in sorted(by_type.items())},
        pending_index=pending,
        pinned_items=tuple(pinned_items),
        top_tags=dict(tags.most_common(TOP_TAGS)),
        oldest=min(stamps).isoformat() if stamps else None,
        newest=max(stamps).isoformat() if stamps else None,
        disk_bytes=disk_bytes(local) if local is not None else None,
    )

