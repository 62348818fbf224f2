"""Bad requests to the stand-in model (issue 37 §6): every one is answered, never dropped, with a 4xx
error in the error shape of the API it was sent to; nothing hangs, nothing is printed as a
traceback, and no request body is kept.

The documented command (``python -m agent_memory.testing.stand_in``) runs as a real process on
loopback, its stderr in a file; raw sockets and ``http.client`` send what no SDK would (a body that
is not an object, a ``Content-Length`` of ``abc`` or ``-1``, a body cut short, one too large), the
real ``openai`` and ``anthropic`` SDKs send wrong shapes they do not check and read the error back.
After each bad request the server still answers a good one, and its stderr holds no traceback.
"""

from __future__ import annotations

import gc
import http.client
import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent_memory.testing import free_port
from agent_memory.testing.fake_llm import DEFAULT_MAX_BODY_BYTES
from agent_memory.testing.stand_in import stand_in_reply, stand_in_server

CHAT, RESPONSES, MESSAGES = "/v1/chat/completions", "/v1/responses", "/v1/messages"
USER = [{"role": "user", "content": "hi"}]
GOOD = {
    CHAT: {"model": "m", "messages": USER},
    RESPONSES: {"model": "m", "input": "hi"},
    MESSAGES: {"model": "m", "max_tokens": 10, "messages": USER},
}
CLIENT_TIMEOUT_S = 20.0
"""How long a test's client waits for an answer: far longer than any answer takes, so a server that
drops or hangs a request fails the test instead of hanging it."""
SMALL_BODY_BYTES = 64 * 1024
"""``--max-body-bytes`` of the strict server."""
SHORT_READ_TIMEOUT_S = 2.0
"""``--read-timeout`` of the strict server: how long it waits for the rest of a body cut short."""


@dataclass(frozen=True)
class Served:
    port: int
    stderr_path: Path

    def stderr(self) -> str:
        return self.stderr_path.read_text(encoding="utf-8", errors="replace")


def _serve(directory: Path, *options: str) -> Iterator[Served]:
    port = free_port()
    stderr_path = directory / "stderr.txt"
    with open(stderr_path, "wb") as stderr:
        process = subprocess.Popen([sys.executable, "-m", "agent_memory.testing.stand_in", "--port", str(port), *options],
                                   stdout=subprocess.PIPE, stderr=stderr, text=True)
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("export OPENAI_BASE_URL="), stderr_path.read_text(encoding="utf-8")
        yield Served(port, stderr_path)
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The command as the docs start it (its default limits)."""
    yield from _serve(tmp_path_factory.mktemp("stand-in"))


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The command with a 64 KiB body limit and a 2 s read timeout."""
    yield from _serve(tmp_path_factory.mktemp("strict-stand-in"), "--max-body-bytes", str(SMALL_BODY_BYTES),
                      "--read-timeout", str(SHORT_READ_TIMEOUT_S))


@dataclass(frozen=True)
class Answer:
    status: int
    body: Any
    closed: bool
    """The server closed the connection after the answer."""


def exchange(port: int, request: bytes) -> Answer:
    """Send raw bytes on a new connection and read one HTTP answer (and whether the server then
    closed the connection, which it announces with ``Connection: close``)."""
    with socket.create_connection(("127.0.0.1", port), timeout=CLIENT_TIMEOUT_S) as sock:
        sock.sendall(request)
        response = http.client.HTTPResponse(sock)
        response.begin()
        body = json.loads(response.read())
        closed = response.getheader("Connection", "").lower() == "close" and sock.recv(1) == b""
        return Answer(response.status, body, closed)


def post(route: str, body: bytes, *, length: str | None = None, extra: str = "") -> bytes:
    """The bytes of a POST; ``length`` the Content-Length header's value (``None``: the body's)."""
    head = f"POST {route} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{extra}"
    if length != "":
        head += f"Content-Length: {len(body) if length is None else length}\r\n"
    return head.encode("ascii") + b"\r\n" + body


