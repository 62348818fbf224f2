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
    parse_line_slice,
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
        if name in ("around", "lines", "pattern", "query"):  # the rest are named plainly enough
            assert prop.get("description"), f"{action.name}.{name} has no description"
        assert "anyOf" not in prop or all(branch.get("type") != "null" for branch in prop["anyOf"])
    # The example in the description is a valid call.
    Draft202012Validator(params).validate(action.example)
    assert format_call(action.name, action.example) in action.description


def test_descriptions_state_use_example_and_limits() -> None:
    retrieve, query = RetrieveMemoryAction.description, QueryMemoryAction.description
    store = StoreMemoryAction.description
    assert "4,000 tokens" in retrieve and "next page" in retrieve
    assert "max 20" in query and "default 5" in query
    assert "Tool results are saved already" in store
    for action, description in ((RetrieveMemoryAction, retrieve), (QueryMemoryAction, query), (StoreMemoryAction, store)):
        assert f"Example: {format_call(action.name, action.example)}" in description
    # the bounds are in the schema itself, where the model reads them
    props = RetrieveMemoryAction.parameters_schema()["properties"]
    assert props["around"]["maxLength"] == 200 and props["pattern"]["maxLength"] == 200
    assert StoreMemoryAction.parameters_schema()["properties"]["tags"]["maxItems"] == 10
    assert QueryMemoryAction.parameters_schema()["properties"]["limit"]["maximum"] == 20


@dataclass(frozen=True)
class ArgsCase:
    """Arguments a model might send: the schema and the pydantic model must agree on them."""

    tool: str
    arguments: dict[str, Any]
    valid: bool


ID = "mem_3f9a0c41b2de"
ARGS_CASES = [
    ArgsCase("store_memory", {"content": "note"}, True),
    ArgsCase("store_memory", {"content": "n", "title": "X", "tags": ["a"]}, True),
    ArgsCase("store_memory", {}, False),
    ArgsCase("store_memory", {"content": "x" * 8_001}, False),
    ArgsCase("store_memory", {"content": "n", "type": "web_content"}, False),
    ArgsCase("store_memory", {"content": "n", "tags": "a,b"}, False),
    ArgsCase("store_memory", {"content": "n", "tags": [f"t{i}" for i in range(11)]}, False),
    ArgsCase("store_memory", {"content": "n", "tags": ["x" * 41]}, False),
    ArgsCase("store_memory", {"content": "n", "title": "t" * 201}, False),
    ArgsCase("retrieve_memory", {"id": ID}, True),
    ArgsCase("retrieve_memory", {"id": ID, "around": "refund", "page": 2}, True),
    ArgsCase("retrieve_memory", {"id": ID, "lines": "-50:"}, True),
    ArgsCase("retrieve_memory", {"id": ID, "pattern": "err(or)?", "summary": False}, True),
    ArgsCase("retrieve_memory", {"transform": "full"}, False),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "full"}, False),
    ArgsCase("retrieve_memory", {"id": ID, "around": "a" * 201}, False),
    ArgsCase("retrieve_memory", {"id": ID, "pattern": "a" * 201}, False),
    ArgsCase("retrieve_memory", {"id": ID, "lines": "1:2" * 9}, False),
    ArgsCase("retrieve_memory", {"id": ID, "page": 0}, False),
    ArgsCase("retrieve_memory", {"id": ID, "bogus": 1}, False),
    ArgsCase("query_memory", {}, True),
    ArgsCase("query_memory", {"query": "q", "tags": ["t"], "limit": 20}, True),
    ArgsCase("query_memory", {"query": "q" * 1_001}, False),
    ArgsCase("query_memory", {"limit": 21}, False),
    ArgsCase("query_memory", {"limit": 0}, False),
    ArgsCase("query_memory", {"type": "file"}, False),
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
    assert header.startswith(f"[{ids['rivers']} · custom · source: agent · \"Rivers\" · full")
    assert body == NOTES["rivers"][0]
    assert "Next page" not in full.content and full.data["next_call"] is None

    part = toolkit.dispatch("retrieve_memory", json.dumps({"id": ids["kernel"], "around": "red-black"}))
    assert part.ok and "red-black" in part.content and "around 'red-black'" in part.content.splitlines()[0]


