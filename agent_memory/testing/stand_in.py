"""The stand-in model: what the docs' examples run against without a key.

Every example in ``docs/`` that calls a model reads ``OPENAI_BASE_URL`` / ``ANTHROPIC_BASE_URL``
the way the ``openai`` and ``anthropic`` SDKs do. Pointed at the stand-in, it runs offline, with
no key, in any of the frameworks::

    python -m agent_memory.testing.stand_in          # serves on 127.0.0.1:8765 until Ctrl-C
    export OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=none
    export ANTHROPIC_BASE_URL=http://127.0.0.1:8765 ANTHROPIC_API_KEY=none

There is no model in it. It is :class:`~agent_memory.testing.FakeLLMServer` (real HTTP on
loopback, OpenAI Chat Completions, the OpenAI Responses API and Anthropic's Messages API on one
port) answering every request by one fixed rule, :func:`stand_in_reply`, as pydantic-ai's
``TestModel`` does inside that framework (github.com/pydantic/pydantic-ai,
``pydantic_ai_slim/pydantic_ai/models/test.py``): after the user speaks, it calls each tool it is
offered once, with arguments made from the tool's JSON schema; once those results are back, it
answers with the start of each. The library's own memory tools are not called (a stand-in cannot
know an id worth retrieving). So an example's whole loop runs (the request, the tool call, the
tool's result stored and shown, the answer, the usage priced), and what it prints is what the
tools returned, not an answer to the question. ``usage`` counts words, not tokens (see
:class:`~agent_memory.testing.FakeLLMServer`). For a real model without a key, any
OpenAI-compatible local server works the same way (``make local-llm``, docs/agents.md).

A request it cannot take gets a 4xx error in the error shape of the API it was sent to, never a
dropped connection or a hung thread (:class:`~agent_memory.testing.FakeLLMServer`: a body not in
the API's request shape, over ``--max-body-bytes`` or cut short, a bad ``Content-Length``); a tool
schema that no provider would accept gets arguments all the same, within
:data:`ARGUMENTS_DEPTH_MAX` and :data:`ARGUMENTS_VALUES_MAX`. The command keeps no request, so its
memory stays flat however long it serves.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

from agent_memory.errors import ConfigurationError
from agent_memory.testing.fake_llm import (
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_READ_TIMEOUT_S,
    FakeLLMServer,
    ScriptedReply,
    ScriptedToolCall,
)

__all__ = ["LIBRARY_TOOLS", "STAND_IN_PORT", "stand_in_reply", "stand_in_server"]

STAND_IN_PORT = 8765
"""The port ``python -m agent_memory.testing.stand_in`` serves on unless ``--port`` says otherwise."""

LIBRARY_TOOLS = frozenset({
    "retrieve_memory", "query_memory", "store_memory", "forget_memory", "pin_memory", "compact_memory",
    "memory", "spawn_agent",
})
"""The tools agent-memory itself offers a model (the toolkit's, its single ``memory`` form and the
agent's ``spawn_agent``): the stand-in never calls them. Anthropic's own memory tool
(``memory_20250818``, sent by type, not as a function) is not one of them."""

RESULT_CHARS = 200
"""How much of each tool result the stand-in's answer repeats, in characters."""

ARGUMENTS_DEPTH_MAX = 16
"""Deepest nesting of the arguments the stand-in makes for a call (a tool's schema nests a few
levels; a ``$ref`` that refers back to itself stops here, with ``null``)."""

ARGUMENTS_VALUES_MAX = 1000
"""Most values the stand-in makes for one call's arguments (each property, item and the object
itself counts one): a schema that asks for more (``minItems: 1000000``, required references in a
cycle) gets its first ones, then ``null`` s and shorter arrays."""

ANTHROPIC_MEMORY_VIEW = {"command": "view", "path": "/memories"}
"""What the stand-in asks of Anthropic's memory tool (a ``memory_*`` tool sent by type, whose
schema Anthropic keeps: platform.claude.com/docs/en/agents-and-tools/tool-use/memory-tool)."""

_URL = re.compile(r"https?://[^\s<>()\[\]\"']+")
_CALL_ID = re.compile(r"^(?:call|toolu)_(.+)_[0-9a-f]{8}$")


@dataclass(frozen=True)
class _Tool:
    name: str
    schema: dict[str, Any] | None
    """The parameters' JSON schema; ``None``: Anthropic's memory tool."""


@dataclass(frozen=True)
class _Request:
    """What the rule reads of a request, whatever its API."""

    user_text: str
    """The text of the last user message ("" if none)."""
    tools: tuple[_Tool, ...]
    """The tools offered that the stand-in may call, in the request's order."""
    results: tuple[tuple[str, str], ...] | None
    """(tool name, result text) of the tool results after the last assistant message (all of the
    request's when it has none: a request that continues a server-side thread sends only the new
    results); ``None``: that message called no tool and no result follows (the user has the turn)."""


def _text(content: Any) -> str:
    """The text of a message content: a string, or a list of parts with ``text`` fields."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def _callable(name: str) -> bool:
    return name not in LIBRARY_TOOLS


def _name(call_id: Any, names: dict[Any, str]) -> str:
    """The tool a result answers: from the request's own call, else from the stand-in's call id
    (``call_<name>_<hex>``; a request that continues a server-side thread carries no history)."""
    if call_id in names:
        return names[call_id]
    found = _CALL_ID.match(str(call_id))
    return found.group(1) if found else "a tool"


def _chat_request(body: dict[str, Any]) -> _Request:
    tools = tuple(_Tool(t["function"]["name"], t["function"].get("parameters") or {})
                  for t in body.get("tools") or [] if t.get("type") == "function" and _callable(t["function"]["name"]))
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    user = next((_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), -1)
    calls = messages[last].get("tool_calls") or [] if last >= 0 else []
    names = {c.get("id"): c.get("function", {}).get("name", "a tool") for c in calls}
    results = tuple((_name(m.get("tool_call_id"), names), _text(m.get("content")))
                    for m in messages[last + 1:] if m.get("role") == "tool")
    return _Request(user, tools, results if results or calls else None)


def _responses_request(body: dict[str, Any]) -> _Request:
    tools = tuple(_Tool(t["name"], t.get("parameters") or {})
                  for t in body.get("tools") or [] if t.get("type") == "function" and _callable(t["name"]))
    items = body.get("input")
    if isinstance(items, str):
        return _Request(items, tools, None)
    items = [i for i in items or [] if isinstance(i, dict)]
    user = next((_text(i.get("content")) for i in reversed(items) if i.get("role") == "user"), "")
    last = next((n for n in range(len(items) - 1, -1, -1)
                 if items[n].get("type") == "function_call" or items[n].get("role") == "assistant"), -1)
    called = last >= 0 and items[last].get("type") == "function_call"
    names = {i.get("call_id"): i.get("name", "a tool") for i in items if i.get("type") == "function_call"}
    results = tuple((_name(i.get("call_id"), names), _text(i.get("output")))
                    for i in items[last + 1:] if i.get("type") == "function_call_output")
    return _Request(user, tools, results if results or called else None)


def _anthropic_request(body: dict[str, Any]) -> _Request:
    tools: list[_Tool] = []
    for tool in body.get("tools") or []:
        if "input_schema" in tool and _callable(tool.get("name", "")):
            tools.append(_Tool(tool["name"], tool["input_schema"]))
        elif str(tool.get("type", "")).startswith("memory_"):
            tools.append(_Tool(tool.get("name", "memory"), None))
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]

    def blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
        content = message.get("content")
        return [{"type": "text", "text": content}] if isinstance(content, str) else \
            [b for b in content or [] if isinstance(b, dict)]

    user = next((" ".join(b.get("text", "") for b in blocks(m) if b.get("type") == "text")
                 for m in reversed(messages)
                 if m.get("role") == "user" and any(b.get("type") == "text" for b in blocks(m))), "")
    last = next((i for i in range(len(messages) - 1, -1, -1) if messages[i].get("role") == "assistant"), -1)
    names = {b.get("id"): b.get("name", "a tool") for b in blocks(messages[last]) if b.get("type") == "tool_use"} \
        if last >= 0 else {}
    results = tuple((_name(b.get("tool_use_id"), names), _text(b.get("content")))
                    for m in messages[last + 1:] for b in blocks(m) if b.get("type") == "tool_result")
    return _Request(user, tuple(tools), results if results or names else None)


_READERS = {
    "/v1/chat/completions": _chat_request,
    "/v1/responses": _responses_request,
    "/v1/messages": _anthropic_request,
}


def _number(value: Any) -> float | None:
    """``value`` when it is a finite JSON number (not a boolean), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return value if math.isfinite(value) else None


class _Maker:
    """Makes one call's arguments from its tool's JSON schema (:meth:`value`), within
    :data:`ARGUMENTS_DEPTH_MAX` and :data:`ARGUMENTS_VALUES_MAX`. A keyword of the wrong type
    (``properties`` that is not an object, ``required`` not a list, ``minimum`` not a number) is
    read as absent, as a schema a provider would have refused."""

    def __init__(self, root: dict[str, Any], user_text: str) -> None:
        self.root = root
        self.user_text = user_text
        self.made = 0

    def _target(self, ref: str) -> dict[str, Any]:
        """The schema a local ``$ref`` (``#/$defs/Filter``, a JSON pointer) points at; ``{}``: none."""
        target: Any = self.root
        for part in ref[2:].split("/") if ref != "#" else []:
            key = part.replace("~1", "/").replace("~0", "~")
            target = target.get(key) if isinstance(target, dict) else None
        return target if isinstance(target, dict) else {}

    def value(self, name: str, schema: dict[str, Any], depth: int = 0) -> Any:
        """A value that fits ``schema``, made without a model: the schema's default, const, first
        enum value or first example if it has one; else, by type, for a string the first URL of the
        user's message (or ``https://example.org/``) when the parameter looks like an address and
        the user's message otherwise; the minimum (or 1) for numbers; ``False``; the schema's
        minimum count of items; an object of its required properties. ``None`` past the bounds."""
        self.made += 1
        if depth > ARGUMENTS_DEPTH_MAX or self.made > ARGUMENTS_VALUES_MAX:
            return None
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            return self.value(name, {**self._target(ref), **rest}, depth + 1)
        for key in ("default", "const"):
            if key in schema:
                return schema[key]
        for key in ("enum", "examples"):
            if isinstance(schema.get(key), list) and schema[key]:
                return schema[key][0]
        for key in ("anyOf", "oneOf", "allOf"):
            found = schema.get(key)
            options = [o for o in found if isinstance(o, dict) and o.get("type") != "null"] if isinstance(found, list) else []
            if options:
                return self.value(name, options[0], depth + 1)
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), None)
        if kind in ("integer", "number"):
            least = _number(schema.get("minimum"))
            least = 1 if least is None else least
            return math.ceil(least) if kind == "integer" else float(least)
        if kind == "boolean":
            return False
        if kind == "array":
            items = schema.get("items")
            count = schema.get("minItems")
            count = count if isinstance(count, int) and not isinstance(count, bool) else 0
            made: list[Any] = []
            while len(made) < count and self.made < ARGUMENTS_VALUES_MAX:
                made.append(self.value(name, items if isinstance(items, dict) else {}, depth + 1))
            return made
        if kind == "object" or "properties" in schema:
            properties = schema.get("properties")
            properties = properties if isinstance(properties, dict) else {}
            required = schema.get("required")
            keys = [key for key in required if isinstance(key, str)] if isinstance(required, list) else []
            return {key: self.value(key, properties[key] if isinstance(properties.get(key), dict) else {}, depth + 1)
                    for key in keys}
        if schema.get("format") == "uri" or name.lower().endswith(("url", "uri", "link")):
            found = _URL.search(self.user_text)
            return found.group(0).rstrip(".,;:!?") if found else "https://example.org/"
        return self.user_text or name


