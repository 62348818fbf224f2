"""Our trace files load in AutoByteus' own reader, and AutoByteus' files load in ours.

AutoByteus (PyPI ``autobyteus``, github.com/AutoByteus/autobyteus, whose trace memory ours follows)
lives in a venv of its own (its dependencies — openai, anthropic, google-genai, mcp, ... — are not
ours) that ``make venv`` installs beside ours, ``.venv-autobyteus/`` (or
``$AGENT_MEMORY_AUTOBYTEUS_VENV``). Its classes run in that venv as a subprocess:
``FileMemoryStore`` (``list``, ``list_raw_trace_dicts``, ``read_archive_raw_traces``,
``prune_raw_traces``), ``build_tool_interactions``, ``MemoryManager.get_raw_tail``, ``Retriever``,
``CompactionSnapshotBuilder``, ``Compactor``, and, when the directory has one,
``WorkingContextSnapshotStore`` with ``WorkingContextSnapshotSerializer`` (``read_with_autobyteus``
reports it, for the snapshot's own tests). Without that venv the tests skip (and fail under
``CI=true``).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_memory.kernel.turns import TurnTracker
from agent_memory.models.tool_interactions import build_tool_interactions
from agent_memory.models.traces import EpisodicItem, RawTraceItem, SemanticItem, TraceMedia, tool_result_preview
from agent_memory.storage import FileBackend, common
from agent_memory.storage.files.trace_log import TRACE_LOGS
from agent_memory.storage.traces import TraceKind, TraceStore

AUTOBYTEUS_VERSION = "1.4.4"
RUN_TIMEOUT_S = 120.0
RESULT_PREFIX = "AGENT_MEMORY_RESULT "

# Fields AutoByteus' dataclasses know (autobyteus/memory/models/*.py); it ignores the others.
AB_RAW_FIELDS = {
    "id", "ts", "turn_id", "seq", "trace_type", "content", "source_event", "media", "tool_name", "tool_call_id",
    "tool_args", "tool_result", "tool_error", "correlation_id", "tags", "tool_result_ref",
}
AB_EPISODIC_FIELDS = {"id", "ts", "turn_ids", "summary", "tags", "salience"}
AB_SEMANTIC_FIELDS = {"id", "ts", "fact", "tags", "confidence", "salience"}

READER = r"""
import json, sys
from autobyteus.memory.compaction_snapshot_builder import CompactionSnapshotBuilder
from autobyteus.memory.memory_manager import MemoryManager
from autobyteus.memory.models.memory_types import MemoryType
from autobyteus.memory.store.file_store import FileMemoryStore
from autobyteus.memory.store.working_context_snapshot_store import WorkingContextSnapshotStore
from autobyteus.memory.tool_interaction_builder import build_tool_interactions
from autobyteus.memory.working_context_snapshot_serializer import WorkingContextSnapshotSerializer

base, agent_id, tail_turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
store = FileMemoryStore(base, agent_id)
raw = store.list(MemoryType.RAW_TRACE)
manager = MemoryManager(store=store)
bundle = manager.retriever.retrieve(max_episodic=3, max_semantic=20)
tail = manager.get_raw_tail(tail_turns)
out = {
    "raw": [item.to_dict() for item in raw],
    "raw_dicts": store.list_raw_trace_dicts(),
    "archive": store.read_archive_raw_traces(),
    "episodic": [item.to_dict() for item in store.list(MemoryType.EPISODIC)],
    "semantic": [item.to_dict() for item in store.list(MemoryType.SEMANTIC)],
    "interactions": [
        {"tool_call_id": i.tool_call_id, "turn_id": i.turn_id, "tool_name": i.tool_name, "arguments": i.arguments,
         "result": i.result, "error": i.error, "status": i.status.name}
        for i in build_tool_interactions(raw)
    ],
    "bundle": {"episodic": [e.summary for e in bundle.episodic], "semantic": [s.fact for s in bundle.semantic]},
    "tail": [[t.turn_id, t.seq] for t in tail],
    "snapshot": [m.to_dict() for m in CompactionSnapshotBuilder().build(system_prompt="SYSTEM", bundle=bundle,
                                                                         raw_tail=tail)],
}
snapshots = WorkingContextSnapshotStore(base, agent_id)
if snapshots.exists(agent_id):
    payload = snapshots.read(agent_id)
    valid = WorkingContextSnapshotSerializer.validate(payload)
    out["working_context"] = {"valid": valid}
    if valid:
        snapshot, meta = WorkingContextSnapshotSerializer.deserialize(payload)
        out["working_context"].update(epoch_id=snapshot.epoch_id, meta=meta,
                                      messages=[m.to_dict() for m in snapshot.build_messages()])
