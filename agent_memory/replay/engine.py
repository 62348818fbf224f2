"""The replay engine: a run through AgentMemory, every prompt counted with what goes with it.

Per run a fresh :class:`~agent_memory.memory.AgentMemory` (in a temporary directory, nothing
embedded) stores each tool result; the history keeps ``Message(role="tool",
tool_result_ref=id)``. Before each assistant message (an LLM call) the prompt of every strategy
(:mod:`~agent_memory.replay.strategies`) is built from the history so far and counted as
:mod:`~agent_memory.prompt_tokens` counts every prompt: each message 4 framing tokens + its
content, an assistant's tool calls adding their name and arguments (o200k_base).

Two figures per prompt: *gross* counts the messages only; *net* adds every tool definition sent
with the call, as JSON (``json.dumps``, o200k_base: the tau-bench airline agent's 14 tools are
2,437 tokens): the agent's own tools (:attr:`ReplayRun.tool_definitions`) in
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

What the model loses is priced as well (:mod:`~agent_memory.replay.used_values`): at each call,
the values the run's model went on to write that only an earlier tool result held are *needed*,
and each strategy's curve counts those its prompt kept. An agent-memory prompt that misses one is
preceded by a **simulated retrieve**: one more LLM call over that prompt whose output is the
``retrieve_memory`` calls (``around`` the value, or the page that holds it when the result's first
showing was capped), answered by the real toolkit; the call and its answers stay in that
strategy's history from then on, so every later prompt carries them. Masking and the peers lose
what they cleared (:attr:`StrategyCurve.lost`); each is replayed a second time as ``<label>+rerun``
(:data:`~agent_memory.replay.strategies.RERUN_SUFFIX`), priced with a re-run of the original tool
call before each call whose prompt lost a needed value, the re-run and its result kept in that
replay's history and edited by the strategy's own code from then on (a peer's prompts are built
from a history that grows call by call: :meth:`~agent_memory.replay.peers.PeerStrategy.prompts`).
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.config import MemoryConfig
from agent_memory.errors import AgentMemoryError
from agent_memory.ids import derived_memory_id
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message, ToolCall
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
from agent_memory.replay.used_values import NeededValue, holds, missing, needed_values
from agent_memory.replay.strategies import (
    DEFAULT_STRATEGIES,
    MASK_PLACEHOLDER,
    MASKING,
    MASKING_KEEP,
    MASKING_RERUN,
    NAIVE,
    RERUN_SUFFIX,
    ReplayStrategy,
    as_strategy,
)
from agent_memory.records.prepare import result_store_arguments
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
        sizes = {tool["function"]["name"]: count(json.dumps(tool)) for tool in separate.tool_definitions()}
        sizes["all_three"] = count(json.dumps(separate.tool_definitions()))
        sizes["single_all"] = count(json.dumps(load_toolkit(memory, form="single").tool_definitions()))
        sizes["offered_when_citing"] = count(json.dumps(separate.tool_definitions(OfferState(citing=True))))
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
    output_tokens: list[int] = field(default_factory=list)
    """Tokens each call produced (:attr:`RunResult.output_tokens`, and for a simulated retrieve
    call its ``retrieve_memory`` calls), one per entry of :attr:`prompt_tokens`."""
    needed: int = 0
    """Values the run's calls used that only an earlier tool result held
    (:mod:`~agent_memory.replay.used_values`)."""
    kept: int = 0
    """Of :attr:`needed`, those the strategy's prompt for the call still held."""
    calls_missed: int = 0
    """Calls whose prompt missed at least one needed value."""
    retrieves: int = 0
    """Simulated retrieve calls (agent-memory strategies: one extra LLM call before each call with a
    miss, or a re-run of the original tool call for ``+rerun`` curves), included in every figure."""
    retrieve_tokens: int = 0
    """Tokens of the answers those calls brought into the history (counted in later prompts too)."""
    lost: int = 0
    """Needed values the prompt missed and nothing brought back (masking and the peers: the
    content is gone)."""
    memory_ms: list[float] = field(default_factory=list)
    """Agent-memory strategies: the memory's own wall time for each step of the run (one entry per
    LLM call of the run, oldest first), in milliseconds: storing the results the step made (shared
    by every strategy of the run), building the prompt (presentation, citations, the offer) and
    committing it, and the simulated retrieves before the call; not the counting of tokens, nor
    the model. Empty for the baselines and peers, which have no memory."""

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

    def note(self, needed: int, missed: int) -> None:
        """Count one call's needed values and how many its prompt missed."""
        self.needed += needed
        self.kept += needed - missed
        self.calls_missed += 1 if missed else 0

    def record(self, messages: Sequence[Message], tool_definitions: Sequence[dict[str, Any]], previous: Any,
               count: Callable[[str], int]) -> Any:
        """Count one prompt; ``previous`` is what the last call returned (``None`` for the first).
        Returns what the next call needs to find the shared prefix."""
        keys = [_message_key(m) for m in messages]
        sizes = [message_tokens(m, count) for m in messages]
        tools_json = json.dumps(list(tool_definitions)) if tool_definitions else ""
        tools_size = count(tools_json) if tool_definitions else 0
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
        run: the run (its :attr:`~ReplayRun.tool_definitions` are sent with every call in every strategy).
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
    own_tool_definitions = list(run.tool_definitions)
    own_tokens = tool_tokens(own_tool_definitions, count)

    # 1. Each tool result gets its memory id (derived from the run and position: citations, which
    #    quote the id, and every decision that counts their tokens come out the same on every
    #    replay); the history keeps references. A result is stored (nothing embedded) in the step
    #    that made it: before the first call that sees it, timed as that step's memory work.
    positions: list[int] = []
    args_by_call: dict[str, str] = {}
    entries = []
    for i, message in enumerate(messages):
        for tool_call in message.tool_calls:
            args_by_call[tool_call.id] = tool_call.arguments
        if message.role == "tool":
            call_args = args_by_call.get(message.tool_call_id or "")
            entry = _result_entry(message, run.hints.get(i), call_args)
            entry["item_id"] = derived_memory_id(f"replay:{run.source}/{run.run_id}/{i}")
            positions.append(i)
            entries.append(entry)
    item_id_of = {i: entry["item_id"] for i, entry in zip(positions, entries)}
    history = [
        m.model_copy(update={"content": None, "tool_result_ref": item_id_of[i]}) if i in item_id_of else m
        for i, m in enumerate(messages)
    ]
    stored = 0

    def store_upto(end: int) -> float:
        """Store the results at positions before ``end`` not stored yet; the seconds it took."""
        nonlocal stored
        started = time.perf_counter()
        batch = []
        while stored < len(entries) and positions[stored] < end:
            batch.append(entries[stored])
            stored += 1
        if batch:
            memory.store_many(batch)
        return time.perf_counter() - started

    # 2. Every LLM call: build and count the prompt of each strategy, with its tools; a needed
    #    value the prompt misses is retrieved first (agent-memory) or lost (masking, peers).
    chosen = [as_strategy(s) for s in strategies]
    models = list(headline_price_models() if price_models is None else price_models)
    needed = needed_values(messages, known=[json.dumps(own_tool_definitions), *sorted(run.vocabulary)])
    outputs = [message_tokens(messages[call], count) - FRAMING_TOKENS for call in run.calls]
    tracks: list[_AgentTrack] = []
    builders: dict[str, tuple[ContextBuilder, MemoryTools]] = {}
    for strategy in chosen:
        toolkit = load_toolkit(memory, offer=strategy.offer, form=strategy.form)
        retrieve_call = "memory" if strategy.form == "single" else "retrieve_memory"
        cost, _ = offer_cost_tokens(toolkit, own_tool_definitions, count, MEMORY_PROMPT)
        # A cache-aware strategy knows the price model it is billed under: one run per model.
        priced = list(models) if strategy.policy.cache_aware and models else [None]
        for model in priced:
            builder = ContextBuilder(memory, policy=strategy.policy, offer_cost_tokens=cost, prices=model,
                                     fixed_tokens=own_tokens,
                                     citations=CitationBuilder(registry, counter, retrieve_call=retrieve_call))
            tracks.append(_AgentTrack(strategy.label, model.label if model is not None else None, builder, toolkit,
                                      retrieve_call, StrategyCurve()))
        builders.setdefault(strategy.label, (tracks[-len(priced)].builder, toolkit))
    clearing = [_ClearingTrack(NAIVE, _naive_prompts), _ClearingTrack(MASKING, _masking_prompts),
                _ClearingTrack(MASKING_RERUN, _masking_prompts, rerun=True)]
    for peer in peers:
        prompts = _peer_prompts(peer, own_tool_definitions, counter)
        clearing += [_ClearingTrack(peer.label, prompts), _ClearingTrack(peer.label + RERUN_SUFFIX, prompts, rerun=True)]
    labels = [track.label for track in clearing[:3]] + list(builders) + [track.label for track in clearing[3:]]
    if len(builders) != len(chosen) or len(set(labels)) != len(labels):
        raise ValueError("strategies must have distinct labels")
    curves = {track.label: track.curve for track in clearing}
    priced_curves: dict[str, dict[str, StrategyCurve]] = {}
    for track in tracks:
        if track.model is None or track.model == models[0].label:
            curves[track.label] = track.curve
        if track.model is not None and len(models) > 1:
            priced_curves.setdefault(track.label, {})[track.model] = track.curve
    curves = {label: curves[label] for label in labels}
    for n, call in enumerate(run.calls):
        want = needed.get(call, [])
        storing = store_upto(call)  # the step's results, stored once for every strategy
        for clear in clearing:
            clear.call(messages, call, want, own_tool_definitions, outputs[n], count)
        for track in tracks:
            track.call(history, call, want, item_id_of, own_tool_definitions, outputs[n], count)
            track.curve.memory_ms[-1] += storing * 1_000
    store_upto(len(messages))  # results after the last call
    for track in tracks:
        track.curve.citing_since = track.builder.stats.citing_since

    # 3. Round trip: every result comes back identical by id.
    roundtrip_ok = 0
    for entry in entries:
        try:
            back = memory.get(entry["item_id"]).content
        except AgentMemoryError:
            continue
        if type(back) is type(entry["content"]) and back == entry["content"]:
            roundtrip_ok += 1

    first = next(iter(builders.values()), None)
    citation_tokens = [first[0].view(e["item_id"]).cited_tokens for e in entries] if first is not None else []

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
        results=len(entries),
        result_tokens=[count(e["content"]) for e in entries],
        curves=curves,
        citation_tokens=citation_tokens,
        roundtrip_ok=roundtrip_ok,
        own_tool_tokens=own_tokens,
        output_tokens=outputs,
        scripted=run.scripted,
        question=run.question,
        answer=run.answer,
        answer_observations=answer_observations,
        priced_curves=priced_curves,
        peers={label: text for peer in peers for label, text in (
            (peer.label, peer.description),
            (peer.label + RERUN_SUFFIX, f"{peer.description}; priced with a re-run of the original tool call "
                                        "before each call whose prompt lost a value the model went on to use"))},
    )


