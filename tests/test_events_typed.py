"""Typed memory events (issue #39, "Typed events"): one pydantic model per kind, a union
discriminated by ``kind``, each kind applied by its own handler. Each kind validates and refuses a
wrong payload with an error of our tree, round-trips through a real journal (files, ``memory://``,
Postgres), and a journal written in the format of the code before typed events (``inline`` inside
``store_arguments``, models as their JSON data, tagged bytes and datetimes) is read back and applied."""

from __future__ import annotations

import sqlite3
import typing
from datetime import UTC, datetime
from pathlib import Path

import pytest

from agent_memory import AgentMemory, EventProcessor, InvalidArgumentError, MemoryConfig, MemoryManager, Message, ToolCall
from agent_memory.agent import events as agent_events
from agent_memory.agent.events import event_memory_id
from agent_memory.errors import AgentMemoryError
from agent_memory.models.events import (
    AssistantResponseEvent,
    CompactionRequestEvent,
    Event,
    MemoryForgetEvent,
    MemoryMarkCriticalEvent,
    MemoryStoreEvent,
    StoreArguments,
    ToolIntentEvent,
    ToolResultEvent,
    UsageReportEvent,
    UserMessageEvent,
    read_event,
)
from agent_memory.storage import common, open_backend
from agent_memory.storage.files.journal import EVENTS_FILE, FileJournal
from agent_memory.storage.journal import EventKind
from agent_memory.testing import PostgresServer

WHEN = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
CALLS = (ToolCall(id="c1", name="search", arguments='{"q": "tides"}'), ToolCall(id="c2", name="fetch"))

EVENTS: dict[str, Event] = {
    "user_message": UserMessageEvent(content="what are the tides?", images=("https://example.org/a.png",),
                                     source_event="USER_TURN"),
    "assistant_response": AssistantResponseEvent(
        message=Message(role="assistant", content="looking", tool_calls=CALLS, reasoning="think"), turn_id="turn_0001"),
    "tool_intent": ToolIntentEvent(calls=CALLS, turn_id="turn_0001"),
    "tool_result": ToolResultEvent(tool_call_id="c1", result={"rows": [1, 2], "blob": b"\x00\xff", "$bytes": "odd"},
                                   name="search", store_arguments=StoreArguments(type="search_results", title="tides")),
    "memory_store": MemoryStoreEvent(content=b"\x00binary\xff" * 100, type="file", tags=("a", "b"), title="t",
                                     extra={"$datetime": "not a tag"}, timestamp=WHEN, item_id="mem_0123456789ab"),
    "memory_forget": MemoryForgetEvent(item_id="mem_0123456789ab"),
    "memory_mark_critical": MemoryMarkCriticalEvent(fact="Answers in French.", tags=("lang",)),
    "compaction_request": CompactionRequestEvent(),
    "usage_report": UsageReportEvent(prompt_tokens=1_234),
}
"""One event of every kind, with the values the journal's codec must carry (bytes, datetimes,
models, objects that look like its tags)."""

MORE: list[Event] = [  # the other forms of the kinds with two
    ToolResultEvent(tool_call_id="c1", memory_id="mem_0123456789ab", preview="a page…", name="fetch"),
    ToolResultEvent(tool_call_id="c2", result=None),  # a tool that returned nothing: still a result
    ToolResultEvent(tool_call_id="c2", result="small", inline=True),
    ToolResultEvent(tool_call_id="c2", result="it broke", is_error=True),
    MemoryMarkCriticalEvent(item_id="mem_0123456789ab"),
    UsageReportEvent(estimate=900),
]

WRONG: dict[str, tuple[dict[str, typing.Any], str]] = {
    "user_message": ({"text": "hi"}, "content"),
    "assistant_response": ({"message": {"role": "user", "content": "hi"}}, "assistant"),
    "tool_intent": ({"calls": {"id": "c1", "name": "search"}}, "calls"),
    "tool_result": ({"tool_call_id": "c1", "result": "x", "store_arguments": {"colour": "red"}}, "colour"),
    "memory_store": ({"content": "x", "tags": "not-a-list"}, "tags"),
    "memory_forget": ({}, "item_id"),
    "memory_mark_critical": ({"item_id": "mem_0123456789ab", "fact": "both"}, "one of them"),
    "compaction_request": ({"now": True}, "now"),
    "usage_report": ({}, "prompt_tokens or estimate"),
}
"""A wrong payload a caller might give for each kind, and a word the error must say."""


def open_manager(root: Path) -> MemoryManager:
    return MemoryManager(AgentMemory("events", root, config=MemoryConfig(index_on_store=False)), system_prompt="S")


def test_every_kind_is_one_model_with_one_handler() -> None:
    models = typing.get_args(typing.get_args(Event)[0])
    kinds = {model.model_fields["kind"].default for model in models}
    assert kinds == {kind.value for kind in EventKind} == set(EVENTS) == set(WRONG)
    assert set(agent_events._HANDLERS) == set(models)  # a kind without a handler cannot be applied
    assert {type(event) for event in EVENTS.values()} == set(models)


