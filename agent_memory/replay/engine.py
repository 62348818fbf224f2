"""The replay engine: a run through AgentMemory and the presentation policies, every prompt counted.

Per run a fresh :class:`~agent_memory.memory.AgentMemory` (in a temporary directory, nothing
embedded) stores each tool result; the history keeps ``Message(role="tool",
tool_result_ref=id)``. Before each assistant message (an LLM call) the prompt of every strategy is
built from the history so far and counted as BASELINES.md counts it: each message 4 framing
tokens + its content, an assistant's tool calls adding their name and arguments (o200k_base).

Strategies: ``naive`` (every result in full), ``masking_keep_3`` (the 3 newest results in full,
older ones replaced by :data:`MASK_PLACEHOLDER`, as Anthropic's context editing does) and one
agent-memory strategy per :class:`~agent_memory.presentation.policy.PresentationPolicy`
(:meth:`ContextBuilder.build` output). For each prompt it also records the tokens of the leading
messages that repeat the previous prompt's (what a prefix cache could reuse).
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent_memory.config import MAX_QUERY_LIMIT, MemoryConfig
from agent_memory.errors import AgentMemoryError
from agent_memory.html import looks_like_html
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.context import ContextBuilder
from agent_memory.presentation.plugins import PluginRegistry
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.replay.loaders import ReplayRun, ResultHint
from agent_memory.tokens import TokenCounter, default_token_counter

__all__ = [
    "DEFAULT_POLICIES",
    "DEFAULT_WORKERS",
    "FRAMING_TOKENS",
    "MASKING_KEEP",
    "MASK_PLACEHOLDER",
    "NAIVE",
    "MASKING",
    "ReactCheck",
    "RunResult",
    "StrategyCurve",
    "message_tokens",
    "parse_policy",
    "react_query_check",
    "replay_many",
    "replay_run",
]

FRAMING_TOKENS = 4
"""Tokens each message costs besides its content (BASELINES.md)."""

MASKING_KEEP = 3
"""Results observation masking keeps in full (Anthropic's context editing keeps 3 tool uses)."""

MASK_PLACEHOLDER = "[result cleared]"
"""What observation masking puts in place of an older result."""

NAIVE = "naive"
MASKING = f"masking_keep_{MASKING_KEEP}"

DEFAULT_POLICIES: tuple[PresentationPolicy, ...] = (
    PresentationPolicy(),
    PresentationPolicy(kind="keep_last_k", k=3),
    PresentationPolicy(kind="always_cite"),
)
"""Policies replayed when none are given: full once (the default), keep the 3 newest, always cite."""

DEFAULT_WORKERS = 4
"""Runs replayed at once (threads; a run's time is mostly disk writes of its memory)."""

QUERY_TOP_K = 5
"""ReAct check: the answer-bearing observation must be among this many query hits."""


def message_tokens(message: Message, count: Callable[[str], int]) -> int:
    """Tokens of one message in a prompt: framing + content + each tool call's name and arguments."""
    tokens = FRAMING_TOKENS + count(message.content or "")
    for call in message.tool_calls:
        tokens += count(call.name) + count(call.arguments)
    return tokens


@dataclass
class StrategyCurve:
    """One strategy's prompts over a run, one entry per LLM call (oldest first)."""

    prompt_tokens: list[int] = field(default_factory=list)
    """Tokens of each prompt."""
    prefix_tokens: list[int] = field(default_factory=list)
    """Tokens of each prompt's leading messages identical to the previous prompt's (0 for the first)."""

    @property
    def total(self) -> int:
        return sum(self.prompt_tokens)

    @property
    def largest(self) -> int:
        return max(self.prompt_tokens, default=0)

    @property
    def prefix_total(self) -> int:
        return sum(self.prefix_tokens)


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
    """Per strategy label (``naive``, ``masking_keep_3``, then each policy's label)."""
    citation_tokens: list[int]
    """Size of each result's citation, in tokens (from the first policy's builder)."""
    roundtrip_ok: int
    """Stored results that ``memory.get(id)`` gave back identical (type and value)."""
    scripted: bool = False
    """Assistant turns scripted (the page session)."""
    question: str | None = None
    answer: str | None = None
    answer_observations: list[str] = field(default_factory=list)
    """ReAct: observations (from Search/Lookup) that contain the final answer."""


def _result_entry(message: Message, hint: ResultHint | None, call_args: str | None) -> dict[str, Any]:
    """Arguments of ``AgentMemory.store`` for one tool result, its type chosen by its content."""
    content = message.content or ""
    hint = hint or ResultHint()
    kind, media = hint.type, hint.media_type
    if kind is None or media is None:
        stripped = content.lstrip()
        guess_kind, guess_media = "action_result", "text/plain"
        if stripped[:1] in "[{":
            try:
                json.loads(content)
                guess_kind, guess_media = "database_result", "application/json"
            except ValueError:
                pass
        if guess_media == "text/plain" and looks_like_html(content):
            guess_kind, guess_media = "web_content", "text/html"
        kind, media = kind or guess_kind, media or guess_media
    tool = message.name or "tool"
    title = hint.title
    if title is None and call_args:
        title = f"{tool}({call_args})" if len(call_args) <= 60 else f"{tool}(…)"
    return {
        "content": content,
        "type": kind,
        "media_type": media,
        "source": hint.source or tool,
        "title": title,
    }


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


def _record(curve: StrategyCurve, prompt: Sequence[Message], previous: list[tuple[Any, ...]] | None,
            count: Callable[[str], int]) -> list[tuple[Any, ...]]:
    keys = [_message_key(m) for m in prompt]
    sizes = [message_tokens(m, count) for m in prompt]
    curve.prompt_tokens.append(sum(sizes))
    shared = 0
    if previous is not None:
        for key, prev, size in zip(keys, previous, sizes):
            if key != prev:
                break
            shared += size
    curve.prefix_tokens.append(shared)
    return keys


def replay_run(
    run: ReplayRun,
    *,
    policies: Sequence[PresentationPolicy] = DEFAULT_POLICIES,
    registry: PluginRegistry | None = None,
    counter: TokenCounter | None = None,
    workdir: str | Path | None = None,
) -> RunResult:
    """Replay one run and count every prompt of every strategy.

    Args:
        run: the run.
        policies: agent-memory presentation policies to replay (labels must differ).
        registry: compaction plugins for citations; ``None``: the installed ones.
        counter: token counter; ``None``: o200k_base.
        workdir: where the run's memory lives; ``None``: a temporary directory, removed after.
    """
    counter = counter or default_token_counter()
    registry = registry if registry is not None else PluginRegistry.from_entry_points()
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="agent-memory-replay-") as tmp:
            return replay_run(run, policies=policies, registry=registry, counter=counter, workdir=tmp)
    count = _Counter(counter)
    memory = AgentMemory("replay", Path(workdir) / "memory", config=MemoryConfig(index_on_store=False),
                         token_counter=counter)
    messages = run.messages

    # 1. Store every tool result at once (nothing embedded), keep references in the history.
    tool_positions = [i for i, m in enumerate(messages) if m.role == "tool"]
    args_by_call: dict[str, str] = {}
    entries = []
    for i, message in enumerate(messages):
        for call in message.tool_calls:
            args_by_call[call.id] = call.arguments
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

    # 3. Every LLM call: build and count the prompt of each strategy.
    builders = {
        policy.label: ContextBuilder(memory, policy=policy, citations=CitationBuilder(registry, counter))
        for policy in policies
    }
    if len(builders) != len(policies):
        raise ValueError("policies must have distinct labels")
    curves = {label: StrategyCurve() for label in (NAIVE, MASKING, *builders)}
    previous: dict[str, list[tuple[Any, ...]] | None] = dict.fromkeys(curves)
    for call in run.calls:
        prefix = messages[:call]
        previous[NAIVE] = _record(curves[NAIVE], prefix, previous[NAIVE], count)
        tools = [i for i in range(call) if messages[i].role == "tool"]
        masked = set(tools[: max(0, len(tools) - MASKING_KEEP)])
        masked_prompt = [
            m.model_copy(update={"content": MASK_PLACEHOLDER}) if i in masked else m for i, m in enumerate(prefix)
        ]
        previous[MASKING] = _record(curves[MASKING], masked_prompt, previous[MASKING], count)
        for label, builder in builders.items():
            built = builder.build(history[:call])
            previous[label] = _record(curves[label], built, previous[label], count)

    first = next(iter(builders.values()), None)
    citation_tokens = []
    if first is not None:
        citation_tokens = [first.view(item_id).cited_tokens for item_id in ids]

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
        scripted=run.scripted,
        question=run.question,
        answer=run.answer,
        answer_observations=answer_observations,
    )


