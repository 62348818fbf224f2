"""The one fake of :mod:`agent_memory.testing`: a scripted stand-in for a remote LLM service.

What it fakes: the model behind OpenAI Chat Completions, the OpenAI Responses API and Anthropic's
Messages API. :class:`FakeLLMServer` answers each request with the next scripted reply
(:class:`ScriptedReply`, with its :class:`ScriptedToolCall` and :class:`ScriptedUsage`) in that
API's JSON shape, and records what it received (:class:`RecordedRequest`). What is real: the HTTP
on 127.0.0.1, so the ``openai`` and ``anthropic`` SDKs run their whole stacks unchanged.

Why it is the only fake: a test of code that talks to a model must say what the model answers
(this tool call, these token counts, an error status, a timeout) and see what it was sent; no real
model answers to order, and the remote services are paid and need credentials and the network.
Everything else the tests need runs for real (:mod:`~agent_memory.testing.servers`: Chroma,
Postgres, and a real local model behind llama-cpp-python's server where any answer will do), and
nothing fakes agent-memory itself.
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from agent_memory.errors import ConfigurationError
from agent_memory.testing.api_shapes import (
    ANTHROPIC_ROUTE,
    CHAT_ROUTE,
    RESPONSES_ROUTE,
    error_body,
    request_problem,
)

__all__ = [
    "ANTHROPIC_CACHE_LOOKBACK_BLOCKS",
    "DEFAULT_MAX_BODY_BYTES",
    "DEFAULT_READ_TIMEOUT_S",
    "FAKE_MODEL",
    "FakeLLMServer",
    "FakeOpenAIServer",
    "RecordedRequest",
    "ScriptedReply",
    "ScriptedToolCall",
    "ScriptedUsage",
]

FAKE_MODEL = "fake-model"
"""The model name :class:`FakeLLMServer` reports when a request names none."""

ANTHROPIC_CACHE_LOOKBACK_BLOCKS = 20
"""Blocks before a ``cache_control`` breakpoint where Anthropic (and :class:`FakeLLMServer`) still
looks for an earlier cache entry."""

DEFAULT_FAKE_CACHE_MIN_TOKENS = 1024
"""Shortest prefix :class:`FakeLLMServer` caches for Anthropic requests, in its usage units (words):
the minimum Anthropic documents for its Sonnet models, in tokens."""

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024
"""Largest request body :class:`FakeLLMServer` reads, in bytes (32 MiB): the 32 MB Anthropic documents
for its Messages API (platform.claude.com/docs/en/api/errors, "Request size limits"). A larger one
is answered 413 without being read."""

DEFAULT_READ_TIMEOUT_S = 30.0
"""Longest :class:`FakeLLMServer` waits for the next bytes of a connection, in seconds: of a request
line, headers or body (a body shorter than its ``Content-Length`` is answered 400 then), or of the
next request on an idle keep-alive connection (then closed, as any HTTP server closes idle ones)."""

_LENGTH = re.compile(r"[0-9]{1,20}")


@dataclass(frozen=True)
class ScriptedToolCall:
    """One tool call in a :class:`ScriptedReply`.

    Attributes:
        name: the tool's name.
        arguments: the arguments as the raw JSON string the server sends; malformed JSON is sent
            as is (Anthropic's ``tool_use.input`` must be an object: text that is not a JSON object
            is sent there as a JSON string, as a broken server would).
        id: the call id, sent as given (``""``: a broken server's empty id); ``None``:
            ``call_<n>_<i>`` (``toolu_<n>_<i>`` for Anthropic), ``n`` the request number and ``i``
            the call's position.
    """

    name: str
    arguments: str = "{}"
    id: str | None = None


@dataclass(frozen=True)
class ScriptedUsage:
    """Token counts a :class:`ScriptedReply` reports, in each API's own fields.

    Attributes:
        prompt_tokens: the whole prompt, cached part included (chat ``prompt_tokens``, Responses
            ``input_tokens``; for Anthropic split into ``input_tokens`` = this minus the two
            cache counts, ``cache_read_input_tokens``, ``cache_creation_input_tokens``).
        completion_tokens: the answer (``completion_tokens`` / ``output_tokens``).
        cached_tokens: the prompt tokens read from the provider's cache (chat
            ``prompt_tokens_details.cached_tokens``, Responses ``input_tokens_details.cached_tokens``,
            Anthropic ``cache_read_input_tokens``); ``None``: the field is not sent.
        cache_write_tokens: Anthropic's ``cache_creation_input_tokens``; ``None``: not sent.
    """

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    cache_write_tokens: int | None = None


@dataclass(frozen=True)
class ScriptedReply:
    """One scripted answer of :class:`FakeLLMServer`, rendered in the shape of the API asked.

    Attributes:
        content: the assistant's text (a 200 answer), or the error message when ``status`` is not
            200. With tool calls, ``""`` means no text (``content: null`` in a chat completion).
        status: HTTP status; anything but 200 sends the API's error body with ``content`` as its
            message.
        delay_s: seconds to wait before answering (longer than a client's timeout: a timeout).
        headers: extra response headers (``{"retry-after": "0"}``).
        tool_calls: calls the model makes, in order (parallel calls when several).
        reasoning: reasoning text (chat ``message.reasoning_content``, as vLLM and DeepSeek send
            it; a Responses ``reasoning`` item's summary; an Anthropic ``thinking`` block);
            ``None``: none.
        usage: the token counts to report; ``None``: whitespace-separated words of the prompt's
            texts and of ``content`` (not tokens), plus a quarter of the characters of the tool
            definitions' JSON (a server that shows the tools counts them); for Anthropic, split
            into cache reads, cache writes and uncached input by the server's prompt cache (see
            :class:`FakeLLMServer`).
        report_usage: ``False`` leaves ``usage`` out of the answer entirely.
        finish_reason: the provider's own value, verbatim (chat ``finish_reason``, Anthropic
            ``stop_reason``; for Responses the ``incomplete_details.reason`` of an ``incomplete``
            response); ``None``: what a normal end with or without tool calls reports.
        body: a JSON body to send verbatim instead of building one (for answers no well-behaved
            server sends).
    """

    content: str = ""
    status: int = 200
    delay_s: float = 0.0
    headers: tuple[tuple[str, str], ...] = ()
    tool_calls: tuple[ScriptedToolCall, ...] = ()
    reasoning: str | None = None
    usage: ScriptedUsage | None = None
    report_usage: bool = True
    finish_reason: str | None = None
    body: dict[str, Any] | None = None


@dataclass(frozen=True)
class RecordedRequest:
    """One request :class:`FakeLLMServer` received."""

    path: str
    """URL path, e.g. ``/v1/messages``."""
    headers: dict[str, str]
    """Request headers, names lower-cased."""
    body: dict[str, Any]
    """The JSON body, as it arrived."""


def _words(value: Any) -> int:
    """Whitespace-separated words in every string of JSON-like data."""
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, dict):
        return sum(_words(v) for k, v in value.items() if k not in ("type", "role", "id", "call_id", "tool_use_id"))
    if isinstance(value, list):
        return sum(_words(v) for v in value)
    return 0


def _tool_tokens(body: dict[str, Any]) -> int:
    """Tokens the tool definitions of a request add to its default prompt size, about one per 4
    characters of their JSON: a real server counts them (one that does not is scripted with a
    small ``ScriptedUsage``)."""
    tools = body.get("tools")
    return len(json.dumps(tools)) // 4 if tools else 0


def _usage(reply: ScriptedReply, prompt_words: int) -> ScriptedUsage:
    return reply.usage or ScriptedUsage(prompt_tokens=prompt_words, completion_tokens=len(reply.content.split()))


def _uncached(value: Any) -> Any:
    """``value`` without its ``cache_control`` markers (they are not part of what is cached)."""
    if isinstance(value, dict):
        return {k: _uncached(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_uncached(v) for v in value]
    return value


@dataclass(frozen=True)
class _Block:
    """One cacheable block of an Anthropic request, in prefix order."""

    digest: str
    """Hash of the request's model and every block up to this one, markers left out."""
    end_tokens: int
    """Usage units (words; tools: characters / 4) from the start of the prompt to this block's end."""
    marked: bool
    """The block carries ``cache_control``."""


