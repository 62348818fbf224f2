"""The memory actions as tools: schemas, the store → query → retrieve flow through dispatch, every
error a model can cause, paging of a 1 MB text within max_tokens, and query filters.

Real components throughout: a real AgentMemory with the real embedding model and real Chroma. The
core flows use the ``memory`` fixture (embedded Chroma and a Chroma server); the rest use
``embedded_memory``, or a memory that never touches the index, to stay fast.
"""

from __future__ import annotations

import ast
import asyncio
import json
import random
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaValidationError

import actions
from actions import (
    MemoryToolkit,
    QueryMemoryAction,
    RetrieveMemoryAction,
    StoreMemoryAction,
    ToolCallError,
    ToolResult,
    default_actions,
    format_call,
)
from agent_memory import AgentMemory, ConfigurationError, MemoryConfig
from agent_memory.testing import free_port

ROOT = Path(__file__).resolve().parent.parent
TOOL_NAMES = ["store_memory", "retrieve_memory", "query_memory"]
NEXT_LINE = re.compile(r"^Next page: (\w+)\((.*)\)$")
ARGUMENT_KEY = re.compile(r"\s*(\w+)=")


def parse_call(line: str) -> tuple[str, dict[str, Any]]:
    """Read a ``Next page: name(key=<json>, ...)`` line back into a name and JSON arguments,
    the way a model copies it."""
    match = NEXT_LINE.match(line)
    assert match, f"not a next-page line: {line!r}"
    name, rest = match.group(1), match.group(2)
    decoder = json.JSONDecoder()
    arguments: dict[str, Any] = {}
    pos = 0
    while pos < len(rest):
        key_match = ARGUMENT_KEY.match(rest, pos)
        assert key_match, f"cannot parse arguments at {rest[pos:]!r}"
        value, pos = decoder.raw_decode(rest, key_match.end())
        arguments[key_match.group(1)] = value
        pos = rest.find(",", pos) + 1 if "," in rest[pos:] else len(rest)
    return name, arguments


# -- schemas -----------------------------------------------------------------------------------

@pytest.mark.parametrize("action", default_actions(), ids=lambda action: action.name)
def test_openai_and_anthropic_schemas_are_valid_json_schema(action: Any) -> None:
    openai_tool = action.openai_schema()
    anthropic_tool = action.anthropic_schema()
    assert openai_tool["type"] == "function"
    assert set(openai_tool["function"]) == {"name", "description", "parameters"}
    assert set(anthropic_tool) == {"name", "description", "input_schema"}
    assert openai_tool["function"]["name"] == anthropic_tool["name"] == action.name
    assert openai_tool["function"]["parameters"] == anthropic_tool["input_schema"]
    assert json.loads(json.dumps(openai_tool)) == openai_tool  # plain JSON

    params = anthropic_tool["input_schema"]
    Draft202012Validator.check_schema(params)
    assert params["type"] == "object"
    assert params["additionalProperties"] is False
    assert "$defs" not in json.dumps(params) and "$ref" not in json.dumps(params)
    assert set(params["properties"]) == set(action.Arguments.model_fields)
    for name, prop in params["properties"].items():
        assert prop.get("description"), f"{action.name}.{name} has no description"
        assert "anyOf" not in prop or all(branch.get("type") != "null" for branch in prop["anyOf"])
    # The example in the description is a valid call.
    Draft202012Validator(params).validate(action.example)
    assert format_call(action.name, action.example) in action.description


def test_descriptions_state_use_example_and_limits() -> None:
    retrieve, query = RetrieveMemoryAction.description, QueryMemoryAction.description
    store = StoreMemoryAction.description
    assert "4,000" in retrieve and "16,000" in retrieve and "page=N+1" in retrieve and "raw=true" in retrieve
    for transform in ("full", "excerpt", "first_n", "last_n", "filtered", "summary"):
        assert f'"{transform}"' in retrieve
    assert "at most 20" in query and "since/until" in query
    assert "retrieve_memory" in store and "query_memory" in store
    for description in (retrieve, query, store):
        assert "Example: " in description and "Limits: " in description


