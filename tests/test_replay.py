"""Replay: loaders on the real traces, the engine's accounting, the report files and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agent_memory.cli import app
from agent_memory.errors import InvalidArgumentError
from agent_memory.models.messages import Message
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel
from agent_memory.replay import (
    load_tool_definitions,
    load_page_session,
    load_traces,
    react_query_check,
    replay_run,
    summarize,
    with_tool_definitions,
    write_report,
)
from agent_memory.replay.engine import RunResult, StrategyCurve, memory_tool_sizes
from agent_memory.replay.loaders import limit_per_source, load_react_log, load_swe_agent
from agent_memory.replay.pages import find_react_log
from agent_memory.replay.report_plots import figure
from agent_memory.replay.strategies import (
    DEFAULT_STRATEGIES,
    MASK_PLACEHOLDER,
    MASKING,
    MASKING_RERUN,
    NAIVE,
    parse_policy,
    parse_strategy,
)
from agent_memory.tokens import default_token_counter

pytestmark = pytest.mark.data


@pytest.fixture(scope="module")
def traces(data_dir: Path) -> Path:
    return data_dir / "traces"


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.from_entry_points()


# -- loaders -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("folder", "runs", "calls"),
    [("tau_bench", 140, 2023), ("swe_agent", 15, 143), ("react_hotpotqa", 308, 1131)],
)
def test_loaders_match_baselines_counts(traces: Path, folder: str, runs: int, calls: int) -> None:
    loaded = load_traces([traces / folder])
    assert len(loaded) == runs
    assert sum(len(run.calls) for run in loaded) == calls  # as the public baseline counted them
    assert len({run.run_id for run in loaded}) == runs
    assert all(run.source == folder for run in loaded)


def test_tau_bench_messages_keep_tool_calls_and_results(traces: Path) -> None:
    runs = load_traces([traces / "tau_bench"])
    assert sum(1 for run in runs for m in run.messages if m.role == "tool") == 1001
    raw = json.loads((traces / "tau_bench" / "gpt-4o-airline-dev.json").read_text(encoding="utf-8"))[0]["traj"]
    first = runs[0]
    assert len(first.messages) == len(raw)
    call_msg = next(m for m in first.messages if m.tool_calls)
    assert call_msg.tool_calls[0].name == "get_user_details"
    assert json.loads(call_msg.tool_calls[0].arguments) == {"user_id": "mia_li_3668"}


def test_swe_agent_history_observations_become_tool_results(traces: Path) -> None:
    path = next(p for p in sorted((traces / "swe_agent").glob("*.traj")) if "function_calling_simple" in p.name)
    (run,) = load_swe_agent(path)
    roles = [m.role for m in run.messages]
    assert roles[:3] == ["system", "user", "assistant"]  # the task stays a user message
    tools = [m for m in run.messages if m.role == "tool"]
    assert tools and tools[0].content.startswith("Found 1 matches")
    assert run.messages[2].tool_calls[0].name == "find_file"  # parsed from SWE-agent's Python repr
    assert tools[0].tool_call_id == run.messages[2].tool_calls[0].id


def test_react_runs_have_questions_answers_and_multiline_observations(traces: Path) -> None:
    runs = load_react_log(traces / "react_hotpotqa" / "react_trials_1-3.txt")
    first = runs[0]
    assert first.question == "Which of Jonny Craig and Pete Doherty has been a member of more bands ?"
    assert first.answer == "Jonny Craig"
    assert first.run_id == "trial1-correct-000"
    assert first.messages[0].content.startswith("Question: ")
    assert first.messages[1].content.startswith("Thought 1: ") and "\nAction 1: Search[Jonny Craig]" in first.messages[1].content
    assert first.messages[2].role == "tool" and first.messages[2].content.startswith("Jonathan Monroe Craig")
    assert sum(1 for run in runs if run.answer) > 200  # halted runs have no Finish
    assert any("\n" in m.content for run in runs for m in run.messages if m.role == "tool")


# -- engine -------------------------------------------------------------------------------------
def _hand_naive(raw_messages: list[dict]) -> list[int]:
    """The prompt accounting (each message 4 framing tokens + its content, o200k_base) straight from
    the raw OpenAI messages."""
    counter = default_token_counter()

    def size(m: dict) -> int:
        tokens = 4 + counter.count(m.get("content") or "")
        for call in m.get("tool_calls") or []:
            tokens += counter.count(call["function"]["name"]) + counter.count(call["function"]["arguments"])
        return tokens

    sizes = [size(m) for m in raw_messages]
    return [sum(sizes[:i]) for i, m in enumerate(raw_messages) if m["role"] == "assistant"]


def test_engine_naive_and_masking_match_hand_count(traces: Path, registry: PluginRegistry, tmp_path: Path) -> None:
    raw = json.loads((traces / "tau_bench" / "gpt-4o-airline-dev.json").read_text(encoding="utf-8"))[0]["traj"]
    run = load_traces([traces / "tau_bench"])[0]
    result = replay_run(run, registry=registry, workdir=tmp_path)
    assert result.curves[NAIVE].prompt_tokens == _hand_naive(raw)
    # Masking: same, with every result but the 3 newest replaced by the placeholder.
    masked = []
    tools_total = [i for i, m in enumerate(raw) if m["role"] == "tool"]
    for i, m in enumerate(raw):
        if m["role"] != "assistant":
            continue
        older = set(t for t in tools_total if t < i)
        keep = set(sorted(older)[-3:])
        prompt = [dict(x, content=MASK_PLACEHOLDER) if j in older - keep else x for j, x in enumerate(raw[:i])]
        masked.append(_hand_naive(prompt + [{"role": "assistant"}])[-1])
    assert result.curves[MASKING].prompt_tokens == masked
    # Naive prompts always extend the previous one: the cache-reusable prefix is the previous prompt.
    assert result.curves[NAIVE].prefix_tokens[1:] == result.curves[NAIVE].prompt_tokens[:-1]
    # Each call's output: the assistant message after it, without the 4 framing tokens.
    answers = [m for m in raw if m["role"] == "assistant"]
    assert result.output_tokens == [_hand_naive([m, {"role": "assistant"}])[-1] - 4 for m in answers]


def test_engine_agent_memory_below_naive_and_round_trip(traces: Path, registry: PluginRegistry, tmp_path: Path) -> None:
    with_results = [
        run for run in load_traces([traces / "tau_bench", traces / "swe_agent"])
        if sum(1 for m in run.messages if m.role == "tool") >= 3
    ]
    runs = [r for r in with_results if r.source == "tau_bench"][:3] + [r for r in with_results if r.source == "swe_agent"][:2]
    sizes = memory_tool_sizes()
    offer = sizes["offered_when_citing"] + sizes["memory_prompt"]
    citing = 0
    totals: dict[str, int] = {}
    for n, run in enumerate(runs):
        result = replay_run(run, registry=registry, workdir=tmp_path / str(n))
        assert result.roundtrip_ok == result.results > 0
        naive = result.curves[NAIVE]
        tokens_only = result.curves["full_once+tokens"]
        # by tokens alone never above naive, call by call, memory tools included
        assert all(mine <= theirs for mine, theirs in zip(tokens_only.prompt_tokens, naive.prompt_tokens))
        assert tokens_only.total <= naive.total
        priced = {f"{label} {model}": curve for label in ("full_once", "keep_last_3")
                  for model, curve in result.priced_curves[label].items()}
        for name, curve in {NAIVE: naive, "tokens": tokens_only, **priced}.items():
            totals[name] = totals.get(name, 0) + curve.total
            # under a price model the offer may come with the first (cached) prompt, before citing
            # saves anything: each prompt at most the offer above the naive one
            assert all(mine <= theirs + offer for mine, theirs in zip(curve.prompt_tokens, naive.prompt_tokens))
            if curve.citing_since is None:  # citing never began: the naive prompts
                assert curve.prompt_tokens == naive.prompt_tokens
        if tokens_only.citing_since is not None:  # by tokens alone, citing starts early
            citing += 1
            assert tokens_only.gross_total < naive.gross_total
        assert set(result.priced_curves["full_once"]) == {"claude-sonnet-4-6", "gpt-4o", "gpt-5"}
        chosen = result.curves["full_once"]  # one entry per call, and one per simulated retrieve
        assert len(chosen.prompt_tokens) == len(chosen.output_tokens) == result.calls + chosen.retrieves
        assert result.calls == len(run.calls)
        assert len(result.citation_tokens) == result.results
    # a run too short to pay the offer back may send more than naive; together they send less
    assert [name for name, total in totals.items() if total > totals[NAIVE]] == [], totals
    # results this small (tau-bench's 200-500 tokens) are not worth a citation under a price model:
    # the default sends what naive sends; by tokens alone it cites and sends less
    assert totals["tokens"] < totals[NAIVE]
    assert citing >= 2


GUARANTEE_RUNS = 5
"""Runs of each source the guarantee below replays: the first five, in the loaders' order."""


