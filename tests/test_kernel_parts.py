"""The kernel's parts on their own: model limits and thresholds, tool-call pairing, the working
context file, the compaction snapshot's format."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.errors import ConfigurationError, StoreError
from agent_memory.kernel.budget import ModelLimits, Pressure, TokenBudget, model_limits
from agent_memory.kernel.pairing import PENDING_RESULT, pair_tool_messages
from agent_memory.kernel.snapshot_builder import CompactionSnapshotBuilder, MemoryBundle, render_bundle
from agent_memory.kernel.working_context import SCHEMA_VERSION, WorkingContextSnapshot
from agent_memory.models.messages import Message, ToolCall
from agent_memory.models.traces import EpisodicItem, SemanticItem
from agent_memory.presentation.context import PresentationState
from agent_memory.prompt_tokens import count_prompt_tokens
from agent_memory.storage.files.documents import FileDocumentSlot


@pytest.mark.parametrize(
    ("model", "context", "output"),
    [("gpt-4o-2024-08-06", 128_000, 16_384), ("openai/gpt-4o-mini", 128_000, 16_384), ("gpt-4.1-mini", 1_047_576, 32_768),
     ("claude-sonnet-4-5-20250929", 200_000, 64_000), ("claude-3-5-haiku-latest", 200_000, 8_192),
     ("SmolLM2-135M-Instruct", 8_192, 1_024), ("some-unknown-model", 200_000, 8_192), (None, 200_000, 8_192)],
)
def test_limits_by_model_family(model: str | None, context: int, output: int) -> None:
    limits = model_limits(model)
    assert (limits.max_context_tokens, limits.max_output_tokens) == (context, output)
    assert limits.input_budget == context - output - limits.safety_margin_tokens


def test_limits_are_overridable_and_checked() -> None:
    limits = model_limits("gpt-4o", max_output_tokens=4_000, compaction_ratio=0.7)
    assert limits.max_output_tokens == 4_000 and limits.compaction_ratio == 0.7
    with pytest.raises(ConfigurationError, match="unknown model limit"):
        model_limits("gpt-4o", max_tokens=5)
    with pytest.raises(ConfigurationError, match="no input budget"):
        ModelLimits(max_context_tokens=1_000, max_output_tokens=1_000)
    with pytest.raises(ConfigurationError):
        ModelLimits(target_ratio=0.9, soft_ratio=0.6)


def test_thresholds() -> None:
    budget = TokenBudget(ModelLimits(max_context_tokens=11_000, max_output_tokens=1_000, safety_margin_tokens=0))
    assert (budget.input_budget, budget.target_tokens, budget.soft_tokens, budget.hard_tokens) == (10_000, 5_000, 6_000, 8_000)
    assert [budget.check(n).pressure for n in (5_999, 6_000, 8_000, 10_000, 10_001)] == [
        Pressure.OK, Pressure.SOFT, Pressure.HARD, Pressure.HARD, Pressure.OVER]
    assert budget.check(7_000, reported=False).reported is False


def test_our_count_includes_framing_tool_calls_and_tool_definitions() -> None:
    definitions = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
    bare = count_prompt_tokens([Message(role="user", content="hello")])
    assert bare == 4 + 1
    with_call = count_prompt_tokens([Message(role="assistant", tool_calls=(ToolCall(id="a", name="f", arguments='{"x": 1}'),))])
    assert with_call > 4 + 1
    assert count_prompt_tokens([Message(role="user", content="hello")], definitions) > bare + 10


def test_pairing_moves_late_results_fills_pending_and_notes_orphans() -> None:
    call = lambda i: ToolCall(id=f"c{i}", name="t")  # noqa: E731
    messages = [
        Message(role="user", content="u1"),
        Message(role="assistant", tool_calls=(call(1), call(2))),
        Message(role="tool", tool_call_id="c2", content="r2"),
        Message(role="user", content="u2"),
        Message(role="tool", tool_call_id="c1", content="r1"),  # late
        Message(role="tool", tool_call_id="c9", tool_result_ref="mem_000000000009", name="old"),  # its call was compacted
    ]
    paired = pair_tool_messages(messages)
    assert [(m.role, m.tool_call_id or m.content) for m in paired] == [
        ("user", "u1"), ("assistant", None), ("tool", "c1"), ("tool", "c2"), ("user", "u2"), ("user", paired[5].content)]
    assert 'retrieve_memory(id="mem_000000000009")' in paired[5].content
    pending = pair_tool_messages([Message(role="assistant", tool_calls=(call(3),))])
    assert pending[1].tool_call_id == "c3" and pending[1].content == PENDING_RESULT


def test_working_context_round_trips_and_refuses_newer_files(tmp_path: Path) -> None:
    path = tmp_path / "working_context_snapshot.json"
    context = WorkingContextSnapshot(FileDocumentSlot(path), agent_id="a")
    context.reset([Message(role="system", content="S")], new_epoch=False)
    context.append(Message(role="user", content="hi", turn_id="turn_0001", seq=1, id="rt_0001_0001"))
    context.append(Message(role="assistant", tool_calls=(ToolCall(id="c", name="t", input={"q": 1}),), turn_id="turn_0001"))
    context.append(Message(role="tool", tool_call_id="c", name="t", tool_result_ref="mem_0123456789ab", turn_id="turn_0001"))
    assert not path.exists() or "hi" not in path.read_text()  # appends wait for a checkpoint
    context.commit_presentation(PresentationState(calls=1, first_call={"mem_0123456789ab": 1}))
    again = WorkingContextSnapshot(FileDocumentSlot(path), agent_id="a")
    assert again.build_messages() == context.build_messages() and again.presentation.calls == 1
    payload = json.loads(path.read_text())
    assert payload["schema_version"] == SCHEMA_VERSION and payload["agent_id"] == "a" and payload["epoch_id"] == 1
    assert payload["messages"][2]["tool_payload"] == {"tool_calls": [{"id": "c", "name": "t", "arguments": {"q": 1}}]}
    context.reset([Message(role="system", content="S2")])
    assert WorkingContextSnapshot(FileDocumentSlot(path)).epoch_id == 2 and json.loads(path.read_text())["last_compaction_ts"] > 0
    path.write_text(json.dumps({**payload, "schema_version": SCHEMA_VERSION + 1}))
    with pytest.raises(StoreError, match="schema version"):
        WorkingContextSnapshot(FileDocumentSlot(path))


def test_snapshot_format_is_the_seeds_and_deterministic() -> None:
    bundle = MemoryBundle(
        episodic=(EpisodicItem(turn_ids=("turn_0001", "turn_0004"), summary="Found the bug.", window_id="win_0001_0004_abcd",
                               done=("fixed parser",)),),
        semantic=(SemanticItem(fact="Use pytest -q.", pinned=True), SemanticItem(fact="User likes brevity.")),
        pinned_items=(("mem_0123456789ab", "the spec"),),
    )
    text = render_bundle(bundle)
    assert text == render_bundle(bundle)
    assert text.startswith("[MEMORY:EPISODIC]\n1) turn_0001-turn_0004: Found the bug.\n   Done: fixed parser")
    assert "[MEMORY:SEMANTIC]\n- Use pytest -q. (pinned)\n- User likes brevity." in text
    assert "[MEMORY:PINNED]\n- [mem_0123456789ab] the spec" in text and "[MEMORY:ACCESS]" in text
    tail = [Message(role="user", content="t5", turn_id="turn_0005")]
    current = [Message(role="user", content="now", turn_id="turn_0006")]
    built = CompactionSnapshotBuilder().build("SYSTEM", bundle, tail, current)
    assert [m.content for m in built] == ["SYSTEM", text, "t5", "now"]