print("AGENT_MEMORY_RESULT " + json.dumps(out, default=str))
"""

WRITER = r"""
import json, sys
from autobyteus.agent.events.agent_events import ToolResultEvent
from autobyteus.agent.tool_invocation import ToolInvocation
from autobyteus.llm.user_message import LLMUserMessage
from autobyteus.llm.utils.response_types import CompleteResponse
from autobyteus.memory.compaction.compaction_result import CompactionResult
from autobyteus.memory.compaction.compactor import Compactor
from autobyteus.memory.compaction.summarizer import Summarizer
from autobyteus.memory.memory_manager import MemoryManager
from autobyteus.memory.models.memory_types import MemoryType
from autobyteus.memory.policies.compaction_policy import CompactionPolicy
from autobyteus.memory.store.file_store import FileMemoryStore

class Fixed(Summarizer):
    def summarize(self, traces):
        turns = sorted({t.turn_id for t in traces})
        fact = {"fact": "The user likes short answers.", "tags": ["preference"], "confidence": 0.9}
        return CompactionResult(episodic_summary="summary of " + ",".join(turns), semantic_facts=[fact])

base, agent_id = sys.argv[1], sys.argv[2]
store = FileMemoryStore(base, agent_id)
manager = MemoryManager(store=store)
for i in range(1, 4):
    turn_id = manager.start_turn()
    message = LLMUserMessage(content=f"question {i}", image_urls=["https://ex.org/%d.png" % i])
    manager.ingest_user_message(message, turn_id, "LLMUserMessageReadyEvent")
    call = ToolInvocation(name="search", arguments={"q": f"q{i}"}, id=f"call_{i}", turn_id=turn_id)
    manager.ingest_tool_intent(call)
    error = "HTTP 500" if i == 2 else None
    manager.ingest_tool_result(ToolResultEvent(tool_name="search", result=None if error else ["r%d" % i] * 3,
                                               tool_invocation_id=f"call_{i}", turn_id=turn_id, error=error,
                                               tool_args={"q": f"q{i}"}))
    answer = CompleteResponse(content=f"answer {i}", reasoning="because")
    manager.ingest_assistant_response(answer, turn_id, "LLMCompleteResponseReceivedEvent")