def test_the_default_never_costs_more_than_naive_on_a_source(traces: Path, data_dir: Path, registry: PluginRegistry,
                                                             tmp_path: Path) -> None:
    # The default (full_once, cache-aware under the price model it is billed under) against sending
    # every result in full, per source and per headline price model, priced as the replay prices
    # every figure: prompt caching, the memory tools and their prompt wherever sent, each simulated
    # retrieve. Before the read-back was priced the first five SWE-agent runs cost 3.0% more than
    # naive under gpt-4o and the first five tau-bench runs 0.1% more.
    runs = limit_per_source(with_tool_definitions(load_traces([traces]), {
        "tau_bench": load_tool_definitions(data_dir / "agent_tools" / "tau_bench_airline.json")}), GUARANTEE_RUNS)
    results = [replay_run(run, strategies=[DEFAULT_STRATEGIES[0]], registry=registry, workdir=tmp_path / str(n))
               for n, run in enumerate(runs)]
    report = summarize(results)
    assert [source.source for source in report.sources] == [
        "react_hotpotqa", "smolagents_gaia", "swe_agent", "tapeagents_gaia_workarena", "tau_bench"]
    dearer = {(source.source, model): f"{cost.change:+.2%}" for source in report.sources
              for model, cost in source.strategies["full_once"].cost.items() if cost.total_usd > source.strategies[
                  NAIVE].cost[model].total_usd}
    assert dearer == {}
    assert all(set(source.strategies["full_once"].cost) == {"claude-sonnet-4-6", "gpt-4o", "gpt-5"}
               for source in report.sources)


