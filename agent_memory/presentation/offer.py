"""Which memory tools the model is offered, and when (every tool definition is paid on every call).

Memory tools cost prompt tokens on every LLM call they are sent with: measured on the public
tau-bench airline runs (o200k_base, the agent's own 14 tool definitions counted in every prompt),
memory tools of 2,182 tokens offered from the first call turn the −15.1% that citations save into
+25.7%, and 600 tokens of them leave −3.9%. So a tool is offered when the model can use it:

- ``retrieve``: from the call in which the prompt first cites a result
  (:attr:`~agent_memory.presentation.context.ContextBuilder.citing`): a citation names the call that
  brings its result back, and that call must work.
- ``query``: once memory holds items the prompt neither shows nor cites (results compacted out of
  the conversation, a memory shared by another agent, a snapshot): searching is then the only way
  to find them. While every stored result is cited in the prompt, the citations are the index.
- ``store``: only when the developer asks for it (``always``): whether an agent should keep notes
  outside its context is the developer's choice, not something the prompt shows.
- ``compact``: while the conversation is under memory pressure (the soft threshold of the token
  budget, :mod:`agent_memory.kernel.budget`): the agent may compact at a task break.
- ``forget`` and ``pin``: only when the developer asks for them (``always``): deleting and
  pinning are the developer's policy, not something the prompt shows a need for.

``ToolOffer(mode="all")`` offers every memory tool on every call instead.

The tools themselves live in the top-level package ``actions`` (which imports ``agent_memory``,
never the reverse); :func:`load_toolkit` finds the toolkit through the entry-point group
``agent_memory.toolkit``, as compaction plugins are found through theirs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, JsonValue

from agent_memory.errors import ConfigurationError
from agent_memory.memory import AgentMemory
from agent_memory.models.messages import Message
from agent_memory.prompt_tokens import tool_tokens

__all__ = [
    "TOOLKIT_ENTRY_POINT_GROUP",
    "Capability",
    "MemoryTools",
    "OfferState",
    "ToolOffer",
    "ToolResult",
    "load_toolkit",
    "offer_cost_tokens",
    "with_memory_prompt",
]

TOOLKIT_ENTRY_POINT_GROUP = "agent_memory.toolkit"
"""Entry-point group naming the memory toolkit class (the built-in one: ``actions.toolkit:MemoryToolkit``)."""

Capability = Literal["store", "retrieve", "query", "compact", "forget", "pin"]
"""What a memory tool lets the model do (Store in Memory, Retrieve from Memory, Query Memory,
compact the conversation, forget an item, pin an item or fact through compactions)."""

CAPABILITIES: tuple[Capability, ...] = ("store", "retrieve", "query", "compact", "forget", "pin")


@dataclass(frozen=True, slots=True)
class OfferState:
    """What the next prompt shows, as far as offering memory tools is concerned."""

    citing: bool = False
    """The prompt cites at least one stored result (or shows one capped, with its citation)."""
    hidden_items: bool = False
    """Memory holds items the prompt neither shows nor cites."""
    under_pressure: bool = False
    """The last prompt passed the soft threshold of the token budget."""


class ToolOffer(BaseModel):
    """When each memory tool is offered. Immutable.

    ``mode="as_needed"`` (default) follows the module docstring's rules; ``mode="all"`` offers
    every tool on every call. ``always`` names capabilities offered on every call in either mode
    (e.g. ``{"store"}`` for an agent that keeps notes).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: Literal["as_needed", "all"] = "as_needed"
    """``as_needed``: a tool from the call it becomes usable; ``all``: every tool, every call."""
    always: frozenset[Capability] = frozenset()
    """Capabilities offered on every call, whatever the state."""

    def needed(self, state: OfferState) -> frozenset[Capability]:
        """The capabilities to offer with a prompt in ``state``."""
        if self.mode == "all":
            return frozenset(CAPABILITIES)
        wanted = set(self.always)
        if state.citing:
            wanted.add("retrieve")
        if state.hidden_items:
            wanted.add("query")
        if state.under_pressure:
            wanted.add("compact")
        return frozenset(wanted)


