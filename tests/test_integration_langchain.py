"""The LangChain v1 middleware, driven by a real ``create_agent`` agent (langchain + langgraph +
langchain-openai's ChatOpenAI) against the loopback scripted server: a large result is stored,
shown once, cited in the next call, retrieved through retrieve_memory, and usage is priced."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langchain")
pytest.importorskip("langchain_openai")

from langchain.agents import create_agent  # noqa: E402
from langchain_core.tools import tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402
from langgraph.checkpoint.memory import InMemorySaver  # noqa: E402

from agent_memory import AgentMemory  # noqa: E402
from agent_memory.integrations.channel import result_id  # noqa: E402
from agent_memory.integrations.langchain import LangChainMemory  # noqa: E402
from agent_memory.presentation.policy import PresentationPolicy  # noqa: E402
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage  # noqa: E402

CITATION = re.compile(r'retrieve_memory\(id="(mem_[0-9a-f]{12})"\)')


def _tool_texts(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _tools(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def _script(server: FakeLLMServer) -> None:
    usage = ScriptedUsage(prompt_tokens=3_000, completion_tokens=20, cached_tokens=2_048)

    def retrieve_from_citation(body: dict[str, Any]) -> ScriptedReply:
        cited = CITATION.search(_tool_texts(body)[0])
        assert cited is not None, "the first result is cited in the third call"
        return ScriptedReply(tool_calls=(ScriptedToolCall("retrieve_memory", json.dumps({"id": cited.group(1), "around": "openSUSE"})),),
                             usage=usage)

    server.enqueue(
        ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/a"}'),), usage=usage),
        ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/b"}'),), usage=usage),
        retrieve_from_citation,
        ScriptedReply(content="Done: the page is read.", usage=usage),
    )


def _agent(server: FakeLLMServer, middleware: LangChainMemory, page: str) -> Any:
    @tool
    def fetch_page(url: str) -> str:
        """Fetch a web page."""
        return page if url.endswith("/a") else "Short answer from the second page."

    model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)
    return create_agent(model, tools=[fetch_page], system_prompt="Answer from the pages.", middleware=[middleware],
                        checkpointer=InMemorySaver())


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_result_is_stored_shown_once_cited_retrieved_and_priced(tmp_path: Path, data_dir: Path, mode: str) -> None:
    page = (data_dir / "webpages" / "readability" / "lwn-1" / "source.html").read_text(encoding="utf-8")
    memory = AgentMemory("researcher", tmp_path)
    middleware = LangChainMemory(memory, model="gpt-4o",
                                       policy=PresentationPolicy(cache_aware=False, full_result_max_tokens=20_000))
    with FakeLLMServer() as server:
        _script(server)
        agent = _agent(server, middleware, page)
        task = {"messages": [{"role": "user", "content": "Read https://example.org/a"}]}
        config = {"configurable": {"thread_id": "t-1"}}
        state = agent.invoke(task, config) if mode == "sync" else asyncio.run(agent.ainvoke(task, config))
        requests = server.requests

    assert state["messages"][-1].content == "Done: the page is read."
    assert len(requests) == 4
    channel = middleware.channel("t-1")
    first_call = state["messages"][1].tool_calls[0]["id"]
    first_id = result_id("researcher", "t-1", first_call, page)
    assert memory.get(first_id).content == page
    shown = _tool_texts(requests[1])[0]
    assert shown == channel.builder.view(first_id).full and "openSUSE" in shown  # in full, once
    assert "retrieve_memory" not in _tools(requests[0])  # nothing stored yet: no memory tool
    cited = _tool_texts(requests[2])[0]
    assert first_id in cited and len(cited) < len(shown) // 5  # then cited
    assert "retrieve_memory" in _tools(requests[2]) and "Memory:" in requests[2]["messages"][0]["content"]
    assert "Ubuntu, Debian, Fedora, openSUSE" in _tool_texts(requests[3])[-1]  # read back through the tool
    assert state["messages"][2].content == page  # the agent's state keeps the result as the tool gave it
    assert channel.usage.calls == 4 and channel.usage.billed.cache_read_tokens == 4 * 2_048
    assert channel.usage.total_usd is not None and channel.usage.total_usd > 0
    assert len(memory.records()) == 2


def _week(n: int) -> str:
    """A report large enough to be cited, each week's its own."""
    return "".join(f"Week {n}, row {r}: unit {r} shipped {r * n} parcels to port {n}.\n" for r in range(120))


@pytest.mark.parametrize("call_id", ["dup", ""])
def test_a_reused_call_id_sends_each_result_as_itself(tmp_path: Path, call_id: str) -> None:
    """A server that reuses a call id (or sends none): LangChain passes it on, and each result
    is stored, shown and cited as itself (the second was shown and cited as the first)."""
    memory = AgentMemory("researcher", tmp_path)
    middleware = LangChainMemory(memory, policy=PresentationPolicy(start="first_call", cache_aware=False))

    @tool
    def weekly_report(week: int) -> str:
        """The shipping report of one week."""
        return _week(week)

    with FakeLLMServer() as server:
        server.enqueue(*[ScriptedReply(tool_calls=(ScriptedToolCall("weekly_report", json.dumps({"week": n}), id=call_id),))
                         for n in (1, 2, 3)], "Done.")
        model = ChatOpenAI(model="gpt-4o", base_url=server.base_url, api_key="test", max_retries=0)
        agent = create_agent(model, tools=[weekly_report], middleware=[middleware])
        state = agent.invoke({"messages": [{"role": "user", "content": "Compare three weeks."}]})
        requests = server.requests

    assert [m.content for m in state["messages"] if m.type == "tool"] == [_week(1), _week(2), _week(3)]
    second, third = _tool_texts(requests[2]), _tool_texts(requests[3])
    assert second[1] == _week(2)  # in full, its own text
    cited = [CITATION.search(text) for text in third[:2]]
    assert all(cited) and [memory.get(c.group(1)).content for c in cited if c] == [_week(1), _week(2)]
    assert third[2] == _week(3) and len(memory.records()) == 3
