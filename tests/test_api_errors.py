"""Every bad call of the public API raises an AgentMemoryError subclass, the right one, and
changes nothing (in the style of httpx's "every transport error is mapped" test).

Each case is one bad call on a memory that holds two items; after it, every file under the test
directory is byte for byte what it was (lock files aside). No index is touched: every call fails
before it would need one, so the sweep is fast.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from agent_memory import (
    AgentMemory,
    AgentMemoryError,
    ConfigurationError,
    InvalidArgumentError,
    ItemMetadata,
    ItemNotFoundError,
    MemoryConfig,
    MemoryCriteria,
    MemoryItem,
    MemorySnapshot,
    StoreError,
)
from agent_memory.errors import InvalidIdError, MemoryClosedError, TransformError
from agent_memory.limits import MAX_QUERY_CHARS, MAX_RELATED, MAX_TAGS, MAX_TITLE_CHARS
from agent_memory.models.items import ExcerptTransform, FilteredTransform, FirstNTransform

NO_INDEX = MemoryConfig(index_on_store=False)
BIG = "x" * 10_000_000
"""A 10 MB string: must never come back inside an error message."""
MAX_MESSAGE_CHARS = 1_000


@dataclass(frozen=True)
class Env:
    memory: AgentMemory
    tmp: Path
    text_id: str
    json_id: str
    a_file: Path
    snapshot: MemorySnapshot


@dataclass(frozen=True)
class BadCall:
    name: str
    call: Callable[[Env], Any]
    error: type[AgentMemoryError]


def _nested_list(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth - 1):
        value = [value]
    return value


def _cyclic() -> list[Any]:
    value: list[Any] = []
    value.append(value)
    return value


def _closed(env: Env) -> AgentMemory:
    other = AgentMemory("agent", env.tmp / "memory", config=NO_INDEX)
    other.close()
    return other


def _snapshot_with(env: Env, **item_changes: Any) -> MemorySnapshot:
    items = list(env.snapshot.items)
    items[0] = items[0].model_copy(update=item_changes)
    return env.snapshot.model_copy(update={"items": tuple(items)})


CONSTRUCTOR = [
    BadCall("agent-id-escapes", lambda e: AgentMemory("../x", e.tmp, config=NO_INDEX), InvalidIdError),
    BadCall("agent-id-int", lambda e: AgentMemory(123, e.tmp, config=NO_INDEX), InvalidIdError),
    BadCall("agent-id-10mb", lambda e: AgentMemory(BIG, e.tmp, config=NO_INDEX), InvalidIdError),
    BadCall("agent-id-surrogate", lambda e: AgentMemory("a\ud800", e.tmp, config=NO_INDEX), InvalidIdError),
    BadCall("memory-dir-is-a-file", lambda e: AgentMemory("agent", e.a_file, config=NO_INDEX), ConfigurationError),
    BadCall("memory-dir-under-a-file", lambda e: AgentMemory("agent", e.a_file / "m", config=NO_INDEX), ConfigurationError),
    BadCall("memory-dir-int", lambda e: AgentMemory("agent", 123, config=NO_INDEX), InvalidArgumentError),
    BadCall("memory-dir-nul", lambda e: AgentMemory("agent", str(e.tmp / "a\x00b"), config=NO_INDEX), InvalidArgumentError),
    BadCall("config-dict", lambda e: AgentMemory("agent", e.tmp, config={"chunk_tokens": 64}), InvalidArgumentError),
    BadCall("token-counter-str", lambda e: AgentMemory("agent", e.tmp, token_counter="o200k_base"), InvalidArgumentError),
    BadCall("index-object", lambda e: AgentMemory("agent", e.tmp, index=object()), InvalidArgumentError),
    BadCall("plugins-list", lambda e: AgentMemory("agent", e.tmp, plugins=[]), InvalidArgumentError),
    BadCall("observer-without-on-event", lambda e: AgentMemory("agent", e.tmp, observers=[object()]), InvalidArgumentError),
    BadCall("observers-not-a-list", lambda e: AgentMemory("agent", e.tmp, observers=5), InvalidArgumentError),
    BadCall("unknown-keyword", lambda e: AgentMemory("agent", e.tmp, colour="red"), InvalidArgumentError),
]

STORE = [
    BadCall("content-object", lambda e: e.memory.store(object()), InvalidArgumentError),
    BadCall("content-nan", lambda e: e.memory.store({"x": math.nan}), InvalidArgumentError),
    BadCall("content-complex-key", lambda e: e.memory.store({1j: 2}), InvalidArgumentError),
    BadCall("content-set", lambda e: e.memory.store({"s": {1, 2}}), InvalidArgumentError),
    BadCall("content-surrogate", lambda e: e.memory.store("ok \ud800"), InvalidArgumentError),
    BadCall("content-json-surrogate-value", lambda e: e.memory.store({"k": "\udfff"}), InvalidArgumentError),
    BadCall("content-json-surrogate-key", lambda e: e.memory.store({"\ud800": 1}), InvalidArgumentError),
    BadCall("content-5000-deep", lambda e: e.memory.store(_nested_list(5_000)), InvalidArgumentError),
    BadCall("content-101-deep", lambda e: e.memory.store(_nested_list(101)), InvalidArgumentError),
    BadCall("content-cyclic", lambda e: e.memory.store(_cyclic()), InvalidArgumentError),
    BadCall("type-unknown", lambda e: e.memory.store("x", type="bogus"), InvalidArgumentError),
    BadCall("type-int", lambda e: e.memory.store("x", type=5), InvalidArgumentError),
    BadCall("source-none", lambda e: e.memory.store("x", source=None), InvalidArgumentError),
    BadCall("source-10mb", lambda e: e.memory.store("x", source=BIG), InvalidArgumentError),
    BadCall("source-surrogate", lambda e: e.memory.store("x", source="\ud800"), InvalidArgumentError),
    BadCall("tags-6000", lambda e: e.memory.store("x", tags=[f"t{i}" for i in range(6_000)]), InvalidArgumentError),
    BadCall("tags-one-too-many", lambda e: e.memory.store("x", tags=[f"t{i}" for i in range(MAX_TAGS + 1)]), InvalidArgumentError),
    BadCall("tags-a-string", lambda e: e.memory.store("x", tags="research"), InvalidArgumentError),
    BadCall("tags-ints", lambda e: e.memory.store("x", tags=[1, 2]), InvalidArgumentError),
    BadCall("tags-not-iterable", lambda e: e.memory.store("x", tags=5), InvalidArgumentError),
    BadCall("tag-too-long", lambda e: e.memory.store("x", tags=["t" * 65]), InvalidArgumentError),
    BadCall("tag-surrogate", lambda e: e.memory.store("x", tags=["\ud800"]), InvalidArgumentError),
    BadCall("related-malformed", lambda e: e.memory.store("x", related_to=["not-an-id"]), InvalidIdError),
    BadCall("related-unknown", lambda e: e.memory.store("x", related_to=["mem_000000000000"]), ItemNotFoundError),
    BadCall("related-too-many", lambda e: e.memory.store("x", related_to=[e.text_id] * (MAX_RELATED + 1)), InvalidArgumentError),
    BadCall("related-a-string", lambda e: e.memory.store("x", related_to=e.text_id), InvalidArgumentError),
    BadCall("title-100kb", lambda e: e.memory.store("x", title="t" * 100_000), InvalidArgumentError),
    BadCall("title-one-too-long", lambda e: e.memory.store("x", title="t" * (MAX_TITLE_CHARS + 1)), InvalidArgumentError),
    BadCall("title-surrogate", lambda e: e.memory.store("x", title="\ud800"), InvalidArgumentError),
    BadCall("title-int", lambda e: e.memory.store("x", title=5), InvalidArgumentError),
    BadCall("media-type-too-long", lambda e: e.memory.store("x", media_type="t/" + "x" * 300), InvalidArgumentError),
    BadCall("extra-list", lambda e: e.memory.store("x", extra=[1]), InvalidArgumentError),
    BadCall("extra-object", lambda e: e.memory.store("x", extra={"a": object()}), InvalidArgumentError),
    BadCall("extra-deep", lambda e: e.memory.store("x", extra={"a": _nested_list(5_000)}), InvalidArgumentError),
    BadCall("extra-huge", lambda e: e.memory.store("x", extra={"a": "x" * 20_000}), InvalidArgumentError),
    BadCall("extra-surrogate", lambda e: e.memory.store("x", extra={"a": "\ud800"}), InvalidArgumentError),
    BadCall("timestamp-garbage", lambda e: e.memory.store("x", timestamp="yesterday"), InvalidArgumentError),
    BadCall("unknown-keyword", lambda e: e.memory.store("x", colour="red"), InvalidArgumentError),
    BadCall("no-content", lambda e: e.memory.store(), InvalidArgumentError),
    BadCall("positional-type", lambda e: e.memory.store("x", "custom"), InvalidArgumentError),
    BadCall("item-with-bad-metadata", lambda e: e.memory.store(MemoryItem(id="x", metadata={"title": 5})), InvalidArgumentError),
]

STORE_MANY = [
    BadCall("not-a-list", lambda e: e.memory.store_many(5), InvalidArgumentError),
    BadCall("a-single-dict", lambda e: e.memory.store_many({"content": "x"}), InvalidArgumentError),
    BadCall("entry-without-content", lambda e: e.memory.store_many([{"type": "custom"}]), InvalidArgumentError),
    BadCall("entry-a-string", lambda e: e.memory.store_many(["text"]), InvalidArgumentError),
    BadCall("second-entry-bad", lambda e: e.memory.store_many([{"content": "ok"}, {"content": object()}]), InvalidArgumentError),
    BadCall("entry-unknown-key", lambda e: e.memory.store_many([{"content": "ok", "colour": "red"}]), InvalidArgumentError),
    BadCall("entry-6000-tags", lambda e: e.memory.store_many([{"content": "ok", "tags": [f"t{i}" for i in range(6_000)]}]), InvalidArgumentError),
]

GET = [
    BadCall("int", lambda e: e.memory.get(123), InvalidIdError),
    BadCall("none", lambda e: e.memory.get(None), InvalidIdError),
    BadCall("traversal", lambda e: e.memory.get("../../etc/passwd"), InvalidIdError),
    BadCall("10mb", lambda e: e.memory.get(BIG), InvalidIdError),
    BadCall("unknown", lambda e: e.memory.get("mem_000000000000"), ItemNotFoundError),
    BadCall("no-argument", lambda e: e.memory.get(), InvalidArgumentError),
]

RETRIEVE = [
    BadCall("transform-int", lambda e: e.memory.retrieve(e.text_id, 123), TransformError),
    BadCall("rewrite-bad-id", lambda e: e.memory.rewrite("../items", "x"), InvalidIdError),
    BadCall("rewrite-unknown-id", lambda e: e.memory.rewrite("mem_000000000000", "x"), ItemNotFoundError),
    BadCall("rewrite-object", lambda e: e.memory.rewrite(e.text_id, object()), InvalidArgumentError),
    BadCall("rewrite-surrogate", lambda e: e.memory.rewrite(e.text_id, "x\ud800"), InvalidArgumentError),
    BadCall("transform-object", lambda e: e.memory.retrieve(e.text_id, object()), TransformError),
    BadCall("transform-unknown-name", lambda e: e.memory.retrieve(e.text_id, "nonsense"), TransformError),
    BadCall("transform-bad-value", lambda e: e.memory.retrieve(e.text_id, {"type": "first_n", "n": 0}), TransformError),
    BadCall("transform-10mb-key", lambda e: e.memory.retrieve(e.text_id, {"type": "full", BIG: 1}), TransformError),
    BadCall("pattern-invalid", lambda e: e.memory.retrieve(e.text_id, {"type": "filtered", "pattern": "("}), TransformError),
    BadCall("pattern-huge-repeat", lambda e: e.memory.retrieve(e.text_id, {"type": "filtered", "pattern": "a{99999999999}"}), TransformError),
    BadCall("pattern-too-slow", lambda e: e.memory.retrieve(e.text_id, {"type": "filtered", "pattern": "(a|aa)+$"}), TransformError),
    BadCall("json-path-on-text", lambda e: e.memory.retrieve(e.text_id, {"type": "filtered", "json_path": "a"}), TransformError),
    BadCall("page-past-the-end", lambda e: e.memory.retrieve(e.text_id, page=99), TransformError),
    BadCall("max-tokens-50", lambda e: e.memory.retrieve(e.text_id, max_tokens=50), InvalidArgumentError),
    BadCall("max-tokens-huge", lambda e: e.memory.retrieve(e.text_id, max_tokens=10**9), InvalidArgumentError),
    BadCall("max-tokens-str", lambda e: e.memory.retrieve(e.text_id, max_tokens="500"), InvalidArgumentError),
    BadCall("page-0", lambda e: e.memory.retrieve(e.text_id, page=0), InvalidArgumentError),
    BadCall("page-str", lambda e: e.memory.retrieve(e.text_id, page="2"), InvalidArgumentError),
    BadCall("page-bool", lambda e: e.memory.retrieve(e.text_id, page=True), InvalidArgumentError),
    BadCall("raw-str", lambda e: e.memory.retrieve(e.text_id, raw="yes"), InvalidArgumentError),
    BadCall("unknown-keyword", lambda e: e.memory.retrieve(e.text_id, colour="red"), InvalidArgumentError),
    BadCall("bad-id", lambda e: e.memory.retrieve("mem_12"), InvalidIdError),
    BadCall("unknown-id", lambda e: e.memory.retrieve("mem_000000000000"), ItemNotFoundError),
]

QUERY = [
    BadCall("tags-10000", lambda e: e.memory.query(tags=[f"t{i}" for i in range(10_000)]), InvalidArgumentError),
    BadCall("text-10mb", lambda e: e.memory.query(text=BIG), InvalidArgumentError),
    BadCall("text-one-too-long", lambda e: e.memory.query(text="q" * (MAX_QUERY_CHARS + 1)), InvalidArgumentError),
    BadCall("text-surrogate", lambda e: e.memory.query(text="\ud800"), InvalidArgumentError),
    BadCall("source-surrogate", lambda e: e.memory.query(source="\ud800"), InvalidArgumentError),
    BadCall("tag-surrogate", lambda e: e.memory.query(tags=["\ud800"]), InvalidArgumentError),
    BadCall("limit-0", lambda e: e.memory.query(limit=0), InvalidArgumentError),
    BadCall("limit-huge", lambda e: e.memory.query(limit=10**6), InvalidArgumentError),
    BadCall("type-unknown", lambda e: e.memory.query(type="bogus"), InvalidArgumentError),
    BadCall("since-garbage", lambda e: e.memory.query(since="not a date"), InvalidArgumentError),
    BadCall("unknown-filter", lambda e: e.memory.query(colour="red"), InvalidArgumentError),
    BadCall("criteria-text-twice", lambda e: e.memory.query("apollo", text="apollo"), InvalidArgumentError),
    BadCall("criteria-an-int", lambda e: e.memory.query(5), InvalidArgumentError),
    BadCall("override-revalidated", lambda e: e.memory.query(MemoryCriteria(text="apollo"), limit=0), InvalidArgumentError),
]

MODELS = [
    BadCall("criteria-limit-0", lambda e: MemoryCriteria(limit=0), InvalidArgumentError),
    BadCall("criteria-too-many-tags", lambda e: MemoryCriteria(tags=[f"t{i}" for i in range(MAX_TAGS + 1)]), InvalidArgumentError),
    BadCall("criteria-text-int", lambda e: MemoryCriteria(text=5), InvalidArgumentError),
    BadCall("criteria-unknown", lambda e: MemoryCriteria(colour="red"), InvalidArgumentError),
    BadCall("criteria-until-garbage", lambda e: MemoryCriteria(until="soon"), InvalidArgumentError),
    BadCall("metadata-10mb-source", lambda e: ItemMetadata(source=BIG), InvalidArgumentError),
    BadCall("filtered-pattern-too-long", lambda e: FilteredTransform(pattern="x" * 501), InvalidArgumentError),
    BadCall("excerpt-around-surrogate", lambda e: ExcerptTransform(around="\ud800"), InvalidArgumentError),
    BadCall("first-n-0", lambda e: FirstNTransform(n=0), InvalidArgumentError),
    BadCall("item-no-id", lambda e: MemoryItem(content="x"), InvalidArgumentError),
]

SNAPSHOTS = [
    BadCall("load-missing", lambda e: MemorySnapshot.load(e.tmp / "missing.json"), StoreError),
    BadCall("load-a-directory", lambda e: MemorySnapshot.load(e.tmp), StoreError),
    BadCall("load-not-json", lambda e: MemorySnapshot.load(e.tmp / "bad.json"), StoreError),
    BadCall("load-deep-json", lambda e: MemorySnapshot.load(e.tmp / "deep.json"), StoreError),
    BadCall("load-not-utf8", lambda e: MemorySnapshot.load(e.tmp / "latin.json"), StoreError),
    BadCall("load-not-a-snapshot", lambda e: MemorySnapshot.load(e.tmp / "list.json"), StoreError),
    BadCall("load-int-path", lambda e: MemorySnapshot.load(123), InvalidArgumentError),
    BadCall("save-missing-dir", lambda e: e.snapshot.save(e.tmp / "no" / "such" / "dir.json"), StoreError),
    BadCall("save-onto-a-directory", lambda e: e.snapshot.save(e.tmp), StoreError),
    BadCall("save-int-path", lambda e: e.snapshot.save(123), InvalidArgumentError),
    BadCall(
        "save-surrogate-content",
        lambda e: _snapshot_with(e, content="\ud800").save(e.tmp / "s.json"),
        InvalidArgumentError,
    ),
    BadCall("restore-a-string", lambda e: e.memory.restore("snapshot.json"), InvalidArgumentError),
    BadCall("restore-none", lambda e: e.memory.restore(None), InvalidArgumentError),
    BadCall(
        "restore-duplicate-ids",
        lambda e: e.memory.restore(e.snapshot.model_copy(update={"items": e.snapshot.items * 2})),
        InvalidArgumentError,
    ),
    BadCall("restore-sha-mismatch", lambda e: e.memory.restore(_snapshot_with(e, content="tampered")), StoreError),
    BadCall("restore-id-escapes", lambda e: e.memory.restore(_snapshot_with(e, id="../../x")), InvalidIdError),
    BadCall("restore-surrogate-content", lambda e: e.memory.restore(_snapshot_with(e, content="\ud800")), InvalidArgumentError),
    BadCall("restore-deep-content", lambda e: e.memory.restore(_snapshot_with(e, content=_nested_list(5_000))), InvalidArgumentError),
]

CONFIG = [
    BadCall("retrieve-max-tokens-50", lambda e: MemoryConfig(retrieve_max_tokens=50), ConfigurationError),
    BadCall("retrieve-max-tokens-299", lambda e: MemoryConfig(retrieve_max_tokens=299), ConfigurationError),
    BadCall("chunk-tokens-0", lambda e: MemoryConfig(chunk_tokens=0), ConfigurationError),
    BadCall("overlap-not-below-chunk", lambda e: MemoryConfig(chunk_tokens=64, chunk_overlap_tokens=64), ConfigurationError),
    BadCall("chroma-mode-unknown", lambda e: MemoryConfig(chroma_mode="cloud"), ConfigurationError),
    BadCall("chroma-port-0", lambda e: MemoryConfig(chroma_port=0), ConfigurationError),
    BadCall("token-encoding-unknown", lambda e: MemoryConfig(token_encoding="p50k_base"), ConfigurationError),
    BadCall("lexical-weight-nan", lambda e: MemoryConfig(lexical_weight=math.nan), ConfigurationError),
    BadCall("batch-size-str", lambda e: MemoryConfig(embedding_batch_size="many"), ConfigurationError),
    BadCall("unknown-field", lambda e: MemoryConfig(colour="red"), ConfigurationError),
]

CLOSED = [
    BadCall("store-after-close", lambda e: _closed(e).store("x"), MemoryClosedError),
    BadCall("get-after-close", lambda e: _closed(e).get(e.text_id), MemoryClosedError),
    BadCall("query-after-close", lambda e: _closed(e).query(), MemoryClosedError),
    BadCall("retrieve-after-close", lambda e: _closed(e).retrieve(e.text_id), MemoryClosedError),
    BadCall("len-after-close", lambda e: len(_closed(e)), MemoryClosedError),
    BadCall("with-after-close", lambda e: _closed(e).__enter__(), MemoryClosedError),
]

CASES = [
    *(("AgentMemory", c) for c in CONSTRUCTOR),
    *(("store", c) for c in STORE),
    *(("store_many", c) for c in STORE_MANY),
    *(("get", c) for c in GET),
    *(("retrieve", c) for c in RETRIEVE),
    *(("query", c) for c in QUERY),
    *(("models", c) for c in MODELS),
    *(("snapshot", c) for c in SNAPSHOTS),
    *(("MemoryConfig", c) for c in CONFIG),
    *(("closed", c) for c in CLOSED),
]


def _files(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` (lock files aside) with its bytes (``None`` for directories)."""
    return {
        str(path.relative_to(root)): (None if path.is_dir() else path.read_bytes())
        for path in sorted(root.rglob("*"))
        if not path.name.endswith(".lock")
    }


