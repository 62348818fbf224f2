"""Chat models over real HTTP: OpenAIChatModel, OpenAIResponsesModel and AnthropicChatModel, each
through its real SDK against FakeLLMServer on loopback (scripted answers, no model)."""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from agent_memory import (
    AnthropicChatModel,
    ChatModel,
    ConfigurationError,
    InvalidArgumentError,
    Message,
    OpenAIChatModel,
    OpenAIResponsesModel,
    ToolCall,
)
from agent_memory.errors import LLMConnectionError, LLMOutputError, LLMStatusError, LLMTimeoutError
from agent_memory.llm.chat import DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS, DEFAULT_MAX_RETRIES, ChatResult, Usage
from agent_memory.llm.client import DEFAULT_LLM_TIMEOUT_S
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage, free_port

KINDS = ("openai_chat", "openai_responses", "anthropic")
OVERLAP_WAIT_S = 30.0
"""How long the first answer of the concurrency test waits for the second request: only a client
that calls one after the other waits it out (and fails the test)."""
PATHS = {"openai_chat": "/v1/chat/completions", "openai_responses": "/v1/responses", "anthropic": "/v1/messages"}
LS_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}}
TOOLS = [{"type": "function",
          "function": {"name": "list_directory", "description": "List a directory.", "parameters": LS_SCHEMA}}]
CONVERSATION = [Message(role="system", content="You are terse."), Message(role="user", content="What is in src?")]


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


@pytest.fixture(autouse=True)
def _drained(server: FakeLLMServer) -> Iterator[None]:
    yield
    server.assert_complete()  # every scripted answer was asked for


def make(kind: str, server: FakeLLMServer, **kwargs: Any) -> Any:
    kwargs = {"api_key": "x", "max_retries": 0, "timeout_s": 5.0, **kwargs}
    if kind == "openai_chat":
        return OpenAIChatModel("test-model", base_url=server.base_url, **kwargs)
    if kind == "openai_responses":
        return OpenAIResponsesModel("test-model", base_url=server.base_url, **kwargs)
    return AnthropicChatModel("test-model", base_url=server.anthropic_base_url, **kwargs)


@pytest.mark.parametrize("kind", KINDS)
def test_text_answer_with_usage(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="app.py and parser.py", usage=ScriptedUsage(1200, 7, cached_tokens=1024)))
    model = make(kind, server)
    assert isinstance(model, ChatModel)
    result = model.generate(CONVERSATION, tool_definitions=TOOLS)
    assert isinstance(result, ChatResult)
    assert result.message == Message(role="assistant", content="app.py and parser.py")
    assert result.usage == Usage(prompt_tokens=1200, completion_tokens=7, cached_tokens=1024)
    assert result.finish_reason == "stop"
    assert result.model == "test-model" and result.response_id
    arrived = server.received[-1]
    assert arrived.path == PATHS[kind]
    assert arrived.body == json.loads(json.dumps(model.render(CONVERSATION, tool_definitions=TOOLS)))
    assert arrived.body["model"] == "test-model"


@pytest.mark.parametrize("kind", KINDS)
def test_parallel_tool_calls_keep_ids_raw_and_parsed_arguments(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="", tool_calls=(
        ScriptedToolCall(name="list_directory", arguments='{"path": "src"}', id="call_1"),
        ScriptedToolCall(name="list_directory", arguments='{"path": "tests"}', id="call_2"),
    )))
    result = make(kind, server).generate(CONVERSATION, tool_definitions=TOOLS)
    message = result.message
    assert message.content is None and result.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.input) for c in message.tool_calls] == [
        ("call_1", "list_directory", {"path": "src"}), ("call_2", "list_directory", {"path": "tests"})]
    assert all(json.loads(c.arguments) == c.input for c in message.tool_calls)


@pytest.mark.parametrize("kind", KINDS)
def test_malformed_arguments_are_kept_raw(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="Trying.", tool_calls=(
        ScriptedToolCall(name="list_directory", arguments='{"path": "src"', id="call_bad"),)))
    (call,) = make(kind, server).generate(CONVERSATION, tool_definitions=TOOLS).message.tool_calls
    assert call.id == "call_bad" and call.input is None
    assert call.arguments == '{"path": "src"'  # verbatim (Anthropic's broken server sent it as a JSON string)


