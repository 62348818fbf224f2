"""MemoryChannel, the part every framework adapter shares: results stored once under ids derived
from the conversation and the call, shown once then cited, memory tools offered as needed, and
usage priced."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory import AgentMemory
from agent_memory.errors import InvalidIdError
from agent_memory.inspector import agent_scopes
from agent_memory.integrations.channel import MemoryChannel, UsageLedger, result_id
from agent_memory.integrations.snapshots import sub_agent_memory
from agent_memory.llm.chat import Usage
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel

ROWS = "".join(f"Row {n}: unit {n} shipped {n * 7} parcels to Lisbon and {n * 3} to Porto.\n" for n in range(150))


def _history(*, calls: int = 1) -> list[Message]:
    history = [Message(role="user", content="How many parcels went to Lisbon?")]
    for n in range(calls):
        call = ToolCall(id=f"c{n}", name="report", arguments='{"week": %d}' % n)
        history += [Message(role="assistant", tool_calls=(call,)),
                    Message(role="tool", tool_call_id=call.id, name="report", content=ROWS.replace("Row", f"W{n} row"))]
    return history


def test_a_result_is_stored_once_per_conversation_and_cited_after_its_first_showing(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    channel = MemoryChannel(memory, conversation_id="c1", policy=PresentationPolicy(start="first_call"))
    first = channel.present(_history())
    assert first.stored == (result_id("agent", "c1", "c0"),)
    assert "W0 row 149" in first.shown[2]  # in full the first time
    assert first.memory_tool_names == ["retrieve_memory"] and first.memory_prompt is not None
    history = _history(calls=2)
    second = channel.present(history)
    assert second.stored == (result_id("agent", "c1", "c1"),)
    assert result_id("agent", "c1", "c0") in second.shown[2] and len(second.shown[2]) < len(ROWS) // 5  # cited
    again = MemoryChannel(memory, conversation_id="c1").present(history)  # another process, same conversation
    assert again.stored == () and len(memory.records()) == 2
    MemoryChannel(memory, conversation_id="c2").present(history)  # another conversation: its own items
    assert len(memory.records()) == 4
    with pytest.raises(InvalidIdError):
        MemoryChannel(memory, conversation_id="a/b")


def test_errors_and_memory_tool_answers_are_not_stored(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    channel = MemoryChannel(memory)
    retrieve = ToolCall(id="r1", name="retrieve_memory", arguments='{"id": "mem_000000000000"}')
    failing = ToolCall(id="f1", name="report", arguments="{}")
    presented = channel.present([
        Message(role="user", content="go"),
        Message(role="assistant", tool_calls=(retrieve, failing)),
        Message(role="tool", tool_call_id="r1", name="retrieve_memory", content="No memory item 'mem_000000000000'."),
        Message(role="tool", tool_call_id="f1", name="report", content="timeout", is_error=True),
    ])
    assert presented.stored == () and presented.shown == {} and memory.records() == []


def test_a_trimmed_history_is_presented_as_a_rewrite(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    channel = MemoryChannel(memory, policy=PresentationPolicy(start="first_call"))
    channel.present(_history(calls=3))
    trimmed = [_history()[0], *_history(calls=3)[3:]]  # the framework dropped the first exchange
    presented = channel.present(trimmed)
    assert [m.role for m in presented.messages][:3] == ["system", "user", "assistant"]  # memory prompt, then history
    assert all(result_id("agent", "default", f"c{n}") in presented.shown[i]
               for n, i in ((1, 2), (2, 4)))  # every due swap is made in the rewritten prompt


def test_usage_is_priced_with_prompt_caching_and_sub_agents_are_absorbed() -> None:
    prices = PriceModel.lookup("gpt-4o")
    ledger = UsageLedger(prices=prices)
    cost = ledger.record(Usage(prompt_tokens=10_000, completion_tokens=100, cached_tokens=8_192))
    uncached = prices.price(Usage(prompt_tokens=10_000, completion_tokens=100).billed_tokens())  # type: ignore[arg-type]
    assert cost is not None and cost.total_usd < uncached.total_usd  # cached reads are cheaper
    assert ledger.record(Usage(prompt_tokens=None, completion_tokens=5)) is None and ledger.unpriced_calls == 1
    child = UsageLedger(prices=prices)
    child.record(Usage(prompt_tokens=1_000, completion_tokens=10))
    ledger.absorb(child)
    assert ledger.calls == 3 and ledger.billed.input_tokens == 11_000 and ledger.total_usd == cost.total_usd + child.total_usd
    assert UsageLedger().record(Usage(prompt_tokens=10, completion_tokens=1)) is None  # no price model: counted only


def test_both_adapters_send_the_replays_prompts_on_real_tau_bench_runs(tmp_path: Path, data_dir: Path) -> None:
    """benchmarks/bench_adapters.py on two tau-bench runs: every call identical. Run 3 is one whose
    citing starts only when the system prompt (6,000 characters of airline policy) is counted as
    part of the prompt: the LangChain middleware once left it out and cited 3 calls early."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("bench_adapters", Path(__file__).parents[1] / "benchmarks" / "bench_adapters.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "adapters.json"
    assert bench.main(["--data", str(data_dir), "--pick", "0", "--pick", "3", "--out", str(out)]) == 0
    summary = json.loads(out.read_text())["summary"]
    assert summary["calls"] > 10
    for adapter in ("langchain", "openai_agents"):
        assert summary[adapter]["identical_calls"] == summary["calls"]
        assert summary[adapter]["tokens"] == summary[adapter]["reference_tokens"] < summary["naive_tokens"]


def test_an_adapters_sub_agent_is_recorded_with_its_parent_and_scope(tmp_path: Path) -> None:
    parent = AgentMemory("lead", tmp_path / "memory")
    parent.store("The bridge opens at nine.")
    child, child_id = sub_agent_memory(parent, "isolated")
    shared, shared_id = sub_agent_memory(parent, "shared")
    scopes = {scope.agent_id: scope for scope in agent_scopes(parent.backend)}
    assert (scopes[child_id].parent_id, scopes[child_id].scope, scopes[child_id].source) == ("lead", "isolated",
                                                                                              "spawn record")
    assert (scopes[shared_id].scope, scopes[shared_id].memory_id) == ("shared", "lead") and shared is parent
    child.close()
    parent.close()
