"""Prompt caching on the provider side (issue 15): where AnthropicRenderer places ``cache_control``
breakpoints, the cache reads and writes each API reports, and a MemoryAgent's usage report priced
from the price table.

The agent runs through the real ``anthropic`` SDK against FakeLLMServer on loopback, whose
Anthropic route models the prompt cache from the requests (breakpoints, prefix equality, the
minimum length, the 20-block look-back; see its docstring): a request without breakpoints reads
nothing, so the reads the agent reports come from the breakpoints the renderer placed.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import anthropic
import anthropic.types as anthropic_types
import pytest
from pydantic import TypeAdapter

from agent_memory import AgentConfig, MemoryAgent, MemoryConfig, Message, PriceModel, ToolCall
from agent_memory.agent.tools import tool
from agent_memory.llm.chat import AnthropicChatModel, OpenAIChatModel, OpenAIResponsesModel, Usage
from agent_memory.llm.renderers import MAX_CACHE_BREAKPOINTS, AnthropicRenderer
from agent_memory.observers import NoticeRecorder, LLMCalled
from agent_memory.presentation.offer import ToolOffer
from agent_memory.pricing import BilledTokens
from agent_memory.testing import FakeLLMServer, ScriptedReply, ScriptedToolCall, ScriptedUsage

MARK = {"type": "ephemeral"}
TOOLS = [
    {"type": "function", "function": {"name": "search", "description": "Search.",
                                      "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "open_page", "parameters": {"type": "object", "properties": {}}}},
]


def loop(calls: int, *, system: bool = True, parallel: int = 1) -> list[Message]:
    """A tool loop: the task, then ``calls`` answers that each call ``parallel`` tools, with their
    results."""
    messages = [Message(role="system", content="You research.")] if system else []
    messages.append(Message(role="user", content="Find the answer."))
    for n in range(calls):
        ids = [f"c{n}_{i}" for i in range(parallel)]
        messages.append(Message(role="assistant", content=f"Step {n}.",
                                tool_calls=tuple(ToolCall(id=i, name="search", input={"q": i}) for i in ids)))
        messages += [Message(role="tool", tool_call_id=i, content=f"result {i}") for i in ids]
    return messages


def marked(payload: dict[str, Any]) -> list[tuple[str, ...]]:
    """Where the payload carries ``cache_control``: ("tools", i), ("system", i), ("messages", m, b)."""
    where: list[tuple[str, ...]] = []
    for i, spec in enumerate(payload.get("tools", [])):
        if "cache_control" in spec:
            where.append(("tools", str(i)))
    system = payload.get("system")
    for i, block in enumerate(system if isinstance(system, list) else []):
        if "cache_control" in block:
            where.append(("system", str(i)))
    for m, message in enumerate(payload["messages"]):
        for b, block in enumerate(message["content"] if isinstance(message["content"], list) else []):
            if "cache_control" in block:
                assert block["cache_control"] == MARK
                where.append(("messages", str(m), str(b)))
    return where


def last_block(payload: dict[str, Any], message: int = -1) -> tuple[str, ...]:
    messages = payload["messages"]
    m = message % len(messages)
    return ("messages", str(m), str(len(messages[m]["content"]) - 1))


def unmarked(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [unmarked(v) for v in value]
    return value


ADAPTERS = {name: TypeAdapter(kind) for name, kind in (
    ("message", anthropic_types.MessageParam), ("tool", anthropic_types.ToolParam),
    ("system", anthropic_types.TextBlockParam))}


def conforms(payload: dict[str, Any]) -> None:
    """Every piece validates against the SDK's own request types (cache_control included)."""
    for message in payload["messages"]:
        ADAPTERS["message"].validate_python(message)
        for block in message["content"]:
            assert isinstance(block, dict)
    for spec in payload.get("tools", []):
        ADAPTERS["tool"].validate_python(spec)
    for block in payload.get("system", []):
        ADAPTERS["system"].validate_python(block)


# -- where the breakpoints go ------------------------------------------------------------------------


def test_a_tool_loop_gets_four_breakpoints_system_previous_call_last_answer_and_last_message() -> None:
    payload = AnthropicRenderer().render(loop(3), tool_definitions=TOOLS, model="m", max_tokens=8)
    conforms(payload)
    assert sorted(marked(payload)) == sorted([
        ("system", "0"),  # tools + system
        last_block(payload, -3),  # the results before the last answer: the previous call's end
        last_block(payload, -2),  # the last answer: where a swap of the newest results parts the next prompt
        last_block(payload, -1),  # the last message: the next call reads all of this prompt
    ])
    assert payload["system"] == [{"type": "text", "text": "You research.", "cache_control": MARK}]
    # with fewer places (the first call: no answer yet) the last tool gets one
    first = AnthropicRenderer().render(loop(0), tool_definitions=TOOLS)
    assert sorted(marked(first)) == sorted([("tools", "1"), ("system", "0"), last_block(first, -1)])


