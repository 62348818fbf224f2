"""A LangGraph ``BaseStore`` on agent-memory (extra ``langchain``).

LangGraph agents keep long-term memory in a store: JSON documents under a ``namespace`` (a tuple
of labels, e.g. ``("users", "u1", "memories")``) and a ``key``. :class:`AgentMemoryStore` keeps
each document as one agent-memory item, so a LangGraph agent's memories live in any agent-memory
backend (files, or Postgres shared across machines), are found by semantic search ranked by
cosine similarity, as in LangGraph's own stores (and by Query Memory's hybrid search beside every
other item), and are shared with the agents that share the memory::

    store = AgentMemoryStore(AgentMemory("assistant"))
    store.put(("users", "u1"), "food", {"likes": "coffee, no sugar"})
    store.search(("users",), query="what does the user drink?")

What maps to what:

- a document is an item of JSON content (``type="custom"``) tagged :data:`STORE_TAG` and, unless
  it was put with ``index=False``, :func:`namespace_tag` of every prefix of its namespace (from
  ``()`` to the whole namespace); its ``extra`` holds the namespace, the key and the creation
  time, its ``source`` is ``langgraph:<ns1>/<ns2>/…#<key>``, its title the key;
- ``put`` of an existing key stores the new version, then forgets the old one (a crash between
  the two leaves both; the newer wins on read and the next ``put`` or ``delete`` of the key
  forgets both); ``put(..., None)`` / ``delete`` forgets it. The puts that follow each other in
  one ``batch`` are stored together (``AgentMemory.store_many``: the documents are embedded in
  batches) and the old versions forgotten together (``AgentMemory.forget_many``);
- ``search(prefix, query=…)`` ranks the documents under the prefix as LangGraph's own stores do
  (``InMemoryStore``, ``PostgresStore`` with cosine distance): by ``score``, the **cosine
  similarity** in [-1, 1] between the query's embedding and the stored embedding of the
  document's best-matching chunk (max over its chunks, as ``InMemoryStore`` pools a document's
  vectors), highest first, so every page of a paged search scores at most what the page before it
  did, and a score means the same in every search (a threshold, or results of several searches
  merged by score, read it right). The prefix is a tag filter *inside the indexes* (the same
  search on both backends), so documents elsewhere never push the prefix's own out. With the
  default model (all-MiniLM-L6-v2) a document that says what the query asks scores about 0.5 to
  0.9 and an unrelated one below 0.2. This is one dense search (``AgentMemory.query(...,
  ranking="similarity")``), not Query Memory's default ranking, whose keyword fusion and
  follow-up query find more (docs/benchmarks.md: HotpotQA recall@5 0.858 against 0.775 for the
  dense ranking, LoCoMo recall@10 0.639 against 0.517) but give a score that only orders one
  query's hits (a reciprocal-rank-fusion score); ``query_memory`` over the same items keeps that
  ranking. Documents the query did not rank (put
  with ``index=False``, not yet indexed, or below the best ``MAX_QUERY_LIMIT`` (100) of the
  prefix) come after the ranked ones, in the order they were stored, with ``score`` ``None``, as
  ``InMemoryStore`` fills up with its unembedded documents;
- ``search`` without a query (or with one of only whitespace): the documents under the prefix in
  the order their current versions were stored, oldest first, ``score`` ``None``. ``filter``
  compares values the way LangGraph's stores do (equality, nested objects, ``$eq $ne $gt $gte
  $lt $lte``), on the ranked and the unranked documents alike;
- ``list_namespaces`` with prefix and suffix conditions (``*`` a wildcard), ``max_depth``,
  ``limit``, ``offset``. A negative ``limit`` or ``offset`` raises
  :class:`~agent_memory.errors.InvalidArgumentError` (a ``ValueError``) rather than being taken
  as a Python slice;
- ``put(..., index=False)``: stored, read by ``get``, listed and found by ``search`` without a
  query, never ranked by a query (it lacks the namespace tags the query filters on). The memory
  still embeds it: every agent-memory item is in the indexes, so that its listings find it.

Cost: the store keeps an index of its documents by namespace and key in the process and brings it
up to date before each batch from the memory's item log (:meth:`AgentMemory.changes`: only what
any process wrote since), so a ``get``, a ``put`` and a ``search`` cost the same in a store of any
size (apart from the vector search itself); nothing rescans every record.
Measured by ``benchmarks/bench_langgraph_store.py`` (files backend, 2 cores; results in
``benchmarks/results/langgraph_store.json``, the previous version's in ``…_before.json``): 3,000
batched operations, half of them puts (so mostly embedding), in 77 s (117 s before); 3,000 batched
reads (gets, searches without a query, namespace listings) in 0.33 s at 300 documents and 0.37 s
at 3,000 (before: 1.3 s and 28.8 s); one ``get`` 0.06 ms at both sizes (before: 0.32 and 9.4 ms).
A search with a query costs one embedding of the query and one filtered vector search (Query
Memory's default search embeds a follow-up query too).
A store on a sub-agent's fork (:mod:`agent_memory.fork`) reads every record on each batch (the
parent's records are not in the fork's log); it reads the parent's documents, a ``put`` overrides
one in the sub-agent's memory, and a ``delete`` of one raises
:class:`~agent_memory.errors.IsolationError` (the parent's items are read-only).

Not supported: ``index_config`` (the memory's own embedding model embeds every document, whole),
per-field indexing (``index=["field", …]`` on ``put`` indexes the whole document, as ``None``
does), and TTLs (``ttl`` raises ``NotImplementedError``; agent-memory keeps until forgotten).
Namespaces are at most :data:`MAX_NAMESPACE_DEPTH` labels deep.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from agent_memory.extras import require_extra

require_extra("langchain", "agent_memory.integrations.langgraph_store")

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

from agent_memory.boundary import int_arg
from agent_memory.config import MAX_QUERY_LIMIT
from agent_memory.errors import InvalidArgumentError, IsolationError, ItemNotFoundError
from agent_memory.limits import MAX_TAGS
from agent_memory.memory import AgentMemory
from agent_memory.models.items import ItemRecord, QueryHit

__all__ = ["MAX_NAMESPACE_DEPTH", "NAMESPACE_TAG_PREFIX", "STORE_TAG", "AgentMemoryStore", "namespace_tag"]

STORE_TAG = "langgraph_store"
"""The tag of every item that holds a LangGraph store document."""

NAMESPACE_TAG_PREFIX = "lgns:"
"""The start of a :func:`namespace_tag`."""

MAX_NAMESPACE_DEPTH = MAX_TAGS - 2
"""Most labels in a namespace (30): an indexed document carries :data:`STORE_TAG` and one tag per
prefix of its namespace, ``()`` included, within the memory's ``MAX_TAGS`` (32)."""