@dataclass(frozen=True)
class ArgsCase:
    """Arguments a model might send: the schema and the pydantic model must agree on them."""

    tool: str
    arguments: dict[str, Any]
    valid: bool


ID = "mem_3f9a0c41b2de"
ARGS_CASES = [
    ArgsCase("store_memory", {"content": "note"}, True),
    ArgsCase("store_memory", {"content": "n", "type": "web_content", "source": "https://x.org", "title": "X",
                              "tags": ["a"], "related_to": [ID]}, True),
    ArgsCase("store_memory", {}, False),
    ArgsCase("store_memory", {"content": ""}, False),
    ArgsCase("store_memory", {"content": "n", "type": "webpage"}, False),
    ArgsCase("store_memory", {"content": "n", "tags": "a,b"}, False),
    ArgsCase("retrieve_memory", {"id": ID}, True),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "excerpt", "start_line": 10, "end_line": 40}, True),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "filtered", "keywords": ["x"], "context_lines": 2,
                                 "max_tokens": 2_000, "page": 3}, True),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "filtered", "column": "n", "value": 3}, True),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "last_n", "n": 20, "unit": "tokens", "raw": True}, True),
    ArgsCase("retrieve_memory", {"transform": "full"}, False),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "everything"}, False),
    ArgsCase("retrieve_memory", {"id": ID, "max_tokens": 20_000}, False),
    ArgsCase("retrieve_memory", {"id": ID, "max_tokens": 100}, False),
    ArgsCase("retrieve_memory", {"id": ID, "page": 0}, False),
    ArgsCase("retrieve_memory", {"id": ID, "unit": "words"}, False),
    ArgsCase("retrieve_memory", {"id": ID, "bogus": 1}, False),
    ArgsCase("query_memory", {}, True),
    ArgsCase("query_memory", {"query": "q", "type": "file", "source": "s", "tags": ["t"], "since": "2025-01-01",
                              "until": "2025-02-01T00:00:00Z", "limit": 20}, True),
    ArgsCase("query_memory", {"limit": 21}, False),
    ArgsCase("query_memory", {"limit": 0}, False),
    ArgsCase("query_memory", {"type": "anything"}, False),
]


@pytest.mark.parametrize(
    "case", ARGS_CASES, ids=lambda c: f"{c.tool}-{'ok' if c.valid else 'bad'}-{'-'.join(sorted(c.arguments))}"
)
def test_schema_and_arguments_model_agree(case: ArgsCase) -> None:
    action = next(a for a in default_actions() if a.name == case.tool)
    validator = Draft202012Validator(action.parameters_schema())
    if case.valid:
        validator.validate(case.arguments)
        assert isinstance(action.parse_arguments(json.dumps(case.arguments)), action.Arguments)
    else:
        with pytest.raises(SchemaValidationError):
            validator.validate(case.arguments)
        with pytest.raises(ToolCallError) as err:
            action.parse_arguments(json.dumps(case.arguments))
        assert err.value.code == "invalid_arguments"


def test_toolkit_lists_the_three_tools(embedded_memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(embedded_memory)
    assert toolkit.names == TOOL_NAMES
    assert [tool["function"]["name"] for tool in toolkit.openai_tools()] == TOOL_NAMES
    assert [tool["name"] for tool in toolkit.anthropic_tools()] == TOOL_NAMES
    assert isinstance(toolkit.get("retrieve_memory"), RetrieveMemoryAction)
    assert toolkit.get("nope") is None
    with pytest.raises(ValueError, match="unique"):
        MemoryToolkit(embedded_memory, [StoreMemoryAction(), StoreMemoryAction()])


def test_public_names_and_import_direction() -> None:
    exported = list(actions.__all__)
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), not n[0].isupper(), n))
    assert all(hasattr(actions, name) for name in exported)
    for path in (ROOT / "agent_memory").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            assert not any(n == "actions" or n.startswith("actions.") for n in names), f"{path} imports actions"


# -- the core flow, on both Chroma backends -----------------------------------------------------

NOTES = {
    "rivers": ("The Danube flows through ten countries, more than any other river in the world. "
               "It rises in the Black Forest and empties into the Black Sea.", ["geo", "rivers"]),
    "kernel": ("The Linux kernel scheduler (CFS) picks the task with the smallest virtual runtime, "
               "kept in a red-black tree.", ["linux"]),
    "bread": ("Sourdough bread rises through wild yeast and lactic acid bacteria; a starter is fed "
              "flour and water every day.", ["cooking"]),
}