@pytest.mark.parametrize("event", [*EVENTS.values(), *MORE], ids=lambda e: e.kind)
def test_each_kind_validates_from_its_payload(event: Event) -> None:
    assert read_event(event.kind, event.payload()) == event
    assert read_event(EventKind(event.kind), event.payload()) == event  # the journal's kinds read the same
    assert "kind" not in event.payload()


@pytest.mark.parametrize("kind", sorted(WRONG))
def test_a_wrong_payload_from_a_caller_raises_a_clear_error_and_journals_nothing(tmp_path: Path, kind: str) -> None:
    payload, word = WRONG[kind]
    with pytest.raises(InvalidArgumentError, match=f"{kind} event") as caught:
        read_event(kind, payload)
    assert word in str(caught.value)
    processor = EventProcessor(open_manager(tmp_path), mode="stepping")
    with pytest.raises(InvalidArgumentError, match=word):
        processor.dispatch(kind, payload)
    assert processor.journal.count() == 0


def test_wrong_calls_of_dispatch_raise_errors_of_our_tree(tmp_path: Path) -> None:
    processor = EventProcessor(open_manager(tmp_path), mode="stepping")
    with pytest.raises(InvalidArgumentError, match="does not match any of the expected tags"):
        processor.dispatch("user_said", {"content": "hi"})
    with pytest.raises(InvalidArgumentError, match="payload is a dict"):
        processor.dispatch("user_message", ["hi"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="kind is given apart"):
        processor.dispatch("user_message", {"kind": "usage_report", "content": "hi"})
    with pytest.raises(InvalidArgumentError, match="alone"):
        processor.dispatch(UserMessageEvent(content="hi"), {"content": "again"})
    with pytest.raises(InvalidArgumentError, match="alone"):
        processor.dispatch(Message(role="user", content="hi"))  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="UserMessageEvent"):  # built by hand: refused as it is built
        UserMessageEvent(content=42)
    with pytest.raises(InvalidArgumentError, match="one of them"):
        ToolResultEvent(tool_call_id="c1")
    with pytest.raises(InvalidArgumentError, match="preview goes with a memory_id"):
        ToolResultEvent(tool_call_id="c1", result="x", preview="x")
    with pytest.raises(AgentMemoryError, match="memory_id"):  # a malformed id
        ToolResultEvent(tool_call_id="c1", memory_id="../etc")
    with pytest.raises(InvalidArgumentError, match="takes no is_error, inline"):
        ToolResultEvent(tool_call_id="c1", memory_id="mem_0123456789ab", inline=True)
    with pytest.raises(InvalidArgumentError, match="colour"):
        processor.tool_result("c1", "x", colour="red")  # store arguments are the four it knows
    assert processor.journal.count() == 0


def _journal(where: str, tmp_path: Path, request: pytest.FixtureRequest):
    if where == "files":
        return FileJournal(tmp_path / "agent")
    if where == "memory":
        return common.journal(open_backend(f"memory://{request.node.name}"), "agent")
    server: PostgresServer = request.getfixturevalue("postgres_server")
    return common.journal(open_backend(server.new_database()), "agent")


@pytest.mark.parametrize("where", ["files", "memory", "postgres"])
def test_each_kind_round_trips_through_the_journal(tmp_path: Path, request: pytest.FixtureRequest, where: str) -> None:
    journal = _journal(where, tmp_path, request)
    try:
        written = [*EVENTS.values(), *MORE]
        for event in written:
            journal.push(event.kind, event.payload())
        stored = journal.events()
        assert [read_event(entry.kind, entry.payload) for entry in stored] == written
        assert [entry.kind.value for entry in stored] == [event.kind for event in written]
    finally:
        journal.close()


def test_typed_events_are_dispatched_and_applied_each_by_its_handler(tmp_path: Path) -> None:
    processor = EventProcessor(open_manager(tmp_path))
    assert processor.dispatch(UserMessageEvent(content="fetch it")).result == {"turn_id": "turn_0001"}
    processor.dispatch(AssistantResponseEvent(message=Message(role="assistant", tool_calls=CALLS)))
    stored = processor.dispatch(ToolResultEvent(tool_call_id="c1", result="a page " * 100, name="search"))
    ref = stored.result["memory_id"]
    assert stored.payload["memory_id"] == ref and "result" not in stored.payload  # stored first, then named
    assert processor.manager.memory.get(ref).content == "a page " * 100
    inline = processor.dispatch(ToolResultEvent(tool_call_id="c2", result="short", inline=True))
    assert inline.result == {"memory_id": None} and inline.payload["inline"] is True
    assert processor.manager.get_working_context_messages()[-1].content == "short"  # kept in the conversation
    assert len(processor.manager.memory) == 1
    fact = processor.dispatch(MemoryMarkCriticalEvent(fact="Answers in French.")).result["fact_id"]
    assert [f.id for f in processor.manager.traces.list_semantic(pinned=True)] == [fact]
    assert processor.dispatch(MemoryForgetEvent(item_id=ref)).result == {"removed": True}
    check = processor.dispatch(UsageReportEvent(prompt_tokens=10)).result
    assert check["prompt_tokens"] == 10