Namespace = tuple[str, ...]


def namespace_tag(prefix: Sequence[str]) -> str:
    """The tag that every indexed document whose namespace starts with ``prefix`` carries (``()``:
    every indexed document): :data:`NAMESPACE_TAG_PREFIX` and the 128-bit BLAKE2b digest (hex) of
    the labels as a JSON list. A digest, because tags are lower-cased and at most 64 characters
    while labels are case-sensitive and of any length."""
    data = json.dumps(list(prefix)).encode("ascii")  # ensure_ascii: any label, even a lone surrogate
    return NAMESPACE_TAG_PREFIX + hashlib.blake2b(data, digest_size=16).hexdigest()


# -- filters (LangGraph's semantics, as its InMemoryStore applies them) ------------------------------
def _matches(condition: MatchCondition, namespace: Namespace) -> bool:
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


# -- the documents, by namespace and key ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Doc:
    """One stored version of a document (one item)."""

    item_id: str
    namespace: Namespace
    key: str
    created_at: datetime
    updated_at: datetime
    seq: int
    """Order in which the store learnt of it (the item log's order): the newest version wins."""


def _doc(record: ItemRecord, seq: int) -> _Doc | None:
    """The document ``record`` holds, ``None`` when it is not one of the store's."""
    meta = record.metadata
    namespace, key = meta.extra.get("namespace"), meta.extra.get("key")
    if STORE_TAG not in meta.tags or not isinstance(namespace, list) or not isinstance(key, str):
        return None
    labels = tuple(label for label in namespace if isinstance(label, str))
    if len(labels) != len(namespace):
        return None
    created = meta.extra.get("created_at")
    try:
        created_at = datetime.fromisoformat(created) if isinstance(created, str) and created else meta.timestamp
    except ValueError:
        created_at = meta.timestamp
    return _Doc(record.id, labels, key, created_at, meta.timestamp, seq)


