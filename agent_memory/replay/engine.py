"""The replay engine: a run through AgentMemory, every prompt counted with what goes with it.

Per run a fresh :class:`~agent_memory.memory.AgentMemory` (in a temporary directory, nothing
embedded) stores each tool result; the history keeps ``Message(role="tool",
tool_result_ref=id)``. Before each assistant message (an LLM call) the prompt of every strategy
(:mod:`~agent_memory.replay.strategies`) is built from the history so far and counted as
BASELINES.md counts it: each message 4 framing tokens + its content, an assistant's tool calls
adding their name and arguments (o200k_base).

Two figures per prompt: *gross* counts the messages only (as BASELINES.md's first table does);
*net* adds every tool definition sent with the call, as JSON (``json.dumps``, o200k_base, as
BASELINES.md's "Net of tool definitions"): the agent's own tools (:attr:`ReplayRun.tools`) in
every strategy, and for agent-memory strategies the memory tools offered with that call by the
installed toolkit (:func:`~agent_memory.presentation.offer.load_toolkit`), and with them the
system-prompt section that teaches them (:data:`~agent_memory.agent.prompt.MEMORY_PROMPT`, as a
``MemoryAgent`` sends it: appended to the system prompt of every call that offers a memory tool).
For each prompt the engine also records the tokens a provider's prefix cache could reuse: the
tool definitions when they equal the previous call's, then the leading messages identical to the
previous prompt's (0 after a change of tools: tools come first in the cached prefix).

Peers (:mod:`~agent_memory.replay.peers`: LangChain's, the OpenAI Agents SDK's and Anthropic's
tool-result clearing) are replayed on the same history, each call's prompt built by the peer's own
code from ``naive``'s messages and sent with the agent's own tools; they are counted the same way.

A cache-aware agent-memory strategy (the default) decides its swaps with the price model its
calls are billed under, as a user's agent knows its model: it is replayed once per price model
(``price_models``), its cost under each model taken from the run that knew it
(:attr:`RunResult.priced_curves`), its token figures from the run under the first.

Not simulated: the retrieve calls a model might make to re-read a cited result (the traces were
made by models that never needed to); each would add its answer to later prompts.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.config import MemoryConfig
from agent_memory.errors import AgentMemoryError
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message
from agent_memory.plugins import PluginRegistry
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import ContextBuilder
from agent_memory.presentation.offer import MemoryTools, OfferState, load_toolkit, offer_cost_tokens, with_memory_prompt
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import PriceModel, headline_price_models
from agent_memory.prompt_tokens import FRAMING_TOKENS, message_tokens, tool_tokens
from agent_memory.replay.loaders import ReplayRun, ResultHint
from agent_memory.replay.peers import PeerStrategy
from agent_memory.replay.react_check import react_query_check
from agent_memory.replay.strategies import (
    DEFAULT_STRATEGIES,
    MASK_PLACEHOLDER,
    MASKING,
    MASKING_KEEP,
    NAIVE,
    ReplayStrategy,
    as_strategy,
)
from agent_memory.results import result_store_arguments
from agent_memory.tokens import TokenCounter, default_token_counter

__all__ = [
    "DEFAULT_WORKERS",
    "FRAMING_TOKENS",
    "RunResult",
    "StrategyCurve",
    "message_tokens",
    "replay_many",
    "replay_run",
    "memory_tool_sizes",
    "tool_tokens",
]

DEFAULT_WORKERS = 4
"""Runs replayed at once (threads; a run's time is mostly disk writes of its memory)."""


def memory_tool_sizes(counter: TokenCounter | None = None) -> dict[str, int]:
    """Token sizes of the installed memory tools as OpenAI JSON (``json.dumps``, o200k): each
    tool, ``all_three``, ``single_all`` (the one-tool form), ``offered_when_citing`` (what the
    default offer sends once citing began), ``memory_prompt`` (the system-prompt section sent with them)."""
    count = (counter or default_token_counter()).count
    with tempfile.TemporaryDirectory(prefix="agent-memory-tools-") as tmp:
        memory = AgentMemory("tools", tmp, config=MemoryConfig(index_on_store=False))
        separate = load_toolkit(memory)
        sizes = {tool["function"]["name"]: count(json.dumps(tool)) for tool in separate.openai_tools()}
        sizes["all_three"] = count(json.dumps(separate.openai_tools()))
        sizes["single_all"] = count(json.dumps(load_toolkit(memory, form="single").openai_tools()))
        sizes["offered_when_citing"] = count(json.dumps(separate.openai_tools(OfferState(citing=True))))
        sizes["memory_prompt"] = count(MEMORY_PROMPT)
    return sizes


@dataclass
class StrategyCurve:
    """One strategy's prompts over a run, one entry per LLM call (oldest first)."""

    prompt_tokens: list[int] = field(default_factory=list)
    """Net tokens of each prompt: its messages and every tool definition sent with it."""
    message_tokens: list[int] = field(default_factory=list)
    """Gross tokens of each prompt: its messages only."""
    tool_tokens: list[int] = field(default_factory=list)
    """Tokens of the tool definitions sent with each call (the agent's own and memory tools)."""
    prefix_tokens: list[int] = field(default_factory=list)
    """Net tokens of each prompt a prefix cache could reuse (0 for the first call)."""
    citing_since: int | None = None
    """1-based call from which results were cited (agent-memory strategies), ``None``: never."""

    @property
    def total(self) -> int:
        """Σ net prompt tokens."""
        return sum(self.prompt_tokens)

    @property
    def gross_total(self) -> int:
        """Σ gross prompt tokens (messages only)."""
        return sum(self.message_tokens)

    @property
    def largest(self) -> int:
        """Largest net prompt."""
        return max(self.prompt_tokens, default=0)

    @property
    def prefix_total(self) -> int:
        return sum(self.prefix_tokens)

    def record(self, messages: Sequence[Message], tools: Sequence[dict[str, Any]], previous: Any,
               count: Callable[[str], int]) -> Any:
        """Count one prompt; ``previous`` is what the last call returned (``None`` for the first).
        Returns what the next call needs to find the shared prefix."""
        keys = [_message_key(m) for m in messages]
        sizes = [message_tokens(m, count) for m in messages]
        tools_json = json.dumps(list(tools)) if tools else ""
        tools_size = count(tools_json) if tools else 0
        self.message_tokens.append(sum(sizes))
        self.tool_tokens.append(tools_size)
        self.prompt_tokens.append(sum(sizes) + tools_size)
        shared = 0
        if previous is not None and previous[0] == tools_json:
            shared = tools_size
            for key, prev, size in zip(keys, previous[1], sizes):
                if key != prev:
                    break
                shared += size
        self.prefix_tokens.append(shared)
        return tools_json, keys


@dataclass
class RunResult:
    """What replaying one run measured."""

    source: str
    run_id: str
    calls: int
    """LLM calls (assistant messages)."""
    results: int
    """Tool results stored."""
    result_tokens: list[int]
    """Size of each tool result's content, in tokens."""
    curves: dict[str, StrategyCurve]
    """Per strategy label (``naive``, ``masking_keep_3``, then each strategy's label)."""
    citation_tokens: list[int]
    """Size of each result's citation, in tokens (from the first strategy's builder)."""
    roundtrip_ok: int
    """Stored results that ``memory.get(id)`` gave back identical (type and value)."""
    own_tool_tokens: int = 0
    """Tokens of the agent's own tool definitions, sent with every call in every strategy."""
    output_tokens: list[int] = field(default_factory=list)
    """Tokens each call produced (oldest first): the assistant message that follows it, its content
    and tool calls without framing; the same in every strategy."""
    scripted: bool = False
    """The run is assembled, not recorded as is (the page session; :attr:`ReplayRun.scripted`)."""
    question: str | None = None
    answer: str | None = None
    answer_observations: list[str] = field(default_factory=list)
    """ReAct: observations (from Search/Lookup) that contain the final answer."""
    priced_curves: dict[str, dict[str, StrategyCurve]] = field(default_factory=dict)
    """Cache-aware strategies replayed under several price models: per strategy label, per price
    model label, the curve of the run that knew that price model (a user's agent knows its
    model). The first price model's curve is the strategy's in :attr:`curves` (its token figures);
    a strategy replayed under one price model, or tokens only, has no entry."""
    peers: dict[str, str] = field(default_factory=dict)
    """Per peer strategy replayed (:mod:`~agent_memory.replay.peers`), by label: what it is and at
    what settings (its curve is in :attr:`curves`)."""


def _result_entry(message: Message, hint: ResultHint | None, call_args: str | None) -> dict[str, Any]:
    """Arguments of ``AgentMemory.store`` for one tool result (:func:`result_store_arguments`)."""
    hint = hint or ResultHint()
    return result_store_arguments(message.content or "", tool=message.name, call_arguments=call_args,
                                  type=hint.type, media_type=hint.media_type, source=hint.source, title=hint.title)


def _message_key(message: Message) -> tuple[Any, ...]:
    return (message.role, message.content, message.tool_calls, message.tool_call_id, message.name)


class _Counter:
    """Token counts of texts, memoised per run (prompts repeat the same messages)."""

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._cache: dict[str, int] = {}

    def __call__(self, text: str) -> int:
        cached = self._cache.get(text)
        if cached is None:
            cached = self._cache[text] = self.counter.count(text)
        return cached


def replay_run(
    run: ReplayRun,
    *,
    strategies: Sequence[ReplayStrategy | PresentationPolicy] = DEFAULT_STRATEGIES,
    registry: PluginRegistry | None = None,
    counter: TokenCounter | None = None,
    workdir: str | Path | None = None,
    peers: Sequence[PeerStrategy] = (),
    price_models: Sequence[PriceModel] | None = None,
) -> RunResult:
    """Replay one run and count every prompt of every strategy, gross and net.

    Args:
        run: the run (its :attr:`~ReplayRun.tools` are sent with every call in every strategy).
        strategies: agent-memory strategies to replay (labels must differ); a bare policy gets
            the default tool offer.
        registry: compaction plugins for citations; ``None``: the installed ones.
        counter: token counter; ``None``: o200k_base.
        workdir: where the run's memory lives; ``None``: a temporary directory, removed after.
        peers: peer strategies (:mod:`~agent_memory.replay.peers`) replayed on the same history,
            each with the agent's own tools; their curves follow the agent-memory strategies'.
        price_models: the price models a cache-aware strategy
            (:attr:`~agent_memory.presentation.policy.PresentationPolicy.cache_aware`) is run
            under, once each (:attr:`RunResult.priced_curves`; the first one's run in
            :attr:`RunResult.curves`); ``None``: :func:`~agent_memory.pricing.headline_price_models`;
            ``()``: tokens only.

    Raises:
        ValueError: if two strategies (peers included) share a label.
        ConfigurationError: if no memory toolkit is installed, or a peer's package is not.
    """
    counter = counter or default_token_counter()
    registry = registry if registry is not None else PluginRegistry.from_entry_points()
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="agent-memory-replay-") as tmp:
            return replay_run(run, strategies=strategies, registry=registry, counter=counter, workdir=tmp,
                              peers=peers, price_models=price_models)
    count = _Counter(counter)
    memory = AgentMemory("replay", Path(workdir) / "memory", config=MemoryConfig(index_on_store=False),
                         token_counter=counter)
    messages = run.messages
    own_tools = list(run.tools)
    own_tokens = tool_tokens(own_tools, count)

    # 1. Store every tool result at once (nothing embedded), keep references in the history.
    tool_positions = [i for i, m in enumerate(messages) if m.role == "tool"]
    args_by_call: dict[str, str] = {}
    entries = []
    for i, message in enumerate(messages):
        for tool_call in message.tool_calls:
            args_by_call[tool_call.id] = tool_call.arguments
        if message.role == "tool":
            call_args = args_by_call.get(message.tool_call_id or "")
            entries.append(_result_entry(message, run.hints.get(i), call_args))
    ids = memory.store_many(entries) if entries else []
    ref_of = dict(zip(tool_positions, ids))
    history = [
        m.model_copy(update={"content": None, "tool_result_ref": ref_of[i]}) if i in ref_of else m
        for i, m in enumerate(messages)
    ]

    # 2. Round trip: every result comes back identical by id.
    roundtrip_ok = 0
    for entry, item_id in zip(entries, ids):
        try:
            back = memory.get(item_id).content
        except AgentMemoryError:
            continue
        if type(back) is type(entry["content"]) and back == entry["content"]:
            roundtrip_ok += 1

    # 3. Every LLM call: build and count the prompt of each strategy, with its tools.
    chosen = [as_strategy(s) for s in strategies]
    models = list(headline_price_models() if price_models is None else price_models)
    builders: dict[str, tuple[ContextBuilder, MemoryTools]] = {}
    variants: list[tuple[str, PriceModel, ContextBuilder, MemoryTools]] = []  # under the 2nd, 3rd... model
    for strategy in chosen:
        toolkit = load_toolkit(memory, offer=strategy.offer, form=strategy.form)
        retrieve_call = "memory" if strategy.form == "single" else "retrieve_memory"
        cost, _ = offer_cost_tokens(toolkit, own_tools, count, MEMORY_PROMPT)
        # A cache-aware strategy knows the price model it is billed under: one run per model.
        priced = list(models) if strategy.policy.cache_aware and models else [None]
        made = [ContextBuilder(memory, policy=strategy.policy, offer_cost_tokens=cost, prices=model,
                               fixed_tokens=own_tokens,
                               citations=CitationBuilder(registry, counter, retrieve_call=retrieve_call))
                for model in priced]
        builders[strategy.label] = (made[0], toolkit)
        variants += [(strategy.label, model, builder, toolkit) for model, builder in zip(models[1:], made[1:])]
    labels = [NAIVE, MASKING, *builders, *(peer.label for peer in peers)]
    if len(builders) != len(chosen) or len(set(labels)) != len(labels):
        raise ValueError("strategies must have distinct labels")
    curves = {label: StrategyCurve() for label in labels}
    previous: dict[str, Any] = dict.fromkeys(curves)
    priced_curves: dict[str, dict[str, StrategyCurve]] = {}
    for label, model, _, _ in variants:
        priced_curves.setdefault(label, {models[0].label: curves[label]})[model.label] = StrategyCurve()
    previous_variant: dict[tuple[str, str], Any] = {}
    peer_prompts = {peer.label: peer.prompts(messages, run.calls, tools=own_tools, counter=counter) for peer in peers}
    for call in run.calls:
        prefix = messages[:call]
        previous[NAIVE] = curves[NAIVE].record(prefix, own_tools, previous[NAIVE], count)
        tools = [i for i in range(call) if messages[i].role == "tool"]
        masked = set(tools[: max(0, len(tools) - MASKING_KEEP)])
        masked_prompt = [
            m.model_copy(update={"content": MASK_PLACEHOLDER}) if i in masked else m for i, m in enumerate(prefix)
        ]
        previous[MASKING] = curves[MASKING].record(masked_prompt, own_tools, previous[MASKING], count)
        for label, (builder, toolkit) in builders.items():
            built, sent = _agent_prompt(builder, toolkit, history[:call], own_tools)
            previous[label] = curves[label].record(built, sent, previous[label], count)
        for label, model, builder, toolkit in variants:
            built, sent = _agent_prompt(builder, toolkit, history[:call], own_tools)
            key = (label, model.label)
            previous_variant[key] = priced_curves[label][model.label].record(built, sent, previous_variant.get(key),
                                                                             count)
        for label, prompts in peer_prompts.items():
            previous[label] = curves[label].record(next(prompts), own_tools, previous[label], count)
    for label, (builder, _) in builders.items():
        curves[label].citing_since = builder.stats.citing_since
    for label, model, builder, _ in variants:
        priced_curves[label][model.label].citing_since = builder.stats.citing_since

    first = next(iter(builders.values()), None)
    citation_tokens = [first[0].view(item_id).cited_tokens for item_id in ids] if first is not None else []

    answer_observations: list[str] = []
    if run.answer and _checkable_answer(run.answer):
        pattern = re.compile(r"(?<!\w)" + re.escape(run.answer.lower()) + r"(?!\w)")
        for message in messages:
            if message.role == "tool" and message.name != "Finish" and pattern.search((message.content or "").lower()):
                answer_observations.append(message.content or "")

    return RunResult(
        source=run.source,
        run_id=run.run_id,
        calls=len(run.calls),
        results=len(ids),
        result_tokens=[count(e["content"]) for e in entries],
        curves=curves,
        citation_tokens=citation_tokens,
        roundtrip_ok=roundtrip_ok,
        own_tool_tokens=own_tokens,
        output_tokens=[message_tokens(messages[call], count) - FRAMING_TOKENS for call in run.calls],
        scripted=run.scripted,
        question=run.question,
        answer=run.answer,
        answer_observations=answer_observations,
        priced_curves=priced_curves,
        peers={peer.label: peer.description for peer in peers},
    )