# -- the page session: real ReAct turns, real pages as the Search results ---------------------------
def _page_files(data_dir: Path) -> list[Path]:
    pages = data_dir / "webpages" / "readability"
    return sorted(p / "source.html" for p in pages.iterdir() if (p / "source.html").is_file())


def _questions(messages: tuple[Message, ...]) -> list[list[Message]]:
    """The session cut at each user message (the system prompt left out)."""
    cut: list[list[Message]] = []
    for message in messages[1:]:
        if message.role == "user":
            cut.append([])
        cut[-1].append(message)
    return cut


def _as_react_text(step: int, message: Message) -> str:
    """The ReAct log's ``Thought n / Action n`` text that a session's assistant message stands for."""
    if message.tool_calls:
        (call,) = message.tool_calls
        (argument,) = json.loads(call.arguments).values()
        action = {"search": "Search", "lookup": "Lookup"}[call.name]
        return f"Thought {step}: {message.content}\nAction {step}: {action}[{argument}]"
    thought, answer = (message.content or "").rsplit("\n\nAnswer: ", 1)
    return f"Thought {step}: {thought}\nAction {step}: Finish[{answer}]"


def test_page_session_turns_are_the_real_react_runs_and_search_results_real_pages(
    traces: Path, data_dir: Path
) -> None:
    log = traces / "react_hotpotqa" / "react_trials_1-3.txt"
    # 31 pages: the 14th question searches (page 31), looks up, searches twice more, then finishes
    run = load_page_session(data_dir / "webpages" / "readability", react_log=log, max_pages=31)
    assert run.scripted and run.source == "pages" and run.question is None
    assert [t["function"]["name"] for t in run.tool_definitions] == ["search", "lookup"]
    react = [r for r in load_react_log(log) if any("\nAction " in m.content and "Search[" in m.content
                                                   for m in r.messages if m.role == "assistant")]
    questions = _questions(run.messages)
    assert len(questions) == 14
    page_files = _page_files(data_dir)[:31]
    pages_seen: list[bytes] = []
    for mine, theirs in zip(questions, react):  # the log's first runs, in its order
        assert mine[0] == theirs.messages[0] and mine[0].content.startswith("Question: ")
        mine_turns = [m for m in mine if m.role == "assistant"]
        their_turns = [m for m in theirs.messages if m.role == "assistant"]
        assert len(mine_turns) == len(their_turns)
        for n, (turn, real) in enumerate(zip(mine_turns, their_turns), start=1):
            assert _as_react_text(n, turn) == real.content  # the real Thought verbatim, its real Action
        their_results = iter(m for m in theirs.messages if m.role == "tool")
        for i, message in enumerate(mine):
            if message.role != "tool":
                continue
            call = mine[i - 1].tool_calls[0]
            assert message.tool_call_id == call.id and message.name == call.name
            real = next(their_results).content
            if call.name == "search" and len(pages_seen) < len(page_files):
                pages_seen.append(message.content.encode("utf-8"))
                hint = run.hints[run.messages.index(message)]
                assert (hint.type, hint.media_type) == ("web_content", "text/html") and hint.title
                assert hint.source and hint.source.startswith("http")
            else:  # a Lookup, or a Search after the last page: the real observation
                assert message.content == real
    assert pages_seen == [path.read_bytes() for path in page_files]  # each page once, byte-identical, in order
    assert len(run.hints) == 31 and run.run_id == "page-session-31"
    last = questions[-1]
    lookups = [m for m in last if m.role == "tool" and m.name == "lookup"]
    assert [m.content for m in lookups] == ["No Results"]  # the real observation, small
    assert sum(1 for m in last if m.role == "tool" and m.name == "search") == 3  # 1 page + 2 real observations
    assert last[-1].role == "assistant" and not last[-1].tool_calls  # the session ends on that question's answer
    assert last[-1].content.endswith("\n\nAnswer: Minnesota")