def test_query_filters_by_tags_and_limits(memory: AgentMemory) -> None:
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
    assert ids({"tags": ["finance"]}) == [mar, jan]
    assert ids({"tags": ["FINANCE", "notes"]}) == [mar]
    assert ids({"limit": 2}) == [jun, mar]
    assert set(ids({"query": "servers", "tags": ["finance"]})) == {mar, jan}

    listed = toolkit.dispatch("query_memory", json.dumps({"tags": ["notes"]}))
    assert 'newest first (tags=["notes"])' in listed.content
    assert "2025-03-05 23:30 UTC" in listed.content and "tags: finance, notes" in listed.content

    nothing = toolkit.dispatch("query_memory", json.dumps({"query": "servers", "tags": ["absent"]}))
    assert nothing.ok and nothing.error is None and nothing.data["hits"] == []
    assert "No memory items match" in nothing.content and 'tags=["absent"]' in nothing.content
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
              "invalid_arguments", ("must be a JSON object, not array",)),
    ErrorCase("json null", "query_memory", "null",
              "invalid_arguments", ("must be a JSON object",)),
    ErrorCase("no arguments", "retrieve_memory", "",
              "invalid_arguments", ("'id' is missing", "Example: retrieve_memory(")),
    ErrorCase("missing id", "retrieve_memory", {"around": "x"},
              "invalid_arguments", ("'id' is missing", "id (required)")),
    ErrorCase("id of wrong type", "retrieve_memory", {"id": 12},
              "invalid_arguments", ("'id' = 12",)),
    ErrorCase("malformed id", "retrieve_memory", {"id": "mem_12"},
              "invalid_id", ("'mem_12' is not a memory id", "Copy the id exactly")),
    ErrorCase("path as id", "retrieve_memory", {"id": "../../etc/passwd"},
              "invalid_id", ("not a memory id",)),
    ErrorCase("unknown id", "retrieve_memory", {"id": "mem_000000000000"},
              "not_found", ("No memory item 'mem_000000000000'", "Copy the id exactly")),
    ErrorCase("wrong type of argument", "retrieve_memory", {"id": "{text}", "page": "two"},
              "invalid_arguments", ("'page' = \"two\"", "valid integer")),
    ErrorCase("unknown argument", "retrieve_memory", {"id": "{text}", "query": "x"},
              "invalid_arguments", ("retrieve_memory has no argument 'query'",)),
    ErrorCase("old transform argument", "retrieve_memory", {"id": "{text}", "transform": "excerpt"},
              "invalid_arguments", ("retrieve_memory has no argument 'transform'", "around")),
    ErrorCase("two parts at once", "retrieve_memory", {"id": "{text}", "around": "x", "pattern": "y"},
              "invalid_arguments", ("give one of around, lines, pattern or summary, not around and pattern",)),
    ErrorCase("lines not a slice", "retrieve_memory", {"id": "{text}", "lines": "10-20"},
              "invalid_arguments", ("lines='10-20' is not a slice", '":50" (first 50)')),
    ErrorCase("lines selecting nothing", "retrieve_memory", {"id": "{text}", "lines": "5:2"},
              "invalid_arguments", ("selects nothing",)),
    ErrorCase("empty around", "retrieve_memory", {"id": "{text}", "around": " "},
              "invalid_arguments", ("around is empty",)),
    ErrorCase("bad regex", "retrieve_memory", {"id": "{text}", "pattern": "(["},
              "transform_error", ("invalid regular expression",)),
    ErrorCase("lines past the end", "retrieve_memory", {"id": "{text}", "lines": "998:999"},
              "transform_error", ("start_line 999 is past the end",)),
    ErrorCase("page past the end", "retrieve_memory", {"id": "{text}", "page": 3},
              "transform_error", ("page 3 does not exist", "1 page")),
    ErrorCase("store without content", "store_memory", {"title": "t"},
              "invalid_arguments", ("'content' is missing",)),
    ErrorCase("store blank content", "store_memory", {"content": "  "},
              "invalid_arguments", ("content is empty", "Nothing was stored")),
    ErrorCase("store with a type", "store_memory", {"content": "c", "type": "web_content"},
              "invalid_arguments", ("store_memory has no argument 'type'",)),
    ErrorCase("store tags as a string", "store_memory", {"content": "c", "tags": "a,b"},
              "invalid_arguments", ("'tags'", "valid list")),
    ErrorCase("store too many tags", "store_memory", {"content": "c", "tags": [f"t{i}" for i in range(6000)]},
              "invalid_arguments", ("'tags'", "at most 10 items")),
    ErrorCase("query limit too large", "query_memory", {"limit": 100},
              "invalid_arguments", ("'limit' = 100", "less than or equal to 20")),
    ErrorCase("query limit not a number", "query_memory", {"limit": "five"},
              "invalid_arguments", ("'limit' = \"five\"",)),
    ErrorCase("query too long", "query_memory", {"query": "q" * 5_000},
              "invalid_arguments", ("'query'", "at most 1000 characters")),
    ErrorCase("too many query tags", "query_memory", {"tags": [f"t{i}" for i in range(10_000)]},
              "invalid_arguments", ("'tags'", "at most 10 items")),
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
    arguments = {"content": "Summary of the figures ✓", "title": "Summary", "tags": ["Q3", "finance", "q3"]}
    stored = toolkit.dispatch("store_memory", json.dumps(arguments, ensure_ascii=False))
    assert stored.ok
    item = embedded_memory.get(stored.data["id"])
    assert item.content == "Summary of the figures ✓"
    assert item.type == "custom" and item.metadata.source == "agent" and item.metadata.title == "Summary"
    assert item.metadata.tags == ("finance", "q3")
    assert stored.data["tags"] == ["finance", "q3"]
    assert stored.data["size_bytes"] == len("Summary of the figures ✓".encode())


