"""Planning a compaction: which raw turns (and which steps of a long turn) stay in the working
context, how much of the memory bundle fits, and the reset to the Compaction Snapshot.

The :class:`~agent_memory.kernel.manager.MemoryManager` decides *when* to compact; the planner decides
*what stays*, in tokens of the prompt as it will be sent (stored results shown per the presentation
policy, tool definitions included), so that after a compaction the prompt is at most the target
fraction of the input budget.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from agent_memory.kernel.budget import TokenBudget
from agent_memory.kernel.compactor import CompactionRecord, Compactor
from agent_memory.kernel.pairing import pair_tool_messages
from agent_memory.kernel.retriever import Retriever
from agent_memory.kernel.snapshot_builder import CompactionSnapshotBuilder, MemoryBundle, render_bundle
from agent_memory.kernel.transcript import messages_from_traces
from agent_memory.kernel.turns import TurnTracker
from agent_memory.kernel.working_context import WorkingContextSnapshot
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message
from agent_memory.models.traces import turn_number
from agent_memory.presentation.context import BuiltContext, ContextBuilder
from agent_memory.storage.traces import TraceStore

__all__ = ["BUNDLE_SHARE", "MIN_BUNDLE_TOKENS", "SUMMARY_ALLOWANCE_TOKENS", "CompactionPlanner", "PlannedConversation"]

BUNDLE_SHARE = 0.4
"""Most of the post-compaction target the memory bundle (episodes, facts, pinned items) may take:
the rest is for the system prompt, the raw tail and the current turn."""

MIN_BUNDLE_TOKENS = 200
"""The memory bundle may always take this many tokens (the access note alone is ~60)."""

SUMMARY_ALLOWANCE_TOKENS = 1_000
"""Tokens reserved for the episode and facts a compaction adds to the bundle when the raw tail is
sized (the extractive summary is at most 600 tokens; the facts share the rest)."""


class PlannedConversation(Protocol):
    """What the planner reads of the conversation it plans for (a
    :class:`~agent_memory.kernel.manager.MemoryManager`): its traces, working context,
    presentation, budget, counting, the parts that compact, the turns, and the tool calls still
    unanswered."""

    traces: TraceStore
    context: WorkingContextSnapshot
    presentation: ContextBuilder
    budget: TokenBudget
    compactor: Compactor
    retriever: Retriever
    snapshot_builder: CompactionSnapshotBuilder
    system_prompt: str | None
    tail_turns: int
    memory: AgentMemory
    tracker: TurnTracker

    @property
    def pending_call_ids(self) -> frozenset[str]: ...

    def count_tokens(self, messages: Sequence[Message], tool_definitions: Sequence[dict[str, Any]] = ()) -> int: ...

    def build_prompt(self, *, notes: Sequence[Message] = (), full_cap: int | None = None) -> BuiltContext: ...


class CompactionPlanner:
    """What stays raw when one manager compacts.

    Args:
        manager: the conversation it plans for (its store, working context, presentation,
            budget and counting).
    """

    def __init__(self, manager: PlannedConversation) -> None:
        self.manager = manager

    def turn_messages(self, turn_ids: Sequence[str]) -> list[Message]:
        """The working-context messages of these turns whose traces are still active, in order
        (steps a step compaction archived are left out); rebuilt from the raw traces when the
        working context does not hold a turn."""
        wanted = set(turn_ids)
        traces = self.manager.traces.list_raw(turn_ids)
        ids = {item.id for item in traces}
        calls = {item.tool_call_id for item in traces if item.trace_type == "tool_call"}
        held = [
            m for m in self.manager.context.build_messages()
            if m.turn_id in wanted and (m.id in ids or any(call.id in calls for call in m.tool_calls))
        ]
        if {m.turn_id for m in held} >= {item.turn_id for item in traces}:
            return held
        return messages_from_traces(traces)

    def compact_steps(self, turn_id: str, tool_definitions: Sequence[dict[str, Any]]) -> CompactionRecord | None:
        """Compact the finished steps of one long turn, keeping its user message and as many of its
        newest steps as fit (at least the last one). ``None`` when there is nothing to compact."""
        messages = self.turn_messages([turn_id])
        head = messages[:1] if messages and messages[0].role == "user" else []
        steps: list[list[Message]] = []
        for message in messages[len(head):]:
            if message.role == "tool" and steps:
                steps[-1].append(message)
            else:
                steps.append([message])
        if len(steps) < 2:
            return None
        fixed = self.manager.count_tokens(self.manager.snapshot_builder.build(self.manager.system_prompt, self.bundle(tool_definitions, head), [], head), tool_definitions)
        room = self.manager.budget.target_tokens - fixed - min(SUMMARY_ALLOWANCE_TOKENS, max(0, self.manager.budget.target_tokens - fixed) // 4)
        keep = 1
        while keep < len(steps):
            shown = self.manager.presentation.prepare(pair_tool_messages([m for step in steps[-(keep + 1):] for m in step]),
                                                      rewrite_from=0).messages
            if self.manager.count_tokens(shown) > room:
                break
            keep += 1
        old = steps[:-keep]
        pending = self.manager.pending_call_ids
        finished = [step for step in old if not any(call.id in pending for m in step for call in m.tool_calls)]
        traces = {item.tool_call_id: item.id for item in self.manager.traces.list_raw([turn_id]) if item.trace_type == "tool_call"}
        trace_ids = [m.id for step in finished for m in step if m.id]
        trace_ids += [traces[call.id] for step in finished for m in step for call in m.tool_calls if call.id in traces]
        if not trace_ids:
            return None
        return self.manager.compactor.compact_steps(turn_id, trace_ids)

    def size_tail(self, older: list[str], later: list[str], tool_definitions: Sequence[dict[str, Any]]) -> list[str]:
        """The raw tail: the last ``tail_turns`` older turns, fewer if they do not fit the target
        with the system prompt, the bundle (as it will be, estimated) and the current turn."""
        tail = older[-self.manager.tail_turns:]
        current = self.turn_messages(later)
        fixed = self.manager.count_tokens(self.manager.snapshot_builder.build(self.manager.system_prompt, self.bundle(tool_definitions, current), [],
                                                              current), tool_definitions)
        room = self.manager.budget.target_tokens - fixed - min(SUMMARY_ALLOWANCE_TOKENS, max(0, self.manager.budget.target_tokens - fixed) // 4)
        while tail:
            shown = self.manager.presentation.prepare(pair_tool_messages(self.turn_messages(tail)), rewrite_from=0).messages
            if self.manager.count_tokens(shown) <= room:
                break
            tail = tail[1:]
        return tail

    def bundle(self, tool_definitions: Sequence[dict[str, Any]] = (), current: Sequence[Message] = ()) -> MemoryBundle:
        """The retriever's bundle, trimmed to ``BUNDLE_SHARE`` of the room the target leaves
        beside the system prompt, the tools and the current turn: the oldest episodes go first,
        then the least salient unpinned facts; pinned facts and items always stay (they are what
        the developer asked to keep)."""
        bundle = self.manager.retriever.retrieve()
        fixed = self.manager.count_tokens(self.manager.snapshot_builder.build(self.manager.system_prompt, MemoryBundle(), [], current), tool_definitions)
        limit = max(MIN_BUNDLE_TOKENS, int(BUNDLE_SHARE * (self.manager.budget.target_tokens - fixed)))
        count = self.manager.memory.tokens.count
        episodic, semantic = list(bundle.episodic), list(bundle.semantic)
        while count(render_bundle(MemoryBundle(tuple(episodic), tuple(semantic), bundle.pinned_items))) > limit:
            unpinned = [fact for fact in semantic if not fact.pinned]
            if len(episodic) > 1:
                episodic.pop(0)
            elif unpinned:
                semantic.remove(unpinned[-1])
            elif episodic:
                episodic.pop(0)
            else:
                break
        return MemoryBundle(tuple(episodic), tuple(semantic), bundle.pinned_items)

    def reset(self, tail: Sequence[str], later: Sequence[str], tool_definitions: Sequence[dict[str, Any]]) -> int:
        """Reset the working context to the snapshot; returns our count of the next prompt. The
        prompt is rewritten from the snapshot on, so the presentation makes every due swap with
        it (one epoch: :meth:`~agent_memory.presentation.context.ContextBuilder.rewritten`)."""
        current = self.turn_messages(later)
        snapshot = self.manager.snapshot_builder.build(self.manager.system_prompt, self.bundle(tool_definitions, current),
                                               self.turn_messages(tail), current)
        self.manager.context.reset(snapshot, presentation=self.manager.presentation.rewritten())
        return self.manager.count_tokens(self.manager.build_prompt().messages, tool_definitions)

    def finished_turns(self) -> tuple[list[str], list[str]]:
        """The active turns before the current one (oldest first), and the rest (the current turn
        and any started after it)."""
        manager = self.manager
        current = manager.tracker.current_turn_id
        active = manager.traces.active_turn_ids()
        older = [t for t in active if t != current and (current is None or turn_number(t) < turn_number(current))]
        return older, [t for t in active if t not in older]

    def truncate_to_target(self, tail: list[str], later: Sequence[str], tool_definitions: Sequence[dict[str, Any]],
                           after: int) -> tuple[list[str], int]:
        """Archive the oldest turns of ``tail`` without a summary, one at a time, while the prompt
        (``after`` tokens now) is above the post-compaction target; ``tail`` keeps the rest.
        Returns the truncated turn ids (oldest first) and the prompt's size after them."""
        truncated: list[str] = []
        while after > self.manager.budget.target_tokens and tail:
            truncated.append(tail.pop(0))
            self.manager.compactor.truncate(truncated[-1:])
            after = self.reset(tail, later, tool_definitions)
        return truncated, after

