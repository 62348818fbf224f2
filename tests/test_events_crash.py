"""kill -9 while events are journaled and applied, many times: every journaled event is applied
exactly once (issue #8 part 3 "Done when").

A child process drives one memory through an :class:`EventProcessor`, alternately in auto mode
(each dispatch applies the pending events, then runs a requested compaction) and in stepping mode (a batch
is journaled, then stepped through). Its events follow a fixed script (a turn: user message,
answer with a tool call, the tool's result, bytes every third turn, a final answer, then a store,
a pinned fact or a compaction request), so a restarted child continues the script where the
journal stops. The test kills it with SIGKILL once it has journaled a seeded number of events
(wherever it is then) and checks the files after every kill: an applied event has its whole
effect, a pending one none, the one interrupted event all or nothing (its traces are one write). At the end, after a last child has applied
everything, each event's effect is there exactly once.

In auto mode a tool result is stored before its event is journaled, and the event names it
(``memory_id``) instead of holding it (issue #38 item 4); a pending event of that form has its item
stored already. A child killed between the two leaves an item no event names: the next child runs
the same script step again and, in auto mode, finds that item under the same id
(:func:`result_memory_id`); in stepping mode it journals the result whole, and the item of the
killed try stays, an exact copy of a result the journal holds, named by nothing.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from kills import kill_after

from agent_memory import AgentMemory, MemoryConfig, MemoryManager, Message
import hashlib

from agent_memory.agent.events import event_memory_id, result_memory_id
from agent_memory.models.items import content_to_bytes
from agent_memory.storage.files.journal import FileJournal
from agent_memory.models.traces import turn_number
from memory_helpers import file_traces

KILLS = 18
EVENTS_BEFORE_KILL = (4, 12)
"""A child is killed once it has journaled this many events (seeded, inclusive): at least 72 in all."""
FINAL_EVENTS = 25
"""Events the last child adds after the kills, applied to the end."""

SCRIPT = r'''
def script_event(index):
    """The (kind, payload) of event ``index`` of the script."""
    k, j = divmod(index, 5)
    if j == 0:
        return "user_message", {"content": f"question {k} " + "word " * 20}
    if j == 1:
        call = {"id": f"call-{k}", "name": "fetch", "arguments": '{"page": %d}' % k}
        return "assistant_response", {"message": {"role": "assistant", "content": f"fetching {k}", "tool_calls": [call]}}
    if j == 2:
        result = bytes(range(256)) * 40 + str(k).encode() if k % 3 == 0 else f"page {k} " + "text " * 300
        return "tool_result", {"tool_call_id": f"call-{k}", "result": result}
    if j == 3:
        return "assistant_response", {"message": {"role": "assistant", "content": f"answer {k}"}}
    extra = k % 3
    if extra == 0:
        return "memory_store", {"content": f"note {k} " + "detail " * 50, "title": f"note {k}"}
    if extra == 1:
        return "memory_mark_critical", {"fact": f"Fact number {k} is pinned."}
    return "compaction_request", {}
'''

CHILD = SCRIPT + r'''
import sys
from agent_memory import AgentMemory, EventProcessor, MemoryConfig, MemoryManager

root, mode, total = sys.argv[1], sys.argv[2], int(sys.argv[3])
memory = AgentMemory("crash", root, config=MemoryConfig(index_on_store=False))
processor = EventProcessor(MemoryManager(memory, system_prompt="S"), mode=mode, keep_applied=None)
processor.manager.on(lambda e: print("recovered", e.event_id, flush=True) if getattr(e, "recovered", False) else None)
print("ready", flush=True)
journal = processor.journal
if mode == "stepping":
    while True:
        journaled = journal.count()
        for index in range(journaled, min(journaled + 7, total)):
            processor.dispatch(*script_event(index))
            print("journaled", index + 1, flush=True)
        while processor.step().has_pending_operations:
            pass
        if journal.count() >= total:
            break
else:
    while (journaled := journal.count()) < total:
        processor.dispatch(*script_event(journaled))
        print("journaled", journaled + 1, flush=True)
    processor.drain()
print("done", journal.count(), flush=True)
'''

namespace: dict = {}
exec(SCRIPT, namespace)  # noqa: S102 - the same script the children run
script_event = namespace["script_event"]

TRACES_PER_KIND = {"user_message": 1, "assistant_response": None, "tool_result": 1}
"""Raw traces an event writes (an answer: 1 for its text + 1 per tool call)."""


def expected_traces(kind: str, payload: dict) -> int:
    if kind == "assistant_response":
        return 1 + len(payload["message"].get("tool_calls") or [])
    return TRACES_PER_KIND.get(kind, 0)


def check(agent_dir: Path, *, final: bool) -> dict[str, int]:
    """Every event's effect is whole if applied, absent if pending, all-or-nothing if interrupted;
    ``final``: every event is applied, exactly once. Returns the count of events per status."""
    journal = FileJournal(agent_dir)
    events = journal.events()
    assert [event.seq for event in events] == list(range(1, len(events) + 1)), "a journaled event is missing"
    for index, event in enumerate(events):  # the journal is the script, in order, each event once
        kind, payload = script_event(index)
        assert event.kind.value == kind, index
        if kind == "assistant_response":  # journaled as the validated message
            assert Message.model_validate(event.payload["message"]) == Message.model_validate(payload["message"])
        elif kind == "tool_result" and "memory_id" in event.payload:  # stored first, journaled by its id
            digest = hashlib.sha256(content_to_bytes(payload["result"])[0]).hexdigest()
            assert event.payload["memory_id"] == result_memory_id("crash", payload["tool_call_id"], digest), index
            assert set(event.payload) == {"tool_call_id", "memory_id", "preview"}, index
        else:
            assert event.payload == payload, index
    store = file_traces(agent_dir)
    lines = {item.id: item for item in (*store.read_archive(), *store.list_raw())}
    assert all(item.correlation_id for item in lines.values()), "a trace not written by an event"
    by_event: dict[str, list] = {}
    for item in lines.values():
        by_event.setdefault(item.correlation_id, []).append(item)
    statuses = [event.status for event in events]
    assert "failed" not in statuses
    assert statuses.count("applying") <= 1, "two events in flight at once"
    results = [payload["result"] for kind, payload in map(script_event, range(len(events) + 5)) if kind == "tool_result"]
    with AgentMemory("crash", agent_dir.parent.parent, config=MemoryConfig(index_on_store=False)) as memory:
        item_ids = [record.id for record in memory.records()]
        assert len(item_ids) == len(set(item_ids)), "an item stored twice"
        named = {record.id for record in memory.records() if record.type not in ("action_result", "file")}  # not results

        for event in events:
            want = expected_traces(event.kind.value, event.payload)
            got = len(by_event.pop(event.id, []))
            item_id = event.payload.get("memory_id") or event_memory_id(event.id)
            stored = item_id in memory
            if event.kind.value in ("tool_result", "memory_store"):
                named.add(item_id)
            if event.status == "applied":
                assert got == want, (event.kind, event.seq, got, want)
                if event.kind.value in ("tool_result", "memory_store"):
                    assert stored and event.result == {"memory_id": item_id}
            elif event.status == "queued":  # its effect not written; a result named by id is stored already
                assert got == 0 and stored == ("memory_id" in event.payload), (event.kind, event.seq)
            else:  # interrupted: all of its traces or none
                assert got in (0, want), (event.kind, event.seq, got, want)
        for item_id in set(item_ids) - named:  # stored by a try killed before its event was journaled
            assert memory.get(item_id).content in results, item_id
        print(f"  {len(set(item_ids) - named)} results stored by a try killed before its event was journaled")
    assert not by_event, "traces of an event that is not in the journal"
    turns = sorted({item.turn_id for item in lines.values()}, key=turn_number)
    users = [item for item in lines.values() if item.trace_type == "user"]
    assert len(users) == len(turns) and [turn_number(t) for t in turns] == list(range(1, len(turns) + 1))
    calls = {item.tool_call_id: item.turn_id for item in lines.values() if item.trace_type == "tool_call"}
    for item in lines.values():
        if item.trace_type == "tool_result":
            assert calls[item.tool_call_id] == item.turn_id, "a result left its call's turn"
    if final:
        assert statuses == ["applied"] * len(events)
        facts = [fact.fact for fact in store.list_semantic(pinned=True)]
        pinned = [event.payload["fact"] for event in events if event.kind.value == "memory_mark_critical"]
        assert sorted(facts) == sorted(pinned)
    return {status: statuses.count(status) for status in set(statuses)}


def test_kill_9_while_applying_events_loses_none_and_applies_none_twice(tmp_path: Path) -> None:
    rng = random.Random(20240508)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    agent_dir = tmp_path / "agents" / "crash"
    recovered: set[str] = set()
    interrupted = 0
    started = time.monotonic()
    for kill in range(KILLS):
        mode = "auto" if kill % 2 == 0 else "stepping"
        child = subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path), mode, "100000"], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        # killed once it has journaled a seeded number of events, wherever it is then
        read = kill_after(child, rng.randint(*EVENTS_BEFORE_KILL), lambda line: line.startswith("journaled"))
        out, err = child.communicate(timeout=60)
        assert child.returncode == -signal.SIGKILL, err[-2000:]
        recovered |= {line.split()[1] for line in [*read, *out.splitlines()] if line.startswith("recovered")}
        counts = check(agent_dir, final=False)
        interrupted += counts.get("applying", 0)

    journaled = FileJournal(agent_dir).count()
    final = -(-(journaled + FINAL_EVENTS) // 5) * 5  # the script ends with a whole turn: every call answered
    for mode in ("stepping", "auto"):  # the last children apply what the kills left, and go on to the end
        total = (journaled + final) // 2 if mode == "stepping" else final
        done = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path), mode, str(total)], env=env,
                              capture_output=True, text=True, timeout=300, check=False)
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stdout.splitlines()[-1] == f"done {total}"
        recovered |= {line.split()[1] for line in done.stdout.splitlines() if line.startswith("recovered")}
        journaled = total
    counts = check(agent_dir, final=True)
    assert counts == {"applied": journaled}
    assert journaled >= 80, "the children applied too few events to test much"
    manager = MemoryManager(AgentMemory("crash", tmp_path, config=MemoryConfig(index_on_store=False)), system_prompt="S")
    assert manager.pending_tool_calls == []  # every call answered, none answered twice
    held = manager.get_working_context_messages()
    held_ids = {m.id for m in held} | {call.id for m in held for call in m.tool_calls}
    for item in manager.traces.list_raw():  # the restarted working context holds every active trace once
        assert (item.tool_call_id if item.trace_type == "tool_call" else item.id) in held_ids, item
    results = [event for event in FileJournal(agent_dir).events() if event.kind.value == "tool_result"]
    by_id = sum("memory_id" in event.payload for event in results)
    assert 0 < by_id < len(results), "both ways of journaling a result (auto: by id; stepping: whole) were run"
    print(f"\n{KILLS} kills, {journaled} events, {interrupted} left in flight, {len(recovered)} recovered "
          f"without re-applying, {by_id} of {len(results)} results journaled by memory id, "
          f"{time.monotonic() - started:.1f} s")
