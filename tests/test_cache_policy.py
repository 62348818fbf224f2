"""Cache-aware presentation (issue 15): under a price model, a swap of a result for its citation,
and the start of citing, happen only when they pay with prompt caching; the kernel's compaction is
a rewrite that makes every due swap; net tokens never exceed the naive prompt's.

Decisions are asserted (what is shown in full, what is cited, when citing starts), never costs at
rounding precision. Real AgentMemory, real citations, real price table (genai-prices)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.kernel.budget import ModelLimits
from agent_memory.kernel.manager import MemoryManager
from agent_memory.models.messages import Message, ToolCall
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import ContextBuilder
from agent_memory.presentation.rewrites import (
    CacheRates,
    PromptLayout,
    ReadBack,
    Swap,
    decide_rewrite,
    offer_from_first_call,
    read_back_cost,
    remaining_calls,
)
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel
from agent_memory.prompt_tokens import message_tokens
from agent_memory.replay.strategies import parse_strategy

ANTHROPIC = PriceModel.lookup("claude-sonnet-4-6", provider="anthropic")
GPT_4O = PriceModel.lookup("gpt-4o", provider="openai")
GPT_5 = PriceModel.lookup("gpt-5", provider="openai")
HEADLINE = pytest.mark.parametrize("prices", [ANTHROPIC, GPT_4O, GPT_5], ids=lambda m: m.label)


@pytest.fixture
def memory(tmp_path: Path) -> AgentMemory:
    return AgentMemory("cache", tmp_path / "memory", config=MemoryConfig(index_on_store=False))


def builder(memory: AgentMemory, prices: PriceModel | None, *, fixed_tokens: int = 0, offer_cost_tokens: int = 0,
            **policy: object) -> ContextBuilder:
    return ContextBuilder(memory, policy=PresentationPolicy(**policy), prices=prices, fixed_tokens=fixed_tokens,
                          offer_cost_tokens=offer_cost_tokens,
                          citations=CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens))


def sent(b: ContextBuilder, history: list[Message]) -> list[Message]:
    """One LLM call of a loop: the messages built for ``history``, committed as answered."""
    built = b.build(history)
    b.commit(built)
    return built.messages


def rows(name: str, n: int) -> str:
    """A tool result of about ``12 * n`` tokens."""
    return "\n".join(f"{name} row {j}: value {j * 7} status ok region eu" for j in range(n))


def call_and_result(memory: AgentMemory, history: list[Message], name: str, text: str) -> str:
    ref = memory.store(text, source=name)
    history.append(Message(role="assistant", tool_calls=(ToolCall(id=f"c_{name}", name=name),)))
    history.append(Message(role="tool", tool_call_id=f"c_{name}", name=name, tool_result_ref=ref))
    return ref


def shown(built: list[Message], ref: str, history: list[Message]) -> str:
    (index,) = [i for i, m in enumerate(history) if m.tool_result_ref == ref]
    return built[index].content or ""


LONG_NOTE = "The analysis continues with more detail on every line of the report. " * 1_500
"""An assistant message of ~20,000 tokens: what a swap before it must write to the cache again."""


# -- the decision alone -----------------------------------------------------------------------------
def test_rates_come_from_the_price_table() -> None:
    anthropic, gpt_4o, gpt_5 = CacheRates.of(ANTHROPIC), CacheRates.of(GPT_4O), CacheRates.of(GPT_5)
    assert anthropic.write > 1 > 0.5 > anthropic.read  # 1.25 and 0.1
    assert gpt_4o.write == gpt_5.write == 1.0  # OpenAI bills no write surcharge
    assert gpt_5.read < gpt_4o.read < 1
    under = anthropic.caching.min_tokens - 1  # a prompt under the minimum is not cached: 1 per token
    assert anthropic.call_cost(under, under) == gpt_4o.call_cost(under, 0) == under


def test_the_same_swap_pays_at_gpt_4o_rates_and_not_at_anthropic_rates() -> None:
    previous = PromptLayout(fixed_tokens=1_000, message_tokens=(500, 1_000, 4_000))
    swap = [Swap(position=1, saved_tokens=900, key="r")]  # rewrites 5,000 tokens to save 900 on each call
    for_anthropic = decide_rewrite(previous, swap, rates=CacheRates.of(ANTHROPIC), remaining=5)
    for_gpt_4o = decide_rewrite(previous, swap, rates=CacheRates.of(GPT_4O), remaining=5)
    assert for_anthropic.swaps == () and for_anthropic.rewrite_from is None
    assert [s.key for s in for_gpt_4o.swaps] == ["r"] and for_gpt_4o.rewrite_from == 1
    # many calls known to come pay for the rewrite at Anthropic's rates too; with the stop-loss of an
    # estimated future, a rewrite costing more than the call itself is not made whatever it promises
    assert decide_rewrite(previous, swap, rates=CacheRates.of(ANTHROPIC), remaining=200,
                        stop_loss=False).swaps == tuple(swap)
    assert decide_rewrite(previous, swap, rates=CacheRates.of(ANTHROPIC), remaining=200).swaps == ()


@HEADLINE
def test_the_rewrite_starts_where_it_pays_best(prices: PriceModel) -> None:
    previous = PromptLayout(fixed_tokens=500, message_tokens=(200, 1_500, 20_000, 100, 3_000))
    swaps = [Swap(1, 1_400, "old"), Swap(4, 2_900, "new")]
    decision = decide_rewrite(previous, swaps, added_tokens=100, rates=CacheRates.of(prices), remaining=3)
    assert [s.key for s in decision.swaps] == ["new"] and decision.rewrite_from == 4
    assert decision.net_gain > 0
    # tokens alone: every due swap at once, from the oldest
    everything = decide_rewrite(previous, swaps, added_tokens=100, rates=None, remaining=3)
    assert [s.key for s in everything.swaps] == ["old", "new"] and everything.rewrite_from == 1


def test_start_needs_a_token_saving_and_a_price_that_pays() -> None:
    previous = PromptLayout(fixed_tokens=6_000, message_tokens=(300, 2_000, 2_000))
    changes = [Swap(2, 1_800, "a"), Swap(3, 0, "b")]
    rates = CacheRates.of(ANTHROPIC)
    assert decide_rewrite(previous, changes, rates=None, remaining=1, start_tokens=400).rewrite_from == 0
    assert decide_rewrite(previous, changes, rates=None, remaining=1, start_tokens=2_000).swaps == ()
    assert decide_rewrite(previous, changes, rates=rates, remaining=3, start_tokens=400, stop_loss=False).swaps == ()
    assert decide_rewrite(previous, changes, rates=rates, remaining=300, start_tokens=400,
                        stop_loss=False).rewrite_from == 0
    # the same start under the stop-loss: rewriting ~10,000 cached tokens costs more than the call
    assert decide_rewrite(previous, changes, rates=rates, remaining=300, start_tokens=400).swaps == ()
    # ...unless the call is expensive anyway: a large new result arrives with it
    big = decide_rewrite(previous, [*changes, Swap(4, 9_000, "c")], added_tokens=12_000, rates=rates, remaining=3,
                       start_tokens=400)
    assert big.rewrite_from == 0


def test_a_read_back_costs_a_call_over_the_cached_prompt_and_its_answer_from_then_on() -> None:
    rates = CacheRates.of(GPT_4O)  # reads at 0.5, output at 4, 1,024-token minimum, 128-token steps
    # the call: 5,504 of 5,600 tokens read (the 128-token steps) = 2,848; its output 25 x 4 = 100;
    # the call and its answer (+8 framing) written once: 433 = 5,504 x 0.5 + 529 - 2,848; read by
    # each of 5 calls: (6,016 x 0.5 + 17) - 2,848 = 177 each
    assert read_back_cost(rates, 5_600, ReadBack(call_tokens=25, answer_tokens=400), 5) == pytest.approx(
        2_848 + 100 + 433 + 5 * 177)


def test_a_rewrite_pays_for_one_read_back_of_what_it_hides() -> None:
    previous = PromptLayout(fixed_tokens=1_000, message_tokens=(500, 1_000, 4_000))
    rates = CacheRates.of(GPT_4O)
    back = ReadBack(call_tokens=25, answer_tokens=400)
    plain = decide_rewrite(previous, [Swap(1, 900, "r")], rates=rates, remaining=5)
    assert plain.rewrite_from == 1 and 0 < plain.net_gain < read_back_cost(rates, previous.total - 900, back, 5)
    # the same swap when its citation lacks a value the result showed: one more call over the
    # cached prompt if the model needs it back costs more than the swap saves in 5 calls
    assert decide_rewrite(previous, [Swap(1, 900, "r", back)], rates=rates, remaining=5).swaps == ()
    assert decide_rewrite(previous, [Swap(1, 900, "r", back)], rates=rates, remaining=200, stop_loss=False).swaps
    assert decide_rewrite(previous, [Swap(1, 900, "r", back)], rates=None, remaining=5).swaps  # tokens alone
    # one read-back per rewrite, the costliest of its swaps': one extra call reads back several results
    larger = ReadBack(call_tokens=25, answer_tokens=1_000)
    both = decide_rewrite(previous, [Swap(1, 900, "a", back), Swap(2, 300, "b", larger)], rates=rates,
                          remaining=200, stop_loss=False)
    bare = decide_rewrite(previous, [Swap(1, 900, "a"), Swap(2, 300, "b")], rates=rates, remaining=200,
                          stop_loss=False)
    assert both.rewrite_from == bare.rewrite_from == 1
    assert both.net_gain == pytest.approx(bare.net_gain - read_back_cost(rates, previous.total - 1_200, larger, 200))


def test_remaining_calls_follow_lindy_or_the_callers_estimate() -> None:
    assert remaining_calls(1) == remaining_calls(2) == 1  # at least one
    assert remaining_calls(30) == pytest.approx(10)  # t / 3: reached with probability 3/4 (Gott)
    assert remaining_calls(5, expected_calls=20) == 15
    assert remaining_calls(25, expected_calls=20) == 1


# -- the builder ------------------------------------------------------------------------------------
def two_results_around_a_long_note(memory: AgentMemory) -> tuple[list[Message], str, str]:
    """An old ~1,500-token result, then a ~20,000-token message, then a fresh ~3,000-token result."""
    history = [Message(role="system", content="You are an analyst."), Message(role="user", content="go")]
    old = call_and_result(memory, history, "inventory", rows("inventory", 120))
    history.append(Message(role="assistant", content=LONG_NOTE))
    new = call_and_result(memory, history, "orders", rows("orders", 250))
    return history, old, new


@HEADLINE
def test_a_swap_that_does_not_pay_is_not_made_and_one_that_pays_is(memory: AgentMemory, prices: PriceModel) -> None:
    history, old, new = two_results_around_a_long_note(memory)
    aware, tokens = builder(memory, prices, start="first_call"), builder(memory, None, start="first_call")
    for b in (aware, tokens):
        sent(b, history)  # both results fresh: in full
    history += [Message(role="assistant", content="Checking."), Message(role="user", content="next")]
    priced, counted = sent(aware, history), sent(tokens, history)
    # the old result's swap would rewrite the long note: it waits; the fresh one's pays at once
    assert shown(priced, old, history) == memory.get(old).content
    assert f'retrieve_memory(id="{new}")' in shown(priced, new, history)
    assert memory.get(new).content not in shown(priced, new, history)
    assert aware.state.swapped == {new}
    # by tokens alone both are swapped at once
    assert tokens.state.swapped == {old, new}
    assert all(f'retrieve_memory(id="{ref}")' in shown(counted, ref, history) for ref in (old, new))


@HEADLINE
def test_a_prompt_under_the_cache_minimum_swaps_whenever_it_saves_tokens(memory: AgentMemory,
                                                                         prices: PriceModel) -> None:
    history = [Message(role="user", content="go")]
    first = call_and_result(memory, history, "status", rows("status", 50))  # above inline_max_tokens
    history.append(Message(role="assistant", content="Noted. " * 30))  # a swap before it rewrites it
    b = builder(memory, prices, start="first_call")
    sent(b, history)
    history.append(Message(role="user", content="next"))
    built = sent(b, history)
    assert sum(message_tokens(m, memory.tokens.count) for m in built) < 1_024  # never cached
    assert b.state.swapped == {first} and f'retrieve_memory(id="{first}")' in shown(built, first, history)


def test_starting_to_cite_a_long_prompt_with_few_calls_to_come_is_deferred(memory: AgentMemory) -> None:
    offer = 400
    lindy = builder(memory, ANTHROPIC, offer_cost_tokens=offer)
    long_run = builder(memory, ANTHROPIC, offer_cost_tokens=offer, expected_calls=300)
    tokens = builder(memory, None, offer_cost_tokens=offer)
    history = [Message(role="user", content="go")]
    everyone = (("lindy", lindy), ("long_run", long_run), ("tokens", tokens))
    for _, b in everyone:
        sent(b, history)  # a first prompt under the cache minimum: no offer made yet
        assert not b.citing
    history.append(Message(role="user", content=LONG_NOTE))  # then ~20,000 tokens arrive and are cached
    started: dict[str, int | None] = {"lindy": None, "long_run": None, "tokens": None}
    for call in range(2, 8):
        call_and_result(memory, history, f"lookup{call}", rows(f"lookup{call}", 80))
        for name, b in everyone:
            built = sent(b, history)
            if b.citing and started[name] is None:
                started[name] = call
            if not b.citing:  # the naive prompt, exactly
                assert all(m.content == memory.get(m.tool_result_ref).content for m in built if m.tool_result_ref)
    assert started["tokens"] == 3  # one due result already saves more than the tools cost
    assert started["lindy"] is None  # a few calls cannot pay for rewriting 20,000 cached tokens
    assert started["long_run"] is not None and started["long_run"] <= 6  # 300 calls to come: they can


FLIGHTS = json.dumps([{"flight_number": f"HAT{n:03d}", "origin": "JFK", "destination": "SFO", "seats": n % 9,
                       "departure": f"2024-05-{10 + n % 20:02d}T{6 + n % 12:02d}:00", "price": 100 + 7 * n}
                      for n in range(24)])
"""A flight search of ~1,200 tokens: 24 flight numbers and dates, more than a citation carries."""

PROSE = " ".join(["The flights from the east coast to the west coast leave every morning and evening, "
                  "with seats in every cabin."] * 55)
"""Prose of the same size with no key value (no id, date or amount a model would copy)."""


def test_a_citation_that_hides_values_must_also_pay_for_reading_them_back(tmp_path: Path) -> None:
    started: dict[str, int] = {}
    for name, text in (("flights", FLIGHTS), ("prose", PROSE)):
        memory = AgentMemory(name, tmp_path / name, config=MemoryConfig(index_on_store=False))
        b = builder(memory, GPT_4O, fixed_tokens=2_400, offer_cost_tokens=183)  # a tau-bench-like agent
        history = [Message(role="system", content="You are an airline agent. " * 40),
                   Message(role="user", content="Find me a flight.")]
        for n in range(16):
            if n == 2:
                ref = call_and_result(memory, history, "search_flights", text)
                assert abs(b.view(ref).raw_tokens - 1_215) < 15 and b.view(ref).cited_tokens < 110
            built = sent(b, history)
            if b.citing and name not in started:
                started[name] = n + 1
                assert f'retrieve_memory(id="{ref}")' in shown(built, ref, history)
            history += [Message(role="assistant", content=f"Step {n} of the booking: " + "detail " * 60),
                        Message(role="user", content=f"ok {n} " + "go on " * 30)]
    # the prose's citation hides nothing a model would copy: citing it pays once enough calls have
    # come. The flight search's shows 3 of its 24 flight numbers, and the model may book one of the
    # others: one more call over the whole prompt to read it back costs more than the citation saves
    assert started == {"prose": 12}


def test_a_rewritten_prompt_cites_with_the_offer_only_what_pays_for_its_read_back(tmp_path: Path) -> None:
    cited: dict[str, bool] = {}
    for name, text in (("flights", FLIGHTS), ("prose", PROSE)):
        memory = AgentMemory(name, tmp_path / name, config=MemoryConfig(index_on_store=False))
        b = builder(memory, GPT_4O, fixed_tokens=2_400, offer_cost_tokens=310)
        history = [Message(role="system", content="You are an airline agent."),
                   Message(role="user", content="Find me a flight.")]
        sent(b, history)
        ref = call_and_result(memory, history, "search_flights", text)
        sent(b, history)  # shown as the tool returned it: citing does not pay yet
        history += [Message(role="assistant", content="Here are the options."),
                    Message(role="user", content="The cheapest one, please.")]
        b.rewritten()  # a compaction: the next prompt is written to the cache anew
        built = sent(b, history)
        assert b.citing and b.state.citing_since == 3  # the offer goes with the rewritten prompt
        cited[name] = f'retrieve_memory(id="{ref}")' in shown(built, ref, history)
    # the due result is cited with it only when its citation hides nothing a model would read back
    assert cited == {"flights": False, "prose": True}


def test_the_offer_from_the_first_call_is_priced() -> None:
    anthropic, gpt_4o = CacheRates.of(ANTHROPIC), CacheRates.of(GPT_4O)
    # a tau-bench-like first prompt (2,400 tokens of the agent's own tools): the tools' reads in the
    # next two calls cost far less than the rewrite a later start would make
    assert offer_from_first_call(3_000, 310, anthropic) and offer_from_first_call(3_000, 310, gpt_4o)
    # at gpt-4o's 0.5 reads, 2 x 400 x 0.5 = 400 > 700 x (1 - 0.5) = 350: a later start is cheaper
    assert not offer_from_first_call(700, 400, gpt_4o)
    assert offer_from_first_call(700, 400, anthropic)  # 80 < 805 at Anthropic's rates
    # a prompt that is not cached saves nothing by avoiding a rewrite; nor does one without prices
    assert not offer_from_first_call(500, 300, anthropic)
    assert not offer_from_first_call(3_000, 310, None)
    assert not offer_from_first_call(3_000, 0, anthropic)


@HEADLINE
def test_a_cached_prompt_with_nothing_to_cite_gets_no_offer_one_rewritten_around_a_result_does(
        memory: AgentMemory, prices: PriceModel) -> None:
    own_tool_tokens, offer = 2_400, 310  # tau-bench's airline tools, retrieve_memory and its prompt section
    b = builder(memory, prices, fixed_tokens=own_tool_tokens, offer_cost_tokens=offer)
    history = [Message(role="system", content="You are an airline agent."), Message(role="user", content="help")]
    sent(b, history)
    assert not b.citing  # nothing the offer could pay back with: no bet on results to come
    first = call_and_result(memory, history, "get_reservation", rows("reservation", 60))
    b.rewritten()  # the history was rewritten (a compaction): the next prompt shares nothing cached
    assert memory.get(first).content in shown(sent(b, history), first, history)  # shown in full once
    assert b.citing and b.state.citing_since == 2  # offered with the rewrite: no later start to pay for
    history.append(Message(role="assistant", content="Let me check the flight."))
    second = call_and_result(memory, history, "get_flight", rows("flight", 60))
    built = sent(b, history)
    # swapping the result at the end of the prompt rewrites only what follows it: it pays at once
    assert b.state.swapped == {first} and f'retrieve_memory(id="{first}")' in shown(built, first, history)
    assert memory.get(second).content in shown(built, second, history)


def test_always_cite_never_shows_a_result_in_full_whatever_the_price(memory: AgentMemory) -> None:
    history = [Message(role="user", content="go"), Message(role="assistant", content=LONG_NOTE)]
    ref = call_and_result(memory, history, "search", rows("search", 200))
    b = builder(memory, ANTHROPIC, kind="always_cite")
    assert memory.get(ref).content not in shown(sent(b, history), ref, history)


# -- the compaction epoch ------------------------------------------------------------------------------
@HEADLINE
def test_a_rewrite_of_the_history_makes_every_due_swap(memory: AgentMemory, prices: PriceModel) -> None:
    history, old, new = two_results_around_a_long_note(memory)
    b = builder(memory, prices, start="first_call")
    sent(b, history)
    history += [Message(role="assistant", content="Checking."), Message(role="user", content="next")]
    assert b.prepare(history).state.swapped == {new}  # the old swap does not pay on its own
    assert b.prepare(history, rewrite_from=0).state.swapped == {old, new}  # a rewrite makes it free
    state = b.rewritten()  # what the kernel's compaction records
    assert state.prompt_messages == 0
    built = b.prepare(history)
    assert built.state.swapped == {old, new} and set(built.swapped_now) == {old, new}


def test_the_kernels_compaction_is_an_epoch(tmp_path: Path) -> None:
    memory = AgentMemory("kernel", tmp_path, config=MemoryConfig(index_on_store=False))
    limits = ModelLimits(max_context_tokens=200_000, max_output_tokens=1_000, safety_margin_tokens=0)
    manager = MemoryManager(memory, system_prompt="You are an analyst.", limits=limits, prices=ANTHROPIC,
                            policy=PresentationPolicy(start="first_call"))
    manager.ingest_user_message("Audit the inventory.")
    manager.ingest_assistant_response(Message(role="assistant", tool_calls=(ToolCall(id="c1", name="inventory"),)))
    ref = manager.ingest_tool_result("c1", rows("inventory", 120))
    manager.ingest_assistant_response(LONG_NOTE)
    manager.commit(manager.build_prompt())
    manager.ingest_user_message("And now?")
    before = manager.build_prompt()
    assert ref not in before.state.swapped  # rewriting the long note to swap it does not pay
    manager.commit(before)
    manager.compact()  # rewrites the working context: the swap is free now
    assert manager.context.presentation.prompt_messages == 0  # saved with the new epoch
    after = manager.build_prompt()
    assert ref in after.state.swapped
    tool = next(m for m in after.messages if m.tool_result_ref == ref)
    assert f'retrieve_memory(id="{ref}")' in (tool.content or "") and memory.get(ref).content != tool.content


# -- never above naive -----------------------------------------------------------------------------
@pytest.mark.parametrize("prices", [ANTHROPIC, GPT_4O, GPT_5, None], ids=lambda m: m.label if m else "tokens")
def test_net_tokens_never_above_naive(memory: AgentMemory, prices: PriceModel | None) -> None:
    """Tokens alone: no prompt is above the naive one. Under a price model the tools may be offered
    before citing saves anything (a cached first prompt): each prompt at most the offer above the
    naive one, and the conversation's prompts together never above the naive ones."""
    own_tool_tokens, offer = 2_000, 350
    count = memory.tokens.count
    sizes = [3, 30, 150, 8, 260, 40, 90, 330, 12, 200, 70, 300, 25, 180, 120, 60, 240, 15, 100, 280]
    builders = {name: builder(memory, prices, fixed_tokens=own_tool_tokens, offer_cost_tokens=offer, **policy)
                for name, policy in (("lindy", {}), ("known", {"expected_calls": 40}),
                                     ("keep", {"kind": "keep_last_k", "k": 2}))}
    totals = dict.fromkeys(builders, 0)
    naive_total = 0
    history = [Message(role="system", content="You are an analyst."), Message(role="user", content="go")]
    for n, size in enumerate(sizes):
        call_and_result(memory, history, f"tool{n}", rows(f"tool{n}", size))
        history.append(Message(role="assistant", content=f"Step {n} done."))
        naive = [m.model_copy(update={"content": memory.get(m.tool_result_ref).content}) if m.tool_result_ref else m
                 for m in history]
        naive_tokens = own_tool_tokens + sum(message_tokens(m, count) for m in naive)
        naive_total += naive_tokens
        for name, b in builders.items():
            built = sent(b, history)
            tokens = own_tool_tokens + sum(message_tokens(m, count) for m in built) + (offer if b.citing else 0)
            assert tokens <= naive_tokens + (offer if prices is not None else 0)
            totals[name] += tokens
    assert all(total <= naive_total for total in totals.values()), (totals, naive_total)
    assert builders["known"].citing  # 40 calls known to come: citing paid at some point


