"""Serial, durable processing of memory events (issue #8 part 3, after team9's agent framework): the
the event journal: journaled before applied, auto and stepping modes, the order of a step's work,
payloads that round-trip, an interrupted event applied once, the step lock across processes (and
recovered when its holder is killed), and what observers hear. Real files, real SQLite, real
subprocesses."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_memory import (
    AgentMemory,
    ConfigurationError,
    EventProcessor,
    InvalidArgumentError,
    ItemNotFoundError,
    MemoryConfig,
    MemoryManager,
    Message,
    ToolCall,
)
from agent_memory.agent.events import event_memory_id, result_memory_id
from agent_memory.agent.step_lock import StepLock
from agent_memory.errors import LockTimeoutError
from agent_memory.kernel.budget import ModelLimits
from agent_memory.observers import Compacted, EventApplied, NoticeRecorder, TraceIngested, Truncated
from agent_memory.storage.files.journal import EVENTS_FILE, FileJournal
from agent_memory.storage.files.locks import LOCK_FILES, FileLocks
from agent_memory.storage.journal import EventKind, decode_payload, encode_payload
from memory_helpers import file_traces

ENV = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}


def open_manager(root: Path, *, observers=(), **limits: int) -> MemoryManager:
    memory = AgentMemory("events", root, config=MemoryConfig(index_on_store=False))
    model = ModelLimits(**limits) if limits else None
    return MemoryManager(memory, system_prompt="S", limits=model, observers=observers)


def traces_of(root: Path, event_id: str) -> list:
    store = file_traces(root / "agents" / "events")
    lines = {item.id: item for item in (*store.read_archive(), *store.list_raw())}
    return [item for item in lines.values() if item.correlation_id == event_id]


def test_an_event_is_journaled_and_committed_before_its_effect_is_written(tmp_path: Path) -> None:
    seen: list[tuple[str, str]] = []

    class Witness:  # runs while the manager writes the trace: what does another connection see?
        def on_notice(self, event) -> None:
            if isinstance(event, TraceIngested):
                db = sqlite3.connect(tmp_path / "agents" / "events" / EVENTS_FILE)
                seen.extend(db.execute("SELECT kind, status FROM events").fetchall())
                db.close()

    processor = EventProcessor(open_manager(tmp_path), observers=[Witness()])
    turn = processor.user_message("hello")
    assert turn == "turn_0001"
    assert seen == [("user_message", "applying")]  # committed, visible to another process, before the trace
    (event,) = processor.journal.events()
    assert (event.status, event.result, event.id.startswith("qevt_")) == ("applied", {"turn_id": "turn_0001"}, True)
    assert [item.trace_type for item in traces_of(tmp_path, event.id)] == ["user"]


def test_auto_applies_at_once_and_stepping_only_journals_until_a_step(tmp_path: Path) -> None:
    processor = EventProcessor(open_manager(tmp_path), mode="stepping")
    assert processor.user_message("first") is None  # only journaled
    assert processor.pending_count == 1 and processor.pending_events()[0].kind is EventKind.USER_MESSAGE
    assert traces_of(tmp_path, processor.pending_events()[0].id) == []
    event_id = processor.pending_events()[0].id

    processor.execution_mode = "auto"  # switching applies nothing by itself ...
    assert processor.pending_count == 1
    assert processor.user_message("second") == "turn_0002"  # ... an auto dispatch applies the pending events, in order
    assert processor.pending_count == 0
    assert [item.content for item in traces_of(tmp_path, event_id)] == ["first"]
    assert [m.content for m in processor.manager.get_working_context_messages()] == ["S", "first", "second"]
    with pytest.raises(InvalidArgumentError):
        processor.execution_mode = "fast"
    with pytest.raises(InvalidArgumentError):
        processor.dispatch("user_message", {"text": "no content key"})
    assert processor.journal.count() == 2  # a malformed event is refused before it is journaled


def journal_bytes(agent_dir: Path) -> bytes:
    """Every byte of the file journal as it lies on disk (the database, its write-ahead log)."""
    return b"".join(path.read_bytes() for path in sorted(agent_dir.glob(EVENTS_FILE + "*")))


def test_an_event_applied_at_once_is_written_to_the_journal_once_and_never_read_back(tmp_path: Path) -> None:
    processor = EventProcessor(open_manager(tmp_path))
    journal = processor.journal
    reads: list[str] = []
    for name in ("next_open", "get", "events", "pending"):  # every way to read a payload back
        original = getattr(journal, name)
        setattr(journal, name, lambda *a, _read=original, _name=name, **k: reads.append(_name) or _read(*a, **k))
    page = "a long page of text. " * 20_000
    processor.user_message("fetch it")
    processor.assistant_response(Message(role="assistant", content="", tool_calls=(ToolCall(id="c1", name="fetch"),)))
    ref = processor.tool_result("c1", page, name="fetch")
    assert reads == []  # applied from the payload in hand: one write, no read back
    assert processor.manager.memory.get(ref).content == page
    for name in ("next_open", "get", "events", "pending"):
        delattr(journal, name)
    stored = {event.kind: event for event in journal.events()}
    assert stored[EventKind.ASSISTANT_RESPONSE].payload["message"]["tool_calls"][0]["id"] == "c1"  # models as JSON data
    assert {event.status for event in stored.values()} == {"applied"}

    processor.execution_mode = "stepping"  # an event journaled before: applied first, read from the journal
    processor.user_message("journaled earlier")
    processor.execution_mode = "auto"
    processor.user_message("then this one")
    assert [m.content for m in processor.manager.get_working_context_messages()][-2:] == ["journaled earlier",
                                                                                          "then this one"]


def test_a_stored_result_is_journaled_by_its_memory_id_never_as_a_second_copy_of_its_bytes(tmp_path: Path) -> None:
    """Issue #38 item 4: the result is stored (durable) first, and the journal names it."""
    processor = EventProcessor(open_manager(tmp_path))
    agent_dir = processor.manager.memory.agent_dir
    tail = "the last paragraph says the launch code is 7-4-1-9. "  # beyond any preview
    page = "<html><body>" + "<p>a long page of text.</p> " * 40_000 + f"<p>{tail}</p></body></html>"  # 1.1 MB
    data = {"rows": [{"id": n, "name": f"row number {n}", "note": "x" * 40} for n in range(5_000)], "end": tail}
    binary = bytes(range(256)) * 2_000 + tail.encode()
    processor.user_message("fetch them")
    calls = tuple(ToolCall(id=f"c{n}", name="fetch", arguments=json.dumps({"n": n})) for n in range(3))
    processor.assistant_response(Message(role="assistant", content="", tool_calls=calls))
    refs = [processor.tool_result(call.id, result, name="fetch") for call, result in zip(calls, (page, data, binary))]

    events = [event for event in processor.journal.events() if event.kind is EventKind.TOOL_RESULT]
    assert [event.status for event in events] == ["applied"] * 3
    blobs = (page.encode(), json.dumps(data, separators=(",", ":")).encode(), binary)
    for event, ref, result, blob in zip(events, refs, (page, data, binary), blobs):
        assert "result" not in event.payload and event.payload["memory_id"] == ref == event.result["memory_id"]
        assert processor.manager.memory.get(ref).content == result  # stored whole, once
        assert ref == result_memory_id("events", event.payload["tool_call_id"], hashlib.sha256(blob).hexdigest())
    assert processor.manager.memory.get(refs[0]).metadata.title == 'fetch({"n": 0})'  # the call's arguments title it
    on_disk = journal_bytes(agent_dir)
    assert tail.encode() not in on_disk and base64.b64encode(binary[-300:])[:200] not in on_disk
    db = sqlite3.connect(agent_dir / EVENTS_FILE)
    sizes = [size for (size,) in db.execute("SELECT length(CAST(payload AS BLOB)) FROM events WHERE kind = 'tool_result'")]
    db.close()
    assert len(sizes) == 3 and max(sizes) < 2_500  # 2.2 MB of results; each event its id and a preview
    (trace,) = traces_of(tmp_path, events[0].id)
    assert trace.tool_result_ref == refs[0] and trace.tool_result.startswith("<html><body><p>a long page")
    assert len(processor.manager.memory) == 3

    stepping = EventProcessor(processor.manager, mode="stepping")  # stepping only journals: the result is held
    processor.assistant_response(Message(role="assistant", content="", tool_calls=(ToolCall(id="c9", name="fetch"),)))
    stepping.tool_result("c9", "a small page")
    (pending,) = stepping.pending_events()
    assert pending.payload["result"] == "a small page" and len(processor.manager.memory) == 3
    assert stepping.step().event.result == {"memory_id": event_memory_id(pending.id)}
    with pytest.raises(InvalidArgumentError, match="one of them"):
        processor.dispatch("tool_result", {"tool_call_id": "c9", "result": "x", "memory_id": refs[0]})
    with pytest.raises(InvalidArgumentError, match="memory_id"):
        processor.dispatch("tool_result", {"tool_call_id": "c9", "memory_id": "page-1"})
    processor.assistant_response(Message(role="assistant", content="", tool_calls=(ToolCall(id="c10", name="fetch"),)))
    with pytest.raises(ItemNotFoundError):  # a reference to nothing stored: refused, recorded nowhere
        processor.dispatch("tool_result", {"tool_call_id": "c10", "memory_id": "mem_000000000000"})
    assert processor.journal.events()[-1].status == "failed" and "c10" in processor.manager.pending_call_ids
    own = processor.manager.memory.store("a result stored by the caller", type="action_result")
    assert processor.dispatch("tool_result", {"tool_call_id": "c10", "memory_id": own}).result == {"memory_id": own}
    assert processor.manager.get_working_context_messages()[-1].tool_result_ref == own