@pytest.fixture
def env(tmp_path: Path) -> Env:
    memory = AgentMemory("agent", tmp_path / "memory", config=NO_INDEX)
    text_id = memory.store("a" * 40 + "b", title="hostile line")
    json_id = memory.store({"rows": [{"a": 1}]}, type="database_result")
    a_file = tmp_path / "a-file"
    a_file.write_text("not a directory", encoding="utf-8")
    for name, data in (
        ("bad.json", b"not json"), ("deep.json", b"[" * 100_000), ("latin.json", b'{"agent_id": "\xff"}'),
        ("list.json", b"[1, 2]"),
    ):
        (tmp_path / name).write_bytes(data)
    return Env(memory, tmp_path, text_id, json_id, a_file, memory.snapshot())


def test_the_sweep_is_large_enough() -> None:
    assert len(CASES) >= 80
    assert len({(group, case.name) for group, case in CASES}) == len(CASES)


@pytest.mark.parametrize(("group", "case"), CASES, ids=[f"{group}-{case.name}" for group, case in CASES])
def test_bad_call_raises_the_mapped_error_and_changes_nothing(env: Env, group: str, case: BadCall) -> None:
    before = _files(env.tmp)

    with pytest.raises(AgentMemoryError) as info:
        case.call(env)

    assert isinstance(info.value, case.error), f"{type(info.value).__name__}: {info.value}"
    assert len(str(info.value)) < MAX_MESSAGE_CHARS, str(info.value)[:300]
    assert _files(env.tmp) == before
    fresh = AgentMemory("agent", env.tmp / "memory", config=NO_INDEX)
    assert [r.id for r in fresh.records()] == [env.text_id, env.json_id]


def test_mapped_errors_keep_the_original_as_cause(env: Env) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        env.memory.query(limit=0)
    assert type(info.value.__cause__).__name__ == "ValidationError"
    assert info.value.errors and info.value.errors[0]["loc"] == ("limit",)
    assert isinstance(info.value, ValueError) and isinstance(info.value, TypeError)
    with pytest.raises(ConfigurationError) as config_error:
        MemoryConfig(retrieve_max_tokens=50)
    assert "retrieve_max_tokens" in str(config_error.value) and "300" in str(config_error.value)


def test_a_good_call_after_the_sweep_still_works(env: Env) -> None:
    for _, case in CASES[:40]:
        with pytest.raises(AgentMemoryError):
            case.call(env)
    new_id = env.memory.store({"ok": True}, tags=["after"])
    assert env.memory.get(new_id).content == {"ok": True}
    assert json.loads(env.memory.retrieve(env.json_id).content) == {"rows": [{"a": 1}]}
