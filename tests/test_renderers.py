"""Prompt renderers: golden payloads, purity and refusals, and round trips through the real SDKs.

Each rendered payload is sent with the real ``openai`` / ``anthropic`` client (``create(**payload)``)
to FakeLLMServer on loopback, which records the request body: what arrives must be the payload,
and every message, input item and tool must validate against the SDK's own request types (its
``TypedDict`` s, checked with pydantic), which are the providers' documented shapes.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import anthropic.types as anthropic_types
import openai
import pytest
from openai.types.chat import ChatCompletionFunctionToolParam, ChatCompletionMessageParam
from openai.types.responses import FunctionToolParam, ResponseInputItemParam
from pydantic import TypeAdapter

from agent_memory import InvalidArgumentError, Message, ToolCall
from agent_memory.llm.renderers import AnthropicRenderer, OpenAIChatRenderer, OpenAIResponsesRenderer, PromptRenderer, tool_spec
from agent_memory.testing import FakeLLMServer

SYSTEM = "You are a careful agent."
REASONING = "SECRET-REASONING: read both in parallel"
LS_SCHEMA = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
TOOLS = [
    {"type": "function", "function": {"name": "list_directory", "description": "List a directory.",
                                      "parameters": LS_SCHEMA}},
    {"type": "function", "name": "read_file", "parameters": LS_SCHEMA, "strict": True},  # the flat form
]
CAT_URL = "https://example.org/cat.png"
DOT_URL = "data:image/png;base64,iVBORw0KGgo="

PARALLEL = [
    Message(role="system", content=SYSTEM),
    Message(role="user", content="What is in src and in README?", turn_id="turn_0001", seq=1),
    Message(role="assistant", content="Let me look.", reasoning=REASONING, tool_calls=(
        ToolCall(id="call_a", name="list_directory", input={"path": "src"}),
        ToolCall(id="call_b", name="read_file", arguments='{"path":"README.md"}'),
    )),
    Message(role="tool", tool_call_id="call_a", name="list_directory", content='["app.py", "parser.py"]'),
    Message(role="tool", tool_call_id="call_b", name="read_file", content="FileNotFoundError: README.md",
            is_error=True),
    Message(role="user", content="All tools finished. Continue."),
    Message(role="assistant", content="src has app.py and parser.py; README.md is missing."),
    Message(role="user", content="Thanks."),
]
CONVERSATIONS: dict[str, list[Message]] = {
    "plain": [Message(role="user", content="Hello")],
    "system": [Message(role="system", content=SYSTEM), Message(role="user", content="Hello")],
    "multi_turn": [
        Message(role="system", content=SYSTEM), Message(role="user", content="Hi"),
        Message(role="assistant", content="Hello! How can I help?", reasoning=REASONING),
        Message(role="user", content="Tell me a joke."),
    ],
    "parallel_tools": PARALLEL,
    "images": [Message(role="user", content="Describe both.", media={"images": [CAT_URL, DOT_URL]})],
    "tool_image": [
        Message(role="user", content="Screenshot please."),
        Message(role="assistant", tool_calls=(ToolCall(id="shot", name="screenshot"),)),
        Message(role="tool", tool_call_id="shot", content="Here it is.", media={"images": [CAT_URL]}),
    ],
    "consecutive_roles": [
        Message(role="user", content="First part."), Message(role="user", content="Second part."),
        Message(role="assistant", content="Thinking aloud."),
        Message(role="assistant", content="", tool_calls=(ToolCall(id="c1", name="list_directory",
                                                                   input={"path": "."}),)),
        Message(role="tool", tool_call_id="c1", content="ok"),
        Message(role="user", content="Go on."),
    ],
    "late_system": [
        Message(role="system", content=SYSTEM), Message(role="user", content="Go"),
        Message(role="assistant", tool_calls=(ToolCall(id="c1", name="list_directory", input={"path": "."}),)),
        Message(role="user", content="(interjection)"),
        Message(role="tool", tool_call_id="c1", content="ok"),
        Message(role="system", content="Memory is under pressure."),
    ],
}


# -- golden payloads ---------------------------------------------------------------------------------

CHAT_TOOLS = [
    {"type": "function", "function": {"name": "list_directory", "description": "List a directory.",
                                      "parameters": LS_SCHEMA}},
    {"type": "function", "function": {"name": "read_file", "parameters": LS_SCHEMA, "strict": True}},
]


def test_openai_chat_golden() -> None:
    payload = OpenAIChatRenderer().render(PARALLEL, tool_definitions=TOOLS)
    assert payload == {
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": "What is in src and in README?"},
            {"role": "assistant", "content": "Let me look.", "tool_calls": [
                {"id": "call_a", "type": "function",
                 "function": {"name": "list_directory", "arguments": '{"path": "src"}'}},
                {"id": "call_b", "type": "function",
                 "function": {"name": "read_file", "arguments": '{"path":"README.md"}'}},
            ]},
            {"role": "tool", "tool_call_id": "call_a", "content": '["app.py", "parser.py"]'},
            {"role": "tool", "tool_call_id": "call_b", "content": "FileNotFoundError: README.md"},
            {"role": "user", "content": "All tools finished. Continue."},
            {"role": "assistant", "content": "src has app.py and parser.py; README.md is missing."},
            {"role": "user", "content": "Thanks."},
        ],
        "tools": CHAT_TOOLS,
    }
    images = OpenAIChatRenderer().render(CONVERSATIONS["images"])
    assert images == {"messages": [{"role": "user", "content": [
        {"type": "text", "text": "Describe both."},
        {"type": "image_url", "image_url": {"url": CAT_URL}},
        {"type": "image_url", "image_url": {"url": DOT_URL}},
    ]}]}
    calls_only = OpenAIChatRenderer().render(CONVERSATIONS["tool_image"][:2])["messages"][1]
    assert calls_only == {"role": "assistant", "content": None, "tool_calls": [
        {"id": "shot", "type": "function", "function": {"name": "screenshot", "arguments": "{}"}}]}


def test_openai_responses_golden() -> None:
    payload = OpenAIResponsesRenderer().render(PARALLEL, tool_definitions=TOOLS, model="gpt-test")
    assert list(payload) == ["model", "instructions", "input", "tools"]
    assert payload == {
        "model": "gpt-test",
        "instructions": SYSTEM,
        "input": [
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "What is in src and in README?"}]},
            {"type": "message", "role": "assistant", "content": "Let me look."},
            {"type": "function_call", "call_id": "call_a", "name": "list_directory", "arguments": '{"path": "src"}'},
            {"type": "function_call", "call_id": "call_b", "name": "read_file", "arguments": '{"path":"README.md"}'},
            {"type": "function_call_output", "call_id": "call_a", "output": '["app.py", "parser.py"]'},
            {"type": "function_call_output", "call_id": "call_b", "output": "FileNotFoundError: README.md"},
            {"type": "message", "role": "user",
             "content": [{"type": "input_text", "text": "All tools finished. Continue."}]},
            {"type": "message", "role": "assistant", "content": "src has app.py and parser.py; README.md is missing."},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Thanks."}]},
        ],
        "tools": [
            {"type": "function", "name": "list_directory", "description": "List a directory.", "parameters": LS_SCHEMA,
             "strict": False},
            {"type": "function", "name": "read_file", "parameters": LS_SCHEMA, "strict": True},
        ],
    }
    tool_image = OpenAIResponsesRenderer().render(CONVERSATIONS["tool_image"])["input"]
    assert tool_image[1:] == [
        {"type": "function_call", "call_id": "shot", "name": "screenshot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "shot", "output": [
            {"type": "input_text", "text": "Here it is."},
            {"type": "input_image", "image_url": CAT_URL, "detail": "auto"},
        ]},
    ]
    late = OpenAIResponsesRenderer().render(CONVERSATIONS["late_system"])
    assert late["instructions"] == SYSTEM
    assert late["input"][-1] == {"type": "message", "role": "system",
                                 "content": [{"type": "input_text", "text": "Memory is under pressure."}]}


def test_anthropic_golden() -> None:
    # The blocks without cache breakpoints; where those go: tests/test_prompt_caching.py.
    payload = AnthropicRenderer(cache_breakpoints=False).render(PARALLEL, tool_definitions=TOOLS, model="claude-test", max_tokens=256)
    assert payload == {
        "model": "claude-test",
        "max_tokens": 256,
        "system": SYSTEM,
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "What is in src and in README?"}]},
            {"role": "assistant", "content": [  # parallel calls: one assistant message
                {"type": "text", "text": "Let me look."},
                {"type": "tool_use", "id": "call_a", "name": "list_directory", "input": {"path": "src"}},
                {"type": "tool_use", "id": "call_b", "name": "read_file", "input": {"path": "README.md"}},
            ]},
            {"role": "user", "content": [  # both results and the continuation: one user message
                {"type": "tool_result", "tool_use_id": "call_a", "content": '["app.py", "parser.py"]',
                 "is_error": False},
                {"type": "tool_result", "tool_use_id": "call_b", "content": "FileNotFoundError: README.md",
                 "is_error": True},
                {"type": "text", "text": "All tools finished. Continue."},
            ]},
            {"role": "assistant",
             "content": [{"type": "text", "text": "src has app.py and parser.py; README.md is missing."}]},
            {"role": "user", "content": [{"type": "text", "text": "Thanks."}]},
        ],
        "tools": [
            {"name": "list_directory", "description": "List a directory.", "input_schema": LS_SCHEMA},
            {"name": "read_file", "input_schema": LS_SCHEMA},
        ],
    }


def test_anthropic_merges_roles_orders_results_first_and_converts_images() -> None:
    render = AnthropicRenderer(cache_breakpoints=False).render
    assert render(CONVERSATIONS["consecutive_roles"])["messages"] == [
        {"role": "user",
         "content": [{"type": "text", "text": "First part."}, {"type": "text", "text": "Second part."}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Thinking aloud."},  # the empty text of the next message is left out
            {"type": "tool_use", "id": "c1", "name": "list_directory", "input": {"path": "."}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "ok", "is_error": False},
                                     {"type": "text", "text": "Go on."}]},
    ]
    late = render(CONVERSATIONS["late_system"])
    assert late["system"] == SYSTEM + "\n\nMemory is under pressure."
    assert late["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "c1", "content": "ok", "is_error": False},
        {"type": "text", "text": "(interjection)"},
    ]}
    assert render(CONVERSATIONS["images"])["messages"] == [{"role": "user", "content": [
        {"type": "image", "source": {"type": "url", "url": CAT_URL}},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "text", "text": "Describe both."},
    ]}]
    assert render(CONVERSATIONS["tool_image"])["messages"][-1] == {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "shot", "is_error": False, "content": [
            {"type": "text", "text": "Here it is."}, {"type": "image", "source": {"type": "url", "url": CAT_URL}}]},
    ]}
    malformed = [Message(role="user", content="x"),
                 Message(role="assistant", tool_calls=(ToolCall(id="c", name="ls", arguments="{oops"),))]
    assert render(malformed)["messages"][1]["content"] == [{"type": "tool_use", "id": "c", "name": "ls", "input": {}}]


RENDERERS: dict[str, PromptRenderer] = {
    "openai_chat": OpenAIChatRenderer(),
    "openai_responses": OpenAIResponsesRenderer(),
    "anthropic": AnthropicRenderer(),
}


@pytest.mark.parametrize("name", RENDERERS)
def test_reasoning_and_bookkeeping_are_not_sent(name: str) -> None:
    text = json.dumps(RENDERERS[name].render(PARALLEL + CONVERSATIONS["multi_turn"][1:]))
    assert "SECRET-REASONING" not in text and "turn_0001" not in text
    assert "list_directory" in text  # the payload is not empty


@pytest.mark.parametrize("name", RENDERERS)
def test_render_is_pure_and_deterministic(name: str) -> None:
    renderer = RENDERERS[name]
    definitions = copy.deepcopy(TOOLS)
    first = renderer.render(PARALLEL, tool_definitions=definitions)
    assert json.dumps(renderer.render(PARALLEL, tool_definitions=definitions)) == json.dumps(first)
    assert isinstance(renderer, PromptRenderer)
    blob = json.dumps(first)
    for value in first.values():  # mutate everything the payload holds
        if isinstance(value, list):
            for entry in value:
                entry.clear()
    assert definitions == TOOLS  # the caller's tool schemas were copied, not aliased
    assert PARALLEL[2].tool_calls[0].input == {"path": "src"}
    assert json.dumps(renderer.render(PARALLEL, tool_definitions=TOOLS)) == blob


UNRESOLVED = [Message(role="user", content="go"),
              Message(role="assistant", tool_calls=(ToolCall(id="c", name="ls"),)),
              Message(role="tool", tool_call_id="c", tool_result_ref="mem_0123456789ab")]


@pytest.mark.parametrize("name", RENDERERS)
def test_refusals(name: str) -> None:
    render = RENDERERS[name].render
    with pytest.raises(InvalidArgumentError, match="resolve it to content"):
        render(UNRESOLVED)
    with pytest.raises(InvalidArgumentError, match="audio or video"):
        render([Message(role="user", content="hear", media={"audio": ["https://x.org/a.mp3"]})])
    with pytest.raises(InvalidArgumentError, match="not a Message"):
        render([{"role": "user", "content": "dict"}])  # type: ignore[list-item]
    reserved = {"openai_chat": None, "openai_responses": "instructions", "anthropic": "system"}[name]
    if reserved:  # Chat Completions renders only `messages` and `tools`, which are render's own parameters
        with pytest.raises(InvalidArgumentError, match="rendered from the messages"):
            render(CONVERSATIONS["system"], **{reserved: "another system prompt"})
    with pytest.raises(InvalidArgumentError, match="named 'ls'"):
        render(CONVERSATIONS["plain"], tool_definitions=[{"name": "ls"}, {"type": "function", "function": {"name": "ls"}}])
    resolved = [*UNRESOLVED[:2], UNRESOLVED[2].model_copy(update={"content": "a.py"})]
    assert "a.py" in json.dumps(render(resolved))


def test_chat_refuses_images_in_tool_results() -> None:
    with pytest.raises(InvalidArgumentError, match="text only"):
        OpenAIChatRenderer().render(CONVERSATIONS["tool_image"])


@pytest.mark.parametrize(
    ("tool", "error"),
    [
        ("ls", "must be a dict"),
        ({"type": "web_search"}, "only function tools"),
        ({"type": "function", "function": {"description": "no name"}}, "non-empty string 'name'"),
        ({"name": "ls", "parameters": "not a schema"}, "JSON schema object"),
        ({"name": "ls", "description": 3}, "'description' must be a string"),
        ({"name": "ls", "strict": "yes"}, "'strict' must be true or false"),
        ({"type": "function", "function": "ls"}, "'function' must be a dict"),
    ],
)
def test_tool_spec_refuses_malformed_tools(tool: Any, error: str) -> None:
    with pytest.raises(InvalidArgumentError, match=error):
        tool_spec(tool)


def test_anthropic_refuses_data_urls_it_cannot_take() -> None:
    with pytest.raises(InvalidArgumentError, match="base64"):
        AnthropicRenderer().render([Message(role="user", content="x", media={"images": ["data:image/png,raw"]})])


# -- round trips through the real SDKs ---------------------------------------------------------------

_ADAPTERS: dict[Any, TypeAdapter[Any]] = {}  # kept alive: lazily validated iterables refer to them


def _drain(value: Any) -> None:
    """Force pydantic's lazy validation of ``Iterable`` fields (it validates while iterating)."""
    if isinstance(value, dict):
        for item in value.values():
            _drain(item)
    elif isinstance(value, list | tuple) or hasattr(value, "__next__"):
        for item in value:
            _drain(item)


