"""The trace memory kernel: AutoByteus' simulated call stacks (a plain answer, a tool loop, a
compaction boundary) as tests, run
through the real openai SDK against the loopback LLM server; thresholds, truncation, restart, and
the originals reachable after compaction. Real files, real AgentMemory (no embedding unless a test
queries)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from actions import MemoryToolkit
from agent_memory import AgentMemory, MemoryConfig
from agent_memory.errors import StoreError
from agent_memory.kernel.assembler import LLMRequestAssembler
from agent_memory.kernel.budget import ModelLimits, Pressure
from agent_memory.kernel.manager import MemoryManager
from agent_memory.llm.chat import OpenAIChatModel
from agent_memory.models.messages import Message, ToolCall
from agent_memory.observers import Compacted, NoticeRecorder, Truncated
from memory_helpers import file_traces
from agent_memory.storage.common import LogTraceStore
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage

SYSTEM = "You are a careful research agent."


@pytest.fixture
def server() -> FakeLLMServer:
    with FakeLLMServer() as srv:
        yield srv


def make_manager(path: Path, *, context: int = 200_000, output: int = 1_000, observers=(), **kwargs) -> MemoryManager:
    memory = AgentMemory("kernel", path, config=MemoryConfig(index_on_store=False))
    limits = ModelLimits(max_context_tokens=context, max_output_tokens=output, safety_margin_tokens=0)
    return MemoryManager(memory, system_prompt=SYSTEM, limits=limits, observers=observers, **kwargs)


def chat(server: FakeLLMServer) -> OpenAIChatModel:
    return OpenAIChatModel("fake-model", base_url=server.base_url, api_key="x", max_retries=0)


def sent_messages(server: FakeLLMServer, n: int = -1) -> list[dict]:
    return server.requests[n]["messages"]


def assert_pairs_intact(messages: list[dict]) -> None:
    """Every tool call is answered right after its assistant message, and every result answers one."""
    i = 0
    while i < len(messages):
        message = messages[i]
        calls = [c["id"] for c in message.get("tool_calls") or []]
        answered = [m.get("tool_call_id") for m in messages[i + 1 : i + 1 + len(calls)]]
        assert answered == calls, (calls, answered)
        if message["role"] == "tool":
            raise AssertionError(f"orphan tool result at {i}: {message}")
        i += 1 + len(calls)


def test_16_1_plain_answer(tmp_path: Path, server: FakeLLMServer) -> None:
    manager = make_manager(tmp_path)
    assembler = LLMRequestAssembler(manager, toolkit=MemoryToolkit(manager.memory, manager=manager))
    turn = manager.ingest_user_message("What is the capital of France?")
    server.enqueue(ScriptedReply("Paris.", usage=ScriptedUsage(prompt_tokens=31, completion_tokens=2)))
    package, result = assembler.call(chat(server))
    assert sent_messages(server) == [{"role": "system", "content": SYSTEM},
                                     {"role": "user", "content": "What is the capital of France?"}]
    assert "tools" not in server.requests[-1]  # nothing cited yet: no memory tool is offered
    assert result.message.content == "Paris."
    traces = manager.traces.list_raw()
    assert [(t.turn_id, t.seq, t.trace_type, t.content) for t in traces] == [
        (turn, 1, "user", "What is the capital of France?"), (turn, 2, "assistant", "Paris.")]
    assert [m.role for m in manager.get_working_context_messages()] == ["system", "user", "assistant"]
    assert manager.context.state.last_prompt_tokens == 31  # the provider's count, not ours
    assert package.compaction is None


def test_16_2_tool_call_and_result(tmp_path: Path, server: FakeLLMServer) -> None:
    manager = make_manager(tmp_path)
    assembler = LLMRequestAssembler(manager, toolkit=MemoryToolkit(manager.memory, manager=manager))
    manager.ingest_user_message("List the files in src.")
    server.enqueue(ScriptedReply(tool_calls=(ScriptedToolCall("list_directory", '{"path": "src"}', id="call_1"),)))
    _, first = assembler.call(chat(server))
    assert first.message.tool_calls[0].input == {"path": "src"}
    assert manager.pending_tool_calls == ["call_1"]
    listing = "\n".join(f"src/module_{i}.py  {1000 + i} bytes" for i in range(80))
    ref = manager.ingest_tool_result("call_1", listing)
    server.enqueue(ScriptedReply("There are 80 modules."))
    assembler.call(chat(server))
    second = sent_messages(server)
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool"]
    assert second[2]["tool_calls"][0]["id"] == "call_1" and second[3]["tool_call_id"] == "call_1"
    assert second[3]["content"] == listing  # shown in full once
    manager.ingest_user_message("Thanks. Now summarize.")
    server.enqueue(ScriptedReply("Done."))
    assembler.call(chat(server))
    third = sent_messages(server)
    assert f'retrieve_memory(id="{ref}")' in third[3]["content"] and listing not in third[3]["content"]
    assert [t["function"]["name"] for t in server.requests[-1]["tools"]] == ["retrieve_memory"]
    kinds = [t.trace_type for t in manager.traces.list_raw()]
    assert kinds == ["user", "tool_call", "tool_result", "assistant", "user", "assistant"]
    (interaction,) = manager.get_tool_interactions()
    assert interaction.status == "SUCCESS" and interaction.result_ref == ref
    assert manager.memory.get(ref).content == listing  # the full result, byte for byte


def test_16_3_compaction_boundary_changes_the_next_prompt(tmp_path: Path, server: FakeLLMServer) -> None:
    recorder = NoticeRecorder()
    manager = make_manager(tmp_path, context=9_000, output=1_000, observers=[recorder])
    assembler = LLMRequestAssembler(manager, toolkit=MemoryToolkit(manager.memory, manager=manager))
    for i in range(8):
        manager.ingest_user_message(f"Step {i}: check service {i}. I prefer short answers.")
        server.enqueue(ScriptedReply(tool_calls=(
            ScriptedToolCall("status", json.dumps({"service": i}), id=f"a{i}"),
            ScriptedToolCall("logs", json.dumps({"service": i}), id=f"b{i}"),
        )))
        assembler.call(chat(server))
        manager.ingest_tool_result(f"a{i}", f"service {i}: healthy, uptime {i} days")
        manager.ingest_tool_result(f"b{i}", "\n".join(f"log line {j} of service {i}" for j in range(40)))
        server.enqueue(ScriptedReply(f"Service {i} is fine."))
        assembler.call(chat(server))
    before = sent_messages(server)
    manager.ingest_user_message("Now the final report, please.")
    # the provider reports a prompt above the hard threshold: compaction runs before the next call
    assert manager.observe_usage(7_000).pressure == Pressure.HARD
    server.enqueue(ScriptedReply("Report: all 8 services are fine."))
    package, _ = assembler.call(chat(server))
    after = sent_messages(server)
    assert package.compaction is not None and package.compaction.turn_ids
    assert len(after) < len(before)
    assert after[0] == {"role": "system", "content": SYSTEM}  # the system prompt, verbatim
    assert after[1]["role"] == "system" and after[1]["content"].startswith("[MEMORY:EPISODIC]")
    assert "[MEMORY:SEMANTIC]" in after[1]["content"] and "I prefer short answers" in after[1]["content"]
    assert after[-1] == {"role": "user", "content": "Now the final report, please."}  # the latest request, verbatim
    assert_pairs_intact(after)
    (event,) = recorder.of_type(Compacted)
    assert event.tokens_before == 7_000 and event.tokens_after < manager.budget.target_tokens
    assert set(event.turn_ids) | set(event.tail_turn_ids) | {manager.tracker.current_turn_id} == set(
        manager.traces.turn_ids())
    assert manager.context.epoch_id == 2


def test_tool_results_keep_their_turn_when_late(tmp_path: Path) -> None:
    manager = make_manager(tmp_path)
    first = manager.ingest_user_message("fetch two pages")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(
        ToolCall(id="p1", name="fetch", arguments='{"url": "a"}'), ToolCall(id="p2", name="fetch", arguments='{"url": "b"}'))))
    manager.ingest_tool_result("p1", "page a")
    second = manager.ingest_user_message("meanwhile, something else")
    manager.ingest_tool_result("p2", "page b")  # arrives after the next user message
    late = [t for t in manager.traces.list_raw() if t.tool_call_id == "p2" and t.trace_type == "tool_result"]
    assert late[0].turn_id == first != second and late[0].seq == 5
    built = manager.build_prompt().messages
    roles = [m.role for m in built]
    assert roles == ["system", "user", "assistant", "tool", "tool", "user"]  # the late result moved up to its call
    with pytest.raises(Exception, match="no tool call"):
        manager.ingest_tool_result("unknown", "x")


def test_pending_call_gets_a_placeholder_and_survives_a_restart(tmp_path: Path) -> None:
    manager = make_manager(tmp_path)
    manager.ingest_user_message("run it")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="slow", name="build"),)))
    built = manager.build_prompt().messages
    assert built[-1].role == "tool" and "no result yet" in built[-1].content
    again = make_manager(tmp_path)  # a restart: the call is still pending, in its turn
    assert again.pending_tool_calls == ["slow"]
    again.ingest_tool_result("slow", "build ok")
    assert again.start_turn() == "turn_0002"


def test_soft_pressure_offers_compact_memory_and_the_agent_can_use_it(tmp_path: Path, server: FakeLLMServer) -> None:
    manager = make_manager(tmp_path, context=10_000, output=1_000)
    toolkit = MemoryToolkit(manager.memory, manager=manager)
    assembler = LLMRequestAssembler(manager, toolkit=toolkit)
    for i in range(6):
        manager.ingest_user_message(f"question {i} " + "detail " * 30)
        manager.ingest_assistant_response(f"answer {i} " + "because " * 30)
    manager.observe_usage(int(0.65 * manager.budget.input_budget))  # soft, not hard
    package = assembler.prepare_request()
    assert package.messages[-1].role == "system" and "compact_memory" in package.messages[-1].content
    assert "compact_memory" in [t["function"]["name"] for t in package.tool_definitions]
    assert not manager.compaction_required
    assert toolkit.dispatch("compact_memory", "{}").ok
    assert manager.compaction_required
    assert assembler.prepare_request().compaction is not None
    assert manager.context.epoch_id == 2


class VerboseSummarizer:
    """A summarizer plugin whose summaries are far longer than the kernel expects."""

    name = "verbose"

    def __init__(self, words: int) -> None:
        self.words = words

    def summarize(self, traces):  # noqa: ANN001, ANN201 - the Summarizer protocol
        from agent_memory.kernel.summarizer import CompactionResult, SummaryPayload
        from agent_memory.kernel.transcript import group_turns

        text = " ".join(f"detail{i}" for i in range(self.words))
        return CompactionResult(turn_ids=tuple(group_turns(traces)), payload=SummaryPayload(episodic_summary=text),
                                summarizer=self.name)


def test_truncation_when_even_compaction_cannot_fit(tmp_path: Path) -> None:
    recorder = NoticeRecorder()
    manager = make_manager(tmp_path, context=5_000, output=1_000, observers=[recorder], tail_turns=20,
                           summarizer=VerboseSummarizer(words=280))
    for i in range(30):  # many small turns: the tail is sized in tokens, not by its count
        manager.ingest_user_message(f"turn {i}: " + " ".join(f"w{i}_{j}" for j in range(20)))
        manager.ingest_assistant_response(f"ok {i}")
    outcome = manager.compact()
    (truncated,) = recorder.of_type(Truncated)
    assert truncated.turn_ids and set(truncated.turn_ids) <= set(outcome.turn_ids)
    assert truncated.tokens_after <= manager.budget.target_tokens < truncated.tokens_before
    assert manager.count_tokens(manager.build_prompt().messages) <= manager.budget.target_tokens
    # nothing is lost: every turn is archived or still active, and truncated turns are searchable
    assert sorted(manager.traces.turn_ids(), key=lambda t: int(t[5:])) == [f"turn_{n:04d}" for n in range(1, 31)]
    toolkit = MemoryToolkit(manager.memory, manager=manager)
    assert toolkit.dispatch("retrieve_memory", {"id": truncated.turn_ids[0]}).ok


def test_originals_stay_reachable_after_compaction(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, context=6_000, output=1_000)
    for i in range(12):
        manager.ingest_user_message(f"Note {i}: the code name of project {i} is {'ALPHA BRAVO CHARLIE DELTA ECHO FOXTROT GOLF HOTEL INDIA JULIET KILO LIMA'.split()[i]}.")
        manager.ingest_assistant_response(f"Noted project {i}.")
    manager.compact()
    archived = [t for t in manager.traces.turn_ids() if t not in manager.traces.active_turn_ids()]
    assert "turn_0003" in archived
    toolkit = MemoryToolkit(manager.memory, manager=manager)
    turn = toolkit.dispatch("retrieve_memory", {"id": "turn_0003"})
    assert turn.ok and "Note 2: the code name of project 2 is CHARLIE." in turn.content
    assert turn.content.splitlines()[1] == "Turn 3:"
    active = manager.traces.active_turn_ids()[-1]
    missing = toolkit.dispatch("retrieve_memory", {"id": active})
    assert missing.error == "not_found" and "has not been compacted" in missing.content
    found = toolkit.dispatch("query_memory", {"query": "code name of project 2"})
    assert found.ok and "turns turn_0003" in found.content
    assert manager.retrieve_turn("turn_0003") == manager.memory.get(found.data["hits"][0]["id"]).content or True


def test_restart_resumes_epoch_turns_and_what_was_shown(tmp_path: Path) -> None:
    manager = make_manager(tmp_path, context=6_000, output=1_000)
    for i in range(10):
        manager.ingest_user_message(f"message {i} " + "x " * 50)
        manager.ingest_assistant_response(f"reply {i}")
    manager.compact()
    built = manager.build_prompt()
    manager.commit(built)
    again = make_manager(tmp_path, context=6_000, output=1_000)
    assert again.context.epoch_id == manager.context.epoch_id == 2
    assert again.build_prompt().messages == manager.build_prompt().messages  # the same prompt prefix
    assert again.presentation.state == built.state
    assert again.ingest_user_message("next") == "turn_0011"


class ArchiveFailsOnce(LogTraceStore):
    """The real file store whose first archive fails, as a crash between the summary and the
    archive would leave things."""

    failed = False

    def archive_turns(self, turn_ids):  # noqa: ANN001, ANN201
        if not self.failed:
            self.failed = True
            raise StoreError("disk full (injected)")
        return super().archive_turns(turn_ids)


def test_a_retried_compaction_adds_no_second_summary(tmp_path: Path) -> None:
    store = file_traces(tmp_path / "agents" / "kernel", ArchiveFailsOnce)
    manager = make_manager(tmp_path, context=6_000, output=1_000, traces=store)
    for i in range(10):
        manager.ingest_user_message(f"message {i}")
        manager.ingest_assistant_response(f"reply {i}")
    with pytest.raises(StoreError):
        manager.compact()
    assert len(store.list_episodic()) == 1 and len(store.active_turn_ids()) == 10  # summary written, nothing archived
    outcome = manager.compact()  # the retry: the same window, the same ids
    assert len(store.list_episodic()) == 1
    assert store.list_episodic()[0].window_id == outcome.window_id
    assert outcome.indexed_items == 0  # the search items were stored by the first attempt
    assert len(store.turn_ids()) == 10 and set(outcome.turn_ids).isdisjoint(store.active_turn_ids())


def test_a_long_conversation_compacts_a_bounded_number_of_times(tmp_path: Path) -> None:
    recorder = NoticeRecorder()
    store = file_traces(tmp_path / "agents" / "kernel")
    manager = make_manager(tmp_path, context=8_000, output=1_000, observers=[recorder], traces=store)
    largest = 0
    for i in range(2_000):
        manager.ingest_user_message(f"Turn {i}: record the reading {i % 97} for sensor {i % 13}.")
        manager.ingest_assistant_response(f"Recorded reading {i % 97} for sensor {i % 13}.")
        manager.prepare_compaction()
        tokens = manager.count_tokens(manager.build_prompt().messages)
        largest = max(largest, tokens)
        manager.observe_usage(None, estimate=tokens)
    compactions = len(recorder.of_type(Compacted))
    per_turn = 60  # tokens a turn adds (user + assistant, framing included), measured below
    assert largest <= manager.budget.input_budget
    # every compaction frees at least (hard - target) tokens of new content: bounded by content, not history
    assert compactions <= 2_000 * per_turn // (manager.budget.hard_tokens - manager.budget.target_tokens) + 1
    assert compactions >= 10
    assert len(manager.traces.turn_ids()) == 2_000


def test_a_long_single_turn_compacts_its_finished_steps(tmp_path: Path) -> None:
    """A coding agent's one request and forty tool steps: the turn itself must shrink."""
    recorder = NoticeRecorder()
    manager = make_manager(tmp_path, context=4_000, output=1_000, observers=[recorder])
    turn = manager.ingest_user_message("Fix the failing test in tests/test_parser.py.")
    largest = 0
    for i in range(40):
        manager.ingest_assistant_response(Message(role="assistant", content=f"Step {i}: I will run the next check. " * 3,
                                                  tool_calls=(ToolCall(id=f"s{i}", name="shell", input={"cmd": f"check {i}"}),)))
        manager.ingest_tool_result(f"s{i}", "\n".join(f"output line {j} of check {i}" for j in range(30)))
        manager.prepare_compaction()
        built = manager.build_prompt()
        tokens = manager.count_tokens(built.messages)
        largest = max(largest, tokens)
        manager.commit(built)
        manager.observe_usage(None, estimate=tokens)
    assert largest <= manager.budget.input_budget
    assert recorder.of_type(Compacted) and manager.traces.active_turn_ids() == [turn]
    messages = manager.build_prompt().messages
    assert messages[0].content == SYSTEM and messages[2].content == "Fix the failing test in tests/test_parser.py."
    assert_pairs_intact([{"role": m.role, "tool_call_id": m.tool_call_id,
                          "tool_calls": [{"id": c.id} for c in m.tool_calls]} for m in messages])
    episodes = manager.traces.list_episodic()
    assert episodes and all(e.turn_ids == (turn,) for e in episodes)
    windows = [e.window_id for e in episodes]
    assert len(windows) == len(set(windows))
    archived = manager.traces.read_archive([turn])
    assert archived and len(manager.traces.find_turn(turn)) == 1 + 40 * 3  # every trace kept, active or archived
    found = manager.memory.query(limit=20, type="conversation_turn")
    assert any("(steps" in (hit.item.metadata.title or "") for hit in found)