class ToolResult(BaseModel):
    """What a memory tool call gives back (every memory action of ``actions``, the MCP server, the
    framework adapters).

    Send ``content`` to the model as the tool's output (with Anthropic, set ``is_error`` to
    ``not ok``); keep ``data`` for the program.
    """

    model_config = ConfigDict(frozen=True)

    ok: bool
    """``True`` when the call did what it was asked (an empty search result is still ``ok``)."""
    content: str
    """The text the model reads: the answer, or what went wrong and what to do next."""
    data: dict[str, JsonValue] | None = None
    """The structured result (JSON-able), or ``None`` for an error."""
    error: str | None = None
    """``None`` on success; else a short code: ``invalid_arguments`` (bad JSON, missing, unknown
    or wrongly typed arguments), ``invalid_id`` (not of the form ``mem_`` + 12 hex digits),
    ``not_found`` (no item with that id), ``transform_error`` (the transform does not apply to the
    item, or the page is past the end) or ``unknown_tool``."""

    @classmethod
    def success(cls, content: str, data: Mapping[str, Any] | None = None) -> ToolResult:
        """An ``ok`` result."""
        return cls(ok=True, content=content, data=dict(data) if data is not None else None)

    @classmethod
    def failure(cls, error: str, message: str) -> ToolResult:
        """A result marked as an error: ``content`` is ``"Error: " + message``."""
        return cls(ok=False, content=f"Error: {message}", error=error)


@runtime_checkable
class MemoryTools(Protocol):
    """The memory toolkit as ``agent_memory`` uses it (the replay, the agent loop): tool
    definitions for a state, and a dispatcher for the calls that come back."""

    offer: ToolOffer

    def tool_definitions(self, state: OfferState | None = None) -> list[dict[str, Any]]:
        """Definitions of the tools to send with a prompt in ``state`` (``None``: every tool)."""
        ...

    def anthropic_tool_definitions(self, state: OfferState | None = None) -> list[dict[str, Any]]:
        """The same, for the Anthropic Messages API."""
        ...

    def dispatch(self, name: str, arguments: str | Mapping[str, Any] | None) -> ToolResult:
        """Run one tool call of the model; never raises for the model's mistakes."""
        ...


def load_toolkit(memory: AgentMemory, *, group: str = TOOLKIT_ENTRY_POINT_GROUP, **options: Any) -> MemoryTools:
    """The installed memory toolkit bound to ``memory`` (``options`` go to its constructor, e.g.
    ``offer=ToolOffer(...)``, ``form="single"``).

    Raises:
        ConfigurationError: if no toolkit is installed under ``group`` (install agent-memory with
            its ``actions`` package), or the entry point does not load.
    """
    points = sorted(entry_points(group=group), key=lambda ep: ep.name)
    if not points:
        raise ConfigurationError(f"no memory toolkit installed under the entry-point group {group!r}")
    chosen = next((point for point in points if point.name == "default"), points[0])
    try:
        factory = chosen.load()
    except Exception as exc:  # noqa: BLE001 - an import error of the toolkit's package
        raise ConfigurationError(f"the memory toolkit {chosen.value} failed to load: {exc}") from exc
    toolkit = factory(memory, **options)
    if not isinstance(toolkit, MemoryTools):
        raise ConfigurationError(f"{chosen.value} does not implement MemoryTools")
    return toolkit


def offer_cost_tokens(toolkit: MemoryTools, own_tool_definitions: Sequence[Mapping[str, Any]],
                      count: Callable[[str], int], memory_prompt: str | None) -> tuple[int, int]:
    """What citing adds to every call, and what the agent's own tools cost, in tokens:
    ``(offer cost, own tools' tokens)`` for a :class:`~agent_memory.presentation.context.ContextBuilder`'s
    ``offer_cost_tokens`` and ``fixed_tokens``. The offer cost is the tools list grown by the tools
    citing needs (``retrieve_memory``, as the toolkit offers it) plus the memory prompt; 0 when the
    toolkit offers every tool on every call anyway (``ToolOffer(mode="all")``). Tools are counted
    as sent: the list as JSON (:func:`~agent_memory.kernel.budget.tool_tokens`)."""
    own = [dict(tool) for tool in own_tool_definitions]
    own_tokens = tool_tokens(own, count)
    if toolkit.offer.mode == "all":
        return 0, own_tokens
    citing = toolkit.tool_definitions(OfferState(citing=True))
    cost = tool_tokens(own + citing, count) - own_tokens + (count(memory_prompt) if memory_prompt else 0)
    return max(0, cost), own_tokens


def with_memory_prompt(messages: list[Message], memory_prompt: str) -> list[Message]:
    """``messages`` with ``memory_prompt`` appended to the leading system message (a system
    message of its own when there is none)."""
    if messages and messages[0].role == "system":
        first = messages[0]
        return [first.model_copy(update={"content": f"{first.content or ''}\n\n{memory_prompt}".strip()}), *messages[1:]]
    return [Message(role="system", content=memory_prompt), *messages]