def _conforms(sdk_type: Any, value: Any) -> None:
    if sdk_type not in _ADAPTERS:
        _ADAPTERS[sdk_type] = TypeAdapter(sdk_type)
    adapter = _ADAPTERS[sdk_type]
    _drain(adapter.validate_python(value))


def _check_documented_shape(name: str, payload: dict[str, Any]) -> None:
    if name == "openai_chat":
        pieces = [(ChatCompletionMessageParam, m) for m in payload["messages"]]
        pieces += [(ChatCompletionFunctionToolParam, t) for t in payload.get("tools", [])]
    elif name == "openai_responses":
        pieces = [(ResponseInputItemParam, item) for item in payload["input"]]
        pieces += [(FunctionToolParam, t) for t in payload.get("tools", [])]
    else:
        pieces = [(anthropic_types.MessageParam, m) for m in payload["messages"]]
        pieces += [(anthropic_types.ToolParam, t) for t in payload.get("tools", [])]
        roles = [m["role"] for m in payload["messages"]]
        assert all(a != b for a, b in zip(roles, roles[1:])), roles  # alternation
    for sdk_type, piece in pieces:
        _conforms(sdk_type, piece)


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


def _send(name: str, payload: dict[str, Any], server: FakeLLMServer) -> None:
    if name == "anthropic":
        client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="x", max_retries=0, timeout=10)
        answer: Any = client.messages.create(**payload)
        assert answer.content[0].text == "ok"
    else:
        oai = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0, timeout=10)
        if name == "openai_chat":
            answer = oai.chat.completions.create(**payload)
            assert answer.choices[0].message.content == "ok"
        else:
            answer = oai.responses.create(**payload)
            assert answer.output_text == "ok"


