"""The OpenAI Agents SDK adapter, driven by the real SDK (openai-agents) against the loopback
scripted server: a large result is stored, shown once, cited in the next call, retrieved by the
model through retrieve_memory, and the run's usage is priced."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, OpenAIResponsesModel, RunConfig, Runner, SessionSettings, function_tool  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from openai import AsyncOpenAI  # noqa: E402

from agent_memory import AgentMemory, InvalidArgumentError  # noqa: E402
from agent_memory.errors import MemoryClosedError  # noqa: E402
from agent_memory.integrations.channel import result_id  # noqa: E402
from agent_memory.integrations.openai_agents import AgentMemorySession, OpenAIAgentsMemory  # noqa: E402
from agent_memory.presentation.policy import PresentationPolicy  # noqa: E402
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall  # noqa: E402

CITATION = re.compile(r'retrieve_memory\(id="(mem_[0-9a-f]{12})"\)')


def _page(data_dir: Path) -> str:
    """A real fetched page (LWN's front page as a crawler saved it, 87 kB of HTML)."""
    return (data_dir / "webpages" / "readability" / "lwn-1" / "source.html").read_text(encoding="utf-8")


def _outputs(body: dict[str, Any]) -> list[str]:
    return [str(item.get("output")) for item in body.get("input", []) if item.get("type") == "function_call_output"]


def _tools(body: dict[str, Any]) -> list[str]:
    return [tool.get("name") for tool in body.get("tools", [])]


def test_a_result_is_stored_shown_once_cited_retrieved_and_priced(tmp_path: Path, data_dir: Path) -> None:
    page = _page(data_dir)
    memory = AgentMemory("researcher", tmp_path)

    @function_tool
    def fetch_page(url: str) -> str:
        """Fetch a web page."""
        return page if url.endswith("/a") else "Short answer from the second page."

    def retrieve_from_citation(body: dict[str, Any]) -> ScriptedReply:
        cited = CITATION.search(_outputs(body)[0])
        assert cited is not None, "the first result is cited in the third call"
        return ScriptedReply(tool_calls=(ScriptedToolCall("retrieve_memory", json.dumps({"id": cited.group(1), "around": "openSUSE"})),))

    with FakeLLMServer() as server:
        server.enqueue(
            ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/a"}'),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/b"}'),)),
            retrieve_from_citation,
            "Done: the page is read.",
        )
        adapter = OpenAIAgentsMemory(memory, conversation_id="run1", model="gpt-4o",
                                     policy=PresentationPolicy(cache_aware=False, full_result_max_tokens=20_000))
        model = OpenAIResponsesModel(model="gpt-4o", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="test"))
        agent = Agent(name="researcher", instructions="Answer from the pages.", model=model,
                      tools=[fetch_page, *adapter.tools])
        result = asyncio.run(Runner.run(agent, "Read https://example.org/a", max_turns=6,
                                        run_config=adapter.run_config(tracing_disabled=True)))
        requests = server.requests

    assert result.final_output == "Done: the page is read."
    assert len(requests) == 4
    first_id = result_id("researcher", "run1", "call_1_0", page)
    assert memory.get(first_id).content == page  # stored exactly, under the id derived from the call
    shown = _outputs(requests[1])[0]
    assert shown == adapter.channel.builder.view(first_id).full and "openSUSE" in shown  # shown in full once
    # The SDK fixes the tools before the filter stores: the memory tools go from the call after the
    # one where citing would first pay for them (here the first stored result: a page whose readable
    # text is far shorter than its HTML), the call in which it can first be cited.
    assert "retrieve_memory" not in _tools(requests[0]) and "retrieve_memory" not in _tools(requests[1])
    assert "retrieve_memory" in _tools(requests[2]) and "Memory:" not in requests[1]["instructions"]
    third = _outputs(requests[2])
    assert len(third[0]) < len(shown) // 5 and first_id in third[0]  # then cited by its id
    assert "Memory:" in requests[2]["instructions"]
    retrieved = _outputs(requests[3])[-1]
    assert "Ubuntu, Debian, Fedora, openSUSE" in retrieved  # read back through the memory tool
    cost = adapter.record(result)
    assert cost is not None and cost.total_usd > 0
    assert adapter.channel.usage.calls == 4 and adapter.channel.usage.unpriced_calls == 0
    assert adapter.record(result) is None  # a run is priced once
    assert len(memory.records()) == 2  # the page and the short result; the memory tool's answer is not stored


