"""Copying memory from one backend to another (``agent-memory migrate``): files into Postgres and
back, byte for byte.

Per agent, everything it keeps: every item record as its exact bytes with the content blobs it
names, every trace record (raw, archive, episodes, facts), its documents (the working context; a
fork, whose parent is renamed to the target when it was the source), then its indexes are built
at the target (embedding again, unless ``index=False``: the first query then does it). The event
journal is not copied: an agent with events not applied yet is refused (apply or discard them
first), and the target's journal starts empty. Nothing is written to an agent the target holds
already (:meth:`~agent_memory.storage.contracts.Backend.claim`). After the copy the records and
blobs are read back from the target and compared byte for byte.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agent_memory.config import MemoryConfig
from agent_memory.errors import InvalidArgumentError, StoreError
from agent_memory.fork import FORK_DOCUMENT, SPAWN_DOCUMENT, MemoryFork
from agent_memory.kernel.working_context import WORKING_CONTEXT_DOCUMENT
from agent_memory.memory import AgentMemory
from agent_memory.storage.contracts import Backend, LogChange, LogEntry
from agent_memory.records.items import UnreadableRecord, decode_record
from agent_memory.storage.traces import KINDS
from agent_memory.storage import common
from agent_memory.storage.contracts import ITEMS_LOG

__all__ = ["AgentCopy", "migrate"]

DOCUMENTS = (WORKING_CONTEXT_DOCUMENT, FORK_DOCUMENT, SPAWN_DOCUMENT)
"""The documents a migration copies."""


@dataclass
class AgentCopy:
    """What :func:`migrate` copied of one agent."""

    agent_id: str
    items: int = 0
    """Item records (those of a newer version included), each byte-identical at the target."""
    blobs: int = 0
    """Content blobs, each byte-identical at the target."""
    traces: dict[str, int] = field(default_factory=dict)
    """Trace records per kind."""
    documents: list[str] = field(default_factory=list)
    """The documents copied."""
    indexed: int = 0
    """Items indexed at the target (0 with ``index=False``)."""


def migrate(source: Backend, target: Backend, agent_ids: Sequence[str] | None = None, *, index: bool = True,
            config: MemoryConfig | None = None, progress: Callable[[AgentCopy], None] | None = None) -> list[AgentCopy]:
    """Copy agents from ``source`` to ``target`` (see the module docstring).

    Args:
        source: where the memory is.
        target: where it goes.
        agent_ids: the agents to copy; ``None``: every agent the source holds.
        index: build the target's indexes now (embedding every item again).
        config: the memory settings the indexes are built with; ``None``: ``MemoryConfig()``.
        progress: called with each agent's copy when it is done.

    Returns:
        What was copied, per agent, in order.

    Raises:
        InvalidArgumentError: if source and target are one store, an agent is unknown to the
            source or already held by the target, or has events not applied yet; nothing of that
            agent is written (agents before it are copied).
        StoreError: if a copied record or blob does not read back identical.
    """
    if source.url == target.url:
        raise InvalidArgumentError(f"source and target are the same store ({source.url})")
    chosen = list(agent_ids) if agent_ids is not None else source.agent_ids()
    known = set(source.agent_ids())
    copies = []
    for agent_id in chosen:
        if agent_id not in known:
            raise InvalidArgumentError(f"{source.url} holds no agent {agent_id!r}")
        copy = _copy_agent(source, target, agent_id, index=index, config=config)
        copies.append(copy)
        if progress is not None:
            progress(copy)
    return copies


def _copy_agent(source: Backend, target: Backend, agent_id: str, *, index: bool,
                config: MemoryConfig | None) -> AgentCopy:
    journal = common.journal(source, agent_id)
    try:
        if journal.open_count():
            raise InvalidArgumentError(
                f"agent {agent_id!r} has {journal.open_count()} event(s) not applied yet in {source.url}: apply them "
                "(run the agent, or EventProcessor.step) or discard them before migrating")
    finally:
        journal.close()
    if not target.claim(agent_id):
        raise InvalidArgumentError(f"{target.url} holds agent {agent_id!r} already: nothing of it was copied")
    copy = AgentCopy(agent_id)
    log = source.log(agent_id, ITEMS_LOG)
    records = log.read().records
    entries, digests = [], set()
    for item_id, data in records:
        record = decode_record(data)
        names = sorted(record.blob_digests()) if isinstance(record, UnreadableRecord) else [record.metadata.content_sha256]
        blob = None
        for digest in names:
            if digest in digests:
                break  # an earlier record brought it
            try:
                blob = log.blob(digest)
            except StoreError:
                continue  # a digest a newer record mentions that is not a blob
            digests.add(digest)
            break
        entries.append(LogEntry(item_id, data, blob))
    target.log(agent_id, ITEMS_LOG).write(LogChange(put=entries, replace_all=True))
    copy.items, copy.blobs = len(entries), sum(entry.blob is not None for entry in entries)
    _verify(source, target, agent_id, records)
    traces_in, traces_out = common.traces(source, agent_id), common.traces(target, agent_id)
    for kind in KINDS:
        found = traces_in.records(kind)
        traces_out.replace_records(kind, found)
        copy.traces[kind] = len(found)
    for name in DOCUMENTS:
        document, _ = common.document(source, agent_id, name).get()
        if document is None:
            continue
        if name == FORK_DOCUMENT:
            fork = MemoryFork.from_json(document, where=f"the fork of {agent_id!r}")
            if fork.parent_backend == source.url:  # the parent moves with it
                document = fork.model_copy(update={"parent_backend": target.url}).to_json()
        common.document(target, agent_id, name).put(document)
        copy.documents.append(name)
    if index and records:
        with AgentMemory(agent_id, backend=target, config=config) as memory:
            copy.indexed = memory.flush_index()
    return copy


def _verify(source: Backend, target: Backend, agent_id: str, records: list[tuple[str, bytes]]) -> None:
    """The target's records are the source's, byte for byte, with every blob they name."""
    written = target.log(agent_id, ITEMS_LOG).read().records
    if written != records:
        raise StoreError(f"the records of {agent_id!r} did not read back identical from {target.url}")
    log = target.log(agent_id, ITEMS_LOG)
    for _, data in written:
        record = decode_record(data)
        if isinstance(record, UnreadableRecord):
            continue
        digest = record.metadata.content_sha256
        if hashlib.sha256(log.blob(digest)).hexdigest() != digest:
            raise StoreError(f"blob {digest} of {agent_id!r} did not read back identical from {target.url}")
