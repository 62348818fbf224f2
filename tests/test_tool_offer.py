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
from agent_memory.kernel.assembler import LLMRequestAssembler, RequestPackage
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.llm.chat import ChatResult, Usage
from agent_memory.models.messages import Message
from agent_memory.presentation.offer import MemoryTools, OfferState, ToolOffer, load_toolkit
from agent_memory.pricing import PriceModel
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
    assert names(toolkit.tool_definitions(state)) == expected
    assert [tool["name"] for tool in toolkit.anthropic_tool_definitions(state)] == expected
    assert names(toolkit.tool_definitions()) == ["store_memory", "retrieve_memory", "query_memory"]  # no state: all


def test_every_tool_answers_even_when_not_offered(memory: AgentMemory) -> None:
    toolkit = MemoryToolkit(memory)  # nothing offered in the empty state
    item_id = memory.store("kept")
    assert toolkit.tool_definitions(OfferState()) == []
    assert toolkit.dispatch("retrieve_memory", {"id": item_id}).ok  # a model may call a tool it saw before


def test_single_form_is_one_valid_smaller_tool(memory: AgentMemory) -> None:
    count = default_token_counter().count
    separate, single = MemoryToolkit(memory), MemoryToolkit(memory, form="single")
    (tool,) = single.tool_definitions()
    params = tool["function"]["parameters"]
    Draft202012Validator.check_schema(params)
    assert tool["function"]["name"] == "memory" and params["properties"]["op"]["enum"] == ["retrieve", "store", "query"]
    assert "id" not in params.get("required", [])  # op decides what is required
    assert count(json.dumps(single.tool_definitions())) < count(json.dumps(separate.tool_definitions()))
    # only retrieving offered: no op argument at all
    (citing,) = single.tool_definitions(OfferState(citing=True))
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
    assert names(toolkit.tool_definitions(OfferState())) == ["memory"]
    with pytest.raises(ConfigurationError, match="no memory toolkit"):
        load_toolkit(memory, group="agent_memory.no_such_group")


# -- the tools list under prompt caching ----------------------------------------------------------

def _priced_assembler(path: Path, prices: PriceModel | None) -> tuple[MemoryManager, LLMRequestAssembler]:
    from actions import MemoryToolkit

    memory = AgentMemory("cached", path, config=MemoryConfig(index_on_store=False))
    limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=1_000, safety_margin_tokens=0)
    system = "You are an analyst. " + " ".join(f"rule{i}." for i in range(1_500))  # a cached first prompt
    manager = MemoryManager(memory, system_prompt=system, limits=limits, prices=prices)
    return manager, LLMRequestAssembler(manager, toolkit=MemoryToolkit(memory, manager=manager))


def _answer(assembler: LLMRequestAssembler, package: RequestPackage, text: str) -> None:
    assembler.commit(package, ChatResult(message=Message(role="assistant", content=text), usage=Usage(),
                                         finish_reason="stop", model="claude-sonnet-4-6"))


@pytest.mark.parametrize("priced", [True, False], ids=["sonnet", "tokens"])
def test_under_a_price_model_the_tools_list_changes_only_when_the_prompt_is_rewritten(
        tmp_path: Path, priced: bool) -> None:
    """Query Memory becomes usable when memory holds items the prompt does not show (a sub-agent's
    results in a shared memory). Priced, adding it mid-conversation would rewrite the whole cached
    prompt (tools come first), so it joins with the next rewrite, the kernel's compaction; by
    tokens alone it joins at once."""
    prices = PriceModel.lookup("claude-sonnet-4-6", provider="anthropic") if priced else None
    manager, assembler = _priced_assembler(tmp_path, prices)
    manager.ingest_user_message("Compare the two reports.")
    first = assembler.prepare_request()
    names = [tool["function"]["name"] for tool in first.tool_definitions]
    assert names == []  # nothing to cite yet: no offer, priced or not (nothing for it to pay back with)
    _answer(assembler, first, "Looking.")
    manager.memory.store("A sub-agent's finding: revenue rose 4% in Q3.", tags=["sub-agent"])  # hidden from the prompt
    manager.ingest_user_message("And the other one?")
    second = assembler.prepare_request()
    assert second.offer.hidden_items is (not priced)
    assert [tool["function"]["name"] for tool in second.tool_definitions] == (names if priced else ["query_memory"])
    _answer(assembler, second, "Still looking.")
    manager.compact()  # a rewrite of the prompt: the tools list may change with it
    manager.ingest_user_message("Go on.")
    third = assembler.prepare_request()
    assert third.offer.hidden_items
    assert "query_memory" in [tool["function"]["name"] for tool in third.tool_definitions]