def test_the_previous_breakpoint_is_exactly_where_the_previous_call_put_its_last_one() -> None:
    """What makes a tool loop cached: call k+1's prompt starts with call k's prompt (markers left
    out), and marks the block call k marked last, however many blocks the last step added (Anthropic
    looks back only 20 blocks from a breakpoint)."""
    render = AnthropicRenderer().render
    for parallel in (1, 12):  # 12 parallel calls add 25 blocks in one step
        before, after = render(loop(2, parallel=parallel), tool_definitions=TOOLS), render(loop(3, parallel=parallel), tool_definitions=TOOLS)
        assert unmarked(after["system"]) == unmarked(before["system"])
        assert unmarked(after["tools"]) == unmarked(before["tools"])
        assert unmarked(after["messages"][:len(before["messages"])]) == unmarked(before["messages"])
        assert last_block(before) in marked(after)


def test_no_tools_and_an_empty_tools_list_mark_the_system_and_the_messages() -> None:
    for tools in (None, []):
        payload = AnthropicRenderer().render(loop(2), tool_definitions=tools)
        assert "tools" not in payload
        assert sorted(marked(payload)) == sorted([("system", "0"), last_block(payload, -3), last_block(payload, -2),
                                                  last_block(payload)])


def test_without_a_system_prompt_the_last_tool_holds_the_prefix_breakpoint() -> None:
    payload = AnthropicRenderer().render(loop(2, system=False), tool_definitions=TOOLS)
    assert "system" not in payload
    assert sorted(marked(payload)) == sorted([("tools", "1"), last_block(payload, -3), last_block(payload, -2),
                                              last_block(payload)])


def test_a_swap_of_the_newest_results_reads_the_prompt_up_to_them(server: FakeLLMServer) -> None:
    """``full_once`` shows a result in full once and cites it in the next call: the next prompt
    parts from this one right after the last answer, where this prompt has a breakpoint."""
    render = AnthropicRenderer().render
    big = " ".join(f"w{i}" for i in range(1_200))  # past the 1,024-token minimum
    shown = [Message(role="system", content=big), *loop(2)[1:]]
    cited = [*shown[:-1], shown[-1].model_copy(update={"content": "[search · 4 tokens · retrieve_memory(id=\"m\")]"}),
             Message(role="assistant", content="Step 2.", tool_calls=(ToolCall(id="c2", name="search", input={"q": 2}),)),
             Message(role="tool", tool_call_id="c2", content="result c2")]
    client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="x", max_retries=0, timeout=10)
    usages = []
    for messages in (shown, cited):
        server.enqueue("ok")
        payload = render(messages, tool_definitions=TOOLS)
        usages.append(client.messages.create(model="claude-sonnet-4-6", max_tokens=8, **payload).usage)
    first, second = usages
    whole = first.input_tokens + first.cache_creation_input_tokens + first.cache_read_input_tokens
    # all of the first prompt but its last block (the result "result c1_0", 2 words in the fake's
    # units), which the second call shows as its citation
    assert second.cache_read_input_tokens == whole - 2


@pytest.mark.parametrize("system", [True, False])
@pytest.mark.parametrize("tools", [TOOLS, None])
@pytest.mark.parametrize("automatic", [False, True])
def test_never_more_than_four_breakpoints_and_the_last_message_always_marked(
        system: bool, tools: list[dict[str, Any]] | None, automatic: bool) -> None:
    """Every prefix of a long conversation (up to five candidate places: tools, system, the last
    message, the last answer, the previous call's end): four breakpoints at most, three when the request asks for automatic caching (which
    marks one block itself); the last message is marked whenever the renderer marks it."""
    conversation = loop(6, system=system, parallel=2) + [Message(role="user", content="Go on.")]
    options: dict[str, Any] = {"cache_control": MARK} if automatic else {}
    for end in range(1, len(conversation) + 1):
        payload = AnthropicRenderer().render(conversation[:end], tool_definitions=tools, **options)
        conforms(payload)
        where = marked(payload)
        assert len(where) <= MAX_CACHE_BREAKPOINTS - automatic
        if payload["messages"]:
            assert last_block(payload) in where
        if len(payload["messages"]) >= 3 and system and tools:  # four or five candidates: the last tool goes first
            assert len(where) == MAX_CACHE_BREAKPOINTS - automatic
            assert ("tools", "1") not in where or (not automatic and len({*where} - {("tools", "1")}) == 3)
        assert payload.get("cache_control") == (MARK if automatic else None)