def test_a_step_applies_one_event_else_a_truncation_else_a_compaction(tmp_path: Path) -> None:
    recorder = NoticeRecorder()
    manager = open_manager(tmp_path, observers=[recorder], max_context_tokens=4_000, max_output_tokens=500)
    processor = EventProcessor(manager, mode="stepping")
    for n in range(3):
        processor.user_message(f"question {n} " + "word " * 40)
        processor.assistant_response(f"answer {n}")
    while processor.step().event_processed:
        pass
    processor.observe_usage(3_000)  # over the 2,476-token input budget: compaction requested, truncation due
    processor.user_message("the current question")

    first = processor.step()
    assert first.event_processed and first.event.kind is EventKind.USAGE_REPORT
    assert (first.pending_event_count, first.has_pending_operations) == (1, True)
    assert not first.truncation_performed and not first.compaction_performed
    assert processor.has_pending_truncation and processor.has_pending_compaction  # but the event comes first

    second = processor.step()
    assert second.event_processed and second.event.result == {"turn_id": "turn_0004"}
    assert second.pending_event_count == 0 and second.has_pending_operations

    third = processor.step()  # nothing pending: the truncation (3 finished turns, all inside the tail of 4)
    assert (third.event_processed, third.truncation_performed, third.compaction_performed) == (False, True, False)
    assert third.truncated_turn_ids[0] == "turn_0001"
    assert [e.turn_ids for e in recorder.of_type(Truncated)] == [third.truncated_turn_ids]
    archived = {item.turn_id for item in manager.traces.read_archive()}
    assert set(third.truncated_turn_ids) == archived
    assert not processor.has_pending_truncation and third.has_pending_operations  # the compaction is still due

    fourth = processor.step()
    assert (fourth.event_processed, fourth.truncation_performed, fourth.compaction_performed) == (False, False, True)
    assert len(recorder.of_type(Compacted)) == 1 and not fourth.has_pending_operations

    idle = processor.step()
    assert not (idle.event_processed or idle.truncation_performed or idle.compaction_performed)
    assert idle.step_id != fourth.step_id and idle.step_id.startswith("step_")
    assert "turn_0004" in {m.turn_id for m in manager.get_working_context_messages()}  # the current turn stays