# -- retrieve: parts, HTML, paging -----------------------------------------------------------------

def test_retrieve_parts_map_onto_transforms(tmp_path: Path) -> None:
    memory = unindexed_memory(tmp_path)
    toolkit = MemoryToolkit(memory)
    text = "\n".join(f"row {i}: {'alpha' if i % 10 == 0 else 'beta'}" for i in range(1, 101))
    item_id = memory.store(text)

    def read(**arguments: Any) -> tuple[str, str]:
        result = toolkit.dispatch("retrieve_memory", {"id": item_id, **arguments})
        assert result.ok, result.content
        header, body = result.content.split("\n", 1)
        return header, body

    assert read(lines=":2") == (read(lines=":2")[0], "row 1: beta\nrow 2: beta")
    assert "first 2 lines" in read(lines=":2")[0]
    assert read(lines="-1:")[1] == "row 100: alpha" and "last 1 lines" in read(lines="-1:")[0]
    assert read(lines="4:6")[1] == "row 5: beta\nrow 6: beta"  # Python slice: the 5th and 6th lines
    assert "lines 5-6" in read(lines="4:6")[0]
    assert read(lines="98:")[1] == "row 99: beta\nrow 100: alpha"
    assert read(lines=":")[1] == text
    header, body = read(pattern="ALPHA")
    assert "matching lines" in header
    assert body.splitlines()[0] == "Note: 10 of 100 lines match (shown as L<line number>)."
    assert body.splitlines()[1:3] == ["L10: row 10: alpha", "…"]
    assert "row 10: alpha" in read(around="row 10:")[1]
    summary = toolkit.dispatch("retrieve_memory", {"id": item_id, "summary": True})
    assert summary.ok and summary.data["transform"]["type"] == "summary"
    # null for an unused argument is "not given" (some models send every key).
    assert toolkit.dispatch("retrieve_memory", {"id": item_id, "pattern": None, "lines": None, "summary": False}).ok


