"""The Compaction Snapshot: the new base of the working context after a compaction (AutoByteus'
compaction snapshot, github.com/AutoByteus/autobyteus, autobyteus/memory/).

Order: the system prompt (verbatim), the memory bundle, the raw tail of the last turns (oldest
first), and the current turn. The bundle is one system message in AutoByteus'
deterministic format::

    [MEMORY:EPISODIC]
    1) turn_0001-turn_0012: ...
    [MEMORY:SEMANTIC]
    - ...
    [MEMORY:PINNED]
    - ...
    [MEMORY:ACCESS]
    ...how to reach the originals...

The raw tail and the current turn stay *native messages* (assistant tool calls followed by their
tool results), not AutoByteus' text rendering: tool pairs stay intact by construction, and tool
results keep their memory reference, so the presentation policy shows them as citations. What is
always kept verbatim: the system prompt, pinned facts and pinned items, the latest user message.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from agent_memory.models.messages import Message
from agent_memory.models.traces import EpisodicItem, SemanticItem

__all__ = ["ACCESS_NOTE", "CompactionSnapshotBuilder", "MemoryBundle", "render_bundle"]

ACCESS_NOTE = (
    "Earlier turns were compacted into the summaries above; nothing was deleted. query_memory "
    "searches them (and every stored result) and names the turn ids of each hit; "
    'retrieve_memory(id="turn_0012") returns a turn verbatim.'
)
"""How the snapshot tells the model to reach the originals of compacted turns."""


@dataclass(frozen=True)
class MemoryBundle:
    """What the retriever hands to the snapshot builder (AutoByteus' ``MemoryBundle``)."""

    episodic: tuple[EpisodicItem, ...] = ()
    """The newest episodes, oldest first."""
    semantic: tuple[SemanticItem, ...] = ()
    """The facts to show: pinned ones first, then by salience."""
    pinned_items: tuple[tuple[str, str], ...] = field(default=())
    """Pinned memory items as ``(memory id, text)``, shown verbatim."""

    @property
    def empty(self) -> bool:
        return not (self.episodic or self.semantic or self.pinned_items)


def _episode_line(n: int, episode: EpisodicItem) -> str:
    turns = episode.turn_ids
    span = turns[0] if len(turns) == 1 else f"{turns[0]}-{turns[-1]}"
    parts = [f"{n}) {span}: {episode.summary.strip()}"]
    for label, values in (("Done", episode.done), ("Decisions", episode.decisions),
                          ("Constraints", episode.constraints), ("Open questions", episode.open_questions),
                          ("Next steps", episode.next_steps)):
        if values:
            parts.append(f"   {label}: " + "; ".join(values))
    return "\n".join(parts)


def render_bundle(bundle: MemoryBundle, *, access_note: str = ACCESS_NOTE) -> str:
    """The bundle in AutoByteus' deterministic format (same bundle, same text)."""
    sections: list[str] = []
    if bundle.episodic:
        lines = [_episode_line(n, episode) for n, episode in enumerate(bundle.episodic, 1)]
        sections.append("[MEMORY:EPISODIC]\n" + "\n".join(lines))
    if bundle.semantic:
        lines = [f"- {fact.fact}" + (" (pinned)" if fact.pinned else "") for fact in bundle.semantic]
        sections.append("[MEMORY:SEMANTIC]\n" + "\n".join(lines))
    if bundle.pinned_items:
        lines = [f"- [{item_id}] {text}" for item_id, text in bundle.pinned_items]
        sections.append("[MEMORY:PINNED]\n" + "\n".join(lines))
    if access_note:
        sections.append("[MEMORY:ACCESS]\n" + access_note)
    return "\n\n".join(sections)


class CompactionSnapshotBuilder:
    """Builds the Compaction Snapshot (AutoByteus' ``build_snapshot(system_prompt, bundle, raw_tail)``).

    Args:
        access_note: the text that tells the model how to reach compacted turns.
    """

    def __init__(self, *, access_note: str = ACCESS_NOTE) -> None:
        self.access_note = access_note

    def build(self, system_prompt: str | None, bundle: MemoryBundle, tail: Sequence[Message],
              current: Sequence[Message] = ()) -> list[Message]:
        """The snapshot's messages: system prompt, bundle, tail, current turn.

        Args:
            system_prompt: the agent's system prompt, kept verbatim (``None``: none).
            bundle: episodes, facts and pinned items.
            tail: the raw tail's messages, chronological, whole turns (tool pairs intact).
            current: the current turn's messages (its user message first), verbatim.
        """
        out: list[Message] = []
        if system_prompt:
            out.append(Message(role="system", content=system_prompt))
        out.append(Message(role="system", content=render_bundle(bundle, access_note=self.access_note)))
        out.extend(tail)
        out.extend(current)
        return out
