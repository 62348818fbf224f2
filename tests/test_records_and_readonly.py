"""Issue 20, findings 5, 6, 12, 13 and 15 (typed parameters): records of a newer version are kept
and refused, a read-only memory reads, blank content and blank queries are refused, JSON keeps its
key order, and ``AgentMemory.query`` takes typed keyword-only filters.

Real files, the real embedded chromadb and the real embedding model. The read-only cases use a
real read-only bind mount (as root) and a real unprivileged user on a ``chmod -R a-w`` copy: no
file system call is faked.
"""

from __future__ import annotations

import enum
import hashlib
import inspect
import json
import os
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from actions import MemoryToolkit
from agent_memory import AgentMemory, InvalidArgumentError, MemoryConfig, MemoryCriteria, MemorySnapshot
from agent_memory.errors import UnsupportedRecordError
from agent_memory.models.items import ItemRecord, content_from_bytes, content_to_bytes
from agent_memory.observers import NoticeRecorder, RecordQuarantined, RecordUnsupported
from agent_memory.records.prepare import result_store_arguments

ROOT = Path(__file__).resolve().parent.parent

TEXTS = {
    "apollo": "Apollo 11 landed on the Moon in July 1969; Armstrong and Aldrin walked on the surface.",
    "soup": "A recipe for lentil soup with cumin, carrots and a squeeze of lemon.",
    "violin": "Antonio Stradivari made violins in Cremona around 1700; players still prize them.",
}


@pytest.fixture
def stored(tmp_path: Path) -> tuple[AgentMemory, dict[str, str]]:
    memory = AgentMemory("agent", tmp_path / "memory")
    return memory, {key: memory.store(text, tags=[key]) for key, text in TEXTS.items()}


def _items_path(memory: AgentMemory) -> Path:
    return memory.path / "items.jsonl"


def _edit_record(memory: AgentMemory, item_id: str, edit: Any) -> bytes:
    """Replace the line of ``item_id`` by ``edit(record as a dict)`` (as a newer version, or a
    hand, would write it); returns the new line's bytes."""
    path = _items_path(memory)
    lines = path.read_bytes().split(b"\n")
    for n, line in enumerate(lines):
        if line and json.loads(line)["id"] == item_id:
            lines[n] = json.dumps(edit(json.loads(line))).encode("utf-8")
            path.write_bytes(b"\n".join(lines))
            return lines[n]
    raise AssertionError(f"{item_id} not in {path}")


def _reopen(memory: AgentMemory, *observers: Any, **config: Any) -> AgentMemory:
    return AgentMemory(memory.agent_id, memory.memory_dir, config=MemoryConfig(**config), observers=list(observers))


# -- finding 5: records of a newer version --------------------------------------------------------

NEWER = {
    "schema-version-2": lambda r: {**r, "schema_version": 2},
    "unknown-field": lambda r: {**r, "embedding_model": "v9"},
    "unknown-metadata-field": lambda r: {**r, "metadata": {**r["metadata"], "colour": "red"}},
    "unknown-type": lambda r: {**r, "type": "video_transcript"},
}