def test_an_inline_result_is_journaled_as_a_field_of_its_event(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    processor = EventProcessor(manager, mode="stepping")
    manager.ingest_user_message("q")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=CALLS))
    processor.tool_result("c1", "an answer kept inline", name="search", inline=True, title="kept")
    db = sqlite3.connect(manager.memory.agent_dir / EVENTS_FILE)
    (text,) = db.execute("SELECT payload FROM events").fetchone()
    db.close()
    assert '"inline":true' in text and '"store_arguments":{"title":"kept"}' in text
    assert processor.step().event.result == {"memory_id": None}
    assert manager.get_working_context_messages()[-1].content == "an answer kept inline" and len(manager.memory) == 0


LEGACY_ROWS = [  # (kind, payload) as the code before typed events journaled them, byte for byte
    ("user_message", '{"content":"look up the tides","images":[]}'),
    ("assistant_response", '{"message":{"role":"assistant","content":"searching","tool_calls":[{"id":"c1",'
                           '"name":"search","arguments":"{\\"q\\": \\"tides\\"}","input":{"q":"tides"}},{"id":"c2",'
                           '"name":"fetch","input":{}}]},"turn_id":null}'),
    ("tool_result", '{"tool_call_id":"c1","result":"high tide at 6","is_error":false,"name":"search",'
                    '"store_arguments":{"inline":true}}'),
    ("tool_result", '{"tool_call_id":"c2","result":{"$bytes":"AP8AAQ=="},"is_error":false,"name":"fetch",'
                    '"store_arguments":{"title":"raw bytes"}}'),
    ("memory_store", '{"content":{"$object":{"$bytes":"a user\'s own object"}},"title":"look-alike",'
                     '"timestamp":{"$datetime":"2024-05-01T12:30:00+00:00"}}'),
    ("memory_mark_critical", '{"fact":"Answers in French.","tags":["lang"]}'),
    ("usage_report", '{"prompt_tokens":120,"estimate":null}'),
    ("compaction_request", "{}"),
]
"""Rows of an ``events.sqlite3`` written by the code before typed events (main at 19f8a16), in
stepping mode: every payload as that code encoded it."""


def test_a_journal_in_the_format_before_typed_events_is_read_back_and_applied(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    journal = FileJournal(manager.memory.agent_dir)
    assert journal.count() == 0  # creates the database
    db = sqlite3.connect(manager.memory.agent_dir / EVENTS_FILE)
    with db:
        db.executemany("INSERT INTO events (id, kind, payload, queued_at) VALUES (?, ?, ?, ?)",
                       [(f"qevt_{n:016x}", kind, payload, 1.0 + n) for n, (kind, payload) in enumerate(LEGACY_ROWS)])
    db.close()
    typed = [read_event(entry.kind, entry.payload) for entry in journal.pending()]
    assert typed[2] == ToolResultEvent(tool_call_id="c1", result="high tide at 6", name="search", inline=True)
    assert typed[3].store_arguments == StoreArguments(title="raw bytes") and typed[3].result == b"\x00\xff\x00\x01"
    assert typed[4] == MemoryStoreEvent(content={"$bytes": "a user's own object"}, title="look-alike", timestamp=WHEN)

    processor = EventProcessor(manager, mode="stepping")
    results = [processor.step().event for _ in LEGACY_ROWS]
    assert [event.status for event in results] == ["applied"] * len(LEGACY_ROWS)
    messages = manager.get_working_context_messages()
    assert [m.content for m in messages[:4]] == ["S", "look up the tides", "searching", "high tide at 6"]
    assert results[2].result == {"memory_id": None}  # inline: in the conversation, not stored
    stored = manager.memory.get(event_memory_id(results[3].id))
    assert stored.content == b"\x00\xff\x00\x01" and stored.metadata.title == "raw bytes"
    kept = manager.memory.get(results[4].result["memory_id"])
    assert kept.content == {"$bytes": "a user's own object"} and kept.metadata.timestamp == WHEN
    assert [f.fact for f in manager.traces.list_semantic(pinned=True)] == ["Answers in French."]
    assert results[6].result["prompt_tokens"] == 120 and manager.compaction_required


def test_a_stored_payload_its_kind_cannot_read_is_refused_with_why_and_the_journal_goes_on(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    journal = FileJournal(manager.memory.agent_dir)
    journal.push("user_message", {"text": "a key no version knew"})  # written past every check
    journal.push("user_message", {"content": "next"})
    processor = EventProcessor(manager, mode="stepping")
    refused = processor.step().event
    assert refused.status == "failed"
    assert refused.error.startswith("InvalidArgumentError: invalid user_message event: ") and "content" in refused.error
    assert processor.step().event.result == {"turn_id": "turn_0001"}