def test_page_session_uses_max_pages_and_saves_most(traces: Path, data_dir: Path, registry: PluginRegistry,
                                                     tmp_path: Path) -> None:
    log = traces / "react_hotpotqa" / "react_trials_1-3.txt"
    pages = data_dir / "webpages" / "readability"
    default = load_page_session(pages, react_log=log)
    page_bytes = {path.read_bytes() for path in _page_files(data_dir)}
    results = [m for m in default.messages if m.role == "tool"]
    assert sum(1 for m in results if m.content.encode("utf-8") in page_bytes) == len(default.hints) == 24
    assert len(results) == 24  # the first ten runs have 24 Searches and no Lookup
    assert [m.role for m in default.messages[-2:]] == ["tool", "assistant"]
    assert default.messages[-1].content.endswith("Answer: 1978")  # ends with the 10th question
    run = load_page_session(pages, react_log=log, max_pages=3)
    assert len(run.hints) == 3 and sum(1 for m in run.messages if m.role == "user") == 2
    result = replay_run(run, strategies=[PresentationPolicy()], registry=registry, workdir=tmp_path)
    assert result.roundtrip_ok == result.results == 4  # 3 pages and the 2nd question's last real observation
    assert result.own_tool_tokens > 0 and result.curves[NAIVE].tool_tokens == [result.own_tool_tokens] * result.calls
    assert result.curves["full_once"].total < 0.5 * result.curves[NAIVE].total


def test_page_session_bad_input_raises(traces: Path, data_dir: Path, tmp_path: Path) -> None:
    pages = data_dir / "webpages" / "readability"
    log = traces / "react_hotpotqa" / "react_trials_1-3.txt"
    with pytest.raises(InvalidArgumentError, match="max_pages"):
        load_page_session(pages, react_log=log, max_pages=0)
    with pytest.raises(FileNotFoundError, match="no ReAct log"):
        load_page_session(pages, react_log=tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError, match="source.html"):
        load_page_session(tmp_path, react_log=log)
    no_search = tmp_path / "no_search.txt"
    no_search.write_text("Question: Who?\nThought 1: I know.\nAction 1: Finish[me]\nObservation 1: Answer is CORRECT\n",
                         encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match="no ReAct run with a Search"):
        load_page_session(pages, react_log=no_search)
    other = tmp_path / "other.txt"
    other.write_text("Question: Who?\nThought 1: Look.\nAction 1: Search[x]\nObservation 1: x is y.\n"
                     "Thought 2: Think more.\nAction 2: Think[y]\nObservation 2: ok\n", encoding="utf-8")
    with pytest.raises(InvalidArgumentError, match=r"Think\[\.\.\.\] is not Search, Lookup or Finish"):
        load_page_session(pages, react_log=other)


def test_find_react_log(traces: Path, tmp_path: Path) -> None:
    log = traces / "react_hotpotqa" / "react_trials_1-3.txt"
    assert find_react_log([traces / "swe_agent", traces]) == log
    assert find_react_log([log]) == log
    assert find_react_log([traces / "swe_agent", traces / "tau_bench", tmp_path / "missing"]) is None


def test_react_query_check_finds_answer_observations(traces: Path, registry: PluginRegistry, tmp_path: Path) -> None:
    runs = load_traces([traces / "react_hotpotqa"])[:12]
    results = [replay_run(run, strategies=[PresentationPolicy()], registry=registry, workdir=tmp_path / str(n))
               for n, run in enumerate(runs)]
    check = react_query_check(results, runs, workdir=tmp_path / "check")
    assert check.runs_checked >= 5
    assert check.hits_in_run == check.runs_checked
    assert check.hits_pooled >= 0.8 * check.runs_checked


def test_parse_policy_and_strategy() -> None:
    assert parse_policy("full_once") == PresentationPolicy()
    assert parse_policy("keep_last_5").k == 5
    assert parse_policy("always_cite+batch300").min_swap_tokens == 300
    eager = parse_strategy("full_once+eager+all_tools+single")
    assert eager.policy.start == "first_call" and eager.offer.mode == "all" and eager.form == "single"
    assert eager.label == "full_once+eager+all_tools+single"
    assert parse_policy("full_once+tokens") == PresentationPolicy(cache_aware=False)
    for label in ("full_once", "keep_last_3", "full_once+eager+all_tools", "always_cite+batch300+single",
                  "full_once+tokens", "keep_last_3+calls40"):
        assert parse_strategy(label).label == label
    with pytest.raises(ValueError, match="unknown policy"):
        parse_policy("sometimes")