def _agent_prompt(builder: ContextBuilder, toolkit: MemoryTools, history: Sequence[Message],
                  own_tool_definitions: list[dict[str, Any]]) -> tuple[list[Message], list[dict[str, Any]]]:
    """The messages (committed) and tools an agent-memory strategy sends with the next call: the
    memory tools it offers, and the memory prompt in the system prompt when it offers one."""
    prepared = builder.build(history)
    builder.commit(prepared)  # a replayed call is always answered: the run's next message
    built = prepared.messages
    offered = toolkit.tool_definitions(OfferState(citing=builder.citing))
    if offered:
        built = with_memory_prompt(built, MEMORY_PROMPT)
    return built, own_tool_definitions + offered


def _masked(prefix: Sequence[Message]) -> list[Message]:
    """``prefix`` under observation masking: results older than the newest ``MASKING_KEEP``
    replaced by :data:`MASK_PLACEHOLDER`."""
    tool_positions = [i for i, m in enumerate(prefix) if m.role == "tool"]
    masked = set(tool_positions[: max(0, len(tool_positions) - MASKING_KEEP)])
    return [m.model_copy(update={"content": MASK_PLACEHOLDER}) if i in masked else m for i, m in enumerate(prefix)]


Prompter = Callable[[Sequence[Message], Sequence[int]], Iterator[list[Message]]]
"""Prompts of a strategy that edits the history itself (the :meth:`PeerStrategy.prompts`
contract): ``messages`` and ``calls`` grow between two prompts."""


