"""The stand-in model the docs tell a user without a key to run (agent_memory/testing/stand_in.py):
the documented command serves the three APIs, each SDK's loop runs against it, its rule is the one
its docstring states, and it never calls the library's own memory tools."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

from actions import MemoryToolkit
from agent_memory import AgentMemory
from agent_memory.agent.sub_agents import SPAWN_TOOL_NAME
from agent_memory.testing import free_port
from agent_memory.testing.stand_in import LIBRARY_TOOLS, main, stand_in_reply, stand_in_server

FETCH = {"type": "object", "properties": {"url": {"type": "string"}, "pages": {"type": "integer", "minimum": 2}},
         "required": ["url", "pages"]}
QUESTION = "What does https://example.com/pricing say about the Team plan?"
PAGE = "The Team plan costs $12 per user per month."


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[str, str]]:
    """``python -m agent_memory.testing.stand_in --port N``, as the docs start it; yields the
    OpenAI and Anthropic base URLs from the ``export`` lines it prints."""
    port = free_port()
    process = subprocess.Popen([sys.executable, "-m", "agent_memory.testing.stand_in", "--port", str(port)],
                               stdout=subprocess.PIPE, text=True)
    try:
        assert process.stdout is not None
        lines = [process.stdout.readline(), process.stdout.readline()]
        exports = dict(pair.split("=", 1) for line in lines for pair in line.split()[1:])
        assert exports["OPENAI_API_KEY"] == exports["ANTHROPIC_API_KEY"] == "none"
        yield exports["OPENAI_BASE_URL"], exports["ANTHROPIC_BASE_URL"]
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_chat_completions_call_each_tool_once_then_answer_with_the_results(served: tuple[str, str]) -> None:
    client = openai.OpenAI(base_url=served[0], api_key="none")
    tools: Any = [{"type": "function", "function": {"name": "fetch", "parameters": FETCH}},
                  {"type": "function", "function": {"name": "retrieve_memory", "parameters": {"type": "object"}}}]
    messages: list[Any] = [{"role": "user", "content": QUESTION}]
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
    assert first.tool_calls is not None and [c.function.name for c in first.tool_calls] == ["fetch"]  # type: ignore[union-attr]
    call = first.tool_calls[0]
    assert json.loads(call.function.arguments) == {"url": "https://example.com/pricing", "pages": 2}  # type: ignore[union-attr]
    messages += [first.model_dump(exclude_none=True), {"role": "tool", "tool_call_id": call.id, "content": PAGE}]
    second = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools).choices[0].message
    assert second.tool_calls is None
    assert second.content == f"(stand-in, no model) fetch returned: {PAGE}"


def test_the_responses_api_runs_the_same_loop(served: tuple[str, str]) -> None:
    client = openai.OpenAI(base_url=served[0], api_key="none")
    tools: Any = [{"type": "function", "name": "fetch", "parameters": FETCH}]
    first = client.responses.create(model="gpt-4o", input=QUESTION, tools=tools)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [c.name for c in calls] == ["fetch"] and json.loads(calls[0].arguments)["url"] == "https://example.com/pricing"
    history: Any = [{"role": "user", "content": QUESTION}, calls[0].model_dump(exclude_none=True),
                    {"type": "function_call_output", "call_id": calls[0].call_id, "output": PAGE}]
    second = client.responses.create(model="gpt-4o", input=history, tools=tools)
    assert second.output_text == f"(stand-in, no model) fetch returned: {PAGE}"


def test_anthropic_messages_run_the_same_loop_and_view_claudes_memory(served: tuple[str, str]) -> None:
    client = anthropic.Anthropic(base_url=served[1], api_key="none")
    tools: Any = [{"name": "fetch", "input_schema": FETCH}, {"type": "memory_20250818", "name": "memory"}]
    first = client.messages.create(model="claude-sonnet-4-6", max_tokens=100, tools=tools,
                                   messages=[{"role": "user", "content": QUESTION}])
    uses = [block for block in first.content if block.type == "tool_use"]
    assert [(u.name, u.input) for u in uses] == [  # type: ignore[union-attr]
        ("fetch", {"url": "https://example.com/pricing", "pages": 2}), ("memory", {"command": "view", "path": "/memories"})]
    assert first.stop_reason == "tool_use"
    results: Any = [{"type": "tool_result", "tool_use_id": u.id, "content": text}  # type: ignore[union-attr]
                    for u, text in zip(uses, (PAGE, "/memories is empty"), strict=True)]
    # a request that continues a server-side thread carries only the new results: the stand-in's
    # call ids still name the tools
    second = client.messages.create(model="claude-sonnet-4-6", max_tokens=100, tools=tools,
                                    messages=[{"role": "user", "content": results}])
    assert second.content[0].text == (  # type: ignore[union-attr]
        f"(stand-in, no model) fetch returned: {PAGE} | memory returned: /memories is empty")


def test_it_never_calls_the_librarys_own_tools(tmp_path: Any) -> None:
    toolkit = MemoryToolkit(AgentMemory("a", tmp_path / "memory"))
    assert {*toolkit.names, "memory", SPAWN_TOOL_NAME, "compact_memory", "forget_memory", "pin_memory"} == LIBRARY_TOOLS
    body = {"messages": [{"role": "user", "content": "hi"}],
            "tools": [{"type": "function", "function": {"name": name, "parameters": {}}} for name in sorted(LIBRARY_TOOLS)]}
    reply = stand_in_reply("/v1/chat/completions", body)
    assert reply.tool_calls == () and reply.content == "(stand-in, no model) You asked: hi"


def test_arguments_follow_the_schema_refs_enums_and_nullable_types() -> None:
    schema = {"type": "object", "required": ["filter", "mode", "tags", "limit"],
              "$defs": {"Filter": {"type": "object", "properties": {"field": {"type": "string"}}, "required": ["field"]}},
              "properties": {"filter": {"$ref": "#/$defs/Filter"}, "mode": {"enum": ["fast", "slow"]},
                             "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                             "limit": {"anyOf": [{"type": "null"}, {"type": "integer"}]},
                             "unused": {"type": "string"}}}
    body = {"messages": [{"role": "user", "content": "find it"}],
            "tools": [{"type": "function", "function": {"name": "search", "parameters": schema}}]}
    (call,) = stand_in_reply("/v1/chat/completions", body).tool_calls
    assert json.loads(call.arguments) == {"filter": {"field": "find it"}, "mode": "fast", "tags": ["find it"], "limit": 1}


def test_a_request_without_tools_gets_the_question_back_and_an_unknown_route_a_404() -> None:
    assert stand_in_reply("/v1/chat/completions", {"messages": [{"role": "user", "content": "hello"}]}).content == \
        "(stand-in, no model) You asked: hello"
    assert stand_in_reply("/v1/embeddings", {}).status == 404


def test_the_command_says_so_when_its_port_is_taken(capsys: pytest.CaptureFixture[str]) -> None:
    with stand_in_server() as server:
        assert main(["--port", str(server.port)]) == 1
    assert f"port {server.port} is taken" in capsys.readouterr().err