def _agent_prompt(builder: ContextBuilder, toolkit: MemoryTools, history: Sequence[Message],
                  own_tools: list[dict[str, Any]]) -> tuple[list[Message], list[dict[str, Any]]]:
    """The messages (committed) and tools an agent-memory strategy sends with the next call: the
    memory tools it offers, and the memory prompt in the system prompt when it offers one."""
    prepared = builder.build(history)
    builder.commit(prepared)  # a replayed call is always answered: the run's next message
    built = prepared.messages
    offered = toolkit.openai_tools(OfferState(citing=builder.citing))
    if offered:
        built = with_memory_prompt(built, MEMORY_PROMPT)
    return built, own_tools + offered


def _checkable_answer(answer: str) -> bool:
    """Whether a final answer is specific enough to find in an observation (not yes/no, not empty)."""
    text = answer.strip().lower()
    return len(text) >= 2 and text not in {"yes", "no", "true", "false", "none", "unknown"}


def replay_many(
    runs: Sequence[ReplayRun],
    *,
    strategies: Sequence[ReplayStrategy | PresentationPolicy] = DEFAULT_STRATEGIES,
    registry: PluginRegistry | None = None,
    counter: TokenCounter | None = None,
    workers: int = DEFAULT_WORKERS,
    react_check: bool = True,
    on_run: Callable[[RunResult], None] | None = None,
    peers: Sequence[PeerStrategy] = (),
    price_models: Sequence[PriceModel] | None = None,
) -> tuple[list[RunResult], dict[str, Any]]:
    """Replay ``runs`` (in threads: storing is mostly disk waits) and, per source with questions,
    run :func:`~agent_memory.replay.react_check.react_query_check`. Results keep the order of
    ``runs``; ``on_run`` is called as each run finishes (from the calling thread). ``peers`` and
    ``price_models``: as :func:`replay_run`."""
    counter = counter or default_token_counter()
    registry = registry if registry is not None else PluginRegistry.from_entry_points()
    models = list(headline_price_models() if price_models is None else price_models)
    results: list[RunResult | None] = [None] * len(runs)
    with tempfile.TemporaryDirectory(prefix="agent-memory-replay-") as tmp:

        def one(n: int) -> tuple[int, RunResult]:
            return n, replay_run(runs[n], strategies=strategies, registry=registry, counter=counter,
                                 workdir=Path(tmp) / f"run{n}", peers=peers, price_models=models)

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for n, result in pool.map(one, range(len(runs))):
                results[n] = result
                if on_run is not None:
                    on_run(result)
        done = [r for r in results if r is not None]
        checks: dict[str, Any] = {}
        if react_check:
            for source in dict.fromkeys(r.source for r in runs if r.question):
                pairs = [(run, res) for run, res in zip(runs, done) if run.source == source]
                checks[source] = react_query_check(
                    [res for _, res in pairs], [run for run, _ in pairs], workdir=Path(tmp) / f"check-{source}",
                    counter=counter,
                )
    return done, checks
