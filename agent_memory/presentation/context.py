"""Building the messages of each LLM call: stored results resolved to full content or citation.

The conversation history keeps tool results as references (``Message.tool_result_ref``); the
:class:`ContextBuilder` resolves them each time messages are built, following a
:class:`~agent_memory.presentation.policy.PresentationPolicy`. History is never rewritten, a tool
call and its result always stay together (only the result's text changes), and a result is
swapped to its citation only when the citation is shorter than what it replaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_memory.memory import AgentMemory
from agent_memory.models.items import MemoryItem
from agent_memory.models.messages import Message
from agent_memory.presentation.citations import CitationBuilder
from agent_memory.presentation.policy import PresentationPolicy
from agent_memory.tokens import truncate_tokens
from agent_memory.transforms import readable_text

__all__ = ["ContextBuilder", "ContextStats", "ResultView"]

HEAD_LABEL_TOKENS = 8
"""Tokens of the "Beginning of the content:" label of a capped showing."""


@dataclass(frozen=True, slots=True)
class ResultView:
    """The two ways one stored result can appear, computed once per result."""

    full: str
    """The first showing: the readable content (capped; beyond the cap, the citation and the head)."""
    full_tokens: int
    cited: str
    """The citation's text."""
    cited_tokens: int


@dataclass
class ContextStats:
    """What a builder did so far (for reports)."""

    builds: int = 0
    """LLM calls built."""
    swaps: int = 0
    """Results swapped from full to citation."""
    citation_tokens: list[int] = field(default_factory=list)
    """Size of each distinct citation made, in tokens."""
    capped_first_showings: int = 0
    """First showings cut at ``full_result_max_tokens``."""


class ContextBuilder:
    """Resolves stored tool results in a history into the messages of the next LLM call.

    Args:
        memory: where the results are stored.
        policy: when results are shown in full.
        citations: makes the citations.

    One builder per conversation: it remembers which results were already shown and which were
    swapped, so consecutive prompts share the longest possible prefix.
    """

    def __init__(self, memory: AgentMemory, *, policy: PresentationPolicy, citations: CitationBuilder) -> None:
        self.memory = memory
        self.policy = policy
        self.citations = citations
        self.stats = ContextStats()
        self._views: dict[str, ResultView] = {}
        self._first_build: dict[str, int] = {}
        self._swapped: set[str] = set()

    def view(self, item_id: str) -> ResultView:
        """Full and cited text of a stored result (cached)."""
        cached = self._views.get(item_id)
        if cached is not None:
            return cached
        item = self.memory.get(item_id)
        counter = self.memory.tokens
        citation = self.citations.cite(item)
        cited = citation.render()
        cited_tokens = counter.count(cited)
        full, full_tokens = self._full(item, cited, cited_tokens)
        view = ResultView(full=full, full_tokens=full_tokens, cited=cited, cited_tokens=cited_tokens)
        self._views[item_id] = view
        self.stats.citation_tokens.append(cited_tokens)
        return view

    def _full(self, item: MemoryItem, cited: str, cited_tokens: int) -> tuple[str, int]:
        counter = self.memory.tokens
        text, _ = readable_text(item)
        full = text  # the id reaches the model with the citation that replaces this showing
        tokens = counter.count(full)
        cap = self.policy.full_result_max_tokens
        if tokens <= cap:
            return full, tokens
        self.stats.capped_first_showings += 1
        room = cap - cited_tokens - HEAD_LABEL_TOKENS
        while True:  # token counts of joined pieces can differ by a few from their sum
            full = f"{cited}\nBeginning of the content:\n{truncate_tokens(text, room, counter)}"
            tokens = counter.count(full)
            if tokens <= cap or room <= 0:
                return full, tokens
            room -= tokens - cap

    def build(self, history: Sequence[Message]) -> list[Message]:
        """The messages for the next LLM call, oldest first.

        Tool messages with ``tool_result_ref`` get their content from memory: full or citation
        per policy; every other message is passed through unchanged.

        Raises:
            ItemNotFoundError: if a ``tool_result_ref`` names no stored item.
        """
        self.stats.builds += 1
        call = self.stats.builds
        refs = [m.tool_result_ref for m in history if m.role == "tool" and m.tool_result_ref]
        for ref in refs:
            self._first_build.setdefault(ref, call)
        self._swap_due(refs, call)
        out: list[Message] = []
        for message in history:
            ref = message.tool_result_ref if message.role == "tool" else None
            if not ref:
                out.append(message)
                continue
            view = self.view(ref)
            content = view.cited if ref in self._swapped else view.full
            out.append(message.model_copy(update={"content": content}))
        return out

    def _swap_due(self, refs: list[str], call: int) -> None:
        policy = self.policy
        if policy.kind == "always_cite":
            due = list(refs)
        elif policy.kind == "full_once":
            due = [ref for ref in refs if self._first_build[ref] < call]
        else:  # keep_last_k: everything but the k newest distinct results
            distinct = list(dict.fromkeys(refs))
            due = distinct[: max(0, len(distinct) - policy.k)]
        pending = [ref for ref in dict.fromkeys(due) if ref not in self._swapped]
        worth = [ref for ref in pending if self.view(ref).cited_tokens < self.view(ref).full_tokens]
        if policy.kind == "always_cite":
            worth = pending  # never show in full, whatever the sizes
        saving = sum(self.view(ref).full_tokens - self.view(ref).cited_tokens for ref in worth)
        if worth and (policy.kind == "always_cite" or saving >= policy.min_swap_tokens):
            self._swapped.update(worth)
            self.stats.swaps += len(worth)