def test_parse_line_slice_is_pythons() -> None:
    lines = [f"l{i}" for i in range(1, 21)]
    for text in (":5", "-3:", "2:7", "15:", ":", "0:20", "19:"):
        start, _, stop = text.partition(":")
        want = lines[int(start) if start else None : int(stop) if stop else None]
        spec = parse_line_slice(text)
        if spec.type == "first_n":
            got = lines[: spec.n]
        elif spec.type == "last_n":
            got = lines[-spec.n :]
        elif spec.type == "full":
            got = lines
        else:
            got = lines[spec.start_line - 1 : spec.end_line]
        assert got == want, text
    for bad in ("-5:-2", "3:3", "5:2", "a:b", "1-5", ""):
        with pytest.raises(ToolCallError):
            parse_line_slice(bad)


@pytest.mark.data
def test_retrieve_web_page_as_text(tmp_path: Path, data_dir: Path) -> None:
    memory = unindexed_memory(tmp_path)
    html = (data_dir / "webpages/readability/lwn-1/source.html").read_text(encoding="utf-8")
    item_id = memory.store(html, type="web_content", source="lwn-1", media_type="text/html")
    toolkit = MemoryToolkit(memory)
    text = toolkit.dispatch("retrieve_memory", {"id": item_id, "around": "trademark"})
    assert text.ok and "Arduino" in text.content and "<div" not in text.content
    assert "raw" not in text.content  # the tool has no raw view; the library API does (memory.retrieve(raw=True))
    assert "<!DOCTYPE html" in memory.retrieve(item_id, raw=True, max_tokens=500).content


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
def big_text() -> str:
    return _big_text()


def big_memory(path: Path, text: str, cap: int | None = None) -> tuple[AgentMemory, str]:
    """A 1 MB text in a memory that never touches the index, answers capped at ``cap`` tokens."""
    config = MemoryConfig(index_on_store=False) if cap is None else MemoryConfig(index_on_store=False,
                                                                                 retrieve_max_tokens=cap)
    memory = AgentMemory("big", path, config=config)
    return memory, memory.store(text, source="crawler", title="A very long log " * 12)