class _Documents:
    """The store's documents by (namespace, key), kept in step with the memory's item log: each
    :meth:`sync` costs what changed since the last one (:meth:`AgentMemory.changes`)."""

    def __init__(self, memory: AgentMemory) -> None:
        self.memory = memory
        self._token: str | None = None
        self._seq = 0
        self._by_id: dict[str, _Doc] = {}
        self._versions: dict[tuple[Namespace, str], dict[str, _Doc]] = {}
        """Every item holding a (namespace, key): one, or more after a crash between the two writes
        of a ``put`` (or two processes updating one key at once)."""
        self._keys: dict[Namespace, dict[str, None]] = {}
        self._under: dict[Namespace, dict[Namespace, None]] = {}
        """Prefix (``()`` included) → the namespaces holding documents that start with it."""

    def sync(self) -> None:
        """Apply what any process wrote since the last call."""
        records: list[ItemRecord]
        deleted: Sequence[str] = ()
        if self.memory.fork is not None:  # the parent's records are not in the fork's own log
            records, reset = self.memory.records(), True
        else:
            changes = self.memory.changes(self._token)
            records, deleted, reset, self._token = changes.records, changes.deleted, changes.reset, changes.token
        if reset:
            self._by_id.clear()
            self._versions.clear()
            self._keys.clear()
            self._under.clear()
        for item_id in deleted:
            self._remove(item_id)
        for record in records:
            self._remove(record.id)
            doc = _doc(record, self._seq)
            self._seq += 1
            if doc is not None:
                self._add(doc)

    def _add(self, doc: _Doc) -> None:
        self._by_id[doc.item_id] = doc
        self._versions.setdefault((doc.namespace, doc.key), {})[doc.item_id] = doc
        keys = self._keys.setdefault(doc.namespace, {})
        if not keys:
            for depth in range(len(doc.namespace) + 1):
                self._under.setdefault(doc.namespace[:depth], {})[doc.namespace] = None
        keys[doc.key] = None

    def _remove(self, item_id: str) -> None:
        doc = self._by_id.pop(item_id, None)
        if doc is None:
            return
        versions = self._versions[(doc.namespace, doc.key)]
        del versions[item_id]
        if versions:
            return
        del self._versions[(doc.namespace, doc.key)]
        keys = self._keys[doc.namespace]
        del keys[doc.key]
        if keys:
            return
        del self._keys[doc.namespace]
        for depth in range(len(doc.namespace) + 1):
            holders = self._under[doc.namespace[:depth]]
            del holders[doc.namespace]
            if not holders:
                del self._under[doc.namespace[:depth]]

    def versions(self, namespace: Namespace, key: str) -> list[_Doc]:
        """Every item holding the document (usually one)."""
        return list(self._versions.get((namespace, key), {}).values())

    def current(self, namespace: Namespace, key: str) -> _Doc | None:
        """The newest version of the document, ``None`` if there is none."""
        versions = self._versions.get((namespace, key))
        return max(versions.values(), key=lambda doc: doc.seq) if versions else None

    def current_item(self, item_id: str) -> _Doc | None:
        """The document item ``item_id`` holds, if it is the document's newest version."""
        doc = self._by_id.get(item_id)
        return doc if doc is not None and self.current(doc.namespace, doc.key) is doc else None

    def under(self, prefix: Namespace) -> list[_Doc]:
        """The newest version of every document whose namespace starts with ``prefix``, in the
        order they were stored (oldest first)."""
        found = []
        for namespace in self._under.get(prefix, {}):
            for key in self._keys[namespace]:
                doc = self.current(namespace, key)
                if doc is not None:
                    found.append(doc)
        return sorted(found, key=lambda doc: doc.seq)

    def namespaces(self, prefix: Namespace = ()) -> list[Namespace]:
        """Every namespace that holds a document and starts with ``prefix``."""
        return list(self._under.get(prefix, {})) if prefix else list(self._keys)