def assert_error_shape(route: str, body: Any, kind: str = "invalid_request_error") -> str:
    """``body`` is the API's own error body (OpenAI's four fields; Anthropic's type and error);
    returns its message."""
    if route == MESSAGES:
        assert set(body) == {"type", "error"} and body["type"] == "error", body
        assert set(body["error"]) == {"type", "message"} and body["error"]["type"] == kind, body
        return str(body["error"]["message"])
    assert set(body) == {"error"} and set(body["error"]) == {"message", "type", "param", "code"}, body
    assert body["error"]["type"] == "invalid_request_error", body
    return str(body["error"]["message"])


def assert_still_serving(served: Served) -> None:
    """A good request on a new connection is answered, and nothing was printed as a traceback."""
    for route, body in GOOD.items():
        assert exchange(served.port, post(route, json.dumps(body).encode())).status == 200, route
    assert "Traceback" not in served.stderr(), served.stderr()


# -- wrong shapes -------------------------------------------------------------------------------------

TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
WRONG_SHAPES: list[tuple[str, Any, str | None]] = [
    # (route, body, the field at fault: OpenAI's param, or the start of Anthropic's message)
    (CHAT, [], None),
    (CHAT, "x", None),
    (CHAT, None, None),
    (CHAT, 42, None),
    (CHAT, {}, "model"),
    (CHAT, {"model": "m"}, "messages"),
    (CHAT, {"model": 5, "messages": USER}, "model"),
    (CHAT, {"model": "m", "messages": "hi"}, "messages"),
    (CHAT, {"model": "m", "messages": []}, "messages"),
    (CHAT, {"model": "m", "messages": [1]}, "messages[0]"),
    (CHAT, {"model": "m", "messages": [{"content": "hi"}]}, "messages[0].role"),
    (CHAT, {"model": "m", "messages": [{"role": "wizard", "content": "hi"}]}, "messages[0].role"),
    (CHAT, {"model": "m", "messages": [{"role": "user"}]}, "messages[0].content"),
    (CHAT, {"model": "m", "messages": [{"role": "user", "content": 5}]}, "messages[0].content"),
    (CHAT, {"model": "m", "messages": [{"role": "user", "content": [1]}]}, "messages[0].content[0]"),
    (CHAT, {"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": 5}]}]},
     "messages[0].content[0].text"),
    (CHAT, {"model": "m", "messages": [{"role": "assistant", "tool_calls": "x"}]}, "messages[0].tool_calls"),
    (CHAT, {"model": "m", "messages": [{"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                                          "function": "f"}]}]},
     "messages[0].tool_calls[0].function"),
    (CHAT, {"model": "m", "messages": [{"role": "tool", "content": "x"}]}, "messages[0].tool_call_id"),
    (CHAT, {"model": "m", "messages": USER, "tools": [1]}, "tools[0]"),
    (CHAT, {"model": "m", "messages": USER, "tools": {"f": TOOL}}, "tools"),
    (CHAT, {"model": "m", "messages": USER, "tools": [{"type": "function"}]}, "tools[0].function"),
    (CHAT, {"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": 5}}]},
     "tools[0].function.name"),
    (CHAT, {"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": [1]}}]},
     "tools[0].function.parameters"),
    (RESPONSES, [], None),
    (RESPONSES, {"input": 5}, "input"),
    (RESPONSES, {"input": [1]}, "input[0]"),
    (RESPONSES, {"input": [{"content": "hi"}]}, "input[0].role"),
    (RESPONSES, {"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]}, "input[0].call_id"),
    (RESPONSES, {"input": [{"type": "function_call_output", "call_id": "c", "output": 5}]}, "input[0].output"),
    (RESPONSES, {"input": "hi", "instructions": ["be brief"]}, "instructions"),
    (RESPONSES, {"input": "hi", "tools": [{"type": "function", "parameters": {}}]}, "tools[0].name"),
    (RESPONSES, {"input": "hi", "tools": [{"name": "f"}]}, "tools[0].type"),
    (MESSAGES, "x", "body"),
    (MESSAGES, {"model": "m", "messages": USER}, "max_tokens"),
    (MESSAGES, {"model": "m", "max_tokens": "many", "messages": USER}, "max_tokens"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": "hi"}, "messages"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": [{"role": "system", "content": "hi"}]}, "messages.0.role"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": {"text": "hi"}}]},
     "messages.0.content"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [{"type": "text"}]}]},
     "messages.0.content.0.text"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": [{"role": "assistant", "content": [
        {"type": "tool_use", "id": "t", "name": "f", "input": "{}"}]}]}, "messages.0.content.0.input"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": [
        {"type": "tool_result", "content": "x"}]}]}, "messages.0.content.0.tool_use_id"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": USER, "system": 5}, "system"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": USER, "tools": [{"name": "f"}]}, "tools.0.input_schema"),
    (MESSAGES, {"model": "m", "max_tokens": 10, "messages": USER, "tools": [{"input_schema": {}}]}, "tools.0.name"),
]


