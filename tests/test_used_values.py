"""What the model later used, kept or paid for (issue 28): the later-used-values metric on
constructed histories, the simulated retrieve in the replay, and the loaders of the two
large-result sources (smolagents' benchmark runs, TapeAgents' tapes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent_memory.models.messages import Message, ToolCall
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import headline_price_models
from agent_memory.replay.engine import replay_run
from agent_memory.replay.loaders import ReplayRun, load_trace_file, load_traces
from agent_memory.replay.report import curve_costs
from agent_memory.replay.strategies import MASKING, MASKING_RERUN, NAIVE, RERUN_SUFFIX, ReplayStrategy
from agent_memory.replay.used_values import missing, needed_values, output_values, values_in


def _call(call_id: str, name: str, **arguments: str) -> Message:
    return Message(role="assistant", content=None,
                   tool_calls=(ToolCall(id=call_id, name=name, arguments=json.dumps(arguments)),))


def _result(call_id: str, name: str, content: str) -> Message:
    return Message(role="tool", content=content, tool_call_id=call_id, name=name)


def test_values_are_identifier_like_tokens() -> None:
    text = "Flight HAT170 on 2024-05-16 for mia_li_3668 costs 1234.56; call getUserById, not Paris or 2024."
    assert values_in(text) == ["HAT170", "2024-05-16", "mia_li_3668", "1234.56", "getUserById"]
    # argument names are the agent's vocabulary: only argument values count
    message = _call("c1", "book", reservation_id="QX7ZP2", cabin="economy")
    assert output_values(message) == ["QX7ZP2"]


def test_a_value_read_in_a_result_and_used_later_is_needed_one_the_user_typed_is_not() -> None:
    messages = [
        Message(role="system", content="You are an airline agent."),
        Message(role="user", content="I am mia_li_3668, please check my booking."),
        _call("c1", "get_user_details", user_id="mia_li_3668"),
        _result("c1", "get_user_details", json.dumps({"user_id": "mia_li_3668", "reservations": ["QX7ZP2"],
                                                       "payment": "credit_card_4421486"})),
        _call("c2", "get_reservation_details", reservation_id="QX7ZP2"),
        _result("c2", "get_reservation_details", json.dumps({"flight_number": "HAT170", "fare_class": "BASIC_ECO"})),
        Message(role="assistant", content="QX7ZP2 is on HAT170; I will refund credit_card_4421486. BASIC_ECO applies."),
    ]
    needed = needed_values(messages, known=[json.dumps([{"name": "refund", "description": "to BASIC_ECO fares"}])])
    # call 4 used QX7ZP2, read in result 3; mia_li_3668 was typed by the user: not needed
    assert {index: [(n.value, n.result_index) for n in found] for index, found in needed.items()} == {
        4: [("QX7ZP2", 3)],
        # QX7ZP2 the model itself wrote at call 4: known since; BASIC_ECO is in the tool definitions
        6: [("HAT170", 5), ("credit_card_4421486", 3)],
    }
    # a prompt keeps a value when it holds it as a whole token
    prompt = [*messages[:5], _result("c2", "get_reservation_details", "[cited] flight HAT1700, credit_card_4421486")]
    assert [n.value for n in missing(prompt, needed[6])] == ["HAT170"]


def _booking_run() -> ReplayRun:
    rules = " ".join(f"Fare rule FR{n:04d} allows one change before departure." for n in range(150))
    record = json.dumps({"reservation_id": "QX7ZP2", "user_id": "mia_li_3668",
                         "flights": [{"flight_number": "HAT170"}], "terms": rules})
    return ReplayRun(source="s", run_id="r", messages=(
        Message(role="system", content="You are an airline agent."),
        Message(role="user", content="Change my booking please, I am mia_li_3668."),
        _call("c1", "get_reservation_details", reservation_id="QX7ZP2"),
        _result("c1", "get_reservation_details", record),
        Message(role="assistant", content="Your reservation holds flight HAT170."),
        Message(role="user", content="Which rule applies?"),
        Message(role="assistant", content="Rule FR0149 applies."),
        Message(role="user", content="thanks"),
        Message(role="assistant", content="HAT170 under FR0149 it is."),
    ))


def test_a_cited_result_keeps_what_its_citation_carries_and_a_miss_is_retrieved_before_the_call() -> None:
    run = _booking_run()
    cite = ReplayStrategy(PresentationPolicy(kind="always_cite"))
    result = replay_run(run, strategies=[cite], price_models=[])
    naive, cited = result.curves[NAIVE], result.curves["always_cite"]
    assert naive.needed == cited.needed == 2  # HAT170 at call 2, FR0149 at call 3
    # the citation carries the record's first key values (the flight number), not its 150th rule
    assert (cited.kept, cited.calls_missed, cited.retrieves, cited.lost) == (1, 1, 1, 0)
    # one more LLM call, inserted right before call 3 (the one that needed the rule)
    assert len(cited.prompt_tokens) == len(cited.output_tokens) == result.calls + 1 == 5
    retrieve_at = 2
    assert cited.prompt_tokens[retrieve_at] > cited.prompt_tokens[retrieve_at - 1]  # the question arrived
    assert cited.output_tokens[retrieve_at] not in result.output_tokens[2:]  # its output: the retrieve call
    # the retrieve and its answer are in the history from then on: every later prompt is larger by them
    grown = cited.prompt_tokens[retrieve_at + 1] - cited.prompt_tokens[retrieve_at]
    assert grown >= cited.retrieve_tokens > 0
    assert cited.output_tokens[retrieve_at + 1:] == result.output_tokens[2:]
    # priced: the retrieve call is a call like any other
    model = headline_price_models()[0]
    costs = curve_costs(cited, result.output_tokens, model)
    assert len(costs) == 5 and costs[retrieve_at].total_usd > 0


def test_masking_loses_what_it_cleared_and_the_rerun_pays_for_the_tool_call_again() -> None:
    messages = [Message(role="user", content="Compare four bookings.")]
    for n, code in enumerate(("QX7ZP2", "LQ940Q", "JG7FMM", "OI5L9G")):
        messages += [_call(f"c{n}", "get_reservation_details", reservation_id=code),
                     _result(f"c{n}", "get_reservation_details",
                             json.dumps({"reservation_id": code, "flight_number": f"HAT{100 + n}"}))]
    messages.append(Message(role="assistant", content="The first one flies HAT100."))
    result = replay_run(ReplayRun(source="s", run_id="r", messages=tuple(messages)), strategies=[], price_models=[])
    masked, rerun = result.curves[MASKING], result.curves[MASKING_RERUN]
    assert (masked.needed, masked.kept, masked.lost, masked.retrieves) == (1, 0, 1, 0)
    assert (rerun.kept, rerun.lost, rerun.retrieves) == (0, 0, 1)
    assert len(rerun.prompt_tokens) == len(masked.prompt_tokens) + 1
    # the re-run's output is the original call, and its result is back in the next prompt
    assert rerun.output_tokens[-2] > 0 and rerun.prompt_tokens[-1] > masked.prompt_tokens[-1]


def test_a_peer_loses_what_it_cleared_and_its_rerun_curve_pays_for_the_tool_call_again() -> None:
    # LangChain's ClearToolUsesEdit, from the package, clearing all but the newest result from the
    # first token: the re-run's result is then the newest, so the peer's own code keeps it
    from agent_memory.replay.peers import LangChainClearToolUses

    peer = LangChainClearToolUses(trigger=1, keep=1)
    messages = [Message(role="user", content="Compare three bookings.")]
    for n, code in enumerate(("QX7ZP2", "LQ940Q", "JG7FMM")):
        messages += [_call(f"c{n}", "get_reservation_details", reservation_id=code),
                     _result(f"c{n}", "get_reservation_details",
                             json.dumps({"reservation_id": code, "flight_number": f"HAT{100 + n}"}))]
    messages += [Message(role="assistant", content="The first one flies HAT100."),
                 Message(role="user", content="And the last?"),
                 Message(role="assistant", content="The last one flies HAT102.")]
    run = ReplayRun(source="s", run_id="r", messages=tuple(messages))
    result = replay_run(run, strategies=[], peers=[peer], price_models=[])
    cleared, rerun = result.curves[peer.label], result.curves[peer.label + RERUN_SUFFIX]
    assert result.peers[peer.label + RERUN_SUFFIX].startswith(result.peers[peer.label])
    # HAT100 (result 1, cleared) is needed at call 4; HAT102 (the newest result) at call 5
    assert (cleared.needed, cleared.kept, cleared.lost, cleared.retrieves) == (2, 1, 1, 0)
    # the re-run brings HAT100 back as the newest result, so the peer's own code now clears
    # result 3: the history grew by the re-run, and the next call needs a re-run of its own
    assert (rerun.needed, rerun.kept, rerun.lost, rerun.retrieves) == (2, 0, 0, 2)
    assert len(rerun.prompt_tokens) == len(cleared.prompt_tokens) + 2 == result.calls + 2
    assert rerun.retrieve_tokens > 0 and rerun.output_tokens[3] > 0 and rerun.output_tokens[5] > 0
    assert rerun.prompt_tokens[4] > cleared.prompt_tokens[3]  # the first re-run's call and result stay


# -- the large-result sources ---------------------------------------------------------------------
@pytest.mark.data
def test_smolagents_and_tapeagents_runs_are_read_as_real_traces(data_dir: Path) -> None:
    # a run's source is the directory below the one given (tapes sit one level deeper)
    runs = [run for run in load_traces([data_dir / "traces"])
            if run.source in ("smolagents_gaia", "tapeagents_gaia_workarena")]
    by_source = {source: [r for r in runs if r.source == source]
                 for source in ("smolagents_gaia", "tapeagents_gaia_workarena")}
    smol, tapes = by_source["smolagents_gaia"], by_source["tapeagents_gaia_workarena"]
    # the data README's counts: 42 runs / 165 LLM calls; 39 tapes / 395 calls (one per prompt_id)
    assert (len(smol), sum(len(r.calls) for r in smol)) == (42, 165)
    assert (len(tapes), sum(len(r.calls) for r in tapes)) == (39, 395)
    first = smol[0]
    assert first.messages[0].role == "system" and first.question
    calls = [m for m in first.messages if m.role == "assistant" and m.tool_calls]
    results = [m for m in first.messages if m.role == "tool"]
    assert calls and {m.tool_call_id for m in results} <= {c.id for m in calls for c in m.tool_calls}
    # a tape: the question is user input, actions are tool calls, observations their results
    tape = next(r for r in tapes if r.run_id == "gaiaagent-tape1")
    assert json.loads(tape.messages[0].content or "")["kind"] == "question"
    assert any(call.name == "search_action" for m in tape.messages for call in m.tool_calls)
    assert json.loads(next(m for m in tape.messages if m.role == "tool").content or "")["kind"] == (
        "search_results_observation")
    assert "page_observation" in tape.vocabulary  # the framework's words are not values
    assert len({r.run_id for r in runs}) == len(runs)


def test_a_trace_file_in_no_known_shape_is_an_error_naming_it(tmp_path: Path) -> None:
    odd = tmp_path / "traces" / "odd"
    odd.mkdir(parents=True)
    (odd / "runs.jsonl").write_text(json.dumps({"steps_taken": 3}) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"runs\.jsonl: not a trace format"):
        load_traces([tmp_path / "traces"])  # found in a directory: still an error, never an empty run
    (odd / "runs.jsonl").unlink()
    (odd / "notes.json").write_text(json.dumps({"title": "not a run"}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"notes\.json: no run with an LLM call"):
        load_trace_file(odd / "notes.json")