def test_payloads_round_trip_bytes_datetimes_and_look_alike_objects(tmp_path: Path) -> None:
    big = bytes(range(256)) * 6_000  # 1.5 MB of every byte value
    odd = {"$bytes": "not base64", "nested": [{"$datetime": "soon"}, b"\x00\xff"]}
    assert decode_payload(encode_payload(odd)) == odd
    when = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)

    manager = open_manager(tmp_path)
    processor = EventProcessor(manager, mode="stepping")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="c1", name="download"),)))
    processor.tool_result("c1", big)
    processor.store({"$bytes": "a user's own object"}, title="look-alike", timestamp=when)
    pending = processor.pending_events()
    assert pending[0].payload["result"] == big and pending[1].payload["content"] == {"$bytes": "a user's own object"}
    assert pending[1].payload["timestamp"] == when

    reopened = EventProcessor(open_manager(tmp_path), mode="stepping")  # read back by a new connection
    result_event, store_event = (reopened.step().event for _ in range(2))
    assert result_event.result == {"memory_id": event_memory_id(result_event.id)}
    assert reopened.manager.memory.get(event_memory_id(result_event.id)).content == big
    item = reopened.manager.memory.get(store_event.result["memory_id"])
    assert item.content == {"$bytes": "a user's own object"} and item.metadata.timestamp == when