@pytest.mark.parametrize(("route", "body", "field"), WRONG_SHAPES, ids=[f"{r[4:8]}-{i}" for i, (r, _, _) in
                                                                         enumerate(WRONG_SHAPES)])
def test_a_wrong_shape_gets_a_400_naming_the_field_in_the_apis_error_shape(
        served: Served, route: str, body: Any, field: str | None) -> None:
    answer = exchange(served.port, post(route, json.dumps(body).encode()))
    assert answer.status == 400, answer
    message = assert_error_shape(route, answer.body)
    if route == MESSAGES:
        assert message.startswith(f"{field}: "), message
    else:
        assert answer.body["error"]["param"] == field, answer.body
        assert answer.body["error"]["code"] in {"missing_required_parameter", "invalid_type", "invalid_value"}
    assert_still_serving(served)


def test_the_same_connection_serves_a_good_request_after_a_bad_one(served: Served) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", served.port, timeout=CLIENT_TIMEOUT_S)
    try:
        for bad in (b"[]", b"{not json", '{"model": "m", "messages": "\u00e9"}'.encode("latin-1"), b"[" * 100_000):
            connection.request("POST", CHAT, body=bad, headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            assert response.status == 400, bad[:20]
            assert_error_shape(CHAT, json.loads(response.read()))
        connection.request("POST", CHAT, body=json.dumps(GOOD[CHAT]), headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 200 and json.loads(response.read())["object"] == "chat.completion"
    finally:
        connection.close()
    assert_still_serving(served)


# -- framing: Content-Length, a short body, a large one -----------------------------------------------


@pytest.mark.parametrize("route", [CHAT, MESSAGES])
@pytest.mark.parametrize(("length", "status"), [("abc", 400), ("-1", 400), ("1e3", 400), ("", 411), ("5, 6", 400)])
def test_a_content_length_that_is_not_one_number_gets_an_answer_and_a_closed_connection(
        served: Served, route: str, length: str, status: int) -> None:
    answer = exchange(served.port, post(route, b"{}", length=length))
    assert (answer.status, answer.closed) == (status, True), answer
    assert "Content-Length" in assert_error_shape(route, answer.body)
    assert_still_serving(served)


def test_a_chunked_body_gets_411(served: Served) -> None:
    answer = exchange(served.port, post(CHAT, b"2\r\n{}\r\n0\r\n\r\n", length="", extra="Transfer-Encoding: chunked\r\n"))
    assert (answer.status, answer.closed) == (411, True)
    assert_error_shape(CHAT, answer.body)
    assert_still_serving(served)


@pytest.mark.parametrize("route", [CHAT, MESSAGES])
def test_a_body_shorter_than_its_content_length_times_out_into_a_400_and_frees_the_connection(
        strict: Served, route: str) -> None:
    # 10 bytes declared, 2 sent, the socket kept open: the server waits --read-timeout (2 s), not forever
    answer = exchange(strict.port, post(route, b"{}", length="10"))
    assert (answer.status, answer.closed) == (400, True), answer
    assert "shorter than its Content-Length" in assert_error_shape(route, answer.body)
    assert_still_serving(strict)


@pytest.mark.parametrize(("route", "kind"), [(CHAT, "invalid_request_error"), (MESSAGES, "request_too_large")])
def test_a_body_over_the_limit_gets_413_without_being_read(served: Served, route: str, kind: str) -> None:
    # declared one byte over the documented 32 MB, a little of it sent: the answer comes at once
    answer = exchange(served.port, post(route, b"{" * 1000, length=str(DEFAULT_MAX_BODY_BYTES + 1)))
    assert (answer.status, answer.closed) == (413, True), answer
    assert str(DEFAULT_MAX_BODY_BYTES) in assert_error_shape(route, answer.body, kind)
    assert_still_serving(served)


def test_a_client_that_sends_its_whole_large_body_reads_the_413(strict: Served) -> None:
    body = json.dumps({**GOOD[CHAT], "messages": [{"role": "user", "content": "x" * SMALL_BODY_BYTES}]})
    connection = http.client.HTTPConnection("127.0.0.1", strict.port, timeout=CLIENT_TIMEOUT_S)
    try:
        connection.request("POST", CHAT, body=body, headers={"Content-Type": "application/json"})
        response = connection.getresponse()
        assert response.status == 413 and response.getheader("Connection") == "close"
        assert_error_shape(CHAT, json.loads(response.read()))
    finally:
        connection.close()
    assert_still_serving(strict)


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"PUT /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 405),
    (b"POST /v1/embeddings HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}", 404),
    (b"POST /v1/chat/completions HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % n for n in range(101)) + b"\r\n", 431),
])
def test_other_refusals_are_json_too(served: Served, request_bytes: bytes, status: int) -> None:
    answer = exchange(served.port, request_bytes)
    assert answer.status == status
    assert_error_shape(CHAT, answer.body)
    assert_still_serving(served)


# -- the real SDKs read the errors back -----------------------------------------------------------------


def test_the_openai_sdk_reads_the_error_back(served: Served) -> None:
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{served.port}/v1", api_key="none", max_retries=0)
    wrong: Any = [{"role": "wizard", "content": "hi"}]
    with pytest.raises(openai.BadRequestError) as chat:
        client.chat.completions.create(model="m", messages=wrong)
    assert (chat.value.status_code, chat.value.type, chat.value.param, chat.value.code) == (
        400, "invalid_request_error", "messages[0].role", "invalid_value")
    items: Any = [{"type": "function_call", "name": "f", "arguments": "{}"}]
    with pytest.raises(openai.BadRequestError) as responses:
        client.responses.create(model="m", input=items)
    assert responses.value.param == "input[0].call_id" and responses.value.code == "missing_required_parameter"
    assert "Missing required parameter: 'input[0].call_id'" in responses.value.message
    assert_still_serving(served)


def test_the_anthropic_sdk_reads_the_error_back(served: Served, strict: Served) -> None:
    client = anthropic.Anthropic(base_url=f"http://127.0.0.1:{served.port}", api_key="none", max_retries=0)
    wrong: Any = [{"role": "user", "content": [{"type": "tool_result", "content": "x"}]}]
    with pytest.raises(anthropic.BadRequestError) as bad:
        client.messages.create(model="m", max_tokens=10, messages=wrong)
    assert bad.value.body == {"type": "error", "error": {
        "type": "invalid_request_error", "message": "messages.0.content.0.tool_use_id: Field required"}}
    small = anthropic.Anthropic(base_url=f"http://127.0.0.1:{strict.port}", api_key="none", max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as large:
        small.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x" * SMALL_BODY_BYTES}])
    assert large.value.status_code == 413 and isinstance(large.value.body, dict)
    assert large.value.body["error"]["type"] == "request_too_large"
    assert_still_serving(served)
    assert_still_serving(strict)


# -- random bodies, random tool schemas --------------------------------------------------------------

_KEYS = ["model", "messages", "tools", "input", "instructions", "system", "max_tokens", "role", "content", "type",
         "text", "name", "id", "tool_calls", "function", "arguments", "parameters", "input_schema", "call_id",
         "output", "tool_use_id", "tool_call_id", "cache_control"]
_WORDS = ["user", "assistant", "system", "tool", "function", "text", "tool_use", "tool_result", "message",
          "function_call", "function_call_output", "custom", "m"]
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.sampled_from(_WORDS) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(route=st.sampled_from([CHAT, RESPONSES, MESSAGES]), body=_JSON)
def test_any_json_body_is_answered_200_or_400(served: Served, route: str, body: Any) -> None:
    answer = exchange(served.port, post(route, json.dumps(body).encode()))
    assert answer.status in (200, 400), answer
    if answer.status == 400:
        assert_error_shape(route, answer.body)
    assert "Traceback" not in served.stderr()


_SCHEMA_KEYS = ["type", "properties", "required", "items", "enum", "const", "default", "examples", "anyOf", "oneOf",
                "allOf", "$ref", "$defs", "minimum", "minItems", "format"]
_SCHEMA = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3)
    | st.sampled_from(["object", "array", "string", "integer", "number", "#", "#/$defs/a", "#/properties", "uri"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_SCHEMA_KEYS) | st.sampled_from(["a", "b"]),
                                                                 inner, max_size=5),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(schema=st.dictionaries(st.sampled_from(_SCHEMA_KEYS), _SCHEMA, max_size=5))
def test_the_rule_makes_bounded_arguments_from_any_tool_schema(schema: dict[str, Any]) -> None:
    body = {"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
    (call,) = stand_in_reply(CHAT, body).tool_calls
    assert isinstance(json.loads(call.arguments), dict) and len(call.arguments) < 100_000


def test_a_schema_asking_for_a_million_items_or_a_cycle_gets_a_bounded_answer() -> None:
    cycle = {"$defs": {"Node": {"type": "object", "required": ["left", "right"],
                                "properties": {"left": {"$ref": "#/$defs/Node"}, "right": {"$ref": "#/$defs/Node"}}}},
             "type": "object", "required": ["root"], "properties": {"root": {"$ref": "#/$defs/Node"}}}
    huge = {"type": "object", "required": ["ids"], "properties": {"ids": {"type": "array", "minItems": 10**9,
                                                                          "items": {"type": "integer", "minimum": 3}}}}
    for schema in (cycle, huge):
        body = {"model": "m", "messages": USER, "tools": [{"type": "function", "function": {"name": "f", "parameters": schema}}]}
        (call,) = stand_in_reply(CHAT, body).tool_calls
        assert len(call.arguments) < 100_000
    assert json.loads(call.arguments)["ids"][:2] == [3, 3]


# -- memory: no body kept -----------------------------------------------------------------------------

MARK = "memory-probe-5d1c"


def _live_bodies() -> int:
    """Request bodies still alive in this process: the parsed ``messages`` lists whose message
    carries :data:`MARK` (lists, which the collector always tracks; a dict of strings it does not)."""
    gc.collect()
    return sum(1 for o in gc.get_objects() if isinstance(o, list) and any(
        isinstance(m, dict) and isinstance(m.get("content"), str) and m["content"].startswith(MARK) for m in o))


def test_the_stand_in_keeps_no_request_body() -> None:
    with stand_in_server() as server:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=CLIENT_TIMEOUT_S)
        try:
            for n in range(6):  # ~2 MB each: what the 4 x 50 MB did, smaller
                body = json.dumps({"model": "m", "messages": [{"role": "user", "content": f"{MARK} {n} " + "x" * 2_000_000}]})
                connection.request("POST", CHAT, body=body, headers={"Content-Type": "application/json"})
                response = connection.getresponse()
                assert response.status == 200 and MARK in json.loads(response.read())["choices"][0]["message"]["content"]
                del body
        finally:
            connection.close()
        assert server.calls == 6
        assert server.requests == [] and server.received == []
        assert _live_bodies() == 0


def test_a_test_server_still_records_what_it_was_sent() -> None:
    with stand_in_server(record=True) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="none", max_retries=0)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": MARK}])
        assert [r.body["messages"][0]["content"] for r in server.received] == [MARK] and server.calls == 1
        assert _live_bodies() == 1
