"""Summarizers: the extractive default and the LLM summarizer (openai SDK against the loopback
server), its validation and its fallback; a summarizer failure never drops a turn."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.kernel.summarizer import ExtractiveSummarizer, LLMSummarizer
from agent_memory.llm.client import OpenAIChatClient
from agent_memory.models.messages import Message, ToolCall
from agent_memory.models.traces import RawTraceItem
from agent_memory.testing import FakeLLMServer, ScriptedReply


def traces() -> list[RawTraceItem]:
    items = []
    for n, (user, calls, answer) in enumerate([
        ("Please always answer in French. Find flights to Lyon?", [("search_flights", {"to": "LYS"})],
         "I found 3 flights to Lyon. I will book the cheapest next."),
        ("Book the 9:40 one, I prefer aisle seats.", [("book", {"flight": "AF7640"})],
         "Booked AF7640 with an aisle seat."),
    ], 1):
        turn = f"turn_{n:04d}"
        seq = 1
        items.append(RawTraceItem(turn_id=turn, seq=seq, trace_type="user", content=user, source_event="u"))
        for name, args in calls:
            seq += 1
            items.append(RawTraceItem(turn_id=turn, seq=seq, trace_type="tool_call", tool_name=name, tool_args=args,
                                      tool_call_id=f"{turn}-c", source_event="t"))
            seq += 1
            items.append(RawTraceItem(turn_id=turn, seq=seq, trace_type="tool_result", tool_name=name,
                                      tool_result="ok", tool_call_id=f"{turn}-c", source_event="r"))
        items.append(RawTraceItem(turn_id=turn, seq=seq + 1, trace_type="assistant", content=answer, source_event="a"))
    return items


def test_extractive_summary_keeps_what_matters_and_is_deterministic() -> None:
    summarizer = ExtractiveSummarizer()
    result = summarizer.summarize(traces())
    assert result == summarizer.summarize(list(reversed(traces())))  # order of traces does not matter
    payload = result.payload
    assert result.turn_ids == ("turn_0001", "turn_0002") and result.summarizer == "extractive"
    assert "turn_0001" in payload.episodic_summary and "search_flights" in payload.episodic_summary
    facts = [fact.fact for fact in payload.semantic_facts]
    assert "Please always answer in French." in facts and "Book the 9:40 one, I prefer aisle seats." in facts
    assert "Booked AF7640 with an aisle seat." in payload.done
    assert any("ran book" in item for item in payload.done)
    assert "Find flights to Lyon?" in payload.open_questions


GOOD = {
    "episodic_summary": "The user flew to Lyon: AF7640 was booked with an aisle seat.",
    "semantic_facts": [{"fact": "Answer in French.", "tags": ["language"], "confidence": 0.9}],
    "decisions": ["Book the cheapest flight."], "done": ["Booked AF7640."], "next_steps": [],
}


@pytest.fixture
def server() -> FakeLLMServer:
    with FakeLLMServer() as srv:
        yield srv


def llm(server: FakeLLMServer, timeout_s: float = 5.0) -> LLMSummarizer:
    return LLMSummarizer(OpenAIChatClient(server.base_url, model="fake", timeout_s=timeout_s), timeout_s=timeout_s)


def test_llm_summary_is_validated_and_used(server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply("Here is the summary:\n```json\n" + json.dumps(GOOD) + "\n```"))
    result = llm(server).summarize(traces())
    assert result.summarizer == "llm" and result.fallback_reason is None
    assert result.payload.episodic_summary == GOOD["episodic_summary"]
    assert result.payload.semantic_facts[0].fact == "Answer in French."
    sent = server.requests[-1]
    assert sent["response_format"] == {"type": "json_object"} and sent["temperature"] == 0
    assert "Turn 1:" in sent["messages"][1]["content"] and "Tool call: book" in sent["messages"][1]["content"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        (ScriptedReply("no JSON here at all"), "invalid_output"),
        (ScriptedReply(json.dumps({"semantic_facts": []})), "invalid_output"),  # no summary
        (ScriptedReply("overloaded", status=500), "http_status"),
        (ScriptedReply(json.dumps(GOOD), delay_s=3.0), "timeout"),
    ],
    ids=["prose", "missing-field", "http-500", "timeout"],
)
def test_llm_failures_fall_back_to_the_extractive_summary(server: FakeLLMServer, reply: ScriptedReply,
                                                          reason: str) -> None:
    server.enqueue(reply)
    # a short timeout only where the answer is late by design: any other answer may take its time
    result = llm(server, timeout_s=1.0 if reason == "timeout" else 30.0).summarize(traces())
    assert result.fallback_reason == reason
    assert result.payload == ExtractiveSummarizer().summarize(traces()).payload


def test_a_failing_llm_summarizer_never_drops_a_turn(tmp_path: Path, server: FakeLLMServer) -> None:
    memory = AgentMemory("s", tmp_path, config=MemoryConfig(index_on_store=False))
    manager = MemoryManager(memory, system_prompt="S", summarizer=llm(server),
                            limits=ModelLimits(max_context_tokens=6_000, max_output_tokens=1_000))
    for i in range(8):
        manager.ingest_user_message(f"step {i}")
        manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id=f"c{i}", name="t"),)))
        manager.ingest_tool_result(f"c{i}", f"result {i}")
    server.enqueue(ScriptedReply("down", status=503))
    outcome = manager.compact()
    assert outcome.fallback_reason == "http_status" and outcome.turn_ids
    (episode,) = manager.traces.list_episodic()
    assert episode.summarizer == "extractive" and episode.fallback_reason == "http_status"
    assert set(episode.turn_ids) == set(outcome.turn_ids)
    assert len(manager.traces.turn_ids()) == 8  # every turn is archived or active