# -- net accounting: every tool definition sent is counted -----------------------------------------
def test_net_counts_own_tools_every_call_and_memory_tools_once_citing(
    traces: Path, data_dir: Path, registry: PluginRegistry, tmp_path: Path
) -> None:
    counter = default_token_counter()
    own = load_tool_definitions(data_dir / "agent_tools" / "tau_bench_airline.json")
    assert len(own) == 14
    own_tokens = counter.count(json.dumps(list(own)))
    assert 2_300 < own_tokens < 2_600  # 2,437 o200k_base tokens as JSON in the public baseline
    run = max(with_tool_definitions(load_traces([traces / "tau_bench"]), {"tau_bench": own})[:20],
              key=lambda r: len(r.calls))
    # by tokens alone citing starts early (under a price model it may never pay on a run this short)
    result = replay_run(run, strategies=[parse_strategy("full_once+tokens"), parse_strategy("full_once+eager+all_tools")],
                        registry=registry, workdir=tmp_path)
    sizes = memory_tool_sizes(counter)
    naive, masking = result.curves[NAIVE], result.curves[MASKING]
    assert naive.tool_tokens == masking.tool_tokens == [own_tokens] * result.calls
    assert naive.prompt_tokens == [m + own_tokens for m in naive.message_tokens]
    lazy, eager = result.curves["full_once+tokens"], result.curves["full_once+eager+all_tools"]
    since = lazy.citing_since
    assert since is not None and since > 1
    both = counter.count(json.dumps(list(own) + _memory_tools("retrieve")))
    assert lazy.tool_tokens[: since - 1] == [own_tokens] * (since - 1)  # nothing offered before citing
    assert lazy.tool_tokens[since - 1 :] == [both] * (result.calls - since + 1)
    assert lazy.prompt_tokens[: since - 1] == naive.prompt_tokens[: since - 1]  # the naive prompt, exactly
    assert lazy.prefix_tokens[since - 1] == 0  # a new tool list: nothing of the cache is reusable
    assert all(p <= n for p, n in zip(lazy.prompt_tokens, naive.prompt_tokens))
    every = counter.count(json.dumps(list(own) + _memory_tools("store", "retrieve", "query")))
    assert eager.tool_tokens == [every] * result.calls
    assert every - own_tokens == pytest.approx(sizes["all_three"], abs=2)
    # the system-prompt section that teaches the tools goes (and is counted) with them, only then
    assert eager.message_tokens[0] - naive.message_tokens[0] == pytest.approx(sizes["memory_prompt"], abs=2)
    assert lazy.message_tokens[0] == naive.message_tokens[0]


def _memory_tools(*capabilities: str) -> list[dict]:
    from actions import default_actions

    return [a.openai_schema() for a in default_actions() if a.capability in capabilities]


def test_memory_tools_fit_the_budget() -> None:
    sizes = memory_tool_sizes()
    assert sizes["all_three"] <= 600  # issue #6: all three together
    assert sizes["offered_when_citing"] - sizes["retrieve_memory"] in (0, 1)  # the list brackets
    assert sizes["retrieve_memory"] <= 260
    assert sizes["single_all"] < sizes["all_three"]


def test_the_docs_tool_table_states_the_measured_sizes() -> None:
    sizes = memory_tool_sizes()
    readme = (Path(__file__).resolve().parent.parent / "docs" / "memory.md").read_text(encoding="utf-8")
    stated = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\| (.+?) \| (\d+) \|", readme, re.M)}
    assert stated["`retrieve_memory`"] == sizes["retrieve_memory"]
    assert stated["`query_memory`"] == sizes["query_memory"]
    assert stated["`store_memory`"] == sizes["store_memory"]
    assert stated["all three"] == sizes["all_three"]
    single = next(value for key, value in stated.items() if key.startswith("one `memory` tool"))
    assert single == sizes["single_all"]