@pytest.mark.parametrize("edit", NEWER.values(), ids=NEWER.keys())
def test_a_record_of_a_newer_version_is_kept_in_place_and_refused_loudly(
    stored: tuple[AgentMemory, dict[str, str]], edit: Any
) -> None:
    memory, ids = stored
    line = _edit_record(memory, ids["soup"], edit)
    before = _items_path(memory).read_bytes()
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder)

    # every other item reads, lists and is found; the newer one is refused by name
    assert reader.get(ids["apollo"]).content == TEXTS["apollo"]
    assert [r.id for r in reader.records()] == [ids["apollo"], ids["violin"]]
    with pytest.raises(UnsupportedRecordError) as caught:
        reader.get(ids["soup"])
    assert caught.value.item_id == ids["soup"] and "newer version" in str(caught.value)
    with pytest.raises(UnsupportedRecordError):
        reader.retrieve(ids["soup"])
    # its chunks are still in the index (indexed before the edit): queries skip it
    assert reader.query(text="lentil soup with cumin", limit=3)[0].item.id != ids["soup"]
    assert {h.item.id for h in reader.query(limit=10)} == {ids["apollo"], ids["violin"]}
    assert ids["soup"] in reader  # its id stays taken

    # never moved, never rewritten by a reader
    assert _items_path(memory).read_bytes() == before
    assert line in before
    assert not (memory.path / "items.jsonl.corrupt").exists()
    assert recorder.of_type(RecordQuarantined) == []
    (event,) = recorder.of_type(RecordUnsupported)
    assert event.item_id == ids["soup"] and event.path == str(_items_path(memory))
    assert event.schema_version == (2 if b'"schema_version": 2' in line else None)


def test_rewrites_keep_a_newer_record_byte_for_byte(stored: tuple[AgentMemory, dict[str, str]]) -> None:
    memory, ids = stored
    soup_blob = memory.get(ids["soup"]).metadata.content_sha256
    line = _edit_record(memory, ids["soup"], NEWER["schema-version-2"])
    reader = _reopen(memory)

    assert reader.forget(ids["apollo"]) is True
    assert line in _items_path(memory).read_bytes()
    reader.rewrite(ids["violin"], "Stradivari's violins, redacted.")
    assert line in _items_path(memory).read_bytes()
    fresh = reader.store("stored beside a newer record")
    assert line in _items_path(memory).read_bytes()

    other = AgentMemory("other", memory.memory_dir)
    other.store("an item of another memory")
    reader.restore(other.snapshot())
    assert line in _items_path(memory).read_bytes()
    reader.clear()
    assert line + b"\n" == _items_path(memory).read_bytes()  # only the newer record is left
    assert (memory.path / "content" / soup_blob).is_file()  # with the blob it names
    assert fresh not in reader and ids["soup"] in reader

    # what this version cannot read it does not change, copy or reuse
    with pytest.raises(UnsupportedRecordError):
        reader.forget(ids["soup"])
    with pytest.raises(UnsupportedRecordError):
        reader.rewrite(ids["soup"], "overwritten")
    with pytest.raises(InvalidArgumentError, match="taken"):
        reader.store("same id", item_id=ids["soup"])
    with pytest.raises(UnsupportedRecordError):
        reader.snapshot()
    assert line + b"\n" == _items_path(memory).read_bytes()


def test_garbage_is_still_quarantined_beside_a_kept_newer_record(stored: tuple[AgentMemory, dict[str, str]]) -> None:
    memory, ids = stored
    newer = _edit_record(memory, ids["soup"], NEWER["unknown-type"])
    garbage = b'{"id": "not-a-memory-id", "schema_version": 7}'
    _edit_record(memory, ids["apollo"], lambda r: json.loads(garbage))
    recorder = NoticeRecorder()
    reader = _reopen(memory, recorder)

    assert [r.id for r in reader.records()] == [ids["violin"]]
    (quarantined,) = recorder.of_type(RecordQuarantined)
    assert quarantined.line_no == 1
    assert garbage not in _items_path(memory).read_bytes()
    assert newer in _items_path(memory).read_bytes()
    assert [e.item_id for e in recorder.of_type(RecordUnsupported)] == [ids["soup"]]