INFLIGHT_CASES = ["user_message", "assistant_with_call", "tool_result_written", "tool_result_stored_only", "store",
                  "nothing_written"]


@pytest.mark.parametrize("case", INFLIGHT_CASES)
def test_an_event_interrupted_while_applied_is_applied_once_after_a_restart(tmp_path: Path, case: str) -> None:
    """The state a crash leaves (the event ``applying``, its effect written or not) is built with
    the real components; a new manager and processor (a restart) apply the event exactly once."""
    first = open_manager(tmp_path)
    first.ingest_user_message("before")
    first.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="c0", name="fetch"),)))
    journal = FileJournal(first.memory.agent_dir)
    calls = (ToolCall(id="c1", name="search"), ToolCall(id="c2", name="fetch"))
    kind, payload = {
        "user_message": ("user_message", {"content": "hello"}),
        "assistant_with_call": ("assistant_response", {"message": {"role": "assistant", "content": "looking",
                                                                   "tool_calls": [c.model_dump() for c in calls]}}),
        "tool_result_written": ("tool_result", {"tool_call_id": "c0", "result": "page text"}),
        "tool_result_stored_only": ("tool_result", {"tool_call_id": "c0", "result": "page text"}),
        "store": ("memory_store", {"content": "a note"}),
        "nothing_written": ("user_message", {"content": "hello"}),
    }[case]
    event = journal.push(kind, payload)
    journal.mark_applying(event.id)
    if case == "user_message":  # the effect, written as the processor writes it, then the "crash"
        first.ingest_user_message("hello", correlation_id=event.id)
    elif case == "assistant_with_call":
        first.ingest_assistant_response(Message(role="assistant", content="looking", tool_calls=calls),
                                        correlation_id=event.id)
    elif case == "tool_result_written":
        first.ingest_tool_result("c0", "page text", correlation_id=event.id, item_id=event_memory_id(event.id))
    elif case == "tool_result_stored_only":  # killed after the content was stored, before its trace
        first.memory.store("page text", item_id=event_memory_id(event.id))
    elif case == "store":
        first.memory.store("a note", item_id=event_memory_id(event.id))
    items_before = len(first.memory)
    del first

    recorder = NoticeRecorder()
    manager = open_manager(tmp_path)
    processor = EventProcessor(manager, observers=[recorder], mode="stepping")
    assert processor.pending_events()[0].status == "applying"
    done = processor.step().event
    assert done.status == "applied" and processor.pending_count == 0
    (heard,) = recorder.of_type(EventApplied)
    assert heard.event_id == event.id
    assert heard.recovered is (case not in ("nothing_written", "tool_result_stored_only"))
    traces = traces_of(tmp_path, event.id)
    expected = {"user_message": 1, "assistant_with_call": 3, "tool_result_written": 1, "tool_result_stored_only": 1,
                "store": 0, "nothing_written": 1}[case]
    assert len(traces) == expected
    ids = [record.id for record in manager.memory.records()]
    assert len(ids) == len(set(ids))
    if case.startswith("tool_result"):
        assert done.result == {"memory_id": event_memory_id(event.id)} == {"memory_id": traces[0].tool_result_ref}
        assert len(manager.memory) == items_before  # the stored content was found, not stored again
        assert manager.pending_tool_calls == []
    if case == "store":
        assert done.result == {"memory_id": event_memory_id(event.id)} and len(manager.memory) == items_before
    if case == "assistant_with_call":
        assert sorted(manager.pending_tool_calls) == ["c0", "c1", "c2"]  # rebuilt from the traces
    context_ids = {m.id for m in manager.get_working_context_messages()}
    assert {item.id for item in traces if item.trace_type != "tool_call"} <= context_ids  # caught up, once
    assert len([m for m in manager.get_working_context_messages() if m.id in {t.id for t in traces}]) == (expected > 0)