# -- report and CLI ------------------------------------------------------------------------------
def test_report_files(traces: Path, registry: PluginRegistry, tmp_path: Path) -> None:
    # the two longest runs: citing pays there (on short ones agent-memory rightly costs nothing)
    runs = sorted(load_traces([traces / "swe_agent"]), key=lambda run: -len(run.calls))[:2]
    results = [replay_run(run, registry=registry, workdir=tmp_path / str(n)) for n, run in enumerate(runs)]
    report = summarize(results, memory_tools=memory_tool_sizes())
    paths = write_report(report, tmp_path / "out")
    data = json.loads(paths["json"].read_text(encoding="utf-8"))
    assert data["strategies"][:2] == [NAIVE, MASKING]
    assert data["memory_tools"]["all_three"] <= 600
    total = data["total"]
    assert total["calls"] == sum(len(run.calls) for run in runs)
    by_tokens = total["strategies"]["full_once+tokens"]
    assert by_tokens["reduction"] < 0 and by_tokens["reduction_gross"] < by_tokens["reduction"]
    full_once = total["strategies"]["full_once"]  # cache-aware: replayed under each price model
    assert full_once["prompt_tokens"] == full_once["message_tokens"] + full_once["tool_tokens"]
    assert list(full_once["reduction_by_price_model"]) == [m["label"] for m in data["price_models"]]
    # what the runs' model went on to use: the same needs for every strategy; naive keeps them all
    naive = total["strategies"][NAIVE]
    assert naive["needed"] == full_once["needed"] > 0 and naive["kept"] == naive["needed"]
    assert naive["retrieves"] == naive["lost"] == 0
    for label, strategy in total["strategies"].items():  # every miss is retrieved (agent-memory) or lost
        assert strategy["kept"] + strategy["lost"] + strategy["retrieves"] >= strategy["needed"], label
    assert paths["savings_png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the memory's own wall time per agent step (issue #38): timed for every step of an agent-memory
    # strategy, beside its cost; the baselines have no memory (timings: shape only, never values)
    for result, run in zip(results, runs):
        assert len(result.curves["full_once"].memory_ms) == len(run.calls)
        assert all(ms >= 0 for ms in result.curves["full_once"].memory_ms)
        assert result.curves[NAIVE].memory_ms == []
    assert isinstance(full_once["memory_ms_p50"], float) and full_once["memory_ms_p95"] >= full_once["memory_ms_p50"]
    assert naive["memory_ms_p50"] is None and naive["memory_ms_p95"] is None
    headline = paths["md"].read_text(encoding="utf-8").splitlines()
    assert any(line.startswith("| source |") and "memory ms/step p50 / p95" in line for line in headline)
    row = next(line for line in headline if line.startswith("| total"))
    assert f"| {full_once['memory_ms_p50']:.1f} / " in row or f"| {full_once['memory_ms_p50']:,.0f} / " in row
    assert total["roundtrip_ok"] == total["results"]
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| source |" in paths["md"].read_text(encoding="utf-8")


def _curve(prompts: list[int], prefixes: list[int]) -> StrategyCurve:
    return StrategyCurve(prompt_tokens=prompts, message_tokens=prompts, tool_tokens=[0] * len(prompts),
                         prefix_tokens=prefixes)


def _constructed_results() -> list[RunResult]:
    """Two runs of one source: naive keeps appending; full_once rewrites the second prompt from
    token 1,200 (a citation swap) and sends fewer tokens."""
    curves = {
        NAIVE: _curve([2000, 3000], [0, 2000]),
        MASKING: _curve([2000, 2800], [0, 1500]),
        "full_once": _curve([2000, 2500], [0, 1200]),
    }
    return [RunResult(source="src", run_id=f"r{n}", calls=2, results=1, result_tokens=[900], curves=curves,
                      citation_tokens=[40], roundtrip_ok=1, output_tokens=[100, 50]) for n in range(2)]


def test_report_prices_every_call_with_prompt_caching() -> None:
    sonnet = PriceModel.lookup("claude-sonnet-4-6", provider="anthropic")
    report = summarize(_constructed_results(), price_models=[sonnet])
    data = report.to_json()
    rate = {part: float(value) / 1e6 for part, value in sonnet.rates_usd_per_mtok().items()}
    # naive: call 1 writes 2,000; call 2 reads 2,000 and writes 1,000; output 150. Two runs.
    naive = 2 * (3000 * rate["cache_write"] + 2000 * rate["cache_read"] + 150 * rate["output"])
    # full_once: call 2 reads only the 1,200 tokens before the swap and writes 1,300.
    full_once = 2 * (3300 * rate["cache_write"] + 1200 * rate["cache_read"] + 150 * rate["output"])
    source = data["sources"][0]
    cost = source["strategies"]["full_once"]["cost"]["claude-sonnet-4-6"]
    assert cost["total_usd"] == pytest.approx(full_once, rel=1e-6)
    assert cost["cache_write_usd"] == pytest.approx(2 * 3300 * rate["cache_write"], rel=1e-6)
    assert source["strategies"][NAIVE]["cost"]["claude-sonnet-4-6"]["total_usd"] == pytest.approx(naive, rel=1e-6)
    assert cost["change"] == pytest.approx(full_once / naive - 1, abs=1e-3)
    # Fewer tokens, more money: the swap breaks the cache.
    assert source["strategies"]["full_once"]["reduction"] < 0 < cost["change"]
    assert source["output_tokens"] == 300
    assert data["price_models"][0]["caching"] == {"kind": "explicit", "min_tokens": 1024, "step_tokens": 1}
    assert data["prices"]["genai_prices"] and data["default"] == "full_once"
    # cost.png's series: each call's cost, runs one after another.
    assert report.cost_curves["src"]["full_once"][1] == pytest.approx(
        1300 * rate["cache_write"] + 1200 * rate["cache_read"] + 50 * rate["output"], rel=1e-6)


def _tables(markdown_text: str) -> list[list[str]]:
    """Each markdown table's header cells, in order."""
    lines = markdown_text.splitlines()
    return [[cell.strip() for cell in line.strip("|").split(" | ")]
            for n, line in enumerate(lines) if line.startswith("| ") and n + 1 < len(lines)
            and lines[n + 1].startswith("| ---") and not (n > 0 and lines[n - 1].startswith("|"))]


def test_report_leads_with_one_short_table_of_tokens_and_cost(tmp_path: Path) -> None:
    report = summarize(_constructed_results())
    text = (write_report(report, tmp_path)["md"]).read_text(encoding="utf-8")
    tables = _tables(text)
    headline = tables[0]
    assert headline == ["source", "tokens naive → full_once", "tokens saved", "used values kept (retrieves)",
                        "memory ms/step p50 / p95", "cost claude-sonnet-4-6", "cost gpt-4o", "cost gpt-5"]
    assert text.index("| source | tokens naive") < text.index("## Details")
    assert max(len(t) for t in tables) <= 8  # a reader's table: the rest is in report.json
    row = next(line for line in text.splitlines() if line.startswith("| src |"))
    assert row.count("→") == 4 and "| 10.0% |" in row  # 10,000 → 9,000 tokens
    assert "Left out: cache expiry" in text and "4 breakpoints" in text
    assert (tmp_path / "cost.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", ["tokens", "cost"])
def test_plots_mark_the_default(kind: str) -> None:
    import matplotlib.pyplot as plt

    report = summarize(_constructed_results())
    fig = figure(report, kind)
    try:
        axes = [ax for ax in fig.axes if ax.get_visible()]
        assert axes and all(ax.get_yscale() == ("log" if kind == "tokens" else "linear") for ax in axes)
        lines = {line.get_label(): line for line in axes[0].get_lines()}
        default = next(label for label in lines if label.startswith("full_once (default)"))
        others = [line for label, line in lines.items() if label != default]
        assert all(lines[default].get_linewidth() > line.get_linewidth() for line in others)
        assert "−" in default or "+" in default  # the legend gives the change against naive
    finally:
        plt.close(fig)


def _many_strategies_report() -> Any:
    """A report shaped as `make run`'s: five real sources and the constructed page session, the
    library's strategies and eight peers, a re-run curve, priced under the headline models."""
    labels = [NAIVE, MASKING, MASKING_RERUN, "full_once", "keep_last_3", "keep_last_5", "always_cite",
              *[f"peer_{n}" for n in range(8)]]
    results = []
    for s_n, source in enumerate(["smolagents_gaia", "tapeagents_gaia_workarena", "react_hotpotqa", "swe_agent",
                                  "tau_bench", "pages"]):
        for run in range(3):
            calls = 12 + 3 * s_n
            curves = {}
            for l_n, label in enumerate(labels):
                factor = 1.0 if label == NAIVE else 0.35 + 0.04 * l_n
                prompts = [int((2_000 + 1_500 * c) * (factor if c else 1.0)) for c in range(calls)]
                curves[label] = _curve(prompts, [0] + [int(p * 0.6) for p in prompts[:-1]])
            results.append(RunResult(source=source, run_id=f"{source}-{run}", calls=calls, results=calls - 1,
                                     result_tokens=[900] * (calls - 1), curves=curves, citation_tokens=[40],
                                     roundtrip_ok=1, output_tokens=[100] * calls, scripted=source == "pages"))
    report = summarize(results)
    report.peers = {f"peer_{n}": f"a peer, setting {n}" for n in range(8)}
    return report


def _text_overlaps(fig: Any) -> list[tuple[str, str]]:
    """Pairs of the texts ``fig`` draws (its title; each visible panel's title, axis labels, tick
    labels within its view, legend entries and bar labels) whose boxes overlap."""
    from itertools import combinations

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [fig._suptitle] if fig._suptitle is not None else []
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        (x_low, x_high), (y_low, y_high) = sorted(ax.get_xlim()), sorted(ax.get_ylim())
        texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
        texts += [t for t in ax.get_xticklabels() if x_low <= t.get_position()[0] <= x_high]
        texts += [t for t in ax.get_yticklabels() if y_low <= t.get_position()[1] <= y_high]
        if ax.get_legend() is not None:
            texts += ax.get_legend().get_texts()
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_visible() and t.get_text().strip()]
    return [(a, b) for (a, box_a), (b, box_b) in combinations(boxes, 2) if box_a.overlaps(box_b)]


