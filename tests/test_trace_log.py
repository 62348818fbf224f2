"""The file backend's trace log (issue 39, plan step a2, in progress): a keyed Log on one of
AutoByteus' JSONL trace files, whose lines stay the bare trace records AutoByteus reads."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory.errors import ConflictError
from agent_memory.models.traces import RAW_TRACE_ADAPTER, RawTraceItem
from agent_memory.storage.contracts import LogChange, LogEntry
from agent_memory.storage.files.trace_log import FileTraceLog


def _line(turn: int, seq: int, content: str, *, item_id: str | None = None) -> LogEntry:
    item = RawTraceItem(turn_id=f"turn_{turn:04d}", seq=seq, trace_type="user" if seq == 1 else "assistant",
                        content=content, source_event="test", **({"id": item_id} if item_id else {}))
    data = RAW_TRACE_ADAPTER.dump_json(item)
    return LogEntry(item.id, data)


def _log(tmp_path: Path) -> FileTraceLog:
    return FileTraceLog(tmp_path / "raw_traces.jsonl", RAW_TRACE_ADAPTER)


def test_appends_are_the_bare_trace_lines_read_incrementally_by_another_object(tmp_path: Path) -> None:
    writer, reader = _log(tmp_path), _log(tmp_path)
    first = reader.read()
    assert first.records == [] and first.reset
    a, b = _line(1, 1, "hi"), _line(1, 2, "hello")
    writer.write(LogChange(put=[a, b]))
    assert (tmp_path / "raw_traces.jsonl").read_bytes() == a.record + b"\n" + b.record + b"\n"  # AutoByteus' lines
    second = reader.read(first.token)
    assert (second.reset, second.records) == (False, [(a.id, a.record), (b.id, b.record)])
    c = _line(2, 1, "again")
    writer.write(LogChange(put=[c]))
    third = reader.read(second.token)
    assert (third.reset, third.records) == (False, [(c.id, c.record)])
    assert reader.read(third.token).records == []


def test_a_replacement_or_a_delete_rewrites_the_file_and_a_reader_starts_over(tmp_path: Path) -> None:
    log, reader = _log(tmp_path), _log(tmp_path)
    a, b, c = _line(1, 1, "one"), _line(1, 2, "two"), _line(2, 1, "three")
    log.write(LogChange(put=[a, b, c]))
    seen = reader.read()
    changed = _line(1, 2, "two, redacted")
    log.write(LogChange(put=[changed], delete=[a.id]))
    after = reader.read(seen.token)
    assert after.reset and after.records == [(b.id, changed.record), (c.id, c.record)]  # in place
    assert (tmp_path / "raw_traces.jsonl").read_bytes() == changed.record + b"\n" + c.record + b"\n"
    log.write(LogChange(put=[a], replace_all=True))
    assert reader.read(after.token).records == [(a.id, a.record)]


def test_a_write_on_a_stale_token_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    mine, theirs = _log(tmp_path), _log(tmp_path)
    token = mine.read().token
    theirs.write(LogChange(put=[_line(1, 1, "theirs")]))
    before = (tmp_path / "raw_traces.jsonl").read_bytes()
    with pytest.raises(ConflictError):
        mine.write(LogChange(put=[_line(1, 2, "mine")]), expect=token)
    assert (tmp_path / "raw_traces.jsonl").read_bytes() == before
    fresh = mine.read(token)
    assert mine.write(LogChange(put=[_line(1, 2, "mine")]), expect=fresh.token) != fresh.token


def test_an_id_repeated_in_another_turn_is_kept_under_its_own_key(tmp_path: Path) -> None:
    path = tmp_path / "raw_traces.jsonl"
    first, again = _line(1, 1, "first", item_id="rt_1738100000123"), _line(2, 1, "again", item_id="rt_1738100000123")
    path.write_bytes(first.record + b"\n" + again.record + b"\n")  # AutoByteus' millisecond ids
    read = _log(tmp_path).read()
    assert read.records == [("rt_1738100000123", first.record), ("rt_1738100000123#turn_0002/1", again.record)]


def test_a_damaged_line_is_quarantined_and_the_others_stay_readable(tmp_path: Path) -> None:
    path = tmp_path / "raw_traces.jsonl"
    good = _line(1, 1, "kept")
    path.write_bytes(b'{"not": "a trace"}\n' + good.record + b"\n")
    moved: list[int] = []
    log = FileTraceLog(path, RAW_TRACE_ADAPTER, on_quarantine=lambda line, where: moved.append(line.line_no))
    assert log.read().records == [(good.id, good.record)]
    assert moved == [1] and path.read_bytes() == good.record + b"\n"