ROUND_TRIPS = [(r, c) for r in RENDERERS for c in CONVERSATIONS if (r, c) != ("openai_chat", "tool_image")]
PATHS = {"openai_chat": "/v1/chat/completions", "openai_responses": "/v1/responses", "anthropic": "/v1/messages"}


@pytest.mark.parametrize(("name", "conversation"), ROUND_TRIPS, ids=[f"{r}-{c}" for r, c in ROUND_TRIPS])
def test_sdk_round_trip(name: str, conversation: str, server: FakeLLMServer) -> None:
    options: dict[str, Any] = {"model": "test-model"}
    if name == "anthropic":
        options["max_tokens"] = 256
    payload = RENDERERS[name].render(CONVERSATIONS[conversation], tool_definitions=TOOLS, **options)
    _check_documented_shape(name, payload)
    server.enqueue("ok")
    before = server.calls
    _send(name, payload, server)
    assert server.calls == before + 1
    arrived = server.received[-1]
    assert arrived.path == PATHS[name]
    assert arrived.body == json.loads(json.dumps(payload))  # exactly the payload, nothing added or lost
    server.assert_complete()


def test_shape_check_catches_an_undocumented_shape() -> None:
    """The documented-shape check is not vacuous: shapes the SDK types do not allow fail it."""
    with pytest.raises(ValueError):
        _conforms(ResponseInputItemParam, {"type": "message", "role": "user",
                                           "content": [{"type": "input_image", "image_url": CAT_URL}]})  # no detail
    with pytest.raises(ValueError):
        _conforms(ResponseInputItemParam, {"type": "message", "role": "assistant",
                                           "content": [{"type": "output_text", "text": "x"}]})  # no id/status
    with pytest.raises(ValueError):
        _conforms(anthropic_types.MessageParam, {"role": "user", "content": [{"type": "tool_result"}]})
    with pytest.raises(AssertionError):
        _check_documented_shape("anthropic", {"messages": [{"role": "user", "content": "a"},
                                                           {"role": "user", "content": "b"}]})