def _arguments(tool: _Tool, user_text: str) -> dict[str, Any]:
    if tool.schema is None:
        return dict(ANTHROPIC_MEMORY_VIEW)
    made = _Maker(tool.schema, user_text).value(tool.name, {"type": "object", **tool.schema})
    return made if isinstance(made, dict) else {}


def _answer(request: _Request) -> str:
    if not request.results:
        return f"(stand-in, no model) You asked: {request.user_text[:RESULT_CHARS]}"
    parts = []
    for name, text in request.results:
        text = " ".join(text.split())
        parts.append(f"{name} returned: {text[:RESULT_CHARS]}{'…' if len(text) > RESULT_CHARS else ''}")
    return "(stand-in, no model) " + " | ".join(parts)


def stand_in_reply(path: str, body: dict[str, Any]) -> ScriptedReply:
    """The stand-in model's answer to one request (module docstring): each offered tool called once
    when the user has the turn, else a text answer that repeats the start of each tool result.

    Args:
        path: the route, ``/v1/chat/completions``, ``/v1/responses`` or ``/v1/messages``.
        body: the request's JSON body in that API's shape.

    Returns:
        The reply for :class:`~agent_memory.testing.FakeLLMServer` to render in that API's shape.
    """
    reader = _READERS.get(path)
    if reader is None:
        return ScriptedReply(content=f"the stand-in serves {', '.join(_READERS)}, not {path}", status=404)
    request = reader(body)
    if request.results is None and request.tools:
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode("utf-8")).hexdigest()[:8]
        prefix = "toolu" if path == "/v1/messages" else "call"
        return ScriptedReply(tool_calls=tuple(
            ScriptedToolCall(tool.name, json.dumps(_arguments(tool, request.user_text)), id=f"{prefix}_{tool.name}_{digest}")
            for tool in request.tools))
    return ScriptedReply(content=_answer(request))