def test_store_query_retrieve_through_dispatch(memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(memory)
    ids = {}
    for key, (text, tags) in NOTES.items():
        result = toolkit.dispatch("store_memory", json.dumps({"content": text, "title": key.title(), "tags": tags}))
        assert result.ok and result.error is None
        ids[key] = result.data["id"]
        assert ids[key] in result.content and f'retrieve_memory(id="{ids[key]}")' in result.content
        assert result.data["tokens"] == memory.tokens.count(text)
        assert f"{result.data['tokens']:,} tokens" in result.content
    assert len(memory) == 3

    found = toolkit.dispatch("query_memory", json.dumps({"query": "Which river crosses the most countries?"}))
    assert found.ok
    hits = found.data["hits"]
    assert hits[0]["id"] == ids["rivers"]
    assert [hit["score"] for hit in hits] == sorted((hit["score"] for hit in hits), reverse=True)
    assert 0 < hits[0]["similarity"] <= 1
    assert hits[0]["excerpt"].startswith("The Danube flows")
    first_line = found.content.splitlines()[1]
    assert first_line.startswith(f"1. {ids['rivers']} · custom · source: agent · \"Rivers\"")
    assert f"similarity {hits[0]['similarity']:.2f}" in first_line
    assert f'retrieve_memory(id="{hits[0]["id"]}")' in found.content

    full = toolkit.dispatch("retrieve_memory", json.dumps({"id": hits[0]["id"]}))
    assert full.ok
    header, body = full.content.split("\n", 1)
    assert header.startswith(f"[{ids['rivers']} · custom · source: agent · \"Rivers\" · transform=full")
    assert body == NOTES["rivers"][0]
    assert "Next page" not in full.content and full.data["next_call"] is None

    part = toolkit.dispatch(
        "retrieve_memory",
        json.dumps({"id": ids["kernel"], "transform": "excerpt", "around": "red-black", "context_chars": 10}),
    )
    assert part.ok and "red-black" in part.content and "Linux kernel" not in part.content


def test_query_filters_type_tags_source_and_time(memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(memory)
    jan = memory.store("Invoice for January: 3 servers", type="database_result", source="billing", tags=["finance"],
                       timestamp=datetime(2025, 1, 10, 12, 0, tzinfo=UTC))
    mar = memory.store("Meeting notes of March about servers", type="custom", source="agent", tags=["finance", "notes"],
                       timestamp=datetime(2025, 3, 5, 23, 30, tzinfo=UTC))
    jun = memory.store("<html><body><p>June news about servers</p></body></html>", type="web_content",
                       source="news.example", media_type="text/html", timestamp=datetime(2025, 6, 20, 8, 0))

    def ids(arguments: dict[str, Any]) -> list[str]:
        result = toolkit.dispatch("query_memory", json.dumps(arguments))
        assert result.ok, result.content
        return [hit["id"] for hit in result.data["hits"]]

    assert ids({}) == [jun, mar, jan]  # no query text: newest first
    assert ids({"type": "web_content"}) == [jun]
    assert ids({"source": "billing"}) == [jan]
    assert ids({"tags": ["finance"]}) == [mar, jan]
    assert ids({"tags": ["FINANCE", "notes"]}) == [mar]
    assert ids({"since": "2025-03-01"}) == [jun, mar]
    assert ids({"until": "2025-03-05"}) == [mar, jan]  # a date alone includes the whole day
    assert ids({"until": "2025-03-05T12:00:00"}) == [jan]  # naive = UTC
    assert ids({"since": "2025-01-11", "until": "2025-06-19"}) == [mar]
    assert ids({"since": "2025-06-20T09:00:00+02:00"}) == [jun]  # 07:00 UTC
    assert ids({"limit": 2}) == [jun, mar]
    assert set(ids({"query": "servers", "tags": ["finance"]})) == {mar, jan}

    listed = toolkit.dispatch("query_memory", json.dumps({"type": "database_result"}))
    assert "newest first (type=\"database_result\")" in listed.content
    assert "2025-01-10 12:00 UTC" in listed.content and "tags: finance" in listed.content

    nothing = toolkit.dispatch("query_memory", json.dumps({"query": "servers", "type": "file"}))
    assert nothing.ok and nothing.error is None and nothing.data["hits"] == []
    assert "No memory items match" in nothing.content and 'type="file"' in nothing.content
    assert "Broaden" in nothing.content


def test_query_on_empty_memory_says_so(embedded_memory: AgentMemory) -> None:
    result = MemoryToolkit(embedded_memory).dispatch("query_memory", '{"query": "anything"}')
    assert result.ok and result.data["hits"] == [] and "memory is empty" in result.content


# -- every mistake a model can make -------------------------------------------------------------

@dataclass(frozen=True)
class ErrorCase:
    """A wrong tool call, the error code it must give and phrases its message must contain."""

    name: str
    tool: str
    arguments: Any
    error: str
    says: tuple[str, ...] = ()


ERROR_CASES = [
    ErrorCase("unknown tool", "forget_memory", {},
              "unknown_tool", ("'forget_memory'", "store_memory, retrieve_memory, query_memory")),
    ErrorCase("invalid json", "retrieve_memory", '{"id": "mem_',
              "invalid_arguments", ("not valid JSON", "Send a JSON object")),
    ErrorCase("json not an object", "retrieve_memory", '["mem_3f9a0c41b2de"]',
              "invalid_arguments", ("must be a JSON object",)),
    ErrorCase("json null", "query_memory", "null",
              "invalid_arguments", ("must be a JSON object",)),
    ErrorCase("no arguments", "retrieve_memory", "",
              "invalid_arguments", ("'id' is missing", "Example: retrieve_memory(")),
    ErrorCase("missing id", "retrieve_memory", {"transform": "full"},
              "invalid_arguments", ("'id' is missing", "id (required)")),
    ErrorCase("id of wrong type", "retrieve_memory", {"id": 12},
              "invalid_arguments", ("'id' = 12",)),
    ErrorCase("malformed id", "retrieve_memory", {"id": "mem_12"},
              "invalid_id", ("'mem_12' is not a memory id", "Use query_memory to find ids")),
    ErrorCase("path as id", "retrieve_memory", {"id": "../../etc/passwd"},
              "invalid_id", ("not a memory id",)),
    ErrorCase("unknown id", "retrieve_memory", {"id": "mem_000000000000"},
              "not_found", ("No memory item 'mem_000000000000'", "Use query_memory to find ids")),
    ErrorCase("wrong type of argument", "retrieve_memory", {"id": "{text}", "max_tokens": "lots"},
              "invalid_arguments", ("'max_tokens' = \"lots\"", "valid integer")),
    ErrorCase("unknown argument", "retrieve_memory", {"id": "{text}", "query": "x"},
              "invalid_arguments", ("retrieve_memory has no argument 'query'",)),
    ErrorCase("unknown transform", "retrieve_memory", {"id": "{text}", "transform": "everything"},
              "invalid_arguments", ("'transform'", "'full'", "'summary'")),
    ErrorCase("pattern without filtered", "retrieve_memory", {"id": "{text}", "pattern": "x"},
              "invalid_arguments", ("'pattern' only applies to transform=\"filtered\"", "not to transform=\"full\"")),
    ErrorCase("n with excerpt", "retrieve_memory", {"id": "{text}", "transform": "excerpt", "n": 5},
              "invalid_arguments", ("'n' only applies to transform=\"first_n\" or \"last_n\"",)),
    ErrorCase("column without value", "retrieve_memory", {"id": "{json}", "transform": "filtered", "column": "n"},
              "invalid_arguments", ("'column' and 'value' go together",)),
    ErrorCase("max_tokens too large", "retrieve_memory", {"id": "{text}", "max_tokens": 50_000},
              "invalid_arguments", ("'max_tokens'", "16000")),
    ErrorCase("filtered without filters", "retrieve_memory", {"id": "{text}", "transform": "filtered"},
              "transform_error", ("at least one of: pattern, keywords, json_path, column",)),
    ErrorCase("bad regex", "retrieve_memory", {"id": "{text}", "transform": "filtered", "pattern": "(["},
              "transform_error", ("invalid regular expression '(['",)),
    ErrorCase("excerpt without a way", "retrieve_memory", {"id": "{text}", "transform": "excerpt"},
              "transform_error", ("exactly one of",)),
    ErrorCase("excerpt past the end", "retrieve_memory", {"id": "{text}", "transform": "excerpt", "start_line": 999},
              "transform_error", ("start_line 999 is past the end",)),
    ErrorCase("page past the end", "retrieve_memory", {"id": "{text}", "page": 3},
              "transform_error", ("page 3 does not exist", "1 page")),
    ErrorCase("json_path on text", "retrieve_memory", {"id": "{text}", "transform": "filtered", "json_path": "a.b"},
              "transform_error", ("need JSON content",)),
    ErrorCase("json_path to no key", "retrieve_memory",
              {"id": "{json}", "transform": "filtered", "json_path": "rows.0.x"},
              "transform_error", ("no key 'x'", "keys there: n, name")),
    ErrorCase("store without content", "store_memory", {"title": "t"},
              "invalid_arguments", ("'content' is missing",)),
    ErrorCase("store with a bad type", "store_memory", {"content": "c", "type": "webpage"},
              "invalid_arguments", ("'type' = \"webpage\"", "'web_content'")),
    ErrorCase("store tags as a string", "store_memory", {"content": "c", "tags": "a,b"},
              "invalid_arguments", ("'tags'", "valid list")),
    ErrorCase("store related to a malformed id", "store_memory", {"content": "c", "related_to": ["12"]},
              "invalid_id", ("related_to names '12'", "Nothing was stored")),
    ErrorCase("store related to an unknown id", "store_memory", {"content": "c", "related_to": ["mem_000000000000"]},
              "not_found", ("related_to names 'mem_000000000000'", "Nothing was stored")),
    ErrorCase("query limit too large", "query_memory", {"limit": 100},
              "invalid_arguments", ("'limit' = 100", "less than or equal to 20")),
    ErrorCase("query limit not a number", "query_memory", {"limit": "five"},
              "invalid_arguments", ("'limit' = \"five\"",)),
    ErrorCase("query since not ISO 8601", "query_memory", {"since": "last week"},
              "invalid_arguments", ("since='last week' is not an ISO 8601", "2025-10-15")),
    ErrorCase("query since after until", "query_memory", {"since": "2025-02-01", "until": "2025-01-01"},
              "invalid_arguments", ("is after until",)),
]


def unindexed_memory(path: Path) -> AgentMemory:
    """A memory whose stores skip embedding (retrieve never needs the index; a query catches up)."""
    return AgentMemory("plain", path, config=MemoryConfig(index_on_store=False))


@pytest.fixture(scope="module")
def error_memory(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentMemory, dict[str, str]]:
    """One memory for all error cases (none of them may change it)."""
    memory = unindexed_memory(tmp_path_factory.mktemp("errors"))
    ids = {
        "text": memory.store("line one\nline two\n", title="two lines"),
        "json": memory.store({"rows": [{"n": 1, "name": "a"}, {"n": 2, "name": "b"}]}, type="database_result"),
    }
    return memory, ids


@pytest.mark.parametrize("case", ERROR_CASES, ids=lambda case: case.name)
def test_model_mistakes_give_error_results(case: ErrorCase, error_memory: tuple[AgentMemory, dict[str, str]]) -> None:
    memory, ids = error_memory
    arguments = case.arguments
    if isinstance(arguments, dict):
        placeholders = {"{text}": ids["text"], "{json}": ids["json"]}
        arguments = {key: placeholders.get(value, value) if isinstance(value, str) else value
                     for key, value in arguments.items()}
    before = len(memory)
    result = MemoryToolkit(memory).dispatch(case.tool, arguments)
    assert isinstance(result, ToolResult)
    assert (result.ok, result.error, result.data) == (False, case.error, None), result.content
    assert result.content.startswith("Error: ")
    for phrase in case.says:
        assert phrase in result.content, f"{phrase!r} not in {result.content!r}"
    assert len(memory) == before  # a failed call stores nothing


JUNK_ARGUMENTS = [None, "", "0", "true", '"mem_x"', {"id": None}, {"id": ["mem_3f9a0c41b2de"]}, {"id": {"a": 1}}]


@pytest.mark.parametrize("junk", JUNK_ARGUMENTS)
def test_junk_arguments_never_raise(junk: Any, error_memory: tuple[AgentMemory, dict[str, str]]) -> None:
    toolkit = MemoryToolkit(error_memory[0])
    for name in TOOL_NAMES:
        result = toolkit.dispatch(name, junk)
        assert isinstance(result, ToolResult)
        if name != "query_memory" or junk not in (None, ""):  # query_memory takes no required argument
            assert result.ok is False and result.error == "invalid_arguments"


def test_developer_misconfiguration_raises(tmp_path: Path) -> None:
    memory = AgentMemory("a", tmp_path, config=MemoryConfig(chroma_mode="server", chroma_port=free_port()))
    with pytest.raises(ConfigurationError, match="Chroma"):
        MemoryToolkit(memory).dispatch("query_memory", '{"query": "x"}')


# -- store ---------------------------------------------------------------------------------------

def test_store_keeps_content_and_metadata(embedded_memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(embedded_memory)
    first = toolkit.dispatch("store_memory", {"content": "Quarterly figures: revenue 4.2M."})
    arguments = {"content": "Summary of the figures ✓", "type": "action_result", "source": "summarizer",
                 "title": "Summary", "tags": ["Q3", "finance", "q3"], "related_to": [first.data["id"]]}
    second = toolkit.dispatch("store_memory", json.dumps(arguments, ensure_ascii=False))
    assert second.ok
    item = embedded_memory.get(second.data["id"])
    assert item.content == "Summary of the figures ✓"
    assert item.type == "action_result" and item.metadata.source == "summarizer" and item.metadata.title == "Summary"
    assert item.metadata.tags == ("finance", "q3")
    assert item.metadata.related_to == (first.data["id"],)
    assert second.data["tags"] == ["finance", "q3"]
    assert second.data["size_bytes"] == len("Summary of the figures ✓".encode())
    assert first.data["type"] == "custom" and first.data["source"] == "agent"  # the defaults


# -- retrieve: transforms, HTML, paging ----------------------------------------------------------

def test_retrieve_transforms_map_flat_arguments(tmp_path: Path) -> None:
    memory = unindexed_memory(tmp_path)
    toolkit = MemoryToolkit(memory)
    text = "\n".join(f"row {i}: {'alpha' if i % 10 == 0 else 'beta'}" for i in range(1, 101))
    item_id = memory.store(text)
    table = memory.store({"rows": [{"city": "Oslo", "pop": 709}, {"city": "Bergen", "pop": 291}]})

    def content(**arguments: Any) -> str:
        result = toolkit.dispatch("retrieve_memory", {"id": item_id, **arguments})
        assert result.ok, result.content
        return result.content.split("\n", 1)[1]

    assert content(transform="first_n", n=2) == "row 1: beta\nrow 2: beta"
    assert content(transform="last_n", n=1) == "row 100: alpha"
    assert content(transform="excerpt", start_line=5, end_line=6) == "row 5: beta\nrow 6: beta"
    assert content(transform="excerpt", start_char=0, end_char=5) == "row 1"
    filtered = content(transform="filtered", keywords=["ALPHA"])
    assert filtered.splitlines()[0] == "Note: 10 of 100 lines match (shown as L<line number>)."
    assert filtered.splitlines()[1:3] == ["L10: row 10: alpha", "…"]
    around_ten = content(transform="filtered", pattern=r"ROW 10:", context_lines=1).splitlines()[1:]
    assert around_ten == ["L9: row 9: beta", "L10: row 10: alpha", "L11: row 11: beta"]
    rows = toolkit.dispatch("retrieve_memory", {"id": table, "transform": "filtered", "json_path": "rows",
                                                "column": "city", "value": "Bergen"})
    assert rows.ok and json.loads(rows.content.split("\n", 2)[2]) == [{"city": "Bergen", "pop": 291}]
    numbers = toolkit.dispatch("retrieve_memory", {"id": table, "transform": "filtered", "json_path": "rows",
                                                   "column": "pop", "value": 709})
    assert json.loads(numbers.content.split("\n", 2)[2]) == [{"city": "Oslo", "pop": 709}]
    summary = toolkit.dispatch("retrieve_memory", {"id": item_id, "transform": "summary"})
    assert summary.ok and summary.data["transform"]["type"] == "summary"
    # null for an unused transform argument is "not given" (some models send every key).
    assert toolkit.dispatch("retrieve_memory", {"id": item_id, "pattern": None, "n": None, "keywords": []}).ok


@pytest.mark.data
def test_retrieve_web_page_as_text_or_raw(tmp_path: Path, data_dir: Path) -> None:
    memory = unindexed_memory(tmp_path)
    html = (data_dir / "webpages/readability/lwn-1/source.html").read_text(encoding="utf-8")
    item_id = memory.store(html, type="web_content", source="lwn-1", media_type="text/html")
    toolkit = MemoryToolkit(memory)
    text = toolkit.dispatch("retrieve_memory", {"id": item_id, "transform": "excerpt", "around": "trademark"})
    assert text.ok and "Arduino" in text.content and "<div" not in text.content
    assert "raw=true gives the markup" in text.content
    raw = toolkit.dispatch("retrieve_memory", {"id": item_id, "raw": True, "max_tokens": 500})
    assert raw.ok and "<!DOCTYPE html" in raw.content and raw.data["pages"] > 1
    assert memory.tokens.count(raw.content) <= 500
    assert raw.content.splitlines()[-1].endswith("max_tokens=500, raw=true, page=2)")


def _big_text() -> str:
    rnd = random.Random(2025)
    words = ("memory agent context token page retrieve query store index chunk vector embedding Paris "
             "Berlin river mountain the of and to a in is ünïcödé 東京 🙂").split()
    lines, size = [], 0
    while size < 1_000_000:
        line = f"Line {len(lines):06d}: " + " ".join(rnd.choice(words) for _ in range(rnd.randint(3, 30)))
        lines.append(line)
        size += len(line.encode()) + 1
    return "\n".join(lines)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> tuple[AgentMemory, str, str]:
    """A 1 MB text in a memory that never touches the index (retrieve does not need it)."""
    memory = unindexed_memory(tmp_path_factory.mktemp("big"))
    text = _big_text()
    item_id = memory.store(text, source="crawler", title="A very long log " * 12)
    return memory, item_id, text


@pytest.mark.parametrize("max_tokens", [300, 1_000, None, 16_000])
def test_paging_a_1mb_text_stays_within_max_tokens(big: tuple[AgentMemory, str, str], max_tokens: int | None) -> None:
    memory, item_id, text = big
    assert len(text.encode()) >= 1_000_000
    toolkit = MemoryToolkit(memory)
    arguments: dict[str, Any] = {"id": item_id} if max_tokens is None else {"id": item_id, "max_tokens": max_tokens}
    cap = max_tokens or 4_000
    first = toolkit.dispatch("retrieve_memory", json.dumps(arguments))
    assert first.ok and first.data["max_tokens"] == cap
    assert memory.tokens.count(first.content) <= cap
    assert memory.tokens.count(first.content) > cap * 0.5  # and not wastefully small
    pages = first.data["pages"]
    assert pages > 1 and f"page 1 of {pages}" in first.content.splitlines()[0]
    assert text.startswith(first.data["content"])
    name, next_arguments = parse_call(first.content.splitlines()[-1])
    assert (name, next_arguments) == ("retrieve_memory", {**arguments, "transform": "full", "page": 2})
    assert first.data["next_call"] == {"name": name, "arguments": next_arguments}
    for page in (2, pages // 2, pages):
        result = toolkit.dispatch("retrieve_memory", {**arguments, "page": page})
        assert result.ok and memory.tokens.count(result.content) <= cap, page


def test_next_page_line_works_when_dispatched(big: tuple[AgentMemory, str, str]) -> None:
    memory, item_id, text = big
    toolkit = MemoryToolkit(memory)
    first = toolkit.dispatch("retrieve_memory", f'{{"id": "{item_id}", "max_tokens": 2000}}')
    name, arguments = parse_call(first.content.splitlines()[-1])
    second = toolkit.dispatch(name, json.dumps(arguments))  # exactly as the model would copy it
    assert second.ok and second.data["page"] == 2
    assert text.startswith(first.data["content"] + second.data["content"])  # contiguous, no gap, no overlap
    assert f"page 2 of {first.data['pages']}" in second.content.splitlines()[0]
    assert second.content.splitlines()[-1].endswith('max_tokens=2000, page=3)')

    last_page = first.data["pages"]
    last = toolkit.dispatch("retrieve_memory", {"id": item_id, "max_tokens": 2000, "page": last_page})
    assert last.ok and last.data["next_call"] is None
    assert "Next page" not in last.content
    assert text.endswith(last.data["content"])
    assert memory.tokens.count(last.content) <= 2000
    beyond = toolkit.dispatch("retrieve_memory", {"id": item_id, "max_tokens": 2000, "page": last_page + 1})
    assert beyond.error == "transform_error" and f"the answer has {last_page} pages" in beyond.content


def test_next_page_keeps_transform_arguments(big: tuple[AgentMemory, str, str]) -> None:
    memory, item_id, _ = big
    toolkit = MemoryToolkit(memory)
    arguments = {"id": item_id, "transform": "filtered", "keywords": ["Berlin river"], "context_lines": 1,
                 "max_tokens": 1500}
    first = toolkit.dispatch("retrieve_memory", json.dumps(arguments))
    assert first.ok and first.data["pages"] > 1
    assert memory.tokens.count(first.content) <= 1500
    assert first.content.splitlines()[1].startswith("Note: ") and "lines match" in first.content.splitlines()[1]
    name, next_arguments = parse_call(first.content.splitlines()[-1])
    assert next_arguments == {**arguments, "page": 2}
    second = toolkit.dispatch(name, next_arguments)
    assert second.ok and second.data["page"] == 2 and second.data["transform"] == first.data["transform"]
    lines = [line for line in second.data["content"].splitlines() if line]
    assert lines and all(re.match(r"L\d+: Line \d{6}: ", line) or line == "…" for line in lines)
    assert any("berlin river" in line.lower() for line in lines)
    assert second.data["content"] != first.data["content"]


def test_long_next_call_arguments_still_fit(big: tuple[AgentMemory, str, str]) -> None:
    memory, item_id, _ = big
    toolkit = MemoryToolkit(memory)
    arguments = {"id": item_id, "transform": "filtered", "keywords": [f"Line 00{i}" for i in range(60)],
                 "max_tokens": 1000}
    result = toolkit.dispatch("retrieve_memory", arguments)
    assert result.ok and result.data["pages"] > 1
    assert memory.tokens.count(result.content) <= 1000
    assert parse_call(result.content.splitlines()[-1])[1] == {**arguments, "page": 2}
    too_small = toolkit.dispatch("retrieve_memory", {**arguments, "max_tokens": 300})
    assert too_small.error == "invalid_arguments" and "leaves no room for content" in too_small.content


def test_default_max_tokens_is_the_memorys_configured_cap(tmp_path: Path, big: tuple[AgentMemory, str, str]) -> None:
    memory = AgentMemory("small", tmp_path, config=MemoryConfig(index_on_store=False, retrieve_max_tokens=800))
    item_id = memory.store(big[2][:50_000])
    result = MemoryToolkit(memory).dispatch("retrieve_memory", {"id": item_id})
    assert result.ok and result.data["max_tokens"] == 800 and result.data["pages"] > 1
    assert memory.tokens.count(result.content) <= 800


# -- async ---------------------------------------------------------------------------------------

def test_async_dispatch(embedded_memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(embedded_memory)
    item_id = embedded_memory.store("async content")

    async def main() -> list[ToolResult]:
        return await asyncio.gather(
            toolkit.adispatch("retrieve_memory", {"id": item_id}),
            RetrieveMemoryAction().arun(embedded_memory, {"id": "mem_000000000000"}),
        )

    found, missing = asyncio.run(main())
    assert found.ok and found.content.endswith("async content")
    assert missing.error == "not_found"