@pytest.mark.parametrize("kind", KINDS)
def test_missing_or_repeated_call_ids_get_fresh_unique_ids(kind: str, server: FakeLLMServer) -> None:
    calls = (ScriptedToolCall(name="a", id="same"), ScriptedToolCall(name="b", id="same"),
             ScriptedToolCall(name="c", id=""))
    server.enqueue(ScriptedReply(tool_calls=calls))
    calls = make(kind, server).generate(CONVERSATION).message.tool_calls
    assert [c.name for c in calls] == ["a", "b", "c"]
    assert calls[0].id == "same" and len({c.id for c in calls}) == 3
    assert all(c.id.startswith("call_") for c in calls[1:])


@pytest.mark.parametrize("kind", KINDS)
def test_reasoning_is_returned(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="42", reasoning="Six times seven."))
    message = make(kind, server).generate(CONVERSATION).message
    assert (message.content, message.reasoning) == ("42", "Six times seven.")


@pytest.mark.parametrize("kind", KINDS)
def test_unreported_usage_is_none(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="ok", report_usage=False))
    assert make(kind, server).generate(CONVERSATION).usage == Usage()


def test_anthropic_prompt_tokens_include_both_cache_counts(server: FakeLLMServer) -> None:
    # On the wire: input_tokens 50, cache_read_input_tokens 40, cache_creation_input_tokens 10.
    server.enqueue(ScriptedReply(content="ok", usage=ScriptedUsage(100, 5, cached_tokens=40, cache_write_tokens=10)))
    usage = make("anthropic", server).generate(CONVERSATION).usage
    assert usage == Usage(prompt_tokens=100, completion_tokens=5, cached_tokens=40, cache_write_tokens=10)


@pytest.mark.parametrize(("kind", "reason"), [("openai_chat", "length"), ("openai_responses", "max_output_tokens"),
                                              ("anthropic", "max_tokens")])
def test_cut_answers_report_length(kind: str, reason: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="The answer is", finish_reason=reason))
    result = make(kind, server).generate(CONVERSATION, max_output_tokens=3)
    assert result.finish_reason == "length" and result.message.content == "The answer is"


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("reply", [ScriptedReply(content=""), ScriptedReply(content="", reasoning="Hmm.")],
                         ids=["empty", "reasoning_only"])
def test_an_answer_without_text_or_calls_is_an_output_error(
    kind: str, reply: ScriptedReply, server: FakeLLMServer
) -> None:
    server.enqueue(reply)
    with pytest.raises(LLMOutputError, match="neither text nor tool calls"):
        make(kind, server).generate(CONVERSATION)