def _naive_prompts(messages: Sequence[Message], calls: Sequence[int]) -> Iterator[list[Message]]:
    for call in calls:
        yield list(messages[:call])


def _masking_prompts(messages: Sequence[Message], calls: Sequence[int]) -> Iterator[list[Message]]:
    for call in calls:
        yield _masked(messages[:call])


def _peer_prompts(peer: PeerStrategy, tool_definitions: list[dict[str, Any]], counter: TokenCounter) -> Prompter:
    def prompts(messages: Sequence[Message], calls: Sequence[int]) -> Iterator[list[Message]]:
        return peer.prompts(messages, calls, tool_definitions=tool_definitions, counter=counter)
    return prompts


@dataclass
class _ClearingTrack:
    """A strategy that cannot bring content back (naive, masking, a peer): each call's prompt is
    built by its own code from a history that grows call by call. What the prompt misses of the
    values the call needs is *lost*; with ``rerun``, the miss is paid for instead: one more LLM
    call first, whose output runs the original tool calls again (same names and arguments), their
    results (as the run recorded them) in the history from then on, as an agent would have them."""

    label: str
    prompter: Prompter
    rerun: bool = False
    curve: StrategyCurve = field(default_factory=StrategyCurve)
    history: list[Message] = field(default_factory=list)
    calls: list[int] = field(default_factory=list)
    """Where in :attr:`history` each prompt so far ended (the prompter reads it as it grows)."""
    upto: int = 0
    """How much of the run's history is in :attr:`history`."""
    previous: Any = None
    prompts: Iterator[list[Message]] | None = None

    def call(self, run_history: Sequence[Message], call: int, want: Sequence[NeededValue],
             own_tool_definitions: list[dict[str, Any]], output: int, count: Callable[[str], int]) -> None:
        """Count the prompt (or, on a miss with :attr:`rerun`, the re-run call and then the
        prompt) of the LLM call that produced ``run_history[call]``."""
        self.history.extend(run_history[self.upto:call])
        self.upto = call
        prompt = self._next()
        missed = missing(prompt, want)
        self.curve.note(len(want), len(missed))
        if missed and self.rerun:
            asked, results = _rerun(run_history, call, missed)
            self.previous = self.curve.record(prompt, own_tool_definitions, self.previous, count)
            self.curve.output_tokens.append(message_tokens(asked, count) - FRAMING_TOKENS)
            self.curve.retrieves += 1
            self.curve.retrieve_tokens += sum(message_tokens(result, count) for result in results)
            self.history += [asked, *results]
            prompt = self._next()
            missed = missing(prompt, missed)
        self.curve.lost += len(missed)
        self.previous = self.curve.record(prompt, own_tool_definitions, self.previous, count)
        self.curve.output_tokens.append(output)

    def _next(self) -> list[Message]:
        self.calls.append(len(self.history))
        if self.prompts is None:
            self.prompts = self.prompter(self.history, self.calls)
        return next(self.prompts)