def stand_in_server(
    port: int | None = None,
    *,
    record: bool = False,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    read_timeout_s: float = DEFAULT_READ_TIMEOUT_S,
) -> FakeLLMServer:
    """A :class:`~agent_memory.testing.FakeLLMServer` answering every request with
    :func:`stand_in_reply` (nothing queued), not yet started; ``port`` ``None``: a free one.
    Use it as ``with stand_in_server() as server:`` and point clients at ``server.base_url``
    (OpenAI) and ``server.anthropic_base_url`` (Anthropic). A bad request gets a 4xx error in its
    API's error shape (see :class:`~agent_memory.testing.FakeLLMServer`).

    Args:
        port: TCP port; ``None``: a free one.
        record: keep each request in ``server.requests`` (for a test that reads what was sent);
            ``False``: keep none, so that memory stays flat however long it serves (the command).
        max_body_bytes: the largest request body read, in bytes; a larger one is answered 413.
        read_timeout_s: the longest wait for a connection's next bytes, in seconds.

    Raises:
        ConfigurationError: if ``max_body_bytes`` is below 1 or ``read_timeout_s`` not above 0.
        OSError: if ``port`` is taken.
    """
    return FakeLLMServer(port=port, unscripted=stand_in_reply, record=record, max_body_bytes=max_body_bytes,
                         read_timeout_s=read_timeout_s)