def test_version_1_records_are_written_as_before_and_read_with_or_without_the_field(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    item_id = memory.store("a note")
    (line,) = _items_path(memory).read_bytes().splitlines()
    assert "schema_version" not in json.loads(line)  # releases before the field read it
    assert memory.get(item_id).schema_version == 1
    with_field = json.dumps({**json.loads(line), "schema_version": 1}).encode()
    _items_path(memory).write_bytes(with_field + b"\n")
    assert _reopen(memory).get(item_id).content == "a note"
    with pytest.raises(InvalidArgumentError):
        ItemRecord(id=item_id, schema_version=2)  # this version cannot write a newer record


# -- finding 6: a read-only memory ----------------------------------------------------------------

READER = r"""
import json, os, sys
import agent_memory
from agent_memory import AgentMemory, StoreError
from agent_memory.observers import NoticeRecorder
import agent_memory.observers
IndexReadOnly = getattr(agent_memory.observers, "IndexReadOnly", None)  # so that an older version fails on reads
memory_dir, expected = sys.argv[1], json.loads(sys.argv[2])
recorder = NoticeRecorder()
out = {}
with AgentMemory("agent", memory_dir, observers=[recorder]) as memory:
    out["read_only"] = getattr(memory, "read_only", None)
    out["records"] = [r.id for r in memory.records()]
    out["get"] = {i: memory.get(i).content for i in out["records"]}
    out["retrieve"] = memory.retrieve(expected["violin"], "summary").content
    out["query"] = [h.item.id for h in memory.query(text="stringed instruments from Cremona", limit=2)]
    out["keywords"] = [h.item.id for h in memory.query(text="lentil cumin", limit=1)]
    out["listing"] = [h.item.id for h in memory.query(limit=10)]
    try:
        memory.store("a write")
        out["store"] = "stored"
    except StoreError as exc:
        out["store"] = type(exc).__name__
    events = recorder.of_type(IndexReadOnly) if IndexReadOnly is not None else []
    out["details"] = [e.detail for e in events]
    out["unindexed"] = sorted({i for e in events for i in e.unindexed_ids})
    copies = [d.split(" in ")[1].split(" (")[0] for d in out["details"] if "private copy" in d]
out["copies_left"] = [c for c in copies if os.path.exists(c)]
print(json.dumps(out))
"""


def _fingerprint(root: Path) -> dict[str, tuple[int, str, int]]:
    """Every file and directory under ``root``: size, sha256, mtime (ns)."""
    found: dict[str, tuple[int, str, int]] = {}
    for path in sorted(root.rglob("*")):
        stat = path.stat()
        digest = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else "dir"
        found[str(path.relative_to(root))] = (stat.st_size, digest, stat.st_mtime_ns)
    return found


@pytest.fixture
def snapshot_dir() -> Iterator[Path]:
    """A memory that another user may read: a directory outside pytest's private tmp tree."""
    base = Path(tempfile.mkdtemp(prefix="am-readonly-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(base)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def _make_memory(base: Path) -> tuple[dict[str, str], str, list[str], list[str]]:
    """A memory with three indexed items and one stored but never indexed; returns the ids, the
    unindexed id, and what a writable memory answers to the reader's two text queries."""
    memory = AgentMemory("agent", base / "memory")
    ids = {key: memory.store(text, tags=[key]) for key, text in TEXTS.items()}
    query = [h.item.id for h in memory.query(text="stringed instruments from Cremona", limit=2)]
    keywords = [h.item.id for h in memory.query(text="lentil cumin", limit=1)]
    memory.close()
    late = AgentMemory("agent", base / "memory", config=MemoryConfig(index_on_store=False))
    unindexed = late.store("Stored after the index was built and never indexed: a note on tides.")
    late.close()
    return ids, unindexed, query, keywords


def _check_reader(out: dict[str, Any], ids: dict[str, str], unindexed: str, query: list[str],
                  keywords: list[str]) -> None:
    assert out["read_only"] is True
    assert out["records"] == [*ids.values(), unindexed]
    assert out["get"][ids["apollo"]] == TEXTS["apollo"] and out["get"][unindexed].startswith("Stored after")
    assert "Stradivari" in out["retrieve"]
    assert out["query"] == query and out["query"][0] == ids["violin"]
    assert out["keywords"] == keywords == [ids["soup"]]
    assert set(out["listing"]) == set(ids.values())  # the unindexed item cannot be indexed here...
    assert out["unindexed"] == [unindexed]  # ...and is reported
    assert any("private copy" in d for d in out["details"]) and any("read-only" in d for d in out["details"])
    assert out["store"] == "StoreError"
    assert out["copies_left"] == []  # the private copy of the index is gone after close


def _run_reader(memory_dir: Path, ids: dict[str, str], *, prefix: tuple[str, ...] = (),
                env: dict[str, str] | None = None) -> dict[str, Any]:
    result = subprocess.run(
        [*prefix, sys.executable, "-c", READER, str(memory_dir), json.dumps(ids)],
        capture_output=True, text=True, timeout=600, cwd=str(ROOT), env=env,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_memory_on_a_read_only_mount_reads_without_writing(snapshot_dir: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("a read-only bind mount needs root; test_a_read_only_memory_reads_as_an_unprivileged_user covers it")
    ids, unindexed, query, keywords = _make_memory(snapshot_dir)
    mount = snapshot_dir / "mounted"
    mount.mkdir()
    bound = subprocess.run(["mount", "--bind", str(snapshot_dir / "memory"), str(mount)], capture_output=True, text=True)
    if bound.returncode != 0:
        pytest.skip(f"cannot bind-mount here ({bound.stderr.strip()}); the unprivileged-user test covers it")
    try:
        remount = subprocess.run(["mount", "-o", "remount,ro,bind", str(mount)], capture_output=True, text=True)
        if remount.returncode != 0:
            pytest.skip(f"cannot remount read-only here ({remount.stderr.strip()})")
        probe = mount / "probe"
        with pytest.raises(OSError):
            probe.write_text("x")  # really read-only, even for root
        before = _fingerprint(mount)
        out = _run_reader(mount, ids)
        _check_reader(out, ids, unindexed, query, keywords)
        assert _fingerprint(mount) == before
    finally:
        subprocess.run(["umount", str(mount)], check=False)


def test_a_read_only_memory_reads_as_an_unprivileged_user(snapshot_dir: Path) -> None:
    ids, unindexed, query, keywords = _make_memory(snapshot_dir)
    memory_dir = snapshot_dir / "memory"
    subprocess.run(["chmod", "-R", "a+rX,a-w", str(memory_dir)], check=True)
    before = _fingerprint(memory_dir)
    scratch = Path(tempfile.mkdtemp(prefix="am-readonly-home-"))
    scratch.chmod(0o777)
    env = {**os.environ, "HOME": str(scratch), "TMPDIR": str(scratch), "TIKTOKEN_CACHE_DIR": str(scratch / "tiktoken"),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    try:
        if os.geteuid() == 0:
            setpriv = shutil.which("setpriv")
            if setpriv is None:
                pytest.skip("running as root without setpriv: no way to drop to an unprivileged user")
            prefix = (setpriv, "--reuid=65534", "--regid=65534", "--clear-groups")
            denied = subprocess.run([*prefix, "touch", str(memory_dir / "probe")], capture_output=True)
            assert denied.returncode != 0  # the user really cannot write there
            out = _run_reader(memory_dir, ids, prefix=prefix, env=env)
        else:
            out = _run_reader(memory_dir, ids, env=env)
        _check_reader(out, ids, unindexed, query, keywords)
        assert _fingerprint(memory_dir) == before
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


# -- finding 12: blank content, blank queries -----------------------------------------------------


@pytest.mark.parametrize("blank", ["", "   \n\t", b"", None], ids=["empty", "whitespace", "bytes", "none"])
def test_blank_content_is_refused_and_nothing_is_written(tmp_path: Path, blank: Any) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    with pytest.raises(InvalidArgumentError, match="nothing to store"):
        memory.store(blank)
    with pytest.raises(InvalidArgumentError, match="nothing to store"):
        memory.store_many([{"content": "fine"}, {"content": blank}])
    assert not memory.path.exists()
    assert len(memory) == 0


def test_empty_data_and_explicitly_allowed_blanks_are_stored(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    assert memory.get(memory.store({})).content == {}
    assert memory.get(memory.store([])).content == []
    assert memory.get(memory.store("", allow_empty=True)).content == ""
    # a tool that answered nothing is still a result the kernel stores
    arguments = result_store_arguments("", tool="bash")
    assert memory.get(memory.store(arguments.pop("content"), **arguments)).content == ""


def test_a_blank_query_is_refused_and_none_lists_newest_first(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    first = memory.store("first note about rivers", timestamp=datetime(2024, 1, 1))
    second = memory.store("second note about mountains", timestamp=datetime(2024, 1, 2))
    for blank in ("", "  \n"):
        with pytest.raises(InvalidArgumentError, match="leave text out"):
            memory.query(text=blank)
        with pytest.raises(InvalidArgumentError):
            MemoryCriteria(text=blank)
    assert [h.item.id for h in memory.query()] == [second, first]
    assert [h.item.id for h in memory.query(text=None)] == [second, first]


def test_the_tools_answer_a_clear_error_for_blank_content_and_queries(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    toolkit = MemoryToolkit(memory)
    for blank in ("", "   "):
        stored = toolkit.dispatch("store_memory", {"content": blank})
        assert not stored.ok and "empty" in stored.content and "Nothing was stored" in stored.content
        queried = toolkit.dispatch("query_memory", {"query": blank})
        assert not queried.ok and "query is empty" in queried.content and "leave query out" in queried.content
    assert len(memory) == 0
    memory.store("a note")
    listed = toolkit.dispatch("query_memory", {})
    assert listed.ok and "newest first" in listed.content


# -- finding 13: JSON keeps its key order ---------------------------------------------------------


def test_json_content_keeps_its_key_order(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    data = {"zeta": 1, "alpha": 2, "nested": {"b": [3, {"y": 1, "x": 2}], "a": None}}
    item_id = memory.store(data)
    got = memory.get(item_id).content
    assert got == data and json.dumps(got) == json.dumps(data)  # the same keys in the same order
    blob = (memory.path / "content" / memory.get(item_id).metadata.content_sha256).read_bytes()
    assert blob == json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    shown = memory.retrieve(item_id).content
    assert shown.index('"zeta"') < shown.index('"alpha"')
    assert json.dumps(_reopen(memory).get(item_id).content) == json.dumps(data)

    saved = memory.snapshot().save(tmp_path / "snapshot.json")
    copy = AgentMemory("copy", tmp_path, config=MemoryConfig(index_on_store=False))
    copy.restore(MemorySnapshot.load(saved))
    assert json.dumps(copy.get(item_id).content) == json.dumps(data)


def test_what_json_cannot_keep_is_normalised_or_refused(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    assert memory.get(memory.store({"t": (1, 2), 3: "three"})).content == {"t": [1, 2], "3": "three"}
    with pytest.raises(InvalidArgumentError, match="JSON key '1'"):
        memory.store({1: "int", "1": "str"})  # one would silently replace the other


JSON_DATA = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.tuples(children, children)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@given(JSON_DATA)
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_a_json_blob_is_the_standard_librarys_compact_text_whatever_the_data(value: Any) -> None:
    # written by orjson where that is the same text, by json where it would not be (exponents,
    # integers beyond 64 bits, lone surrogates); read back by orjson, by json where it refuses
    try:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except ValueError:  # a lone surrogate is not text
        with pytest.raises(InvalidArgumentError, match="lone surrogate"):
            content_to_bytes(value, "json")
        return
    data, encoding = content_to_bytes(value, "json")
    assert (data, encoding) == (expected, "json")
    assert content_from_bytes(data, "json") == json.loads(expected)


class _Colour(enum.Enum):
    RED = "red"


class _Size(enum.IntEnum):
    LARGE = 3


class _Name(str):
    pass


@pytest.mark.parametrize("value, refused", [
    ([{"v": float("nan")}], "Out of range float values"),
    ({"v": [1.0, float("inf")]}, "Out of range float values"),
    (float("-inf"), "Out of range float values"),
    ([{"colour": _Colour.RED}], "not JSON serializable"),
    ({"when": datetime(2024, 1, 1)}, "not JSON serializable"),
    ([uuid.UUID(int=7)], "not JSON serializable"),
    ({"k": 2**70, "v": 0.5}, None),
    ([{"size": _Size.LARGE, "name": _Name("x")}], None),
    ({_Name("k"): 1.0e-7}, None),
])
def test_only_what_json_writes_is_written_and_as_json_writes_it(value: Any, refused: str | None) -> None:
    # orjson would write NaN as null and an enum, a datetime or a UUID as its value; json refuses
    # them, and a blob must read back as the value stored
    if refused:
        with pytest.raises(InvalidArgumentError, match=refused):
            content_to_bytes(value)
    else:
        expected = json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        assert content_to_bytes(value) == (expected, "json")


def test_a_blob_orjson_cannot_read_is_read_by_json() -> None:
    assert content_from_bytes(b'{"big":123456789012345678901234567890}', "json") == {"big": 123456789012345678901234567890}


def test_json_nested_past_the_bound_or_with_colliding_keys_deep_inside_is_refused(tmp_path: Path) -> None:
    from agent_memory.limits import MAX_JSON_DEPTH

    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))

    def nested(levels: int) -> Any:
        value: Any = "leaf"
        for level in range(levels):
            value = [value] if level % 2 else {"k": value}
        return value

    assert memory.get(memory.store(nested(MAX_JSON_DEPTH))).content == nested(MAX_JSON_DEPTH)  # at the bound
    with pytest.raises(InvalidArgumentError, match=f"more than {MAX_JSON_DEPTH} levels deep"):
        memory.store([{"row": 1}, nested(MAX_JSON_DEPTH)])  # one level more, in the second row
    with pytest.raises(InvalidArgumentError, match="JSON key '2'"):
        memory.store([{"a": 1}, {"b": [{2: "int", "2": "str"}]}])  # a collision three levels down
    assert memory.get(memory.store([{"b": [{2: "int"}]}, ("t",)])).content == [{"b": [{"2": "int"}]}, ["t"]]
    assert len(memory) == 2  # nothing of a refused store was written


def test_a_large_json_result_is_indexed_as_stored_whatever_the_caller_does_to_it_after(tmp_path: Path) -> None:
    from agent_memory.records.prepare import EAGER_COUNT_BYTES

    rows = [{"id": n, "name": f"row{n}", "note": "filler " * 8} for n in range(2_000)]
    rows[7]["name"] = "quetzalcoatlus"
    assert len(json.dumps(rows)) > EAGER_COUNT_BYTES  # handed to the indexing thread encoded
    memory = AgentMemory("agent", tmp_path)
    item_id = memory.store(rows, source="sql")
    rows[7]["name"] = "archaeopteryx"  # the caller reuses its object before the thread indexed it
    rows.append({"id": -1, "name": "archaeopteryx"})
    memory.flush_index()
    found = memory.query("quetzalcoatlus")
    assert [hit.item.id for hit in found] == [item_id] and "quetzalcoatlus" in (found[0].chunk or "")
    assert not any("archaeopteryx" in (hit.chunk or "") for hit in memory.query("archaeopteryx"))
    assert memory.get(item_id).metadata.tokens is not None  # counted by the indexing thread
    assert memory.get(item_id).content[7]["name"] == "quetzalcoatlus"
    memory.close()


def test_a_blob_written_with_sorted_keys_by_an_earlier_version_still_reads_and_restores(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=MemoryConfig(index_on_store=False))
    item_id = memory.store({"placeholder": True})
    old_blob = json.dumps({"zeta": 1, "alpha": 2}, sort_keys=True, separators=(",", ":")).encode("utf-8")
    digest = hashlib.sha256(old_blob).hexdigest()
    (memory.path / "content" / digest).write_bytes(old_blob)
    _edit_record(memory, item_id, lambda r: {**r, "metadata": {**r["metadata"], "content_sha256": digest,
                                                                  "size_bytes": len(old_blob)}})
    reader = _reopen(memory, index_on_store=False)
    assert list(reader.get(item_id).content) == ["alpha", "zeta"]  # as it was written
    copy = AgentMemory("copy", tmp_path, config=MemoryConfig(index_on_store=False))
    copy.restore(reader.snapshot())  # the sha256 of the re-encoded content still matches
    assert copy.get(item_id).metadata.content_sha256 == digest


# -- finding 15: typed keyword-only parameters ----------------------------------------------------


def test_query_takes_typed_keyword_only_filters_and_no_public_method_takes_kwargs() -> None:
    signature = inspect.signature(AgentMemory.query)
    params = signature.parameters
    assert params["criteria"].kind is inspect.Parameter.POSITIONAL_ONLY
    for name in ("text", "type", "source", "tags", "since", "until", "limit"):
        assert params[name].kind is inspect.Parameter.KEYWORD_ONLY, name
        assert params[name].annotation != inspect.Parameter.empty, name
    assert set(MemoryCriteria.model_fields) <= set(params)
    for name, member in inspect.getmembers(AgentMemory, inspect.isfunction):
        if name.startswith("_") and name not in ("__init__", "__contains__", "__len__"):
            continue
        kinds = {p.kind for p in inspect.signature(member).parameters.values()}
        assert inspect.Parameter.VAR_KEYWORD not in kinds, name


def test_query_with_criteria_and_keywords_merges_them(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    a = memory.store("rivers of Europe", tags=["geo"], source="atlas")
    b = memory.store("rivers of Asia", tags=["geo"], source="web")
    memory.store("a cake recipe", tags=["food"], source="atlas")
    assert {h.item.id for h in memory.query(MemoryCriteria(tags=["geo"]))} == {a, b}
    assert [h.item.id for h in memory.query(MemoryCriteria(tags=["geo"]), source="atlas")] == [a]
    assert [h.item.id for h in memory.query(tags=["geo"], source="web", text="rivers")] == [b]
    with pytest.raises(InvalidArgumentError):
        memory.query(colour="red")  # type: ignore[call-arg]
    with pytest.raises(InvalidArgumentError, match="single string"):
        memory.query(tags="geo")


def test_a_remembered_digest_is_only_ever_the_digest_of_those_bytes() -> None:
    from agent_memory.storage.contracts import REMEMBERED_DIGEST_BYTES, sha256_hex

    first = b"a" * REMEMBERED_DIGEST_BYTES
    second = bytearray(first)  # equal bytes, a mutable object: hashed, never remembered
    assert sha256_hex(first) == hashlib.sha256(first).hexdigest() == sha256_hex(first)
    assert sha256_hex(second) == hashlib.sha256(second).hexdigest()
    second[0] = ord("b")
    assert sha256_hex(second) == hashlib.sha256(second).hexdigest() != sha256_hex(first)
    other = b"b" + first[1:]  # another object of the same length
    assert sha256_hex(other) == hashlib.sha256(other).hexdigest()


def test_rows_of_empty_dicts_count_their_own_level_of_nesting() -> None:
    # the rows are read all at once: an empty row is still a level (as json_depth counts it)
    from agent_memory.limits import MAX_JSON_DEPTH, json_depth
    from agent_memory.models.items import _json_shape

    def nested(levels: int) -> Any:
        value: Any = [{}, {}]
        for _ in range(levels - 2):
            value = [value]
        return value

    assert _json_shape(nested(5)).depth == json_depth(nested(5)) == 5
    content_to_bytes(nested(MAX_JSON_DEPTH))
    with pytest.raises(InvalidArgumentError, match="levels deep"):
        content_to_bytes(nested(MAX_JSON_DEPTH + 1))