class AgentMemoryStore(BaseStore):
    """LangGraph's ``BaseStore`` on an :class:`AgentMemory` (module docstring).

    Args:
        memory: where the documents are kept (one agent's memory; share it to share the store).

    Raises (from the store's methods):
        InvalidNamespaceError: for an empty namespace, an empty label or one holding ``.``
            (LangGraph's rule), one deeper than :data:`MAX_NAMESPACE_DEPTH`, or (``put`` and
            ``aput`` only, as LangGraph's stores do) a namespace starting with ``langgraph``.
        InvalidArgumentError: for a negative ``limit`` or ``offset`` (a ``ValueError``), or a
            value that is not JSON data.
        NotImplementedError: for a ``ttl``.
        IsolationError: on a sub-agent's fork, for a ``delete`` of a document of the parent's.

    Thread-safe: batches of one store run one at a time. Writes by other processes sharing the
    memory are seen by the next batch.
    """

    supports_ttl = False

    def __init__(self, memory: AgentMemory) -> None:
        self.memory = memory
        self._lock = threading.RLock()
        self._documents = _Documents(memory)

    def __repr__(self) -> str:
        return f"AgentMemoryStore({self.memory!r})"

    # -- reading ----------------------------------------------------------------------------------
    def _item(self, doc: _Doc, value: Any, score: float | None = None, *, search: bool = False) -> Item:
        if search:
            return SearchItem(namespace=doc.namespace, key=doc.key, value=value, created_at=doc.created_at,
                              updated_at=doc.updated_at, score=score)
        return Item(value=value, key=doc.key, namespace=doc.namespace, created_at=doc.created_at,
                    updated_at=doc.updated_at)

    def _value(self, doc: _Doc) -> Any:
        return self.memory.get(doc.item_id).content

    def _get(self, op: GetOp) -> Item | None:
        for attempt in range(2):
            doc = self._documents.current(tuple(op.namespace), op.key)
            if doc is None:
                return None
            try:
                return self._item(doc, self._value(doc))
            except ItemNotFoundError:  # forgotten by another process since the last sync
                if attempt:
                    raise
                self._documents.sync()
        return None

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        wanted = op.offset + op.limit
        if op.limit == 0:
            return []
        values: dict[str, Any] = {}

        def value(doc: _Doc) -> Any:
            if doc.item_id not in values:
                values[doc.item_id] = self._value(doc)
            return values[doc.item_id]

        ranked: list[tuple[_Doc, QueryHit]] = []
        if op.query and op.query.strip() and len(prefix) <= MAX_NAMESPACE_DEPTH:
            ranked = self._ranked(op.query, prefix, op.filter, wanted, value)
        chosen: list[tuple[_Doc, QueryHit | None]] = list(ranked[op.offset:wanted])
        if len(ranked) < wanted:  # the rest, unranked, in the order stored
            seen = {doc.item_id for doc, _ in ranked}
            skip = max(0, op.offset - len(ranked))
            for doc in self._documents.under(prefix):
                if len(chosen) >= op.limit:
                    break
                if doc.item_id in seen or (op.filter and not _passes(value(doc), op.filter)):
                    continue
                if skip:
                    skip -= 1
                    continue
                chosen.append((doc, None))
        return [self._item(doc, value(doc), hit.score if hit else None, search=True)  # type: ignore[misc]
                for doc, hit in chosen]

    def _ranked(self, query: str, prefix: Namespace, wanted_filter: dict[str, Any] | None, wanted: int,
                value: Any) -> list[tuple[_Doc, QueryHit]]:
        """The current documents under ``prefix`` that pass the filter, by their cosine similarity
        to ``query``, highest first: the first ``wanted`` of them (fewer when fewer are indexed),
        within the best ``MAX_QUERY_LIMIT`` of the prefix."""
        tags = (STORE_TAG, namespace_tag(prefix))
        fetch = min(MAX_QUERY_LIMIT, max(1, wanted))
        while True:
            hits = self.memory.query(query, tags=tags, limit=fetch, ranking="similarity")
            ranked = []
            for hit in hits:
                doc = self._documents.current_item(hit.item.id)
                if doc is None or doc.namespace[: len(prefix)] != prefix:  # an older version; a digest clash
                    continue
                if wanted_filter and not _passes(value(doc), wanted_filter):
                    continue
                ranked.append((doc, hit))
            if len(ranked) >= wanted or len(hits) < fetch or fetch >= MAX_QUERY_LIMIT:
                # Ordered by the score each hit carries, whatever order near-ties came in.
                return sorted(ranked, key=lambda pair: -(pair[1].score or 0.0))
            fetch = min(MAX_QUERY_LIMIT, fetch * 4)

    def _list(self, op: ListNamespacesOp) -> list[Namespace]:
        literal: Namespace = ()  # the labels a prefix condition fixes before its first wildcard
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                path = tuple(condition.path)
                fixed = path[: path.index("*")] if "*" in path else path
                literal = fixed if len(fixed) > len(literal) else literal
        namespaces: Iterable[Namespace] = self._documents.namespaces(literal)
        if op.match_conditions:
            namespaces = [ns for ns in namespaces if all(_matches(c, ns) for c in op.match_conditions)]
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset: op.offset + op.limit]

    # -- writing ----------------------------------------------------------------------------------
    @staticmethod
    def _check(namespace: Namespace) -> None:
        """LangGraph's label rules (the root label ``langgraph`` is refused by ``put``/``aput``
        themselves, before the batch), and the depth the namespace tags allow."""
        if not namespace:
            raise InvalidNamespaceError("Namespace cannot be empty.")
        for label in namespace:
            if not isinstance(label, str) or not label or "." in label:
                raise InvalidNamespaceError(f"Invalid namespace label {label!r}: labels are non-empty, without '.'")
        if len(namespace) > MAX_NAMESPACE_DEPTH:
            raise InvalidNamespaceError(
                f"a namespace has at most {MAX_NAMESPACE_DEPTH} labels in AgentMemoryStore, not {len(namespace)}")

    def _put(self, ops: Sequence[PutOp]) -> None:
        """Puts that follow each other in a batch: every new version stored in one ``store_many``,
        then every old version forgotten in one ``forget_many`` (the last put of a key wins)."""
        latest: dict[tuple[Namespace, str], PutOp] = {}
        for op in ops:
            latest.pop((tuple(op.namespace), op.key), None)
            latest[(tuple(op.namespace), op.key)] = op
        entries: list[dict[str, Any]] = []
        old: list[str] = []
        now = datetime.now().astimezone()
        fork = self.memory.fork
        parents = fork.item_ids if fork is not None else frozenset()
        for (namespace, key), op in latest.items():
            versions = self._documents.versions(namespace, key)
            own = [doc.item_id for doc in versions if doc.item_id not in parents]
            if op.value is None and len(own) < len(versions):
                raise IsolationError(f"{namespace}/{key!r} is a document of the parent's memory: a sub-agent's "
                                     "store cannot delete it (a put overrides it in the sub-agent's memory)")
            old += own  # a parent's version stays, read-only, behind the newer one
            if op.value is None:
                continue
            try:
                content = json.loads(json.dumps(op.value))
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(f"the value of {namespace}/{key!r} is not JSON data: {exc}") from exc
            created = min((doc.created_at for doc in versions), default=now)
            tags = [STORE_TAG] if op.index is False else [
                STORE_TAG, *(namespace_tag(namespace[:depth]) for depth in range(len(namespace) + 1))]
            entries.append({
                "content": content, "type": "custom", "tags": tags, "title": key[:200],
                "source": f"langgraph:{'/'.join(namespace)}#{key}"[:500],
                "extra": {"namespace": list(namespace), "key": key, "created_at": created.isoformat()},
            })
        if entries:
            self.memory.store_many(entries)
        if old:
            self.memory.forget_many(old)
        self._documents.sync()

    # -- BaseStore --------------------------------------------------------------------------------
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (puts of one batch land before its later reads). Every operation is
        checked before any runs: a bad one changes nothing."""
        ops = list(ops)
        for op in ops:
            if isinstance(op, PutOp):
                self._check(tuple(op.namespace))
                if op.ttl is not None:
                    raise NotImplementedError("AgentMemoryStore keeps documents until deleted: ttl is not supported")
            elif isinstance(op, SearchOp | ListNamespacesOp):
                int_arg("limit", op.limit, 0)
                int_arg("offset", op.offset, 0)
            elif not isinstance(op, GetOp):
                raise ValueError(f"unknown store operation {type(op).__name__}")
        results: list[Result] = []
        with self._lock:
            self._documents.sync()
            at = 0
            while at < len(ops):
                op = ops[at]
                if isinstance(op, PutOp):
                    end = at
                    while end < len(ops) and isinstance(ops[end], PutOp):
                        end += 1
                    self._put(ops[at:end])  # type: ignore[arg-type]
                    results += [None] * (end - at)
                    at = end
                    continue
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                else:
                    assert isinstance(op, ListNamespacesOp)
                    results.append(self._list(op))
                at += 1
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` in a worker thread."""
        return await asyncio.to_thread(self.batch, list(ops))
