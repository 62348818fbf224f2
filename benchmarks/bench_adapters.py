"""The framework adapters send what the replay counts (issue 17): tau-bench replayed through
LangChain's middleware and the OpenAI Agents SDK's input filter, prompt for prompt, beside the
replay of the same policy without an adapter.

For every LLM call of every tau-bench run (``../shared/data/traces/tau_bench``, with the airline
agent's own tools), the history before the call is handed to each framework in its own types, and
its hook runs as the framework runs it:

- **LangChain** (``langchain``): ``LangChainMemory.wrap_model_call`` on a ``ModelRequest`` of
  LangChain messages (``HumanMessage``, ``AIMessage`` with ``tool_calls``, ``ToolMessage``), the
  agent's tools and the middleware's memory tools; the request it hands the model is captured.
- **OpenAI Agents SDK** (``openai-agents``): ``OpenAIAgentsMemory.input_filter`` on the Responses
  input items the SDK builds (``function_call`` / ``function_call_output`` items), the agent's
  instructions and tools; the ``ModelInputData`` it returns is captured, and the tools are the
  agent's own plus the memory tools the SDK enables for that call.

The reference is the replay's own prompt for the same policy (``agent_memory.replay.engine``'s
``_agent_prompt``, the function ``agent-memory replay`` counts with) on the trace's messages: a
``ContextBuilder`` with the same price model and tool costs, the toolkit's offer, and the memory
prompt. For the SDK the policy is the SDK's: its tools are fixed before the filter runs, so the
memory tools go with every call from the call after the one where citing would first pay for them
(``ContextBuilder.build_ahead``, ``ToolOffer(mode="all")`` once on), which the reference follows on
the trace's own messages.

Both sides are counted the same way (o200k, ``count_prompt_tokens``: messages and tool
definitions) and compared text for text. Tool-call arguments are normalised to ``json.dumps`` of
their value first, on both sides: LangChain keeps arguments as a dict and its chat models send
``json.dumps`` of it, so the trace's own spacing could not survive it.

    python benchmarks/bench_adapters.py [--data DIR] [--runs N] [--pick I ...] [--model M ...] [--out FILE]

Each side's prompt sequence is also priced with prompt caching (the price model's provider rule,
the prefix each prompt shares with the one before, the trace's own output tokens), as the replay
prices its strategies. Each ``--model`` is one replay of every run (both sides decide swaps under
its prices); without one, the replay's headline price models (``HEADLINE_MODELS``: Claude Sonnet
4.6, gpt-4o, GPT-5), about 25 minutes each on a loaded 2-core machine. Writes
``benchmarks/results/adapters.json`` (``price_models``: per price model, its ``summary``, with each
adapter's cost against naive's and the runs where it costs more, and its ``runs``) and prints a
table per price model.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from agents import Agent, FunctionTool  # noqa: E402
from agents.run_config import CallModelData, ModelInputData  # noqa: E402
from langchain.agents.middleware.types import ModelRequest, ModelResponse  # noqa: E402
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.utils.function_calling import convert_to_openai_tool  # noqa: E402
from langchain_openai import ChatOpenAI  # noqa: E402

from agent_memory import AgentMemory  # noqa: E402
from agent_memory.agent.prompt import MEMORY_PROMPT  # noqa: E402
from agent_memory.integrations.channel import result_id  # noqa: E402
from agent_memory.integrations.langchain import LangChainMemory, langchain_to_messages  # noqa: E402
from agent_memory.integrations.openai_agents import OpenAIAgentsMemory, items_to_messages  # noqa: E402
from agent_memory.kernel.assembler import with_memory_prompt  # noqa: E402
from agent_memory.models.messages import Message, calls_answered  # noqa: E402
from agent_memory.plugins import PluginRegistry  # noqa: E402
from agent_memory.presentation.citations import CitationBuilder  # noqa: E402
from agent_memory.presentation.context import ContextBuilder  # noqa: E402
from agent_memory.presentation.offer import ToolOffer, load_toolkit, offer_cost_tokens  # noqa: E402
from agent_memory.presentation.policy import PresentationPolicy  # noqa: E402
from agent_memory.pricing import HEADLINE_MODELS, CallTokens, PriceModel  # noqa: E402
from agent_memory.prompt_tokens import FRAMING_TOKENS, count_prompt_tokens, message_tokens, tool_tokens  # noqa: E402
from agent_memory.replay.engine import StrategyCurve, _agent_prompt  # noqa: E402 - the replay's own prompt
from agent_memory.replay.loaders import ReplayRun, load_tool_definitions, load_traces, with_tool_definitions  # noqa: E402
from agent_memory.records.prepare import result_store_arguments  # noqa: E402
from agent_memory.tokens import default_token_counter  # noqa: E402

SIDES = ("naive", "langchain", "openai_agents")
"""The prompt sequences priced with prompt caching (each adapter's equals its reference's)."""

CONVERSATION = "default"
"""The conversation id on every side (the middleware's, outside a LangGraph thread)."""


def _normalised(run: ReplayRun) -> list[Message]:
    """The run's messages with every tool call's arguments as ``json.dumps`` of their value."""
    out = []
    for message in run.messages:
        if message.tool_calls:
            calls = tuple(call.model_copy(update={"arguments": json.dumps(json.loads(call.arguments or "{}"))})
                          for call in message.tool_calls)
            message = message.model_copy(update={"tool_calls": calls})
        out.append(message)
    return out


class Reference:
    """The replay's prompt for one policy, results stored under the ids the adapters use."""

    def __init__(self, memory: AgentMemory, own_definitions: list[dict[str, Any]], prices: PriceModel, *, offer: ToolOffer):
        self.memory = memory
        self.toolkit = load_toolkit(memory, offer=offer)
        cost, own_tokens = offer_cost_tokens(self.toolkit, own_definitions, memory.tokens.count, MEMORY_PROMPT)
        self.builder = ContextBuilder(memory, policy=PresentationPolicy(), prices=prices, offer_cost_tokens=cost,
                                      fixed_tokens=own_tokens,
                                      citations=CitationBuilder(PluginRegistry.from_entry_points(), memory.tokens))
        self.own_definitions = own_definitions

    def history(self, messages: list[Message]) -> list[Message]:
        """``messages`` with each result stored (once) and referenced by its id: the id the
        adapters' channel gives it (``result_id``: the call's id and the result's text; a reused
        call id keeps each of its results), with its own call's arguments."""
        answered = calls_answered(messages)
        out = []
        for index, message in enumerate(messages):
            if message.role == "tool" and message.content is not None and not message.is_error:
                ref = result_id(self.memory.agent_id, CONVERSATION, message.tool_call_id or "", message.content)
                if ref not in self.memory:
                    call = answered.get(index)
                    self.memory.store(**result_store_arguments(message.content, tool=message.name,
                                                               call_arguments=call.arguments if call else None),
                                      item_id=ref)
                message = message.model_copy(update={"content": None, "tool_result_ref": ref})
            out.append(message)
        return out

    def prompt(self, messages: list[Message]) -> tuple[list[Message], list[dict[str, Any]]]:
        return _agent_prompt(self.builder, self.toolkit, self.history(messages), self.own_definitions)


def _to_langchain(messages: list[Message]) -> tuple[SystemMessage | None, list[Any]]:
    system = None
    out: list[Any] = []
    for message in messages:
        if message.role == "system":
            system = SystemMessage(content=message.content or "")
        elif message.role == "user":
            out.append(HumanMessage(content=message.content or ""))
        elif message.role == "assistant":
            out.append(AIMessage(content=message.content or "", tool_calls=[
                {"id": c.id, "name": c.name, "args": json.loads(c.arguments or "{}"), "type": "tool_call"}
                for c in message.tool_calls]))
        else:
            out.append(ToolMessage(content=message.content or "", tool_call_id=message.tool_call_id, name=message.name))
    return system, out


def _to_responses(messages: list[Message]) -> tuple[str | None, list[Any]]:
    instructions = None
    items: list[Any] = []
    for message in messages:
        if message.role == "system":
            instructions = message.content
        elif message.role == "user":
            items.append({"role": "user", "content": message.content or ""})
        elif message.role == "assistant":
            if message.content:
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": message.content, "annotations": []}]})
            items += [{"type": "function_call", "call_id": c.id, "name": c.name, "arguments": c.arguments}
                      for c in message.tool_calls]
        else:
            items.append({"type": "function_call_output", "call_id": message.tool_call_id, "output": message.content or ""})
    return instructions, items


def _same(a: tuple[list[Message], list[dict[str, Any]]], b: tuple[list[Message], list[dict[str, Any]]]) -> bool:
    def key(prompt: tuple[list[Message], list[dict[str, Any]]]) -> tuple[Any, ...]:
        messages, definitions = prompt
        return (tuple((m.role, m.content or "", tuple((c.id, c.name, c.arguments) for c in m.tool_calls),
                       m.tool_call_id) for m in messages),
                tuple(sorted(json.dumps(t, sort_keys=True) for t in definitions)))
    return key(a) == key(b)


def replay(run: ReplayRun, prices: PriceModel, workdir: Path) -> dict[str, Any]:
    """One run through both adapters and their references, each on a memory of its own under
    ``workdir``, every memory closed before this returns (closing waits for its indexing thread,
    so the directory can be deleted after)."""
    with ExitStack() as opened:
        return _replay(run, prices, lambda name: opened.enter_context(AgentMemory("tau", workdir / name)))


def _replay(run: ReplayRun, prices: PriceModel, memory: Callable[[str], AgentMemory]) -> dict[str, Any]:
    counter = default_token_counter()
    messages = _normalised(run)
    own_definitions = [dict(t) for t in run.tool_definitions]
    chat = ChatOpenAI(model="gpt-4o", api_key="not-used", base_url="http://127.0.0.1:9/v1")  # never called

    lc_ref = Reference(memory("lc-ref"), own_definitions, prices, offer=ToolOffer())
    middleware = LangChainMemory(memory("lc"), prices=prices)
    sdk_ref = Reference(memory("sdk-ref"), own_definitions, prices, offer=ToolOffer(mode="all"))
    adapter = OpenAIAgentsMemory(memory("sdk"), prices=prices)
    sdk_tools = [FunctionTool(name=t["function"]["name"], description=t["function"].get("description", ""),
                              params_json_schema=t["function"]["parameters"], on_invoke_tool=_never,
                              strict_json_schema=False) for t in own_definitions]
    agent = Agent(name="tau", tools=[*sdk_tools, *adapter.tools])
    memory_tool_defs = [convert_to_openai_tool(t) for t in middleware.tools]
    sdk_memory_defs = [{"type": "function", "function": {"name": t.name, "description": t.description,
                                                         "parameters": t.params_json_schema}} for t in adapter.tools]
    # the SDK's policy, restated: the memory tools go from the call after the one where citing would
    # first pay for them and the memory prompt (ContextBuilder.build_ahead)
    sdk_cost = (tool_tokens(own_definitions + sdk_memory_defs, counter.count) - tool_tokens(own_definitions, counter.count)
                + counter.count(MEMORY_PROMPT))
    sdk_on = False
    row: dict[str, Any] = {"run": run.run_id, "calls": len(run.calls), "naive_tokens": 0,
                           "langchain": {"same": 0, "tokens": 0, "reference_tokens": 0, "hook_ms": 0.0},
                           "openai_agents": {"same": 0, "tokens": 0, "reference_tokens": 0, "hook_ms": 0.0}}
    curves = {label: StrategyCurve() for label in SIDES}
    last: dict[str, Any] = dict.fromkeys(SIDES)
    count = counter.count
    for call in run.calls:
        prefix = messages[:call]
        row["naive_tokens"] += count_prompt_tokens(prefix, own_definitions, counter=counter)
        last["naive"] = curves["naive"].record(prefix, own_definitions, last["naive"], count)

        # LangChain: the middleware on the framework's own request.
        system, lc_messages = _to_langchain(prefix)
        captured: list[ModelRequest[Any]] = []

        def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
            captured.append(request)
            return ModelResponse(result=[AIMessage(content="")])

        request = ModelRequest(model=chat, messages=lc_messages, system_message=system, tool_choice=None,
                               tools=[*own_definitions, *middleware.tools], response_format=None, state={"messages": []},
                               runtime=None)
        started = time.perf_counter()
        middleware.wrap_model_call(request, handler)
        row["langchain"]["hook_ms"] += (time.perf_counter() - started) * 1000
        sent = captured[0]
        lc_prompt = ([Message(role="system", content=str(sent.system_message.content))] if sent.system_message else []) \
            + langchain_to_messages(sent.messages)
        lc_tools = [t if isinstance(t, dict) else next(d for d in memory_tool_defs if d["function"]["name"] == t.name)
                    for t in sent.tools]
        reference = lc_ref.prompt(prefix)
        _tally(row["langchain"], (lc_prompt, lc_tools), reference, counter)
        last["langchain"] = curves["langchain"].record(lc_prompt, lc_tools, last["langchain"], count)

        # OpenAI Agents SDK: the input filter on the SDK's own Responses items.
        enabled = adapter.enabled  # the SDK prepares the agent's tools before the filter runs
        instructions, items = _to_responses(prefix)
        started = time.perf_counter()
        out = adapter.input_filter(CallModelData(model_data=ModelInputData(input=items, instructions=instructions),
                                                 agent=agent, context=None))
        row["openai_agents"]["hook_ms"] += (time.perf_counter() - started) * 1000
        sdk_messages, _ = items_to_messages(out.input)
        sdk_prompt = ([Message(role="system", content=out.instructions)] if out.instructions else []) + sdk_messages
        sdk_sent_tools = own_definitions + (sdk_memory_defs if enabled else [])
        ref_on = sdk_on  # decided by the call before, as the SDK decides the tools before the filter
        sdk_ref.builder.offer_cost_tokens = 0 if ref_on else sdk_cost
        built, sdk_on = sdk_ref.builder.build_ahead(sdk_ref.history(prefix), tools_on=ref_on)
        sdk_ref.builder.commit(built)
        ref_messages = with_memory_prompt(built.messages, MEMORY_PROMPT) if ref_on else built.messages
        ref_tools = own_definitions + (sdk_memory_defs if ref_on else [])
        _tally(row["openai_agents"], (sdk_prompt, sdk_sent_tools), (ref_messages, ref_tools), counter)
        last["openai_agents"] = curves["openai_agents"].record(sdk_prompt, sdk_sent_tools, last["openai_agents"], count)
    outputs = [message_tokens(messages[call], count) - FRAMING_TOKENS for call in run.calls]
    for label, curve in curves.items():
        cost = sum((prices.cost(CallTokens(prompt_tokens=prompt, prefix_tokens=shared, output_tokens=output))
                    for prompt, shared, output in zip(curve.prompt_tokens, curve.prefix_tokens, outputs)),
                   start=prices.cost(CallTokens(prompt_tokens=0, prefix_tokens=0, output_tokens=0)))
        row.setdefault("cost_usd", {})[label] = float(cost.total_usd)
    return row


async def _never(context: Any, arguments: str) -> str:
    raise AssertionError("the benchmark calls no tool")


def _tally(into: dict[str, Any], got: tuple[list[Message], list[dict[str, Any]]],
           reference: tuple[list[Message], list[dict[str, Any]]], counter: Any) -> None:
    into["tokens"] += count_prompt_tokens(got[0], got[1], counter=counter)
    into["reference_tokens"] += count_prompt_tokens(reference[0], reference[1], counter=counter)
    into["same"] += int(_same(got, reference))


def _summary(rows: list[dict[str, Any]], prices: PriceModel) -> dict[str, Any]:
    """The totals of ``rows`` (one price model's runs), each adapter's cost against naive's."""
    calls = sum(r["calls"] for r in rows)
    naive_cost = sum(r["cost_usd"]["naive"] for r in rows)
    summary: dict[str, Any] = {"runs": len(rows), "calls": calls, "price_model": prices.label,
                               "naive_tokens": sum(r["naive_tokens"] for r in rows),
                               "naive_cost_usd": round(naive_cost, 4)}
    for name in ("langchain", "openai_agents"):
        cost = sum(r["cost_usd"][name] for r in rows)
        summary[name] = {
            "cost_usd": round(cost, 4),
            "cost_vs_naive_pct": round(100 * (cost - naive_cost) / naive_cost, 2) if naive_cost else 0.0,
            "runs_costing_more_than_naive": sum(r["cost_usd"][name] > r["cost_usd"]["naive"] for r in rows),
            "identical_calls": sum(r[name]["same"] for r in rows),
            "tokens": sum(r[name]["tokens"] for r in rows),
            "reference_tokens": sum(r[name]["reference_tokens"] for r in rows),
            "hook_ms_per_call": round(sum(r[name]["hook_ms"] for r in rows) / max(1, calls), 2),
        }
    return summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=ROOT.parent / "shared" / "data")
    parser.add_argument("--runs", type=int, default=None, help="replay only the first N runs")
    parser.add_argument("--pick", type=int, action="append", default=None,
                        help="replay only the run at this index (0-based, in file order; repeatable)")
    parser.add_argument("--model", action="append", default=None,
                        help="a price model both sides decide swaps under and are priced with (repeatable; "
                             "default: the replay's headline ones, " + ", ".join(m for _, m in HEADLINE_MODELS) + ")")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "adapters.json")
    args = parser.parse_args(argv)
    runs = load_traces([args.data / "traces" / "tau_bench"])
    definitions = load_tool_definitions(args.data / "agent_tools" / "tau_bench_airline.json")
    runs = with_tool_definitions(runs, {"tau_bench": definitions})[: args.runs]
    if args.pick:
        runs = [runs[index] for index in args.pick]
    models = args.model or [model for _, model in HEADLINE_MODELS]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bench-adapters-") as tmp:
        with AgentMemory("warmup", Path(tmp) / "warmup") as warm:
            warm.store("Load the embedding model before anything is timed.")
            warm.flush_index()
        for model in models:
            prices = PriceModel.lookup(model)
            rows = [replay(run, prices, Path(tmp) / prices.label / f"run{n}") for n, run in enumerate(runs)]
            results[prices.label] = {"summary": _summary(rows, prices), "runs": rows}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"price_models": results}, indent=1) + "\n", encoding="utf-8")
    for label, result in results.items():
        summary = result["summary"]
        print(f"tau-bench: {summary['runs']} runs, {summary['calls']} LLM calls, naive {summary['naive_tokens']:,} tokens "
              f"({label}); naive cost with prompt caching: ${summary['naive_cost_usd']:.2f}")
        print("| adapter | calls identical to the replay | prompt tokens (adapter) | prompt tokens (replay) | cost, cached "
              "| against naive | runs costing more than naive | hook ms/call (storing included) |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for name, title in (("langchain", "LangChain middleware"), ("openai_agents", "OpenAI Agents SDK filter")):
            s = summary[name]
            print(f"| {title} | {s['identical_calls']}/{summary['calls']} | {s['tokens']:,} | {s['reference_tokens']:,} | "
                  f"${s['cost_usd']:.2f} | {s['cost_vs_naive_pct']:+.2f}% | {s['runs_costing_more_than_naive']} | "
                  f"{s['hook_ms_per_call']} |")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