def test_a_trailing_system_note_stays_in_place_unmarked_and_leaves_the_system_prompt_alone() -> None:
    """The kernel's soft-pressure note comes last and changes every call: in ``system`` it would
    change the start of every prompt and so the whole cached prefix."""
    note = Message(role="system", content="[Memory note: 63% of the budget.]")
    plain = AnthropicRenderer().render(loop(2), tool_definitions=TOOLS)
    noted = AnthropicRenderer().render([*loop(2), note], tool_definitions=TOOLS)
    assert noted["system"] == plain["system"] and noted["tools"] == plain["tools"]
    assert noted["messages"][-1]["content"][-1] == {"type": "text", "text": note.content}
    assert noted["messages"][:-1] == plain["messages"][:-1]
    assert noted["messages"][-1]["content"][:-1] == plain["messages"][-1]["content"]  # the same breakpoint
    assert sorted(marked(noted)) == sorted(marked(plain))
    old = AnthropicRenderer(cache_breakpoints=False).render([*loop(2), note], tool_definitions=TOOLS)
    assert old["system"] == f"You research.\n\n{note.content}"  # without caching: as before


def test_breakpoints_off_sends_no_cache_control_at_all() -> None:
    payload = AnthropicRenderer(cache_breakpoints=False).render(loop(3), tool_definitions=TOOLS)
    assert "cache_control" not in json.dumps(payload)
    assert payload["system"] == "You research."
    assert AnthropicChatModel("claude-sonnet-4-6", api_key="x", cache_breakpoints=False).render(loop(1))[
        "system"] == "You research."


# -- usage from each API ------------------------------------------------------------------------------


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer() as fake:
        yield fake


CONVERSATION = [Message(role="system", content="You are terse."), Message(role="user", content="Hi.")]


@pytest.mark.parametrize(("kind", "usage", "expected", "billed"), [
    ("openai_chat", ScriptedUsage(1200, 7, cached_tokens=1024),
     Usage(prompt_tokens=1200, completion_tokens=7, cached_tokens=1024), BilledTokens(176, 0, 1024, 7)),
    ("openai_responses", ScriptedUsage(1300, 9, cached_tokens=1152),
     Usage(prompt_tokens=1300, completion_tokens=9, cached_tokens=1152), BilledTokens(148, 0, 1152, 9)),
    # On the wire: input_tokens 50, cache_read_input_tokens 1040, cache_creation_input_tokens 10.
    ("anthropic", ScriptedUsage(1100, 5, cached_tokens=1040, cache_write_tokens=10),
     Usage(prompt_tokens=1100, completion_tokens=5, cached_tokens=1040, cache_write_tokens=10),
     BilledTokens(50, 10, 1040, 5)),
])
def test_each_api_reports_cache_reads_and_writes(kind: str, usage: ScriptedUsage, expected: Usage,
                                                  billed: BilledTokens, server: FakeLLMServer) -> None:
    model: Any = {
        "openai_chat": lambda: OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="x", max_retries=0),
        "openai_responses": lambda: OpenAIResponsesModel("gpt-4o", base_url=server.base_url, api_key="x",
                                                         max_retries=0),
        "anthropic": lambda: AnthropicChatModel("claude-sonnet-4-6", base_url=server.anthropic_base_url,
                                                api_key="x", max_retries=0),
    }[kind]()
    server.enqueue(ScriptedReply(content="ok", usage=usage))
    result = model.generate(CONVERSATION)
    assert result.usage == expected
    assert result.usage.billed_tokens() == billed
    assert billed.input_tokens == expected.prompt_tokens


def test_billed_tokens_needs_both_counts_and_keeps_reads_and_writes_within_the_prompt() -> None:
    assert Usage(completion_tokens=3).billed_tokens() is None
    assert Usage(prompt_tokens=10).billed_tokens() is None
    assert Usage(prompt_tokens=10, completion_tokens=1).billed_tokens() == BilledTokens(10, 0, 0, 1)
    assert Usage(prompt_tokens=10, completion_tokens=1, cached_tokens=8, cache_write_tokens=5).billed_tokens() == \
        BilledTokens(0, 2, 8, 1)


# -- the fake's prompt cache ---------------------------------------------------------------------------


def anthropic_usage(server: FakeLLMServer, **request: Any) -> Any:
    client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="x", max_retries=0, timeout=10)
    server.enqueue("ok")
    return client.messages.create(model="claude-sonnet-4-6", max_tokens=8, **request).usage


