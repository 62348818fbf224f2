"""Language models behind one small Protocol: :class:`LLMClient` and its OpenAI-compatible
implementation :class:`OpenAIChatClient` (used by the LLM compactor,
:mod:`agent_memory.presentation.llm_compactor`)."""

from agent_memory.llm.client import DEFAULT_LLM_TIMEOUT_S, LLMClient, LLMResponse, OpenAIChatClient

__all__ = ["DEFAULT_LLM_TIMEOUT_S", "LLMClient", "LLMResponse", "OpenAIChatClient"]