@pytest.mark.parametrize(("kind", "body"), [
    ("openai_chat", {"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}),
    ("openai_responses", {"id": "x", "object": "response", "created_at": 0, "model": "m", "status": "failed",
                          "output": []}),
    ("anthropic", {"id": "x", "type": "message", "role": "assistant", "model": "m"}),
    ("anthropic", {"id": "x", "type": "message", "role": "assistant", "model": "m", "content": [{"type": "text"}]}),
])
def test_no_answer_at_all_is_an_output_error(kind: str, body: dict[str, Any], server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(body=body))
    with pytest.raises(LLMOutputError):
        make(kind, server).generate(CONVERSATION)


@pytest.mark.parametrize("kind", KINDS)
def test_http_errors_map_to_llm_status_error(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="model crashed", status=500),
                   ScriptedReply(content="slow down", status=429, headers=(("retry-after", "0"),)))
    model = make(kind, server)
    with pytest.raises(LLMStatusError, match="HTTP 500: model crashed") as caught:
        model.generate(CONVERSATION)
    assert caught.value.status_code == 500 and caught.value.kind == "http_status"
    with pytest.raises(LLMStatusError, match="HTTP 429: slow down"):
        model.generate(CONVERSATION)


@pytest.mark.parametrize("kind", KINDS)
def test_timeout_maps_to_llm_timeout_error(kind: str, server: FakeLLMServer) -> None:
    server.enqueue(ScriptedReply(content="late", delay_s=1.0))
    with pytest.raises(LLMTimeoutError):
        make(kind, server, timeout_s=30.0).generate(CONVERSATION, timeout_s=0.3)  # the call's timeout wins


@pytest.mark.parametrize("kind", KINDS)
def test_refused_connection_maps_to_llm_connection_error(kind: str) -> None:
    port = free_port()  # nothing listens there
    url = f"http://127.0.0.1:{port}" + ("" if kind == "anthropic" else "/v1")
    cls = {"openai_chat": OpenAIChatModel, "openai_responses": OpenAIResponsesModel, "anthropic": AnthropicChatModel}
    model = cls[kind]("m", base_url=url, api_key="x", max_retries=0, timeout_s=2.0)
    with pytest.raises(LLMConnectionError, match=f"127.0.0.1:{port}"):
        model.generate(CONVERSATION)


@pytest.mark.parametrize("kind", KINDS)
def test_an_unresolved_tool_result_is_refused_before_sending(kind: str, server: FakeLLMServer) -> None:
    history = [*CONVERSATION, Message(role="assistant", tool_calls=(ToolCall(id="c", name="ls"),)),
               Message(role="tool", tool_call_id="c", tool_result_ref="mem_0123456789ab")]
    before = server.calls
    with pytest.raises(InvalidArgumentError, match="tool_result_ref"):
        make(kind, server).generate(history)
    assert server.calls == before


@pytest.mark.parametrize("kind", KINDS)
def test_tool_loop_sends_the_calls_and_results_back(kind: str, server: FakeLLMServer) -> None:
    """AutoByteus' tool-call flow: tool call → tool results → the model continues, statelessly."""
    server.enqueue(
        ScriptedReply(content="Looking.", tool_calls=(
            ScriptedToolCall(name="list_directory", arguments='{"path":"src"}'),
            ScriptedToolCall(name="list_directory", arguments='{"path":"docs"}'),
        )),
        ScriptedReply(content="src has app.py; docs is missing."),
    )
    model = make(kind, server)
    first = model.generate(CONVERSATION, tool_definitions=TOOLS)
    history = [*CONVERSATION, first.message,
               Message(role="tool", tool_call_id=first.message.tool_calls[0].id, content='["app.py"]'),
               Message(role="tool", tool_call_id=first.message.tool_calls[1].id, content="no such directory",
                       is_error=True)]
    second = model.generate(history, tool_definitions=TOOLS)
    assert second.message.content == "src has app.py; docs is missing."
    sent = server.requests[-1]
    assert sent == json.loads(json.dumps(model.render(history, tool_definitions=TOOLS)))
    ids = [c.id for c in first.message.tool_calls]
    text = json.dumps(sent)
    assert all(text.count(call_id) == 2 for call_id in ids)  # each call and its result
    if kind == "anthropic":
        assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
        assert [b["type"] for b in sent["messages"][2]["content"]] == ["tool_result", "tool_result"]
        assert sent["messages"][2]["content"][1]["is_error"] is True


def test_output_bounds_and_options_reach_the_request(server: FakeLLMServer) -> None:
    server.enqueue("a", "b", "c", "d", "e")
    make("openai_chat", server, max_output_tokens=100, options={"temperature": 0}).generate(CONVERSATION)
    assert server.requests[-1]["max_tokens"] == 100 and server.requests[-1]["temperature"] == 0
    make("openai_chat", server, max_tokens_field="max_completion_tokens").generate(CONVERSATION, max_output_tokens=9)
    assert server.requests[-1]["max_completion_tokens"] == 9 and "max_tokens" not in server.requests[-1]
    make("openai_chat", server).generate(CONVERSATION)
    assert "max_tokens" not in server.requests[-1] and "max_completion_tokens" not in server.requests[-1]
    make("openai_responses", server, options={"store": False}).generate(CONVERSATION, max_output_tokens=50)
    assert server.requests[-1]["max_output_tokens"] == 50 and server.requests[-1]["store"] is False
    make("anthropic", server).generate(CONVERSATION)
    assert server.requests[-1]["max_tokens"] == 4096
    assert server.requests[-1]["system"][0]["text"] == "You are terse."  # a block, to carry cache_control


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("bound", [0, -5, 2.5, True])
def test_a_bound_below_one_token_is_refused_before_sending(kind: str, bound: Any, server: FakeLLMServer) -> None:
    before = server.calls
    with pytest.raises(InvalidArgumentError, match="max_output_tokens"):
        make(kind, server).generate(CONVERSATION, max_output_tokens=bound)
    with pytest.raises(InvalidArgumentError, match="max_output_tokens"):
        make(kind, server, max_output_tokens=bound).generate(CONVERSATION)
    assert server.calls == before


@pytest.mark.parametrize(("kind", "option"), [("openai_chat", "not_a_parameter"), ("openai_chat", "messages"),
                                              ("openai_chat", "max_completion_tokens"), ("openai_responses", "input"),
                                              ("anthropic", "system"), ("anthropic", "max_tokens")])
def test_options_that_cannot_be_sent_are_configuration_errors(kind: str, option: str, server: FakeLLMServer) -> None:
    with pytest.raises(ConfigurationError, match=repr(option)):
        make(kind, server, options={option: 1})


def test_missing_api_keys_are_configuration_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    for cls in (OpenAIChatModel, OpenAIResponsesModel, AnthropicChatModel):
        with pytest.raises(ConfigurationError):
            cls("m", base_url="http://127.0.0.1:9/v1")


COMMON_PARAMETERS = [("model", inspect.Parameter.empty), ("base_url", None), ("api_key", None),
                     ("timeout_s", DEFAULT_LLM_TIMEOUT_S), ("max_retries", DEFAULT_MAX_RETRIES)]
SIGNATURES: dict[type, list[tuple[str, Any]]] = {
    OpenAIChatModel: [*COMMON_PARAMETERS, ("max_output_tokens", None), ("max_tokens_field", "max_tokens"),
                      ("options", None), ("client", None), ("compat", None)],
    OpenAIResponsesModel: [*COMMON_PARAMETERS, ("max_output_tokens", None), ("options", None), ("client", None)],
    AnthropicChatModel: [*COMMON_PARAMETERS, ("max_output_tokens", DEFAULT_ANTHROPIC_MAX_OUTPUT_TOKENS),
                         ("options", None), ("client", None), ("cache_breakpoints", True)],
}
"""Each model's constructor: its parameters in order with their defaults (``model`` positional, the
rest keyword-only), one constructor path underneath."""


@pytest.mark.parametrize("cls", list(SIGNATURES), ids=lambda cls: cls.__name__)
def test_each_model_keeps_its_typed_keyword_only_constructor(cls: type) -> None:
    parameters = list(inspect.signature(cls).parameters.values())
    assert [(p.name, p.default) for p in parameters] == SIGNATURES[cls]
    assert [p.kind for p in parameters] == [inspect.Parameter.POSITIONAL_OR_KEYWORD] + [
        inspect.Parameter.KEYWORD_ONLY] * (len(parameters) - 1)
    assert all(p.annotation is not inspect.Parameter.empty for p in parameters)


@pytest.mark.parametrize("kind", KINDS)
def test_a_ready_client_is_used_as_given(kind: str, server: FakeLLMServer) -> None:
    if kind == "anthropic":
        import anthropic
        client: Any = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="x", max_retries=0)
    else:
        import openai
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
    model = {"openai_chat": OpenAIChatModel, "openai_responses": OpenAIResponsesModel,
             "anthropic": AnthropicChatModel}[kind]("test-model", client=client, base_url="http://127.0.0.1:9/v1")
    server.enqueue(ScriptedReply(content="from the given client"))
    assert model.generate(CONVERSATION).message.content == "from the given client"
    assert repr(model) == f"{type(model).__name__}(base_url={str(client.base_url).rstrip('/')!r}, model='test-model')"