def text(words: int, *, mark: bool = False, tag: str = "w") -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": " ".join(f"{tag}{i}" for i in range(words))}
    return {**block, "cache_control": MARK} if mark else block


def test_the_fake_caches_only_marked_prefixes_long_enough_and_within_the_look_back(server: FakeLLMServer) -> None:
    system = [text(1100, mark=True, tag="s")]
    first = anthropic_usage(server, system=system, messages=[{"role": "user", "content": "one two"}])
    assert (first.cache_creation_input_tokens, first.cache_read_input_tokens, first.input_tokens) == (1100, 0, 2)
    again = anthropic_usage(server, system=system, messages=[{"role": "user", "content": "three"}])
    assert (again.cache_creation_input_tokens, again.cache_read_input_tokens, again.input_tokens) == (0, 1100, 1)
    unmarked_system = [text(1100, tag="s")]
    nothing = anthropic_usage(server, system=unmarked_system, messages=[{"role": "user", "content": "three"}])
    assert (nothing.cache_creation_input_tokens, nothing.cache_read_input_tokens) == (0, 0)  # no breakpoint
    short = anthropic_usage(server, system=[text(500, mark=True, tag="t")], messages=[{"role": "user", "content": "x"}])
    assert (short.cache_creation_input_tokens, short.cache_read_input_tokens, short.input_tokens) == (0, 0, 501)
    # The only breakpoint 25 blocks after the cached prefix misses it; 10 blocks after finds it.
    for extra, read in ((25, 0), (10, 1100)):
        blocks = [text(2, tag=f"b{extra}_{i}") for i in range(extra)]
        blocks[-1] = {**blocks[-1], "cache_control": MARK}
        usage = anthropic_usage(server, system=unmarked_system, messages=[{"role": "user", "content": blocks}])
        assert usage.cache_read_input_tokens == read
        assert usage.cache_creation_input_tokens == 1100 + 2 * extra - read


# -- a MemoryAgent on Anthropic ---------------------------------------------------------------------------

LONG_SYSTEM = "You research. " + " ".join(f"rule{i}." for i in range(1100))  # past the 1,024 minimum


@tool
def lookup(topic: str) -> str:
    """Look a topic up.

    Args:
        topic: what to look up.
    """
    return f"{topic}: " + " ".join(f"fact{i}" for i in range(300))


def call(name: str, **arguments: object) -> ScriptedReply:
    return ScriptedReply(content=f"Calling {name}.", tool_calls=(ScriptedToolCall(name, json.dumps(arguments)),))


def anthropic_agent(server: FakeLLMServer, tmp_path: Path, *, model: str = "claude-sonnet-4-6",
                    **options: Any) -> tuple[MemoryAgent, NoticeRecorder]:
    recorder = NoticeRecorder()
    price_model = options.pop("price_model", None)
    chat = AnthropicChatModel(model, base_url=server.anthropic_base_url, api_key="x", max_retries=0, **options)
    agent = MemoryAgent(chat, tools=[lookup], system_prompt=LONG_SYSTEM, memory_dir=tmp_path,
                        memory_config=MemoryConfig(index_on_store=False), observers=[recorder],
                        config=AgentConfig(tool_offer=ToolOffer(mode="all")),  # one tools list from the start
                        price_model=price_model)
    server.enqueue(call("lookup", topic="tides"), call("lookup", topic="moons"), "The moon makes the tides.")
    return agent, recorder


