"""Message and ToolCall: the validation table, arguments raw and parsed, JSON round trips, and the
constructors existing code uses."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from agent_memory import InvalidArgumentError, Message, ToolCall
from agent_memory.models.messages import MAX_KEPT_ARGUMENTS_CHARS, Media, parse_tool_arguments

CALL = ToolCall(id="call_1", name="ls", arguments='{"path": "src"}')


@dataclass(frozen=True)
class Case:
    name: str
    fields: dict[str, Any]
    error: str | None = None
    """A fragment of the error message; ``None``: the message is valid."""
    extra: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case("plain user", {"role": "user", "content": "hi"}),
    Case("system", {"role": "system", "content": "Be brief."}),
    Case("assistant calling tools only", {"role": "assistant", "tool_calls": (CALL,)}),
    Case("assistant with reasoning", {"role": "assistant", "content": "ok", "reasoning": "because"}),
    Case("tool result", {"role": "tool", "tool_call_id": "call_1", "content": "a.py", "name": "ls"}),
    Case("tool result by reference", {"role": "tool", "tool_call_id": "call_1", "tool_result_ref": "mem_0123456789ab"}),
    Case("tool error", {"role": "tool", "tool_call_id": "call_1", "content": "no such dir", "is_error": True}),
    Case("user image", {"role": "user", "content": "see", "media": {"images": ["https://x.org/a.png"]}}),
    Case("tool image",
         {"role": "tool", "tool_call_id": "c", "content": "", "media": Media(images=("data:image/png;base64,AA",))}),
    Case("bookkeeping",
         {"role": "user", "content": "x", "id": "rt_1", "ts": 1738100000.12, "turn_id": "turn_0001", "seq": 1}),
    Case("long turn number", {"role": "user", "content": "x", "turn_id": "turn_123456"}),
    Case("tool without call id", {"role": "tool", "content": "a.py"}, "tool_call_id of the call it answers"),
    Case("tool with empty call id", {"role": "tool", "tool_call_id": "", "content": "a.py"}, "tool_call_id"),
    Case("tool without result", {"role": "tool", "tool_call_id": "c"}, "content or tool_result_ref"),
    Case("tool calls on a user message", {"role": "user", "content": "x", "tool_calls": (CALL,)}, "tool_calls belong"),
    Case("tool calls on a tool message", {"role": "tool", "tool_call_id": "c", "content": "", "tool_calls": (CALL,)},
         "tool_calls belong"),
    Case("duplicate call ids", {"role": "assistant", "tool_calls": (CALL, CALL.model_copy(update={"name": "cat"}))},
         "appears twice"),
    Case("call id on an assistant", {"role": "assistant", "content": "x", "tool_call_id": "c"}, "tool_call_id belongs"),
    Case("ref on a user message", {"role": "user", "content": "x", "tool_result_ref": "mem_1"},
         "tool_result_ref belongs"),
    Case("error flag on assistant", {"role": "assistant", "content": "x", "is_error": True}, "is_error belongs"),
    Case("reasoning on a user message", {"role": "user", "content": "x", "reasoning": "r"}, "reasoning belongs"),
    Case("image on assistant", {"role": "assistant", "content": "x", "media": {"images": ["https://x/a.png"]}},
         "media belongs"),
    Case("image on system", {"role": "system", "content": "x", "media": {"images": ["https://x/a.png"]}},
         "media belongs"),
    Case("file URL", {"role": "user", "content": "x", "media": {"images": ["file:///etc/passwd"]}}, "must start with"),
    Case("bad turn id", {"role": "user", "content": "x", "turn_id": "turn_1"}, "turn_0001"),
    Case("turn id with suffix", {"role": "user", "content": "x", "turn_id": "turn_0001x"}, "turn_0001"),
    Case("negative seq", {"role": "user", "content": "x", "seq": -1}, "seq"),
    Case("infinite ts", {"role": "user", "content": "x", "ts": float("inf")}, "finite"),
    Case("negative ts", {"role": "user", "content": "x", "ts": -1.0}, "finite"),
    Case("empty id", {"role": "user", "content": "x", "id": ""}, "id"),
    Case("unknown role", {"role": "function", "content": "x"}, "role"),
    Case("misspelt field", {"role": "user", "contnet": "x"}, "contnet"),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_message_validation_table(case: Case) -> None:
    if case.error is None:
        message = Message(**case.fields)
        for key, value in case.fields.items():
            got = getattr(message, key)
            assert got == (Media(**value) if key == "media" and isinstance(value, dict) else value)
        return
    with pytest.raises(InvalidArgumentError) as caught:
        Message(**case.fields)
    assert case.error in str(caught.value)
    assert isinstance(caught.value, ValueError) and isinstance(caught.value, TypeError)
    assert isinstance(caught.value.__cause__, ValidationError)
    assert caught.value.errors  # pydantic's error list, for programs


def test_defaults_keep_their_old_meaning() -> None:
    message = Message(role="user", content="hi")
    assert message.tool_calls == () and message.tool_call_id is None and message.name is None
    assert message.tool_result_ref is None and message.is_error is False and message.reasoning is None
    assert not message.media and message.media == Media()
    assert (message.id, message.ts, message.turn_id, message.seq) == (None, None, None, None)
    assert Message(role="assistant").content is None
    with pytest.raises(ValidationError):  # frozen
        message.content = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("given", "arguments", "parsed"),
    [
        ({"arguments": '{"path": "src"}'}, '{"path": "src"}', {"path": "src"}),
        ({"arguments": '{"path":"src","n":[1,2.5,null]}'}, '{"path":"src","n":[1,2.5,null]}',
         {"path": "src", "n": [1, 2.5, None]}),
        ({"input": {"path": "sröc"}}, '{"path": "sröc"}', {"path": "sröc"}),
        ({}, "{}", {}),
        ({"arguments": '{"path": "src"'}, '{"path": "src"', None),  # malformed: kept raw
        ({"arguments": "[1, 2]"}, "[1, 2]", None),  # JSON, but not an object
        ({"arguments": ""}, "", None),
        # no arguments a tool can take: kept raw, input None (a trace records nothing unwritable)
        ({"arguments": '{"a": NaN}', "input": {"a": float("nan")}}, '{"a": NaN}', None),
        ({"input": {"a": float("inf")}}, '{"a": Infinity}', None),
        ({"arguments": '{"a": 1e400}'}, '{"a": 1e400}', None),
        ({"arguments": '{"a": ' + "9" * 5_001 + "}"}, '{"a": ' + "9" * 5_001 + "}", None),
        ({"arguments": '{"q": "\\ud800"}'}, '{"q": "\\ud800"}', None),
        # a lone surrogate itself (from a provider's JSON, or Anthropic's input) is kept as its escape
        ({"arguments": '{"q": "\ud800"}'}, '{"q": "\\ud800"}', None),
        ({"input": {"q": "a\udfff"}}, '{"q": "a\\udfff"}', None),
        ({"arguments": '{"path": "src"}', "input": None}, '{"path": "src"}', {"path": "src"}),
    ],
)
def test_tool_call_arguments_raw_and_parsed(given: dict[str, Any], arguments: str, parsed: Any) -> None:
    call = ToolCall(id="c", name="ls", **given)
    assert call.arguments == arguments
    assert call.input == parsed
    assert call.model_dump_json().encode("utf-8")  # every call can be written


def test_tool_call_keeps_valid_unicode_in_its_id_and_name() -> None:
    call = ToolCall(id="call_\ud800", name="look\udfffup")
    assert (call.id, call.name) == ("call_\\ud800", "look\\udfffup")


def test_a_refused_call_is_kept_cut() -> None:
    runaway = ToolCall(id="c", name="query_memory", arguments="[" * 400_000)
    kept = runaway.kept()
    assert len(kept.arguments) == MAX_KEPT_ARGUMENTS_CHARS and kept.arguments.endswith("… [400,000 chars]")
    assert (kept.id, kept.name, kept.input) == ("c", "query_memory", None)
    fine = ToolCall(id="c", name="store_memory", input={"content": "x" * 5_000})
    assert fine.kept() is fine and CALL.kept() is CALL  # readable arguments are kept whole
    short = ToolCall(id="c", name="ls", arguments='{"a": NaN}')
    assert short.kept() is short


def test_tool_call_refuses_disagreeing_or_misplaced_arguments() -> None:
    with pytest.raises(InvalidArgumentError, match="disagree"):
        ToolCall(id="c", name="ls", arguments='{"path": "a"}', input={"path": "b"})
    with pytest.raises(InvalidArgumentError, match="raw JSON string"):
        ToolCall(id="c", name="ls", arguments={"path": "a"})  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="JSON object"):
        ToolCall(id="c", name="ls", input=["a"])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="id"):
        ToolCall(id="", name="ls")
    with pytest.raises(ValidationError):
        CALL.arguments = "{}"  # type: ignore[misc]


def test_parse_tool_arguments_never_raises() -> None:
    assert parse_tool_arguments('{"a": {"b": 1}}') == {"a": {"b": 1}}
    for bad in ("", "{", "null", "3", '"x"', "[" * 100_000, '{"a":' * 150 + "1" + "}" * 150):
        assert parse_tool_arguments(bad) is None


def test_tool_calls_stay_hashable_and_equal_by_value() -> None:
    compact = ToolCall(id="call_1", name="ls", arguments='{"path":"src"}')
    assert compact.input == CALL.input and compact != CALL  # the raw spelling is part of the call
    assert ToolCall(id="call_1", name="ls", arguments='{"path": "src"}') == CALL
    assert len({CALL, ToolCall(id="call_1", name="ls", arguments='{"path": "src"}')}) == 1
    message = Message(role="assistant", tool_calls=(CALL,))
    assert hash(message) == hash(Message(role="assistant", tool_calls=(CALL,)))


def test_json_round_trip_keeps_every_field() -> None:
    messages = [
        Message(role="system", content="Be brief."),
        Message(role="user", content="see", media={"images": ["https://x.org/a.png"]}, id="rt_1", ts=1.5,
                turn_id="turn_0001", seq=1),
        Message(role="assistant", content=None, reasoning="think", turn_id="turn_0001", seq=2,
                tool_calls=(CALL, ToolCall(id="call_2", name="cat", arguments="{oops"))),
        Message(role="tool", tool_call_id="call_1", name="ls", tool_result_ref="mem_0123456789ab", turn_id="turn_0001"),
        Message(role="tool", tool_call_id="call_2", name="cat", content="bad arguments", is_error=True),
    ]
    adapter = TypeAdapter(list[Message])
    text = adapter.dump_json(messages)
    assert adapter.validate_json(text) == messages
    for message in messages:
        assert Message.model_validate_json(message.model_dump_json()) == message
    stored = json.loads(text)
    assert stored[2]["tool_calls"][1] == {"id": "call_2", "name": "cat", "arguments": "{oops", "input": None}
    assert stored[1]["media"] == {"images": ["https://x.org/a.png"], "audio": [], "video": []}


def test_existing_constructors_still_work() -> None:
    history = [
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=(ToolCall(id="c0", name="tool_0"),)),
        Message(role="tool", tool_call_id="c0", name="tool_0", tool_result_ref="mem_0123456789ab"),
        Message(role="assistant", content="x",
                tool_calls=(ToolCall(id="c1", name="t", arguments=json.dumps({"q": 1})),)),
        Message(role="tool", content="text", tool_call_id="c1", name="t"),
    ]
    assert history[1].tool_calls[0].arguments == "{}" and history[1].tool_calls[0].input == {}
    assert history[3].tool_calls[0].input == {"q": 1}
    resolved = history[2].model_copy(update={"content": "the full result"})  # what ContextBuilder does
    assert resolved.content == "the full result" and resolved.tool_result_ref == "mem_0123456789ab"
