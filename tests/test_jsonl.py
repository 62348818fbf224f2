"""JSONL files: torn-line repair, corrupt-line detection, atomic rewrite.

Disk failures are simulated by monkeypatching ``os.replace`` / ``os.fsync`` to raise ``OSError``:
the tests run as any user (a read-only directory does not stop root), and the code under test
must treat these calls failing exactly like a full or broken disk.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from pathlib import Path

import pytest
from pydantic import BaseModel, TypeAdapter

from agent_memory import AgentMemory, MemoryConfig, StoreError
from agent_memory.errors import CorruptRecordError, LockTimeoutError
from agent_memory.fileio import atomic_write, atomic_write_bytes
from agent_memory.observers import NoticeRecorder, RecordQuarantined
from agent_memory.storage.files import jsonl as jsonl_module
from agent_memory.storage.contracts import LogChange, LogEntry
from agent_memory.storage.files.items import FileItemLog
from agent_memory.storage.files.jsonl import JsonlFile


class Row(BaseModel):
    id: str
    n: int


ADAPTER: TypeAdapter[Row] = TypeAdapter(Row)


def _rows(*ns: int) -> list[Row]:
    return [Row(id=f"r{n}", n=n) for n in ns]


def _lines(path: Path) -> list[dict]:
    """Every line of ``path`` parsed strictly (fails on any torn or corrupt line)."""
    data = path.read_bytes()
    assert data.endswith(b"\n"), "file must end with a newline"
    return [json.loads(line) for line in data.decode("utf-8").splitlines()]


@pytest.fixture
def jsonl(tmp_path: Path) -> JsonlFile[Row]:
    return JsonlFile(tmp_path / "sub" / "rows.jsonl", ADAPTER)


def test_append_and_read_back_in_order(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1, 2))
    jsonl.append(_rows(3))
    jsonl.append([])  # nothing to write is a no-op

    assert jsonl.read_all() == _rows(1, 2, 3)
    assert _lines(jsonl.path) == [{"id": "r1", "n": 1}, {"id": "r2", "n": 2}, {"id": "r3", "n": 3}]


def test_missing_file_reads_as_empty(jsonl: JsonlFile[Row]) -> None:
    assert jsonl.read_all() == []
    assert jsonl.file_id() == (0, 0)


def test_read_from_offset_returns_only_new_records(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1, 2))
    first = jsonl.read_from(0)
    jsonl.append(_rows(3, 4))

    tail = jsonl.read_from(first.next_offset)

    assert first.records == _rows(1, 2)
    assert tail.records == _rows(3, 4)
    assert tail.next_offset == jsonl.path.stat().st_size
    assert jsonl.read_from(tail.next_offset).records == []


@pytest.mark.parametrize(
    "fragment",
    [
        pytest.param(b'{"id": "r9", "n"', id="partial-json"),
        pytest.param(b'{"id": "r9", "n": 9}', id="complete-json-without-newline"),
        pytest.param(b"\xe2\x82", id="cut-utf8"),
    ],
)
def test_torn_last_line_is_skipped_then_moved_to_torn_file(jsonl: JsonlFile[Row], fragment: bytes) -> None:
    jsonl.append(_rows(1, 2))
    with open(jsonl.path, "ab") as handle:  # a writer killed mid-append
        handle.write(fragment)
    good_size = jsonl.path.stat().st_size - len(fragment)

    tail = jsonl.read_from(0)
    assert tail.records == _rows(1, 2)
    assert tail.next_offset == good_size  # the torn line is not consumed

    jsonl.append(_rows(3))

    assert jsonl.read_all() == _rows(1, 2, 3)
    assert [line["n"] for line in _lines(jsonl.path)] == [1, 2, 3]
    torn = Path(str(jsonl.path) + ".torn").read_bytes()
    assert torn == fragment + b"\n"  # kept for audit, not silently dropped


def test_torn_file_collects_every_repair(jsonl: JsonlFile[Row]) -> None:
    for n, fragment in ((1, b'{"id"'), (2, b'{"id": "x"')):
        jsonl.append(_rows(n))
        with open(jsonl.path, "ab") as handle:
            handle.write(fragment)
    jsonl.append(_rows(3))

    assert jsonl.read_all() == _rows(1, 2, 3)
    assert Path(str(jsonl.path) + ".torn").read_bytes() == b'{"id"\n{"id": "x"\n'


def test_torn_line_longer_than_the_scan_block_is_repaired(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1))
    fragment = b'{"id": "' + b"x" * 200_000  # spans several 64 KiB scan blocks
    with open(jsonl.path, "ab") as handle:
        handle.write(fragment)

    jsonl.append(_rows(2))

    assert jsonl.read_all() == _rows(1, 2)
    assert Path(str(jsonl.path) + ".torn").read_bytes() == fragment + b"\n"


def test_file_that_is_only_a_torn_line(jsonl: JsonlFile[Row]) -> None:
    jsonl.path.parent.mkdir(parents=True)
    jsonl.path.write_bytes(b'{"id": "r0"')

    assert jsonl.read_all() == []
    jsonl.append(_rows(1))
    assert jsonl.read_all() == _rows(1)
    assert _lines(jsonl.path) == [{"id": "r1", "n": 1}]


@pytest.mark.parametrize(
    ("bad", "line_no"),
    [
        pytest.param(b"not json at all\n", 2, id="garbage"),
        pytest.param(b'{"id": "r9"}\n', 2, id="missing-field"),
        pytest.param(b'{"id": "r9", "n": "nine"}\n', 2, id="wrong-type"),
    ],
)
def test_corrupt_middle_line_raises(jsonl: JsonlFile[Row], bad: bytes, line_no: int) -> None:
    jsonl.append(_rows(1))
    with open(jsonl.path, "ab") as handle:
        handle.write(bad)
    jsonl.append(_rows(3))

    with pytest.raises(CorruptRecordError) as info:
        jsonl.read_all()

    assert isinstance(info.value, StoreError)
    assert info.value.line_no == line_no
    assert info.value.path == str(jsonl.path)


def test_corrupt_lines_can_be_skipped_and_are_listed(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1))
    with open(jsonl.path, "ab") as handle:
        handle.write(b"garbage\r in the middle\n")
    jsonl.append(_rows(3))

    tail = jsonl.read_from(0, skip_corrupt=True)

    assert tail.records == _rows(1, 3)
    assert [(c.line_no, c.data) for c in tail.corrupt] == [(2, b"garbage\r in the middle")]
    assert tail.next_offset == jsonl.path.stat().st_size and tail.next_line_no == 4


def test_quarantine_moves_bad_lines_and_keeps_every_other_byte(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1))
    with open(jsonl.path, "ab") as handle:
        handle.write(b'{"id": "r2", "n": "two"}\n\xff\xfe not utf-8\n')
    jsonl.append(_rows(3))
    with open(jsonl.path, "ab") as handle:
        handle.write(b'{"id": "r4"')  # a torn tail stays for the next append to repair
    good = [line for line in jsonl.path.read_bytes().split(b"\n") if line.startswith(b'{"id":"r')]

    moved = jsonl.quarantine()

    assert [line.line_no for line in moved] == [2, 3]
    assert jsonl.path.read_bytes() == good[0] + b"\n" + good[1] + b"\n" + b'{"id": "r4"'
    assert jsonl.read_all() == _rows(1, 3)
    entries = _lines(jsonl.corrupt_path)
    assert [base64.b64decode(e["data_base64"]) for e in entries] == [b'{"id": "r2", "n": "two"}', b"\xff\xfe not utf-8"]
    assert [e["line_no"] for e in entries] == [2, 3] and all(e["reason"] for e in entries)
    assert jsonl.quarantine() == []  # nothing left to move


def test_lock_timeout_is_a_lock_timeout_error(jsonl: JsonlFile[Row], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jsonl_module, "LOCK_TIMEOUT_S", 0.1)
    slow = JsonlFile(jsonl.path, ADAPTER)
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with jsonl.locked():
            held.set()
            release.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait(5)
    slow._lock.timeout = 0.1  # another lock object on the same file: waits, then gives up
    try:
        with pytest.raises(LockTimeoutError) as info:
            slow.append(_rows(1))
    finally:
        release.set()
        thread.join()
    assert isinstance(info.value, StoreError) and isinstance(info.value, TimeoutError)
    assert slow.read_all() == []


def test_blank_lines_are_ignored(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1))
    with open(jsonl.path, "ab") as handle:
        handle.write(b"\n   \n")
    jsonl.append(_rows(2))

    assert jsonl.read_all() == _rows(1, 2)


def test_rewrite_replaces_the_file_and_changes_its_identity(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1, 2, 3))
    old_id = jsonl.file_id()

    jsonl.rewrite(_rows(2))

    assert jsonl.read_all() == _rows(2)
    assert jsonl.file_id() != old_id  # a new inode: readers holding an offset notice the rewrite
    assert sorted(p.name for p in jsonl.path.parent.iterdir()) == ["rows.jsonl", "rows.jsonl.lock"]


@pytest.mark.parametrize("failing", ["replace", "fsync"])
def test_failed_rewrite_leaves_the_old_file_intact(
    jsonl: JsonlFile[Row], monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    jsonl.append(_rows(1, 2, 3))
    before = jsonl.path.read_bytes()

    def disk_failure(*args: object, **kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, failing, disk_failure)
    with pytest.raises(StoreError, match="No space left"):
        jsonl.rewrite(_rows(9))
    monkeypatch.undo()

    assert jsonl.path.read_bytes() == before
    assert jsonl.read_all() == _rows(1, 2, 3)
    leftovers = [p.name for p in jsonl.path.parent.iterdir() if p.name.endswith(".tmp")]
    assert leftovers == []


def test_failed_append_raises_store_error_and_keeps_earlier_lines(
    jsonl: JsonlFile[Row], monkeypatch: pytest.MonkeyPatch
) -> None:
    jsonl.append(_rows(1))

    def disk_failure(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", disk_failure)
    with pytest.raises(StoreError, match="Input/output error"):
        jsonl.append(_rows(2))
    monkeypatch.undo()

    assert jsonl.read_all()[0] == Row(id="r1", n=1)


def test_atomic_write_bytes_never_exposes_a_partial_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "blob"
    atomic_write_bytes(target, b"old")

    def fail_replace(src: object, dst: object) -> None:
        # At this point the new bytes are complete in the temporary file, not in the target.
        assert target.read_bytes() == b"old"
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", fail_replace)
    with pytest.raises(StoreError):
        atomic_write_bytes(target, b"new content")
    monkeypatch.undo()

    assert target.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["blob"]
    atomic_write_bytes(target, b"new content")
    assert target.read_bytes() == b"new content"


# -- incremental reads: read_since -------------------------------------------------------------


def test_read_since_returns_only_what_was_appended(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1, 2))
    first = jsonl.read_since(None)
    assert first.records == _rows(1, 2) and first.reset
    assert jsonl.read_since(first.position).records == [] and not jsonl.read_since(first.position).reset
    jsonl.append(_rows(3))
    second = jsonl.read_since(first.position)
    assert second.records == _rows(3) and not second.reset and second.position.line_no == 4


def test_read_since_reads_a_rewritten_file_whole(jsonl: JsonlFile[Row]) -> None:
    jsonl.append(_rows(1, 2))
    first = jsonl.read_since(None)
    jsonl.rewrite(_rows(5))
    again = jsonl.read_since(first.position)
    assert again.records == _rows(5) and again.reset


def test_read_since_tells_a_reused_inode_by_its_bytes(jsonl: JsonlFile[Row]) -> None:
    """An atomic rewrite can get the inode number of the file it replaced: same (device, inode),
    same length, other bytes before the offset. Simulated by rewriting the file in place."""
    jsonl.append(_rows(1, 2))
    first = jsonl.read_since(None)
    data = jsonl.path.read_bytes()
    replaced = data.replace(b'"r1","n":1', b'"r7","n":7')
    assert len(replaced) == len(data) and replaced != data
    with open(jsonl.path, "r+b") as handle:  # same inode, same length
        handle.write(replaced)
    assert jsonl.file_id() == first.position.file_id
    again = jsonl.read_since(first.position)
    assert again.reset and again.records == [Row(id="r7", n=7), Row(id="r2", n=2)]


def test_item_log_tells_a_reused_inode_by_its_token(tmp_path: Path) -> None:
    log = FileItemLog(tmp_path)
    record = b'{"id":"mem_000000000001","text":"first"}'
    token = log.write(LogChange(put=[LogEntry("mem_000000000001", record)]))
    assert [item_id for item_id, _ in log.read().records] == ["mem_000000000001"]
    items = tmp_path / "items.jsonl"
    data = items.read_bytes()
    with open(items, "r+b") as handle:  # the bytes of another file, under the same inode and length
        handle.write(data.replace(b"000001", b"000002"))
    found = log.read(token)
    assert found.reset and [item_id for item_id, _ in found.records] == ["mem_000000000002"]
    assert found.token != token


def test_item_log_reads_an_older_token_format_whole(tmp_path: Path) -> None:
    log = FileItemLog(tmp_path)
    log.write(LogChange(put=[LogEntry("mem_000000000001", b'{"id":"mem_000000000001"}')]))
    stat = os.stat(tmp_path / "items.jsonl")
    old = f"{stat.st_dev}:{stat.st_ino}:{stat.st_size}:2"  # <device>:<inode>:<offset>:<line>, no fingerprint
    found = log.read(old)
    assert found.reset and [item_id for item_id, _ in found.records] == ["mem_000000000001"]
    assert found.token.count(":") == 4


# -- the same rules through AgentMemory (no index needed) ---------------------------------------

NO_INDEX = MemoryConfig(index_on_store=False)


def test_memory_reads_past_a_torn_items_line_and_repairs_it_on_the_next_store(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path, config=NO_INDEX)
    first = memory.store("first")
    items = memory.path / "items.jsonl"
    with open(items, "ab") as handle:
        handle.write(b'{"id": "mem_0000000000')

    reader = AgentMemory("agent", tmp_path, config=NO_INDEX)  # a fresh reader, no cache
    assert [r.id for r in reader.records()] == [first]

    second = reader.store("second")

    assert [line["id"] for line in _lines(items)] == [first, second]
    assert Path(str(items) + ".torn").read_bytes() == b'{"id": "mem_0000000000\n'
    assert [AgentMemory("agent", tmp_path, config=NO_INDEX).get(i).content for i in (first, second)] == [
        "first",
        "second",
    ]


def test_memory_quarantines_a_corrupt_items_line_and_keeps_the_others(tmp_path: Path) -> None:
    recorder = NoticeRecorder()
    memory = AgentMemory("agent", tmp_path, config=NO_INDEX, observers=[recorder])
    first = memory.store("first")
    with open(memory.path / "items.jsonl", "ab") as handle:
        handle.write(b"{broken}\n")

    third = memory.store("third")  # reads the file first (a new id must be free): finds the line

    (event,) = recorder.notices
    assert isinstance(event, RecordQuarantined) and event.line_no == 2
    assert event.quarantine_path == str(memory.path / "items.jsonl") + ".corrupt"
    assert [line["id"] for line in _lines(memory.path / "items.jsonl")] == [first, third]  # repaired
    quarantined = _lines(Path(event.quarantine_path))
    assert base64.b64decode(quarantined[0]["data_base64"]) == b"{broken}"
    reader = AgentMemory("agent", tmp_path, config=NO_INDEX, observers=[recorder])
    assert [r.id for r in reader.records()] == [first, third]
    assert [reader.get(i).content for i in (first, third)] == ["first", "third"]
    assert len(recorder.notices) == 1  # reported once, not by every reader


def test_failed_clear_keeps_every_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    memory = AgentMemory("agent", tmp_path, config=NO_INDEX)
    ids = [memory.store(f"item {n}") for n in range(3)]
    items_before = (memory.path / "items.jsonl").read_bytes()

    def disk_failure(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", disk_failure)
    with pytest.raises(StoreError):
        memory.clear()
    monkeypatch.undo()

    assert (memory.path / "items.jsonl").read_bytes() == items_before
    fresh = AgentMemory("agent", tmp_path, config=NO_INDEX)
    assert [fresh.get(i).content for i in ids] == ["item 0", "item 1", "item 2"]


def test_atomic_write_of_chunks_that_fail_leaves_the_file_and_no_temporary(tmp_path: Path) -> None:
    target = tmp_path / "export.jsonl"
    atomic_write(target, [b"old\n"])

    def chunks():  # type: ignore[no-untyped-def]
        yield b"new line 1\n"
        raise KeyError("an item vanished")

    with pytest.raises(KeyError):
        atomic_write(target, chunks())
    assert target.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["export.jsonl"]
