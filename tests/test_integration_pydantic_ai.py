"""The pydantic-ai adapter, driven by a real pydantic-ai Agent (OpenAIChatModel) against the
loopback scripted server: a large result is stored, shown once, cited in the next request, read
back through retrieve_memory, and the run's usage is priced."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent  # noqa: E402
from pydantic_ai.models.openai import OpenAIChatModel  # noqa: E402
from pydantic_ai.providers.openai import OpenAIProvider  # noqa: E402

from agent_memory import AgentMemory  # noqa: E402
from agent_memory.integrations.channel import result_id  # noqa: E402
from agent_memory.integrations.pydantic_ai import PydanticAIMemory  # noqa: E402
from agent_memory.presentation.policy import PresentationPolicy  # noqa: E402
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage  # noqa: E402

CITATION = re.compile(r'retrieve_memory\(id="(mem_[0-9a-f]{12})"\)')


def _tool_texts(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def _tools(body: dict[str, Any]) -> list[str]:
    return [t["function"]["name"] for t in body.get("tools", [])]


def test_a_result_is_stored_shown_once_cited_retrieved_and_priced(tmp_path: Path, data_dir: Path) -> None:
    page = (data_dir / "webpages" / "readability" / "lwn-1" / "source.html").read_text(encoding="utf-8")
    memory = AgentMemory("researcher", tmp_path)
    adapter = PydanticAIMemory(memory, conversation_id="run1", model="gpt-4o",
                               policy=PresentationPolicy(cache_aware=False, full_result_max_tokens=20_000))
    usage = ScriptedUsage(prompt_tokens=3_000, completion_tokens=20, cached_tokens=1_024)

    def retrieve_from_citation(body: dict[str, Any]) -> ScriptedReply:
        cited = CITATION.search(_tool_texts(body)[0])
        assert cited is not None, "the first result is cited in the third request"
        return ScriptedReply(tool_calls=(ScriptedToolCall("retrieve_memory", json.dumps({"id": cited.group(1), "around": "openSUSE"})),),
                             usage=usage)

    with FakeLLMServer() as server:
        server.enqueue(
            ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/a"}'),), usage=usage),
            ScriptedReply(tool_calls=(ScriptedToolCall("fetch_page", '{"url": "https://example.org/b"}'),), usage=usage),
            retrieve_from_citation,
            ScriptedReply(content="Done: the page is read.", usage=usage),
        )
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
        agent = Agent(model, instructions="Answer from the pages.", capabilities=[adapter.capability],
                      toolsets=[adapter.toolset])

        @agent.tool_plain
        def fetch_page(url: str) -> str:
            """Fetch a web page."""
            return page if url.endswith("/a") else "Short answer from the second page."

        result = agent.run_sync("Read https://example.org/a")
        requests = server.requests

    assert result.output == "Done: the page is read."
    assert len(requests) == 4
    first_id = result_id("researcher", "run1", "call_1_0", page)
    assert memory.get(first_id).content == page
    shown = _tool_texts(requests[1])[0]
    assert shown == adapter.channel.builder.view(first_id).full and "openSUSE" in shown
    assert "retrieve_memory" not in _tools(requests[0]) + _tools(requests[1])
    cited = _tool_texts(requests[2])[0]
    assert first_id in cited and len(cited) < len(shown) // 5
    assert "retrieve_memory" in _tools(requests[2])
    assert any("Memory:" in str(m.get("content")) for m in requests[2]["messages"] if m["role"] == "system")
    assert "Ubuntu, Debian, Fedora, openSUSE" in _tool_texts(requests[3])[-1]
    cost = adapter.record(result)
    assert cost is not None and cost.total_usd > 0
    assert adapter.channel.usage.calls == 4 and adapter.channel.usage.billed.cache_read_tokens == 4 * 1_024
    assert adapter.record(result) is None
    assert len(memory.records()) == 2


def _week(n: int) -> str:
    """A report large enough to be cited, each week's its own."""
    return "".join(f"Week {n}, row {r}: unit {r} shipped {r * n} parcels to port {n}.\n" for r in range(120))


@pytest.mark.parametrize("call_id", ["dup", ""])
def test_a_reused_call_id_sends_each_result_as_itself(tmp_path: Path, call_id: str) -> None:
    """A server that reuses a call id (pydantic-ai passes it on; an empty one it replaces): each
    result is stored, shown and cited as itself (the second was shown and cited as the first), and
    the citations pydantic-ai keeps in its history are known as their results (nothing stored twice)."""
    memory = AgentMemory("researcher", tmp_path)
    adapter = PydanticAIMemory(memory, conversation_id="run1",
                               policy=PresentationPolicy(start="first_call", cache_aware=False))
    with FakeLLMServer() as server:
        server.enqueue(*[ScriptedReply(tool_calls=(ScriptedToolCall("weekly_report", json.dumps({"week": n}), id=call_id),))
                         for n in (1, 2, 3)], "Done.")
        model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(base_url=server.base_url, api_key="test"))
        agent = Agent(model, capabilities=[adapter.capability], toolsets=[adapter.toolset])

        @agent.tool_plain
        def weekly_report(week: int) -> str:
            """The shipping report of one week."""
            return _week(week)

        result = agent.run_sync("Compare three weeks.")
        requests = server.requests

    assert result.output == "Done."
    second, third = _tool_texts(requests[2]), _tool_texts(requests[3])
    assert second[1] == _week(2)  # in full, its own text
    cited = [CITATION.search(text) for text in third[:2]]
    assert all(cited) and [memory.get(c.group(1)).content for c in cited if c] == [_week(1), _week(2)]
    assert third[2] == _week(3) and len(memory.records()) == 3