def _rerun(run_history: Sequence[Message], call: int, missed: Sequence[NeededValue]) -> tuple[Message, list[Message]]:
    """The assistant message that runs again each tool call whose result held a value of
    ``missed``, and the results (as recorded, under the new call ids)."""
    calls_by_id = {c.id: c for m in run_history[:call] for c in m.tool_calls}
    again: list[ToolCall] = []
    results: list[Message] = []
    for index in dict.fromkeys(needed.result_index for needed in missed):
        result = run_history[index]
        original = calls_by_id.get(result.tool_call_id or "")
        call_id = f"rerun_{call}_{len(again)}"
        again.append(ToolCall(id=call_id, name=original.name if original else (result.name or "tool"),
                              arguments=original.arguments if original else "{}"))
        results.append(result.model_copy(update={"tool_call_id": call_id}))
    return Message(role="assistant", content=None, tool_calls=tuple(again)), results


@dataclass
class _AgentTrack:
    """One agent-memory strategy under one price model: its builder and its own history, which is
    the run's plus the simulated retrieves (each retrieve call and its answer stay in the history
    from then on, as in an agent's)."""

    label: str
    model: str | None
    builder: ContextBuilder
    toolkit: MemoryTools
    retrieve_call: str
    curve: StrategyCurve
    history: list[Message] = field(default_factory=list)
    upto: int = 0
    """How much of the run's history is in :attr:`history`."""
    previous: Any = None

    def call(self, run_history: Sequence[Message], call: int, want: Sequence[NeededValue], item_id_of: dict[int, str],
             own_tool_definitions: list[dict[str, Any]], output: int, count: Callable[[str], int]) -> None:
        """Count the prompt (or, on a miss, the retrieve call and then the prompt) of the LLM call
        that produced ``run_history[call]``."""
        self.history.extend(run_history[self.upto:call])
        self.upto = call
        started = time.perf_counter()
        built, sent = _agent_prompt(self.builder, self.toolkit, self.history, own_tool_definitions)
        spent = time.perf_counter() - started
        missed = missing(built, want)
        self.curve.note(len(want), len(missed))
        if missed:
            started = time.perf_counter()
            asked, answers = self._retrieve(missed, item_id_of)
            spent += time.perf_counter() - started
            self.previous = self.curve.record(built, sent, self.previous, count)
            self.curve.output_tokens.append(message_tokens(asked, count) - FRAMING_TOKENS)
            self.curve.retrieves += 1
            self.curve.retrieve_tokens += sum(message_tokens(answer, count) for answer in answers)
            self.history += [asked, *answers]
            started = time.perf_counter()
            built, sent = _agent_prompt(self.builder, self.toolkit, self.history, own_tool_definitions)
            spent += time.perf_counter() - started
            self.curve.lost += len(missing(built, missed))
        self.previous = self.curve.record(built, sent, self.previous, count)
        self.curve.output_tokens.append(output)
        self.curve.memory_ms.append(spent * 1_000)

    def _retrieve(self, missed: Sequence[NeededValue], item_id_of: dict[int, str]) -> tuple[Message, list[Message]]:
        """The model's retrieve calls for ``missed`` (one assistant message, one call per result and
        window: ``around`` the value, or the page that holds it when the result's first showing
        was capped and the model never saw the rest) and their answers, from the real toolkit."""
        calls: list[ToolCall] = []
        answers: list[Message] = []
        for needed in missed:
            if any(holds(answer.content, needed.value) for answer in answers):
                continue
            item_id = item_id_of[needed.result_index]
            arguments: dict[str, Any] = {"id": item_id, "around": needed.value}
            if self.builder.view(item_id).capped:
                page = _page_holding(self.toolkit, self.retrieve_call, item_id, needed.value)
                if page is not None:
                    arguments = {"id": item_id, "page": page}
            answer = self.toolkit.dispatch(self.retrieve_call, arguments)
            call = ToolCall(id=f"sim_{self.upto}_{len(calls)}", name=self.retrieve_call,
                            arguments=json.dumps(arguments, ensure_ascii=False))
            calls.append(call)
            answers.append(Message(role="tool", content=answer.content, tool_call_id=call.id, name=call.name))
        return Message(role="assistant", content=None, tool_calls=tuple(calls)), answers


def _page_holding(toolkit: MemoryTools, tool: str, item_id: str, value: str) -> int | None:
    """The first page of ``retrieve_memory(id=ref, page=…)`` that holds ``value``; ``None``: none."""
    page = 1
    while True:
        answer = toolkit.dispatch(tool, {"id": item_id, "page": page})
        if not answer.ok:
            return None
        if holds(answer.content, value):
            return page
        pages = (answer.data or {}).get("pages")
        if not isinstance(pages, int) or page >= pages:
            return None
        page += 1


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