def main(argv: list[str] | None = None) -> int:
    """``python -m agent_memory.testing.stand_in [--port N] [--max-body-bytes N] [--read-timeout S]``:
    serve the stand-in on 127.0.0.1 until interrupted, keeping no request; prints the two base URLs
    to export first."""
    parser = argparse.ArgumentParser(prog="python -m agent_memory.testing.stand_in", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=STAND_IN_PORT, help=f"TCP port (default {STAND_IN_PORT})")
    parser.add_argument("--max-body-bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                        help=f"largest request body read; a larger one gets 413 (default {DEFAULT_MAX_BODY_BYTES})")
    parser.add_argument("--read-timeout", type=float, default=DEFAULT_READ_TIMEOUT_S, metavar="SECONDS",
                        help="longest wait for a connection's next bytes; a body cut short then gets 400 "
                             f"(default {DEFAULT_READ_TIMEOUT_S:g})")
    args = parser.parse_args(argv)
    try:
        server = stand_in_server(args.port, max_body_bytes=args.max_body_bytes,
                                 read_timeout_s=args.read_timeout).start()
    except ConfigurationError as exc:
        parser.error(str(exc))
    except OSError as exc:
        print(f"port {args.port} is taken ({exc}); pass --port", file=sys.stderr)
        return 1
    print(f"export OPENAI_BASE_URL={server.base_url} OPENAI_API_KEY=none", flush=True)
    print(f"export ANTHROPIC_BASE_URL={server.anthropic_base_url} ANTHROPIC_API_KEY=none", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