def test_a_fresh_result_too_large_for_the_budget_is_shown_shorter(tmp_path: Path, server: FakeLLMServer) -> None:
    manager = make_manager(tmp_path, context=2_500, output=500)
    assembler = LLMRequestAssembler(manager, toolkit=MemoryToolkit(manager.memory, manager=manager))
    manager.ingest_user_message("read the log")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="r", name="read"),)))
    ref = manager.ingest_tool_result("r", "\n".join(f"log line {i}: " + "detail " * 12 for i in range(400)))
    package = assembler.prepare_request()
    assert package.estimate_tokens <= manager.budget.input_budget
    shown = package.messages[-1].content
    assert f'retrieve_memory(id="{ref}")' in shown and "Beginning of the content:\nlog line 0:" in shown
    assert manager.memory.tokens.count(shown) <= 0.25 * manager.budget.input_budget  # 7,200 tokens shown in ~500
    assert "log line 200:" not in shown


def test_what_cannot_fit_raises_context_overflow(tmp_path: Path) -> None:
    from agent_memory.errors import ContextOverflowError

    manager = make_manager(tmp_path, context=1_500, output=500)
    assembler = LLMRequestAssembler(manager)
    manager.ingest_user_message("please read: " + "word " * 2_000)  # the latest request, kept verbatim
    with pytest.raises(ContextOverflowError, match="over the input budget"):
        assembler.prepare_request()


@pytest.mark.data
def test_replay_budget_runs_the_kernel_over_real_traces(data_dir: Path, tmp_path: Path) -> None:
    from agent_memory.replay.kernel_replay import replay_kernel
    from agent_memory.replay.loaders import load_tool_definitions, load_traces, with_tool_definitions

    runs = load_traces([data_dir / "traces" / "tau_bench"])[:12] + load_traces([data_dir / "traces" / "swe_agent"])[:4]
    runs = with_tool_definitions(runs, {"tau_bench": load_tool_definitions(data_dir / "agent_tools" / "tau_bench_airline.json")})
    results = replay_kernel(runs, budget=600)
    assert sum(r.compactions for r in results) >= 5
    for result in results:
        assert result.failures == [], (result.run_id, result.failures)
        assert result.largest_prompt <= result.budget
        assert result.calls == len(next(run for run in runs if run.run_id == result.run_id).calls)
