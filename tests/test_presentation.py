"""Presentation policies: results shown in full once, then cited; batching; caps; pairing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.models.messages import Message, ToolCall
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import ContextBuilder
from agent_memory.presentation.policy import PresentationPolicy


@pytest.fixture
def memory(tmp_path: Path) -> AgentMemory:
    return AgentMemory("p", tmp_path / "memory", config=MemoryConfig(index_on_store=False))


def builder(memory: AgentMemory, **policy: object) -> ContextBuilder:
    citations = CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens)
    return ContextBuilder(memory, policy=PresentationPolicy(**policy), citations=citations)


def sent(b: ContextBuilder, history: list[Message]) -> list[Message]:
    """One LLM call of a loop: the messages built for ``history``, committed as answered."""
    built = b.build(history)
    b.commit(built)
    return built.messages


def result_text(i: int) -> str:
    return "\n".join(f"row {i}.{j}: value {i * j} status ok" for j in range(60))


def turn(memory: AgentMemory, history: list[Message], i: int) -> str:
    ref = memory.store(result_text(i), source=f"tool_{i}")
    history.append(Message(role="assistant", tool_calls=(ToolCall(id=f"c{i}", name=f"tool_{i}"),)))
    history.append(Message(role="tool", tool_call_id=f"c{i}", name=f"tool_{i}", tool_result_ref=ref))
    return ref


def tool_contents(messages: list[Message]) -> list[str]:
    return [m.content or "" for m in messages if m.role == "tool"]


def test_full_once_shows_each_result_in_full_in_one_call_then_its_citation(memory: AgentMemory) -> None:
    b = builder(memory)
    history = [Message(role="user", content="investigate")]
    refs = []
    for i in range(4):
        refs.append(turn(memory, history, i))
        shown = tool_contents(sent(b, history))
        assert shown[-1] == result_text(i)  # the new one in full, as stored
        for old, ref in zip(shown[:-1], refs[:-1], strict=True):
            assert "row" not in old.split("\n", 1)[-1] or len(old) < len(result_text(0)) / 3
            assert ref in old and f'retrieve_memory(id="{ref}")' in old
    assert all(m.content is None for m in history if m.role == "tool")  # history never rewritten


def test_keep_last_k_keeps_the_k_newest_in_full(memory: AgentMemory) -> None:
    b = builder(memory, kind="keep_last_k", k=2)
    history: list[Message] = [Message(role="user", content="go")]
    for i in range(5):
        turn(memory, history, i)
    shown = tool_contents(sent(b, history))
    assert [result_text(i) in text for i, text in enumerate(shown)] == [False, False, False, True, True]


def test_always_cite_never_shows_the_full_result(memory: AgentMemory) -> None:
    b = builder(memory, kind="always_cite")
    history: list[Message] = [Message(role="user", content="go")]
    ref = turn(memory, history, 0)
    (shown,) = tool_contents(sent(b, history))
    assert result_text(0) not in shown and ref in shown


def test_swaps_wait_for_the_batch_threshold_then_happen_together(memory: AgentMemory) -> None:
    b = builder(memory, min_swap_tokens=2_000)
    history: list[Message] = [Message(role="user", content="go")]
    prompts = []
    for i in range(8):
        turn(memory, history, i)
        prompts.append(tool_contents(sent(b, history)))
    full_counts = [sum(result_text(i) in text for i, text in enumerate(p)) for p in prompts]
    assert full_counts[1] == 2  # the first result waits: its saving alone is below 2,000 tokens
    assert min(full_counts) == 1 and max(full_counts) > 2  # then a batch swapped at once
    assert b.stats.swaps >= 3


def test_first_showing_is_capped_with_citation_and_head(memory: AgentMemory) -> None:
    b = builder(memory, full_result_max_tokens=300)
    history: list[Message] = [Message(role="user", content="go")]
    big = "\n".join(f"line {i} " + "word " * 20 for i in range(500))
    ref = memory.store(big, source="shell")
    history += [
        Message(role="assistant", tool_calls=(ToolCall(id="c", name="sh"),)),
        Message(role="tool", tool_call_id="c", tool_result_ref=ref),
    ]
    (shown,) = tool_contents(sent(b, history))
    assert memory.tokens.count(shown) <= 300
    assert ref in shown and "line 0 " in shown and "line 250 " not in shown
    assert b.stats.capped_first_showings == 1


def test_parallel_tool_calls_stay_with_their_results(memory: AgentMemory) -> None:
    b = builder(memory)
    refs = [memory.store(result_text(i), source="t") for i in range(3)]
    history = [
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=tuple(ToolCall(id=f"c{i}", name="t") for i in range(3))),
        *[Message(role="tool", tool_call_id=f"c{i}", tool_result_ref=refs[i]) for i in range(3)],
        Message(role="assistant", content="thinking"),
    ]
    first = sent(b, history)
    second = sent(b, history + [Message(role="user", content="next")])
    for built in (first, second):
        assert [m.role for m in built[:5]] == ["user", "assistant", "tool", "tool", "tool"]
        assert [m.tool_call_id for m in built[2:5]] == ["c0", "c1", "c2"]
    assert all(result_text(i) in first[2 + i].content for i in range(3))
    assert all(refs[i] in second[2 + i].content and result_text(i) not in second[2 + i].content for i in range(3))


def test_a_result_smaller_than_its_citation_stays_in_full(memory: AgentMemory) -> None:
    b = builder(memory)
    ref = memory.store("ok", source="ping")
    history = [
        Message(role="assistant", tool_calls=(ToolCall(id="c", name="ping"),)),
        Message(role="tool", tool_call_id="c", tool_result_ref=ref),
    ]
    sent(b, history)
    (shown,) = tool_contents(sent(b, history + [Message(role="user", content="again")]))
    assert shown.startswith("ok")


def test_consecutive_prompts_share_their_prefix_under_full_once(memory: AgentMemory) -> None:
    b = builder(memory)
    history: list[Message] = [Message(role="user", content="go")]
    previous: list[Message] = []
    for i in range(5):
        turn(memory, history, i)
        built = sent(b, history)
        if previous:
            # everything before the result that was just swapped is unchanged
            assert built[: len(previous) - 1] == previous[:-1]
        previous = built


# -- citing starts when it pays ------------------------------------------------------------------

def naive_tokens(memory: AgentMemory, history: list[Message]) -> int:
    """Tokens of the results as an agent without memory shows them (the stored content)."""
    return sum(memory.tokens.count(memory.get(m.tool_result_ref).content) for m in history if m.tool_result_ref)


def shown_tokens(memory: AgentMemory, built: list[Message]) -> int:
    return sum(memory.tokens.count(m.content or "") for m in built if m.role == "tool")


def test_citing_waits_until_the_saving_exceeds_the_tools_cost(memory: AgentMemory) -> None:
    cost = 1_500
    citations = CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens)
    b = ContextBuilder(memory, policy=PresentationPolicy(), citations=citations, offer_cost_tokens=cost)
    history: list[Message] = [Message(role="user", content="go")]
    states = []
    for i in range(12):
        turn(memory, history, i)
        built = sent(b, history)
        states.append(b.citing)
        naive = naive_tokens(memory, history)
        if not b.citing:
            assert tool_contents(built) == [result_text(j) for j in range(i + 1)]  # the naive prompt, exactly
        else:
            assert shown_tokens(memory, built) + cost < naive  # tools included, never worse than naive
    first = states.index(True)
    assert 1 < first < 11 and all(states[first:]) and not any(states[:first])  # starts once, never stops
    assert b.stats.citing_since == first + 1


def test_free_citing_starts_with_the_first_saving_and_eager_at_once(memory: AgentMemory) -> None:
    history: list[Message] = [Message(role="user", content="go")]
    turn(memory, history, 0)
    lazy, eager = builder(memory), builder(memory, start="first_call")
    sent(lazy, history)
    sent(eager, history)
    assert not lazy.citing and eager.citing  # one new result: citing it would save nothing yet
    turn(memory, history, 1)
    assert result_text(0) not in tool_contents(sent(lazy, history))[0] and lazy.citing


def test_huge_result_starts_citing_at_once_and_is_capped(memory: AgentMemory) -> None:
    b = ContextBuilder(memory, policy=PresentationPolicy(full_result_max_tokens=500), offer_cost_tokens=250,
                       citations=CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens))
    big = "\n".join(f"line {i} " + "word " * 20 for i in range(500))
    ref = memory.store(big, source="shell")
    history = [Message(role="assistant", tool_calls=(ToolCall(id="c", name="sh"),)),
               Message(role="tool", tool_call_id="c", tool_result_ref=ref)]
    (shown,) = tool_contents(sent(b, history))
    assert b.citing and memory.tokens.count(shown) <= 500 and f'retrieve_memory(id="{ref}")' in shown


def test_small_results_stay_inline(memory: AgentMemory) -> None:
    b = builder(memory, inline_max_tokens=400)
    history: list[Message] = [Message(role="user", content="go")]
    small = memory.store("status: ok\n" * 30, source="ping")  # ~90 tokens: under the threshold
    history += [Message(role="assistant", tool_calls=(ToolCall(id="s", name="ping"),)),
                Message(role="tool", tool_call_id="s", tool_result_ref=small)]
    for i in range(3):
        turn(memory, history, i)  # ~1,000-token results: cited once seen
        sent(b, history)
    shown = tool_contents(sent(b, history + [Message(role="user", content="next")]))
    assert shown[0] == "status: ok\n" * 30
    assert all(result_text(i) not in text for i, text in enumerate(shown[1:]))


class _BrokenPlugin:
    name = "broken"
    priority = 1

    def matches(self, item: object) -> bool:
        return True

    def key_content(self, item: object, *, max_tokens: int, counter: object) -> str:
        raise RuntimeError("plugin bug")

    def summary(self, item: object, *, max_tokens: int, counter: object) -> str:
        raise RuntimeError("plugin bug")


def test_a_failing_plugin_falls_back_to_the_plain_citation(memory: AgentMemory) -> None:
    citations = CitationBuilder(PluginRegistry([_BrokenPlugin()]), memory.tokens)
    b = ContextBuilder(memory, policy=PresentationPolicy(), citations=citations)
    history: list[Message] = [Message(role="user", content="go")]
    refs = [turn(memory, history, i) for i in range(2)]
    sent(b, history)
    shown = tool_contents(sent(b, history + [Message(role="user", content="next")]))
    assert shown[0] == f'[tool_0 · {memory.get(refs[0]).metadata.tokens:,} tokens · retrieve_memory(id="{refs[0]}")]'


def test_citations_name_the_one_tool_form_when_asked(memory: AgentMemory) -> None:
    ref = memory.store(result_text(1), source="t")
    citation = CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens, retrieve_call="memory").cite(
        memory.get(ref))
    assert f'memory(id="{ref}")' in citation.render() and "retrieve_memory" not in citation.render()


def test_a_retried_call_shows_the_same_until_committed(memory: AgentMemory) -> None:
    from agent_memory.presentation.context import PresentationState

    b = builder(memory)
    history: list[Message] = [Message(role="user", content="go")]
    for i in range(2):
        turn(memory, history, i)
    sent(b, history[:-2])
    first = b.prepare(history)
    again = b.prepare(history)  # the provider failed: the retry must show the model the same prompt
    assert again.messages == first.messages and again.state == first.state
    assert b.state.calls == 1  # nothing committed yet
    b.commit(first)
    later = b.prepare(history + [Message(role="user", content="next")])
    assert later.state.calls == 2 + 1 and later.state.swapped >= first.state.swapped
    # the state is data: it survives a restart through JSON
    restored = PresentationState.model_validate_json(first.state.model_dump_json())
    other = builder(memory)
    other.reset(restored)
    assert other.prepare(history + [Message(role="user", content="next")]).messages == later.messages


# -- build is pure; commit records (issue 27, item 9) ---------------------------------------------

def test_build_twice_gives_the_same_and_only_commit_changes_the_next(memory: AgentMemory) -> None:
    b = builder(memory)
    history: list[Message] = [Message(role="user", content="go")]
    ref = turn(memory, history, 0)
    turn(memory, history, 1)
    first = b.build(history)
    again = b.build(history)  # a caller that looks at the prompt twice, or a retried call
    assert again == first
    assert b.state.calls == 0 and not b.citing  # nothing recorded by building
    b.commit(first)  # the provider answered: what it was shown is recorded
    assert b.state == first.state
    history.append(Message(role="user", content="next"))
    after = b.build(history)
    assert after == b.build(history)
    old = tool_contents(after.messages)[0]
    assert result_text(0) in tool_contents(first.messages)[0]  # shown in full when new
    assert ref in old and result_text(0) not in old  # cited in the call after the committed one


def test_default_builder_cites_with_the_built_in_plugins(memory: AgentMemory) -> None:
    b = ContextBuilder(memory)  # no policy, no hand-built CitationBuilder
    assert b.policy == PresentationPolicy()
    rows = [{"title": f"Band {n}", "url": f"https://example.org/bands/{n}",
             "snippet": "Jonny Craig sang in Dance Gavin Dance, Emarosa and Slaves. " * 3} for n in range(30)]
    call = ToolCall(id="call_1", name="search", arguments='{"query": "Jonny Craig bands"}')
    ref = memory.store(rows)
    history = [Message(role="user", content="Which bands has Jonny Craig been in?"),
               Message(role="assistant", tool_calls=(call,)),
               Message(role="tool", tool_call_id=call.id, name=call.name, tool_result_ref=ref)]
    b.commit(b.build(history))
    cited = tool_contents(b.build(history + [Message(role="user", content="And before 2005?")]).messages)[0]
    expected = CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens).cite(memory.get(ref))
    assert expected.plugin is not None and expected.key_content  # a built-in plugin read the rows
    head, key = cited.split("\n", 1)
    assert head.startswith('[search({"query": "Jonny Craig bands"}) · ') and f'retrieve_memory(id="{ref}")' in head
    assert key.startswith("30 results: 1. Band 0 (example.org/bands/0)")  # the plugin's key content
    assert expected.key_content.startswith(key.rstrip("…"))
