"""Presentation policies: results shown in full once, then cited; batching; caps; pairing."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory import AgentMemory, MemoryConfig
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import ContextBuilder
from agent_memory.presentation.plugins import PluginRegistry
from agent_memory.presentation.policy import PresentationPolicy


@pytest.fixture
def memory(tmp_path: Path) -> AgentMemory:
    return AgentMemory("p", tmp_path / "memory", config=MemoryConfig(index_on_store=False))


def builder(memory: AgentMemory, **policy: object) -> ContextBuilder:
    citations = CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens)
    return ContextBuilder(memory, policy=PresentationPolicy(**policy), citations=citations)


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
        shown = tool_contents(b.build(history))
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
    shown = tool_contents(b.build(history))
    assert [result_text(i) in text for i, text in enumerate(shown)] == [False, False, False, True, True]


def test_always_cite_never_shows_the_full_result(memory: AgentMemory) -> None:
    b = builder(memory, kind="always_cite")
    history: list[Message] = [Message(role="user", content="go")]
    ref = turn(memory, history, 0)
    (shown,) = tool_contents(b.build(history))
    assert result_text(0) not in shown and ref in shown


def test_swaps_wait_for_the_batch_threshold_then_happen_together(memory: AgentMemory) -> None:
    b = builder(memory, min_swap_tokens=2_000)
    history: list[Message] = [Message(role="user", content="go")]
    prompts = []
    for i in range(8):
        turn(memory, history, i)
        prompts.append(tool_contents(b.build(history)))
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
    (shown,) = tool_contents(b.build(history))
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
    first = b.build(history)
    second = b.build(history + [Message(role="user", content="next")])
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
    b.build(history)
    (shown,) = tool_contents(b.build(history + [Message(role="user", content="again")]))
    assert shown.startswith("ok")


def test_consecutive_prompts_share_their_prefix_under_full_once(memory: AgentMemory) -> None:
    b = builder(memory)
    history: list[Message] = [Message(role="user", content="go")]
    previous: list[Message] = []
    for i in range(5):
        turn(memory, history, i)
        built = b.build(history)
        if previous:
            # everything before the result that was just swapped is unchanged
            assert built[: len(previous) - 1] == previous[:-1]
        previous = built
