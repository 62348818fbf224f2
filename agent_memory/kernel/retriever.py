"""The Retriever: which episodes and facts go into a Compaction Snapshot (AutoByteus'
``retrieve(max_episodic, max_semantic)``, github.com/AutoByteus/autobyteus, autobyteus/memory/).

Episodes: the newest ``max_episodic`` (default 3, as AutoByteus), oldest first. Facts: every pinned
fact (pinned facts survive every compaction, whatever the limit), then the others by salience,
newest first among equals, up to ``max_semantic`` (default 20) in all. Pinned memory items are
shown verbatim (cut to ``max_pinned_item_tokens`` each).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_memory.kernel.snapshot_builder import MemoryBundle
from agent_memory.limits import shorten
from agent_memory.storage.traces import TraceStore
from agent_memory.tokens import TokenCounter, default_token_counter

__all__ = ["DEFAULT_MAX_EPISODIC", "DEFAULT_MAX_SEMANTIC", "Retriever"]

DEFAULT_MAX_EPISODIC = 3
"""Episodes in a compaction snapshot (AutoByteus' ``max_episodic_items``)."""

DEFAULT_MAX_SEMANTIC = 20
"""Facts in a compaction snapshot (AutoByteus' ``max_semantic_items``); pinned facts always."""

DEFAULT_MAX_PINNED_ITEM_TOKENS = 1_000
"""Most tokens of one pinned memory item shown in a snapshot."""


class Retriever:
    """Loads the memory bundle of a compaction snapshot from a trace store.

    Args:
        traces: the agent's trace store.
        max_episodic: newest episodes shown.
        max_semantic: facts shown (pinned ones count, and are never dropped).
        pinned_items: called for the pinned memory items as ``(id, text)`` pairs; ``None``: none.
        max_pinned_item_tokens: each pinned item's text is cut to this many tokens.
        counter: token counter.
    """

    def __init__(
        self,
        traces: TraceStore,
        *,
        max_episodic: int = DEFAULT_MAX_EPISODIC,
        max_semantic: int = DEFAULT_MAX_SEMANTIC,
        pinned_items: Callable[[], Sequence[tuple[str, str]]] | None = None,
        max_pinned_item_tokens: int = DEFAULT_MAX_PINNED_ITEM_TOKENS,
        counter: TokenCounter | None = None,
    ) -> None:
        self.traces = traces
        self.max_episodic = max_episodic
        self.max_semantic = max_semantic
        self.pinned_items = pinned_items
        self.max_pinned_item_tokens = max_pinned_item_tokens
        self.counter = counter or default_token_counter()

    def retrieve(self, max_episodic: int | None = None, max_semantic: int | None = None) -> MemoryBundle:
        """The bundle for the next snapshot (``None`` limits: the retriever's)."""
        n_episodic = self.max_episodic if max_episodic is None else max_episodic
        n_semantic = self.max_semantic if max_semantic is None else max_semantic
        episodic = tuple(self.traces.list_episodic(n_episodic)) if n_episodic > 0 else ()
        facts = self.traces.list_semantic()
        pinned = [fact for fact in facts if fact.pinned]
        others = [fact for fact in facts if not fact.pinned]
        ranked = sorted(enumerate(others), key=lambda pair: (-pair[1].salience, -pair[0]))
        room = max(0, n_semantic - len(pinned))
        chosen = pinned + [fact for _, fact in ranked[:room]]
        items: tuple[tuple[str, str], ...] = ()
        if self.pinned_items is not None:
            items = tuple(
                (item_id, shorten(text, self.max_pinned_item_tokens, counter=self.counter))
                for item_id, text in self.pinned_items()
            )
        return MemoryBundle(episodic=episodic, semantic=tuple(chosen), pinned_items=items)