@pytest.mark.parametrize("kind", KINDS)
def test_agenerate_runs_calls_concurrently(kind: str, server: FakeLLMServer) -> None:
    # Each answer waits until both requests have arrived: a client that sends the second call only
    # after the first one's answer never gets both past the barrier (its wait times out), one that
    # sends both at once always does, however slow the machine.
    barrier = threading.Barrier(2)
    met: list[bool] = []

    def answer(text: str) -> Callable[[dict[str, Any]], ScriptedReply]:
        def reply(body: dict[str, Any]) -> ScriptedReply:
            try:
                barrier.wait(timeout=OVERLAP_WAIT_S)
                met.append(True)
            except threading.BrokenBarrierError:
                met.append(False)
            return ScriptedReply(content=text)
        return reply

    server.enqueue(answer("one"), answer("two"))
    model = make(kind, server, timeout_s=3 * OVERLAP_WAIT_S)

    async def both() -> list[ChatResult]:
        return await asyncio.gather(model.agenerate(CONVERSATION), model.agenerate(CONVERSATION))

    results = asyncio.run(both())
    assert sorted(r.message.content or "" for r in results) == ["one", "two"]
    assert met == [True, True]  # both requests were in flight at once


def test_importing_the_package_loads_no_sdk() -> None:
    code = "import sys, agent_memory; print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


