"""Trace models (AutoByteus' RAW_TRACE / EPISODIC / SEMANTIC records,
github.com/AutoByteus/autobyteus): its documented JSONL lines, derived ids, bounds, previews, tool
interactions, turn ids."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from agent_memory import InvalidArgumentError
from agent_memory.models.items import STORED_CONTEXT
from agent_memory.models.tool_interactions import build_tool_interactions
from agent_memory.models.traces import (
    EPISODIC_ADAPTER,
    MAX_FACT_CHARS,
    MAX_MEDIA_URLS,
    MAX_NOTES,
    MAX_SUMMARY_CHARS,
    MAX_TOOL_ARGS_CHARS,
    MAX_TOOL_ERROR_CHARS,
    MAX_TOOL_RESULT_PREVIEW_CHARS,
    MAX_TRACE_CONTENT_CHARS,
    RAW_TRACE_ADAPTER,
    SEMANTIC_ADAPTER,
    EpisodicItem,
    RawTraceItem,
    SemanticItem,
    TraceMedia,
    format_turn_id,
    raw_trace_id,
    semantic_id_for,
    tool_result_preview,
    trace_sort_key,
    turn_number,
    window_id_for,
)

# AutoByteus' documented example lines (its RAW_TRACE, EPISODIC and SEMANTIC schemas), byte for byte.
SEED_RAW_LINES = [
    b'{"id":"rt_001","ts":1738100000.12,"turn_id":"turn_0001","seq":1,"trace_type":"user","content":"Please refactor the parser.","source_event":"LLMUserMessageReadyEvent","media":{"images":[],"audio":[],"video":[]},"tags":["processed"]}',  # noqa: E501
    b'{"id":"rt_002","ts":1738100002.45,"turn_id":"turn_0001","seq":2,"trace_type":"tool_call","content":"","source_event":"PendingToolInvocationEvent","tool_name":"list_directory","tool_args":{"path":"src"}}',  # noqa: E501
    b'{"id":"rt_003","ts":1738100003.11,"turn_id":"turn_0001","seq":3,"trace_type":"tool_result","content":"","source_event":"ToolResultEvent","tool_name":"list_directory","tool_result":["app.ts","parser.ts"]}',  # noqa: E501
    b'{"id":"rt_004","ts":1738100005.9,"turn_id":"turn_0001","seq":4,"trace_type":"assistant","content":"I will refactor the parser next.","source_event":"LLMCompleteResponseReceivedEvent","tags":["final"]}',  # noqa: E501
]
SEED_EPISODIC = {
    "id": "ep_0001", "ts": 1738100500.0, "turn_ids": ["turn_0001", "turn_0002"], "summary": "...",
    "tags": ["project", "decision"], "salience": 0.7,
}
SEED_SEMANTIC = {
    "id": "sem_0001", "ts": 1738100501.0, "fact": "Use vitest with pnpm exec vitest --run.",
    "tags": ["preference", "testing"], "confidence": 0.8, "salience": 0.9,
}


def user(turn: str = "turn_0001", seq: int = 1, content: str = "hi", **kw: Any) -> RawTraceItem:
    return RawTraceItem(
        turn_id=turn, seq=seq, trace_type="user", content=content, source_event="LLMUserMessageReadyEvent", **kw
    )


def call(turn: str, seq: int, call_id: str, name: str = "search", args: dict | None = None) -> RawTraceItem:
    return RawTraceItem(
        turn_id=turn, seq=seq, trace_type="tool_call", source_event="PendingToolInvocationEvent",
        tool_name=name, tool_call_id=call_id, tool_args=args if args is not None else {"q": call_id},
    )


def result(
    turn: str, seq: int, call_id: str, value: Any = "ok", *, error: str | None = None, ref: str | None = None
) -> RawTraceItem:
    return RawTraceItem(
        turn_id=turn, seq=seq, trace_type="tool_result", source_event="ToolResultEvent",
        tool_name="search", tool_call_id=call_id, tool_result=value, tool_error=error, tool_result_ref=ref,
    )


# -- AutoByteus' documented lines ------------------------------------------------------------


@pytest.mark.parametrize("line", SEED_RAW_LINES)
def test_seed_raw_lines_read_and_write_back_byte_for_byte(line: bytes) -> None:
    item = RAW_TRACE_ADAPTER.validate_json(line, context=STORED_CONTEXT)
    assert RAW_TRACE_ADAPTER.dump_json(item) == line


def test_seed_episodic_and_semantic_lines_keep_their_fields() -> None:
    episode = EPISODIC_ADAPTER.validate_json(json.dumps(SEED_EPISODIC), context=STORED_CONTEXT)
    fact = SEMANTIC_ADAPTER.validate_json(json.dumps(SEED_SEMANTIC), context=STORED_CONTEXT)
    assert episode.id == "ep_0001" and episode.turn_ids == ("turn_0001", "turn_0002") and episode.salience == 0.7
    dumped = json.loads(EPISODIC_ADAPTER.dump_json(episode))
    assert {k: dumped[k] for k in SEED_EPISODIC} == SEED_EPISODIC
    assert dumped["window_id"] == window_id_for(["turn_0001", "turn_0002"])  # derived, added
    assert json.loads(SEMANTIC_ADAPTER.dump_json(fact)) == SEED_SEMANTIC


def test_a_new_user_trace_is_the_seed_line_with_a_derived_id() -> None:
    item = user(content="Please refactor the parser.", ts=1738100000.12, media=TraceMedia(), tags=("processed",))
    expected = SEED_RAW_LINES[0].replace(b'"rt_001"', b'"rt_0001_0001"')
    assert RAW_TRACE_ADAPTER.dump_json(item) == expected


def test_unset_optional_fields_are_absent_and_the_line_round_trips() -> None:
    minimal = user()
    assert list(json.loads(RAW_TRACE_ADAPTER.dump_json(minimal))) == [
        "id", "ts", "turn_id", "seq", "trace_type", "content", "source_event",
    ]
    full = RawTraceItem(
        turn_id="turn_0012", seq=7, trace_type="tool_result", content="", source_event="ToolResultEvent",
        media=TraceMedia(images=("https://ex.org/a.png",)), tool_name="fetch", tool_call_id="call_1",
        tool_args={"url": "https://ex.org", "n": [1, 2.5, None, True]}, tool_result={"status": 200},
        tool_error=None, correlation_id="req-9", tags=("web",), tool_result_ref="mem_0123456789ab", reasoning="because",
    )
    line = RAW_TRACE_ADAPTER.dump_json(full)
    assert "tool_error" not in json.loads(line)
    back = RAW_TRACE_ADAPTER.validate_json(line, context=STORED_CONTEXT)
    assert back == full and RAW_TRACE_ADAPTER.dump_json(back) == line


def test_fields_of_other_writers_are_kept_on_read_but_refused_on_construction() -> None:
    line = SEED_RAW_LINES[3][:-1] + b',"x_future":{"k":1}}'
    item = RAW_TRACE_ADAPTER.validate_json(line, context=STORED_CONTEXT)
    assert RAW_TRACE_ADAPTER.dump_json(item) == line
    with pytest.raises(InvalidArgumentError, match="unknown field"):
        user(x_future=1)
    with pytest.raises(ValidationError):  # a line of a new record with a typo is not silently taken
        RAW_TRACE_ADAPTER.validate_json(line)


# -- ids --------------------------------------------------------------------------------------


def test_turn_ids_are_padded_to_four_digits_and_sort_by_number() -> None:
    assert [format_turn_id(n) for n in (1, 12, 9999, 10000, 123456)] == [
        "turn_0001", "turn_0012", "turn_9999", "turn_10000", "turn_123456",
    ]
    ids = ["turn_10000", "turn_9999", "turn_0002"]
    assert sorted(ids, key=turn_number) == ["turn_0002", "turn_9999", "turn_10000"]
    for bad in ("turn_1", "turn_00001", "turn_01234", "Turn_0001", "turn_0001 ", "t1", ""):
        with pytest.raises(ValueError, match="invalid turn id"):
            turn_number(bad)
        with pytest.raises(InvalidArgumentError):
            user(turn=bad)


def test_raw_ids_come_from_turn_and_seq_and_never_collide() -> None:
    assert user("turn_0001", 3).id == "rt_0001_0003" == raw_trace_id("turn_0001", 3)
    assert user("turn_10000", 12345).id == "rt_10000_12345"
    ids = {raw_trace_id(format_turn_id(t), s) for t in (1, 10, 100, 1000, 10000, 100000) for s in (1, 10, 100, 10000)}
    assert len(ids) == 24
    assert user(id="rt_1738100000123").id == "rt_1738100000123"  # AutoByteus' own ids are accepted
    with pytest.raises(InvalidArgumentError, match="invalid id"):
        user(id="mem_0123456789ab")


def test_window_and_episode_ids_are_deterministic() -> None:
    a = EpisodicItem(turn_ids=("turn_0001", "turn_0002", "turn_0003"), summary="s")
    b = EpisodicItem(turn_ids=("turn_0003", "turn_0001", "turn_0002", "turn_0002"), summary="other")
    c = EpisodicItem(turn_ids=("turn_0001", "turn_0003"), summary="s")
    assert a.window_id == b.window_id and a.id == b.id
    assert a.window_id.startswith("win_0001_0003_") and a.id == "ep_" + a.window_id[4:]
    assert c.window_id != a.window_id and c.id != a.id
    with pytest.raises(InvalidArgumentError):
        EpisodicItem(turn_ids=(), summary="s")


def test_fact_ids_ignore_case_and_spacing() -> None:
    assert SemanticItem(fact="Use pnpm.").id == SemanticItem(fact="  use   PNPM. ").id == semantic_id_for("USE pnpm.")
    assert SemanticItem(fact="Use npm.").id != SemanticItem(fact="Use pnpm.").id


def test_episode_and_fact_lines_leave_out_empty_kernel_fields() -> None:
    bare = json.loads(EPISODIC_ADAPTER.dump_json(EpisodicItem(ts=1.0, turn_ids=("turn_0001",), summary="s")))
    assert set(bare) == {"id", "ts", "turn_ids", "summary", "tags", "salience", "window_id"}
    rich = EpisodicItem(
        turn_ids=("turn_0001",), summary="s", decisions=("use sqlite",), done=("wrote parser",),
        summarizer="extractive", fallback_reason="llm timed out after 30 s",
    )
    dumped = json.loads(EPISODIC_ADAPTER.dump_json(rich))
    assert dumped["decisions"] == ["use sqlite"] and dumped["done"] == ["wrote parser"]
    assert dumped["summarizer"] == "extractive" and "constraints" not in dumped
    fact = json.loads(SEMANTIC_ADAPTER.dump_json(SemanticItem(fact="f", pinned=True, source_turn_ids=("turn_0002",))))
    assert fact["pinned"] is True and fact["source_turn_ids"] == ["turn_0002"]
    assert "pinned" not in json.loads(SEMANTIC_ADAPTER.dump_json(SemanticItem(fact="f")))


# -- bounds -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    name: str
    model: type
    fields: dict[str, Any]
    match: str


BASE = {
    RawTraceItem: {"turn_id": "turn_0001", "seq": 1, "trace_type": "user", "source_event": "E"},
    EpisodicItem: {"turn_ids": ("turn_0001",), "summary": "s"},
    SemanticItem: {"fact": "f"},
}

BAD_VALUES = [
    Bad("content too long", RawTraceItem, {"content": "x" * (MAX_TRACE_CONTENT_CHARS + 1)}, "content has"),
    Bad("reasoning too long", RawTraceItem, {"reasoning": "x" * (MAX_TRACE_CONTENT_CHARS + 1)}, "reasoning has"),
    Bad("a 1 MB tool result", RawTraceItem, {"tool_result": "x" * 1_000_000}, "tool_result has"),
    Bad("big JSON tool result", RawTraceItem, {"tool_result": list(range(2_000))}, "tool_result_preview"),
    Bad("tool error too long", RawTraceItem, {"tool_error": "e" * (MAX_TOOL_ERROR_CHARS + 1)}, "tool_error has"),
    Bad("tool args too big", RawTraceItem, {"tool_args": {"a": "x" * MAX_TOOL_ARGS_CHARS}}, "tool_args"),
    Bad("tool args too deep", RawTraceItem, {"tool_args": {"a": json.loads("[" * 150 + "]" * 150)}}, "nested"),
    Bad("tool args not an object", RawTraceItem, {"tool_args": [1, 2]}, "tool_args"),
    Bad("lone surrogate in args", RawTraceItem, {"tool_args": {"k": ["\ud800"]}}, "surrogate"),
    Bad("lone surrogate in content", RawTraceItem, {"content": "a\udfffb"}, "surrogate"),
    Bad("too many tags", RawTraceItem, {"tags": tuple(f"t{i}" for i in range(33))}, "tags"),
    Bad("tag too long", RawTraceItem, {"tags": ("x" * 65,)}, "tags"),
    Bad("too many images", RawTraceItem, {"media": {"images": ["u"] * (MAX_MEDIA_URLS + 1)}}, "images"),
    Bad("inline image", RawTraceItem, {"media": {"images": ["data:image/png;base64," + "A" * 5_000]}}, "images"),
    Bad("tool name too long", RawTraceItem, {"tool_name": "n" * 129}, "tool_name"),
    Bad("call id too long", RawTraceItem, {"tool_call_id": "c" * 257}, "tool_call_id"),
    Bad("ref not a memory id", RawTraceItem, {"tool_result_ref": "../etc/passwd"}, "memory id"),
    Bad("empty source event", RawTraceItem, {"source_event": " "}, "source_event"),
    Bad("seq 0", RawTraceItem, {"seq": 0}, "seq"),
    Bad("ts not finite", RawTraceItem, {"ts": float("inf")}, "ts"),
    Bad("unknown trace type", RawTraceItem, {"trace_type": "system"}, "trace_type"),
    Bad("tool call without id", RawTraceItem, {"trace_type": "tool_call"}, "tool_call_id"),
    Bad("summary too long", EpisodicItem, {"summary": "s" * (MAX_SUMMARY_CHARS + 1)}, "summary"),
    Bad("too many decisions", EpisodicItem, {"decisions": tuple("d" for _ in range(MAX_NOTES + 1))}, "decisions"),
    Bad("salience above 1", EpisodicItem, {"salience": 1.5}, "salience"),
    Bad("bad window id", EpisodicItem, {"window_id": "w 1"}, "window id"),
    Bad("bad turn id in window", EpisodicItem, {"turn_ids": ("turn_1",)}, "turn id"),
    Bad("fact too long", SemanticItem, {"fact": "f" * (MAX_FACT_CHARS + 1)}, "fact"),
    Bad("blank fact", SemanticItem, {"fact": "   "}, "fact"),
    Bad("confidence below 0", SemanticItem, {"confidence": -0.1}, "confidence"),
    Bad("lone surrogate in fact", SemanticItem, {"fact": "\ud83d"}, "surrogate|unicode"),
]


@pytest.mark.parametrize("case", BAD_VALUES, ids=lambda case: case.name)
def test_bad_values_are_refused_with_a_library_error(case: Bad) -> None:
    fields = {**BASE[case.model], **case.fields}
    with pytest.raises(InvalidArgumentError, match=case.match) as info:
        case.model(**fields)
    assert len(str(info.value)) < 2_000  # never the megabyte back in the message


def test_size_bounds_do_not_apply_to_lines_read_back() -> None:
    big = user(content="x" * 10).model_dump(mode="json") | {"content": "x" * (MAX_TRACE_CONTENT_CHARS + 5)}
    item = RAW_TRACE_ADAPTER.validate_json(json.dumps(big), context=STORED_CONTEXT)
    assert len(item.content) == MAX_TRACE_CONTENT_CHARS + 5
    with pytest.raises(ValidationError):  # shapes still apply
        RAW_TRACE_ADAPTER.validate_json(json.dumps(big | {"turn_id": "turn_1"}), context=STORED_CONTEXT)


# -- previews ---------------------------------------------------------------------------------


def test_a_long_text_result_is_cut_to_the_limit_and_says_how_long_it_was() -> None:
    page = "<html>" + "word " * 250_000 + "</html>"  # ~1.25 MB
    preview = tool_result_preview(page)
    assert isinstance(preview, str) and len(preview) == MAX_TOOL_RESULT_PREVIEW_CHARS
    assert preview.startswith("<html>word ") and preview.endswith(f"… [{len(page):,} chars]")
    item = result("turn_0001", 2, "c1", preview, ref="mem_0123456789ab")
    assert len(RAW_TRACE_ADAPTER.dump_json(item)) < MAX_TOOL_RESULT_PREVIEW_CHARS + 400


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, None),
        ("short", "short"),
        (["app.ts", "parser.ts"], ["app.ts", "parser.ts"]),
        ({"rows": (1, 2)}, {"rows": [1, 2]}),
        (b"\x00\x01" * 10, "<20 bytes>"),
        ("bad \ud800 text", "bad \ufffd text"),
        (float("nan"), "nan"),
        (object, "<class 'object'>"),
    ],
)
def test_small_results_keep_their_value_and_odd_ones_become_text(value: Any, expected: Any) -> None:
    assert tool_result_preview(value) == expected


def test_large_or_deep_data_becomes_cut_json_text() -> None:
    rows = [{"id": i, "name": f"row {i}"} for i in range(1_000)]
    preview = tool_result_preview(rows)
    assert isinstance(preview, str) and len(preview) == MAX_TOOL_RESULT_PREVIEW_CHARS
    assert preview.startswith('[{"id":0,"name":"row 0"}')
    deep: Any = []
    for _ in range(500):
        deep = [deep]
    assert len(tool_result_preview(deep)) <= MAX_TOOL_RESULT_PREVIEW_CHARS
    assert tool_result_preview("x" * 50, 10) == "x" * 10  # a limit smaller than the marker: plain cut
    for value in (rows, deep, "y" * 5_000):
        result("turn_0001", 2, "c1", tool_result_preview(value))  # every preview is a valid tool_result


# -- tool interactions ------------------------------------------------------------------------


def test_tool_interactions_pair_calls_and_results_by_call_id() -> None:
    traces = [
        user("turn_0001", 1),
        call("turn_0001", 2, "a", args={"q": "lighthouse"}),
        call("turn_0001", 3, "b"),  # parallel call, answered with an error
        call("turn_0001", 4, "c"),  # never answered
        result("turn_0001", 5, "a", ["hit"], ref="mem_0123456789ab"),
        result("turn_0001", 6, "b", None, error="HTTP 500"),
        result("turn_0002", 2, "d", "late"),  # its call was archived
        RawTraceItem(turn_id="turn_0002", seq=3, trace_type="assistant", content="done", source_event="E"),
    ]
    got = {i.tool_call_id: i for i in build_tool_interactions(traces)}
    assert list(got) == ["a", "b", "c", "d"]
    a, b, c, d = got.values()
    assert (a.status, a.arguments, a.result, a.result_ref, a.turn_id, a.seq) == (
        "SUCCESS", {"q": "lighthouse"}, ["hit"], "mem_0123456789ab", "turn_0001", 2,
    )
    assert (b.status, b.error, b.result) == ("ERROR", "HTTP 500", None)
    assert (c.status, c.result, c.error) == ("PENDING", None, None)
    assert (d.status, d.arguments, d.turn_id, d.tool_name) == ("SUCCESS", None, "turn_0002", "search")


def test_a_result_after_the_next_user_message_keeps_its_calls_turn() -> None:
    traces = [call("turn_0004", 2, "x"), user("turn_0005", 1), result("turn_0004", 3, "x", "ok")]
    (interaction,) = build_tool_interactions(sorted(traces, key=trace_sort_key))
    assert (interaction.turn_id, interaction.status) == ("turn_0004", "SUCCESS")
    assert [t.id for t in sorted(traces, key=trace_sort_key)] == ["rt_0004_0002", "rt_0004_0003", "rt_0005_0001"]


def test_models_are_frozen() -> None:
    item = user()
    with pytest.raises(ValidationError):
        item.content = "changed"  # type: ignore[misc]
