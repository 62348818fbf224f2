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
from actions.base import BOUND_KEYWORDS
from agent_memory import AgentMemory, ConfigurationError, MemoryConfig
from agent_memory.testing import free_port
from agent_memory.tokens import default_token_counter
from memory_helpers import unindexed_memory

ROOT = Path(__file__).resolve().parent.parent
TOOL_NAMES = ["store_memory", "retrieve_memory", "query_memory"]
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
    text = json.dumps(params)
    assert "$defs" not in text and "$ref" not in text
    # the shape of a call only: the arguments model checks the bounds and its errors state them
    assert not any(f'"{keyword}"' in text for keyword in BOUND_KEYWORDS), text
    assert set(params["properties"]) == set(action.Arguments.model_fields)
    for name, prop in params["properties"].items():
        if name in ("around", "lines", "pattern", "query"):  # the rest are named plainly enough
            assert prop.get("description"), f"{action.name}.{name} has no description"
        assert "anyOf" not in prop or all(branch.get("type") != "null" for branch in prop["anyOf"])
    Draft202012Validator(params).validate(action.example)  # the example is a valid call


def test_descriptions_state_use_example_and_limits() -> None:
    retrieve, query = RetrieveMemoryAction.description, QueryMemoryAction.description
    store = StoreMemoryAction.description
    assert "cited result" in retrieve and "pages" in retrieve
    assert "max 20" in query and "default 5" in query
    assert "Tool results are saved already" in store and "max 8,000 characters" in store
    for action, description in ((QueryMemoryAction, query), (StoreMemoryAction, store)):
        assert f"Example: {format_call(action.name, action.example)}" in description
    # retrieve_memory goes with every call of a cached conversation: no example, its citations show the call
    assert "Example" not in retrieve
    assert default_token_counter().count(json.dumps([RetrieveMemoryAction.openai_schema()])) <= 160


def test_a_page_the_answer_cuts_ends_with_the_call_for_the_next(embedded_memory: AgentMemory) -> None:
    """What the short description leaves to the answer: a cut answer names its next page's call."""
    item_id = embedded_memory.store("\n".join(f"line {n}: " + "word " * 40 for n in range(2_000)))
    answer = RetrieveMemoryAction().run(embedded_memory, {"id": item_id})
    assert answer.ok and answer.content.splitlines()[-1] == f'Next page: retrieve_memory(id="{item_id}", page=2)'


@dataclass(frozen=True)
class ArgsCase:
    """Arguments a model might send. Valid ones pass the schema and the arguments model; the model
    refuses invalid ones with a tool error, which states the bound broken (``says``) where the
    schema, holding the shape of a call only, lets them through."""

    tool: str
    arguments: dict[str, Any]
    valid: bool
    says: str = ""