def _checkable_answer(answer: str) -> bool:
    """Whether a final answer is specific enough to find in an observation (not yes/no, not empty)."""
    text = answer.strip().lower()
    return len(text) >= 2 and text not in {"yes", "no", "true", "false", "none", "unknown"}


@dataclass
class ReactCheck:
    """Query Memory with a ReAct run's question: is an answer-bearing observation in the top 5?"""

    runs_checked: int = 0
    """Runs whose final answer occurs in one of their observations."""
    hits_in_run: int = 0
    """Checked runs where one is in the top 5 of the ranking restricted to the run's own observations."""
    hits_pooled: int = 0
    """Checked runs where a query over the pooled observations of every run found one in its top 5."""
    pooled_items: int = 0
    """Distinct observations in the pooled memory."""
    misses: list[str] = field(default_factory=list)
    """Run ids missed by the pooled query."""


def react_query_check(
    results: Sequence[RunResult],
    runs: Sequence[ReplayRun],
    *,
    workdir: str | Path,
    counter: TokenCounter | None = None,
    top_k: int = QUERY_TOP_K,
) -> ReactCheck:
    """Store every distinct observation of the runs that have a question in one memory (tagged with
    the runs that saw it), index once, and query with each checkable run's question (once per
    distinct question, ``MAX_QUERY_LIMIT`` hits). Pooled: the top ``top_k`` over every run's
    observations (other runs' pages compete). In run: the same ranking restricted to the run's own
    observations (nearly always a hit: a run has a handful of observations)."""
    check = ReactCheck()
    wanted = [(run, result) for run, result in zip(runs, results) if run.question and result.answer_observations]
    if not wanted:
        return check
    tags_of: dict[str, set[str]] = {}
    for run in runs:
        if not run.question:
            continue
        for message in run.messages:
            if message.role == "tool" and message.name != "Finish" and message.content:
                tags_of.setdefault(message.content, set()).add(run.run_id)
    memory = AgentMemory("react-check", Path(workdir) / "react-memory",
                         config=MemoryConfig(index_on_store=False), token_counter=counter)
    contents = list(tags_of)
    ids = memory.store_many(
        {"content": text, "type": "web_content", "media_type": "text/plain", "source": "wikipedia",
         "tags": sorted(tags_of[text])}
        for text in contents
    )
    content_of = dict(zip(ids, contents))
    memory.flush_index()
    check.pooled_items = len(ids)
    ranked: dict[str, list[str]] = {}
    for run, result in wanted:
        if run.question not in ranked:  # the same question recurs across trials: encode it once
            hits = memory.query(text=run.question, limit=MAX_QUERY_LIMIT)
            ranked[run.question] = [hit.item.id for hit in hits]
        order = ranked[run.question]
        answers = set(result.answer_observations)
        check.runs_checked += 1
        own = [item_id for item_id in order if run.run_id in tags_of[content_of[item_id]]]
        if any(content_of[item_id] in answers for item_id in own[:top_k]):
            check.hits_in_run += 1
        if any(content_of[item_id] in answers for item_id in order[:top_k]):
            check.hits_pooled += 1
        else:
            check.misses.append(run.run_id)
    return check