HALF_IMPORTED_HTTPX = r"""
import importlib.abc, importlib.machinery, sys, threading
from agent_memory import Message, OpenAIChatModel
from agent_memory.testing import FakeLLMServer, ScriptedReply

started, release = threading.Event(), threading.Event()


class HeldImport(importlib.abc.MetaPathFinder):
    # httpx's import, begun by another thread and held half done: in sys.modules, not yet executed
    def find_spec(self, name, path, target=None):
        if name != "httpx":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run = spec.loader.exec_module

        def exec_module(module):
            started.set()
            release.wait(60)
            run(module)

        spec.loader.exec_module = exec_module
        return spec


with FakeLLMServer() as server:
    server.enqueue(ScriptedReply(content="fine"))
    model = OpenAIChatModel("test-model", base_url=server.base_url, api_key="x", max_retries=0, timeout_s=30.0)
    sys.meta_path.insert(0, HeldImport())
    importer = threading.Thread(target=lambda: __import__("httpx"))  # as the indexing thread's chromadb does
    importer.start()
    while importer.is_alive() and not started.is_set():
        started.wait(0.01)
    try:
        print(model.generate([Message(role="user", content="hi")]).message.content)
    finally:
        release.set()
        importer.join()
"""


def test_a_call_while_another_thread_imports_httpx_does_not_meet_it_half_imported() -> None:
    """The openai SDK looks up ``sys.modules["httpx"]`` on every request (openai/_httpx2.py), and
    chromadb imports httpx, in a memory's indexing thread when the memory first opens its index on
    files: a call made meanwhile met a half-initialised module (``AttributeError: partially
    initialized module 'httpx' has no attribute 'Timeout'``). The model imports httpx when it is
    built, so no later import of it can be half done."""
    done = subprocess.run([sys.executable, "-c", HALF_IMPORTED_HTTPX], capture_output=True, text=True, timeout=120,
                          check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split()[-1] == "fine"


def test_without_a_key_or_a_server_the_error_names_the_stand_in(monkeypatch: pytest.MonkeyPatch) -> None:
    # a docs block run without a key, or with the stand-in's address while it is not running
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError, match=r"python -m agent_memory\.testing\.stand_in"):
        OpenAIChatModel("gpt-4o")
    model = OpenAIChatModel("gpt-4o", base_url=f"http://127.0.0.1:{free_port()}/v1", api_key="none", max_retries=0)
    with pytest.raises(LLMConnectionError, match=r"cannot connect .*agent_memory\.testing\.stand_in"):
        model.generate([Message(role="user", content="hi")])
