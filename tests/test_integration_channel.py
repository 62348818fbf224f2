"""MemoryChannel, the part every framework adapter shares: results stored once under ids derived
from the conversation and the call, shown once then cited, memory tools offered as needed, and
usage priced."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_memory import AgentMemory
from agent_memory.errors import InvalidIdError
from agent_memory.inspector import agent_scopes
from agent_memory.integrations.channel import MemoryChannel, Presented, UsageLedger, result_id
from agent_memory.integrations.snapshots import sub_agent_memory
from agent_memory.llm.chat import Usage
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.context import FORGOTTEN_NOTE
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel

ROWS = "".join(f"Row {n}: unit {n} shipped {n * 7} parcels to Lisbon and {n * 3} to Porto.\n" for n in range(150))


def _rows(n: int) -> str:
    return ROWS.replace("Row", f"W{n} row")


def _history(*, calls: int = 1) -> list[Message]:
    history = [Message(role="user", content="How many parcels went to Lisbon?")]
    for n in range(calls):
        call = ToolCall(id=f"c{n}", name="report", arguments='{"week": %d}' % n)
        history += [Message(role="assistant", tool_calls=(call,)),
                    Message(role="tool", tool_call_id=call.id, name="report", content=_rows(n))]
    return history


def test_a_result_is_stored_once_per_conversation_and_cited_after_its_first_showing(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    channel = MemoryChannel(memory, conversation_id="c1", policy=PresentationPolicy(start="first_call"))
    first = channel.present(_history())
    assert first.stored == (result_id("agent", "c1", "c0", _rows(0)),)
    assert "W0 row 149" in first.shown[2]  # in full the first time
    assert first.memory_tool_names == ["retrieve_memory"] and first.memory_prompt is not None
    history = _history(calls=2)
    second = channel.present(history)
    assert second.stored == (result_id("agent", "c1", "c1", _rows(1)),)
    assert result_id("agent", "c1", "c0", _rows(0)) in second.shown[2] and len(second.shown[2]) < len(ROWS) // 5  # cited
    again = MemoryChannel(memory, conversation_id="c1").present(history)  # another process, same conversation
    assert again.stored == () and len(memory.records()) == 2
    MemoryChannel(memory, conversation_id="c2").present(history)  # another conversation: its own items
    assert len(memory.records()) == 4
    with pytest.raises(InvalidIdError):
        MemoryChannel(memory, conversation_id="a/b")


def _reused(*answers: str, call_id: str = "c0") -> list[Message]:
    """A conversation whose calls all carry ``call_id`` (a server that numbers its calls afresh
    each turn, as in 45 of the 140 tau-bench runs), one answer each."""
    history = [Message(role="user", content="Compare the weeks.")]
    for n, answer in enumerate(answers):
        call = ToolCall(id=call_id, name="report", arguments='{"week": %d}' % n)
        history += [Message(role="assistant", tool_calls=(call,)),
                    Message(role="tool", tool_call_id=call_id, name="report", content=answer)]
    return history


def test_a_reused_call_id_keeps_each_of_its_results_shown_and_cited_as_itself(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    channel = MemoryChannel(memory, policy=PresentationPolicy(start="first_call"))
    first_id, second_id = (result_id("agent", "default", "c0", _rows(n)) for n in (0, 1))
    channel.present(_reused(_rows(0)))
    history = _reused(_rows(0), _rows(1))
    second = channel.present(history)
    assert second.stored == (second_id,) and memory.get(second_id).content == _rows(1)
    assert memory.get(second_id).metadata.title == 'report({"week": 1})'  # its own call's arguments
    assert first_id in second.shown[2] and second.shown[4] == _rows(1)  # the first cited, the second in full
    third = channel.present(_reused(_rows(0), _rows(1), _rows(2)))
    assert second_id in third.shown[4] and first_id not in third.shown[4]  # then cited as itself
    # A history the framework trimmed (a session's compaction): the second result is still itself
    # (a key by position among the call id's results would now name the first).
    trimmed = [history[0], *history[3:]]
    again = MemoryChannel(memory).present(trimmed)  # another process
    assert again.stored == () and again.shown == {2: _rows(1)} and len(memory.records()) == 3


def test_a_result_is_one_item_per_call_id_and_text(tmp_path: Path) -> None:
    memory = AgentMemory("agent", tmp_path)
    channel = MemoryChannel(memory)
    answer = "Seat 12A is free."
    repeated = _reused(answer, answer)  # the call repeated, the same answer: one item, shown twice
    presented = channel.present(repeated)
    assert presented.stored == (result_id("agent", "default", "c0", answer),)
    assert presented.shown == {2: answer, 4: answer}
    seat = ToolCall(id="c9", name="seat", arguments='{"seat": "12A"}')
    other = [*repeated, Message(role="assistant", tool_calls=(seat,)),
             Message(role="tool", tool_call_id="c9", name="seat", content=answer)]
    assert channel.present(other).stored == (result_id("agent", "default", "c9", answer),)  # its own call's item
    assert len(memory.records()) == 2 and channel.stored_ids == [result_id("agent", "default", c, answer)
                                                                 for c in ("c0", "c9")]


def test_a_showing_handed_back_as_the_result_is_known_as_it_after_a_restart_too(tmp_path: Path) -> None:
    """pydantic-ai keeps a history processor's output as the run's history: the next call
    presents the citation the channel made, in place of the result."""
    memory = AgentMemory("agent", tmp_path)
    policy = PresentationPolicy(start="first_call")
    channel = MemoryChannel(memory, policy=policy)
    first_id = result_id("agent", "default", "c0", _rows(0))
    channel.present(_reused(_rows(0)))
    history = _reused(_rows(0), _rows(1))
    sent = channel.present(history)

    def kept(presented: Presented) -> list[Message]:
        return [m.model_copy(update={"content": presented.shown[i]}) if i in presented.shown else m
                for i, m in enumerate(history)]

    assert first_id in kept(sent)[2].content  # type: ignore[operator]
    assert channel.present(kept(sent)).stored == ()  # this process
    restarted = MemoryChannel(memory, policy=policy).present(kept(sent))
    assert restarted.stored == () and restarted.shown[2] == _rows(0)  # known from the id the citation names
    echoed = _reused(kept(sent)[2].content or "", call_id="c5")  # another call's text naming it
    assert len(MemoryChannel(memory).present(echoed).stored) == 1  # a result of its own
    memory.forget(first_id)
    gone = channel.present(history)
    assert gone.shown[2] == FORGOTTEN_NOTE.format(id=first_id)
    assert MemoryChannel(memory, policy=policy).present(kept(gone)).stored == ()  # the note is not a result
    assert len(memory.records()) == 2  # the second result and the echo


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
    assert all(result_id("agent", "default", f"c{n}", _rows(n)) in presented.shown[i]
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
    """benchmarks/bench_adapters.py on two tau-bench runs that reuse a tool-call id: every call
    identical to the replay's. Run 3's results never pay for their citations, so both adapters
    send exactly what an agent without memory sends (while a call id's second result was shown as
    its first, 2,450 tokens more); run 74 cites, and sends less."""
    import importlib.util
    import json

    spec = importlib.util.spec_from_file_location("bench_adapters", Path(__file__).parents[1] / "benchmarks" / "bench_adapters.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "adapters.json"
    assert bench.main(["--data", str(data_dir), "--pick", "3", "--pick", "74", "--model", "gpt-4o",
                       "--out", str(out)]) == 0
    results = json.loads(out.read_text())["price_models"]["gpt-4o"]
    summary, (reusing, citing) = results["summary"], results["runs"]
    assert summary["calls"] > 10
    for adapter in ("langchain", "openai_agents"):
        assert summary[adapter]["identical_calls"] == summary["calls"]
        assert summary[adapter]["tokens"] == summary[adapter]["reference_tokens"]
        assert reusing[adapter]["tokens"] == reusing["naive_tokens"]
        assert citing[adapter]["tokens"] < citing["naive_tokens"]
        assert summary[adapter]["runs_costing_more_than_naive"] == 0 and summary[adapter]["cost_vs_naive_pct"] < 0


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


def test_every_adapter_takes_a_local_models_name_and_runs_unpriced(tmp_path: Path) -> None:
    # a model the bundled price table lacks (vLLM, Ollama): no error, one warning, usage counted
    # unpriced with the reason, one way to read it in the three adapters
    import warnings

    from agent_memory.diagnostics import UnknownModelWarning
    from agent_memory.integrations.langchain import LangChainMemory
    from agent_memory.integrations.openai_agents import OpenAIAgentsMemory
    from agent_memory.integrations.pydantic_ai import PydanticAIMemory

    model = "local-model-for-the-adapters-test"  # a name no other test warns about first
    memory = AgentMemory("local", tmp_path / "memory")
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        adapters = [OpenAIAgentsMemory(memory, model=model), PydanticAIMemory(memory, model=model),
                    LangChainMemory(memory, model=model)]
    assert [w.category for w in seen if issubclass(w.category, UnknownModelWarning)] == [UnknownModelWarning]
    for adapter in adapters:
        usage = adapter.usage
        assert usage.prices is None and usage.unpriced_reason is not None and repr(model) in usage.unpriced_reason
    channel = adapters[0].channel
    assert channel.record_usage(Usage(prompt_tokens=1_000, completion_tokens=20)) is None
    assert adapters[0].usage.calls == 1 and adapters[0].usage.unpriced_calls == 1 and adapters[0].usage.total_usd is None
    memory.close()