KILL_CHILD = r"""
import os, signal, sys
from agent_memory import AgentMemory, EventProcessor, MemoryConfig, MemoryManager, Message, ToolCall
from agent_memory.storage.files.journal import FileJournal

root, point = sys.argv[1], sys.argv[2]
memory = AgentMemory("events", root, config=MemoryConfig(index_on_store=False))
processor = EventProcessor(MemoryManager(memory, system_prompt="S"))
recovered = []
processor.manager.on(lambda e: recovered.append(e.event_id) if getattr(e, "recovered", False) else None)
PAGE = "page a " * 2_000 + "END-OF-PAGE-A"  # the end lies beyond any preview
if point in ("resume", "retry"):
    processor.drain()
    print("recovered", *recovered, flush=True)
    if point == "retry":  # the loop that was killed runs the same call again
        print("stored", processor.tool_result("a", PAGE), flush=True)
    sys.exit(0)

def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)

set_status = FileJournal.set_status
def die_when_marked(status):
    def patched(self, event_id, new_status, **kwargs):
        if new_status == status:
            die()
        return set_status(self, event_id, new_status, **kwargs)
    return patched

processor.user_message("fetch two pages")
if point == "assistant-written":  # the effect is written, the mark is not
    FileJournal.set_status = die_when_marked("applied")
if point == "assistant-appended":  # right after the first append of the answer's traces
    from agent_memory.storage.common import LogTraceStore
    append = LogTraceStore._append
    def append_then_die(self, kind, records):
        append(self, kind, records)
        die()
    LogTraceStore._append = append_then_die
processor.assistant_response(Message(role="assistant", content="fetching",
                                     tool_calls=(ToolCall(id="a", name="fetch"), ToolCall(id="b", name="fetch"))))
if point == "result-stored":  # between the store of the result and the journal write of its event
    original = AgentMemory.store
    def store_then_die(self, *args, **kwargs):
        original(self, *args, **kwargs)
        die()
    AgentMemory.store = store_then_die
if point == "result-journaled":  # the event is journaled (naming the stored result), not applied
    FileJournal.set_status = die_when_marked("applying")
if point == "result-written":
    FileJournal.set_status = die_when_marked("applied")
processor.tool_result("a", PAGE)
"""


@pytest.mark.parametrize("point", ["assistant-appended", "assistant-written", "result-journaled", "result-written"])
def test_a_process_killed_while_applying_an_event_applies_it_once_on_restart(tmp_path: Path, point: str) -> None:
    crashed = subprocess.run([sys.executable, "-c", KILL_CHILD, str(tmp_path), point], env=ENV, capture_output=True,
                             text=True, timeout=120, check=False)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    journal = FileJournal(tmp_path / "agents" / "events")
    (inflight,) = journal.pending()
    assert inflight.status == ("queued" if point == "result-journaled" else "applying")
    resumed = subprocess.run([sys.executable, "-c", KILL_CHILD, str(tmp_path), "resume"], env=ENV,
                             capture_output=True, text=True, timeout=120, check=False)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    recovered = resumed.stdout.split()[1:]
    assert recovered == ([] if point == "result-journaled" else [inflight.id])  # queued: nothing was written yet
    events = journal.events()
    assert [e.status for e in events] == ["applied"] * len(events) and journal.pending() == []
    expected = {"user_message": 1, "assistant_response": 3, "tool_result": 1}
    for event in events:
        assert len(traces_of(tmp_path, event.id)) == expected[event.kind.value], event
    with AgentMemory("events", tmp_path, config=MemoryConfig(index_on_store=False)) as memory:
        stored = [events[-1].payload["memory_id"]] if events[-1].kind is EventKind.TOOL_RESULT else []
        assert [record.id for record in memory.records()] == stored
        if stored:
            assert traces_of(tmp_path, events[-1].id)[0].tool_result_ref == stored[0] == events[-1].result["memory_id"]
            assert memory.get(stored[0]).content.endswith("END-OF-PAGE-A")
    manager = open_manager(tmp_path)
    assert sorted(manager.pending_tool_calls) == (["b"] if stored else ["a", "b"])


