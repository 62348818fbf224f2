"""Marks on memory the kernel keeps (the ``MEMORY_MARK_CRITICAL`` and ``MEMORY_FORGET`` events of
team9's agent framework, github.com/team9ai/team9, apps/server/libs/agent-framework/ at b753b7c0):
pinned items and facts, which every Compaction Snapshot shows verbatim, and forgetting, which
takes an item out of the memory and out of the conversation. A part of
:class:`~agent_memory.kernel.manager.MemoryManager` (its base class), in a module of its own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

from agent_memory.errors import ItemNotFoundError
from agent_memory.ids import validate_memory_id
from agent_memory.kernel.transcript import rerender_results
from agent_memory.kernel.working_context import WorkingContextSnapshot
from agent_memory.memory import AgentMemory
from agent_memory.models.traces import SemanticItem, semantic_id_for
from agent_memory.presentation.context import FORGOTTEN_NOTE
from agent_memory.storage.traces import TraceStore

__all__ = ["MemoryMarks"]


class MemoryMarks:
    """Pins and forgetting, over the manager's memory, trace store and working context."""

    memory: AgentMemory
    traces: TraceStore
    context: WorkingContextSnapshot
    _lock: threading.RLock

    # -- pins -----------------------------------------------------------------------------------
    def pin_item(self, item_id: str) -> None:
        """Show a memory item verbatim (cut to 1,000 tokens) in every compaction snapshot.

        Raises:
            InvalidIdError, ItemNotFoundError: for a bad or unknown id.
        """
        if validate_memory_id(item_id) not in self.memory:
            raise ItemNotFoundError(f"no memory item {item_id!r}", item_id=item_id)
        with self._lock:
            pins = self.context.refresh_pins()
            if item_id not in pins:
                self.context.update(pinned_items=(*pins, item_id))

    def unpin_item(self, item_id: str) -> bool:
        """Stop showing a pinned item in compaction snapshots; ``False`` if it was not pinned."""
        with self._lock:
            pins = self.context.refresh_pins()
            if item_id not in pins:
                return False
            self.context.update(pinned_items=tuple(pin for pin in pins if pin != item_id))
            return True

    @property
    def pinned_items(self) -> tuple[str, ...]:
        """Ids of the memory items pinned into every compaction snapshot, in pinning order (also
        those another process pinned on this agent since)."""
        return self.context.refresh_pins()

    def unpin_fact(self, fact_id: str) -> None:
        """Let a pinned fact be treated as any other (ranked, possibly left out of a snapshot).

        Raises:
            ItemNotFoundError: if no fact has this id.
        """
        self.traces.set_pinned(fact_id, False)

    # -- forget ---------------------------------------------------------------------------------
    def forget(self, item_id: str) -> bool:
        """Forget a memory item everywhere (team9's ``MEMORY_FORGET``): it leaves the memory
        (record, index, content unless shared: :meth:`AgentMemory.forget`), the previews of the
        conversation's traces that held it are redacted, and so are the compacted turns stored in
        memory that quoted them (:meth:`AgentMemory.rewrite`), it is unpinned, and every prompt
        from now on shows :data:`~agent_memory.presentation.context.FORGOTTEN_NOTE` where the
        result was. A summary an LLM summarizer wrote from the preview is not rewritten.
        Idempotent (a retried forget completes an interrupted one).

        Returns:
            ``True`` if the item was still stored.

        Raises:
            InvalidIdError: for a malformed id. StoreError: if a rewrite fails.
        """
        with self._lock:
            removed = self.memory.forget(item_id)
            self.traces.redact_result(item_id, FORGOTTEN_NOTE.format(id=item_id))
            self._redact_compacted_turns(item_id)
            self.unpin_item(item_id)
            return removed

    def _redact_compacted_turns(self, item_id: str) -> int:
        """Rewrite the compacted-turn items (``conversation_turn``, stored for search and for
        ``retrieve_memory(id="turn_…")``) that quote the forgotten result's preview, from the
        redacted traces. Returns how many items were rewritten."""
        traces = [t for t in (*self.traces.read_archive(), *self.traces.list_raw()) if t.tool_result_ref == item_id]
        turns = {trace.turn_id for trace in traces}
        changed = 0
        for record in self.memory.own_records() if turns else ():
            turn_ids = record.metadata.extra.get("turn_ids")
            if record.type != "conversation_turn" or not isinstance(turn_ids, list) or turns.isdisjoint(turn_ids):
                continue
            text = self.memory.get(record.id).content
            redacted = rerender_results(text, traces) if isinstance(text, str) else text
            if redacted != text:
                self.memory.rewrite(record.id, redacted)
                changed += 1
        return changed

    def pin_fact(self, fact: str, *, tags: Sequence[str] = ()) -> str:
        """Keep a fact in every compaction snapshot; returns its id."""
        stored = self.traces.add_semantic([SemanticItem(id=semantic_id_for(fact), fact=fact, tags=tuple(tags),
                                                       confidence=1.0, salience=1.0, pinned=True)])
        return stored[0].id

    def _pinned_item_texts(self) -> list[tuple[str, str]]:
        texts = []
        for item_id in self.context.refresh_pins():
            try:
                texts.append((item_id, self.memory.retrieve(item_id, max_tokens=1_200).content))
            except Exception:  # noqa: BLE001 - a forgotten item must not break a compaction
                continue
        return texts