compactor = Compactor(store, CompactionPolicy(raw_tail_turns=1), Fixed())
compactor.compact(compactor.select_compaction_window())
print("AGENT_MEMORY_RESULT " + json.dumps({
    "raw": [t.to_dict() for t in store.list(MemoryType.RAW_TRACE)],
    "archive": store.read_archive_raw_traces(),
    "episodic": [e.to_dict() for e in store.list(MemoryType.EPISODIC)],
    "semantic": [s.to_dict() for s in store.list(MemoryType.SEMANTIC)],
}))
"""


def _venv_dir() -> Path:
    env = os.environ.get("AGENT_MEMORY_AUTOBYTEUS_VENV")
    return Path(env) if env else Path(__file__).resolve().parents[1] / ".venv-autobyteus"


def _clean_env() -> dict[str, str]:
    """The environment without our venv's traces, so AutoByteus' venv imports only its own packages."""
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}


@pytest.fixture(scope="session")
def autobyteus_python() -> Path:
    """The interpreter of the venv holding ``autobyteus==1.4.4`` that ``make venv`` installs (tests
    never install anything: they run offline). Missing: skip, or fail under ``CI=true``."""
    venv = _venv_dir()
    python = venv / "bin" / "python"
    marker = venv / ".installed"
    if not marker.exists() or marker.read_text(encoding="utf-8").strip() != AUTOBYTEUS_VERSION:
        message = f"no AutoByteus {AUTOBYTEUS_VERSION} venv at {venv}: `make venv` installs it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return python


def run_autobyteus(python: Path, script: str, *args: str) -> dict[str, Any]:
    """Run ``script`` with AutoByteus' interpreter; its result is the last line starting with
    ``RESULT_PREFIX`` (AutoByteus prints banners of its own on import)."""
    done = subprocess.run(
        [str(python), "-c", script, *args],
        env=_clean_env(), capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert lines, done.stdout[-2000:]
    return json.loads(lines[-1][len(RESULT_PREFIX) :])


def read_with_autobyteus(python: Path, memory_dir: Path, agent_id: str, tail_turns: int = 4) -> dict[str, Any]:
    """What AutoByteus' reader classes make of ``<memory_dir>/agents/<agent_id>/``: ``raw``,
    ``raw_dicts``, ``archive``, ``episodic``, ``semantic`` (their ``to_dict()``), ``interactions``,
    ``bundle``, ``tail``, ``snapshot`` (its CompactionSnapshotBuilder's messages) and, when
    ``working_context_snapshot.json`` exists, ``working_context`` (``valid``, ``epoch_id``,
    ``messages``)."""
    return run_autobyteus(python, READER, str(memory_dir), agent_id, str(tail_turns))


def lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def as_autobyteus(record: dict[str, Any], fields: set[str]) -> dict[str, Any]:
    """A line of ours as AutoByteus' ``to_dict`` gives it back: its fields only, no empty tags."""
    return {k: v for k, v in record.items() if k in fields and not (k == "tags" and not v)}


def open_traces(memory_dir: Path, agent_id: str) -> TraceStore:
    """The agent's traces in the file backend of ``memory_dir``, as the library opens them."""
    return common.traces(FileBackend(memory_dir), agent_id)


def trace_file(memory_dir: Path, agent_id: str, kind: TraceKind) -> Path:
    """The AutoByteus JSONL file that holds the agent's traces of ``kind``."""
    return memory_dir / "agents" / agent_id / TRACE_LOGS[f"traces.{kind}"][0]


def write_conversation(memory_dir: Path, agent_id: str) -> TraceStore:
    """Six turns through our store and TurnTracker, with media, parallel tool calls, an error, a
    1 MB result kept as a preview and a reference, reasoning, a compaction of turns 1-3."""
    store = open_traces(memory_dir, agent_id)
    tracker = TurnTracker(store)
    for n in range(1, 7):
        tid = tracker.start_turn()
        seq = lambda: tracker.next_seq(tid)  # noqa: E731
        items = [
            RawTraceItem(turn_id=tid, seq=seq(), trace_type="user", content=f"Question {n}: find the lighthouse.",
                         source_event="LLMUserMessageReadyEvent", media=TraceMedia(images=(f"https://ex.org/{n}.png",)),
                         tags=("processed",)),
        ]
        for k, error in ((1, None), (2, "HTTP 503" if n == 2 else None)):
            call_id = f"call_{n}_{k}"
            items.append(RawTraceItem(turn_id=tid, seq=seq(), trace_type="tool_call",
                                      source_event="PendingToolInvocationEvent", tool_name="web_search",
                                      tool_call_id=call_id, tool_args={"query": f"lighthouse {n}", "k": k}))
            page = "<p>Bell Rock</p>" * 70_000 if k == 1 else {"hits": [f"hit {n}"]}
            items.append(RawTraceItem(turn_id=tid, seq=seq(), trace_type="tool_result", source_event="ToolResultEvent",
                                      tool_name="web_search", tool_call_id=call_id,
                                      tool_result=None if error else tool_result_preview(page), tool_error=error,
                                      tool_result_ref=None if error else "mem_00000000000%d" % n))
        items.append(RawTraceItem(turn_id=tid, seq=seq(), trace_type="assistant", content=f"Answer {n}.",
                                  source_event="LLMCompleteResponseReceivedEvent", reasoning="Checked both results.",
                                  tags=("final",)))
        store.add_raw(items)
    window = ["turn_0001", "turn_0002", "turn_0003"]
    episode = EpisodicItem(turn_ids=tuple(window), summary="The user asked about lighthouses; Bell Rock was found.",
                           tags=("research",), salience=0.6, decisions=("use web_search",), done=("found Bell Rock",),
                           summarizer="extractive")
    store.add_episodic(episode)
    store.add_semantic([
        SemanticItem(fact="The user researches lighthouses.", tags=("topic",), confidence=0.9, salience=0.8,
                     source_turn_ids=tuple(window), window_id=episode.window_id),
        SemanticItem(fact="Answer in one sentence.", tags=("preference",), confidence=1.0, salience=1.0, pinned=True),
    ])
    store.archive_turns(window)
    return store


def test_autobyteus_reads_our_directory(tmp_path: Path, autobyteus_python: Path) -> None:
    memory_dir = tmp_path / "memory"
    store = write_conversation(memory_dir, "agent-1")
    got = read_with_autobyteus(autobyteus_python, memory_dir, "agent-1")

    ours_raw = lines(trace_file(memory_dir, "agent-1", "raw"))
    assert got["raw_dicts"] == ours_raw  # the lines, as JSON, unchanged
    assert got["raw"] == [as_autobyteus(line, AB_RAW_FIELDS) for line in ours_raw]  # into its RawTraceItem
    assert got["archive"] == lines(trace_file(memory_dir, "agent-1", "archive"))
    assert [line["turn_id"] for line in got["archive"]] == ["turn_0001"] * 6 + ["turn_0002"] * 6 + ["turn_0003"] * 6
    assert got["episodic"] == [as_autobyteus(line, AB_EPISODIC_FIELDS) for line in lines(trace_file(memory_dir, "agent-1", "episodic"))]
    assert got["semantic"] == [as_autobyteus(line, AB_SEMANTIC_FIELDS) for line in lines(trace_file(memory_dir, "agent-1", "semantic"))]

    # Its tool pairing agrees with ours, status by status.
    ours = [(i.tool_call_id, i.turn_id, i.status) for i in build_tool_interactions(store.list_raw())]
    assert [(i["tool_call_id"], i["turn_id"], i["status"]) for i in got["interactions"]] == ours
    assert all(len(json.dumps(i["result"])) <= 2_100 for i in got["interactions"])  # previews, not pages

    # Its compaction snapshot is built from our summary, facts and raw tail.
    assert got["bundle"] == {
        "episodic": ["The user asked about lighthouses; Bell Rock was found."],
        "semantic": ["The user researches lighthouses.", "Answer in one sentence."],
    }
    assert got["tail"] == [[t.turn_id, t.seq] for t in store.list_raw()]
    text = got["snapshot"][1]["content"]
    assert got["snapshot"][0] == {**got["snapshot"][0], "role": "system", "content": "SYSTEM"}
    assert "[MEMORY:EPISODIC]" in text and "- Answer in one sentence." in text
    assert "(turn_0006:6) ASSISTANT: Answer 6." in text


def test_we_read_a_directory_autobyteus_wrote(tmp_path: Path, autobyteus_python: Path) -> None:
    memory_dir = tmp_path / "memory"
    written = run_autobyteus(autobyteus_python, WRITER, str(memory_dir), "ab-agent")
    store = open_traces(memory_dir, "ab-agent")

    def as_json(items: list[Any]) -> list[dict[str, Any]]:
        return [item.model_dump(mode="json") for item in items]

    assert as_json(store.list_raw()) == written["raw"]
    assert as_json(store.read_archive()) == sorted(written["archive"], key=lambda d: (d["turn_id"], d["seq"]))
    assert store.turn_ids() == ["turn_0001", "turn_0002", "turn_0003"]
    assert [t.trace_type for t in store.find_turn("turn_0002")] == ["user", "tool_call", "tool_result", "assistant"]
    assert [(i.tool_call_id, i.status) for i in build_tool_interactions(store.read_archive())] == [
        ("call_1", "SUCCESS"), ("call_2", "ERROR"),
    ]
    (episode,) = store.list_episodic()
    assert (episode.id, episode.turn_ids, episode.summary) == (
        written["episodic"][0]["id"], ("turn_0001", "turn_0002"), "summary of turn_0001,turn_0002",
    )
    assert [f.fact for f in store.list_semantic()] == ["The user likes short answers."]
    # Our tracker continues after AutoByteus' turns, and our lines go beside its own.
    tracker = TurnTracker(store)
    assert tracker.start_turn() == "turn_0004"
    assert tracker.next_seq("turn_0003") == 5
    store.add_raw([RawTraceItem(turn_id="turn_0004", seq=tracker.next_seq("turn_0004"), trace_type="user",
                                content="next", source_event="LLMUserMessageReadyEvent")])
    again = read_with_autobyteus(autobyteus_python, memory_dir, "ab-agent")
    assert [line["turn_id"] for line in again["raw"]] == ["turn_0003"] * 4 + ["turn_0004"]


def test_autobyteus_reads_the_kernels_working_context_snapshot(tmp_path: Path, autobyteus_python: Path) -> None:
    from agent_memory import AgentMemory, MemoryConfig
    from agent_memory.kernel.budget import ModelLimits
    from agent_memory.kernel.manager import MemoryManager
    from agent_memory.kernel.working_context import WorkingContextSnapshot
    from agent_memory.models.messages import Message, ToolCall
    from agent_memory.storage.files.documents import FileDocumentSlot

    memory_dir = tmp_path / "memory"
    memory = AgentMemory("kernel-agent", memory_dir, config=MemoryConfig(index_on_store=False))
    manager = MemoryManager(memory, system_prompt="SYSTEM", limits=ModelLimits(max_context_tokens=6_000,
                                                                               max_output_tokens=1_000))
    for i in range(8):
        manager.ingest_user_message(f"find page {i}")
        manager.ingest_assistant_response(Message(role="assistant", content=f"Fetching {i}.", tool_calls=(
            ToolCall(id=f"c{i}", name="fetch", input={"n": i}),)))
        manager.ingest_tool_result(f"c{i}", f"page {i} text " * 20)
        manager.ingest_assistant_response(f"Page {i} read.")
    manager.compact()
    manager.save()
    got = read_with_autobyteus(autobyteus_python, memory_dir, "kernel-agent")["working_context"]
    assert got["valid"] and got["epoch_id"] == manager.context.epoch_id == 2
    ours = manager.get_working_context_messages()
    assert [m["role"] for m in got["messages"]] == [m.role for m in ours]
    assert got["messages"][0]["content"] == "SYSTEM" and "[MEMORY:EPISODIC]" in got["messages"][1]["content"]
    calls = [m for m in got["messages"] if m["tool_payload"] and "tool_calls" in m["tool_payload"]]
    ours_calls = [m for m in ours if m.tool_calls]
    assert [c["tool_payload"]["tool_calls"][0]["arguments"] for c in calls] == [m.tool_calls[0].input for m in ours_calls]
    results = [m for m in got["messages"] if m["tool_payload"] and "tool_call_id" in m["tool_payload"]]
    assert results and all(r["tool_payload"]["tool_result"].startswith("[stored in memory as mem_") for r in results)
    # and ours reads it back exactly
    reread = WorkingContextSnapshot(FileDocumentSlot(memory.agent_dir / "working_context_snapshot.json"),
                                    agent_id="kernel-agent")
    assert reread.build_messages() == ours and reread.epoch_id == 2