def test_a_crash_between_storing_a_result_and_journaling_it_loses_nothing(tmp_path: Path) -> None:
    """Issue #38 item 4, kill -9: the result is durable before its event is journaled. Killed in
    between, the item is stored and nothing names it (the call is still unanswered); the loop that
    runs the call again finds it under the same id and records it: one item, one event naming it,
    and no copy of its bytes in the journal."""
    crashed = subprocess.run([sys.executable, "-c", KILL_CHILD, str(tmp_path), "result-stored"], env=ENV,
                             capture_output=True, text=True, timeout=120, check=False)
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr[-2000:]
    agent_dir = tmp_path / "agents" / "events"
    journal = FileJournal(agent_dir)
    assert [(e.kind.value, e.status) for e in journal.events()] == [("user_message", "applied"),
                                                                  ("assistant_response", "applied")]
    page = "page a " * 2_000 + "END-OF-PAGE-A"
    expected_id = result_memory_id("events", "a", hashlib.sha256(page.encode()).hexdigest())
    with AgentMemory("events", tmp_path, config=MemoryConfig(index_on_store=False)) as memory:
        assert [record.id for record in memory.records()] == [expected_id]  # durable before the kill
        assert memory.get(expected_id).content == page
    assert not any(item.tool_result_ref for item in file_traces(agent_dir).list_raw())  # named by nothing yet
    assert sorted(open_manager(tmp_path).pending_tool_calls) == ["a", "b"]

    retried = subprocess.run([sys.executable, "-c", KILL_CHILD, str(tmp_path), "retry"], env=ENV,
                             capture_output=True, text=True, timeout=120, check=False)
    assert retried.returncode == 0, retried.stderr[-2000:]
    assert retried.stdout.split()[-2:] == ["stored", expected_id]  # the stored item, found again
    events = journal.events()
    assert [(e.kind.value, e.status) for e in events][-1] == ("tool_result", "applied")
    assert events[-1].payload["memory_id"] == expected_id and "result" not in events[-1].payload
    (trace,) = traces_of(tmp_path, events[-1].id)
    assert trace.tool_result_ref == expected_id
    with AgentMemory("events", tmp_path, config=MemoryConfig(index_on_store=False)) as memory:
        assert [record.id for record in memory.records()] == [expected_id]  # stored once
    assert b"END-OF-PAGE-A" not in journal_bytes(agent_dir)
    assert sorted(open_manager(tmp_path).pending_tool_calls) == ["b"]


HOLDER_CHILD = r"""
import sys, time
from pathlib import Path
from agent_memory.agent.step_lock import StepLock
from agent_memory.storage.files.locks import FileLocks
lock = StepLock(FileLocks(Path(sys.argv[1])), key=sys.argv[1])
print(lock.acquire(timeout_s=30), flush=True)
time.sleep(120)
"""


def test_the_step_lock_blocks_another_process_and_is_free_once_its_holder_is_killed(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    processor = EventProcessor(manager)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER_CHILD, str(manager.memory.agent_dir)], env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        step_id = holder.stdout.readline().strip()
        assert step_id.startswith("step_"), holder.stderr.read() if holder.poll() is not None else step_id
        assert processor.is_step_locked() and processor.current_step_id() == step_id
        assert processor.step_lock.holder().pid == holder.pid
        with pytest.raises(LockTimeoutError, match=f"pid {holder.pid}"):
            processor.step(timeout_s=0.3)
        with pytest.raises(LockTimeoutError):
            processor.dispatch("user_message", {"content": "journaled while locked"}, timeout_s=0.3)
        assert processor.pending_count == 1  # journaled; applied once the lock is free
    finally:
        holder.kill()  # SIGKILL: the holder cannot clean up
        holder.communicate(timeout=30)
    assert holder.returncode == -signal.SIGKILL
    lock_file = manager.memory.agent_dir / LOCK_FILES["step"]
    assert lock_file.exists()  # the file stays behind, harmless
    record = json.loads(Path(f"{lock_file}.holder").read_text(encoding="utf-8"))
    assert record["note"] == step_id and record["pid"] == holder.pid  # so does the dead holder's record ...
    assert not processor.is_step_locked() and processor.current_step_id() is None  # ... which the OS overrules
    result = processor.step(timeout_s=30)  # free at once: the bound only ends a hang
    assert result.event_processed and result.event.result == {"turn_id": "turn_0001"}
    assert not processor.is_step_locked()


