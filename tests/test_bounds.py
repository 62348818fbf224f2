"""The size bounds of items and traces, declared once (agent_memory.models.bounds): every bounded
field of ItemMetadata, FilteredTransform and the trace models refuses a value past its bound with
the same message as before, names the field it sits on, and lets a record read back
(STORED_CONTEXT) keep what was written under other bounds."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, TypeAdapter, ValidationError

from agent_memory import InvalidArgumentError
from agent_memory.limits import MAX_EXTRA_CHARS, MAX_JSON_DEPTH, MAX_SOURCE_CHARS, MAX_TAG_CHARS, MAX_TAGS
from agent_memory.models.bounds import STORED_CONTEXT, bounded_text
from agent_memory.models.items import STORED_CONTEXT as ITEMS_STORED_CONTEXT
from agent_memory.models.items import FilteredTransform, ItemMetadata
from agent_memory.models.traces import (
    MAX_CALL_ID_CHARS,
    MAX_NOTE_CHARS,
    MAX_NOTES,
    MAX_SOURCE_EVENT_CHARS,
    MAX_SUMMARY_CHARS,
    MAX_TOOL_ERROR_CHARS,
    MAX_TOOL_NAME_CHARS,
    MAX_TRACE_CONTENT_CHARS,
    MAX_WINDOW_TURNS,
    EpisodicItem,
    RawTraceItem,
    SemanticItem,
)

RAW = {"turn_id": "turn_0001", "seq": 1, "trace_type": "user", "source_event": "UserMessage"}
EPISODE = {"turn_ids": ["turn_0001"], "summary": "s"}
FACT = {"fact": "the user prefers metric units"}
DEEP: Any = 0
for _ in range(MAX_JSON_DEPTH + 1):
    DEEP = [DEEP]

BASE: dict[type[BaseModel], dict[str, Any]] = {
    ItemMetadata: {}, FilteredTransform: {"column": "c"}, RawTraceItem: RAW, EpisodicItem: EPISODE, SemanticItem: FACT,
}
"""Valid arguments of each model, to which a case adds its one bad field."""

CASES: list[tuple[type[BaseModel], str, Any, str]] = [
    (ItemMetadata, "source", "s" * (MAX_SOURCE_CHARS + 1),
     f"source has {MAX_SOURCE_CHARS + 1:,} characters; at most {MAX_SOURCE_CHARS:,} are allowed"),
    (ItemMetadata, "title", "t" * 2_001, "title has 2,001 characters; at most "),
    (ItemMetadata, "media_type", "m" * 257, "media_type has 257 characters; at most "),
    (ItemMetadata, "extra", {"k": "v" * MAX_EXTRA_CHARS}, "extra (as JSON) has "),
    (ItemMetadata, "extra", {"k": DEEP}, f"extra is nested more than {MAX_JSON_DEPTH} levels deep"),
    (ItemMetadata, "tags", [f"t{n}" for n in range(MAX_TAGS + 1)], f"{MAX_TAGS + 1} tags; at most {MAX_TAGS} are allowed"),
    (ItemMetadata, "tags", ["x" * (MAX_TAG_CHARS + 1)], "a tag has "),
    (FilteredTransform, "value", "v" * 5_000, "value (as JSON) has "),
    (FilteredTransform, "value", DEEP, f"value is nested more than {MAX_JSON_DEPTH} levels deep"),
    (RawTraceItem, "content", "c" * (MAX_TRACE_CONTENT_CHARS + 1),
     f"content has {MAX_TRACE_CONTENT_CHARS + 1:,} characters; at most {MAX_TRACE_CONTENT_CHARS:,} are allowed"),
    (RawTraceItem, "reasoning", "r" * (MAX_TRACE_CONTENT_CHARS + 1), "reasoning has "),
    (RawTraceItem, "source_event", " ", "source_event must not be empty"),
    (RawTraceItem, "source_event", "e" * (MAX_SOURCE_EVENT_CHARS + 1), "source_event has "),
    (RawTraceItem, "tool_name", "n" * (MAX_TOOL_NAME_CHARS + 1), "tool_name has "),
    (RawTraceItem, "tool_call_id", "i" * (MAX_CALL_ID_CHARS + 1), "tool_call_id has "),
    (RawTraceItem, "correlation_id", "i" * (MAX_CALL_ID_CHARS + 1), "correlation_id has "),
    (RawTraceItem, "tool_error", "e" * (MAX_TOOL_ERROR_CHARS + 1), "tool_error has "),
    (RawTraceItem, "tool_args", {"k": DEEP}, f"tool_args is nested more than {MAX_JSON_DEPTH} levels deep"),
    (RawTraceItem, "tool_result", DEEP, f"tool_result is nested more than {MAX_JSON_DEPTH} levels deep"),
    (RawTraceItem, "tags", ["t"] * (MAX_TAGS + 1), f"{MAX_TAGS + 1} tags; at most {MAX_TAGS} are allowed"),
    (RawTraceItem, "tags", ["x" * (MAX_TAG_CHARS + 1)], "an entry of tags has "),
    (EpisodicItem, "summary", "s" * (MAX_SUMMARY_CHARS + 1), "summary has "),
    (EpisodicItem, "decisions", ["d"] * (MAX_NOTES + 1), f"{MAX_NOTES + 1} decisions; at most {MAX_NOTES} are allowed"),
    (EpisodicItem, "next_steps", ["n" * (MAX_NOTE_CHARS + 1)], "an entry of next_steps has "),
    (EpisodicItem, "summarizer", "s" * 65, "summarizer has 65 characters"),
    (EpisodicItem, "fallback_reason", "r" * 1_001, "fallback_reason has 1,001 characters"),
    (EpisodicItem, "turn_ids", ["turn_0001"] * (MAX_WINDOW_TURNS + 1),
     f"{MAX_WINDOW_TURNS + 1:,} turn ids; at most {MAX_WINDOW_TURNS:,} are allowed"),
    (SemanticItem, "source_turn_ids", ["turn_0001"] * (MAX_WINDOW_TURNS + 1), "10,001 turn ids; at most"),
    (SemanticItem, "fact", "\t", "fact must not be blank"),
    (SemanticItem, "tags", ["x" * (MAX_TAG_CHARS + 1)], "an entry of tags has "),
]
"""(model, field, a bad value, the start of the message of the one error it gets)."""
IDS = [f"{model.__name__}.{field}-{n}" for n, (model, field, _, _) in enumerate(CASES)]


@pytest.mark.parametrize(("model", "field", "value", "message"), CASES, ids=IDS)
def test_a_value_past_its_bound_is_refused_with_its_message_on_its_field(
    model: type[BaseModel], field: str, value: Any, message: str
) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        model(**{**BASE[model], field: value})
    cause = caught.value.__cause__
    assert isinstance(cause, ValidationError)
    errors = cause.errors()
    assert len(errors) == 1, errors
    assert errors[0]["msg"].removeprefix("Value error, ").startswith(message), errors[0]["msg"]
    assert errors[0]["loc"] == (field,)  # the whole field, as before: not one entry of a list


SIZE_CASES = [case for case in CASES if not any(word in case[3] for word in ("nested", "blank", "empty"))]


@pytest.mark.parametrize(("model", "field", "value", "message"), SIZE_CASES,
                         ids=[IDS[CASES.index(case)] for case in SIZE_CASES])
def test_a_record_read_back_keeps_what_was_written_under_other_bounds(
    model: type[BaseModel], field: str, value: Any, message: str
) -> None:
    record = TypeAdapter(model).validate_python({**BASE[model], field: value}, context=STORED_CONTEXT)
    kept = getattr(record, field)
    if model is ItemMetadata and field == "tags":  # item tags are normalised, stored or not
        assert kept == tuple(sorted(value))
    else:
        assert kept == (tuple(value) if isinstance(value, list) else value)


def test_stored_lines_still_refuse_bad_unicode_and_bad_shapes() -> None:
    with pytest.raises(ValidationError, match="surrogate"):
        RawTraceItem.model_validate({**RAW, "content": "\ud800"}, context=STORED_CONTEXT)
    with pytest.raises(ValidationError, match="nested more than"):
        RawTraceItem.model_validate({**RAW, "tool_result": DEEP}, context=STORED_CONTEXT)
    with pytest.raises(ValidationError, match="invalid turn id"):
        SemanticItem.model_validate({**FACT, "source_turn_ids": ["turn_x"]}, context=STORED_CONTEXT)
    with pytest.raises(ValidationError, match="invalid window id"):
        SemanticItem.model_validate({**FACT, "window_id": "w"}, context=STORED_CONTEXT)
    # blank text is a bound: a stored blank fact (another writer's) stays readable
    assert SemanticItem.model_validate({**FACT, "fact": " ", "id": "sem_0123456789abcdef"},
                                       context=STORED_CONTEXT).fact == " "


def test_items_and_traces_share_the_one_stored_context() -> None:
    assert ITEMS_STORED_CONTEXT is STORED_CONTEXT


def test_bounded_text_names_the_field_it_sits_on_unless_told() -> None:
    from typing import Annotated

    class Note(BaseModel):
        headline: Annotated[str, bounded_text(3)]
        body: Annotated[str, bounded_text(3, "the body", blank="must say something")] | None = None

    assert Note(headline="abc", body=None).body is None
    with pytest.raises(ValidationError, match="headline has 4 characters; at most 3 are allowed"):
        Note(headline="abcd")
    with pytest.raises(ValidationError, match="the body has 4 characters"):
        Note(headline="a", body="abcd")
    with pytest.raises(ValidationError, match="the body must say something"):
        Note(headline="a", body="  ")
    assert Note.model_validate({"headline": "abcd", "body": " "}, context=STORED_CONTEXT).headline == "abcd"
