"""Building the messages of each LLM call: stored results resolved to full content or citation.

The conversation history keeps tool results as references (``Message.tool_result_ref``); the
:class:`ContextBuilder` resolves them each time messages are built, following a
:class:`~agent_memory.presentation.policy.PresentationPolicy`. History is never rewritten, a tool
call and its result always stay together (only the result's text changes), and a result is
swapped to its citation only when the citation is shorter than what it replaces.

Until citing starts (``PresentationPolicy.start``), every result is shown exactly as the tool
returned it, and :attr:`ContextBuilder.citing` is ``False``: the caller offers no memory tool and
the prompt is the one an agent without memory would send.
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
from agent_memory.transforms import raw_text, readable_text

__all__ = ["ContextBuilder", "ContextStats", "ResultView"]

HEAD_LABEL_TOKENS = 8
"""Tokens of the "Beginning of the content:" label of a capped showing."""


@dataclass(frozen=True, slots=True)
class ResultView:
    """The ways one stored result can appear, computed once per result."""

    raw: str
    """The content exactly as stored (what an agent without memory shows), before citing starts."""
    raw_tokens: int
    full: str
    """The first showing once citing: the readable content, or ``raw`` when that is not shorter
    (capped; beyond the cap, the citation and the head)."""
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
    citing_since: int | None = None
    """The call (1-based build number) from which results are cited, or ``None`` while the
    prompt is still the naive one."""


class ContextBuilder:
    """Resolves stored tool results in a history into the messages of the next LLM call.

    Args:
        memory: where the results are stored.
        policy: when results are shown in full, and when citing starts.
        citations: makes the citations.
        offer_cost_tokens: what citing adds to every call, in tokens: the definitions of the
            memory tools a citation needs (and any system-prompt text that teaches them), as the
            caller sends them. With ``policy.start == "when_it_pays"``, citing starts only once it
            saves more than this. 0: citing is free (it then starts with the first result it
            shortens).

    One builder per conversation: it remembers which results were already shown and which were
    swapped, so consecutive prompts share the longest possible prefix.
    """

    def __init__(
        self,
        memory: AgentMemory,
        *,
        policy: PresentationPolicy,
        citations: CitationBuilder,
        offer_cost_tokens: int = 0,
    ) -> None:
        if offer_cost_tokens < 0:
            raise ValueError("offer_cost_tokens must be >= 0")
        self.memory = memory
        self.policy = policy
        self.citations = citations
        self.offer_cost_tokens = offer_cost_tokens
        self.stats = ContextStats()
        self._views: dict[str, ResultView] = {}
        self._first_build: dict[str, int] = {}
        self._swapped: set[str] = set()
        self._citing = policy.start == "first_call"

    @property
    def citing(self) -> bool:
        """Whether results are cited (so the memory tools must be offered with the next call)."""
        return self._citing

    def view(self, item_id: str) -> ResultView:
        """Raw, full and cited text of a stored result (cached)."""
        cached = self._views.get(item_id)
        if cached is not None:
            return cached
        item = self.memory.get(item_id)
        counter = self.memory.tokens
        raw = raw_text(item.content, item.metadata.content_encoding)
        raw_tokens = counter.count(raw)
        cited = self.citations.cite(item).render()
        cited_tokens = counter.count(cited)
        full, full_tokens = self._full(item, raw, raw_tokens, cited, cited_tokens)
        view = ResultView(raw=raw, raw_tokens=raw_tokens, full=full, full_tokens=full_tokens, cited=cited,
                          cited_tokens=cited_tokens)
        self._views[item_id] = view
        self.stats.citation_tokens.append(cited_tokens)
        return view

    def _full(self, item: MemoryItem, raw: str, raw_tokens: int, cited: str, cited_tokens: int) -> tuple[str, int]:
        counter = self.memory.tokens
        text, _ = readable_text(item)
        tokens = counter.count(text)
        if tokens >= raw_tokens:
            text, tokens = raw, raw_tokens
        cap = self.policy.full_result_max_tokens
        if tokens <= cap:
            return text, tokens  # the id reaches the model with the citation that replaces this showing
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

        Tool messages with ``tool_result_ref`` get their content from memory: as stored while
        not :attr:`citing`, else full or citation per policy; every other message is passed
        through unchanged. Check :attr:`citing` after each build to know whether the memory tools
        go with this call.

        Raises:
            ItemNotFoundError: if a ``tool_result_ref`` names no stored item.
        """
        self.stats.builds += 1
        call = self.stats.builds
        refs = list(dict.fromkeys(m.tool_result_ref for m in history if m.role == "tool" and m.tool_result_ref))
        for ref in refs:
            self._first_build.setdefault(ref, call)
        if not self._citing and self._saving_if_citing(refs, call) > self.offer_cost_tokens:
            self._citing = True
            self.stats.citing_since = call
        if self._citing:
            if self.stats.citing_since is None:
                self.stats.citing_since = call
            self._swap_due(refs, call)
        out: list[Message] = []
        for message in history:
            ref = message.tool_result_ref if message.role == "tool" else None
            if not ref:
                out.append(message)
                continue
            out.append(message.model_copy(update={"content": self._shown(ref)}))
        return out

    def _shown(self, ref: str) -> str:
        view = self.view(ref)
        if not self._citing:
            return view.raw
        return view.cited if ref in self._swapped else view.full

    def _due(self, refs: list[str], call: int) -> list[str]:
        """The results the policy would show as citations in this call (before size checks)."""
        kind = self.policy.kind
        if kind == "always_cite":
            return list(refs)
        if kind == "full_once":
            return [ref for ref in refs if self._first_build[ref] < call]
        return refs[: max(0, len(refs) - self.policy.k)]  # keep_last_k: all but the k newest

    def _worth_citing(self, ref: str) -> bool:
        view = self.view(ref)
        if self.policy.kind == "always_cite":
            return True  # never shown in full, whatever the sizes
        return view.cited_tokens < view.full_tokens and view.raw_tokens > self.policy.inline_max_tokens

    def _saving_if_citing(self, refs: list[str], call: int) -> int:
        """Tokens the prompt would lose if citing started now: every result shown as citing would
        show it (due ones as citations, the others in full) against how it is shown now (raw)."""
        cited = {ref for ref in self._due(refs, call) if self._worth_citing(ref)}
        swap_saving = sum(self.view(ref).full_tokens - self.view(ref).cited_tokens for ref in cited)
        if self.policy.kind != "always_cite" and swap_saving < self.policy.min_swap_tokens:
            cited = set()  # batching would keep them in full for now
        saving = 0
        for ref in refs:
            view = self.view(ref)
            saving += view.raw_tokens - (view.cited_tokens if ref in cited else view.full_tokens)
        return saving

    def _swap_due(self, refs: list[str], call: int) -> None:
        pending = [ref for ref in self._due(refs, call) if ref not in self._swapped]
        worth = [ref for ref in pending if self._worth_citing(ref)]
        saving = sum(self.view(ref).full_tokens - self.view(ref).cited_tokens for ref in worth)
        if worth and (self.policy.kind == "always_cite" or saving >= self.policy.min_swap_tokens):
            self._swapped.update(worth)
            self.stats.swaps += len(worth)