# -- wiring ------------------------------------------------------------------------------------------
def test_tokens_only_strategy_label_round_trips() -> None:
    strategy = parse_strategy("full_once+tokens")
    assert strategy.policy.cache_aware is False and strategy.label == "full_once+tokens"
    assert parse_strategy("keep_last_3+calls50").policy.expected_calls == 50
    assert PresentationPolicy().cache_aware and PresentationPolicy().label == "full_once"


def test_memory_agent_decides_with_its_models_prices(tmp_path: Path) -> None:
    from agent_memory.agent.loop import MemoryAgent
    from agent_memory.llm.chat import OpenAIChatModel

    def lookup(term: str) -> dict:
        """Look a term up."""
        return {"term": term}

    limits = ModelLimits(max_context_tokens=100_000, max_output_tokens=1_000)
    config = MemoryConfig(index_on_store=False)
    known = MemoryAgent(OpenAIChatModel("gpt-4o", base_url="http://127.0.0.1:9/v1", api_key="x"), tools=[lookup],
                        memory_dir=tmp_path / "known", memory_config=config, limits=limits)
    presentation = known.manager.presentation
    assert presentation.prices is not None and presentation.prices.model == "gpt-4o"
    assert presentation.rates == CacheRates.of(GPT_4O)
    assert presentation.fixed_tokens > 0 and presentation.offer_cost_tokens > 0  # its tools, the memory's
    unknown = MemoryAgent(OpenAIChatModel("no-such-model-anywhere", base_url="http://127.0.0.1:9/v1", api_key="x"),
                          memory_dir=tmp_path / "unknown", memory_config=config, limits=limits)
    assert unknown.manager.presentation.prices is None and unknown.manager.presentation.rates is None