@pytest.mark.parametrize("kind", ["tokens", "cost", "savings"])
def test_each_plot_answers_its_question_readably(kind: str) -> None:
    # at most 6 curves a panel, legends off the data, dollars on a linear axis, no text over another
    import matplotlib.pyplot as plt

    from agent_memory.replay.report_plots import MAX_CURVES, savings_figure

    report = _many_strategies_report()
    fig = savings_figure(report) if kind == "savings" else figure(report, kind)
    try:
        assert _text_overlaps(fig) == []
        axes = [ax for ax in fig.axes if ax.get_visible()]
        renderer = fig.canvas.get_renderer()
        for ax in axes:
            legend = ax.get_legend()
            if legend is not None:
                assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
            if kind != "savings":
                assert 0 < len(ax.get_lines()) <= MAX_CURVES
                assert ax.get_yscale() == ("log" if kind == "tokens" else "linear")
        if kind == "savings":  # the constructed session apart from the real runs
            assert [ax.get_title() for ax in axes] == ["real agent runs", "constructed page session"]
    finally:
        plt.close(fig)


def test_cli_replay_small_subset(traces: Path, data_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = CliRunner().invoke(
        app,
        ["replay", str(traces / "swe_agent"), str(traces / "tau_bench"), "--limit-runs", "2",
         "--pages", str(data_dir / "webpages" / "readability"), "--pages-max", "3",
         "--pages-shape", str(traces / "react_hotpotqa" / "react_trials_1-3.txt"),
         "--tool-definitions", f"tau_bench={data_dir / 'agent_tools' / 'tau_bench_airline.json'}",
         "--policy", "full_once", "--policy", "keep_last_3", "--no-react-check", "--out", str(out)],
    )
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert [s["source"] for s in data["sources"]] == ["swe_agent", "tau_bench", "pages"]
    assert [s["own_tool_tokens"] > 0 for s in data["sources"]] == [False, True, True]
    assert data["strategies"] == [NAIVE, MASKING, MASKING_RERUN, "full_once", "keep_last_3"]
    assert "retrieve_memory" in result.output and "all three" in result.output
    assert data["total"]["runs"] == 4  # the assembled page session is left out of the total
    assert "pages (constructed: ReAct turns, real pages)" in (out / "report.md").read_text(encoding="utf-8")
    assert (out / "tokens.png").is_file() and (out / "report.md").is_file() and (out / "cost.png").is_file()
    assert [m["label"] for m in data["price_models"]] == ["claude-sonnet-4-6", "gpt-4o", "gpt-5"]
    for source in data["sources"]:
        for strategy in data["strategies"]:
            assert set(source["strategies"][strategy]["cost"]) == {"claude-sonnet-4-6", "gpt-4o", "gpt-5"}
        assert source["strategies"][NAIVE]["cost"]["gpt-4o"]["change"] == 0.0
        assert source["strategies"][NAIVE]["cost"]["gpt-4o"]["total_usd"] > 0
    assert "gpt-4o" in result.output  # the headline table, folded to the terminal: at most 100 columns
    assert re.search(r"^Replaying: 5/5 runs, \d+ s", result.output, re.M)  # a log shows progress too
    table = [line for line in result.output.splitlines() if "│" in line or "┃" in line]
    assert table and max(len(line) for line in table) <= 100
    assert "ms/step" in result.output and data["workers"] == 4  # the terminal table carries it too
    for source in data["sources"]:
        assert source["strategies"]["full_once"]["memory_ms_p95"] >= source["strategies"]["full_once"]["memory_ms_p50"]


def test_cli_replay_usage_errors(tmp_path: Path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["replay"]).exit_code == 1
    assert runner.invoke(app, ["replay", str(tmp_path / "missing")]).exit_code == 1
    bad = runner.invoke(app, ["replay", str(tmp_path), "--pages", str(tmp_path), "--policy", "nope"])
    assert bad.exit_code == 1 and "unknown policy" in bad.output
    no_shape = runner.invoke(app, ["replay", str(tmp_path), "--pages", str(tmp_path)])
    assert no_shape.exit_code == 1 and "--pages-shape" in no_shape.output
    definitions = runner.invoke(app, ["replay", str(tmp_path), "--tool-definitions", "tau_bench"])
    assert definitions.exit_code == 1 and "SOURCE=FILE" in definitions.output
    price = runner.invoke(app, ["replay", str(tmp_path), "--price-model", "openai:no-such-model"])
    assert price.exit_code == 1 and "no price for model" in price.output