ID = "mem_3f9a0c41b2de"
ARGS_CASES = [
    ArgsCase("store_memory", {"content": "note"}, True),
    ArgsCase("store_memory", {"content": "n", "title": "X", "tags": ["a"]}, True),
    ArgsCase("store_memory", {}, False),
    ArgsCase("store_memory", {"content": "x" * 8_001}, False, "at most 8000 characters"),
    ArgsCase("store_memory", {"content": "n", "type": "web_content"}, False, "has no argument 'type'"),
    ArgsCase("store_memory", {"content": "n", "tags": "a,b"}, False),
    ArgsCase("store_memory", {"content": "n", "tags": [f"t{i}" for i in range(11)]}, False, "at most 10 items"),
    ArgsCase("store_memory", {"content": "n", "tags": ["x" * 41]}, False, "at most 40 characters"),
    ArgsCase("store_memory", {"content": "n", "title": "t" * 201}, False, "at most 200 characters"),
    ArgsCase("retrieve_memory", {"id": ID}, True),
    ArgsCase("retrieve_memory", {"id": ID, "around": "refund", "page": 2}, True),
    ArgsCase("retrieve_memory", {"id": ID, "lines": "-50:"}, True),
    ArgsCase("retrieve_memory", {"id": ID, "pattern": "err(or)?", "summary": False}, True),
    ArgsCase("retrieve_memory", {"transform": "full"}, False),
    ArgsCase("retrieve_memory", {"id": ID, "transform": "full"}, False, "has no argument 'transform'"),
    ArgsCase("retrieve_memory", {"id": ID, "around": "a" * 201}, False, "at most 200 characters"),
    ArgsCase("retrieve_memory", {"id": ID, "pattern": "a" * 201}, False, "at most 200 characters"),
    ArgsCase("retrieve_memory", {"id": ID, "lines": "1:2" * 9}, False, "at most 24 characters"),
    ArgsCase("retrieve_memory", {"id": ID, "page": 0}, False, "greater than or equal to 1"),
    ArgsCase("retrieve_memory", {"id": ID, "bogus": 1}, False, "has no argument 'bogus'"),
    ArgsCase("query_memory", {}, True),
    ArgsCase("query_memory", {"query": "q", "tags": ["t"], "limit": 20}, True),
    ArgsCase("query_memory", {"query": "q" * 1_001}, False, "at most 1000 characters"),
    ArgsCase("query_memory", {"limit": 21}, False, "less than or equal to 20"),
    ArgsCase("query_memory", {"limit": 0}, False, "greater than or equal to 1"),
    ArgsCase("query_memory", {"type": "file"}, False, "has no argument 'type'"),
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
        return
    with pytest.raises(ToolCallError) as err:
        action.parse_arguments(json.dumps(case.arguments))
    assert err.value.code == "invalid_arguments"
    if case.says:  # a bound the schema leaves to the tool: its error states it
        assert validator.is_valid(case.arguments)
        assert case.says in str(err.value)
    else:  # a wrong shape (a required argument missing, a wrong type): the schema refuses it too
        with pytest.raises(SchemaValidationError):
            validator.validate(case.arguments)


def test_toolkit_lists_the_three_tools(embedded_memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(embedded_memory)
    assert toolkit.names == TOOL_NAMES
    assert [tool["function"]["name"] for tool in toolkit.tool_definitions()] == TOOL_NAMES
    assert [tool["name"] for tool in toolkit.anthropic_tool_definitions()] == TOOL_NAMES
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
    # strict JSON types: a boolean is never 1, a digit string never a number (issue #37)
    ErrorCase("query limit true", "query_memory", '{"limit": true}',
              "invalid_arguments", ("'limit' = true", "valid integer")),
    ErrorCase("query limit as a digit string", "query_memory", {"limit": "2"},
              "invalid_arguments", ("'limit' = \"2\"", "valid integer")),
    ErrorCase("query limit with a fraction", "query_memory", {"limit": 2.5},
              "invalid_arguments", ("'limit' = 2.5", "valid integer")),
    ErrorCase("retrieve page false", "retrieve_memory", {"id": "{text}", "page": False},
              "invalid_arguments", ("'page' = false", "valid integer")),
    ErrorCase("summary as 1", "retrieve_memory", {"id": "{text}", "summary": 1},
              "invalid_arguments", ("'summary' = 1", "valid boolean")),
    ErrorCase("query too long", "query_memory", {"query": "q" * 5_000},
              "invalid_arguments", ("'query'", "at most 1000 characters")),
    ErrorCase("too many query tags", "query_memory", {"tags": [f"t{i}" for i in range(10_000)]},
              "invalid_arguments", ("'tags'", "at most 10 items")),
]


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


def test_an_integer_argument_takes_a_whole_number_written_with_a_fraction(
        error_memory: tuple[AgentMemory, dict[str, str]]) -> None:
    """JSON Schema's ``integer`` (the type the schema sends) is any number with a zero fractional
    part: ``2.0`` is 2, as ``2`` is; ``true`` never is (above)."""
    toolkit = MemoryToolkit(error_memory[0])
    for limit in ("1", "1.0", "1e0"):
        result = toolkit.dispatch("query_memory", f'{{"limit": {limit}}}')
        assert result.ok and len(result.data["hits"]) == 1, result.content
    single = MemoryToolkit(error_memory[0], form="single").dispatch("memory", {"op": "query", "limit": 1.0})
    assert single.ok and len(single.data["hits"]) == 1, single.content


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
    # the same note again (a model repeating itself, a script run twice) is the item kept
    again = toolkit.dispatch("store_memory", json.dumps(arguments, ensure_ascii=False))
    assert again.ok and again.data["id"] == stored.data["id"] and again.data["stored_before"]
    assert again.content.startswith(f"Already stored as {stored.data['id']}") and not stored.data["stored_before"]
    other = toolkit.dispatch("store_memory", {**arguments, "tags": ["finance"]})  # other tags: another note
    assert other.ok and other.data["id"] != stored.data["id"] and not other.data["stored_before"]
    assert len(embedded_memory.records()) == 2


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