@pytest.mark.parametrize("cap", [300, 1_000, None, 16_000])
def test_paging_a_1mb_text_stays_within_the_cap(tmp_path: Path, big_text: str, cap: int | None) -> None:
    memory, item_id = big_memory(tmp_path, big_text, cap)
    assert len(big_text.encode()) >= 1_000_000
    toolkit = MemoryToolkit(memory)
    cap = cap or 4_000
    first = toolkit.dispatch("retrieve_memory", json.dumps({"id": item_id}))
    assert first.ok and first.data["max_tokens"] == cap
    assert memory.tokens.count(first.content) <= cap
    assert memory.tokens.count(first.content) > cap * 0.4  # and not wastefully small
    pages = first.data["pages"]
    assert pages > 1 and f"page 1 of {pages}" in first.content.splitlines()[0]
    assert big_text.startswith(first.data["content"])
    name, next_arguments = parse_call(first.content.splitlines()[-1])
    assert (name, next_arguments) == ("retrieve_memory", {"id": item_id, "page": 2})
    assert first.data["next_call"] == {"name": name, "arguments": next_arguments}
    for page in (2, pages // 2, pages):
        result = toolkit.dispatch("retrieve_memory", {"id": item_id, "page": page})
        assert result.ok and memory.tokens.count(result.content) <= cap, page


def test_next_page_line_works_when_dispatched(tmp_path: Path, big_text: str) -> None:
    memory, item_id = big_memory(tmp_path, big_text, 2_000)
    toolkit = MemoryToolkit(memory)
    first = toolkit.dispatch("retrieve_memory", f'{{"id": "{item_id}"}}')
    name, arguments = parse_call(first.content.splitlines()[-1])
    second = toolkit.dispatch(name, json.dumps(arguments))  # exactly as the model would copy it
    assert second.ok and second.data["page"] == 2
    assert big_text.startswith(first.data["content"] + second.data["content"])  # contiguous, no gap, no overlap
    assert f"page 2 of {first.data['pages']}" in second.content.splitlines()[0]
    assert second.content.splitlines()[-1].endswith("page=3)")

    last_page = first.data["pages"]
    last = toolkit.dispatch("retrieve_memory", {"id": item_id, "page": last_page})
    assert last.ok and last.data["next_call"] is None
    assert "Next page" not in last.content
    assert big_text.endswith(last.data["content"])
    assert memory.tokens.count(last.content) <= 2000
    beyond = toolkit.dispatch("retrieve_memory", {"id": item_id, "page": last_page + 1})
    assert beyond.error == "transform_error" and f"the answer has {last_page} pages" in beyond.content


def test_next_page_keeps_the_part_arguments(tmp_path: Path, big_text: str) -> None:
    memory, item_id = big_memory(tmp_path, big_text, 1_500)
    toolkit = MemoryToolkit(memory)
    arguments = {"id": item_id, "pattern": "Berlin river"}
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
    assert all("berlin river" in line.lower() for line in lines if line != "…")
    assert second.data["content"] != first.data["content"]


@pytest.mark.parametrize("pattern", [
    "|".join(f"Line 00{i:04d}" for i in range(16))[:200],  # long in characters
    "Line 000(1|2|3)|" + "🙂" * 180,  # long in tokens (the longest arguments a model can send)
    "Line 000(1|2|3)",  # short
])
def test_longest_arguments_still_fit_the_smallest_cap(tmp_path: Path, big_text: str, pattern: str) -> None:
    memory, item_id = big_memory(tmp_path, big_text, 300)
    toolkit = MemoryToolkit(memory)
    arguments = {"id": item_id, "pattern": pattern}
    result = toolkit.dispatch("retrieve_memory", arguments)
    assert result.ok and result.data["pages"] > 1, result.content
    assert memory.tokens.count(result.content) <= 300
    footer = result.content.splitlines()[-1]
    if footer == "Next page: the same call with page=2":  # the call itself would not fit the page
        assert memory.tokens.count(format_call("retrieve_memory", {**arguments, "page": 2})) > 60
    else:
        assert parse_call(footer)[1] == {**arguments, "page": 2}
    second = toolkit.dispatch("retrieve_memory", {**arguments, "page": 2})
    assert second.ok and second.data["page"] == 2 and memory.tokens.count(second.content) <= 300


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


class _BrokenPlugin:
    """A third-party compaction plugin with a bug."""

    name = "broken"
    priority = 1

    def matches(self, item: object) -> bool:
        return True

    def key_content(self, item: object, *, max_tokens: int, counter: object) -> str:
        raise RuntimeError("plugin bug")

    def summary(self, item: object, *, max_tokens: int, counter: object) -> str:
        raise RuntimeError("plugin bug")


def test_a_failing_plugin_never_escapes_dispatch(tmp_path: Path) -> None:
    from agent_memory import PluginRegistry

    memory = AgentMemory("b", tmp_path, config=MemoryConfig(index_on_store=False),
                         plugins=PluginRegistry([_BrokenPlugin()]))
    item_id = memory.store("The Danube flows through ten countries. It rises in the Black Forest.")
    result = MemoryToolkit(memory).dispatch("retrieve_memory", {"id": item_id, "summary": True})
    assert result.ok and "Danube" in result.content  # the extractive summary stands in
