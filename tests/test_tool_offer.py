"""Which memory tools are offered when, the one-tool ``memory`` form, and finding the toolkit by
entry point (as the replay and the agent loop do, without importing ``actions``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from actions import MemoryToolkit, default_actions
from actions.combined import CombinedMemoryAction
from agent_memory import AgentMemory, ConfigurationError, MemoryConfig
from agent_memory.presentation.offer import MemoryTools, OfferState, ToolOffer, load_toolkit
from agent_memory.tokens import default_token_counter


@pytest.fixture
def memory(tmp_path: Path) -> AgentMemory:
    return AgentMemory("offer", tmp_path, config=MemoryConfig(index_on_store=False))


def names(tools: list[dict]) -> list[str]:
    return [tool["function"]["name"] for tool in tools]


@pytest.mark.parametrize(
    ("offer", "state", "expected"),
    [
        (ToolOffer(), OfferState(), []),
        (ToolOffer(), OfferState(citing=True), ["retrieve_memory"]),
        (ToolOffer(), OfferState(hidden_items=True), ["query_memory"]),
        (ToolOffer(), OfferState(citing=True, hidden_items=True), ["retrieve_memory", "query_memory"]),
        (ToolOffer(always=frozenset({"store"})), OfferState(), ["store_memory"]),
        (ToolOffer(always=frozenset({"store"})), OfferState(citing=True), ["store_memory", "retrieve_memory"]),
        (ToolOffer(mode="all"), OfferState(), ["store_memory", "retrieve_memory", "query_memory"]),
    ],
)
def test_tools_are_offered_when_usable(memory: AgentMemory, offer: ToolOffer, state: OfferState,
                                       expected: list[str]) -> None:
    toolkit = MemoryToolkit(memory, offer=offer)
    assert names(toolkit.openai_tools(state)) == expected
    assert [tool["name"] for tool in toolkit.anthropic_tools(state)] == expected
    assert names(toolkit.openai_tools()) == ["store_memory", "retrieve_memory", "query_memory"]  # no state: all


def test_every_tool_answers_even_when_not_offered(memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(memory)  # nothing offered in the empty state
    item_id = memory.store("kept")
    assert toolkit.openai_tools(OfferState()) == []
    assert toolkit.dispatch("retrieve_memory", {"id": item_id}).ok  # a model may call a tool it saw before


def test_single_form_is_one_valid_smaller_tool(memory: AgentMemory) -> None:
    count = default_token_counter().count
    separate, single = MemoryToolkit(memory), MemoryToolkit(memory, form="single")
    (tool,) = single.openai_tools()
    params = tool["function"]["parameters"]
    Draft202012Validator.check_schema(params)
    assert tool["function"]["name"] == "memory" and params["properties"]["op"]["enum"] == ["retrieve", "store", "query"]
    assert "id" not in params.get("required", [])  # op decides what is required
    assert count(json.dumps(single.openai_tools())) < count(json.dumps(separate.openai_tools()))
    # only retrieving offered: no op argument at all
    (citing,) = single.openai_tools(OfferState(citing=True))
    assert "op" not in citing["function"]["parameters"]["properties"]
    assert "memory(" in citing["function"]["description"]
    assert single.names == ["memory"] and single.get("retrieve_memory") is None


def test_single_form_dispatches_each_operation(memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(memory, form="single")
    stored = toolkit.dispatch("memory", {"op": "store", "content": "line 1\nline 2\nline 3", "tags": ["n"]})
    assert stored.ok and 'memory(id="' in stored.content
    item_id = stored.data["id"]
    read = toolkit.dispatch("memory", {"id": item_id, "lines": "1:2"})  # op defaults to retrieve
    assert read.ok and read.content.endswith("line 2")
    listed = toolkit.dispatch("memory", {"op": "query", "tags": ["n"]})
    assert listed.ok and [hit["id"] for hit in listed.data["hits"]] == [item_id]
    assert f'memory(id="{item_id}")' in listed.content
    stray = toolkit.dispatch("memory", {"op": "store", "content": "x", "around": "y"})
    assert stray.error == "invalid_arguments" and "'around' does not apply to op=\"store\"" in stray.content
    assert len(memory) == 1  # the refused call stored nothing
    missing = toolkit.dispatch("memory", {"op": "retrieve"})
    assert missing.error == "invalid_arguments" and "'id' is missing" in missing.content
    assert toolkit.dispatch("memory", {"op": "delete"}).error == "invalid_arguments"


def test_single_form_next_page_names_the_memory_tool(tmp_path: Path) -> None:
    memory = AgentMemory("p", tmp_path, config=MemoryConfig(index_on_store=False, retrieve_max_tokens=300))
    item_id = memory.store("\n".join(f"line {i} with some words" for i in range(400)))
    result = MemoryToolkit(memory, form="single").dispatch("memory", {"id": item_id})
    assert result.ok and result.content.splitlines()[-1] == f'Next page: memory(id="{item_id}", page=2)'


def test_combined_action_needs_distinct_capabilities() -> None:
    store = default_actions()[0]
    with pytest.raises(ValueError):
        CombinedMemoryAction([store, store])
    with pytest.raises(ValueError):
        CombinedMemoryAction([])


def test_toolkit_is_found_by_entry_point(memory: AgentMemory) -> None:
    toolkit = load_toolkit(memory, offer=ToolOffer(mode="all"), form="single")
    assert isinstance(toolkit, MemoryToolkit) and isinstance(toolkit, MemoryTools)
    assert names(toolkit.openai_tools(OfferState())) == ["memory"]
    with pytest.raises(ConfigurationError, match="no memory toolkit"):
        load_toolkit(memory, group="agent_memory.no_such_group")