def test_the_filter_stores_each_result_once_across_processes_of_one_conversation(tmp_path: Path) -> None:
    big = "Row {n}: the quarterly revenue of unit {n} grew by {n} percent over the year before.\n"
    items: list[Any] = [
        {"role": "user", "content": "Summarise the report"},
        {"type": "function_call", "call_id": "c1", "name": "report", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "".join(big.format(n=n) for n in range(200))},
    ]
    memory = AgentMemory("analyst", tmp_path)
    first = OpenAIAgentsMemory(memory, conversation_id="s1")
    agent = Agent(name="analyst")
    first.input_filter(CallModelData(model_data=ModelInputData(input=list(items), instructions=None), agent=agent,
                                     context=None))
    again = OpenAIAgentsMemory(memory, conversation_id="s1")  # a restarted process, same conversation
    out = again.input_filter(CallModelData(model_data=ModelInputData(input=list(items), instructions=None),
                                           agent=agent, context=None))
    assert len(memory.records()) == 1
    assert out.input[0] == items[0] and out.input[1] == items[1]  # only outputs are touched


@pytest.mark.parametrize("call_id", ["dup", ""])
def test_a_reused_call_id_in_the_input_sends_the_latest_result_as_itself(tmp_path: Path, call_id: str) -> None:
    """A conversation handed to the SDK whose calls share an id (or have none), as a server that
    numbers calls afresh each turn leaves it: the SDK sends one output per call id, the latest,
    and the filter must show it as itself (it showed the first; an empty id raised)."""
    weeks = ["".join(f"Week {n}, row {r}: unit {r} shipped {r * n} parcels to port {n}.\n" for r in range(120))
             for n in (1, 2)]
    history: list[Any] = [{"role": "user", "content": "Compare two weeks."}]
    for n, week in enumerate(weeks, start=1):
        history += [{"type": "function_call", "call_id": call_id, "name": "weekly_report", "arguments": json.dumps({"week": n})},
                    {"type": "function_call_output", "call_id": call_id, "output": week}]
    history.append({"role": "user", "content": "Which week shipped more?"})
    memory = AgentMemory("analyst", tmp_path)

    @function_tool
    def weekly_report(week: int) -> str:
        """The shipping report of one week."""
        return weeks[week - 1]

    with FakeLLMServer() as server:
        server.enqueue("Week 2.")
        adapter = OpenAIAgentsMemory(memory, conversation_id="run1")
        model = OpenAIResponsesModel(model="gpt-4o", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="test"))
        agent = Agent(name="analyst", model=model, tools=[weekly_report, *adapter.tools])
        result = asyncio.run(Runner.run(agent, history, run_config=adapter.run_config(tracing_disabled=True)))
        requests = server.requests

    assert result.final_output == "Week 2."
    assert _outputs(requests[0]) == [weeks[1]]  # the latest output of the call id, its own text
    assert sorted(memory.get(record.id).content for record in memory.records()) == weeks  # each stored


def _filter_calls(adapter: OpenAIAgentsMemory, results: list[str]) -> list[tuple[bool, ModelInputData]]:
    """The filter on a conversation that gets one more result per call: (the memory tools were
    enabled for that call, what the filter sent)."""
    agent = Agent(name="analyst", tools=[*adapter.tools])
    items: list[Any] = [{"role": "user", "content": "Compare the reports"}]
    sent = []
    for n, text in enumerate(results):
        items += [{"type": "function_call", "call_id": f"c{n}", "name": "report", "arguments": json.dumps({"n": n})},
                  {"type": "function_call_output", "call_id": f"c{n}", "output": text}]
        enabled = adapter.enabled
        sent.append((enabled, adapter.input_filter(CallModelData(
            model_data=ModelInputData(input=list(items), instructions="You compare reports."), agent=agent, context=None))))
    return sent


def test_small_results_never_bring_the_memory_tools_and_a_large_one_brings_them_a_call_later(tmp_path: Path) -> None:
    small = [f"Report {n}: revenue grew by {n} percent." for n in range(6)]
    quiet = OpenAIAgentsMemory(AgentMemory("analyst", tmp_path / "small"), model="gpt-4o")
    calls = _filter_calls(quiet, small)
    for enabled, out in calls:
        assert not enabled and "Memory:" not in (out.instructions or "")
    assert [item["output"] for item in calls[-1][1].input if "output" in item] == small
    assert not quiet.enabled  # six results stored, none worth its citation's tools and prompt

    rows = "".join(f"Row {n}: the quarterly revenue of unit {n} grew by {n} percent over the year before.\n"
                   for n in range(400))
    busy = OpenAIAgentsMemory(AgentMemory("analyst", tmp_path / "large"), model="gpt-4o")
    calls = _filter_calls(busy, [rows, "Report 9: flat.", "Report 10: down."])
    assert [enabled for enabled, _ in calls] == [False, True, True]  # decided when the large one arrived
    first_output = [item["output"] for item in calls[0][1].input if "output" in item][0]
    assert first_output == rows  # shown whole in the call that stores it: no tool could read a citation
    later = [item["output"] for item in calls[-1][1].input if "output" in item]
    assert later[0].startswith("[report(") and len(later[0]) < len(rows) // 20  # then cited
    assert "Memory:" in (calls[-1][1].instructions or "")