def test_one_step_at_a_time_across_lock_objects_and_threads_of_one_process(tmp_path: Path) -> None:
    first, second = StepLock(FileLocks(tmp_path), key=str(tmp_path)), StepLock(FileLocks(tmp_path), key=str(tmp_path))
    step_id = first.acquire(timeout_s=30)
    assert second.is_locked() and second.current_step_id() == step_id
    with pytest.raises(LockTimeoutError):
        second.acquire(timeout_s=0.2)
    got: list[str] = []
    waiter = threading.Thread(target=lambda: got.append(first.acquire(timeout_s=60)))  # same object, other thread
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive() and not got
    first.release()
    waiter.join(60)
    assert got and got[0] != step_id and first.current_step_id() == got[0]
    first.release()
    assert not second.is_locked()
    with second.hold(timeout_s=0) as held:
        assert first.current_step_id() == held
    with pytest.raises(InvalidArgumentError):
        first.acquire(timeout_s=-1)


def test_observers_hear_ingest_retrieval_and_each_event_applied_or_refused(tmp_path: Path) -> None:
    recorder = NoticeRecorder()
    processor = EventProcessor(open_manager(tmp_path), observers=[recorder])
    processor.user_message("look this up")
    processor.tool_intent([ToolCall(id="c1", name="search")])
    ref = processor.tool_result("c1", "results " * 50)
    with pytest.raises(InvalidArgumentError, match="no tool call"):
        processor.tool_result("nope", "an answer to no call")
    processor.assistant_response("done")
    processor.manager.memory.retrieve(ref)
    applied = recorder.of_type(EventApplied)
    events = processor.journal.events()
    assert [(e.event_id, e.event_kind, e.seq, e.status) for e in applied] == [
        (e.id, e.kind.value, e.seq, e.status) for e in events
    ]
    assert [e.status for e in events] == ["applied", "applied", "applied", "failed", "applied"]
    assert events[3].error.startswith("InvalidArgumentError: no tool call") and applied[3].error == events[3].error
    kinds = [e.kind for e in recorder.notices]
    assert kinds.count("trace_ingested") == 4 and kinds.count("retrieved") == 1
    assert kinds.index("trace_ingested") < kinds.index("event_applied")  # applied after the effect

    stepping = EventProcessor(processor.manager, mode="stepping")  # a refusal in a step is returned, not raised
    stepping.forget("mem_000000000000")
    stepping.tool_result("nope", "again")
    assert stepping.step().event.status == "applied"  # forgetting an unknown item is a no-op
    refused = stepping.step()
    assert refused.event.status == "failed" and refused.pending_event_count == 0


def test_forget_and_pin_events(tmp_path: Path) -> None:
    processor = EventProcessor(open_manager(tmp_path))
    ref = processor.store("the launch code is 1234", title="secret")
    processor.pin_item(ref)
    assert processor.manager.pinned_items == (ref,)
    fact_id = processor.pin_fact("The user prefers metric units")
    assert [f.id for f in processor.manager.traces.list_semantic(pinned=True)] == [fact_id]
    assert processor.forget(ref) is True
    assert ref not in processor.manager.memory and processor.manager.pinned_items == ()
    assert processor.forget(ref) is False
    with pytest.raises(InvalidArgumentError):
        processor.dispatch("memory_mark_critical", {"item_id": ref, "fact": "both"})


def test_a_processor_whose_manager_missed_events_of_another_live_manager_refuses_to_apply(tmp_path: Path) -> None:
    first = EventProcessor(open_manager(tmp_path))
    second = EventProcessor(open_manager(tmp_path))
    second.user_message("applied by the second manager")
    with pytest.raises(ConfigurationError, match="stale"):
        first.user_message("the first manager would reuse turn_0001")
    assert first.pending_count == 1  # journaled, not lost
    shared = EventProcessor(second.manager, mode="stepping")  # processors sharing one manager are fine
    assert shared.step().event.result == {"turn_id": "turn_0002"}
    fresh = EventProcessor(open_manager(tmp_path))
    assert fresh.user_message("after a restart") == "turn_0003"