def _anthropic_blocks(body: dict[str, Any]) -> list[_Block]:
    """The request's blocks in Anthropic's prefix order: each tool, each system block, each content
    block of each message (a string content is one block)."""
    raw: list[tuple[Any, Any, int]] = []  # (what is hashed, the block, its usage units)
    tools = body.get("tools") or []
    before = 0
    for i, tool in enumerate(tools):  # a quarter of the JSON's characters, as _tool_tokens counts
        upto = len(json.dumps(_uncached(tools[: i + 1]))) // 4
        raw.append((tool, tool, upto - before))
        before = upto
    system = body.get("system")
    for block in [system] if isinstance(system, str) else system or []:
        raw.append((block, block, _words(_uncached(block))))
    for message in body.get("messages") or []:
        content = message.get("content")
        for block in [content] if isinstance(content, str) else content or []:
            raw.append(({"role": message.get("role"), "block": block}, block, _words(_uncached(block))))
    chain = hashlib.sha256(str(body.get("model")).encode("utf-8"))
    blocks: list[_Block] = []
    total = 0
    for hashed, block, tokens in raw:
        chain.update(json.dumps(_uncached(hashed), sort_keys=True).encode("utf-8"))
        total += tokens
        blocks.append(_Block(chain.copy().hexdigest(), total, isinstance(block, dict) and "cache_control" in block))
    if body.get("cache_control") and blocks:  # request-level (automatic) caching marks the last block
        blocks[-1] = _Block(blocks[-1].digest, blocks[-1].end_tokens, True)
    return blocks


