"""The system-prompt section that teaches a model its memory (citations and the memory tools).

A :class:`~agent_memory.agent.loop.MemoryAgent` appends it to its system prompt on every call that
offers a memory tool (:class:`~agent_memory.kernel.assembler.LLMRequestAssembler`), and only then:
while nothing is cited or hidden it costs nothing. It is counted wherever prompts are counted
(provider usage includes it; the replay's net figures count it with the memory tools). Kept
short: each word is paid on every call that carries it.
"""

from __future__ import annotations

__all__ = ["MEMORY_PROMPT"]

MEMORY_PROMPT = (
    "Memory: every tool result is saved; after one showing it is cited by its id. Read it again from "
    "memory instead of repeating the call."
)
"""The section: 29 o200k tokens. It names no tool: each memory tool's description says what it
does, and is sent only while the tool is usable (a citation makes ``retrieve`` usable; results the
prompt no longer shows make ``query`` usable). Together with ``retrieve_memory`` (154 tokens) this
is what the default offer adds to every call once it is made (183 tokens; 310 before the schemas
and this section were cut down for issue 15: under prompt caching they are the part of the offer
paid on every call)."""
