"""A LangGraph ``BaseStore`` on agent-memory (extra ``langchain``).

LangGraph agents keep long-term memory in a store: JSON documents under a ``namespace`` (a tuple
of labels, e.g. ``("users", "u1", "memories")``) and a ``key``. :class:`AgentMemoryStore` keeps
each document as one agent-memory item, so a LangGraph agent's memories live in any agent-memory
backend (files, or Postgres shared across machines), are found by hybrid search (dense + BM25),
and are shared with the agents that share the memory::

    store = AgentMemoryStore(AgentMemory("assistant"))
    store.put(("users", "u1"), "food", {"likes": "coffee, no sugar"})
    store.search(("users",), query="what does the user drink?")

What maps to what:

- an item is JSON content (``type="custom"``, tag ``langgraph_store``) whose ``extra`` holds the
  namespace, the key and the creation time; its ``source`` is ``langgraph:<ns1>/<ns2>/…#<key>``;
- ``put`` of an existing key stores the new version, then forgets the old one (a crash between the
  two leaves both; the newer wins on read); ``put(..., None)`` / ``delete`` forgets it;
- ``search`` with a ``query`` ranks by Query Memory's fused score (dense + BM25); without one,
  documents come in the order they were stored, ``score`` ``None``. ``filter`` compares values
  the way LangGraph's stores do (equality, nested objects, ``$eq $ne $gt $gte $lt $lte``);
- ``list_namespaces`` with prefix and suffix conditions (``*`` a wildcard), ``max_depth``,
  ``limit``, ``offset``.

Not supported: TTLs (``ttl`` is refused; agent-memory keeps until forgotten) and per-field
``index`` lists (every document is indexed whole; ``index=False`` is accepted and changes nothing
but the cost of storing).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from agent_memory.config import MAX_QUERY_LIMIT
from agent_memory.memory import AgentMemory
from agent_memory.models.items import ItemRecord, MemoryCriteria

__all__ = ["STORE_TAG", "AgentMemoryStore"]

STORE_TAG = "langgraph_store"
"""The tag of every item that holds a LangGraph store document."""


def _matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    part = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path):]
    if condition.match_type not in ("prefix", "suffix"):
        raise ValueError(f"unsupported match type {condition.match_type!r}")
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


def _passes(value: Any, wanted: Any) -> bool:
    """Whether a document's ``value`` satisfies a filter's ``wanted`` (LangGraph's semantics)."""
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, op, target) for op, target in wanted.items())
        return isinstance(value, dict) and all(_passes(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (isinstance(value, list | tuple) and len(value) == len(wanted)
                and all(_passes(a, b) for a, b in zip(value, wanted, strict=True)))
    return bool(value == wanted)


def _operator(value: Any, op: str, target: Any) -> bool:
    if op == "$eq":
        return bool(value == target)
    if op == "$ne":
        return bool(value != target)
    if value is None:
        return False
    comparisons = {"$gt": float.__gt__, "$gte": float.__ge__, "$lt": float.__lt__, "$lte": float.__le__}
    if op not in comparisons:
        raise ValueError(f"unsupported filter operator {op!r}")
    return bool(comparisons[op](float(value), float(target)))


class AgentMemoryStore(BaseStore):
    """LangGraph's ``BaseStore`` on an :class:`AgentMemory` (module docstring).

    Args:
        memory: where the documents are kept (one agent's memory; share it to share the store).

    Raises (from the store's methods):
        InvalidNamespaceError: for an empty namespace, an empty label or one holding ``.``
            (LangGraph's rule), or a namespace starting with ``langgraph``.
        NotImplementedError: for a ``ttl``.
    """

    supports_ttl = False

    def __init__(self, memory: AgentMemory) -> None:
        self.memory = memory
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"AgentMemoryStore({self.memory!r})"

    # -- the documents ------------------------------------------------------------------------
    def _documents(self) -> dict[tuple[tuple[str, ...], str], ItemRecord]:
        """(namespace, key) → the newest record holding it, in the order first stored."""
        found: dict[tuple[tuple[str, ...], str], ItemRecord] = {}
        for record in self.memory.records():
            extra = record.metadata.extra
            if STORE_TAG not in record.metadata.tags or "namespace" not in extra or "key" not in extra:
                continue
            namespace = tuple(str(label) for label in extra["namespace"])  # type: ignore[union-attr]
            found[(namespace, str(extra["key"]))] = record
        return found

    def _item(self, namespace: tuple[str, ...], key: str, record: ItemRecord, score: float | None = None,
              *, search: bool = False) -> Item:
        value = self.memory.get(record.id).content
        created = record.metadata.extra.get("created_at")
        created_at = datetime.fromisoformat(str(created)) if created else record.metadata.timestamp
        if search:
            return SearchItem(namespace=namespace, key=key, value=value, created_at=created_at,
                              updated_at=record.metadata.timestamp, score=score)
        return Item(value=value, key=key, namespace=namespace, created_at=created_at,
                    updated_at=record.metadata.timestamp)

    @staticmethod
    def _check(namespace: tuple[str, ...]) -> None:
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label:
                raise InvalidNamespaceError(f"Invalid namespace label {label!r}: labels are non-empty, without '.'")
        if namespace[0] == "langgraph":
            raise InvalidNamespaceError(f'Root label for namespace cannot be "langgraph". Got: {namespace}')

    def _put(self, op: PutOp) -> None:
        self._check(tuple(op.namespace))
        if op.ttl is not None:
            raise NotImplementedError("AgentMemoryStore keeps documents until deleted: ttl is not supported")
        namespace = tuple(op.namespace)
        with self._lock:
            old = self._documents().get((namespace, op.key))
            if op.value is not None:
                created = (old.metadata.extra.get("created_at") if old is not None else None) or datetime.now().astimezone().isoformat()
                self.memory.store(
                    json.loads(json.dumps(op.value)), type="custom", tags=[STORE_TAG], title=op.key[:200],
                    source=f"langgraph:{'/'.join(namespace)}#{op.key}"[:500],
                    extra={"namespace": list(namespace), "key": op.key, "created_at": created},
                )
            if old is not None:
                self.memory.forget(old.id)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        candidates = [(ns, key, record) for (ns, key), record in self._documents().items() if ns[: len(prefix)] == prefix]
        if op.filter:
            candidates = [(ns, key, record) for ns, key, record in candidates
                          if _passes(self.memory.get(record.id).content, op.filter)]
        scores: dict[str, float | None] = {}
        if op.query and candidates:
            wanted = min(MAX_QUERY_LIMIT, max(1, op.offset + op.limit))
            hits = self.memory.query(MemoryCriteria(text=op.query, tags=(STORE_TAG,), limit=wanted))
            scores = {hit.item.id: hit.score for hit in hits}
            ranked = [c for c in candidates if c[2].id in scores]
            ranked.sort(key=lambda c: -(scores[c[2].id] or 0.0))
            candidates = ranked + [c for c in candidates if c[2].id not in scores]
        chosen = candidates[op.offset: op.offset + op.limit]
        return [self._item(ns, key, record, scores.get(record.id), search=True)  # type: ignore[misc]
                for ns, key, record in chosen]

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = {ns for ns, _ in self._documents()}
        if op.match_conditions:
            namespaces = {ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset: op.offset + op.limit]

    # -- BaseStore ------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (puts of one batch land before its later reads)."""
        results: list[Result] = []
        with self._lock:
            for op in ops:
                if isinstance(op, GetOp):
                    record = self._documents().get((tuple(op.namespace), op.key))
                    results.append(None if record is None else self._item(tuple(op.namespace), op.key, record))
                elif isinstance(op, PutOp):
                    self._put(op)
                    results.append(None)
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list(op))
                else:
                    raise ValueError(f"unknown store operation {type(op).__name__}")
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))
