"""Peers in the replay: each clears what its documentation says, run from its own package (the
Anthropic edit, re-implemented, on constructed histories), and the report lists them like every
other strategy, tokens net and gross and cost."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages.utils import count_tokens_approximately
from typer.testing import CliRunner

from agent_memory.cli import app
from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.prompt_tokens import count_prompt_tokens
from agent_memory.replay import (
    ReplayRun,
    load_tool_definitions,
    load_traces,
    replay_run,
    summarize,
    with_tool_definitions,
    write_report,
)
from agent_memory.replay.peers import (
    ANTHROPIC_PLACEHOLDER,
    DEFAULT_PEERS,
    AnthropicClearToolUses,
    LangChainClearToolUses,
    LangChainSummarization,
    OpenAIAgentsTrimmer,
    _langchain_messages,
    anthropic_clear_tool_uses,
)
from agent_memory.replay.strategies import MASKING, MASKING_RERUN, NAIVE, RERUN_SUFFIX
from agent_memory.tokens import default_token_counter

COUNTER = default_token_counter()
SUMMARY_LEAD = "Here is a summary of the conversation to date:\n\n"


@pytest.fixture(scope="module")
def tau_run(data_dir: Path) -> ReplayRun:
    """A real tau-bench run with many tool results over several user turns."""
    runs = load_traces([data_dir / "traces" / "tau_bench"])
    runs = with_tool_definitions(runs, {"tau_bench": load_tool_definitions(data_dir / "agent_tools" / "tau_bench_airline.json")})
    return next(r for r in runs if sum(m.role == "tool" for m in r.messages) >= 10
                and sum(m.role == "user" for m in r.messages) >= 4)


@pytest.fixture(scope="module")
def swe_run(data_dir: Path) -> ReplayRun:
    runs = load_traces([data_dir / "traces" / "swe_agent"])
    return max(runs, key=lambda r: len(r.calls))


def _naive(run: ReplayRun) -> list[list[Message]]:
    return [list(run.messages[:call]) for call in run.calls]


# -- LangChain ClearToolUsesEdit -----------------------------------------------------------------
@pytest.mark.data
def test_langchain_clear_tool_uses_keeps_the_newest_results_once_past_its_trigger(tau_run: ReplayRun) -> None:
    naive = _naive(tau_run)
    # At its defaults (100,000 tokens) nothing of a tau-bench run is cleared.
    assert list(LangChainClearToolUses().prompts(tau_run.messages, tau_run.calls, tool_definitions=tau_run.tool_definitions,
                                                 counter=COUNTER)) == naive
    edited = list(LangChainClearToolUses(trigger=2_000).prompts(tau_run.messages, tau_run.calls,
                                                                tool_definitions=tau_run.tool_definitions, counter=COUNTER))
    first = next(n for n, (got, full) in enumerate(zip(edited, naive)) if got != full)
    assert edited[:first] == naive[:first]
    # The edit runs once LangChain's approximate count of the messages (system prompt apart) passes 2,000.
    converted = _langchain_messages(tau_run.messages)
    lead = 1 if tau_run.messages[0].role == "system" else 0
    sizes = [count_tokens_approximately(converted[lead:call]) for call in tau_run.calls]
    assert sizes[first] > 2_000 >= sizes[first - 1]
    cleared = 0
    for got, full in zip(edited[first:], naive[first:]):
        results = [n for n, m in enumerate(full) if m.role == "tool"]
        assert all(got[n].content == "[cleared]" for n in results[:-3])  # every older result
        assert all(got[n] == full[n] for n in results[-3:])  # the 3 newest, in full
        assert all(g == f for g, f in zip(got, full) if f.role != "tool")  # calls and turns untouched
        cleared += len(results[:-3])
    assert cleared > 0


# -- LangChain SummarizationMiddleware -----------------------------------------------------------
@pytest.mark.data
def test_langchain_summarization_replaces_the_older_history_with_an_extractive_summary(tau_run: ReplayRun) -> None:
    naive = _naive(tau_run)
    prompts = list(LangChainSummarization().prompts(tau_run.messages, tau_run.calls, tool_definitions=tau_run.tool_definitions,
                                                    counter=COUNTER))
    first = next(n for n, prompt in enumerate(prompts) if prompt != naive[n])
    assert prompts[:first] == naive[:first]
    converted = _langchain_messages(tau_run.messages)
    calls = tau_run.calls
    assert count_tokens_approximately(converted[1:calls[first]]) >= 4_000 > count_tokens_approximately(
        converted[1:calls[first - 1]])
    prompt, full = prompts[first], naive[first]
    assert prompt[0] == full[0] and prompt[0].role == "system"  # the system prompt is kept apart
    summary = prompt[1]
    assert summary.role == "user" and summary.content is not None and summary.content.startswith(SUMMARY_LEAD)
    assert 0 < COUNTER.count(summary.content[len(SUMMARY_LEAD):]) <= 600
    kept = prompt[2:]
    assert len(kept) >= 20 and kept == full[len(full) - len(kept):]  # the newest messages, as they were
    called: set[str] = set()
    for message in kept:  # the cut never separates a result from its call
        called |= {c.id for c in message.tool_calls}
        assert message.role != "tool" or message.tool_call_id in called
    assert sum(len(m.content or "") for m in prompt) < sum(len(m.content or "") for m in full)
    # The summary persists in the agent's state: later prompts append to it until the next summary.
    appended = [n for n in range(first + 1, len(prompts)) if prompts[n][1] == prompts[n - 1][1]]
    assert appended and all(prompts[n][: len(prompts[n - 1])] == prompts[n - 1] for n in appended)


# -- OpenAI Agents SDK ToolOutputTrimmer ----------------------------------------------------------
@pytest.mark.data
def test_openai_agents_trimmer_previews_large_outputs_of_older_turns(tau_run: ReplayRun) -> None:
    prompts = list(OpenAIAgentsTrimmer().prompts(tau_run.messages, tau_run.calls, tool_definitions=tau_run.tool_definitions,
                                                 counter=COUNTER))
    trimmed = 0
    for prompt, full in zip(prompts, _naive(tau_run)):
        names = {c.id: c.name for m in full for c in m.tool_calls}  # the traces reuse call ids: the last one names
        users = [n for n, m in enumerate(full) if m.role == "user"]
        boundary = users[-2] if len(users) >= 2 else 0  # the last 2 user turns are never trimmed
        for n, (got, before) in enumerate(zip(prompt, full)):
            text = before.content or ""
            if before.role == "tool" and n < boundary and len(text) > 500:
                name = names[before.tool_call_id or ""]
                assert got.content == f"[Trimmed: {name} output — {len(text)} chars → 200 char preview]\n{text[:200]}..."
                trimmed += 1
            else:
                assert got == before
        assert len(prompt) == len(full)
    assert trimmed > 0


@pytest.mark.data
def test_openai_agents_trimmer_never_trims_a_single_task_run(swe_run: ReplayRun) -> None:
    users = [n for n, m in enumerate(swe_run.messages) if m.role == "user"]
    results = [n for n, m in enumerate(swe_run.messages) if m.role == "tool"]
    assert results and max(users) < min(results)  # every user message comes before the first result
    prompts = OpenAIAgentsTrimmer().prompts(swe_run.messages, swe_run.calls, tool_definitions=(), counter=COUNTER)
    assert list(prompts) == _naive(swe_run)


# -- Anthropic clear_tool_uses_20250919, re-implemented -------------------------------------------
def _history(tools: tuple[str, ...] = ("search", "fetch", "search", "fetch", "fetch")) -> list[Message]:
    """A system prompt, a task, then one call and its ~300-token result per tool, oldest first."""
    messages = [Message(role="system", content="You are a research agent."), Message(role="user", content="Find it.")]
    for n, tool in enumerate(tools):
        call = ToolCall(id=f"c{n}", name=tool, arguments=json.dumps({"query": f"query number {n}"}))
        messages.append(Message(role="assistant", tool_calls=(call,)))
        messages.append(Message(role="tool", tool_call_id=f"c{n}", name=tool, content=f"result {n}: " + "word " * 300))
    return messages


def _clear(messages: list[Message], tools: tuple[dict, ...] = (), **edit: object) -> list[Message]:
    return anthropic_clear_tool_uses(messages, {"type": "clear_tool_uses_20250919", **edit},  # type: ignore[typeddict-item]
                                     tool_definitions=tools, count=COUNTER.count)


def _cleared(messages: list[Message]) -> list[int]:
    """Which tool uses (0-based, oldest first) had their result cleared."""
    results = [m for m in messages if m.role == "tool"]
    return [n for n, m in enumerate(results) if m.content == ANTHROPIC_PLACEHOLDER]


def test_anthropic_trigger_fires_only_once_the_prompt_exceeds_it() -> None:
    history = _history()
    assert _clear(history) == history  # the default trigger, 100,000 input tokens
    size = count_prompt_tokens(history)
    assert _clear(history, trigger={"type": "input_tokens", "value": size}) == history  # "exceeds": not at it
    assert _cleared(_clear(history, trigger={"type": "input_tokens", "value": size - 1})) == [0, 1]
    assert _clear(history, trigger={"type": "tool_uses", "value": 5}) == history  # 5 uses
    assert _cleared(_clear(history, trigger={"type": "tool_uses", "value": 4})) == [0, 1]


def test_anthropic_keeps_the_newest_uses_and_leaves_the_rest_of_the_prompt() -> None:
    history = _history()
    edited = _clear(history, trigger={"type": "tool_uses", "value": 0})
    assert _cleared(edited) == [0, 1]  # keep: 3 tool uses by default
    assert [m for m in edited if m.role != "tool"] == [m for m in history if m.role != "tool"]  # inputs stay
    assert _cleared(_clear(history, trigger={"type": "tool_uses", "value": 0}, keep={"type": "tool_uses", "value": 1})) \
        == [0, 1, 2, 3]
    assert _cleared(_clear(history, trigger={"type": "tool_uses", "value": 0}, keep={"type": "tool_uses", "value": 0})) \
        == [0, 1, 2, 3, 4]


def test_anthropic_exclude_tools_and_clear_tool_inputs() -> None:
    history = _history()
    fired = {"trigger": {"type": "tool_uses", "value": 0}, "keep": {"type": "tool_uses", "value": 1}}
    assert _cleared(_clear(history, **fired, exclude_tools=["search"])) == [1, 3]  # search results never cleared
    every = _clear(history, **fired, clear_tool_inputs=True)
    calls = [m.tool_calls[0] for m in every if m.tool_calls]
    assert [c.arguments for c in calls] == ["{}"] * 4 + [json.dumps({"query": "query number 4"})]
    assert all(c.name == h.tool_calls[0].name for c, h in zip(calls, [m for m in history if m.tool_calls]))
    some = _clear(history, **fired, clear_tool_inputs=["fetch"])  # only fetch calls lose their inputs
    assert [m.tool_calls[0].arguments == "{}" for m in some if m.tool_calls] == [False, True, False, True, False]


def test_anthropic_clear_at_least_applies_the_edit_only_when_it_frees_enough() -> None:
    history = _history()
    fired = {"trigger": {"type": "tool_uses", "value": 0}}
    freed = count_prompt_tokens(history) - count_prompt_tokens(_clear(history, **fired))
    assert freed > 500  # two ~300-token results
    assert _clear(history, **fired, clear_at_least={"type": "input_tokens", "value": freed + 1}) == history
    assert _cleared(_clear(history, **fired, clear_at_least={"type": "input_tokens", "value": freed})) == [0, 1]


def test_anthropic_text_actions_count_as_tool_uses_and_bad_edits_raise() -> None:
    history = [Message(role="user", content="Fix the bug.")]
    for n in range(4):  # SWE-agent without function calling: the action is the assistant's text
        history += [Message(role="assistant", content=f"```\nls dir{n}\n```"),
                    Message(role="tool", tool_call_id=f"obs_{n}", name="shell", content="file " * 50)]
    assert _cleared(_clear(history, trigger={"type": "tool_uses", "value": 3})) == [0]
    with pytest.raises(ValueError, match="not a clear_tool_uses_20250919 edit"):
        anthropic_clear_tool_uses(history, {"type": "clear_thinking_20251015"}, count=COUNTER.count)  # type: ignore[typeddict-item]
    with pytest.raises(ValueError, match="trigger takes"):
        _clear(history, trigger={"type": "messages", "value": 3})


@pytest.mark.data
def test_anthropic_peer_replays_every_call_from_the_full_history(tau_run: ReplayRun) -> None:
    edit = {"type": "clear_tool_uses_20250919", "trigger": {"type": "input_tokens", "value": 5_000}}
    peer = AnthropicClearToolUses(edit=edit, label="anthropic_5k")  # type: ignore[arg-type]
    prompts = list(peer.prompts(tau_run.messages, tau_run.calls, tool_definitions=tau_run.tool_definitions, counter=COUNTER))
    for prompt, full in zip(prompts, _naive(tau_run)):
        fires = count_prompt_tokens(full, tau_run.tool_definitions) > 5_000
        assert prompt == (_clear(full, tau_run.tool_definitions, trigger=edit["trigger"]) if fires else full)
        if fires:
            assert _cleared(prompt) == list(range(max(0, sum(m.role == "tool" for m in full) - 3)))
    assert any(_cleared(prompt) for prompt in prompts)


# -- the replay and its report --------------------------------------------------------------------
@pytest.mark.data
def test_report_lists_every_peer_with_net_and_gross_tokens_and_cost(
        tau_run: ReplayRun, swe_run: ReplayRun, tmp_path: Path) -> None:
    results = [replay_run(run, strategies=[PresentationPolicy()], peers=DEFAULT_PEERS, workdir=tmp_path / run.source)
               for run in (tau_run, swe_run)]
    labels = [peer.label for peer in DEFAULT_PEERS]
    for result in results:
        assert list(result.curves) == [NAIVE, MASKING, MASKING_RERUN, PresentationPolicy().label,
                                       *[name for label in labels for name in (label, label + RERUN_SUFFIX)]]
        for label in labels:
            curve, rerun = result.curves[label], result.curves[label + RERUN_SUFFIX]
            assert len(curve.prompt_tokens) == result.calls
            assert curve.tool_tokens == [result.own_tool_tokens] * result.calls  # the agent's own tools, unchanged
            assert curve.prompt_tokens == [m + t for m, t in zip(curve.message_tokens, curve.tool_tokens)]
            assert curve.gross_total <= result.curves[NAIVE].gross_total
            # what the peer lost is paid for by re-running the tool: one more call per re-run
            assert rerun.retrieves == 0 if curve.lost == 0 else rerun.retrieves > 0
            assert len(rerun.prompt_tokens) == result.calls + rerun.retrieves
            assert rerun.lost <= curve.lost and rerun.needed == curve.needed
    assert results[0].curves["anthropic_clear_tool_uses_5k"].gross_total < results[0].curves[NAIVE].gross_total
    report = summarize(results)
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert list(data["peers"]) == [name for label in labels for name in (label, label + RERUN_SUFFIX)]
    assert "re-implementation" in data["peers"]["anthropic_clear_tool_uses"]
    assert all("re-implementation" not in data["peers"][label] for label in labels[:3])
    assert "`langchain` package" in data["peers"]["langchain_clear_tool_uses"]
    assert "`openai-agents` package" in data["peers"]["openai_agents_trimmer"]
    for source in [*data["sources"], data["total"]]:
        for label in labels:
            summary = source["strategies"][label]
            assert summary["prompt_tokens"] == summary["message_tokens"] + summary["tool_tokens"]
            assert summary["runs_citing"] is None
            assert set(summary["cost"]) == {"claude-sonnet-4-6", "gpt-4o", "gpt-5"}
            assert all(cost["total_usd"] > 0 for cost in summary["cost"].values())
    text = paths["md"].read_text(encoding="utf-8")
    headers = [line for line in text.splitlines() if line.startswith("| source |")]
    assert data["default"] == PresentationPolicy().label
    assert not any(label in headers[0] for label in labels)  # the short headline table: the default against naive
    tokens_part = text[text.index("### Tokens per strategy"):text.index("### Cost per strategy")]
    cost_part = text[text.index("### Cost per strategy"):text.index("Where the money goes")]
    for label in labels:  # a row of each detail table per strategy
        assert f"\n| {label} net (gross) |" in tokens_part and f"\n| {label} |" in cost_part
        assert f"- `{label}`: " in text


@pytest.mark.data
def test_cli_replays_the_installed_peers_by_default_and_those_named(data_dir: Path, tmp_path: Path) -> None:
    traces = data_dir / "traces" / "tau_bench"
    definitions = f"tau_bench={data_dir / 'agent_tools' / 'tau_bench_airline.json'}"
    runner = CliRunner()
    default = runner.invoke(app, ["replay", str(traces), "--limit-runs", "1", "--tool-definitions", definitions,
                                  "--no-react-check", "--out", str(tmp_path / "default")])
    assert default.exit_code == 0, default.output
    data = json.loads((tmp_path / "default" / "report.json").read_text(encoding="utf-8"))
    assert data["strategies"][-2 * len(DEFAULT_PEERS):] == [
        name for peer in DEFAULT_PEERS for name in (peer.label, peer.label + RERUN_SUFFIX)]
    named = runner.invoke(app, ["replay", str(traces), "--limit-runs", "1", "--tool-definitions", definitions, "--no-react-check",
                                "--policy", "full_once", "--peer", "anthropic_clear_tool_uses_5k",
                                "--out", str(tmp_path / "named")])
    assert named.exit_code == 0, named.output
    data = json.loads((tmp_path / "named" / "report.json").read_text(encoding="utf-8"))
    assert data["strategies"] == [NAIVE, MASKING, MASKING_RERUN, "full_once", "anthropic_clear_tool_uses_5k",
                                  "anthropic_clear_tool_uses_5k+rerun"]
    assert list(data["peers"]) == ["anthropic_clear_tool_uses_5k", "anthropic_clear_tool_uses_5k+rerun"]
    unknown = runner.invoke(app, ["replay", str(traces), "--peer", "nope"])
    assert unknown.exit_code == 1 and "unknown peer" in unknown.output