def replay_many(
    runs: Sequence[ReplayRun],
    *,
    policies: Sequence[PresentationPolicy] = DEFAULT_POLICIES,
    registry: PluginRegistry | None = None,
    counter: TokenCounter | None = None,
    workers: int = DEFAULT_WORKERS,
    react_check: bool = True,
    on_run: Callable[[RunResult], None] | None = None,
) -> tuple[list[RunResult], dict[str, ReactCheck]]:
    """Replay ``runs`` (in threads: storing is mostly disk waits) and, per source with questions,
    run :func:`react_query_check`. Results keep the order of ``runs``; ``on_run`` is called as each
    run finishes (from the calling thread)."""
    from concurrent.futures import ThreadPoolExecutor

    counter = counter or default_token_counter()
    registry = registry if registry is not None else PluginRegistry.from_entry_points()
    results: list[RunResult | None] = [None] * len(runs)
    with tempfile.TemporaryDirectory(prefix="agent-memory-replay-") as tmp:

        def one(n: int) -> tuple[int, RunResult]:
            return n, replay_run(runs[n], policies=policies, registry=registry, counter=counter,
                                 workdir=Path(tmp) / f"run{n}")

        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            for n, result in pool.map(one, range(len(runs))):
                results[n] = result
                if on_run is not None:
                    on_run(result)
        done = [r for r in results if r is not None]
        checks: dict[str, ReactCheck] = {}
        if react_check:
            for source in dict.fromkeys(r.source for r in runs if r.question):
                pairs = [(run, res) for run, res in zip(runs, done) if run.source == source]
                checks[source] = react_query_check(
                    [res for _, res in pairs], [run for run, _ in pairs], workdir=Path(tmp) / f"check-{source}",
                    counter=counter,
                )
    return done, checks


_POLICY_NAME = re.compile(r"^(full_once|always_cite|keep_last_(\d+))(?:\+batch(\d+))?$")


def parse_policy(name: str) -> PresentationPolicy:
    """A policy from its report label: ``full_once``, ``keep_last_3``, ``always_cite``, each
    optionally with ``+batch<tokens>`` (``min_swap_tokens``).

    Raises:
        ValueError: if ``name`` is not such a label.
    """
    found = _POLICY_NAME.match(name.strip())
    if not found:
        raise ValueError(f"unknown policy {name!r}; use full_once, keep_last_<k>, always_cite (+batch<tokens>)")
    kind, k, batch = found.groups()
    args: dict[str, Any] = {"min_swap_tokens": int(batch or 0)}
    if k is not None:
        args.update(kind="keep_last_k", k=int(k))
    else:
        args["kind"] = kind
    return PresentationPolicy(**args)