def _chat_answer(reply: ScriptedReply, body: dict[str, Any], n: int, fake: FakeLLMServer) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content or (None if reply.tool_calls else "")}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{n}_{i}" if c.id is None else c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.arguments}}
            for i, c in enumerate(reply.tool_calls)
        ]
    if reply.reasoning is not None:
        message["reasoning_content"] = reply.reasoning
    answer: dict[str, Any] = {
        "id": f"chatcmpl-fake-{n}", "object": "chat.completion", "created": int(time.time()),
        "model": body.get("model", FAKE_MODEL),
        "choices": [{"index": 0, "message": message,
                     "finish_reason": reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")}],
    }
    if reply.report_usage:
        prompt_words = sum(len(str(m.get("content", "")).split()) for m in body.get("messages", []))
        usage = _usage(reply, prompt_words + _tool_tokens(body))
        answer["usage"] = {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens,
                           "total_tokens": usage.prompt_tokens + usage.completion_tokens}
        if usage.cached_tokens is not None:
            answer["usage"]["prompt_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return answer


def _responses_answer(reply: ScriptedReply, body: dict[str, Any], n: int, fake: FakeLLMServer) -> dict[str, Any]:
    output: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        output.append({"type": "reasoning", "id": f"rs_fake_{n}",
                       "summary": [{"type": "summary_text", "text": reply.reasoning}]})
    if reply.content or not reply.tool_calls:
        output.append({"type": "message", "id": f"msg_fake_{n}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": reply.content, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_fake_{n}_{i}", "call_id": f"call_{n}_{i}" if c.id is None else c.id,
                "name": c.name, "arguments": c.arguments, "status": "completed"}
               for i, c in enumerate(reply.tool_calls)]
    answer: dict[str, Any] = {
        "id": f"resp_fake_{n}", "object": "response", "created_at": int(time.time()),
        "model": body.get("model", FAKE_MODEL), "status": "incomplete" if reply.finish_reason else "completed",
        "incomplete_details": {"reason": reply.finish_reason} if reply.finish_reason else None,
        "output": output, "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "error": None,
    }
    if reply.report_usage:
        usage = _usage(reply, _words([body.get("instructions"), body.get("input")]) + _tool_tokens(body))
        answer["usage"] = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens,
                           "total_tokens": usage.prompt_tokens + usage.completion_tokens,
                           "output_tokens_details": {"reasoning_tokens": 0}}
        if usage.cached_tokens is not None:
            answer["usage"]["input_tokens_details"] = {"cached_tokens": usage.cached_tokens}
    return answer


def _anthropic_answer(reply: ScriptedReply, body: dict[str, Any], n: int, fake: FakeLLMServer) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    if reply.reasoning is not None:
        content.append({"type": "thinking", "thinking": reply.reasoning, "signature": "fake-signature"})
    if reply.content:
        content.append({"type": "text", "text": reply.content})
    for i, call in enumerate(reply.tool_calls):
        try:
            arguments: Any = json.loads(call.arguments)
        except ValueError:
            arguments = call.arguments
        content.append({"type": "tool_use", "id": f"toolu_{n}_{i}" if call.id is None else call.id,
                        "name": call.name, "input": arguments if isinstance(arguments, dict) else call.arguments})
    answer: dict[str, Any] = {
        "id": f"msg_fake_{n}", "type": "message", "role": "assistant", "model": body.get("model", FAKE_MODEL),
        "content": content, "stop_reason": reply.finish_reason or ("tool_use" if reply.tool_calls else "end_turn"),
        "stop_sequence": None,
    }
    if reply.report_usage:
        usage = reply.usage or fake._anthropic_usage(body, completion_tokens=len(reply.content.split()))
        cached, written = usage.cached_tokens, usage.cache_write_tokens
        answer["usage"] = {"input_tokens": usage.prompt_tokens - (cached or 0) - (written or 0),
                           "output_tokens": usage.completion_tokens}
        if cached is not None:
            answer["usage"]["cache_read_input_tokens"] = cached
        if written is not None:
            answer["usage"]["cache_creation_input_tokens"] = written
    return answer


def _scripted_error(route: str, reply: ScriptedReply) -> dict[str, Any]:
    """A scripted error (``status`` not 200) in the route's error shape: type ``fake_error`` and
    the status as ``code`` for OpenAI, type ``api_error`` for Anthropic."""
    if route == ANTHROPIC_ROUTE:
        return error_body(route, reply.content, status=reply.status, kind="api_error")
    return error_body(route, reply.content, status=reply.status, kind="fake_error", code=reply.status)


_ROUTES = {CHAT_ROUTE: _chat_answer, RESPONSES_ROUTE: _responses_answer, ANTHROPIC_ROUTE: _anthropic_answer}


@dataclass(frozen=True)
class _Refusal:
    """A request refused before its body was parsed: the answer, and how much of the request is
    still unread (the connection is closed after the answer)."""

    status: int
    message: str
    unread: int | None = 0
    """Bytes of the body the client may still send (0: none; ``None``: unknown)."""


class FakeLLMServer:
    """A scripted stand-in for a remote LLM service, on 127.0.0.1 in a thread: OpenAI Chat
    Completions, the OpenAI Responses API and Anthropic's Messages API on one port.

    What is real: HTTP over loopback (a stdlib ``ThreadingHTTPServer``), so the ``openai`` and
    ``anthropic`` SDKs' whole stacks (request building and serialisation, timeouts, status errors,
    response parsing) run unchanged. What is fake: there is no model. ``POST /v1/chat/completions``,
    ``POST /v1/responses`` and ``POST /v1/messages`` each answer with the next
    :class:`ScriptedReply` queued by :meth:`enqueue` (one queue, in order), rendered in that API's
    JSON shape (``chat.completion``, ``response``, Anthropic ``message``), tool calls, reasoning
    and usage included. Unless scripted, ``usage`` counts whitespace-separated words, not tokens.
    With the queue empty it asks ``unscripted``, and without one answers HTTP 500
    ``"no scripted reply left"``. No streaming; request
    fields (``max_tokens``, ``tools``, ``response_format``, ...) are recorded, not honoured.
    ``GET /v1/models`` lists :data:`FAKE_MODEL`.

    A bad request is answered, never dropped, with a 4xx error in the error shape of the API it
    was sent to (:func:`~agent_memory.testing.api_shapes.error_body`), and takes nothing from the
    script: a body that is not JSON, or not in the API's request shape
    (:func:`~agent_memory.testing.api_shapes.request_problem`: ``messages`` a list of objects with
    roles, ``tools`` a list of tools, ...), 400 with the field at fault; no ``Content-Length`` (or
    a chunked body), 411; a ``Content-Length`` that is not a number, 400; one over
    ``max_body_bytes``, 413, the body not read; a body shorter than its ``Content-Length``, 400
    once no byte came for ``read_timeout_s``; an unknown route, 404; a method other than GET and
    POST, 405. After an answer that leaves part of a request unread the connection is closed. A
    fault of the fake itself answers 500 in the same shape (and is printed, as a bug to fix).

    Anthropic's prompt cache is modelled from the requests, as Anthropic documents it, whenever the
    usage is not scripted: the prompt is a sequence of blocks (each tool, each ``system`` block,
    each content block of each message, in that order); a block marked ``cache_control`` (or the
    last block, for a request-level ``cache_control``) is a breakpoint, where a successful request
    stores the prefix that ends there if it is at least ``cache_min_tokens`` long. A request reads
    the longest stored prefix (same model, same blocks, markers left out) that ends at one of its
    breakpoints or up to :data:`ANTHROPIC_CACHE_LOOKBACK_BLOCKS` blocks before one
    (``cache_read_input_tokens``); what follows it up to the last cacheable breakpoint is written
    (``cache_creation_input_tokens``); the rest is ``input_tokens``. Both cache fields are always
    sent (0 when nothing was read or written), as Anthropic does. Not modelled: expiry (entries
    live as long as the server; Anthropic's last 5 minutes), per-model minimums (one
    ``cache_min_tokens``), the limit of four breakpoints (not enforced), the 1-hour cache. The
    OpenAI routes report no cache hits unless scripted.

    Args:
        port: TCP port; ``None``: a free one.
        cache_min_tokens: shortest prefix the Anthropic cache stores, in the usage's units
            (words; :data:`DEFAULT_FAKE_CACHE_MIN_TOKENS`).
        unscripted: what answers a request when the queue is empty, called with the route's path
            (``/v1/chat/completions``, ``/v1/responses``, ``/v1/messages``) and the JSON body,
            already checked to be in that API's shape
            (:func:`agent_memory.testing.stand_in.stand_in_reply`: the stand-in model that the
            docs' examples run against without a key); ``None``: HTTP 500.
        max_body_bytes: the largest request body read, in bytes
            (:data:`DEFAULT_MAX_BODY_BYTES`); a larger one is answered 413.
        read_timeout_s: the longest wait for a connection's next bytes, in seconds
            (:data:`DEFAULT_READ_TIMEOUT_S`).
        record: keep every request in :attr:`requests` and :attr:`received` (what a test reads);
            ``False``: keep none (both stay empty, :attr:`calls` still counts), for a server that
            answers requests for as long as it runs (the stand-in model).

    Raises:
        ConfigurationError: if ``max_body_bytes`` is below 1 or ``read_timeout_s`` not above 0.
        OSError: if ``port`` is taken.

    Use :meth:`start` / :meth:`stop` or ``with FakeLLMServer() as server:``; point an OpenAI
    client at :attr:`base_url` and an Anthropic client at :attr:`anthropic_base_url`.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        cache_min_tokens: int = DEFAULT_FAKE_CACHE_MIN_TOKENS,
        unscripted: Callable[[str, dict[str, Any]], ScriptedReply] | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
        record: bool = True,
    ) -> None:
        if max_body_bytes < 1:
            raise ConfigurationError(f"max_body_bytes must be at least 1, not {max_body_bytes}")
        if not read_timeout_s > 0:
            raise ConfigurationError(f"read_timeout_s must be above 0, not {read_timeout_s}")
        # the socket is bound now and kept until start() listens on it: a port looked up free and
        # bound later can be taken in between by another process (two test suites at once)
        self._socket: socket.socket | None = _bound_socket(port or 0)
        self.port: int = self._socket.getsockname()[1]
        self.cache_min_tokens = cache_min_tokens
        self.unscripted = unscripted
        self.max_body_bytes = max_body_bytes
        self.read_timeout_s = read_timeout_s
        self.record = record
        self._anthropic_cache: set[str] = set()
        self.requests: list[dict[str, Any]] = []
        """JSON bodies of every well-formed request to an answering route, oldest first (none when
        ``record`` is ``False``)."""
        self.received: list[RecordedRequest] = []
        """The same requests with their paths and headers, oldest first."""
        self._count = 0
        self._replies: deque[ScriptedReply | Callable[[dict[str, Any]], ScriptedReply]] = deque()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The API root to give an OpenAI client, ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def anthropic_base_url(self) -> str:
        """The root to give an Anthropic client, ``http://127.0.0.1:PORT`` (it adds ``/v1``)."""
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *replies: ScriptedReply | str | Callable[[dict[str, Any]], ScriptedReply]) -> FakeLLMServer:
        """Queue answers, in order; a ``str`` is a 200 answer with that text; a function is called
        with the request's JSON body and returns the answer (a script that reads the prompt, e.g.
        to call ``retrieve_memory`` with the id a citation shows: still a script, not a model)."""
        with self._lock:
            self._replies.extend(ScriptedReply(content=r) if isinstance(r, str) else r for r in replies)
        return self

    @property
    def calls(self) -> int:
        """Well-formed requests received so far on the answering routes."""
        with self._lock:
            return self._count

    def _anthropic_usage(self, body: dict[str, Any], *, completion_tokens: int) -> ScriptedUsage:
        """The default usage of an Anthropic request, split by the modelled prompt cache (class
        docstring); stores the request's cacheable prefixes."""
        blocks = _anthropic_blocks(body)
        marks = [n for n, block in enumerate(blocks) if block.marked]
        with self._lock:
            read = 0
            for mark in marks:
                for n in range(mark, max(-1, mark - ANTHROPIC_CACHE_LOOKBACK_BLOCKS - 1), -1):
                    if blocks[n].digest in self._anthropic_cache:
                        read = max(read, blocks[n].end_tokens)
                        break
            stored = [n for n in marks if blocks[n].end_tokens >= self.cache_min_tokens]
            self._anthropic_cache.update(blocks[n].digest for n in stored)
        written = blocks[stored[-1]].end_tokens - read if stored else 0
        prompt = blocks[-1].end_tokens if blocks else 0
        return ScriptedUsage(prompt_tokens=prompt, completion_tokens=completion_tokens, cached_tokens=read,
                             cache_write_tokens=max(0, written))

    def assert_complete(self) -> None:
        """Raise ``AssertionError`` if queued replies were never asked for."""
        with self._lock:
            left = len(self._replies)
        assert left == 0, f"{left} scripted repl{'y' if left == 1 else 'ies'} never requested"

    def _next(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[ScriptedReply, int]:
        with self._lock:
            if self.record:
                self.requests.append(body)
                self.received.append(RecordedRequest(path=path, headers=headers, body=body))
            self._count += 1
            n = self._count
            reply = self._replies.popleft() if self._replies else None
        if reply is not None:
            return (reply(body) if callable(reply) else reply), n
        if self.unscripted is not None:
            return self.unscripted(path, body), n
        return ScriptedReply(content="no scripted reply left", status=500), n

    def start(self) -> FakeLLMServer:
        """Listen on 127.0.0.1 and serve in a daemon thread."""
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = fake.read_timeout_s  # every read and write of a connection (StreamRequestHandler)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
                pass

            def handle(self) -> None:
                try:
                    super().handle()
                except ConnectionError:  # the client reset or left mid-request: no one to answer
                    self.close_connection = True

            def _send(self, status: int, payload: dict[str, Any], headers: tuple[tuple[str, str], ...] = (),
                      *, close: bool = False) -> None:
                data = json.dumps(payload).encode("utf-8")
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for name, value in headers:
                        self.send_header(name, value)
                    if close:
                        self.send_header("Connection", "close")  # sets close_connection
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up (its timeout) and closed the socket
                    self.close_connection = True

            def _route(self) -> str:
                return str(getattr(self, "path", "")).split("?", 1)[0].rstrip("/")

            def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
                """The stdlib's own refusals (a malformed request line or headers, an unknown
                method) as JSON in the route's error shape, not as an HTML page."""
                reason = message or self.responses.get(code, ("error",))[0]
                self._send(code, error_body(self._route(), reason, status=code), close=True)

            def _refuse(self, route: str, refusal: _Refusal) -> None:
                """Answer ``refusal`` and close the connection; first, when the client may still
                be sending, shut our side and discard what comes (until it closes, the rest of its
                body has come, or ``read_timeout_s`` passes), so that it reads the answer instead
                of a connection reset."""
                self._send(refusal.status, error_body(route, refusal.message, status=refusal.status), close=True)
                if refusal.unread == 0:
                    return
                left = refusal.unread
                deadline = time.monotonic() + fake.read_timeout_s
                try:
                    self.connection.shutdown(socket.SHUT_WR)
                    while (left is None or left > 0) and time.monotonic() < deadline:
                        chunk = self.rfile.read1(65536 if left is None else min(65536, left))
                        if not chunk:
                            break
                        left = None if left is None else left - len(chunk)
                except OSError:  # a read timed out or the client reset: the connection ends either way
                    pass

            def _body(self) -> bytes | _Refusal:
                """The request's body, read whole and no larger than ``max_body_bytes``."""
                if "Transfer-Encoding" in self.headers:
                    return _Refusal(411, "send the body with a Content-Length (a chunked body is not read)", None)
                lengths = self.headers.get_all("Content-Length") or []
                if not lengths:
                    return _Refusal(411, "a POST needs a Content-Length header", None)
                if len(set(lengths)) > 1 or not _LENGTH.fullmatch(lengths[0].strip()):
                    return _Refusal(400, f"Content-Length must be one number of bytes, not {', '.join(lengths)!r}", None)
                length = int(lengths[0])
                if length > fake.max_body_bytes:
                    return _Refusal(413, f"the request body is {length} bytes; at most {fake.max_body_bytes} are read",
                                    length)
                try:
                    raw = self.rfile.read(length)
                except TimeoutError:
                    raw = b""
                    short = f"no byte of it came for {fake.read_timeout_s:g} s"
                else:
                    short = "the client closed its side"
                if len(raw) < length:
                    return _Refusal(400, f"the body is shorter than its Content-Length of {length} bytes ({short})")
                return raw

            def do_GET(self) -> None:  # noqa: N802 - stdlib name
                if self.path.rstrip("/") == "/v1/models":
                    self._send(200, {"object": "list", "data": [{"id": FAKE_MODEL, "object": "model"}]})
                else:
                    self._send(404, error_body(self._route(), f"no route {self.path}", status=404))

            def _not_allowed(self) -> None:
                refusal = _Refusal(405, f"{self.command} is not served; use POST (GET for /v1/models)", None)
                self._refuse(self._route(), refusal)

            do_PUT = do_PATCH = do_DELETE = _not_allowed

            def do_POST(self) -> None:  # noqa: N802 - stdlib name
                route = self._route()
                raw = self._body()
                if isinstance(raw, _Refusal):
                    self._refuse(route, raw)
                    return
                if route not in _ROUTES:
                    self._send(404, error_body(route, f"no route {self.path}", status=404))
                    return
                try:
                    body = json.loads(raw.decode("utf-8"))
                except (ValueError, RecursionError):  # not UTF-8, not JSON, nested past the parser's limit
                    self._send(400, error_body(route, "the request body is not JSON", status=400))
                    return
                del raw
                problem = request_problem(route, body)
                if problem is not None:
                    self._send(400, error_body(route, problem.message, status=400, param=problem.param,
                                               code=problem.code))
                    return
                try:
                    self._answer(route, body)
                except Exception as exc:
                    self._send(500, error_body(route, f"the fake failed: {type(exc).__name__}: {exc}", status=500),
                               close=True)
                    raise  # printed by the server: a bug of the fake (or of a scripted function), not the client's

            def _answer(self, route: str, body: dict[str, Any]) -> None:
                headers = {name.lower(): value for name, value in self.headers.items()}
                reply, n = fake._next(route, headers, body)
                if reply.delay_s:
                    time.sleep(reply.delay_s)
                if reply.body is not None:
                    self._send(reply.status, reply.body, reply.headers)
                elif reply.status != 200:
                    self._send(reply.status, _scripted_error(route, reply), reply.headers)
                else:
                    self._send(200, _ROUTES[route](reply, body, n, fake), reply.headers)

        sock = self._socket if self._socket is not None else _bound_socket(self.port)  # a restart: the same port
        self._socket = None
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler, bind_and_activate=False)
        self._server.socket.close()
        self._server.socket = sock
        self._server.server_address = sock.getsockname()
        self._server.server_activate()
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the socket (handlers still sleeping are daemon threads)."""
        if self._server is None:
            if self._socket is not None:  # never started: give the port back
                self._socket.close()
                self._socket = None
            return
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = None

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _bound_socket(port: int) -> socket.socket:
    """A TCP socket bound to 127.0.0.1:``port`` (0: a free port chosen by the system), not yet listening."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return sock


FakeOpenAIServer = FakeLLMServer
"""The earlier name of :class:`FakeLLMServer` (it first served chat completions only)."""