def test_session_keeps_items_in_the_backend_and_survives_a_new_process(tmp_path: Path) -> None:
    memory = AgentMemory("assistant", tmp_path)
    session = AgentMemorySession(memory, "chat-1")

    async def scenario() -> list[Any]:
        await session.add_items([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}])
        await session.add_items([{"role": "user", "content": "again"}])
        assert await session.pop_item() == {"role": "user", "content": "again"}
        return await session.get_items()

    assert asyncio.run(scenario()) == [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    reopened = AgentMemorySession(AgentMemory("assistant", tmp_path), "chat-1")
    assert asyncio.run(reopened.get_items(limit=1)) == [{"role": "assistant", "content": "hello"}]
    asyncio.run(reopened.clear_session())
    assert asyncio.run(session.get_items()) == []


def test_a_sub_agent_tool_runs_on_an_isolated_snapshot(tmp_path: Path) -> None:
    memory = AgentMemory("lead", tmp_path)
    known = memory.store("The lighthouse keeper's log says the lamp was lit at 18:05.", source="log")
    with FakeLLMServer() as server:
        server.enqueue(
            ScriptedReply(tool_calls=(ScriptedToolCall("research", '{"task": "When was the lamp lit?"}'),)),
            ScriptedReply(tool_calls=(ScriptedToolCall("retrieve_memory", json.dumps({"id": known})),)),
            "18:05",
            "The lamp was lit at 18:05.",
        )
        client = AsyncOpenAI(base_url=server.base_url, api_key="test")
        adapter = OpenAIAgentsMemory(memory, conversation_id="lead-run", model="gpt-4o")
        helper = Agent(name="helper", instructions="Use memory.", model=OpenAIResponsesModel(model="gpt-4o", openai_client=client))
        lead = Agent(name="lead", model=OpenAIResponsesModel(model="gpt-4o", openai_client=client),
                     tools=[adapter.sub_agent_tool(helper, name="research", description="Ask a helper", scope="isolated")])
        result = asyncio.run(Runner.run(lead, "When was the lamp lit?", run_config=adapter.run_config(tracing_disabled=True)))
        child_request = server.requests[1]
    assert result.final_output == "The lamp was lit at 18:05."
    assert "retrieve_memory" in _tools(child_request) or any(
        t.get("name") == "retrieve_memory" for t in child_request.get("tools", []))
    assert "18:05" in json.dumps(server.requests[2]["input"])  # the child read the parent's item in its fork
    assert [agent_id for agent_id in memory.backend.agent_ids() if agent_id.startswith("lead.sub")] == ["lead.sub01"]
    assert adapter.channel.usage.calls == 2  # the child's calls, absorbed; the parent's are recorded by record()


def test_a_session_over_its_budget_is_compacted_and_nothing_is_lost(tmp_path: Path) -> None:
    memory = AgentMemory("assistant", tmp_path)
    session = AgentMemorySession(memory, "chat-2", max_tokens=400, keep_user_turns=1)
    with FakeLLMServer() as server:
        answers = [f"Answer {n}: the depot in Leeds dispatched {n * 40} parcels on day {n}." for n in range(6)]
        server.enqueue(*answers)
        agent = Agent(name="assistant", model=OpenAIResponsesModel(
            model="gpt-4o", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="test")))

        async def chat() -> None:
            for n in range(6):
                await Runner.run(agent, f"Question {n}: how many parcels left the Leeds depot on day {n}? " * 6,
                                 session=session, run_config=RunConfig(tracing_disabled=True))

        asyncio.run(chat())
        last_input = server.requests[-1]["input"]
    items = asyncio.run(session.get_items())
    assert str(items[0]["content"]).startswith("[Earlier in this conversation, compacted:")
    assert sum(1 for item in items if item.get("role") == "user") == 2  # the summary and the raw tail
    assert "Question 5" in json.dumps(items[-2]) and "Question 0" not in json.dumps(items[1:])
    assert "compacted:" in json.dumps(last_input)  # the model was sent the compacted session
    # Nothing is lost: every earlier item is in memory, behind the id the summary names.
    cited = re.search(r'retrieve_memory\(id="(mem_[0-9a-f]{12})"\)', items[0]["content"])
    assert cited is not None
    held = json.dumps(memory.get(cited.group(1)).content)
    assert "Question 4" in held and answers[4] in held and "Question 0" in json.dumps(
        [memory.get(r.id).content for r in memory.records()])


# -- issue 37 item 9: the session keeps the SDK's session contract -----------------------------------
# The SDK's own session tests (tests/memory/test_session.py, test_session_limit.py,
# tests/extensions/memory/test_async_sqlite_session.py, test_redis_session.py), rewritten for
# AgentMemorySession.

