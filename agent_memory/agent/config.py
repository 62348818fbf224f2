"""Agent configuration (the agent settings of MemberJunction's agent-memory design,
github.com/MemberJunction/MJ: EnableMemory, ShareMemoryWithSubAgents, UseCompactionLLM,
CompactionPromptID), with the loop's own limits."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from agent_memory.agent.prompt import MEMORY_PROMPT
from agent_memory.presentation.offer import ToolOffer

__all__ = ["DEFAULT_MAX_STEPS", "AgentConfig", "MemoryMode"]

MemoryMode = Literal["shared", "isolated", "none"]
"""What memory a sub-agent gets: its parent's (``shared``: its writes are the parent's), a fork of
it (``isolated``: reads the parent's items as of the spawn, writes its own), or an empty one."""

DEFAULT_MAX_STEPS = 20
"""LLM calls one :meth:`MemoryAgent.run` makes at most before it stops (``stopped="max_steps"``)."""


class AgentConfig(BaseModel):
    """How a :class:`~agent_memory.agent.loop.MemoryAgent` runs. Immutable."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    enable_memory: bool = True
    """MemberJunction's ``EnableMemory``: tool results are stored and cited, the memory tools offered
    and taught. ``False``: results stay inline in the conversation (the kernel still keeps it inside
    the budget), no memory tools, no memory prompt."""
    share_memory_with_sub_agents: bool = True
    """MemberJunction's ``ShareMemoryWithSubAgents``: the default memory mode of
    :meth:`MemoryAgent.spawn` is ``shared`` when ``True``, ``isolated`` when ``False``."""
    allow_sub_agents: bool = False
    """Offer the model a ``spawn_agent`` tool: it delegates a task to a sub-agent (same model and
    tools) with shared, isolated or no memory and gets one result back (isolated findings are
    merged into this agent's memory). The developer's :meth:`MemoryAgent.spawn` works either way."""
    use_compaction_llm: bool = False
    """MemberJunction's ``UseCompactionLLM``: compactions are summarized by an LLM (the agent's
    ``compaction_llm``, with the extractive summarizer as fallback); ``False``: extractive."""
    compaction_prompt: str | None = None
    """MemberJunction's ``CompactionPromptID``: the LLM summarizer's prompt; ``None``: the built-in
    one."""
    memory_prompt: str | None = MEMORY_PROMPT
    """The system-prompt section that teaches the memory, appended to the system prompt of the
    calls that offer a memory tool (``None``: none)."""
    tool_offer: ToolOffer = ToolOffer()
    """When each memory tool is offered (``ToolOffer(always={"store", "forget", "pin"})`` to let the
    model keep notes, delete and pin)."""
    tool_form: Literal["separate", "single"] = "separate"
    """The memory tools as separate tools or one ``memory`` tool with an ``op``."""
    max_steps: int = Field(default=DEFAULT_MAX_STEPS, ge=1, le=1_000)
    """LLM calls per :meth:`MemoryAgent.run` at most."""
    max_output_tokens: int | None = Field(default=None, ge=1)
    """``max_tokens`` of each call; ``None``: the model's default."""
    llm_timeout_s: float | None = Field(default=None, gt=0)
    """Seconds one LLM call may take; ``None``: the chat model's own timeout."""
    tail_turns: int = Field(default=4, ge=1)
    """Raw turns kept by a compaction (AutoByteus' compaction policy keeps the last 4-6)."""
