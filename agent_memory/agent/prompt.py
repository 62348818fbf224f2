"""The system-prompt section that teaches a model its memory (citations and the memory tools).

A :class:`~agent_memory.agent.loop.MemoryAgent` appends it to its system prompt on every call that
offers a memory tool (:class:`~agent_memory.llm.assembler.LLMRequestAssembler`), and only then:
while nothing is cited or hidden it costs nothing. It is counted wherever prompts are counted
(provider usage includes it; the replay's net figures count it with the memory tools). Kept
short: each word is paid on every call that carries it.
"""

from __future__ import annotations

__all__ = ["MEMORY_PROMPT"]

MEMORY_PROMPT = (
    "Memory: every tool result is saved. You see it in full once, then as a citation with its id "
    "(mem_...). retrieve_memory reads it again (only the part you need when it is long); query_memory "
    "searches all saved results and earlier turns. Do not repeat a call that memory already answered."
)
"""The section: 62 o200k tokens. Tools named here are offered once they are usable (a citation
makes retrieve usable; results outside the prompt make query usable)."""
