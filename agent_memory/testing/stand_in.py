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
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
import time
from dataclasses import dataclass
from typing import Any

from agent_memory.testing.fake_llm import FakeLLMServer, ScriptedReply, ScriptedToolCall

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


def _value(name: str, schema: dict[str, Any], root: dict[str, Any], user_text: str, depth: int = 0) -> Any:
    """A value that fits ``schema`` (a JSON Schema), made without a model: the schema's default,
    first enum value, const or first example if it has one; else, by type, for a string the first
    URL of the user's message (or ``https://example.org/``) when the parameter looks like an address
    and the user's message otherwise; the minimum (or 1) for numbers; ``False``; the schema's
    minimum count of items; an object of its required properties."""
    ref = schema.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/") and depth < 8:
        target: Any = root
        for part in ref[2:].split("/"):
            target = target.get(part, {}) if isinstance(target, dict) else {}
        return _value(name, {**target, **{k: v for k, v in schema.items() if k != "$ref"}}, root, user_text, depth + 1)
    for key in ("default", "const"):
        if key in schema:
            return schema[key]
    for key in ("enum", "examples"):
        if schema.get(key):
            return schema[key][0]
    for key in ("anyOf", "oneOf", "allOf"):
        options = [o for o in schema.get(key) or [] if isinstance(o, dict) and o.get("type") != "null"]
        if options:
            return _value(name, options[0], root, user_text, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if kind == "integer":
        return int(schema.get("minimum", 1))
    if kind == "number":
        return float(schema.get("minimum", 1))
    if kind == "boolean":
        return False
    if kind == "array":
        items = schema.get("items")
        item: dict[str, Any] = items if isinstance(items, dict) else {}
        return [_value(name, item, root, user_text, depth + 1) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties") or {}
        return {key: _value(key, properties.get(key) or {}, root, user_text, depth + 1)
                for key in schema.get("required") or []}
    if schema.get("format") == "uri" or name.lower().endswith(("url", "uri", "link")):
        found = _URL.search(user_text)
        return found.group(0).rstrip(".,;:!?") if found else "https://example.org/"
    return user_text or name


def _arguments(tool: _Tool, user_text: str) -> dict[str, Any]:
    if tool.schema is None:
        return dict(ANTHROPIC_MEMORY_VIEW)
    made = _value(tool.name, {"type": "object", **tool.schema}, tool.schema, user_text)
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


def stand_in_server(port: int | None = None) -> FakeLLMServer:
    """A :class:`~agent_memory.testing.FakeLLMServer` answering every request with
    :func:`stand_in_reply` (nothing queued), not yet started; ``port`` ``None``: a free one.
    Use it as ``with stand_in_server() as server:`` and point clients at ``server.base_url``
    (OpenAI) and ``server.anthropic_base_url`` (Anthropic).

    Raises:
        OSError: if ``port`` is taken.
    """
    return FakeLLMServer(port=port, unscripted=stand_in_reply)


def main(argv: list[str] | None = None) -> int:
    """``python -m agent_memory.testing.stand_in [--port N]``: serve the stand-in on 127.0.0.1
    until interrupted; prints the two base URLs to export first."""
    parser = argparse.ArgumentParser(prog="python -m agent_memory.testing.stand_in", description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, default=STAND_IN_PORT, help=f"TCP port (default {STAND_IN_PORT})")
    args = parser.parse_args(argv)
    try:
        server = stand_in_server(args.port).start()
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
