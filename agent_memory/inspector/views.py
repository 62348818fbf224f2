"""What the inspector shows, as plain data read from a memory (no HTML here).

- :func:`agent_scopes`: the agents a store holds, each with its parent and memory scope when it
  is a sub-agent (its ``spawn`` document, :class:`~agent_memory.fork.SpawnRecord`; for a memory
  written before spawns kept one, its ``fork`` document and its generated id).
- :func:`rebuild_calls`: a conversation's LLM calls, rebuilt from what the backend keeps. Nothing
  records a prompt as sent; the raw traces (active and archived) record every message, the
  episodes every compaction (with its time), and the memory every stored result. Each call's
  prompt is rebuilt from them with the project's own
  :class:`~agent_memory.presentation.context.ContextBuilder` (the default policy, the memory
  tools' offer cost, under a price model), so each result is shown as the builder decides: in
  full, as its citation, or compacted into an episode. Tokens are the project's count
  (o200k, 4 framing tokens per message) of the messages and, once citing starts, of what the
  assembler adds (the memory section of the system prompt and the memory tools' definitions),
  counted as the replay counts a prompt sequence
  (:class:`~agent_memory.replay.engine.StrategyCurve`); the agent's own system prompt and tools
  are not in the traces and are not counted. Cost prices each call with prompt caching
  (:mod:`agent_memory.pricing`): the rebuilt prompt, the prefix it shares with the previous
  call's, and the answer as output.
- :func:`load_report`: a replay report directory (``report.json`` and its PNG plots).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.errors import ConfigurationError
from agent_memory.fork import FORK_DOCUMENT, SPAWN_DOCUMENT, MemoryFork, SpawnRecord
from agent_memory.kernel.transcript import messages_from_traces
from agent_memory.limits import shorten
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message
from agent_memory.models.traces import EpisodicItem, SemanticItem, trace_sort_key
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import FORGOTTEN_NOTE, ContextBuilder
from agent_memory.presentation.offer import OfferState, load_toolkit, offer_cost_tokens, with_memory_prompt
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.pricing import CallTokens, Cost, PriceModel
from agent_memory.prompt_tokens import message_tokens
from agent_memory.replay.engine import StrategyCurve
from agent_memory.storage.contracts import Backend
from agent_memory.storage import common

__all__ = [
    "AgentScope",
    "CallView",
    "ConversationView",
    "ReportView",
    "ShownResult",
    "agent_scopes",
    "load_report",
    "rebuild_calls",
]

MAX_SHOWN_CHARS = 4_000
"""Characters of one result's text as shown to the model that a call's page repeats (the item's
page has all of it)."""

_GENERATED_CHILD = re.compile(r"^(?P<parent>.+)\.sub\d{2,}$")
"""A generated sub-agent id, ``<parent>.subNN`` (:func:`~agent_memory.ids.sub_agent_id`)."""

Shown = Literal["as returned", "full", "citation", "compacted", "forgotten", "inline", "error"]
"""How a tool result appeared in a prompt: ``as returned`` (before citing starts: the tool's own
text, as an agent without memory sends it), ``full`` (the first showing once citing), ``citation``,
``compacted`` (its turn was compacted into an episode), ``forgotten`` (the item was removed),
``inline`` (a result never stored: memory tools' answers), ``error`` (a tool error)."""


# -- agents and their scopes ---------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class AgentScope:
    """One agent of a store and how it relates to the others."""

    agent_id: str
    parent_id: str | None
    """The agent that spawned it; ``None``: a top-level agent (or a parent not recorded)."""
    scope: str
    """``shared`` (the parent's memory), ``isolated`` (a fork of the parent's items), ``none`` (an
    empty memory of its own), or ``own`` (a top-level agent's own memory)."""
    memory_id: str
    """Whose items its stored results are (the parent's id for ``shared``, else its own)."""
    source: str
    """Where the scope was read: ``spawn record``, ``fork`` or ``generated id``; ``""`` for ``own``."""
    task: str = ""
    """The task it was spawned with (``""``: unknown)."""
    fork_items: int | None = None
    """Items of the parent it may read (``isolated`` only)."""


def _document(backend: Backend, agent_id: str, name: str) -> bytes | None:
    data, _ = common.document(backend, agent_id, name).get()
    return data


def agent_scopes(backend: Backend) -> list[AgentScope]:
    """Every agent ``backend`` holds, sorted by id, with its parent and scope.

    Raises:
        StoreError: if a spawn or fork document cannot be read.
    """
    ids = backend.agent_ids()
    out: list[AgentScope] = []
    for agent_id in ids:
        where = common.describe(backend, agent_id)
        spawn = _document(backend, agent_id, SPAWN_DOCUMENT)
        fork_data = _document(backend, agent_id, FORK_DOCUMENT)
        fork = MemoryFork.from_json(fork_data, where=f"the fork of {where}") if fork_data is not None else None
        fork_items = len(fork.item_ids) if fork is not None else None
        if spawn is not None:
            record = SpawnRecord.from_json(spawn, where=f"the spawn record of {where}")
            out.append(AgentScope(agent_id, record.parent_agent_id, record.memory_mode, record.memory_agent_id,
                                  "spawn record", record.task, fork_items))
        elif fork is not None:
            out.append(AgentScope(agent_id, fork.parent_agent_id, "isolated", agent_id, "fork", "", fork_items))
        else:
            generated = _GENERATED_CHILD.match(agent_id)
            parent = generated.group("parent") if generated else None
            if parent is not None and parent in ids:
                out.append(AgentScope(agent_id, parent, "unknown", agent_id, "generated id"))
            else:
                out.append(AgentScope(agent_id, None, "own", agent_id, ""))
    return out


# -- a conversation's calls -------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ShownResult:
    """One tool result as one call's prompt showed it."""

    tool_name: str
    item_id: str | None
    """The stored result's memory id; ``None``: not stored (inline, error)."""
    shown: Shown
    tokens: int
    """Tokens of the message as shown (framing included)."""
    text: str
    """What the model read (at most :data:`MAX_SHOWN_CHARS` characters; ``cut`` says so)."""
    cut: bool = False
    episode_id: str | None = None
    """For ``compacted``: the episode its turn went into."""


@dataclass(frozen=True, slots=True)
class CallView:
    """One LLM call of a conversation, rebuilt (module docstring)."""

    index: int
    """1-based, in the conversation."""
    turn_id: str
    at: datetime
    """When the model's answer was recorded (UTC)."""
    prompt_tokens: int
    """Messages of the rebuilt prompt, in tokens."""
    prefix_tokens: int
    """Leading tokens equal to the previous call's prompt (what a prefix cache can serve)."""
    output_tokens: int
    """The answer: its text and tool calls, in tokens."""
    messages: int
    """Messages in the prompt."""
    results: tuple[ShownResult, ...]
    """Every tool result in the prompt, oldest first."""
    tool_calls: tuple[str, ...]
    """The tools the model called in its answer."""
    answer: str
    """The answer's text (``""``: tool calls only), at most :data:`MAX_SHOWN_CHARS` characters."""
    prompt_version: int
    """Which version of the prompt this call extends: 1 from the first call, +1 at each rewrite of
    the prompt (a compaction, the start of citing, a batch of swaps); the calls of one version share
    a growing cached prefix."""
    citing: bool
    """Whether results were cited in this call (the memory tools went with it)."""
    swapped_now: tuple[str, ...]
    """Results this call shows as citations for the first time."""
    compacted_before: tuple[str, ...]
    """Episodes made by compactions right before this call."""
    cost: Cost | None
    """What the call costs under the price model (``None``: no price model)."""


@dataclass(frozen=True, slots=True)
class ConversationView:
    """A conversation's calls, episodes and facts."""

    agent_id: str
    memory_id: str
    """Whose items its results are."""
    calls: tuple[CallView, ...]
    episodes: tuple[EpisodicItem, ...]
    """Compactions' episodes, oldest first."""
    facts: tuple[SemanticItem, ...]
    price_model: str | None
    """The label of the price model the costs are under; ``None``: not priced."""
    total_cost: Cost | None
    truncated_turns: tuple[str, ...] = ()
    """Turns archived without an episode (truncated to keep the prompt in the window)."""
    notes: tuple[str, ...] = field(default_factory=tuple)


def _cut(text: str) -> tuple[str, bool]:
    shown = shorten(text, MAX_SHOWN_CHARS, mark_length=True)
    return shown, shown is not text


def _stamp(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def rebuild_calls(conversation: AgentMemory, memory: AgentMemory, *, price_model: PriceModel | None,
                  conversation_id: str | None = None) -> ConversationView:
    """The LLM calls of a conversation, rebuilt from the backend (module docstring).

    Args:
        conversation: the memory whose backend keeps the conversation's traces (any of the
            backend's memories: only its backend is used).
        memory: where the conversation's results are stored (the parent's memory for a shared
            sub-agent).
        price_model: prices each call with prompt caching; ``None``: tokens only.
        conversation_id: the agent id the traces are kept under; ``None``: ``conversation``'s.

    Raises:
        StoreError: if the traces cannot be read.
    """
    agent_id = conversation_id or conversation.agent_id
    traces = common.traces(conversation.backend, agent_id)
    archive = traces.read_archive()
    raw = sorted([*archive, *traces.list_raw()], key=trace_sort_key)
    episodes = sorted(traces.list_episodic(), key=lambda ep: ep.ts)
    facts = tuple(traces.list_semantic())
    history_all = messages_from_traces(raw)
    count = memory.tokens.count
    toolkit = load_toolkit(memory)
    offer = toolkit.tool_definitions(OfferState(citing=True))
    builder = ContextBuilder(memory, policy=PresentationPolicy(), prices=price_model,
                             citations=CitationBuilder(memory.plugins, memory.tokens),
                             offer_cost_tokens=offer_cost_tokens(toolkit, (), count, MEMORY_PROMPT)[0])
    compacted: dict[str, str] = {}  # turn id -> episode id
    pending = list(episodes)
    calls: list[CallView] = []
    curve = StrategyCurve()  # the replay's own count of a prompt sequence: net tokens, cached prefix
    previous: Any = None
    version, total = 0, Cost() if price_model is not None else None
    for position, message in enumerate(history_all):
        if message.role != "assistant":
            continue
        at = message.ts if message.ts is not None else 0.0
        made: list[EpisodicItem] = []
        while pending and pending[0].ts <= at:
            episode = pending.pop(0)
            made.append(episode)
            compacted.update((turn_id, episode.id) for turn_id in episode.turn_ids)
        if made:
            builder.rewritten()
        history = [m for m in history_all[:position] if m.turn_id not in compacted]
        summary = [ep for ep in episodes if ep.ts <= at]
        if summary:  # the compaction snapshot's memory bundle, as one message before the tail
            bundle = "[MEMORY:EPISODIC]\n" + "\n".join(ep.summary for ep in summary)
            history = [Message(role="user", content=bundle), *history]
        built = builder.prepare(history)
        builder.commit(built)
        shown_msgs = built.messages
        results = _results(history_all[:position], shown_msgs, compacted, built.state.swapped,
                           built.state.citing, count)
        if built.state.citing:  # what the assembler adds: the memory section and the memory tools
            sent, definitions = with_memory_prompt(shown_msgs, MEMORY_PROMPT), offer
        else:
            sent, definitions = shown_msgs, []
        previous = curve.record(sent, definitions, previous, count)
        prompt, prefix = curve.prompt_tokens[-1], curve.prefix_tokens[-1]
        output = message_tokens(message, count)
        rewrote = bool(made) or bool(built.swapped_now) or (built.state.citing_since == built.state.calls and
                                                            built.state.calls > 1)
        version = version + 1 if not calls or rewrote else version
        cost = price_model.cost(CallTokens(prompt, prefix, output)) if price_model is not None else None
        if total is not None and cost is not None:
            total = total + cost
        answer, _ = _cut(message.content or "")
        calls.append(CallView(
            index=len(calls) + 1, turn_id=message.turn_id or "", at=_stamp(at), prompt_tokens=prompt,
            prefix_tokens=prefix, output_tokens=output, messages=len(shown_msgs), results=tuple(results),
            tool_calls=tuple(call.name for call in message.tool_calls), answer=answer, prompt_version=version,
            citing=built.state.citing, swapped_now=built.swapped_now,
            compacted_before=tuple(ep.id for ep in made), cost=cost,
        ))
    archived = {item.turn_id for item in archive}
    episode_turns = {turn_id for ep in episodes for turn_id in ep.turn_ids}
    return ConversationView(
        agent_id=agent_id, memory_id=memory.agent_id, calls=tuple(calls), episodes=tuple(episodes), facts=facts,
        price_model=price_model.label if price_model is not None else None, total_cost=total,
        truncated_turns=tuple(sorted(archived - episode_turns)),
    )


def _results(before: Sequence[Message], shown: Sequence[Message], compacted: dict[str, str],
             swapped: frozenset[str], citing: bool, count: Any) -> list[ShownResult]:
    """Every tool result of the conversation so far, as the prompt showed it (compacted ones too)."""
    by_id = {m.id: m for m in shown if m.role == "tool"}
    out: list[ShownResult] = []
    for message in before:
        if message.role != "tool":
            continue
        name = message.name or "tool"
        item_id = message.tool_result_ref
        episode = compacted.get(message.turn_id or "")
        if episode is not None:
            out.append(ShownResult(name, item_id, "compacted", 0, f"in episode {episode}", episode_id=episode))
            continue
        seen = by_id.get(message.id)
        if seen is None:
            continue
        text, cut = _cut(seen.content or "")
        tokens = message_tokens(seen, count)
        kind: Shown
        if item_id is None:
            kind = "error" if message.is_error else "inline"
        elif seen.content == FORGOTTEN_NOTE.format(id=item_id):
            kind = "forgotten"
        elif not citing:
            kind = "as returned"
        else:
            kind = "citation" if item_id in swapped else "full"
        out.append(ShownResult(name, item_id, kind, tokens, text, cut))
    return out


# -- the replay report ---------------------------------------------------------------------------
PLOT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}\.png$")
"""Names of the plots a report directory may serve (``tokens.png``, ``cost.png``): no paths."""


@dataclass(frozen=True, slots=True)
class ReportView:
    """A replay report directory, as the inspector shows it."""

    path: Path
    data: dict[str, Any]
    """``report.json``."""
    plots: tuple[str, ...]
    """The PNG files in the directory (names matching :data:`PLOT_NAME`): :data:`PLOT_ORDER`'s
    first, in that order (the answer first), then any other, sorted."""
    verdict: str = ""
    """``report.md``'s opening sentence (what the default saves on the real traces), as plain text;
    ``""`` when the directory has no report.md."""

    def rows(self) -> list[dict[str, Any]]:
        """One row per source and strategy: net prompt tokens, change against naive, and the
        cost (USD) and its change under each price model, in ``report.json``'s order."""
        out = []
        for source in [*self.data.get("sources", []), self.data.get("total")]:
            if not isinstance(source, dict):
                continue
            for label, summary in (source.get("strategies") or {}).items():
                costs = summary.get("cost") or {}
                out.append({
                    "source": source.get("source", ""), "strategy": label,
                    "prompt_tokens": summary.get("prompt_tokens", 0), "reduction": summary.get("reduction", 0.0),
                    "costs": [(model, cost.get("total_usd", 0.0), cost.get("change", 0.0))
                              for model, cost in costs.items()],
                })
        return out


def load_report(path: Path) -> ReportView:
    """The replay report in directory ``path`` (``agent-memory replay --out``).

    Raises:
        ConfigurationError: if ``path`` is not a directory with a readable ``report.json``.
    """
    file = path / "report.json"
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigurationError(f"{path} is not a replay report directory (no readable report.json: {exc})") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{file} is not a replay report (not a JSON object)")
    found = sorted(p.name for p in path.iterdir() if p.is_file() and PLOT_NAME.match(p.name))
    plots = tuple(sorted(found, key=lambda name: PLOT_ORDER.index(name) if name in PLOT_ORDER else len(PLOT_ORDER)))
    return ReportView(path=path, data=data, plots=plots, verdict=_verdict(path / "report.md"))


PLOT_ORDER = ("savings.png", "tokens.png", "cost.png")
"""The report's plots in the order a reader asks their questions: does it save money, how many
tokens, what over the calls."""


def _verdict(file: Path) -> str:
    """The first paragraph of ``report.md`` after its title, without markdown's emphasis marks."""
    try:
        text = file.read_text(encoding="utf-8")
    except OSError:
        return ""
    paragraphs = [part.strip() for part in text.split("\n\n") if part.strip() and not part.lstrip().startswith("#")]
    return " ".join(paragraphs[0].replace("**", "").replace("`", "").split()) if paragraphs else ""