def _messages(n: int) -> list[Any]:
    return [{"role": "user", "content": f"Message {i}"} for i in range(n)]


def test_get_items_applies_the_session_settings_limit_and_an_explicit_limit_wins(tmp_path: Path) -> None:
    session = AgentMemorySession(AgentMemory("assistant", tmp_path), "limits", session_settings=SessionSettings(limit=3))

    async def scenario() -> tuple[list[Any], list[Any], list[Any], list[Any]]:
        await session.add_items(_messages(10))
        return (await session.get_items(), await session.get_items(limit=2), await session.get_items(limit=0),
                await session.get_items(limit=20))

    default, explicit, none, more = asyncio.run(scenario())
    assert [item["content"] for item in default] == ["Message 7", "Message 8", "Message 9"]
    assert [item["content"] for item in explicit] == ["Message 8", "Message 9"]
    assert none == [] and len(more) == 10
    as_dict = AgentMemorySession(AgentMemory("assistant", tmp_path), "limits", session_settings={"limit": 1})
    assert asyncio.run(as_dict.get_items()) == [{"role": "user", "content": "Message 9"}]
    assert asyncio.run(AgentMemorySession(AgentMemory("assistant", tmp_path), "limits").get_items()) == _messages(10)
    with pytest.raises(TypeError, match="limitt"):
        AgentMemorySession(AgentMemory("assistant", tmp_path), "limits", session_settings={"limitt": 1})


@pytest.mark.parametrize("where", ["run_config", "session"])
def test_the_runner_sends_only_the_limited_history(tmp_path: Path, where: str) -> None:
    """The SDK's test_session_limit_parameter: with a limit of 2, the model gets the last two
    history items and the new input."""
    settings = SessionSettings(limit=2)
    session = AgentMemorySession(AgentMemory("assistant", tmp_path), "chat",
                                 session_settings=settings if where == "session" else None)
    with FakeLLMServer() as server:
        server.enqueue("Reply 1", "Reply 2", "Reply 3", "Reply 4")
        agent = Agent(name="test", model=OpenAIResponsesModel(
            model="gpt-4o", openai_client=AsyncOpenAI(base_url=server.base_url, api_key="test")))

        async def chat() -> None:
            for n in range(1, 4):
                await Runner.run(agent, f"Message {n}", session=session, run_config=RunConfig(tracing_disabled=True))
            await Runner.run(agent, "Message 4", session=session, run_config=RunConfig(
                tracing_disabled=True, session_settings=settings if where == "run_config" else None))

        asyncio.run(chat())
        sent = server.requests[-1]["input"]
    assert len(sent) == 3
    assert sent[0]["content"] == "Message 3" and "Reply 3" in json.dumps(sent[1]) and sent[2]["content"] == "Message 4"
    assert len(asyncio.run(session.get_items(limit=100))) == 8  # the limit bounds what is read, not what is kept


def test_a_session_of_a_closed_memory_raises_on_every_method(tmp_path: Path) -> None:
    """The SDK's closed-session tests: every operation fails (a RuntimeError) instead of going on
    behind the closed memory's back, add_items([]) too."""
    memory = AgentMemory("assistant", tmp_path)
    session = AgentMemorySession(memory, "chat")
    asyncio.run(session.add_items([{"role": "user", "content": "before close"}]))
    memory.close()
    calls = [session.get_items(), session.add_items([{"role": "user", "content": "after close"}]),
             session.add_items([]), session.pop_item(), session.clear_session()]
    for call in calls:
        with pytest.raises(RuntimeError, match="closed") as raised:
            asyncio.run(call)
        assert isinstance(raised.value, MemoryClosedError)
    reopened = AgentMemorySession(AgentMemory("assistant", tmp_path), "chat")
    assert asyncio.run(reopened.get_items()) == [{"role": "user", "content": "before close"}]  # nothing changed


def test_an_item_that_is_not_json_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    """The SDK's sessions raise TypeError for an item JSON cannot hold; storing its str() would
    lose it silently."""
    session = AgentMemorySession(AgentMemory("assistant", tmp_path), "chat")
    asyncio.run(session.add_items([{"role": "user", "content": "kept"}]))
    circular: dict[str, Any] = {"role": "user"}
    circular["content"] = circular
    for bad in ({"role": "user", "content": object()}, circular):
        with pytest.raises(TypeError, match="item 1 is not JSON") as raised:
            asyncio.run(session.add_items([{"role": "user", "content": "good"}, bad]))
        assert isinstance(raised.value, InvalidArgumentError)
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "kept"}]  # not even the good one
    asyncio.run(session.add_items([{"role": "user", "content": "after failure"}]))  # still usable
    assert [item["content"] for item in asyncio.run(session.get_items())] == ["kept", "after failure"]