def test_an_anthropic_agent_is_cached_and_its_usage_report_prices_reads_and_writes(
        server: FakeLLMServer, tmp_path: Path) -> None:
    agent, recorder = anthropic_agent(server, tmp_path)
    with agent:
        run = agent.run("What makes the tides?")
        # The budget checks the whole prompt: Anthropic's input_tokens plus cache reads and writes.
        assert agent.manager.context.state.last_prompt_tokens == run.steps[-1].prompt_tokens
    assert run.stopped == "answer" and len(run.steps) == 3
    requests = [r.body for r in server.received]
    for body in requests:
        assert len(marked(body)) <= MAX_CACHE_BREAKPOINTS
        assert ("system", "0") in marked(body) and last_block(body) in marked(body)
    assert ("tools", str(len(requests[0]["tools"]) - 1)) in marked(requests[0])  # a place left on the first call
    assert last_block(requests[0]) in marked(requests[1])  # the previous call's end, marked again
    assert last_block(requests[1], -2) in marked(requests[1])  # the last answer

    first, second, third = run.steps
    assert (first.cached_tokens, first.cache_write_tokens) == (0, first.prompt_tokens)  # all of it written
    # The second call reads the whole first prompt from the cache and writes only what it added.
    assert second.cached_tokens == first.prompt_tokens
    assert second.cache_write_tokens == second.prompt_tokens - first.prompt_tokens
    assert third.cached_tokens is not None and third.cached_tokens > 0
    assert run.cache_read_tokens == sum(s.cached_tokens or 0 for s in run.steps) > 0
    assert run.cache_write_tokens == sum(s.cache_write_tokens or 0 for s in run.steps)

    # Each call priced from the table, as reported: exactly PriceModel.price of its billed tokens.
    table = PriceModel.lookup("claude-sonnet-4-6", provider="anthropic", at=agent.price_model.priced_at)
    assert agent.price_model == table
    for step in run.steps:
        assert step.prompt_tokens is not None and step.completion_tokens is not None
        read, write = step.cached_tokens or 0, step.cache_write_tokens or 0
        billed = BilledTokens(step.prompt_tokens - read - write, write, read, step.completion_tokens)
        assert step.cost == table.price(billed) and step.unpriced_reason is None
    assert second.cost is not None and second.cost.cache_read_usd > 0 and second.cost.cache_write_usd > 0
    uncached = table.price(BilledTokens(uncached_input_tokens=second.prompt_tokens,
                                        output_tokens=second.completion_tokens or 0))
    assert second.cost.total_usd < uncached.total_usd  # the cache pays
    assert run.cost is not None
    assert run.cost.total_usd == sum((s.cost.total_usd for s in run.steps if s.cost is not None), Decimal(0))

    heard = [e for e in recorder.notices if isinstance(e, LLMCalled)]
    assert [(e.step, e.cache_read_tokens, e.cache_write_tokens, e.cost_usd) for e in heard] == [
        (s.index, s.cached_tokens, s.cache_write_tokens, s.cost.total_usd if s.cost else None) for s in run.steps]
    assert {e.price_model for e in heard} == {"claude-sonnet-4-6"} and {e.model for e in heard} == {"claude-sonnet-4-6"}


def test_with_breakpoints_off_nothing_is_read_from_the_cache(server: FakeLLMServer, tmp_path: Path) -> None:
    agent, _ = anthropic_agent(server, tmp_path, cache_breakpoints=False)
    with agent:
        run = agent.run("What makes the tides?")
    assert all("cache_control" not in json.dumps(r.body) for r in server.received)
    assert [(s.cached_tokens, s.cache_write_tokens) for s in run.steps] == [(0, 0)] * 3
    assert run.cost is not None and run.cost.cache_read_usd == run.cost.cache_write_usd == 0


def test_an_unknown_model_is_not_priced_and_says_why(server: FakeLLMServer, tmp_path: Path) -> None:
    agent, recorder = anthropic_agent(server, tmp_path, model="claude-test")
    with agent:
        run = agent.run("What makes the tides?")
    assert agent.price_model is None and run.cost is None
    assert all(s.cost is None and "no price for model 'claude-test'" in (s.unpriced_reason or "") for s in run.steps)
    assert run.steps[1].cached_tokens == run.steps[0].prompt_tokens  # cached all the same
    heard = [e for e in recorder.notices if isinstance(e, LLMCalled)]
    assert len(heard) == 3 and all(e.cost_usd is None and e.unpriced_reason for e in heard)


def test_a_given_price_model_prices_a_model_the_table_does_not_name(server: FakeLLMServer, tmp_path: Path) -> None:
    table = PriceModel.lookup("claude-sonnet-4-6", provider="anthropic")
    agent, _ = anthropic_agent(server, tmp_path, model="claude-test", price_model=table)
    with agent:
        run = agent.run("What makes the tides?")
    assert agent.price_model is table and run.cost is not None and run.cost.cache_read_usd > 0


def test_an_openai_agent_prices_its_cached_input(server: FakeLLMServer, tmp_path: Path) -> None:
    chat = OpenAIChatModel("gpt-4o", base_url=server.base_url, api_key="x", max_retries=0)
    server.enqueue(ScriptedReply(content="Done.", usage=ScriptedUsage(2048, 4, cached_tokens=1536)))
    with MemoryAgent(chat, memory_dir=tmp_path, memory_config=MemoryConfig(index_on_store=False)) as agent:
        run = agent.run("Say done.")
    step = run.steps[0]
    assert (step.cached_tokens, step.cache_write_tokens) == (1536, None)
    assert agent.price_model is not None and agent.price_model.model == "gpt-4o"
    assert step.cost == agent.price_model.price(BilledTokens(512, 0, 1536, 4))
