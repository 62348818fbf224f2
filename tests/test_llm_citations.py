"""LLMCitationWriter and OpenAIChatClient over real HTTP: the openai SDK against FakeOpenAIServer on
loopback (scripted answers, no model). Every failure of the model or its server must end in the
plugin citation with a reported reason, never in an exception."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent_memory import AgentMemory, AgentMemoryError, ConfigurationError, LLMError, MemoryConfig, MemoryItem
from agent_memory.errors import LLMConnectionError, LLMOutputError, LLMStatusError, LLMTimeoutError
from agent_memory.llm import LLMClient, LLMResponse, OpenAIChatClient
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.llm_citations import CitationOutcome, LLMCitationWriter, parse_llm_citation
from agent_memory.testing import FAKE_MODEL, FakeOpenAIServer, ScriptedReply, free_port
from agent_memory.tokens import TiktokenCounter

GOAL = "Find which Breton lighthouse is the tallest and when it was built"

ARTICLE = "\n\n".join(
    [
        "Lighthouses of Brittany",
        "Brittany has more lighthouses than any other region of France. Many stand on rocks far out "
        "at sea, where keepers lived for weeks before automation ended the profession in the 1990s.",
        "The Île Vierge lighthouse, finished in 1902, is 82.5 metres tall and is the tallest "
        "traditional lighthouse in Europe. Its stone tower is lined with 12,500 opaline tiles.",
        "Ar Men, built between 1867 and 1881 off the Île de Sein, took fourteen years because "
        "workers could land on the rock only a few days each summer.",
        "The Phare du Créac'h on Ouessant has one of the most powerful lights in France; its beam "
        "reaches 32 nautical miles and guides ships through the Ushant traffic separation scheme.",
    ]
    + [
        f"Paragraph {n}: the coast of Finistère counts dozens of smaller lights, beacons and "
        "leading lights that mark the channels between reefs, each listed with its range and "
        "character in the French list of lights."
        for n in range(1, 13)
    ]
)

ANSWER = {
    "summary": "An overview of Brittany's lighthouses. The Île Vierge tower is the tallest.",
    "key_facts": [
        "Île Vierge lighthouse is 82.5 m tall, the tallest traditional lighthouse in Europe.",
        "Île Vierge was finished in 1902.",
        "Ar Men took fourteen years to build (1867-1881).",
    ],
}


@pytest.fixture(scope="module")
def builder() -> CitationBuilder:
    return CitationBuilder(PluginRegistry.from_entry_points(), TiktokenCounter())


@pytest.fixture
def memory(tmp_path: Path) -> AgentMemory:
    return AgentMemory("agent", tmp_path / "memory", config=MemoryConfig(index_on_store=False))


@pytest.fixture
def item(memory: AgentMemory) -> MemoryItem:
    item_id = memory.store(
        ARTICLE, type="web_content", source="https://example.org/lighthouses", title="Lighthouses of Brittany"
    )
    return memory.get(item_id)


@pytest.fixture
def fake() -> Iterator[FakeOpenAIServer]:
    with FakeOpenAIServer() as server:
        yield server


def _compactor(url: str, builder: CitationBuilder, **kwargs: object) -> LLMCitationWriter:
    client = OpenAIChatClient(url, model=FAKE_MODEL, timeout_s=5.0)
    return LLMCitationWriter(client, builder, **{"goal": GOAL, "timeout_s": 5.0, **kwargs})  # type: ignore[arg-type]


def test_success_uses_the_llm_answer(fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem) -> None:
    fake.enqueue(json.dumps(ANSWER))
    compactor = _compactor(fake.base_url, builder)

    outcome = compactor.cite(item)

    assert outcome.used_llm and not outcome.fell_back and not outcome.cached
    assert outcome.error is None and outcome.error_kind is None
    citation = outcome.citation
    assert citation.plugin == "llm"
    assert citation.item_id == item.id
    assert "Île Vierge tower is the tallest" in citation.key_content
    assert "- Île Vierge lighthouse is 82.5 m tall" in citation.key_content
    assert citation.key_content.startswith(ANSWER["summary"])
    rendered = citation.render()
    assert f'retrieve_memory(id="{item.id}")' in rendered
    assert builder.counter.count(rendered) <= builder.max_tokens
    assert outcome.answer is not None and outcome.answer.key_facts == ANSWER["key_facts"]
    assert outcome.response is not None and outcome.response.completion_tokens == len(json.dumps(ANSWER).split())
    assert compactor.failures == []
    fake.assert_complete()

    (request,) = fake.requests
    assert request["model"] == FAKE_MODEL
    assert request["response_format"] == {"type": "json_object"}
    assert request["temperature"] == 0.0
    assert request["max_tokens"] == compactor.max_output_tokens
    system, user = request["messages"]
    assert system["role"] == "system" and "key_facts" in system["content"] and "3-5 key facts" in system["content"]
    assert user["role"] == "user"
    assert f'"{GOAL}"' in user["content"]
    assert "82.5 metres" in user["content"] and item.id in user["content"]


def test_fenced_json_and_extra_keys_are_accepted(
    fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem
) -> None:
    fake.enqueue("```json\n" + json.dumps({**ANSWER, "memory_id": item.id}) + "\n```")
    outcome = _compactor(fake.base_url, builder).cite(item)
    assert outcome.used_llm and outcome.citation.plugin == "llm"


VALID = json.dumps(ANSWER)

FALLBACKS = {
    "timeout": (ScriptedReply(content=VALID, delay_s=2.0), "timeout", "timeout"),
    "http_500": (ScriptedReply(content="model crashed", status=500), "http_status", "HTTP 500: model crashed"),
    "http_429": (
        ScriptedReply(content="rate limit reached", status=429, headers=(("retry-after", "0"),)),
        "http_status",
        "HTTP 429: rate limit reached",
    ),
    "invalid_json": (
        ScriptedReply(content="Sure! The tallest is Île Vierge (82.5 m), built 1902."),
        "invalid_output",
        "not JSON",
    ),
    "json_not_object": (ScriptedReply(content=json.dumps(ANSWER["key_facts"])), "invalid_output", "not an object"),
    "missing_key_facts": (
        ScriptedReply(content=json.dumps({"summary": "About lighthouses."})),
        "invalid_output",
        "key_facts: Field required",
    ),
    "wrong_types": (
        ScriptedReply(content=json.dumps({"summary": "", "key_facts": [{"fact": "x"}]})),
        "invalid_output",
        "fails validation",
    ),
    "template_echo": (  # what SmolLM2-135M answered to an earlier prompt with a literal example
        ScriptedReply(content=json.dumps({"summary": "<2-3 sentences>", "key_facts": ["fact", "fact"]})),
        "invalid_output",
        "copied from the prompt's template",
    ),
    "blank_facts": (
        ScriptedReply(content=json.dumps({"summary": "About lighthouses.", "key_facts": ["  ", ""]})),
        "invalid_output",
        "no non-blank fact",
    ),
}


@pytest.mark.parametrize("case", FALLBACKS, ids=list(FALLBACKS))
def test_failures_fall_back_to_the_plugin_citation(
    case: str,
    fake: FakeOpenAIServer,
    builder: CitationBuilder,
    item: MemoryItem,
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply, kind, message = FALLBACKS[case]
    fake.enqueue(reply)
    # a short timeout only where the answer is late by design: any other answer may take its time
    compactor = _compactor(fake.base_url, builder, timeout_s=0.3 if kind == "timeout" else 30.0)

    with caplog.at_level(logging.WARNING, logger="agent_memory.presentation.llm_citations"):
        outcome = compactor.cite(item)

    _assert_fallback(outcome, builder, item, kind, message)
    assert compactor.failures == [outcome]
    assert any(item.id in record.getMessage() and "fell back" in record.getMessage() for record in caplog.records)
    assert fake.calls == 1
    fake.assert_complete()
    if kind == "invalid_output":  # the answer that came back is kept for the report
        assert outcome.response is not None and outcome.response.text == reply.content


def test_connection_refused_falls_back(builder: CitationBuilder, item: MemoryItem) -> None:
    compactor = _compactor(f"http://127.0.0.1:{free_port()}/v1", builder)
    outcome = compactor.cite(item)
    _assert_fallback(outcome, builder, item, "connection", "cannot connect")
    assert outcome.response is None


def test_a_third_party_client_that_raises_anything_falls_back(builder: CitationBuilder, item: MemoryItem) -> None:
    class Broken:
        def complete(self, messages: list[dict], **kwargs: object) -> LLMResponse:
            raise RuntimeError("socket on fire")

    assert isinstance(Broken(), LLMClient)
    outcome = LLMCitationWriter(Broken(), builder).cite(item)
    _assert_fallback(outcome, builder, item, "error", "RuntimeError: socket on fire")


def _assert_fallback(
    outcome: CitationOutcome, builder: CitationBuilder, item: MemoryItem, kind: str, message: str
) -> None:
    assert not outcome.used_llm and outcome.fell_back
    assert outcome.error_kind == kind
    assert outcome.error is not None and message in outcome.error
    assert outcome.citation == builder.cite(item)
    assert outcome.citation.plugin not in (None, "llm")  # the deterministic plugin's key content
    assert outcome.answer is None


def test_cache_hit_does_not_call_the_server(
    fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem, memory: AgentMemory
) -> None:
    fake.enqueue(VALID, VALID, VALID)
    compactor = _compactor(fake.base_url, builder)

    first = compactor.cite(item)
    again = compactor.cite(item)
    assert fake.calls == 1
    assert again.cached and again.used_llm and again.citation == first.citation

    compactor.cite(item, goal="Which lighthouse is the most powerful?")  # another goal: another call
    assert fake.calls == 2
    other = memory.get(memory.store(ARTICLE + "\n\nAddendum.", type="web_content", source="https://example.org/x"))
    compactor.cite(other)  # another item
    assert fake.calls == 3
    compactor.cite(item)
    compactor.cite(item, goal="Which lighthouse is the most powerful?")
    assert fake.calls == 3
    fake.assert_complete()


def test_cache_off_and_transient_errors_call_again(
    fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem
) -> None:
    fake.enqueue(ScriptedReply(content="busy", status=503), VALID, VALID)
    compactor = _compactor(fake.base_url, builder)
    assert compactor.cite(item).error_kind == "http_status"
    assert compactor.cite(item).used_llm  # a server error is not cached: the next call retries
    assert fake.calls == 2

    uncached = _compactor(fake.base_url, builder, cache=False)
    assert not uncached.cite(item).cached
    assert fake.calls == 3


def test_invalid_answers_are_cached(fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem) -> None:
    fake.enqueue("not json")
    compactor = _compactor(fake.base_url, builder)
    first = compactor.cite(item)
    again = compactor.cite(item)
    assert fake.calls == 1
    assert again.cached and again.error == first.error and again.citation == builder.cite(item)
    assert len(compactor.failures) == 1


def test_goal_per_call_overrides_and_no_goal_is_said(
    fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem
) -> None:
    fake.enqueue(VALID, VALID)
    compactor = _compactor(fake.base_url, builder, goal=None)
    compactor.cite(item)
    compactor.cite(item, goal="Compare the ranges of Breton lights")
    first, second = (request["messages"][1]["content"] for request in fake.requests)
    assert "not stated" in first
    assert '"Compare the ranges of Breton lights"' in second


def test_long_results_are_cut_to_max_input_tokens(
    fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem
) -> None:
    fake.enqueue(VALID)
    _compactor(fake.base_url, builder, max_input_tokens=60).cite(item)
    prompt = fake.requests[0]["messages"][1]["content"]
    result = prompt.split("<result>\n", 1)[1].split("\n</result>", 1)[0]
    assert builder.counter.count(result) <= 60
    assert "Paragraph 12" not in result
    assert "The result was cut to its first 60 of" in prompt


def test_small_results_get_a_header_without_calling_the_model(
    fake: FakeOpenAIServer, builder: CitationBuilder, memory: AgentMemory
) -> None:
    small = memory.get(memory.store("42 rows", source="sql"))
    outcome = _compactor(fake.base_url, builder).cite(small)
    assert outcome.citation == builder.header(small)
    assert not outcome.used_llm and not outcome.fell_back
    assert fake.calls == 0


def test_acite(fake: FakeOpenAIServer, builder: CitationBuilder, item: MemoryItem) -> None:
    fake.enqueue(VALID)
    outcome = asyncio.run(_compactor(fake.base_url, builder).acite(item))
    assert outcome.used_llm


def test_parse_compaction() -> None:
    assert parse_llm_citation("  " + VALID + "\n").summary == ANSWER["summary"]
    twice = parse_llm_citation(json.dumps({"summary": "S.", "key_facts": ["A.", "B.", "A."]}))
    assert twice.key_facts == ["A.", "B."]
    with pytest.raises(LLMOutputError, match="template"):
        parse_llm_citation(json.dumps({"summary": "Real.", "key_facts": ["Fact 1", "B."]}))
    with pytest.raises(LLMOutputError) as info:
        parse_llm_citation("{")
    assert info.value.text == "{"


# -- OpenAIChatClient: openai errors are converted at the boundary --------------------------------


def _client(url: str) -> OpenAIChatClient:
    return OpenAIChatClient(url, model=FAKE_MODEL, timeout_s=5.0)


def test_client_returns_text_and_usage(fake: FakeOpenAIServer) -> None:
    fake.enqueue("Hello there")
    response = _client(fake.base_url).complete(
        [{"role": "user", "content": "say hi"}], max_tokens=5, temperature=0.0
    )
    assert response == LLMResponse(text="Hello there", prompt_tokens=2, completion_tokens=2, finish_reason="stop")
    assert "response_format" not in fake.requests[0]


@pytest.mark.parametrize(
    ("reply", "error", "builtin"),
    [
        (ScriptedReply(content="x", delay_s=2.0), LLMTimeoutError, TimeoutError),
        (ScriptedReply(content="teapot", status=418), LLMStatusError, None),
        (ScriptedReply(content="slow down", status=429), LLMStatusError, None),
        (ScriptedReply(content="boom", status=500), LLMStatusError, None),
        (ScriptedReply(content=""), LLMOutputError, ValueError),
    ],
    ids=["timeout", "418", "429", "500", "empty"],
)
def test_client_errors_are_llm_errors(
    fake: FakeOpenAIServer, reply: ScriptedReply, error: type[LLMError], builtin: type[Exception] | None
) -> None:
    fake.enqueue(reply)
    with pytest.raises(error) as info:
        _client(fake.base_url).complete([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0.0,
                                        timeout_s=0.3 if error is LLMTimeoutError else 30.0)  # late by design only there
    assert isinstance(info.value, AgentMemoryError)
    if builtin is not None:
        assert isinstance(info.value, builtin)
    if isinstance(info.value, LLMStatusError):
        assert info.value.status_code == reply.status
        assert reply.content in str(info.value)


def test_client_connection_refused() -> None:
    with pytest.raises(LLMConnectionError) as info:
        _client(f"http://127.0.0.1:{free_port()}/v1").complete(
            [{"role": "user", "content": "hi"}], max_tokens=5, temperature=0.0
        )
    assert info.value.kind == "connection"
    assert info.value.__cause__ is not None  # converted with `from exc`


def test_fake_server_without_a_scripted_reply_says_so(fake: FakeOpenAIServer) -> None:
    with pytest.raises(LLMStatusError, match="no scripted reply left"):
        _client(fake.base_url).complete([{"role": "user", "content": "hi"}], max_tokens=5, temperature=0.0)
    fake.enqueue("unused")
    with pytest.raises(AssertionError, match="1 scripted reply never requested"):
        fake.assert_complete()


def test_misconfiguration_raises(builder: CitationBuilder) -> None:
    client = OpenAIChatClient("http://127.0.0.1:9/v1", model=FAKE_MODEL)
    with pytest.raises(ConfigurationError):
        LLMCitationWriter(client, builder, timeout_s=0)


def test_the_kernel_uses_llm_written_citations(fake: FakeOpenAIServer, builder: CitationBuilder, tmp_path: Path) -> None:
    from agent_memory.kernel.manager import MemoryManager
    from agent_memory.models.messages import Message, ToolCall

    memory = AgentMemory("k", tmp_path / "k", config=MemoryConfig(index_on_store=False))
    manager = MemoryManager(memory, system_prompt="S", citations=_compactor(fake.base_url, builder))
    manager.ingest_user_message("Which Breton lighthouse is the tallest?")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="f", name="fetch"),)))
    ref = manager.ingest_tool_result("f", ARTICLE)
    fake.enqueue(json.dumps(ANSWER))
    manager.commit(manager.build_prompt())  # the first call shows the page in full
    manager.ingest_user_message("And when was it built?")
    cited = manager.build_prompt().messages[3].content
    assert f'retrieve_memory(id="{ref}")' in cited and "Île Vierge tower is the tallest" in cited
    assert fake.calls == 1


def test_clearing_the_kernel_forgets_the_conversation_and_what_was_shown(tmp_path: Path) -> None:
    from agent_memory.kernel.manager import MemoryManager
    from agent_memory.models.messages import Message, ToolCall

    memory = AgentMemory("c", tmp_path / "c", config=MemoryConfig(index_on_store=False))
    manager = MemoryManager(memory, system_prompt="S")
    manager.ingest_user_message("hello")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="x", name="t"),)))
    manager.ingest_tool_result("x", ARTICLE)
    manager.commit(manager.build_prompt())
    manager.clear()
    assert len(memory) == 0 and manager.traces.turn_ids() == []
    assert [m.content for m in manager.build_prompt().messages] == ["S"]
    assert manager.presentation.state.calls == 0 and manager.ingest_user_message("again") == "turn_0001"
